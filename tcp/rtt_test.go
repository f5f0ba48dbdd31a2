package tcp

import (
	"testing"
	"time"
)

const ms = time.Millisecond

func TestRTTEstimator(t *testing.T) {
	g := 100 * time.Microsecond
	newR := func() rttEstimator { return newRTTEstimator(time.Second, 200*ms, 120*time.Second, g) }
	t.Run("initial RTO is 1s (2.1)", func(t *testing.T) {
		r := newR()
		if got := r.rto(); got != time.Second {
			t.Fatalf("got %v, want 1s", got)
		}
	})
	t.Run("first sample (2.2)", func(t *testing.T) {
		r := newR()
		r.sample(100 * ms)
		if r.srtt != 100*ms || r.rttvar != 50*ms || r.rto() != 300*ms {
			t.Fatalf("got srtt %v rttvar %v rto %v, want 100ms 50ms 300ms", r.srtt, r.rttvar, r.rto())
		}
	})
	t.Run("second sample (2.3)", func(t *testing.T) {
		r := newR()
		r.sample(100 * ms)
		r.sample(200 * ms)
		// RTTVAR = 3/4*50 + 1/4*|100-200| = 62.5; SRTT = 7/8*100 + 1/8*200 = 112.5
		if r.rttvar != 62500*time.Microsecond || r.srtt != 112500*time.Microsecond {
			t.Fatalf("got srtt %v rttvar %v, want 112.5ms 62.5ms", r.srtt, r.rttvar)
		}
		if want := 112500*time.Microsecond + 4*62500*time.Microsecond; r.rto() != want {
			t.Fatalf("rto: got %v, want %v", r.rto(), want)
		}
	})
	t.Run("min RTO (2.4)", func(t *testing.T) {
		r := newR()
		r.sample(ms)
		if r.rto() != 200*ms {
			t.Fatalf("got %v, want 200ms", r.rto())
		}
	})
	t.Run("G bounds K*RTTVAR", func(t *testing.T) {
		r := newRTTEstimator(time.Second, 0+time.Nanosecond, time.Minute, 10*ms)
		for range 50 {
			r.sample(50 * ms)
		}
		if r.rto() != 60*ms {
			t.Fatalf("got %v, want SRTT+G = 60ms", r.rto())
		}
	})
	t.Run("backoff doubles, capped (5.5)", func(t *testing.T) {
		r := newR()
		want := []time.Duration{2, 4, 8, 16, 32, 64, 120, 120}
		for i, w := range want {
			r.backOff()
			if r.rto() != w*time.Second {
				t.Fatalf("after %d backoffs: got %v, want %v", i+1, r.rto(), w*time.Second)
			}
		}
	})
	t.Run("fresh sample undoes backoff", func(t *testing.T) {
		r := newR()
		r.sample(100 * ms)
		r.backOff()
		r.backOff()
		if r.rto() != 1200*ms || r.backoff != 2 {
			t.Fatalf("got %v backoff %d, want 1.2s 2", r.rto(), r.backoff)
		}
		r.sample(100 * ms)
		if r.backoff != 0 || r.rto() >= 300*ms {
			t.Fatalf("after sample: got %v backoff %d, want < 300ms and 0", r.rto(), r.backoff)
		}
	})
	t.Run("3s after SYN retransmit without sample (5.7)", func(t *testing.T) {
		r := newR()
		r.backOff()
		r.synFallback()
		if r.rto() != 3*time.Second {
			t.Fatalf("got %v, want 3s", r.rto())
		}
		r2 := newR()
		r2.sample(100 * ms)
		r2.synFallback()
		if r2.rto() != 300*ms {
			t.Fatalf("with a sample: got %v, want 300ms", r2.rto())
		}
	})
}
