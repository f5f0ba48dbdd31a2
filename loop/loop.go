package loop

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tcpwheel/tcpwheel/timer"
)

// Loop runs a Wheel on the real clock: one goroutine advances the wheel, runs
// posted functions and watched descriptors' callbacks, and sleeps until the
// wheel's next deadline. With nothing pending it blocks with no timeout, so an
// idle loop costs no wakeups; with something pending it sleeps until the next
// non-empty tick, not every tick.
//
// The loop owns its wheel: from New until Close returns, only the loop's
// goroutine may touch it, which it does in expiry callbacks, in functions given
// to Post and in Watch callbacks. Timers started there measure from
// [timer.Wheel.Now], which the loop moves to the clock (timer.Wheel.MoveNow,
// which expires nothing) before its input and before each posted function;
// expiry comes last in a turn (see the package doc, "Order of work").
//
// On Linux the goroutine is locked to its thread, whose timer slack is 1 ns, and
// sleeps in epoll_wait on a timerfd (absolute CLOCK_MONOTONIC deadlines, ns
// precision) and an eventfd that Post writes to; Watch adds other file
// descriptors to the same epoll set. A parked loop (NewParked) has the same
// epoll set but sleeps in Go's netpoller, on no thread of its own. Elsewhere
// it sleeps on a time.Timer.
//
// The loop converts the wheel clock's deadlines to real time at each sleep, so
// the wheel's clock should run at the rate of the system's monotonic clock, as
// timer.MonotonicClock does. With a timer.ManualClock the loop still works: it
// sleeps for the remaining clock time in real time, then looks at the clock
// again (for a loop that moves only when told to, use Manual).
type Loop struct {
	// Immutable after New.
	w      *timer.Wheel // the loop goroutine's alone; in shared mode, guarded by shared.mu
	clock  timer.Clock  // w's clock
	shared *Shared      // nil for a single-owner loop
	mode   threadMode   // New, NewParked, NewUnlocked
	done   chan struct{}

	// The loop goroutine's alone.
	p     poller   // platform sleep; but wake may be called under mu, onLoop anywhere
	batch []func() // posted functions being run, swapped with queue
	due   []func() // shared mode: functions of the entries collected by expire, being run
	// onExpire, if set, is told of each expiry that has a timer due, before
	// it runs: the wheel's Now before it and the instant it advances to
	// (a flight recorder's hook, SetExpireHook). Loop goroutine only.
	onExpire func(before, now time.Duration)
	// onTurn, if set, runs at the end of every turn (SetTurnHook). Loop
	// goroutine only.
	onTurn func()
	// held counts the turns in a row whose expiry was held back, with timers
	// due, because the input was not drained (at most MaxDeferredTurns).
	held int
	// yielded is the clock's time of the loop's last yield (maybeYield);
	// while putOff is set, putOffAt is when maybeYield first put off the
	// yield due since, for a timer due soon.
	yielded, putOffAt time.Duration
	putOff            bool
	// yieldWoken: a callback of this turn woke a goroutine whose work
	// comes straight back to the loop (YieldToWoken).
	yieldWoken bool
	// handOff: a callback of this turn woke a goroutine that answers at
	// once through another descriptor (ParkForWoken); an unlocked loop's
	// next sleep is in the netpoller.
	handOff bool
	// quietAt is the clock's time at the end of the loop's last sleep of
	// quietSleep or more (quiet: there was one); an unlocked loop sleeps in
	// Go's netpoller for quietSleep after it (see quietSleep).
	quietAt time.Duration
	quiet   bool
	// lone: a lone exchange's spell (LoneExchange); none starts before
	// loneOffUntil; lones counts them.
	lone         bool
	loneAway     int           // the spell's long sleeps in a row
	loneNear     int           // its short ones, since it started or the last long one
	loneWait     time.Duration // the next backoff (0: loneBackoffMin)
	loneOffUntil time.Duration
	lones        atomic.Uint64

	mu       sync.Mutex
	queue    []func() // guarded by mu: posted functions the loop has not taken yet
	kicked   bool     // guarded by mu: work arrived that the loop has not looked at
	sleeping bool     // guarded by mu: the loop is blocked in the poller (or about to be); a kick must wake it
	closing  bool     // guarded by mu: Close was called; Post fails from now on

	spin     atomic.Int64  // SetSpin's window, ns
	maxHeld  atomic.Int64  // SetDeferredTurns's bound on held
	wakeups  atomic.Uint64 // blocking waits ended by an event (timer, wake-up, readable fd)
	loops    atomic.Uint64 // loop iterations, sleeping or not: tests check that nothing spins
	deferred atomic.Uint64 // turns whose expiry waited for the rest of the input (held)
	yields   atomic.Uint64 // maybeYield's runtime.Gosched calls
	woken    atomic.Uint64 // yieldToWoken's runtime.Gosched calls
	parks    atomic.Uint64 // sleeps in Go's netpoller (NetpollSleeps)
	closeErr error         // written by the loop before it closes done
}

