package stack

import (
	"sync"
	"time"
)

// deadline is a settable deadline: wait returns a channel closed once it passes.
// Setting it again re-arms it, whether or not it had passed. Its zero value is
// a deadline that is not set: the channel is made when first needed (wait, or
// a set to a time), for most connections never set one, and a Conn is made on
// the loop.
//
// Its timer is made by the first set to a future time and re-armed (Reset)
// by every later one: net/http's server sets a connection's read deadline
// four times a request (its header timeout, then none; a past one to stop
// its background read, then none), and a new timer per set cost two
// allocations and 2-4% of a keep-alive request's CPU. A fire that a later set
// overtook finds the deadline moved (or cleared) and leaves it.
type deadline struct {
	mu sync.Mutex
	tm *deadlineTimer // nil until the first set to a future time
	ch chan struct{}  // closed when the deadline passes; nil until needed
}

// deadlineTimer is a deadline's timer and the time it is armed for (zero:
// none), apart from the deadline so that a Conn, which holds two deadlines,
// keeps its size class.
type deadlineTimer struct {
	t  *time.Timer
	at time.Time
}

func newDeadline() *deadline { return &deadline{} }

// passedCh is the channel of every deadline set to a time that had passed
// when nobody waited on it: closed once, for all of them.
var passedCh = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.tm != nil {
		d.tm.at = time.Time{} // a fire already under way finds no deadline
		d.tm.t.Stop()
	}
	if d.isPassed() {
		// Passed: the next wait makes a new channel (a reader blocked on
		// this one has been woken). net/http's server passes its read
		// deadline (to stop a background read) and clears it on every
		// request.
		d.ch = nil
	}
	if t.IsZero() {
		return
	}
	dur := time.Until(t)
	if dur <= 0 {
		d.expire()
		return
	}
	if d.tm == nil {
		d.tm = &deadlineTimer{at: t}
		d.tm.t = time.AfterFunc(dur, d.fire)
		return
	}
	d.tm.at = t
	d.tm.t.Reset(dur)
}

// fire is the timer's function: the deadline passes if it is still armed
// and reached.
func (d *deadline) fire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if at := d.tm.at; !at.IsZero() && !time.Now().Before(at) {
		d.tm.at = time.Time{}
		d.expire()
	}
}

// expire closes the channel, or, while nobody waits, takes the shared closed
// one (not one made to be closed at once: net/http's server sets a past read
// deadline on every connection to stop its background read). Under mu.
func (d *deadline) expire() {
	switch {
	case d.ch == nil:
		d.ch = passedCh
	case !d.isPassed():
		close(d.ch)
	}
}

// isPassed reports whether ch is closed. Under mu.
func (d *deadline) isPassed() bool {
	select {
	case <-d.ch: // a nil ch (never set) has not passed
		return true
	default:
		return false
	}
}

func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ch == nil {
		d.ch = make(chan struct{})
	}
	return d.ch
}

func (d *deadline) passed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.isPassed()
}
