// Package tcpipclock runs gVisor's netstack on a tcpwheel timing wheel: Clock
// implements gvisor.dev/gvisor/pkg/tcpip.Clock with a [loop.Shared], for use as
// stack.Options.Clock.
//
// It keeps the observable semantics of tcpip.NewStdClock (time.AfterFunc):
//
//   - AfterFunc's f runs in its own goroutine (go f()), never on the wheel's
//     loop goroutine nor under its lock: gVisor's timer handlers block on
//     endpoint locks.
//   - Timer.Stop returns true exactly when it prevented f from being started.
//   - Timer.Reset re-arms a timer whether it is armed, has fired or was stopped.
//   - NowMonotonic reads the wheel's clock at full (ns) resolution, not rounded to
//     ticks: gVisor's RACK loss detection compares send times and breaks on coarse
//     clocks. Only timer deadlines are rounded, up, to the wheel's tick.
//   - Now returns time.Now().
package tcpipclock

import (
	"fmt"
	"time"

	"github.com/tcpwheel/tcpwheel/loop"
	"github.com/tcpwheel/tcpwheel/timer"
	"gvisor.dev/gvisor/pkg/tcpip"
)

// Clock is a tcpip.Clock whose timers live on a goroutine-safe timing wheel. It is
// safe for concurrent use; several stacks may share one.
type Clock struct {
	s     *loop.Shared // immutable
	clock timer.Clock  // s's clock; immutable
}

var _ tcpip.Clock = (*Clock)(nil)

// New returns a Clock on a wheel configured by cfg, with the wheel's loop
// goroutine started; Close stops it. cfg.MaxPending must be zero, since AfterFunc
// has no way to report ErrTooManyTimers. A nil cfg.Clock means a new
// timer.MonotonicClock.
func New(cfg timer.Config) (*Clock, error) {
	if cfg.MaxPending != 0 {
		return nil, fmt.Errorf("%w: tcpipclock needs MaxPending 0, not %d", timer.ErrConfig, cfg.MaxPending)
	}
	s, err := loop.NewShared(cfg)
	if err != nil {
		return nil, err
	}
	return &Clock{s: s, clock: s.Clock()}, nil
}

// Now implements tcpip.Clock: it returns time.Now().
func (c *Clock) Now() time.Time { return time.Now() }

// NowMonotonic implements tcpip.Clock: the wheel clock's reading, in ns.
func (c *Clock) NowMonotonic() tcpip.MonotonicTime {
	var mt tcpip.MonotonicTime
	return mt.Add(c.clock.Now())
}

// AfterFunc implements tcpip.Clock: f runs in its own goroutine d after the call
// (d rounded up to the wheel's tick). After Close the timer never fires.
func (c *Clock) AfterFunc(d time.Duration, f func()) tcpip.Timer {
	t := &clockTimer{s: c.s, f: f}
	t.e.Init(t.fire)
	_ = c.s.Start(&t.e, d) // fails only after Close (ErrClosed): then it never fires
	return t
}

// Stats returns the wheel's counters.
func (c *Clock) Stats() timer.Stats { return c.s.Stats() }

// Close stops the wheel's loop goroutine. Pending timers never fire, and timers
// made or reset afterwards do not either. It always returns nil.
func (c *Clock) Close() error {
	c.s.Close()
	return nil
}

// clockTimer is the tcpip.Timer of Clock.AfterFunc.
type clockTimer struct {
	e timer.Entry  // on s's wheel while armed
	s *loop.Shared // immutable
	f func()       // immutable
}

var _ tcpip.Timer = (*clockTimer)(nil)

// fire runs on the loop goroutine with no lock held; f may block, so it gets a
// goroutine of its own.
func (t *clockTimer) fire() { go t.f() }

// Stop implements tcpip.Timer: it reports whether it prevented f from being
// started.
func (t *clockTimer) Stop() bool { return t.s.Stop(&t.e) }

// Reset implements tcpip.Timer: it re-arms the timer to fire d after the call,
// moving it if it is armed. After the Clock's Close it does nothing.
func (t *clockTimer) Reset(d time.Duration) { _ = t.s.Start(&t.e, d) }