var _ Runner = (*Loop)(nil)

// New starts a loop goroutine for w and hands w over to it. It fails if the
// platform's timer and wake-up objects cannot be made.
func New(w *timer.Wheel) (*Loop, error) {
	return newLoop(w, nil, threadLocked)
}

// NewParked is New with the loop's goroutine an ordinary one: on Linux it is
// not locked to a thread of its own (its timer slack is the process's, and
// SetRealTime is not for it) and it sleeps in Go's netpoller, which watches
// the loop's epoll descriptor, instead of in epoll_wait: while it sleeps its P
// runs other goroutines. A locked loop holds its P through its sleep, and a
// goroutine it readies (a Conn's reader) waits for a P that the runtime's
// sysmon takes back from the sleeping thread (20 µs to 10 ms on): where the
// loops are as many as the Ps (GOMAXPROCS), that was every P. Elsewhere every
// loop is parked this way already. package stack chooses it
// (stack.Config.LoopThread).
func NewParked(w *timer.Wheel) (*Loop, error) {
	return newLoop(w, nil, threadParked)
}

// NewUnlocked is New with the loop's goroutine an ordinary one that sleeps
// in epoll_wait as a locked loop does, but keeps no thread of its own (its
// timer slack is the process's, and SetRealTime is not for it): when its
// system call returns and the runtime has given its P to another thread
// meanwhile, whichever thread has a P runs it, where a locked loop's thread
// waited for a P to be handed to it. With a P to spare, on the 2-vCPU VM,
// it served wrk 1.07x and uploads 1.1x a locked loop's rate, ab level
// (README, stop 27). While it is quiet, after a ParkForWoken, and in a
// lone exchange (LoneExchange), it sleeps in Go's netpoller, as a parked loop does (see quietSleep). Elsewhere every loop is as NewParked
// makes it.
func NewUnlocked(w *timer.Wheel) (*Loop, error) {
	return newLoop(w, nil, threadUnlocked)
}

// threadMode is how a Loop's goroutine holds its thread (New, NewParked,
// NewUnlocked).
type threadMode uint8

const (
	threadLocked threadMode = iota
	threadParked
	threadUnlocked
)

// Parked reports whether the loop was made by NewParked.
func (l *Loop) Parked() bool { return l.mode == threadParked }

// Locked reports whether the loop's goroutine is locked to a thread of its
// own (New, on Linux).
func (l *Loop) Locked() bool { return l.mode == threadLocked && l.p.locked() }

func newLoop(w *timer.Wheel, shared *Shared, mode threadMode) (*Loop, error) {
	if w == nil {
		return nil, timer.ErrConfig
	}
	l := &Loop{w: w, clock: w.Clock(), shared: shared, mode: mode, done: make(chan struct{})}
	l.spin.Store(int64(DefaultSpin))
	l.maxHeld.Store(MaxDeferredTurns)
	if err := l.p.open(); err != nil {
		return nil, err
	}
	started := make(chan error, 1)
	go l.run(started)
	if err := <-started; err != nil {
		<-l.done
		return nil, err
	}
	return l, nil
}

