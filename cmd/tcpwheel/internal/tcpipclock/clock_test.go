package tcpipclock

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/timer"
	"gvisor.dev/gvisor/pkg/tcpip"
)

// waitTimeout bounds waits for things that should take milliseconds. The tests run
// on the real clock: they check orderings and generous bounds, never tight timing.
const waitTimeout = 5 * time.Second

func newWheelClock(cfg timer.Config) func(t *testing.T) tcpip.Clock {
	return func(t *testing.T) tcpip.Clock {
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
}

func TestClockContract(t *testing.T) {
	t.Run("std", func(t *testing.T) {
		testClockContract(t, func(*testing.T) tcpip.Clock { return tcpip.NewStdClock() })
	})
	t.Run("wheel", func(t *testing.T) { testClockContract(t, newWheelClock(timer.Config{})) })
	t.Run("wheel/tick=1ms", func(t *testing.T) {
		testClockContract(t, newWheelClock(timer.Config{Tick: time.Millisecond}))
	})
}

func recvWithin[T any](t *testing.T, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("nothing received after %v", waitTimeout)
		panic("unreachable")
	}
}

// expectNothing fails if c receives within d.
func expectNothing[T any](t *testing.T, c <-chan T, d time.Duration) {
	t.Helper()
	select {
	case <-c:
		t.Fatal("timer fired, want it stopped")
	case <-time.After(d):
	}
}

// testClockContract checks the semantics gVisor relies on, for any tcpip.Clock.
func testClockContract(t *testing.T, newClock func(t *testing.T) tcpip.Clock) {
	t.Run("AfterFuncFiresAfterD", func(t *testing.T) {
		c := newClock(t)
		for _, d := range []time.Duration{0, time.Microsecond, 3 * time.Millisecond, 10 * time.Millisecond} {
			elapsed := make(chan time.Duration, 1)
			start := time.Now()
			c.AfterFunc(d, func() { elapsed <- time.Since(start) })
			if got := recvWithin(t, elapsed); got < d {
				t.Errorf("AfterFunc(%v) fired after %v", d, got)
			}
		}
	})

	t.Run("StopBeforeFire", func(t *testing.T) {
		c := newClock(t)
		fired := make(chan struct{}, 1)
		tm := c.AfterFunc(20*time.Millisecond, func() { fired <- struct{}{} })
		if !tm.Stop() {
			t.Fatal("Stop of an armed timer returned false")
		}
		if tm.Stop() {
			t.Error("second Stop returned true")
		}
		expectNothing(t, fired, 60*time.Millisecond)
	})

	t.Run("StopAfterFire", func(t *testing.T) {
		c := newClock(t)
		fired := make(chan struct{}, 1)
		tm := c.AfterFunc(time.Millisecond, func() { fired <- struct{}{} })
		recvWithin(t, fired)
		if tm.Stop() {
			t.Error("Stop after fire returned true")
		}
	})

	t.Run("ResetAfterFire", func(t *testing.T) {
		c := newClock(t)
		fired := make(chan struct{}, 2)
		tm := c.AfterFunc(time.Millisecond, func() { fired <- struct{}{} })
		recvWithin(t, fired)
		tm.Reset(time.Millisecond)
		recvWithin(t, fired)
	})

	t.Run("ResetAfterStop", func(t *testing.T) {
		c := newClock(t)
		fired := make(chan struct{}, 1)
		tm := c.AfterFunc(time.Hour, func() { fired <- struct{}{} })
		tm.Stop()
		tm.Reset(time.Millisecond)
		recvWithin(t, fired)
	})

	t.Run("ResetMovesArmedEarlier", func(t *testing.T) {
		c := newClock(t)
		fired := make(chan time.Duration, 1)
		start := time.Now()
		tm := c.AfterFunc(time.Hour, func() { fired <- time.Since(start) })
		time.Sleep(5 * time.Millisecond) // let a sleeping loop sleep on the hour
		tm.Reset(2 * time.Millisecond)
		if got := recvWithin(t, fired); got < 2*time.Millisecond {
			t.Errorf("fired %v after the start, before the reset's 2 ms", got)
		}
		if tm.Stop() {
			t.Error("Stop after fire returned true")
		}
	})

	t.Run("ResetMovesArmedLater", func(t *testing.T) {
		c := newClock(t)
		fired := make(chan struct{}, 1)
		tm := c.AfterFunc(10*time.Millisecond, func() { fired <- struct{}{} })
		tm.Reset(time.Hour)
		expectNothing(t, fired, 50*time.Millisecond)
		if !tm.Stop() {
			t.Error("Stop of the moved timer returned false")
		}
	})

	t.Run("CallbackUsesClockAndTimer", func(t *testing.T) {
		c := newClock(t)
		self := make(chan tcpip.Timer, 1)
		fired := make(chan int, 3)
		var runs atomic.Int32
		tm := c.AfterFunc(time.Millisecond, func() {
			n := int(runs.Add(1))
			fired <- n
			if n == 1 {
				tm := <-self
				if tm.Stop() {
					t.Error("Stop from its own callback returned true")
				}
				tm.Reset(time.Millisecond)
				c.AfterFunc(time.Millisecond, func() { fired <- 100 })
			}
		})
		self <- tm
		got := map[int]bool{}
		for range 3 {
			got[recvWithin(t, fired)] = true
		}
		if !got[1] || !got[2] || !got[100] {
			t.Errorf("got runs %v, want 1, 2 and the nested timer's 100", got)
		}
	})

	t.Run("BlockingCallbackDelaysNoOther", func(t *testing.T) {
		c := newClock(t)
		release := make(chan struct{})
		blocked := make(chan struct{})
		c.AfterFunc(time.Millisecond, func() {
			close(blocked)
			<-release
		})
		recvWithin(t, blocked)
		fired := make(chan struct{})
		c.AfterFunc(time.Millisecond, func() { close(fired) })
		recvWithin(t, fired) // while the first callback still blocks
		close(release)
	})

	t.Run("NowMonotonic", func(t *testing.T) {
		c := newClock(t)
		prev := c.NowMonotonic()
		fine := false
		for i := 0; i < 1_000_000 && !(fine && i >= 1000); i++ {
			now := c.NowMonotonic()
			if now.Before(prev) {
				t.Fatalf("NowMonotonic went back from %v to %v", prev, now)
			}
			if d := now.Sub(prev); d > 0 && d < time.Microsecond {
				fine = true
			}
			prev = now
		}
		if !fine {
			t.Error("no two NowMonotonic readings differ by less than 1µs: resolution too coarse")
		}
		start := c.NowMonotonic()
		time.Sleep(2 * time.Millisecond)
		if d := c.NowMonotonic().Sub(start); d < 2*time.Millisecond {
			t.Errorf("NowMonotonic advanced %v over a 2 ms sleep", d)
		}
	})

	t.Run("Now", func(t *testing.T) {
		c := newClock(t)
		if d := time.Until(c.Now()); d < -time.Second || d > time.Second {
			t.Errorf("Now is %v away from time.Now()", d)
		}
	})
}

