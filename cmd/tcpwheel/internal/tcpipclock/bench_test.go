package tcpipclock

import (
	"runtime"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
)

// BenchmarkStartStop is timer's BenchmarkStartStop for gVisor's clock: the
// same pending sizes, deadlines and names (impl=gvisor), so that `make bench`,
// which runs both in one go test, prints them side by side. It lives here
// because the library (timer/) does not import gVisor.
func BenchmarkStartStop(b *testing.B) {
	const benchRTO = 200 * time.Millisecond // as in timer's: TCP's minimum RTO
	for _, p := range []struct {
		name string
		n    int
	}{{"1", 1}, {"10k", 10_000}, {"1M", 1_000_000}} {
		b.Run("pending="+p.name+"/impl=gvisor", func(b *testing.B) {
			clk := tcpip.NewStdClock()
			before := heapInUse()
			bg := make([]tcpip.Timer, p.n)
			fn := func() {}
			for i := range bg {
				bg[i] = clk.AfterFunc(time.Duration(i%3600+1)*time.Second+time.Hour, fn)
			}
			perPending := float64(heapInUse()-before) / float64(p.n)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t := clk.AfterFunc(benchRTO+time.Duration(i&1023)*time.Microsecond, fn)
				t.Stop()
			}
			b.StopTimer()
			b.ReportMetric(perPending, "B/pending")
			for _, t := range bg {
				t.Stop()
			}
		})
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