// ErrShared is returned by SetExpireHook on a loop of a Shared wheel, whose
// expiry runs under the Shared's lock.
var ErrShared = errors.New("loop: not for a loop on a Shared wheel")

// SetExpireHook has f told, on the loop's goroutine, of every expiry that
// has a timer due, just before it runs: the wheel's Now before it and the
// instant the wheel advances to (Wheel.Advance(now)). A flight recorder
// (package stack/record) needs both to run the expiry again exactly. nil
// removes the hook. Not for a loop on a Shared wheel (ErrShared).
func (l *Loop) SetExpireHook(f func(before, now time.Duration)) error {
	if l.shared != nil {
		return ErrShared
	}
	return l.Post(func() { l.onExpire = f })
}

// SetTurnHook has f run on the loop's goroutine at the end of every turn,
// after its posted functions, input and expiry: where a stack writes what
// the turn produced in batches (package stack's link offloads). nil removes
// it.
func (l *Loop) SetTurnHook(f func()) error {
	return l.Post(func() { l.onTurn = f })
}

// DefaultSpin is a new Loop's spin window (see SetSpin). With it the default
// 10 µs tick fires at a p50 of about 10 µs late instead of 45 on the project's VM,
// whose idle vCPU takes 30-150 µs to wake; see README.md, "Firing lateness".
const DefaultSpin = 50 * time.Microsecond

// MaxSpin is the largest spin window SetSpin accepts.
const MaxSpin = time.Millisecond

// Wheel returns the loop's wheel. Only the loop's goroutine may use it, until
// Close returns.
func (l *Loop) Wheel() *timer.Wheel { return l.w }

// SetSpin sets how long before a deadline the loop stops sleeping and waits the
// rest out awake (Linux only: elsewhere it sleeps on a time.Timer and ignores it).
// Waking from a sleep takes tens of µs, so a sleep to the deadline fires that
// late; a spin trades up to window of CPU per timer wake-up for punctuality.
// While it spins the loop still polls its file descriptors and Post's wake-ups
// (without blocking), so events are not delayed. 0 turns spinning off; a negative
// window or one above MaxSpin is timer.ErrConfig. It takes effect from the next
// sleep and may be called from any goroutine.
func (l *Loop) SetSpin(window time.Duration) error {
	if window < 0 || window > MaxSpin {
		return fmt.Errorf("%w: spin window %v outside [0, %v]", timer.ErrConfig, window, MaxSpin)
	}
	l.spin.Store(int64(window))
	return nil
}

// Post queues f to run on the loop's goroutine, where it may use the wheel.
// Posted functions run in order, each with the wheel's Now moved to the current
// time (timer.Wheel.MoveNow), before the turn's expiry: a due timer that f
// stops does not fire.
// Post wakes the loop only when it is asleep, so posting to a busy loop costs no
// system call. Every function accepted before Close runs before the loop stops.
// Post fails with timer.ErrClosed after Close and timer.ErrNoFunc for a nil f.
func (l *Loop) Post(f func()) error {
	if f == nil {
		return timer.ErrNoFunc
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		return timer.ErrClosed
	}
	l.queue = append(l.queue, f)
	l.kickLocked()
	return nil
}

// Close stops the loop: functions already posted run, then the goroutine ends and
// the loop's file descriptors are closed. Close waits for that, after which the
// wheel belongs to the caller again (pending entries stay pending). Called from
// the loop's own goroutine (an expiry callback, a posted function or a Watch
// callback), it returns at once and the loop ends when the current function
// returns. Close is idempotent; it returns the error, if any, of closing the
// loop's file descriptors.
func (l *Loop) Close() error {
	l.mu.Lock()
	if !l.closing {
		l.closing = true
		l.kickLocked()
	}
	l.mu.Unlock()
	select {
	case <-l.done:
		return l.closeErr
	default:
	}
	if l.p.onLoop() {
		return nil
	}
	<-l.done
	return l.closeErr
}

