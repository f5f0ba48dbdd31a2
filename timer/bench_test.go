package timer

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// The benchmarks compare, in one run, START_TIMER + STOP_TIMER on the wheel with
// the Go runtime's timers, while `pending` other timers wait (gVisor's clock,
// in the same shape, is in cmd/tcpwheel/internal/tcpipclock: the library does
// not import gVisor; `make bench` runs both). B/pending is the heap each
// waiting timer costs.

var pendingSizes = []struct {
	name string
	n    int
}{{"1", 1}, {"10k", 10_000}, {"1M", 1_000_000}}

const benchRTO = 200 * time.Millisecond // a typical deadline: TCP's minimum RTO

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func BenchmarkStartStop(b *testing.B) {
	for _, p := range pendingSizes {
		b.Run("pending="+p.name+"/impl=wheel", func(b *testing.B) {
			before := heapInUse()
			w, err := New(Config{Clock: NewManualClock(0)})
			if err != nil {
				b.Fatal(err)
			}
			bg := make([]Entry, p.n)
			fn := func() {}
			for i := range bg {
				bg[i].Init(fn)
				// Spread over seconds to hours, as connections' timers are.
				if err := w.Start(&bg[i], time.Duration(i%3600+1)*time.Second+time.Duration(i)*time.Microsecond); err != nil {
					b.Fatal(err)
				}
			}
			perPending := float64(heapInUse()-before) / float64(p.n)
			var e Entry
			e.Init(fn)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w.Start(&e, benchRTO+time.Duration(i&1023)*time.Microsecond)
				w.Stop(&e)
			}
			b.StopTimer()
			b.ReportMetric(perPending, "B/pending")
			runtime.KeepAlive(bg)
		})
		b.Run("pending="+p.name+"/impl=afterfunc", func(b *testing.B) {
			before := heapInUse()
			bg := make([]*time.Timer, p.n)
			fn := func() {}
			for i := range bg {
				bg[i] = time.AfterFunc(time.Duration(i%3600+1)*time.Second+time.Hour, fn)
			}
			perPending := float64(heapInUse()-before) / float64(p.n)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t := time.AfterFunc(benchRTO+time.Duration(i&1023)*time.Microsecond, fn)
				t.Stop()
			}
			b.StopTimer()
			b.ReportMetric(perPending, "B/pending")
			for _, t := range bg {
				t.Stop()
			}
		})
		b.Run("pending="+p.name+"/impl=timerreset", func(b *testing.B) {
			before := heapInUse()
			bg := make([]*time.Timer, p.n)
			fn := func() {}
			for i := range bg {
				bg[i] = time.AfterFunc(time.Duration(i%3600+1)*time.Second+time.Hour, fn)
			}
			perPending := float64(heapInUse()-before) / float64(p.n)
			t := time.AfterFunc(time.Hour, fn)
			t.Stop()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t.Reset(benchRTO + time.Duration(i&1023)*time.Microsecond)
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

// BenchmarkAdvance measures PER_TICK_BOOKKEEPING when nothing is due: the cost of
// one Advance that moves the wheel by `ticks` ticks while `pending` timers wait
// far in the future. It should depend on neither.
func BenchmarkAdvance(b *testing.B) {
	for _, p := range []struct {
		name string
		n    int
	}{{"0", 0}, {"1k", 1000}, {"1M", 1_000_000}} {
		for _, ticks := range []int{1, 1000} {
			b.Run(fmt.Sprintf("pending=%s/ticks=%d", p.name, ticks), func(b *testing.B) {
				clk := NewManualClock(0)
				w, err := New(Config{Clock: clk})
				if err != nil {
					b.Fatal(err)
				}
				bg := make([]Entry, p.n)
				fn := func() { b.Fatal("a timer fired") }
				for i := range bg {
					bg[i].Init(fn)
					// Beyond anything the loop reaches: 10^8 advances of 1000 ticks
					// are 10^7 s; start at 2^28 s.
					w.Start(&bg[i], time.Duration(1<<28+i)*time.Second)
				}
				step := time.Duration(ticks) * w.Tick()
				now := time.Duration(0)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					now += step
					w.Advance(now)
				}
				b.StopTimer()
				runtime.KeepAlive(bg)
			})
		}
	}
}

// BenchmarkExpire measures EXPIRY_PROCESSING: timers started at deadlines spread
// over a 64-tick window and fired by Advance, one timer per op (Start included).
func BenchmarkExpire(b *testing.B) {
	for _, level := range []struct {
		name   string
		spread int // deadlines spread over this many ticks: level 0, or cascading from level 2
	}{{"level0", 63}, {"cascade", 100_000}} {
		b.Run(level.name, func(b *testing.B) {
			clk := NewManualClock(0)
			w, err := New(Config{Clock: clk})
			if err != nil {
				b.Fatal(err)
			}
			entries := make([]Entry, 4096)
			fired := 0
			for i := range entries {
				entries[i].Init(func() { fired++ })
			}
			tick := w.Tick()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				e := &entries[i&4095]
				w.Start(e, time.Duration(1+i%level.spread)*tick)
				if i&4095 == 4095 {
					w.Advance(clk.Advance(time.Duration(level.spread) * tick))
				}
			}
			w.Advance(clk.Advance(time.Duration(level.spread+1) * tick))
			b.StopTimer()
			if fired != b.N {
				b.Fatalf("fired %d of %d", fired, b.N)
			}
			b.ReportMetric(float64(fired)/b.Elapsed().Seconds(), "fires/s")
		})
	}
}
