package stack

import (
	"sync"
	"time"
)

// deadline is a settable deadline: wait returns a channel closed once it passes.
// Setting it again re-arms it, whether or not it had passed. Its zero value is
// a deadline that is not set: the channel is made when first needed (wait, or
// a set to a past time while nobody waits takes a shared closed one), for most
// connections never set one, and a Conn is made on the loop.
//
// Its timer runs only for calls that wait: a set while nobody waits stores
// the time, and passed compares it with the clock. net/http's server sets a
// connection's read deadline four times a request (its header timeout, then
// none; a past one to stop its background read, then none) and, with the
// request's bytes already there, never waits under it: re-arming and stopping
// a timer at each set was 345 ns a request, 2-3% of a keep-alive request's
// CPU. The timer, made by the first wait under a deadline, is re-armed (Reset)
// after that, never remade; a fire that a later set overtook finds the
// deadline moved (or cleared): it re-arms for the new time if a call still
// waits, and leaves it otherwise.
type deadline struct {
	mu      sync.Mutex
	tm      *deadlineTimer // nil until the first set to a time
	ch      chan struct{}  // closed when the deadline passes; nil until needed
	waiters int32          // calls between wait and done
}

// deadlineTimer is a deadline's time and its timer, apart from the deadline
// so that a Conn, which holds two deadlines, keeps its size class (512).
type deadlineTimer struct {
	at    time.Time   // the deadline, not yet found passed; zero: none
	t     *time.Timer // nil until a call first waits under a deadline
	armed time.Time   // what t is armed for; zero: not armed
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
	if d.isPassed() {
		// Passed: the next wait makes a new channel (a reader blocked on
		// this one has been woken). net/http's server passes its read
		// deadline (to stop a background read) and clears it on every
		// request.
		d.ch = nil
	}
	tm := d.tm
	if t.IsZero() {
		if tm != nil {
			tm.at = time.Time{}
			if !tm.armed.IsZero() {
				tm.armed = time.Time{} // a fire already under way finds no deadline
				tm.t.Stop()
			}
		}
		return
	}
	if tm == nil {
		tm = &deadlineTimer{}
		d.tm = tm
	}
	tm.at = t
	if d.waiters > 0 {
		d.settle()
	} // else passed finds it reached; the next wait arms the timer
}

// settle, for a call waiting, passes a deadline whose time has come or arms
// the timer for one still ahead. Under mu.
func (d *deadline) settle() {
	switch set, reached := d.reached(); {
	case reached:
		d.expire()
	case set:
		d.arm()
	}
}

// arm makes the timer fire by the deadline, which is set and not yet
// passed: it re-arms it unless it is armed for that time or before (that
// fire re-arms it for the deadline). Under mu.
func (d *deadline) arm() {
	tm := d.tm
	if !tm.armed.IsZero() && !tm.armed.After(tm.at) {
		return
	}
	tm.armed = tm.at
	if tm.t == nil {
		tm.t = time.AfterFunc(time.Until(tm.at), d.fire)
		return
	}
	tm.t.Reset(time.Until(tm.at))
}

// fire is the timer's function: the deadline passes if it is set and
// reached; a deadline moved on is re-armed while a call waits on it.
func (d *deadline) fire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	tm := d.tm
	tm.armed = time.Time{}
	switch {
	case tm.at.IsZero():
	case !time.Now().Before(tm.at):
		d.expire()
	case d.waiters > 0:
		d.arm()
	}
}

// expire closes the channel, or, while nobody waits, takes the shared closed
// one (not one made to be closed at once: net/http's server sets a past read
// deadline on every connection to stop its background read). The deadline is
// passed from then on, until the next set. Under mu.
func (d *deadline) expire() {
	if d.tm != nil {
		d.tm.at = time.Time{}
	}
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

// reached reports whether a deadline is set and its time has come (it is
// passed once expire has run). Under mu.
func (d *deadline) reached() (set, reached bool) {
	if d.tm == nil || d.tm.at.IsZero() {
		return false, false
	}
	return true, !time.Now().Before(d.tm.at)
}

// wait returns a channel closed once the deadline passes, for a call about
// to block on it, and arms the timer for a deadline set; the call calls done
// when it stops waiting.
func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.waiters++
	if d.ch == nil {
		d.ch = make(chan struct{})
	}
	d.settle()
	return d.ch
}

// done ends a call's wait.
func (d *deadline) done() {
	d.mu.Lock()
	d.waiters--
	d.mu.Unlock()
}

// passed reports whether the deadline has passed; one set and reached while
// nobody waited (no timer ran for it) passes here.
func (d *deadline) passed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, reached := d.reached(); reached {
		d.expire()
	}
	return d.isPassed()
}