// DeferredExpiries returns the number of turns that held back the expiry of
// due timers because a watched descriptor's callback had left input behind
// (see Watch and the package doc, "Order of work").
func (l *Loop) DeferredExpiries() uint64 { return l.deferred.Load() }

// Wakeups returns the number of times the loop's goroutine has woken from a
// blocking sleep: for a timer, a Post, or a readable file descriptor. It does not
// grow while the loop is idle.
func (l *Loop) Wakeups() uint64 { return l.wakeups.Load() }

// kick tells the loop to look again before it sleeps, waking it if it sleeps
// already. Shared calls it when a Start makes a deadline earlier than the one the
// loop sleeps until.
func (l *Loop) kick() {
	l.mu.Lock()
	if !l.closing {
		l.kickLocked()
	}
	l.mu.Unlock()
}

// kickLocked requires l.mu. The wake-up is written under l.mu, so it cannot race
// with the loop closing its file descriptors: the loop closes them only after it
// has seen closing under l.mu.
func (l *Loop) kickLocked() {
	l.kicked = true
	if l.sleeping {
		l.sleeping = false
		l.p.wake()
	}
}

// run is the loop goroutine: a turn of work (see turn), then a sleep until the
// next deadline or event, until Close.
func (l *Loop) run(started chan<- error) {
	defer close(l.done)
	err := l.p.setup(l.mode)
	started <- err
	if err != nil {
		l.p.close()
		return
	}
	for {
		l.loops.Add(1)
		closing := l.turn()
		if l.onTurn != nil {
			l.onTurn()
		}
		if closing {
			break // every function posted before Close has run
		}
		if l.yieldWoken {
			l.yieldToWoken()
		}
		l.maybeYield()
		l.sleep()
	}
	l.closeErr = l.p.close()
}

// turn is one round of the loop's work, input before expiry (see the package
// doc, "Order of work"):
//
//  1. posted functions, in order, each after the wheel's Now is moved to the
//     clock without expiry (timer.Wheel.MoveNow);
//  2. input: the callbacks of the watched descriptors found readable, after
//     such a move of Now; if a timer is due the descriptors are polled again
//     first, so that what arrived since the wake, or while the posted
//     functions ran, is seen;
//  3. expiry: advance the wheel to now and run the due entries; unless a
//     callback left input behind while timers are due, in which case the
//     expiry waits for the next turn, at most MaxDeferredTurns turns in a row.
//
// It reports whether Close had been called when the posted functions were
// taken: then every function posted before Close has run. The order of work is
// this function's alone.
func (l *Loop) turn() (closing bool) {
	closing = l.runPosted()
	due := false
	var polled time.Duration
	if l.shared == nil && l.p.watching() {
		next, ok := l.w.NextDeadline()
		if due = ok && next <= l.clock.Now(); due {
			l.p.poll() // a timer is due: look again for input that came first
		}
		polled = l.clock.Now()
		l.w.MoveNow(polled)
	}
	if more := l.p.runReady(); more && due && int64(l.held) < l.maxHeld.Load() {
		// Input that arrived before the timers came due may still wait
		// behind this batch: take it first, next turn (right away: a due
		// timer keeps the loop from sleeping).
		l.held++
		l.deferred.Add(1)
		return closing
	}
	l.held = 0
	if due {
		l.inputAgain(polled)
	}
	l.expire()
	return closing
}

