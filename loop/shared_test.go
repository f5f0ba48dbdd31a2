package loop

import (
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/timer"
)

func newTestShared(t *testing.T, cfg timer.Config) *Shared {
	t.Helper()
	s, err := NewShared(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// barrier waits until every callback collected before the call has run: the
// loop runs a batch of due entries to the end before it advances again.
func barrier(t *testing.T, s *Shared) {
	t.Helper()
	done := make(chan struct{})
	if _, err := s.AfterFunc(0, func() { close(done) }); err != nil {
		t.Fatal(err)
	}
	recvWithin(t, done)
}

func TestSharedAfterFuncNeverEarly(t *testing.T) {
	clock := timer.NewMonotonicClock()
	s := newTestShared(t, timer.Config{Clock: clock})
	const n = 50
	type result struct{ deadline, fired time.Duration }
	results := make(chan result, n)
	for i := range n {
		d := time.Duration(i%10) * time.Millisecond
		deadline := clock.Now() + d // read before Start: Start's reading is later
		if _, err := s.AfterFunc(d, func() { results <- result{deadline, clock.Now()} }); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		r := recvWithin(t, results)
		if r.fired < r.deadline {
			t.Errorf("fired at %v, before its deadline %v", r.fired, r.deadline)
		}
	}
}

func TestSharedStartMeasuresFromFreshClock(t *testing.T) {
	// On a manual clock the loop's wheel stays at 0 until the loop looks at
	// it; a Start measured from that stale Now would be due at once.
	clock := timer.NewManualClock(0)
	s := newTestShared(t, timer.Config{Clock: clock})
	clock.Advance(10 * time.Second)
	fired := make(chan time.Duration, 1)
	if _, err := s.AfterFunc(5*time.Millisecond, func() { fired <- clock.Now() }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	select {
	case at := <-fired:
		t.Fatalf("fired at %v on the manual clock, want 10.005s or later", at)
	default:
	}
	clock.Advance(5 * time.Millisecond)
	if got := recvWithin(t, fired); got < 10*time.Second+5*time.Millisecond {
		t.Errorf("fired at %v, want 10.005s or later", got)
	}
}

func TestSharedEarlierStartWakesLoop(t *testing.T) {
	s := newTestShared(t, timer.Config{})
	if _, err := s.AfterFunc(time.Hour, func() {}); err != nil {
		t.Fatal(err)
	}
	// Let the loop go to sleep on the hour-long timer (or its cascade).
	time.Sleep(10 * time.Millisecond)
	fired := make(chan time.Time, 1)
	start := time.Now()
	if _, err := s.AfterFunc(2*time.Millisecond, func() { fired <- time.Now() }); err != nil {
		t.Fatal(err)
	}
	if got := recvWithin(t, fired).Sub(start); got > 2*time.Second {
		t.Errorf("a 2 ms timer fired after %v: the loop was not woken", got)
	}
}

func TestSharedCallbacksUseShared(t *testing.T) {
	s := newTestShared(t, timer.Config{})
	const rounds = 20
	var self, other timer.Entry
	other.Init(func() { t.Error("stopped entry fired") })
	if err := s.Start(&other, time.Hour); err != nil {
		t.Fatal(err)
	}
	count := 0 // the loop goroutine's
	done := make(chan int, 1)
	self.Init(func() {
		count++
		s.Stats()
		if count == 1 && !s.Stop(&other) {
			t.Error("Stop of a pending entry from a callback returned false")
		}
		if count < rounds {
			if err := s.Start(&self, 100*time.Microsecond); err != nil {
				t.Error(err)
			}
			return
		}
		if _, err := s.AfterFunc(0, func() { done <- count }); err != nil {
			t.Error(err)
		}
	})
	if err := s.Start(&self, 0); err != nil {
		t.Fatal(err)
	}
	if got := recvWithin(t, done); got != rounds {
		t.Errorf("got %d rounds, want %d", got, rounds)
	}
}

// TestSharedConcurrent starts, resets and stops timers from many goroutines, and
// checks Stop's contract: each timer either was stopped (Stop returned true) or
// fired, exactly once.
func TestSharedConcurrent(t *testing.T) {
	s := newTestShared(t, timer.Config{Tick: timer.MinTick})
	const goroutines, per = 8, 200
	type tracked struct {
		st      *SharedTimer
		fired   atomic.Int32
		stopped bool
	}
	all := make([][]*tracked, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			var mine []*tracked
			var shared timer.Entry // re-armed and stopped at random: exercises Start on pending entries
			shared.Init(func() {})
			for range per {
				tr := &tracked{}
				st, err := s.AfterFunc(time.Duration(rng.IntN(2000))*time.Microsecond, func() { tr.fired.Add(1) })
				if err != nil {
					t.Error(err)
					return
				}
				tr.st = st
				mine = append(mine, tr)
				switch rng.IntN(4) {
				case 0:
					tr.stopped = st.Stop()
				case 1:
					time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
					tr.stopped = st.Stop()
				}
				if rng.IntN(2) == 0 {
					s.Start(&shared, time.Duration(rng.IntN(500))*time.Microsecond)
				} else {
					s.Stop(&shared)
				}
			}
			s.Stop(&shared)
			all[g] = mine
		})
	}
	wg.Wait()
	// Every unstopped timer fires within its 2 ms; wait for them, then for any
	// callback still in flight.
	deadline := time.Now().Add(waitTimeout)
	for _, mine := range all {
		for _, tr := range mine {
			for !tr.stopped && tr.fired.Load() == 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		}
	}
	barrier(t, s)
	for g, mine := range all {
		for i, tr := range mine {
			n := tr.fired.Load()
			switch {
			case tr.stopped && n != 0:
				t.Errorf("goroutine %d timer %d: Stop returned true, but it fired %d times", g, i, n)
			case !tr.stopped && n != 1:
				t.Errorf("goroutine %d timer %d: not stopped, fired %d times, want 1", g, i, n)
			}
			if tr.st.Stop() {
				t.Errorf("goroutine %d timer %d: Stop returned true after it fired or was stopped", g, i)
			}
		}
	}
	if st := s.Stats(); st.Pending != 0 {
		t.Errorf("%d entries still pending", st.Pending)
	}
}

func TestSharedReset(t *testing.T) {
	s := newTestShared(t, timer.Config{})
	fired := make(chan struct{}, 2)
	st, err := s.AfterFunc(time.Hour, func() { fired <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Reset(time.Millisecond); err != nil { // armed: moves it
		t.Fatal(err)
	}
	recvWithin(t, fired)
	if err := st.Reset(time.Millisecond); err != nil { // fired: arms it again
		t.Fatal(err)
	}
	recvWithin(t, fired)
	if st.Stop() {
		t.Error("Stop after fire returned true")
	}
}

func TestSharedClose(t *testing.T) {
	s, err := NewShared(timer.Config{})
	if err != nil {
		t.Fatal(err)
	}
	long := make([]timer.Entry, 10)
	for i := range long {
		long[i].Init(func() { t.Error("a long timer fired") })
		if err := s.Start(&long[i], time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	fired := make(chan struct{}, 2)
	for range 2 {
		if _, err := s.AfterFunc(time.Millisecond, func() { fired <- struct{}{} }); err != nil {
			t.Fatal(err)
		}
	}
	recvWithin(t, fired)
	recvWithin(t, fired)
	got := s.Close()
	if len(got) != len(long) {
		t.Fatalf("Close returned %d entries, want the %d unfired ones", len(got), len(long))
	}
	seen := map[*timer.Entry]bool{}
	for _, e := range got {
		seen[e] = true
	}
	for i := range long {
		if !seen[&long[i]] {
			t.Errorf("Close did not return long timer %d", i)
		}
	}
	select {
	case <-s.l.done:
	default:
		t.Error("loop goroutine still running after Close")
	}
	if got := s.Close(); got != nil {
		t.Errorf("second Close returned %d entries, want nil", len(got))
	}
	if err := s.Start(&long[0], time.Millisecond); !errors.Is(err, timer.ErrClosed) {
		t.Errorf("Start after Close: got %v, want timer.ErrClosed", err)
	}
	if _, err := s.AfterFunc(time.Millisecond, func() {}); !errors.Is(err, timer.ErrClosed) {
		t.Errorf("AfterFunc after Close: got %v, want timer.ErrClosed", err)
	}
}

func TestSharedCloseFromCallback(t *testing.T) {
	s, err := NewShared(timer.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var e timer.Entry
	e.Init(func() {})
	if err := s.Start(&e, time.Hour); err != nil {
		t.Fatal(err)
	}
	got := make(chan []*timer.Entry, 1)
	if _, err := s.AfterFunc(time.Millisecond, func() { got <- s.Close() }); err != nil {
		t.Fatal(err)
	}
	if entries := recvWithin(t, got); len(entries) != 1 || entries[0] != &e {
		t.Errorf("Close from a callback returned %v, want the one pending entry", entries)
	}
	recvWithin(t, s.l.done)
}

func TestSharedIdleHasNoWakeups(t *testing.T) {
	s := newTestShared(t, timer.Config{Tick: timer.MinTick})
	barrier(t, s)
	before, loops := s.Wakeups(), s.l.loops.Load()
	time.Sleep(50 * time.Millisecond)
	if got := s.Wakeups() - before; got != 0 {
		t.Errorf("%d wakeups while idle, want 0", got)
	}
	if got := s.l.loops.Load() - loops; got != 0 {
		t.Errorf("%d loop turns while idle, want 0", got)
	}
}

func TestSharedFarFutureDoesNotSpin(t *testing.T) {
	s := newTestShared(t, timer.Config{Tick: timer.MinTick})
	entries := make([]timer.Entry, 4)
	for i, d := range []time.Duration{time.Hour, 1000 * time.Hour, math.MaxInt64 / 2, math.MaxInt64} {
		entries[i].Init(func() { t.Errorf("timer %d fired", i) })
		if err := s.Start(&entries[i], d); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(5 * time.Millisecond)
	before := s.l.loops.Load()
	time.Sleep(50 * time.Millisecond)
	if got := s.l.loops.Load() - before; got > 2 {
		t.Errorf("%d loop turns in 50 ms with only far-future timers, want at most a couple", got)
	}
}
