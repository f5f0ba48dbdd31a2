//go:build !linux

package loop

import (
	"errors"
	"time"

	"github.com/tcpwheel/tcpwheel/timer"
)

// poller is the portable sleep of a Loop: a time.Timer and a wake-up channel.
// Watch is Linux-only.
type poller struct {
	wakec chan struct{} // capacity 1: a pending wake-up
	goid  string        // the loop goroutine's id; set by setup before New returns
	t     *time.Timer   // the loop goroutine's alone
}

func (p *poller) open() error {
	p.wakec = make(chan struct{}, 1)
	return nil
}

// setup runs first on the loop goroutine. Here every loop is as NewParked
// makes it on Linux: an ordinary goroutine.
func (p *poller) setup(threadMode) error {
	p.goid = goroutineID()
	return nil
}

// onLoop reports whether the caller is the loop goroutine, so that Close from a
// callback does not wait for itself. It is called only by Close and is not fast.
func (p *poller) onLoop() bool { return goroutineID() == p.goid }

// locked reports whether the loop's goroutine is locked to its thread:
// never here.
func (p *poller) locked() bool { return false }

func (p *poller) wake() {
	select {
	case p.wakec <- struct{}{}:
	default:
	}
}

// wait sleeps until next or a wake-up. There is no spin here: a time.Timer
// wakes in whole milliseconds anyway.
func (p *poller) wait(clock timer.Clock, next time.Duration, ok bool, _ time.Duration, _ bool) bool {
	if !ok {
		<-p.wakec
		return true
	}
	dur := next - clock.Now()
	if p.t == nil {
		p.t = time.NewTimer(dur)
	} else {
		p.t.Reset(dur)
	}
	select {
	case <-p.t.C:
	case <-p.wakec:
		p.t.Stop()
	}
	return true
}

func (p *poller) watching() bool { return false }

func (p *poller) poll() bool { return false }

func (p *poller) runReady() bool { return false }

func (p *poller) close() error {
	if p.t != nil {
		p.t.Stop()
	}
	return nil
}

// errNoWatch is Watch's error where the loop has no epoll.
var errNoWatch = errors.New("loop: Watch needs Linux's epoll")

// Watch is Linux-only: here it fails.
func (l *Loop) Watch(fd int, onReadable func() bool) error { return errNoWatch }

// Unwatch is Linux-only: here it fails.
func (l *Loop) Unwatch(fd int) error { return errNoWatch }

// Real-time scheduling is Linux-only; the bounds are Linux's.
const (
	MinRealTime = 1
	MaxRealTime = 99
)

// errNoRealTime is SetRealTime's error where there is no SCHED_FIFO.
var errNoRealTime = errors.New("loop: real-time scheduling (SCHED_FIFO) needs Linux")

// SetRealTime is Linux-only: here it fails for any priority but 0.
func (l *Loop) SetRealTime(prio int) error {
	if prio == 0 {
		return nil
	}
	return errNoRealTime
}

// ThreadID is Linux-only: here it returns 0.
func (l *Loop) ThreadID() int { return 0 }
