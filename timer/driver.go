package timer

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Driver runs a Wheel on the real clock: one goroutine advances the wheel and
// sleeps until its next deadline. With nothing pending it blocks with no timeout,
// so an idle driver costs no wakeups; with something pending it sleeps until the
// next non-empty tick, not every tick.
//
// The driver owns its wheel: from NewDriver until Close returns, only the driver's
// goroutine may touch it, which it does in expiry callbacks and in functions given
// to Post. Timers started there measure from [Wheel.Now], which the driver refreshes
// (Advance(clock.Now())) before it runs posted functions.
//
// On Linux the goroutine is locked to its thread, whose timer slack is 1 ns, and
// sleeps in epoll_wait on a timerfd (absolute CLOCK_MONOTONIC deadlines, ns
// precision) and an eventfd that Post writes to; see AddReadFD for adding other file
// descriptors to the same loop. Elsewhere it sleeps on a time.Timer.
//
// The driver converts the wheel clock's deadlines to real time at each sleep, so
// the wheel's clock should run at the rate of the system's monotonic clock, as
// MonotonicClock does. With a ManualClock the driver still works: it sleeps for
// the remaining clock time in real time, then looks at the clock again.
type Driver struct {
	// Immutable after NewDriver.
	w      *Wheel  // the loop goroutine's alone; in shared mode, guarded by shared.mu
	clock  Clock   // w's clock
	shared *Shared // nil for a single-owner driver
	done   chan struct{}

	// The loop goroutine's alone.
	p     poller   // platform sleep; but wake may be called under mu, onLoop anywhere
	batch []func() // posted functions being run, swapped with queue
	due   []*Entry // shared mode: entries collected by advanceCollect, being run

	mu       sync.Mutex
	queue    []func() // guarded by mu: posted functions the loop has not taken yet
	kicked   bool     // guarded by mu: work arrived that the loop has not looked at
	sleeping bool     // guarded by mu: the loop is blocked in the poller (or about to be); a kick must wake it
	closing  bool     // guarded by mu: Close was called; Post fails from now on

	spin     atomic.Int64  // SetSpin's window, ns
	wakeups  atomic.Uint64 // blocking waits ended by an event (timer, wake-up, readable fd)
	loops    atomic.Uint64 // loop iterations, sleeping or not: tests check that nothing spins
	closeErr error         // written by the loop before it closes done
}

// NewDriver starts a driver goroutine for w and hands w over to it. It fails if
// the platform's timer and wake-up objects cannot be made.
func NewDriver(w *Wheel) (*Driver, error) {
	if w == nil {
		return nil, ErrConfig
	}
	return newDriver(w, nil)
}

func newDriver(w *Wheel, shared *Shared) (*Driver, error) {
	d := &Driver{w: w, clock: w.Clock(), shared: shared, done: make(chan struct{})}
	d.spin.Store(int64(DefaultSpin))
	if err := d.p.open(); err != nil {
		return nil, err
	}
	started := make(chan error, 1)
	go d.loop(started)
	if err := <-started; err != nil {
		<-d.done
		return nil, err
	}
	return d, nil
}

// DefaultSpin is a new Driver's spin window (see SetSpin). With it the default
// 10 µs tick fires at a p50 of about 10 µs late instead of 45 on the project's VM,
// whose idle vCPU takes 30-150 µs to wake; see README.md, "Firing lateness".
const DefaultSpin = 50 * time.Microsecond

// MaxSpin is the largest spin window SetSpin accepts.
const MaxSpin = time.Millisecond

// SetSpin sets how long before a deadline the driver stops sleeping and waits the
// rest out awake (Linux only: elsewhere it sleeps on a time.Timer and ignores it).
// Waking from a sleep takes tens of µs, so a sleep to the deadline fires that
// late; a spin trades up to window of CPU per timer wake-up for punctuality.
// While it spins the driver still polls its file descriptors and Post's wake-ups
// (without blocking), so events are not delayed. 0 turns spinning off; a negative
// window or one above MaxSpin is ErrConfig. It takes effect from the next sleep
// and may be called from any goroutine.
func (d *Driver) SetSpin(window time.Duration) error {
	if window < 0 || window > MaxSpin {
		return fmt.Errorf("%w: spin window %v outside [0, %v]", ErrConfig, window, MaxSpin)
	}
	d.spin.Store(int64(window))
	return nil
}

