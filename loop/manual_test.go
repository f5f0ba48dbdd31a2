package loop

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/timer"
)

func newTestManual(t *testing.T, start time.Duration) (*Manual, *timer.Wheel, *timer.ManualClock) {
	t.Helper()
	clock := timer.NewManualClock(start)
	w, err := timer.New(timer.Config{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewManual(w)
	if err != nil {
		t.Fatal(err)
	}
	return m, w, clock
}

func TestNewManualNeedsManualClock(t *testing.T) {
	if _, err := NewManual(nil); !errors.Is(err, timer.ErrConfig) {
		t.Errorf("NewManual(nil): %v, want timer.ErrConfig", err)
	}
	w, err := timer.New(timer.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewManual(w); !errors.Is(err, timer.ErrConfig) {
		t.Errorf("NewManual on a monotonic clock: %v, want timer.ErrConfig", err)
	}
}

func TestManualPostRunsOnCaller(t *testing.T) {
	m, w, _ := newTestManual(t, 0)
	if m.Wheel() != w {
		t.Fatal("Wheel is not the wheel given to NewManual")
	}
	ran := false
	if err := m.Post(func() { ran = true }); err != nil || !ran {
		t.Fatalf("Post: %v, ran %v: want nil, true (at once)", err, ran)
	}
	if err := m.Post(nil); !errors.Is(err, timer.ErrNoFunc) {
		t.Errorf("Post(nil): %v, want timer.ErrNoFunc", err)
	}
	if err := m.Watch(0, func() bool { return false }); !errors.Is(err, ErrManual) {
		t.Errorf("Watch: %v, want ErrManual", err)
	}
	if err := m.Unwatch(0); !errors.Is(err, ErrManual) {
		t.Errorf("Unwatch: %v, want ErrManual", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Post(func() { t.Error("ran after Close") }); !errors.Is(err, timer.ErrClosed) {
		t.Errorf("Post after Close: %v, want timer.ErrClosed", err)
	}
	if err := m.AdvanceTo(time.Second); !errors.Is(err, timer.ErrClosed) {
		t.Errorf("AdvanceTo after Close: %v, want timer.ErrClosed", err)
	}
	if _, ok := m.NextDeadline(); ok {
		t.Error("NextDeadline after Close: want false")
	}
}

// TestManualAdvanceToStopsAtEachDeadline checks that timers fire at their own
// instants, those started by a firing timer included, not at the end of the
// advance.
func TestManualAdvanceToStopsAtEachDeadline(t *testing.T) {
	const start = time.Second
	m, w, clock := newTestManual(t, start)
	var fired []time.Duration
	var a, b, c timer.Entry
	a.Init(func() {
		fired = append(fired, clock.Now()-start)
		if err := w.Start(&c, 5*time.Millisecond); err != nil { // from a's instant
			t.Error(err)
		}
	})
	b.Init(func() { fired = append(fired, clock.Now()-start) })
	c.Init(func() { fired = append(fired, clock.Now()-start) })
	if err := m.Post(func() {
		w.Start(&a, 10*time.Millisecond)
		w.Start(&b, 30*time.Millisecond)
	}); err != nil {
		t.Fatal(err)
	}
	// The next work may be a cascade of a's level ahead of its deadline.
	if d, ok := m.NextDeadline(); !ok || d <= start || d > start+10*time.Millisecond {
		t.Fatalf("NextDeadline %v, %v: want in (%v, %v], true", d, ok, start, start+10*time.Millisecond)
	}
	if err := m.AdvanceTo(start + 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{10 * time.Millisecond, 15 * time.Millisecond, 30 * time.Millisecond}
	if len(fired) != len(want) {
		t.Fatalf("fired at %v, want %v", fired, want)
	}
	for i := range want {
		if fired[i] != want[i] {
			t.Errorf("timer %d fired at +%v, want +%v", i, fired[i], want[i])
		}
	}
	if now := clock.Now(); now != start+100*time.Millisecond {
		t.Errorf("clock at %v after AdvanceTo, want %v", now, start+100*time.Millisecond)
	}
	if _, ok := m.NextDeadline(); ok {
		t.Error("NextDeadline with nothing pending: want false")
	}
	if err := m.AdvanceTo(start); err != nil { // backwards: the clock stays
		t.Fatal(err)
	}
	if now := clock.Now(); now != start+100*time.Millisecond {
		t.Errorf("AdvanceTo into the past moved the clock to %v", now)
	}
}

// TestManualSerialisesCallers runs Post and AdvanceTo from several goroutines:
// the race detector checks that the wheel is used by one at a time.
func TestManualSerialisesCallers(t *testing.T) {
	m, w, _ := newTestManual(t, 0)
	var wg sync.WaitGroup
	n := 0
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				m.Post(func() {
					n++
					w.AfterFunc(time.Millisecond, func() { n++ })
				})
				m.AdvanceTo(time.Duration(g*100+i) * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	if err := m.AdvanceTo(time.Hour); err != nil {
		t.Fatal(err)
	}
	if n != 800 {
		t.Errorf("%d functions and timers ran, want 800", n)
	}
}

// TestManualWakeInputFirst: a late Wake runs its input before the timers that
// came due, at the wake's instant; a timer the input stops does not fire; the
// others fire after it, late, at the wake's instant.
func TestManualWakeInputFirst(t *testing.T) {
	m, w, clock := newTestManual(t, 0)
	var log []string
	var stopped, late timer.Entry
	stopped.Init(func() { log = append(log, "stopped fired") })
	late.Init(func() { log = append(log, "late fired at "+w.Now().String()) })
	if err := m.Post(func() {
		_ = w.Start(&stopped, 10*time.Millisecond)
		_ = w.Start(&late, 12*time.Millisecond)
	}); err != nil {
		t.Fatal(err)
	}
	err := m.Wake(15*time.Millisecond, func() {
		log = append(log, "input at "+w.Now().String())
		w.Stop(&stopped)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"input at 15ms", "late fired at 15ms"}
	if !slices.Equal(log, want) {
		t.Fatalf("Wake ran %q, want %q", log, want)
	}
	if clock.Now() != 15*time.Millisecond {
		t.Fatalf("clock after Wake %v, want 15ms", clock.Now())
	}
	if err := m.Wake(time.Millisecond, nil); err != nil || clock.Now() != 15*time.Millisecond {
		t.Fatalf("Wake into the past: %v, clock %v; want nil and the clock left at 15ms", err, clock.Now())
	}
	m.Close()
	if err := m.Wake(time.Second, nil); !errors.Is(err, timer.ErrClosed) {
		t.Fatalf("Wake after Close: %v, want timer.ErrClosed", err)
	}
}