// RecheckAfter is how long the input step of a turn with due timers may
// take before the loop looks at its descriptors once more, just before the
// expiry: the thread may have been preempted in between (a busy machine
// takes it off the CPU for milliseconds), and an ACK that arrived meanwhile
// must stop its timer rather than be answered by a needless retransmission.
// With two CPU hogs on the 2-vCPU VM, ab's 5000 connections drew a median
// of 22-27 tail-loss probes the kernel reported as duplicates (its DSACKs)
// before this; see loop_linux_test.go, TestLoopInputAgainBeforeExpiry.
const RecheckAfter = 100 * time.Microsecond

// maxRechecks bounds inputAgain's polls per turn, so that input arriving
// without pause cannot keep the timers from firing.
const maxRechecks = 4

// inputAgain polls the watched descriptors again, and runs the callbacks of
// those found readable, while the clock has moved more than RecheckAfter
// since the last poll (at most maxRechecks times).
func (l *Loop) inputAgain(polled time.Duration) {
	for range maxRechecks {
		now := l.clock.Now()
		if now-polled < RecheckAfter || !l.p.poll() {
			return
		}
		polled = now
		l.w.MoveNow(now)
		l.p.runReady()
	}
}

// MaxDeferredTurns bounds how many turns in a row the loop holds back the
// expiry of due timers while watched descriptors still hold input (their
// callbacks report more): a flood that never lets the input drain delays the
// timers by at most this many batches of it, and cannot starve them. Package
// stack reads 64 packets per batch, so 256 turns cover 16384 packets, more
// than its TUN's kernel queue holds (10000): every packet waiting when a timer
// came due is handled before it fires. It is the default: SetDeferredTurns
// sets another bound for a device whose queue holds more.
const MaxDeferredTurns = 256

// MaxDeferredTurnsLimit bounds SetDeferredTurns: 65536 turns, 4 Mi packets of
// package stack's batches.
const MaxDeferredTurnsLimit = 1 << 16

// SetDeferredTurns sets how many turns in a row the loop may hold back the
// expiry of due timers while watched descriptors still hold input (the
// default is MaxDeferredTurns): enough batches to cover what the device's
// queue holds, so that every packet waiting when a timer came due is handled
// before it fires, at the price of delaying the timers by that many batches
// under a flood that never drains. n outside [1, MaxDeferredTurnsLimit] is
// timer.ErrConfig. It may be called from any goroutine and takes effect at
// the next turn.
func (l *Loop) SetDeferredTurns(n int) error {
	if n < 1 || n > MaxDeferredTurnsLimit {
		return fmt.Errorf("%w: deferred turns %d outside [1, %d]", timer.ErrConfig, n, MaxDeferredTurnsLimit)
	}
	l.maxHeld.Store(int64(n))
	return nil
}

// expire is EXPIRY_PROCESSING.
func (l *Loop) expire() {
	now := l.clock.Now()
	if l.shared == nil {
		if l.onExpire != nil {
			if d, ok := l.w.NextDeadline(); ok && d <= now {
				l.onExpire(l.w.Now(), now)
			}
		}
		l.w.Advance(now)
		return
	}
	l.due = l.shared.expire(now, l.due[:0])
	for i, f := range l.due {
		l.due[i] = nil
		f() // with no lock held: callbacks may use the Shared
	}
}

// runPosted takes the posted functions and runs them, and reports whether Close
// had been called when it took them.
func (l *Loop) runPosted() (closing bool) {
	l.mu.Lock()
	l.batch, l.queue = l.queue, l.batch[:0]
	l.kicked = false
	closing = l.closing
	l.mu.Unlock()
	for i, f := range l.batch {
		l.batch[i] = nil
		if l.shared == nil {
			// Each function sees a fresh Now: a timer it starts measures
			// from when it runs, not from when the batch began. Nothing
			// expires before it: expiry comes after the input.
			l.w.MoveNow(l.clock.Now())
		}
		f()
	}
	return closing
}

