package stack

import (
	"sync"
	"time"
)

// deadline is a settable deadline: wait returns a channel closed once it passes.
// Setting it again re-arms it, whether or not it had passed.
type deadline struct {
	mu    sync.Mutex
	timer *time.Timer
	ch    chan struct{} // closed when the deadline passes
}

func newDeadline() *deadline { return &deadline{ch: make(chan struct{})} }

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.ch // the timer fired: wait for it to close ch before replacing it
	}
	d.timer = nil
	select {
	case <-d.ch:
		d.ch = make(chan struct{})
	default:
	}
	if t.IsZero() {
		return
	}
	dur := time.Until(t)
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
	return d.ch
}

func (d *deadline) passed() bool {
	select {
	case <-d.wait():
		return true
	default:
		return false
	}
}