func TestNewRejectsMaxPending(t *testing.T) {
	if _, err := New(timer.Config{MaxPending: 10}); !errors.Is(err, timer.ErrConfig) {
		t.Errorf("got %v, want ErrConfig", err)
	}
	if _, err := New(timer.Config{Tick: time.Nanosecond}); !errors.Is(err, timer.ErrConfig) {
		t.Errorf("got %v, want ErrConfig", err)
	}
}

func TestClose(t *testing.T) {
	c, err := New(timer.Config{})
	if err != nil {
		t.Fatal(err)
	}
	fired := make(chan struct{}, 2)
	pending := c.AfterFunc(5*time.Millisecond, func() { fired <- struct{}{} })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	after := c.AfterFunc(time.Millisecond, func() { fired <- struct{}{} })
	after.Reset(time.Millisecond)
	expectNothing(t, fired, 30*time.Millisecond)
	if pending.Stop() || after.Stop() {
		t.Error("Stop after Close returned true")
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestNowMonotonicFollowsWheelClock(t *testing.T) {
	mc := timer.NewManualClock(42 * time.Second)
	c, err := New(timer.Config{Clock: mc})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var zero tcpip.MonotonicTime
	if got := c.NowMonotonic().Sub(zero); got != 42*time.Second {
		t.Errorf("NowMonotonic is %v, want the manual clock's 42s", got)
	}
	mc.Advance(1500 * time.Nanosecond)
	if got := c.NowMonotonic().Sub(zero); got != 42*time.Second+1500*time.Nanosecond {
		t.Errorf("NowMonotonic is %v, want 42.0000015s: ns, not ticks", got)
	}
}