// YieldEvery is how often, in the clock's time, the loop's goroutine gives
// its P back to Go's scheduler (runtime.Gosched), between a turn and the
// sleep after it.
//
// The goroutine is locked to its thread and holds one of the process's Ps
// all the time, in its system calls too (its sleep in epoll_wait, its writes
// to a device): the P runs no other goroutine, so its scheduling tick never
// moves. Go's sysmon preempts a P whose tick has not moved for 10 ms (the
// runtime's forcePreemptNS), as it would a goroutine that runs too long: it
// signals the thread (a sleep in epoll_wait ends in EINTR), hands the P to
// another thread if the loop is in a system call, preempts the loop at its
// next function call, and then, having retaken something, polls every 20 µs,
// its shortest period, for a millisecond and more. On a busy stack (ab's
// churn: 40-45 such preemptions a second, ~2,600 sysmon wake-ups) that cost
// 3-12% of the process's CPU per request, more on a busier machine
// (integration/results/lw-2026-11-24.txt). A yield at a turn's end, where
// the loop holds nothing half done, costs one hand-off of the loop to its
// thread and back (two thread wake-ups) and moves the tick, so that sysmon
// never finds it stuck.
// 2 ms keeps a turn of a few milliseconds (a flood's batch on a preempted
// thread) inside the runtime's 10 ms, with room for the wait of yieldRoom.
const YieldEvery = 2 * time.Millisecond

// yieldRoom: the loop puts off a yield while a deadline is due within its
// spin window and yieldRoom (the hand-off's two thread wake-ups, each 30-150
// µs from an idle vCPU on the project's VM), so that the yield does not make
// the timer late; for YieldEvery at most, so that a loop whose timers are
// always due soon still yields within sysmon's 10 ms.
const yieldRoom = 500 * time.Microsecond

// quietSleep: a sleep of at least this long (on the loop's clock) counts as
// the loop's yield (maybeYield), whose clock then starts again from the
// wake. The yield is for a loop busy enough that sysmon finds its P's tick
// stuck; a loop that wakes once in a while (its timers, a keepalive, a
// retransmission) and sleeps again is not, and its yield at each wake only
// woke another thread (runtime.Gosched wakes an idle P) for nothing. With
// it, an idle `tcpwheel run` makes 6 context switches in 10 s instead of
// 61-63; compare's keepalive and backoff scenarios take 0.84x and 0.70x
// the CPU; wrk, ab and downloads move as before (README, stop 28).
//
// For quietSleep after such a sleep an unlocked loop (NewUnlocked) sleeps in
// Go's netpoller, as a parked one does. Its sleep in epoll_wait is a system
// call that keeps its P (in the runtime's _Psyscall) until Go's sysmon takes
// the P back, after 10 ms when nothing else waits for it; and while a P is
// not idle, sysmon does not sleep but polls: every 20 µs for its first 50
// rounds (70 µs each on the project's VM, its timer slack), then twice as
// long each round up to 10 ms. So each of a quiet loop's sleeps (between a
// keepalive's probes, an echo every 50 ms, a retransmission's backoff) cost
// about 60 wake-ups of sysmon's thread: in compare's keepalive scenario
// sysmon took a third of the process's CPU samples. A sleep in the netpoller
// leaves the P idle at once, and with every P idle sysmon sleeps until woken.
// The quiet spell covers the short sleeps of a wake's exchange (a request's
// answer, then the ACK of it) as well as the long sleep that follows. A busy
// loop's sleeps (none of them quietSleep long) stay in epoll_wait, whose wake
// is the loop's own thread's, where the netpoller's goes through another
// thread and the run queue (parked loops served wrk 0.92x and ab 0.91x an
// unlocked loop's: README, stop 28); and its epoll descriptor is out of the
// netpoller then (poller.netpoll), which would wake at its every event.
const quietSleep = time.Millisecond

