package loop

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tcpwheel/tcpwheel/timer"
)

// Manual is a loop that the caller drives: there is no goroutine and no sleep.
// Post runs its function at once, on the caller's goroutine; time moves only
// when the caller calls AdvanceTo, which stops at each deadline on the way so
// that every timer fires at its own instant on the wheel's timer.ManualClock.
// Tests and pcap replays use it to run code exactly as on a Loop, at instants
// they choose.
//
// A mutex serialises Post, AdvanceTo and NextDeadline, so the code on the loop
// stays single-threaded while any goroutine may call them. A posted function
// must not call them again (it would wait for itself). Unlike Loop.Post, Post
// does not advance the wheel before f: the wheel is where the last AdvanceTo
// left it, which is the clock's reading unless the clock was moved by someone
// else.
type Manual struct {
	// Immutable after NewManual.
	w     *timer.Wheel
	clock *timer.ManualClock

	mu       sync.Mutex
	closed   bool                            // guarded by mu
	onExpire func(before, now time.Duration) // guarded by mu (SetExpireHook)
}

var _ Runner = (*Manual)(nil)

// ErrManual is returned by a Manual's Watch: a manual loop never polls, so the
// caller hands it input itself (as Post'ed functions).
var ErrManual = errors.New("loop: a manual loop watches no file descriptors")

// NewManual returns a manual loop that owns w, whose clock must be a
// *timer.ManualClock (else timer.ErrConfig).
func NewManual(w *timer.Wheel) (*Manual, error) {
	if w == nil {
		return nil, timer.ErrConfig
	}
	c, ok := w.Clock().(*timer.ManualClock)
	if !ok {
		return nil, fmt.Errorf("%w: a manual loop needs a wheel on a *timer.ManualClock", timer.ErrConfig)
	}
	return &Manual{w: w, clock: c}, nil
}

// Wheel returns the loop's wheel.
func (m *Manual) Wheel() *timer.Wheel { return m.w }

// Clock returns the wheel's manual clock.
func (m *Manual) Clock() *timer.ManualClock { return m.clock }

// Post runs f now, on the caller's goroutine, under the loop's mutex. It fails
// with timer.ErrClosed after Close and timer.ErrNoFunc for a nil f.
func (m *Manual) Post(f func()) error {
	if f == nil {
		return timer.ErrNoFunc
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return timer.ErrClosed
	}
	f()
	return nil
}

// Watch fails with ErrManual: a manual loop polls nothing.
func (m *Manual) Watch(int, func() bool) error { return ErrManual }

// Unwatch fails with ErrManual.
func (m *Manual) Unwatch(int) error { return ErrManual }

// Close makes Post, AdvanceTo and NextDeadline fail or do nothing from now on.
// The wheel belongs to the caller again. It is idempotent and returns nil.
func (m *Manual) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return nil
}

// AdvanceTo moves the clock to now, stopping at each timer deadline on the way
// so that the timers fire, and send, at their own instants
// (PER_TICK_BOOKKEEPING and EXPIRY_PROCESSING, one deadline at a time). A now
// before the clock's reading leaves the clock where it is. It fails with
// timer.ErrClosed after Close.
func (m *Manual) AdvanceTo(now time.Duration) error {
	return m.Post(func() {
		// Bounded: each pass fires the entries of one deadline or moves to now.
		for range 1 << 20 {
			d, ok := m.w.NextDeadline()
			if !ok || d > now {
				break
			}
			m.clock.Set(d)
			m.advance(d)
		}
		m.clock.Set(now)
		m.advance(m.clock.Now())
	})
}

// Wake is one turn of a Loop that wakes at now and finds input waiting: the
// clock moves to now, the wheel's Now with it but without expiry
// (timer.Wheel.MoveNow), input runs, and then the timers due by now fire, all
// at now, as on a Loop that wakes late (AdvanceTo, by contrast, stops at each
// deadline on the way). So input that arrived before a deadline but is read
// after it still comes first: a timer it stops does not fire. A now before the
// clock's reading leaves the clock where it is. input may be nil. It fails
// with timer.ErrClosed after Close.
func (m *Manual) Wake(now time.Duration, input func()) error {
	return m.Post(func() {
		if now > m.clock.Now() {
			m.clock.Set(now)
		}
		m.w.MoveNow(m.clock.Now())
		if input != nil {
			input()
		}
		m.advance(m.clock.Now())
	})
}

// advance is EXPIRY_PROCESSING, with the expire hook told first when a timer
// is due. It runs with mu held.
func (m *Manual) advance(now time.Duration) {
	if m.onExpire != nil {
		if d, ok := m.w.NextDeadline(); ok && d <= now {
			m.onExpire(m.w.Now(), now)
		}
	}
	m.w.Advance(now)
}

// SetExpireHook is Loop.SetExpireHook: f is told of every expiry that has a
// timer due, before it runs.
func (m *Manual) SetExpireHook(f func(before, now time.Duration)) error {
	return m.Post(func() { m.onExpire = f })
}

// NextDeadline returns the instant at which the wheel next has work, and false
// when nothing is pending or the loop is closed.
func (m *Manual) NextDeadline() (d time.Duration, ok bool) {
	m.Post(func() { d, ok = m.w.NextDeadline() })
	return d, ok
}
