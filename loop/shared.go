package loop

import (
	"math"
	"sync"
	"time"

	"github.com/tcpwheel/tcpwheel/timer"
)

// Shared is the goroutine-safe front of a timer.Wheel: the wheel behind a mutex,
// run on the real clock by its own Loop. Any goroutine may start and stop its
// entries. Expiry callbacks run on the loop goroutine with the mutex released, so
// they may call any Shared method; an entry that has been collected for running is
// already idle, so a Stop racing with its run returns false, as for time.AfterFunc.
//
// Entries started on a Shared must be stopped with Shared.Stop (or SharedTimer.Stop),
// not with Entry.Stop, which would touch the wheel without the mutex; likewise
// Entry.Pending is racy for them.
//
// The single-owner Wheel takes no locks; the mutex is Shared's alone.
type Shared struct {
	// Immutable after NewShared.
	clock timer.Clock // the wheel's clock
	l     *Loop       // runs the wheel; calls expire and nextDeadline

	mu sync.Mutex
	w  *timer.Wheel // guarded by mu
	// sleepUntil is the instant, on clock, until which the loop sleeps (or is
	// about to sleep): a Start with an earlier deadline must wake it. It is awake
	// (math.MinInt64) while the loop runs and will look at the wheel again before
	// sleeping, and math.MaxInt64 when it sleeps with nothing pending. Guarded by mu.
	sleepUntil time.Duration
	closed     bool // guarded by mu
}

// awake is Shared.sleepUntil while the loop is awake: no Start needs to wake it.
const awake = time.Duration(math.MinInt64)

// NewShared returns a goroutine-safe wheel configured by cfg, with its loop
// goroutine started. Close it to stop the goroutine.
func NewShared(cfg timer.Config) (*Shared, error) {
	w, err := timer.New(cfg)
	if err != nil {
		return nil, err
	}
	s := &Shared{clock: w.Clock(), w: w, sleepUntil: awake}
	if s.l, err = newLoop(w, s, threadLocked); err != nil {
		return nil, err
	}
	return s, nil
}

// Clock returns the wheel's clock.
func (s *Shared) Clock() timer.Clock { return s.clock }

// Start arms e to fire d after the moment of the call, measured with a fresh
// reading of the clock (not the wheel's Now, which may be stale while the loop
// sleeps), so that e never fires early. A pending e is re-armed. Errors are those
// of timer.Wheel.Start.
func (s *Shared) Start(e *timer.Entry, d time.Duration) error {
	t := s.clock.Now()
	if d > 0 {
		if d > math.MaxInt64-t {
			t = math.MaxInt64
		} else {
			t += d
		}
	}
	s.mu.Lock()
	err := s.w.StartAt(e, t)
	wake := err == nil && t < s.sleepUntil
	if wake {
		s.sleepUntil = awake // the loop will look at the wheel before sleeping again
	}
	s.mu.Unlock()
	if wake {
		s.l.kick()
	}
	return err
}

// Stop disarms e and reports whether it was pending, that is, whether Stop
// prevented its function from being run. A false return for an entry that was
// started means its function has been, or is about to be, run.
func (s *Shared) Stop(e *timer.Entry) bool {
	s.mu.Lock()
	ok := s.w.Stop(e)
	s.mu.Unlock()
	return ok
}

// Close disarms and returns the pending entries, and stops the loop goroutine,
// waiting for it unless called from a callback. Entries already collected for
// running still run. Afterwards Start fails with timer.ErrClosed. A second Close
// returns nil.
func (s *Shared) Close() []*timer.Entry {
	s.mu.Lock()
	var out []*timer.Entry
	if !s.closed {
		s.closed = true
		out = s.w.Close()
	}
	s.mu.Unlock()
	_ = s.l.Close() // closing an epoll, a timerfd and an eventfd does not fail in practice
	return out
}

// Stats returns the wheel's counters.
func (s *Shared) Stats() timer.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Stats()
}

// Wakeups returns the number of times the loop goroutine has woken from a
// blocking sleep; see Loop.Wakeups.
func (s *Shared) Wakeups() uint64 { return s.l.Wakeups() }

// SetSpin sets the spin window of the Shared's loop: see Loop.SetSpin.
func (s *Shared) SetSpin(window time.Duration) error { return s.l.SetSpin(window) }

// expire is the loop's EXPIRY_PROCESSING: it advances the wheel to now under the
// mutex and returns the due entries' functions appended to buf, for the loop to
// run with the mutex released.
func (s *Shared) expire(now time.Duration, buf []func()) []func() {
	s.mu.Lock()
	buf = s.w.AdvanceCollect(now, buf)
	s.sleepUntil = awake
	s.mu.Unlock()
	return buf
}

// nextDeadline returns the wheel's next deadline and records it as the one the
// loop is about to sleep until.
func (s *Shared) nextDeadline() (time.Duration, bool) {
	s.mu.Lock()
	next, ok := s.w.NextDeadline()
	if ok {
		s.sleepUntil = next
	} else {
		s.sleepUntil = math.MaxInt64
	}
	s.mu.Unlock()
	return next, ok
}

// SharedTimer is a one-shot timer made by Shared.AfterFunc. Its methods are safe
// for concurrent use.
type SharedTimer struct {
	e timer.Entry
	s *Shared
}

// AfterFunc starts a SharedTimer that runs f on the loop goroutine, with no lock
// held, d after the call.
func (s *Shared) AfterFunc(d time.Duration, f func()) (*SharedTimer, error) {
	if f == nil {
		return nil, timer.ErrNoFunc
	}
	t := &SharedTimer{s: s}
	t.e.Init(f)
	if err := s.Start(&t.e, d); err != nil {
		return nil, err
	}
	return t, nil
}

// Stop disarms the timer and reports whether that prevented f from running.
func (t *SharedTimer) Stop() bool { return t.s.Stop(&t.e) }

// Reset re-arms the timer to fire d after the call, whether it is pending, has
// fired, or was stopped.
func (t *SharedTimer) Reset(d time.Duration) error { return t.s.Start(&t.e, d) }
