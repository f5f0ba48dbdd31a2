package stack

import (
	"math"
	"sync"
	"time"
)

// deadline is a settable deadline: wait returns a channel closed once it passes.
// Setting it again re-arms it, whether or not it had passed. Its zero value is
// a deadline that is not set: the channel is made when first needed (wait, or
// a set to a past time while someone waits), for most connections never set
// one, and a Conn is made on the loop.
//
// A time in the future arms a timer only while someone waits (wait made
// the channel); until then set just keeps the instant, and passed compares
// it with the clock. net/http's server sets its header timeout before every
// request and clears it after the headers, nearly always before any Read
// had to wait: a timer started and stopped for nothing cost a time.Timer
// and its function (two allocations) and two updates of the runtime's
// timer heap per request.
type deadline struct {
	mu sync.Mutex
	// at is the deadline on the monotonic clock (monoNow), 0 if none: 8
	// bytes where a time.Time takes 24 (a Conn has two, and stays in
	// its 512-byte size class), and a clock step does not move it, as in
	// package net, whose deadlines are runtime nanotime instants.
	at    int64
	timer *time.Timer   // closes ch at at; armed only once ch exists
	ch    chan struct{} // closed when the deadline passes; nil until needed
}

func newDeadline() *deadline { return &deadline{} }

// monoBase is the instant monoNow counts from: read once, never written.
var monoBase = time.Now()

// monoNow is the monotonic clock, in nanoseconds since monoBase.
func monoNow() int64 { return int64(time.Since(monoBase)) }

// monoAt is t on monoNow's clock, and the clock's reading (now), from one
// reading of it: at is never 0 (which means none), saturated rather than
// wrapped for a time beyond the clock's range.
func monoAt(t time.Time) (at, now int64) {
	wall := time.Now()
	now, d := int64(wall.Sub(monoBase)), int64(t.Sub(wall))
	at = now + d
	switch {
	case d > 0 && at < now:
		at = math.MaxInt64
	case at == 0:
		at = -1 // the clock's origin: passed, not none
	}
	return at, now
}

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
	d.at = 0
	if t.IsZero() {
		return
	}
	var now int64
	d.at, now = monoAt(t)
	left := d.at - now
	switch {
	case d.ch == nil && left <= 0:
		// Passed already, and nobody waits: the shared closed channel,
		// not one made to be closed at once (net/http's server sets a
		// past read deadline on every connection to stop its
		// background read).
		d.ch = passedCh
	case d.ch == nil:
		// Nobody waits: no timer until someone does (wait).
	case left <= 0:
		close(d.ch)
	default:
		d.arm(left)
	}
}

// arm starts the timer that closes ch in left nanoseconds. d.mu is held.
func (d *deadline) arm(left int64) {
	ch := d.ch
	d.timer = time.AfterFunc(time.Duration(left), func() { close(ch) })
}

func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ch == nil {
		d.ch = make(chan struct{})
		if d.at != 0 { // set while nobody waited: the timer starts now
			if left := d.at - monoNow(); left <= 0 {
				close(d.ch)
			} else {
				d.arm(left)
			}
		}
	}
	return d.ch
}

func (d *deadline) passed() bool {
	d.mu.Lock()
	ch, at := d.ch, d.at
	d.mu.Unlock()
	select {
	case <-ch: // a nil ch (never waited on) has not closed
		return true
	default:
		// A deadline set while nobody waited has no timer to close ch:
		// the clock says whether it passed. (Once ch exists, its timer
		// says it, as before: no clock read on every Read and Write.)
		return ch == nil && at != 0 && monoNow() >= at
	}
}