// maybeYield yields the loop goroutine's P (runtime.Gosched) if YieldEvery
// or more has passed on the clock since it last did, unless a timer is due
// soon (see YieldEvery and yieldRoom).
func (l *Loop) maybeYield() {
	now := l.clock.Now()
	if now-l.yielded < YieldEvery {
		return
	}
	next, ok := l.nextDeadline()
	if ok && next-now < time.Duration(l.spin.Load())+yieldRoom {
		if !l.putOff {
			l.putOff, l.putOffAt = true, now
		}
		if now-l.putOffAt < YieldEvery {
			return // a timer is due soon: yield after it
		}
	}
	l.putOff = false
	l.yielded = now
	l.yields.Add(1)
	runtime.Gosched()
}

// YieldToWoken tells the loop that the callback calling it (on the loop)
// woke a goroutine whose work comes straight back to the loop: a writer
// given room in a full send buffer, a reader given a batch of bulk data,
// whose Write or Read then posts to the loop. At the end of the turn, before
// it sleeps, an unlocked loop (NewUnlocked) yields its P once
// (runtime.Gosched): the runtime put the woken goroutine on this P to run
// next, so it runs at once, and what it posts finds the loop awake and goes
// out in the loop's next turn, without the eventfd write and the wakeup
// from epoll_wait that a post to a sleeping loop costs. Other loops ignore
// it: a locked loop's thread runs no other goroutine, and a parked loop's
// sleep gives its P to the woken goroutine at once (there a yield only
// added a round: an upload 0.97x with one P). Call it on the loop only.
//
// With two Ps (unlocked) it moved a 200 MB download 1.10x faster at 0.88x
// the CPU per GB, an upload 1.15x at 0.88x (README, stop 28). Wakes of a
// Conn's reader with a request (wrk, ab) are no such hint: a yield after
// every turn with work served ab 0.95x.
func (l *Loop) YieldToWoken() {
	if l.mode == threadUnlocked {
		l.yieldWoken = true
	}
}

// ParkForWoken tells the loop that the callback calling it (on the loop)
// woke a goroutine that is likely to answer at once through another
// descriptor of the process: a UDP socket's reader given a datagram, whose
// reply goes out while the loop sleeps. An unlocked loop (NewUnlocked)
// then sleeps in Go's netpoller this once, as a parked one does: its P
// goes idle at once and runs the woken goroutine on the loop's own thread,
// and whichever thread polls next finds the reply's answer and the loop's
// descriptors at once. In epoll_wait the woken goroutine waited in the
// run queue of the loop's P, which a system call keeps, until another
// thread stole it (after the runtime's usleep(3), some 60 µs with this
// VM's timer slack) or sysmon took the P back: compare's UDP echo had a
// round trip of 40-80 µs in about one run of four, 8 µs in the others,
// and now 6.3-7.5 µs in every run. Other loops ignore it (a locked loop's thread
// runs no other goroutine; a parked one sleeps so anyway). Call it on the
// loop only.
func (l *Loop) ParkForWoken() {
	if l.mode == threadUnlocked {
		l.handOff = true
	}
}

// LoneExchange tells the loop whether the callback calling it (on the
// loop) woke a goroutine in a lone exchange of requests and answers: one
// connection's, with no other traffic about (on) or not (off). While the
// exchange stays lone, an unlocked loop (NewUnlocked) sleeps in Go's
// netpoller, as a parked one does, so that the answer's way back (the
// woken goroutine's post, a goroutine of the process that the netpoller
// readies, its request) runs on whichever thread polls, without waking
// another: that is a peer in this process. A peer in another process
// wakes a netpoller sleep later than one in epoll_wait: a sleep of the
// spell that lasts lonePeerAway or more ends it (loneStrikes of them in a
// row), and none starts again for a backoff: loneBackoffMin at first,
// doubled at each spell that ends so up to loneBackoffMax, and back to
// loneBackoffMin once a spell has had loneNearRun short sleeps in a row (a
// garbage collection or a busy moment of a peer in this process ends a
// spell too). Other loops ignore it. Call it on the loop only.
func (l *Loop) LoneExchange(on bool) {
	if l.mode != threadUnlocked {
		return
	}
	if !on {
		l.lone = false
		return
	}
	if !l.lone && l.clock.Now() >= l.loneOffUntil {
		l.lone = true
		l.lones.Add(1)
	}
}

