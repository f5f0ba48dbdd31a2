package loop

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/timer"
)

// Tests of the Loop and Shared run on the real clock: they assert orderings and
// generous upper bounds, never tight timings.

// waitTimeout is how long a real-clock test waits for something that should take
// milliseconds.
const waitTimeout = 5 * time.Second

func newTestLoop(t *testing.T, tick time.Duration) (*Loop, *timer.Wheel, *timer.MonotonicClock) {
	t.Helper()
	clock := timer.NewMonotonicClock()
	d, w := newLoopWith(t, timer.Config{Tick: tick, Clock: clock})
	return d, w, clock
}

// loopThread makes newLoopWith's loops parked (NewParked) or unlocked
// (NewUnlocked) ones: `make test` runs the package's tests again with
// -loop.thread=parked and -loop.thread=unlocked.
var loopThread = flag.String("loop.thread", "locked", "run the loop tests on locked (New), parked (NewParked) or unlocked (NewUnlocked) loops")

// lockedOnly skips a test of what a locked loop has and the others have not
// (its own thread), in the -loop.thread runs; TestLoopThreadModes tests
// those.
func lockedOnly(t *testing.T) {
	t.Helper()
	if *loopThread != "locked" {
		t.Skipf("a locked loop's own thread: not a%s %s loop's (-loop.thread)", map[bool]string{true: "n"}[*loopThread == "unlocked"], *loopThread)
	}
}

// newLoopWith returns a loop on a new wheel of cfg, closed at the end.
func newLoopWith(t *testing.T, cfg timer.Config) (*Loop, *timer.Wheel) {
	t.Helper()
	w, err := timer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	newLoop := map[string]func(*timer.Wheel) (*Loop, error){"locked": New, "parked": NewParked, "unlocked": NewUnlocked}[*loopThread]
	if newLoop == nil {
		t.Fatalf("-loop.thread %q: want locked, parked or unlocked", *loopThread)
	}
	d, err := newLoop(w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, w
}

// postWait posts f and waits for it to have run.
func postWait(t *testing.T, d *Loop, f func()) {
	t.Helper()
	done := make(chan struct{})
	if err := d.Post(func() { f(); close(done) }); err != nil {
		t.Fatal(err)
	}
	recvWithin(t, done)
}

func recvWithin[T any](t *testing.T, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("nothing received after %v", waitTimeout)
		panic("unreachable")
	}
}

func TestLoopFiresNeverEarly(t *testing.T) {
	for _, tick := range []time.Duration{timer.MinTick, timer.DefaultTick, time.Millisecond} {
		t.Run("tick="+tick.String(), func(t *testing.T) {
			d, w, clock := newTestLoop(t, tick)
			const n = 50
			type result struct{ deadline, fired time.Duration }
			results := make(chan result, n)
			entries := make([]timer.Entry, n)
			rng := rand.New(rand.NewPCG(1, uint64(tick)))
			postWait(t, d, func() {
				for i := range entries {
					e := &entries[i]
					deadline := clock.Now() + time.Duration(rng.IntN(10_000))*time.Microsecond
					e.Init(func() { results <- result{deadline, clock.Now()} })
					if err := w.StartAt(e, deadline); err != nil {
						t.Error(err)
					}
				}
			})
			for range n {
				r := recvWithin(t, results)
				if r.fired < r.deadline {
					t.Errorf("fired at %v, before its deadline %v", r.fired, r.deadline)
				}
			}
		})
	}
}

func TestLoopStartFromPostMeasuresFromNow(t *testing.T) {
	d, w, clock := newTestLoop(t, timer.DefaultTick)
	// Let the loop sleep a while so that a stale Now would show.
	time.Sleep(20 * time.Millisecond)
	fired := make(chan time.Duration, 1)
	var posted time.Duration
	var e timer.Entry
	e.Init(func() { fired <- clock.Now() })
	const delay = 5 * time.Millisecond
	postWait(t, d, func() {
		posted = clock.Now()
		if err := w.Start(&e, delay); err != nil {
			t.Error(err)
		}
	})
	// The loop advances the wheel just before running posted functions, so
	// Start measures from a reading taken at most a few µs before posted.
	if got := recvWithin(t, fired); got < posted+delay-time.Millisecond {
		t.Errorf("fired %v after the post, want about %v or more", got-posted, delay)
	}
}