// Post queues f to run on the driver's goroutine, where it may use the wheel. Posted
// functions run in order, each after the wheel has been advanced to the current
// time (with a Shared, once per batch of functions posted together).
// Post wakes the driver only when it is asleep, so posting to a busy driver costs
// no system call. Every function accepted before Close runs before the driver
// stops. Post fails with ErrClosed after Close and ErrNoFunc for a nil f.
func (d *Driver) Post(f func()) error {
	if f == nil {
		return ErrNoFunc
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		return ErrClosed
	}
	d.queue = append(d.queue, f)
	d.kickLocked()
	return nil
}

// Close stops the driver: functions already posted run, then the goroutine ends and
// the driver's file descriptors are closed. Close waits for that, after which the
// wheel belongs to the caller again (pending entries stay pending). Called from the
// driver's own goroutine (an expiry callback or a posted function), it returns at
// once and the loop ends when the current function returns. Close is idempotent;
// it returns the error, if any, of closing the driver's file descriptors.
func (d *Driver) Close() error {
	d.mu.Lock()
	if !d.closing {
		d.closing = true
		d.kickLocked()
	}
	d.mu.Unlock()
	select {
	case <-d.done:
		return d.closeErr
	default:
	}
	if d.p.onLoop() {
		return nil
	}
	<-d.done
	return d.closeErr
}

// Wakeups returns the number of times the driver's goroutine has woken from a
// blocking sleep: for a timer, a Post, or a readable file descriptor. It does not
// grow while the driver is idle.
func (d *Driver) Wakeups() uint64 { return d.wakeups.Load() }

// kick tells the loop to look again before it sleeps, waking it if it sleeps
// already. Shared calls it when a Start makes a deadline earlier than the one the
// loop sleeps until.
func (d *Driver) kick() {
	d.mu.Lock()
	if !d.closing {
		d.kickLocked()
	}
	d.mu.Unlock()
}

// kickLocked requires d.mu. The wake-up is written under d.mu, so it cannot race
// with the loop closing its file descriptors: the loop closes them only after it
// has seen closing under d.mu.
func (d *Driver) kickLocked() {
	d.kicked = true
	if d.sleeping {
		d.sleeping = false
		d.p.wake()
	}
}

func (d *Driver) loop(started chan<- error) {
	defer close(d.done)
	err := d.p.setup()
	started <- err
	if err != nil {
		d.p.close()
		return
	}
	for {
		d.loops.Add(1)
		// EXPIRY_PROCESSING, and a fresh Now for the posted functions.
		now := d.clock.Now()
		if d.shared == nil {
			d.w.Advance(now)
		} else {
			d.due = d.shared.expire(now, d.due[:0])
			for i, e := range d.due {
				d.due[i] = nil
				e.run() // with no lock held: callbacks may use the Shared
			}
		}

		d.mu.Lock()
		d.batch, d.queue = d.queue, d.batch[:0]
		d.kicked = false
		closing := d.closing
		d.mu.Unlock()
		for i, f := range d.batch {
			d.batch[i] = nil
			if i > 0 && d.shared == nil {
				// Each function sees a fresh Now: a timer it starts measures
				// from when it runs, not from when the batch began.
				d.w.Advance(d.clock.Now())
			}
			f()
		}
		d.p.runReady()
		if closing {
			break // every function posted before Close has run
		}

		var next time.Duration
		var ok bool
		if d.shared == nil {
			next, ok = d.w.NextDeadline()
		} else {
			next, ok = d.shared.nextDeadline()
		}
		if ok && next <= d.clock.Now() {
			d.p.poll() // something is due already: look at readable fds, without sleeping
			continue
		}
		d.mu.Lock()
		if d.kicked {
			d.mu.Unlock()
			continue
		}
		d.sleeping = true
		d.mu.Unlock()
		if d.p.wait(d.clock, next, ok, time.Duration(d.spin.Load())) {
			d.wakeups.Add(1)
		}
		d.mu.Lock()
		d.sleeping = false
		d.mu.Unlock()
	}
	d.closeErr = d.p.close()
}
