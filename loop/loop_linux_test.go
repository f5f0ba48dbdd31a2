//go:build linux

package loop

import (
	"errors"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/timer"
	"golang.org/x/sys/unix"
)

func TestLoopRunsOnOneThread(t *testing.T) {
	lockedOnly(t)
	d, w, _ := newTestLoop(t, timer.DefaultTick)
	tids := make(chan int, 3)
	var e timer.Entry
	e.Init(func() { tids <- unix.Gettid() })
	postWait(t, d, func() {
		tids <- unix.Gettid()
		w.Start(&e, time.Millisecond)
	})
	if err := d.Post(func() { tids <- unix.Gettid() }); err != nil {
		t.Fatal(err)
	}
	want := recvWithin(t, tids)
	if want == unix.Gettid() {
		t.Fatal("posted function ran on the test's thread")
	}
	for range 2 {
		if got := recvWithin(t, tids); got != want {
			t.Errorf("ran on thread %d, want the loop's thread %d", got, want)
		}
	}
	var slack int
	postWait(t, d, func() {
		var err error
		slack, err = unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
		if err != nil {
			t.Error(err)
		}
	})
	if slack != 1 {
		t.Errorf("loop thread's timer slack is %d ns, want 1", slack)
	}
}

func TestLoopWatch(t *testing.T) {
	d, w, _ := newTestLoop(t, timer.DefaultTick)
	p := testPipe(t)

	got := make(chan string, 10)
	var e timer.Entry
	e.Init(func() { got <- "timer" })
	onReadable := func() bool {
		buf := make([]byte, 64)
		for {
			n, err := unix.Read(p[0], buf)
			if n <= 0 || err != nil {
				return false
			}
			got <- string(buf[:n])
			// Timers work from fd callbacks, as they will from the TCP stack's.
			if err := w.Start(&e, time.Millisecond); err != nil {
				t.Error(err)
			}
		}
	}
	if err := d.Watch(p[0], onReadable); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(p[1], []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if s := recvWithin(t, got); s != "hello" {
		t.Errorf("read %q, want hello", s)
	}
	if s := recvWithin(t, got); s != "timer" {
		t.Errorf("got %q, want the timer started by the fd callback", s)
	}

	if err := d.Unwatch(p[0]); err != nil {
		t.Fatal(err)
	}
	before := d.Wakeups()
	if _, err := unix.Write(p[1], []byte("ignored")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if n := d.Wakeups() - before; n != 0 {
		t.Errorf("%d wakeups for a removed fd, want 0", n)
	}
	select {
	case s := <-got:
		t.Errorf("removed fd's callback ran and read %q", s)
	default:
	}
	if err := d.Unwatch(p[0]); err == nil {
		t.Error("removing an fd twice: want an error")
	}
	if err := d.Watch(p[0], nil); !errors.Is(err, timer.ErrNoFunc) {
		t.Errorf("Watch(nil): got %v, want timer.ErrNoFunc", err)
	}
	d.Close()
	if err := d.Watch(p[0], onReadable); !errors.Is(err, timer.ErrClosed) {
		t.Errorf("Watch after Close: got %v, want timer.ErrClosed", err)
	}
}

// newTestPoller opens a poller outside any loop, for its sleep and spin.
func newTestPoller(t *testing.T) *poller {
	t.Helper()
	p := new(poller)
	if err := p.open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

func monoNow(t *testing.T) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano()
}

// waitAsync runs p.wait on another goroutine: a spin that ignored events would
// last until the far deadline, and recvWithin fails the test instead of hanging.
func waitAsync(p *poller, clock timer.Clock, next time.Duration, spin time.Duration) <-chan bool {
	c := make(chan bool, 1)
	go func() { c <- p.wait(clock, next, true, spin, false) }()
	return c
}

func TestPollerSpinEndsOnWake(t *testing.T) {
	p := newTestPoller(t)
	clock := timer.NewMonotonicClock()
	// The deadline is inside the window: wait spins from the start. The wake-up
	// is already pending, and must end the spin long before the deadline.
	p.wake()
	if !recvWithin(t, waitAsync(p, clock, clock.Now()+MaxSpin/2, MaxSpin)) {
		t.Error("wait spinning with a wake-up pending reported no event")
	}
	// Nothing left over: the next spin runs to its (near) deadline and reports no event.
	deadline := monoNow(t) + int64(20*time.Microsecond)
	if p.spinUntil(deadline) {
		t.Error("spinUntil reported an event that was consumed already")
	}
	if now := monoNow(t); now < deadline {
		t.Errorf("spinUntil returned %v before its deadline", time.Duration(deadline-now))
	}
}

func TestPollerSpinEndsOnReadableFD(t *testing.T) {
	p := newTestPoller(t)
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if err := p.addReader(fds[0], func() bool { return false }); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(fds[1], []byte{1}); err != nil {
		t.Fatal(err)
	}
	// On another goroutine: a spin deaf to the fd would last the hour.
	c := make(chan bool, 1)
	deadline := monoNow(t) + int64(time.Hour)
	go func() { c <- p.spinUntil(deadline) }()
	if !recvWithin(t, c) {
		t.Error("spinUntil with a readable fd reported no event")
	}
	if len(p.ready) != 1 || p.ready[0] != int32(fds[0]) {
		t.Errorf("ready fds %v, want [%d]", p.ready, fds[0])
	}
}

// TestPollerSpinNeverEarly sleeps to the early alarm and spins the rest, or only
// spins, or only sleeps: wait must return at or after the deadline every time,
// reporting a wake-up exactly when it blocked.
func TestPollerSpinNeverEarly(t *testing.T) {
	p := newTestPoller(t)
	clock := timer.NewMonotonicClock()
	for _, c := range []struct {
		delay, spin time.Duration
		woke        bool
	}{
		// Sleeps are long enough that a slow start of the goroutine cannot turn
		// them into spins.
		{50 * time.Millisecond, 100 * time.Microsecond, true}, // sleep, then spin
		{200 * time.Microsecond, MaxSpin, false},              // spin only
		{50 * time.Millisecond, 0, true},                      // sleep only
	} {
		next := clock.Now() + c.delay
		if woke := recvWithin(t, waitAsync(p, clock, next, c.spin)); woke != c.woke {
			t.Errorf("delay %v, spin %v: wait reported a wake-up %v, want %v", c.delay, c.spin, woke, c.woke)
		}
		if now := clock.Now(); now < next {
			t.Errorf("delay %v, spin %v: wait returned %v early", c.delay, c.spin, next-now)
		}
	}
}

func TestLoopSetSpin(t *testing.T) {
	d, _, _ := newTestLoop(t, timer.DefaultTick)
	for _, bad := range []time.Duration{-1, MaxSpin + 1, time.Hour} {
		if err := d.SetSpin(bad); !errors.Is(err, timer.ErrConfig) {
			t.Errorf("SetSpin(%v) = %v, want timer.ErrConfig", bad, err)
		}
	}
	for _, good := range []time.Duration{0, time.Microsecond, MaxSpin} {
		if err := d.SetSpin(good); err != nil {
			t.Errorf("SetSpin(%v) = %v", good, err)
		}
	}
}

// TestLoopOrderOfWork pins the order of one turn (see the package doc): input
// before expiry. Posted functions first, then readable descriptors, then the
// expiry of due timers, when all three are ready at the same turn.
func TestLoopOrderOfWork(t *testing.T) {
	l, w, _ := newTestLoop(t, timer.DefaultTick)
	p := testPipe(t)

	var order []string // the loop's alone
	done := make(chan []string, 1)
	note := func(what string) {
		order = append(order, what)
		if len(order) == 3 {
			done <- order
		}
	}
	var e timer.Entry
	e.Init(func() { note("expiry") })
	if err := l.Watch(p[0], func() bool {
		drainFD(p[0])
		note("readable")
		return false
	}); err != nil {
		t.Fatal(err)
	}
	// All three become ready inside one expiry callback, the last step of a
	// turn, so the next turn finds them together (an entry made due by a
	// callback fires at the next Advance).
	var setup timer.Entry
	setup.Init(func() {
		// An instant long past: due at the next Advance, not this one.
		if err := w.StartAt(&e, 0); err != nil {
			t.Error(err)
		}
		if _, err := unix.Write(p[1], []byte{1}); err != nil {
			t.Error(err)
		}
		if err := l.Post(func() { note("posted") }); err != nil {
			t.Error(err)
		}
	})
	postWait(t, l, func() {
		if err := w.Start(&setup, 0); err != nil {
			t.Error(err)
		}
	})
	got := recvWithin(t, done)
	if want := []string{"posted", "readable", "expiry"}; !slices.Equal(got, want) {
		t.Errorf("order of work %v, want %v", got, want)
	}
	if err := l.Unwatch(p[0]); err != nil {
		t.Fatal(err)
	}
}

// TestLoopInputStopsDueTimer: a packet (a byte on a pipe) that is waiting when
// the loop wakes late, past a timer's deadline, is handled before the expiry:
// the watch callback stops the timer, which never fires. The loop is held
// busy in a posted function while the deadline passes and the byte arrives:
// the same turn then polls the pipe again before its expiry.
func TestLoopInputStopsDueTimer(t *testing.T) {
	l, w, clock := newTestLoop(t, timer.DefaultTick)
	p := testPipe(t)
	fired := make(chan struct{}, 1)
	handled := make(chan time.Duration, 1)
	var e timer.Entry
	e.Init(func() { fired <- struct{}{} })
	if err := l.Watch(p[0], func() bool {
		drainFD(p[0])
		stopped := w.Stop(&e)
		if !stopped {
			t.Error("the timer was no longer pending when the input was handled")
		}
		handled <- w.Now()
		return false
	}); err != nil {
		t.Fatal(err)
	}
	deadline := inputAfterDeadline(t, l, w, clock, &e, p[1])
	at := recvWithin(t, handled)
	if at <= deadline {
		t.Errorf("input handled with Now %v, want after the deadline %v (a late wake)", at, deadline)
	}
	select {
	case <-fired:
		t.Error("the timer fired although the input that stops it was waiting first")
	case <-time.After(10 * time.Millisecond):
	}
	if err := l.Unwatch(p[0]); err != nil {
		t.Fatal(err)
	}
}

// TestLoopInputAgainBeforeExpiry: the input step of a turn with a due
// timer takes longer than RecheckAfter (the thread preempted, here a
// callback that runs 2 ms), and the ACK that stops the timer arrives during
// it (written to a second pipe by that callback, after the turn's poll): the
// loop looks again before the expiry, so the timer is stopped, not fired.
func TestLoopInputAgainBeforeExpiry(t *testing.T) {
	l, w, clock := newTestLoop(t, timer.DefaultTick)
	first, ack := testPipe(t), testPipe(t)
	fired := make(chan struct{}, 1)
	stopped := make(chan bool, 1)
	var e timer.Entry
	e.Init(func() { fired <- struct{}{} })
	if err := l.Watch(first[0], func() bool {
		drainFD(first[0])
		for start := clock.Now(); clock.Now()-start < 20*RecheckAfter; {
			// busy, as a preempted thread: the ACK comes meanwhile
		}
		if _, err := unix.Write(ack[1], []byte{1}); err != nil {
			t.Error(err)
		}
		return false
	}); err != nil {
		t.Fatal(err)
	}
	if err := l.Watch(ack[0], func() bool {
		drainFD(ack[0])
		stopped <- w.Stop(&e)
		return false
	}); err != nil {
		t.Fatal(err)
	}
	inputAfterDeadline(t, l, w, clock, &e, first[1])
	if !recvWithin(t, stopped) {
		t.Error("the ACK's input found the timer no longer pending: it fired first")
	}
	select {
	case <-fired:
		t.Error("the timer fired although its ACK arrived before the expiry step")
	case <-time.After(10 * time.Millisecond):
	}
	for _, fd := range []int{first[0], ack[0]} {
		if err := l.Unwatch(fd); err != nil {
			t.Fatal(err)
		}
	}
}

// inputAfterDeadline starts e 2 ms out from a posted function that keeps the
// loop busy until the deadline has passed by a millisecond, writes a byte to
// fd meanwhile (input that came before the loop got to the due timer), then
// lets the loop go on; it returns e's deadline.
func inputAfterDeadline(t *testing.T, l *Loop, w *timer.Wheel, clock timer.Clock, e *timer.Entry, fd int) time.Duration {
	t.Helper()
	const delay = 2 * time.Millisecond
	deadlines := make(chan time.Duration, 1)
	hold := make(chan struct{})
	if err := l.Post(func() {
		deadlines <- w.Now() + delay
		if err := w.Start(e, delay); err != nil {
			t.Error(err)
		}
		<-hold // busy: the deadline passes
	}); err != nil {
		t.Fatal(err)
	}
	deadline := recvWithin(t, deadlines)
	for clock.Now() < deadline+time.Millisecond {
		time.Sleep(time.Millisecond)
	}
	if _, err := unix.Write(fd, []byte{1}); err != nil {
		t.Fatal(err)
	}
	close(hold)
	return deadline
}

// testPipe returns a non-blocking pipe, closed at the end of the test.
func testPipe(t *testing.T) [2]int {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	return p
}

// drainFD reads fd until it would block.
func drainFD(fd int) {
	var buf [64]byte
	for {
		if n, err := unix.Read(fd, buf[:]); n <= 0 || err != nil {
			return
		}
	}
}

// requireRootOrSkip skips a test that needs root, unless CI=true, where not
// being root is a failure: CI must run it.
func requireRootOrSkip(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("needs root, and CI=true: run the tests as root")
	}
	t.Skip("needs root")
}

// TestLoopSetRealTime: the loop's thread runs under SCHED_FIFO at the priority
// asked for, keeps working, and goes back to normal scheduling with 0.
func TestLoopSetRealTime(t *testing.T) {
	lockedOnly(t)
	requireRootOrSkip(t)
	l, w, _ := newTestLoop(t, timer.DefaultTick)
	policy := func() (uint32, uint32) {
		t.Helper()
		a, err := unix.SchedGetAttr(l.ThreadID(), 0)
		if err != nil {
			t.Fatal(err)
		}
		return a.Policy, a.Priority
	}
	if err := l.SetRealTime(10); err != nil {
		t.Fatalf("SetRealTime(10) as root: %v", err)
	}
	if pol, prio := policy(); pol != unix.SCHED_FIFO || prio != 10 {
		t.Fatalf("loop thread policy %d priority %d, want SCHED_FIFO (%d) at 10", pol, prio, unix.SCHED_FIFO)
	}
	fired := make(chan struct{})
	postWait(t, l, func() {
		if _, err := w.AfterFunc(time.Millisecond, func() { close(fired) }); err != nil {
			t.Error(err)
		}
	})
	recvWithin(t, fired)
	if err := l.SetRealTime(0); err != nil {
		t.Fatal(err)
	}
	if pol, _ := policy(); pol != unix.SCHED_NORMAL {
		t.Fatalf("loop thread policy %d after SetRealTime(0), want SCHED_NORMAL", pol)
	}
	for _, bad := range []int{-1, MaxRealTime + 1} {
		if err := l.SetRealTime(bad); !errors.Is(err, timer.ErrConfig) {
			t.Errorf("SetRealTime(%d): %v, want timer.ErrConfig", bad, err)
		}
	}
	l.Close()
	if err := l.SetRealTime(10); !errors.Is(err, timer.ErrClosed) {
		t.Errorf("SetRealTime after Close: %v, want timer.ErrClosed", err)
	}
}

// TestLoopDefersExpiryWhileInputRemains: a due timer waits while the watched
// descriptor's callback reports that it left input behind (a bounded batch,
// here one byte per turn), so that the input waiting when the timer came due
// is all handled before it fires; the next turn with nothing left fires it.
func TestLoopDefersExpiryWhileInputRemains(t *testing.T) {
	l, w, _ := newTestLoop(t, timer.DefaultTick)
	p := testPipe(t)
	const bytes = 10
	var read int // the loop's alone
	fired := make(chan int, 1)
	var e timer.Entry
	e.Init(func() { fired <- read })
	if err := l.Watch(p[0], func() bool {
		var b [1]byte
		if n, err := unix.Read(p[0], b[:]); n <= 0 || err != nil {
			return false
		}
		read++
		return true // one byte per turn: maybe more behind it
	}); err != nil {
		t.Fatal(err)
	}
	if err := l.Post(func() {
		// Due at once, with the input already waiting.
		if err := w.StartAt(&e, 0); err != nil {
			t.Error(err)
		}
		if _, err := unix.Write(p[1], make([]byte, bytes)); err != nil {
			t.Error(err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if got := recvWithin(t, fired); got != bytes {
		t.Errorf("the due timer fired after %d of the %d bytes waiting; want after all of them", got, bytes)
	}
	if d := l.DeferredExpiries(); d < bytes {
		t.Errorf("DeferredExpiries %d, want at least %d", d, bytes)
	}
	if err := l.Unwatch(p[0]); err != nil {
		t.Fatal(err)
	}
}

// TestLoopDeferredExpiryIsBounded: input that never drains (a callback that
// always reports more, on a descriptor that stays readable) holds a due timer
// back for MaxDeferredTurns turns, no more: a flood cannot starve the timers;
// SetDeferredTurns moves the bound, and refuses one outside its range.
func TestLoopDeferredExpiryIsBounded(t *testing.T) {
	for _, turns := range []int{0, 1000} { // 0: the default
		l, w, _ := newTestLoop(t, timer.DefaultTick)
		want := MaxDeferredTurns
		if turns > 0 {
			if err := l.SetDeferredTurns(turns); err != nil {
				t.Fatal(err)
			}
			want = turns
		}
		p := testPipe(t)
		if _, err := unix.Write(p[1], []byte{1}); err != nil { // readable for good
			t.Fatal(err)
		}
		calls := 0 // the loop's alone
		fired := make(chan int, 1)
		var e timer.Entry
		e.Init(func() { fired <- calls })
		watch := func() bool {
			calls++
			return true
		}
		postWait(t, l, func() {
			calls = 0
			if err := w.StartAt(&e, 0); err != nil {
				t.Error(err)
			}
			if err := l.Watch(p[0], watch); err != nil {
				t.Error(err)
			}
		})
		// The turn that finds it due and the turns that hold it back each
		// call the callback; the last of them also fires the timer.
		if got := recvWithin(t, fired); got != want+1 {
			t.Errorf("bound %d: the timer fired after %d batches of endless input; want %d", want, got, want+1)
		}
		if err := l.Unwatch(p[0]); err != nil {
			t.Fatal(err)
		}
	}
	l, _, _ := newTestLoop(t, timer.DefaultTick)
	for _, n := range []int{0, -1, MaxDeferredTurnsLimit + 1} {
		if err := l.SetDeferredTurns(n); !errors.Is(err, timer.ErrConfig) {
			t.Errorf("SetDeferredTurns(%d) = %v, want timer.ErrConfig", n, err)
		}
	}
}

// TestLoopThreadModes: a parked loop (NewParked) and an unlocked one
// (NewUnlocked) have no thread of their own (ThreadID 0, SetRealTime refused
// but for 0), and run posted functions, timers and a watched descriptor's
// callback. While it sleeps a parked loop's goroutine waits in Go's
// netpoller ("IO wait" in a goroutine dump), an unlocked one's in a system
// call, not locked to a thread, and a locked one's in a system call, locked
// to its thread.
func TestLoopThreadModes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		newLoop   func(*timer.Wheel) (*Loop, error)
		parked    bool
		locked    bool
		want, not string
	}{
		{"locked", New, false, true, "[syscall, locked to thread]", "IO wait"},
		{"parked", NewParked, true, false, "[IO wait", "locked to thread"},
		// Idle, an unlocked loop sleeps in the netpoller too (quietSleep;
		// busy, in epoll_wait: TestLoopQuietSleepParks).
		{"unlocked", NewUnlocked, false, false, "[IO wait", "locked to thread"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, w := startLoop(t, tc.newLoop)
			if l.Parked() != tc.parked || l.Locked() != tc.locked || (l.ThreadID() != 0) != tc.locked {
				t.Fatalf("Parked %v, Locked %v, ThreadID %d; want %v, %v, a thread id if locked", l.Parked(), l.Locked(), l.ThreadID(), tc.parked, tc.locked)
			}
			if !tc.locked {
				if err := l.SetRealTime(10); err == nil || !strings.Contains(err.Error(), "no thread of its own") {
					t.Fatalf("SetRealTime(10): %v, want an error that says why", err)
				}
				if err := l.SetRealTime(0); err != nil {
					t.Fatalf("SetRealTime(0): %v", err)
				}
			}
			var goid string
			postWait(t, l, func() { goid = goroutineID() })
			// A timer and a watched pipe, each answered on the loop.
			fired := make(chan string, 2)
			var e timer.Entry
			e.Init(func() { fired <- "timer" })
			postWait(t, l, func() { w.Start(&e, 2*time.Millisecond) })
			if got := recvWithin(t, fired); got != "timer" {
				t.Fatalf("got %q", got)
			}
			p := testPipe(t)
			if err := l.Watch(p[0], func() bool {
				buf := make([]byte, 8)
				n, _ := unix.Read(p[0], buf)
				fired <- string(buf[:n])
				return false
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := unix.Write(p[1], []byte("ping")); err != nil {
				t.Fatal(err)
			}
			if got := recvWithin(t, fired); got != "ping" {
				t.Fatalf("got %q", got)
			}
			if err := l.Unwatch(p[0]); err != nil {
				t.Fatal(err)
			}
			// Asleep with nothing pending, after a sleep of quietSleep or
			// more: where does its goroutine wait?
			time.Sleep(2 * quietSleep)
			postWait(t, l, func() {})
			var state string
			for range 500 {
				state = goroutineState(goid)
				if strings.Contains(state, tc.want) && !strings.Contains(state, tc.not) {
					break
				}
				time.Sleep(time.Millisecond)
			}
			if !strings.Contains(state, tc.want) || strings.Contains(state, tc.not) {
				t.Fatalf("the sleeping loop's goroutine: %q, want %q and not %q", state, tc.want, tc.not)
			}
		})
	}
}

// startLoop starts a loop with newLoop (New, NewParked, NewUnlocked) on a
// wheel of its own, closed at the test's end.
func startLoop(t *testing.T, newLoop func(*timer.Wheel) (*Loop, error)) (*Loop, *timer.Wheel) {
	t.Helper()
	w, err := timer.New(timer.Config{Clock: timer.NewMonotonicClock()})
	if err != nil {
		t.Fatal(err)
	}
	l, err := newLoop(w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, w
}

// goroutineState is the header line of goroutine id's stack in a dump of
// all goroutines ("goroutine 7 [IO wait]:"), or "".
func goroutineState(id string) string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, block := range strings.Split(string(buf), "\n\n") {
		if line, _, _ := strings.Cut(block, "\n"); strings.HasPrefix(line, "goroutine "+id+" ") {
			return line
		}
	}
	return ""
}

// TestLoopYieldToWoken: with one P, a callback that wakes a goroutine whose
// work comes straight back (it posts to the loop) and says so
// (YieldToWoken) has an unlocked loop yield its P before it sleeps: the
// goroutine runs first, its post finds the loop awake, and no wakeup is
// needed for it. Without the call, or on a locked or parked loop (which
// ignore it), the loop sleeps first and the post wakes it.
func TestLoopYieldToWoken(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const rounds = 40
	for _, tc := range []struct {
		name    string
		newLoop func(*timer.Wheel) (*Loop, error)
		hint    bool
		yields  bool // the loop yields for the hint
	}{
		{"unlocked", NewUnlocked, true, true},
		{"unlocked without the call", NewUnlocked, false, false},
		{"locked", New, true, false},
		{"parked", NewParked, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := startLoop(t, tc.newLoop)
			wake, back := make(chan struct{}), make(chan struct{}, 1)
			go func() { // the woken goroutine: it posts back at once
				for range wake {
					if err := l.Post(func() { back <- struct{}{} }); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			defer close(wake)
			postWait(t, l, func() {}) // started
			before := l.Wakeups()
			for range rounds {
				if err := l.Post(func() {
					wake <- struct{}{} // readies the goroutine on this P
					if tc.hint {
						l.YieldToWoken()
					}
				}); err != nil {
					t.Fatal(err)
				}
				recvWithin(t, back)
			}
			// Each round's first post (this goroutine's) wakes the
			// sleeping loop; the second (the woken goroutine's) does
			// unless the loop yielded to it first.
			wakeups, yields := l.Wakeups()-before, l.WokenYields()
			t.Logf("%d rounds: %d wakeups, %d yields", rounds, wakeups, yields)
			if tc.yields {
				// The runtime takes its global queue first once in 61
				// schedules: then the loop sleeps first, and is woken.
				if yields != rounds || wakeups > rounds+rounds/4 {
					t.Fatalf("%d rounds: %d wakeups, %d yields; want %d yields and at most %d wakeups", rounds, wakeups, yields, rounds, rounds+rounds/4)
				}
				return
			}
			if yields != 0 || wakeups < rounds+rounds/2 {
				t.Fatalf("%d rounds: %d wakeups, %d yields; want no yield, and at least %d wakeups", rounds, wakeups, yields, rounds+rounds/2)
			}
		})
	}
}