func TestLoopCallbackRearmsAndPosts(t *testing.T) {
	d, w, _ := newTestLoop(t, timer.DefaultTick)
	const rounds = 20
	var e timer.Entry
	count := 0
	done := make(chan int, 1)
	e.Init(func() {
		count++
		if count < rounds {
			if err := w.Start(&e, 200*time.Microsecond); err != nil {
				t.Error(err)
			}
			return
		}
		// Post from the loop's own goroutine: runs on the next loop.
		if err := d.Post(func() { done <- count }); err != nil {
			t.Error(err)
		}
	})
	postWait(t, d, func() {
		if err := w.Start(&e, 0); err != nil {
			t.Error(err)
		}
	})
	if got := recvWithin(t, done); got != rounds {
		t.Errorf("got %d rounds, want %d", got, rounds)
	}
}

func TestLoopPostOrder(t *testing.T) {
	d, _, _ := newTestLoop(t, timer.DefaultTick)
	const n = 1000
	var got []int // touched only on the loop goroutine
	for i := range n {
		if err := d.Post(func() { got = append(got, i) }); err != nil {
			t.Fatal(err)
		}
	}
	postWait(t, d, func() {
		for i, v := range got {
			if v != i {
				t.Fatalf("posted function %d ran in place %d", v, i)
			}
		}
		if len(got) != n {
			t.Errorf("%d posted functions ran, want %d", len(got), n)
		}
	})
}

func TestLoopIdleHasNoWakeups(t *testing.T) {
	d, w, _ := newTestLoop(t, timer.MinTick)
	var e timer.Entry
	e.Init(func() {})
	// Arm a timer (the loop sleeps on it), then stop it: the loop must
	// disarm its timerfd rather than wake for nothing 40 ms later.
	postWait(t, d, func() {
		if err := w.Start(&e, 40*time.Millisecond); err != nil {
			t.Error(err)
		}
	})
	stopped := false
	postWait(t, d, func() { stopped = w.Stop(&e) })
	if !stopped {
		t.Skip("the timer fired before it could be stopped: the machine stalled")
	}
	before, loops := d.Wakeups(), d.loops.Load()
	time.Sleep(80 * time.Millisecond)
	if got := d.Wakeups() - before; got != 0 {
		t.Errorf("%d wakeups while idle, want 0", got)
	}
	if got := d.loops.Load() - loops; got != 0 {
		t.Errorf("%d loop turns while idle, want 0", got)
	}
}

func TestLoopSleepsUntilNonEmptyTick(t *testing.T) {
	// A 30 ms timer on a 10µs wheel is 3000 ticks away: the loop wakes for the
	// cascade to a lower level and for the expiry, not for every tick.
	d, w, _ := newTestLoop(t, timer.MinTick)
	fired := make(chan struct{})
	var e timer.Entry
	e.Init(func() { close(fired) })
	var before uint64
	postWait(t, d, func() {
		before = d.loops.Load()
		if err := w.Start(&e, 30*time.Millisecond); err != nil {
			t.Error(err)
		}
	})
	recvWithin(t, fired)
	if got := d.loops.Load() - before; got > 10 {
		t.Errorf("%d loop turns for one 30 ms timer on a 10µs wheel, want a few", got)
	}
}