// lonePeerAway, loneStrikes and the backoffs: see LoneExchange.
const (
	lonePeerAway   = 10 * time.Microsecond
	loneStrikes    = 8
	loneNearRun    = 32
	loneBackoffMin = time.Millisecond
	loneBackoffMax = 100 * time.Millisecond
)

// loneSlept counts a sleep of a lone exchange's spell that lasted d, and
// ends the spell after loneStrikes long ones in a row (see LoneExchange).
func (l *Loop) loneSlept(now, d time.Duration) {
	if d < lonePeerAway {
		l.loneAway = 0
		if l.loneNear++; l.loneNear >= loneNearRun {
			l.loneWait = 0 // a peer in this process: back to the shortest backoff
		}
		return
	}
	l.loneNear = 0
	if l.loneAway++; l.loneAway < loneStrikes {
		return
	}
	l.loneWait = min(max(2*l.loneWait, loneBackoffMin), loneBackoffMax)
	l.lone, l.loneAway, l.loneOffUntil = false, 0, now+l.loneWait
}

// LoneSpells counts the spells LoneExchange started.
func (l *Loop) LoneSpells() uint64 { return l.lones.Load() }

// WokenYields counts the loop's yields for YieldToWoken.
func (l *Loop) WokenYields() uint64 { return l.woken.Load() }

// NetpollSleeps counts the loop's sleeps in Go's netpoller: each of a
// parked loop's (NewParked), and each of an unlocked loop's (NewUnlocked)
// that begins within quietSleep of the end of a quiet one (see quietSleep),
// follows a ParkForWoken or falls in a lone exchange's spell
// (LoneExchange).
// Elsewhere than on Linux every loop sleeps on a time.Timer, and it counts
// the same sleeps.
func (l *Loop) NetpollSleeps() uint64 { return l.parks.Load() }

// yieldToWoken is the yield YieldToWoken asked for; it counts as the
// periodic one too (maybeYield), which it puts off by YieldEvery.
func (l *Loop) yieldToWoken() {
	l.yieldWoken = false
	l.yielded = l.clock.Now()
	l.woken.Add(1)
	runtime.Gosched()
}

// nextDeadline is the wheel's next deadline, or the Shared's.
func (l *Loop) nextDeadline() (time.Duration, bool) {
	if l.shared == nil {
		return l.w.NextDeadline()
	}
	return l.shared.nextDeadline()
}

// sleep waits until the wheel's next deadline, a kick or a readable watched
// descriptor; it returns at once, having polled the descriptors, if something is
// due already or work arrived meanwhile.
func (l *Loop) sleep() {
	next, ok := l.nextDeadline()
	before := l.clock.Now() // before sleeping is set: a Post that finds it set moved the clock after
	if ok && next <= before {
		return // something is due already: the next turn polls the fds first
	}
	l.mu.Lock()
	if l.kicked {
		l.mu.Unlock()
		return
	}
	park := l.mode == threadParked || l.mode == threadUnlocked && (l.handOff || l.lone || l.quiet && before-l.quietAt < quietSleep)
	l.handOff = false
	if park {
		l.parks.Add(1) // before sleeping is set: a test that sees it set reads the count
	}
	l.sleeping = true
	l.mu.Unlock()
	if l.p.wait(l.clock, next, ok, time.Duration(l.spin.Load()), park) {
		l.wakeups.Add(1)
	}
	now := l.clock.Now()
	if l.lone {
		l.loneSlept(now, now-before)
	}
	if now-before >= quietSleep {
		l.yielded, l.putOff = now, false // a quiet loop: see quietSleep
		l.quietAt, l.quiet = now, true
	}
	l.mu.Lock()
	l.sleeping = false
	l.mu.Unlock()
}
