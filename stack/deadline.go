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
type deadline struct {
	mu    sync.Mutex
	timer *time.Timer
	ch    chan struct{} // closed when the deadline passes; nil until needed
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
	if d.timer != nil && !d.timer.Stop() {
		<-d.ch // the timer fired: wait for it to close ch before replacing it
	}
	d.timer = nil
	select {
	case <-d.ch: // (never, while ch is nil)
		// Passed: the next wait makes a new channel (a reader blocked on
		// this one has been woken). net/http's server passes its read
		// deadline (to stop a background read) and clears it on every
		// request.
		d.ch = nil
	default:
	}
	if t.IsZero() {
		return
	}
	dur := time.Until(t)
	if d.ch == nil && dur <= 0 {
		// Passed already, and nobody waits: the shared closed channel,
		// not one made to be closed at once (net/http's server sets a
		// past read deadline on every connection to stop its
		// background read).
		d.ch = passedCh
		return
	}
	if d.ch == nil {
		d.ch = make(chan struct{})
	}
	if dur <= 0 {
		close(d.ch)
		return
	}
	ch := d.ch
	d.timer = time.AfterFunc(dur, func() { close(ch) })
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
	ch := d.ch
	d.mu.Unlock()
	select {
	case <-ch: // a nil ch (never set) has not passed
		return true
	default:
		return false
	}
}