func TestLoopClose(t *testing.T) {
	d, w, _ := newTestLoop(t, timer.DefaultTick)
	ran := 0
	for range 10 {
		if err := d.Post(func() { ran++ }); err != nil {
			t.Fatal(err)
		}
	}
	var e timer.Entry
	e.Init(func() {})
	if err := d.Post(func() { w.Start(&e, time.Hour) }); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.done:
	default:
		t.Fatal("goroutine still running after Close")
	}
	if ran != 10 {
		t.Errorf("%d of 10 functions posted before Close ran", ran)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := d.Post(func() {}); !errors.Is(err, timer.ErrClosed) {
		t.Errorf("Post after Close: got %v, want timer.ErrClosed", err)
	}
	// The wheel is the caller's again, with its entry still pending.
	if !e.Pending() || w.Len() != 1 {
		t.Errorf("pending %v, Len %d after Close: want the entry still pending", e.Pending(), w.Len())
	}
}

func TestLoopCloseFromCallback(t *testing.T) {
	d, w, _ := newTestLoop(t, timer.DefaultTick)
	closed := make(chan error, 1)
	var e timer.Entry
	e.Init(func() { closed <- d.Close() })
	postWait(t, d, func() { w.Start(&e, time.Millisecond) })
	if err := recvWithin(t, closed); err != nil {
		t.Fatal(err)
	}
	recvWithin(t, d.done)
}

func TestLoopConcurrentPost(t *testing.T) {
	d, _, _ := newTestLoop(t, timer.DefaultTick)
	const goroutines, per = 8, 500
	count := 0 // the loop goroutine's
	var posted atomic.Int64
	done := make(chan struct{})
	for range goroutines {
		go func() {
			for range per {
				if err := d.Post(func() { count++ }); err != nil {
					t.Error(err)
				}
				posted.Add(1)
			}
			done <- struct{}{}
		}()
	}
	for range goroutines {
		recvWithin(t, done)
	}
	postWait(t, d, func() {
		if count != goroutines*per {
			t.Errorf("%d posted functions ran, want %d", count, goroutines*per)
		}
	})
}

// TestLoopPostedBatchSeesFreshNow: functions posted together run in one batch;
// each sees the wheel advanced to the clock as it reads when it runs, so the
// second sees the time the first took (here, the manual clock it moved).
func TestLoopPostedBatchSeesFreshNow(t *testing.T) {
	clk := timer.NewManualClock(0)
	d, w := newLoopWith(t, timer.Config{Clock: clk})
	hold, busy := make(chan struct{}), make(chan struct{})
	if err := d.Post(func() { close(busy); <-hold }); err != nil {
		t.Fatal(err)
	}
	recvWithin(t, busy) // the loop is busy: the next two queue up together
	seen := make(chan time.Duration, 1)
	if err := d.Post(func() { clk.Advance(5 * time.Millisecond) }); err != nil {
		t.Fatal(err)
	}
	if err := d.Post(func() { seen <- w.Now() }); err != nil {
		t.Fatal(err)
	}
	close(hold)
	if got := recvWithin(t, seen); got != 5*time.Millisecond {
		t.Fatalf("the second function of the batch saw Now = %v, want 5ms (the clock when it ran)", got)
	}
}

// TestLoopYieldsEvery: the loop yields its P at the end of the first turn
// YieldEvery or more after its last yield (on its clock), and not before.
// The clock moves inside the turns here, never while the loop sleeps: a
// busy loop (TestLoopQuietSleep has the other kind).
func TestLoopYieldsEvery(t *testing.T) {
	clk := timer.NewManualClock(0)
	d, _ := newLoopWith(t, timer.Config{Clock: clk})
	// turn runs a turn that moves the clock to at and waits for the turn
	// after it, so that the first one's end (where the loop yields) is
	// behind us.
	turn := func(at time.Duration) uint64 {
		t.Helper()
		postWait(t, d, func() { clk.Set(at) })
		postWait(t, d, func() {})
		return d.yields.Load()
	}
	for _, c := range []struct {
		at   time.Duration
		want uint64
	}{
		{0, 0},
		{YieldEvery - 1, 0},
		{YieldEvery, 1},
		{2*YieldEvery - 1, 1},
		{2 * YieldEvery, 2},
		{10 * YieldEvery, 3}, // once, however long since the last
		{10*YieldEvery + YieldEvery/2, 3},
	} {
		if got := turn(c.at); got != c.want {
			t.Fatalf("at %v: %d yields, want %d", c.at, got, c.want)
		}
	}
}

// TestLoopQuietSleep: a sleep of quietSleep or more (the clock moved while
// the loop slept) counts as a yield: the turn after it does not yield, and
// the next yield comes YieldEvery after the wake; a shorter sleep does not
// count.
func TestLoopQuietSleep(t *testing.T) {
	clk := timer.NewManualClock(0)
	d, _ := newLoopWith(t, timer.Config{Clock: clk})
	// asleepUntil moves the clock while the loop sleeps, then wakes it
	// with a turn, and a second one so that the first one's end is behind
	// us; busyUntil moves the clock inside a turn.
	asleepUntil := func(at time.Duration) uint64 {
		t.Helper()
		wakeAfter(t, d, clk, at-clk.Now())
		postWait(t, d, func() {})
		return d.yields.Load()
	}
	busyUntil := func(at time.Duration) uint64 {
		t.Helper()
		postWait(t, d, func() { clk.Set(at) })
		postWait(t, d, func() {})
		return d.yields.Load()
	}
	const ms = time.Millisecond
	for i, c := range []struct {
		asleep bool
		at     time.Duration
		want   uint64
	}{
		{true, 10 * ms, 0},                             // quiet: counts as the yield
		{false, 10*ms + YieldEvery - 1, 0},             // YieldEvery after the wake: not yet
		{false, 10*ms + YieldEvery, 1},                 // now
		{true, 10*ms + YieldEvery + quietSleep - 1, 1}, // a short sleep does not count...
		{false, 10*ms + 2*YieldEvery, 2},               // ...so the clock ran on from the yield
		{true, 50 * ms, 2},                             // quiet again
		{false, 50*ms + YieldEvery, 3},
	} {
		var got uint64
		if c.asleep {
			got = asleepUntil(c.at)
		} else {
			got = busyUntil(c.at)
		}
		if got != c.want {
			t.Fatalf("step %d (asleep %v until %v): %d yields, want %d", i, c.asleep, c.at, got, c.want)
		}
	}
}

// TestLoopQuietSleepParks: an unlocked loop sleeps in Go's netpoller for
// quietSleep (on its clock) after a sleep of quietSleep or more, and in
// epoll_wait otherwise; a parked loop always sleeps in the netpoller, a locked
// one never (NetpollSleeps).
func TestLoopQuietSleepParks(t *testing.T) {
	clk := timer.NewManualClock(0)
	d, _ := newLoopWith(t, timer.Config{Clock: clk})
	// next wakes the loop from the sleep it is in, after moving the clock
	// by asleep, and returns how many of its sleeps were in the netpoller
	// once it sleeps again.
	next := func(asleep time.Duration) uint64 {
		t.Helper()
		wakeAfter(t, d, clk, asleep)
		waitAsleep(t, d)
		return d.NetpollSleeps()
	}
	for i, c := range []struct {
		asleep time.Duration
		parks  bool // whether the sleep after it is in the netpoller (unlocked)
	}{
		{0, false},              // busy: epoll_wait
		{quietSleep, true},      // quiet: the netpoller...
		{quietSleep - 1, true},  // ...for quietSleep after it
		{0, true},               //
		{1, false},              // quietSleep after: epoll_wait again
		{0, false},              //
		{time.Second, true},     // quiet again
		{10 * quietSleep, true}, // and again
		{quietSleep - 1, true},  //
		{1, false},              //
	} {
		want := map[string]bool{"locked": false, "parked": true, "unlocked": c.parks}[*loopThread]
		before := d.NetpollSleeps()
		if got := next(c.asleep) - before; got != map[bool]uint64{false: 0, true: 1}[want] {
			t.Fatalf("step %d: after a sleep of %v, %d sleeps in the netpoller, want %v (-loop.thread %s)", i, c.asleep, got, want, *loopThread)
		}
	}
}

// wakeAfter waits until d sleeps, moves clk by asleep and wakes d with a
// turn.
func wakeAfter(t *testing.T, d *Loop, clk *timer.ManualClock, asleep time.Duration) {
	t.Helper()
	waitAsleep(t, d)
	clk.Set(clk.Now() + asleep)
	postWait(t, d, func() {})
}

// waitAsleep waits until d's goroutine is about to block in its poller, or
// blocks there (Loop.sleeping).
func waitAsleep(t *testing.T, d *Loop) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		d.mu.Lock()
		asleep := d.sleeping
		d.mu.Unlock()
		if asleep {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the loop did not go to sleep within %v", waitTimeout)
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// TestLoopYieldWaitsForDueTimer: a timer due within the spin window and
// yieldRoom puts the yield off, for YieldEvery at most.
func TestLoopYieldWaitsForDueTimer(t *testing.T) {
	clk := timer.NewManualClock(0)
	d, w := newLoopWith(t, timer.Config{Clock: clk})
	if err := d.SetSpin(0); err != nil {
		t.Fatal(err)
	}
	var e timer.Entry
	e.Init(func() {})
	// at moves the clock to now and (re)starts the timer at due (none for
	// 0), in one posted function, waits for the turn after that one (so
	// that its end, where the loop yields, is behind us), and returns the
	// yields so far.
	at := func(now, due time.Duration) uint64 {
		t.Helper()
		postWait(t, d, func() {
			clk.Set(now)
			w.Stop(&e)
			if due == 0 {
				return
			}
			if err := w.StartAt(&e, due); err != nil {
				t.Error(err)
			}
		})
		postWait(t, d, func() {})
		return d.yields.Load()
	}
	const ms = time.Millisecond
	tick := timer.DefaultTick // the wheel's deadlines are on its ticks
	for _, c := range []struct {
		now, due time.Duration
		want     uint64
	}{
		{YieldEvery, YieldEvery + yieldRoom - tick, 0}, // put off from 2 ms
		{2*YieldEvery - 1, 2*YieldEvery + tick, 0},
		{2 * YieldEvery, 2*YieldEvery + tick, 1}, // YieldEvery put off: yields
		{3*YieldEvery - 1, 0, 1},
		{3 * YieldEvery, 0, 2},       // no timer: yields
		{100 * ms, 100*ms + tick, 2}, // a wake-up at its timer, long after
		{100*ms + tick, 0, 3},        // the turn after it yields
		{100*ms + tick + YieldEvery, 100*ms + YieldEvery + 2*tick, 3},
		{100*ms + 2*YieldEvery, 100*ms + 2*YieldEvery + tick, 3},
		{100*ms + tick + 2*YieldEvery, 100*ms + 2*YieldEvery + 2*tick, 4},
	} {
		if got := at(c.now, c.due); got != c.want {
			t.Fatalf("at %v with a timer due at %v: %d yields, want %d", c.now, c.due, got, c.want)
		}
	}
}

// TestLoopParkForWoken: after a turn whose callback called ParkForWoken,
// an unlocked loop's next sleep, and only that one, is in the netpoller;
// other loops sleep as they always do.
func TestLoopParkForWoken(t *testing.T) {
	clk := timer.NewManualClock(0)
	d, _ := newLoopWith(t, timer.Config{Clock: clk})
	for i, c := range []struct {
		hint  bool
		parks bool // unlocked
	}{
		{false, false},
		{true, true},
		{false, false}, // once
		{true, true},
		{true, true},
		{false, false},
	} {
		want := map[string]bool{"locked": false, "parked": true, "unlocked": c.parks}[*loopThread]
		waitAsleep(t, d)
		before := d.NetpollSleeps()
		postWait(t, d, func() {
			if c.hint {
				d.ParkForWoken()
			}
		})
		waitAsleep(t, d)
		if got := d.NetpollSleeps() - before; got != map[bool]uint64{false: 0, true: 1}[want] {
			t.Fatalf("step %d (hint %v): %d sleeps in the netpoller, want %v (-loop.thread %s)", i, c.hint, got, want, *loopThread)
		}
	}
}

// TestLoopLoneExchange: an unlocked loop told of a lone exchange sleeps in
// the netpoller, every sleep, until told it is over, or until
// loneStrikes sleeps in a row have lasted lonePeerAway or more (a peer in
// another process); then no spell starts for a backoff, which doubles at
// each spell that ends so and is the shortest again after loneNearRun
// short sleeps in a row. Sleeps that the
// test lets last long move the manual clock while the loop sleeps. A
// parked loop always sleeps in the netpoller, a locked one never.
func TestLoopLoneExchange(t *testing.T) {
	clk := timer.NewManualClock(0)
	d, _ := newLoopWith(t, timer.Config{Clock: clk})
	mode := *loopThread
	// step posts f (if not nil), after the clock moved by slept while
	// the loop slept, and returns whether the loop's next sleep was in the
	// netpoller.
	step := func(slept time.Duration, f func()) bool {
		t.Helper()
		waitAsleep(t, d)
		clk.Set(clk.Now() + slept)
		before := d.NetpollSleeps()
		postWait(t, d, func() {
			if f != nil {
				f()
			}
		})
		waitAsleep(t, d)
		return d.NetpollSleeps()-before == 1
	}
	want := func(unlocked bool) bool {
		return map[string]bool{"locked": false, "parked": true, "unlocked": unlocked}[mode]
	}
	check := func(at string, got, unlocked bool) {
		t.Helper()
		if got != want(unlocked) {
			t.Fatalf("%s: a sleep in the netpoller %v, want %v (-loop.thread %s)", at, got, want(unlocked), mode)
		}
	}
	on := func() { d.LoneExchange(true) }
	off := func() { d.LoneExchange(false) }

	check("before any", step(0, nil), false)
	check("told of a lone exchange", step(0, on), true)
	for i := range 5 {
		check(fmt.Sprintf("short sleep %d of the spell", i), step(time.Microsecond, nil), true)
	}
	check("told it is over", step(0, off), false)
	check("after it", step(0, nil), false)

	check("a spell again", step(0, on), true)
	for i := range loneStrikes - 1 {
		check(fmt.Sprintf("long sleep %d of the spell", i), step(lonePeerAway, nil), true)
	}
	check("a short sleep between", step(0, nil), true) // the strikes start over
	for i := range loneStrikes - 1 {
		check(fmt.Sprintf("long sleep %d after it", i), step(lonePeerAway, nil), true)
	}
	check(fmt.Sprintf("the %dth long sleep in a row", loneStrikes), step(lonePeerAway, nil), false)
	check("told again within the backoff", step(0, on), false)
	// pass lets d pass in sleeps shorter than quietSleep (a longer one would
	// start a quiet spell), told of nothing.
	pass := func(d time.Duration) {
		t.Helper()
		for ; d > 0; d -= quietSleep / 2 {
			check("waiting", step(min(d, quietSleep/2), nil), false)
		}
	}
	pass(loneBackoffMin)
	check("told again at its end", step(0, on), true)
	// A second spell that ends: twice the backoff.
	longs := func(at string) {
		t.Helper()
		for i := range loneStrikes - 1 {
			check(fmt.Sprintf("%s: long sleep %d", at, i), step(lonePeerAway, nil), true)
		}
		check(fmt.Sprintf("%s: the last long sleep", at), step(lonePeerAway, nil), false)
	}
	longs("the third spell")
	pass(loneBackoffMin)
	check("told again after the first backoff", step(0, on), false)
	pass(loneBackoffMin)
	check("told again after twice it", step(0, on), true)
	// Short sleeps in a row: the backoff is the shortest again.
	for i := range loneNearRun {
		check(fmt.Sprintf("short sleep %d", i), step(0, nil), true)
	}
	longs("the fourth spell")
	pass(loneBackoffMin)
	check("told again after the shortest backoff", step(0, on), true)
	if mode == "unlocked" && d.LoneSpells() != 5 {
		t.Fatalf("%d spells, want 5", d.LoneSpells())
	}
}
