package timer

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// fixture: a wheel on a manual clock starting at 0, and a log of firings.
type fixture struct {
	t     *testing.T
	clk   *ManualClock
	w     *Wheel
	fired []string
	at    []time.Duration
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	f := &fixture{t: t, clk: NewManualClock(0)}
	cfg.Clock = f.clk
	w, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	f.w = w
	return f
}

// entry returns an entry that logs its name and the wheel's Now when it fires.
func (f *fixture) entry(name string) *Entry {
	e := &Entry{}
	e.Init(func() { f.fired = append(f.fired, name); f.at = append(f.at, f.w.Now()) })
	return e
}

func (f *fixture) start(e *Entry, d time.Duration) {
	f.t.Helper()
	if err := f.w.Start(e, d); err != nil {
		f.t.Fatalf("Start(%v): %v", d, err)
	}
}

// advanceTo moves the clock and the wheel to t and returns what fired.
func (f *fixture) advanceTo(t time.Duration) []string {
	f.clk.Set(t)
	f.fired = f.fired[:0]
	f.at = f.at[:0]
	f.w.Advance(f.clk.Now())
	return append([]string(nil), f.fired...)
}

func (f *fixture) expectFired(t time.Duration, want ...string) {
	f.t.Helper()
	got := f.advanceTo(t)
	if len(got) != len(want) {
		f.t.Fatalf("at %v: fired %v, want %v", t, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			f.t.Fatalf("at %v: fired %v, want %v", t, got, want)
		}
	}
}

func TestEntrySize(t *testing.T) {
	if got := unsafe.Sizeof(Entry{}); got > 48 {
		t.Fatalf("Entry is %d bytes, want <= 48", got)
	}
}

func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{}, true},
		{"min tick", Config{Tick: MinTick}, true},
		{"max tick", Config{Tick: MaxTick}, true},
		{"tick too small", Config{Tick: MinTick - 1}, false},
		{"tick too large", Config{Tick: MaxTick + 1}, false},
		{"negative tick", Config{Tick: -time.Millisecond}, false},
		{"odd tick", Config{Tick: 333 * time.Microsecond}, true},
		{"2 slots", Config{Slots: 2}, true},
		{"4096 slots", Config{Slots: 4096}, true},
		{"3 slots", Config{Slots: 3}, false},
		{"100 slots", Config{Slots: 100}, false},
		{"negative slots", Config{Slots: -64}, false},
		{"8192 slots", Config{Slots: 8192}, false},
		{"negative max", Config{MaxPending: -1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := New(tc.cfg)
			if tc.ok && err != nil {
				t.Fatalf("New: %v, want success", err)
			}
			if !tc.ok {
				if err == nil {
					t.Fatalf("New succeeded, want error")
				}
				if !errors.Is(err, ErrConfig) {
					t.Fatalf("error %v does not match ErrConfig", err)
				}
				if w != nil {
					t.Fatalf("New returned a wheel with an error")
				}
			}
		})
	}
}

func TestStartFiresAtTick(t *testing.T) {
	const tick = time.Millisecond
	for _, tc := range []struct {
		name   string
		from   time.Duration // Now when Start is called
		d      time.Duration
		fireAt time.Duration // first instant at which it fires
	}{
		{"one tick", 0, tick, tick},
		{"exact boundary", 0, 5 * tick, 5 * tick},
		{"just over a boundary rounds up", 0, 5*tick + 1, 6 * tick},
		{"just under a boundary", 0, 5*tick - 1, 5 * tick},
		{"from mid-tick", tick / 2, tick, 2 * tick},
		{"zero from a boundary is due now", 3 * tick, 0, 3 * tick},
		{"zero from mid-tick waits for the boundary", 3*tick + 1, 0, 4 * tick},
		{"negative is like zero", 3 * tick, -time.Hour, 3 * tick},
		{"end of level 0", 0, 63 * tick, 63 * tick},
		{"start of level 1", 0, 64 * tick, 64 * tick},
		{"level 1 odd", 0, 64*tick + 37*tick, 101 * tick},
		{"level 2", 0, 64*64*tick + 5*tick, 4101 * tick},
		{"across a block", 60 * tick, 10 * tick, 70 * tick},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Config{Tick: tick})
			f.advanceTo(tc.from)
			e := f.entry("e")
			f.start(e, tc.d)
			if tc.fireAt > tc.from {
				// Nothing one nanosecond before: never early.
				f.expectFired(tc.fireAt - 1)
			}
			f.expectFired(tc.fireAt, "e")
			if e.Pending() {
				t.Fatalf("entry still pending after firing")
			}
			if got := f.w.Len(); got != 0 {
				t.Fatalf("Len = %d after firing, want 0", got)
			}
		})
	}
}

func TestAdvanceInOneStepOrManyIsTheSame(t *testing.T) {
	const tick = 100 * time.Microsecond
	durations := []time.Duration{0, tick, 3 * tick, 63 * tick, 64 * tick, 65 * tick, 4095 * tick, 4096 * tick, 4097 * tick, 100000 * tick, 123456789}
	var want []time.Duration
	{
		f := newFixture(t, Config{Tick: tick})
		for i, d := range durations {
			f.start(f.entry(string(rune('a'+i))), d)
		}
		for now := time.Duration(0); now <= 110000*tick; now += tick {
			f.clk.Set(now)
			f.w.Advance(now)
			want = append(want, f.at...)
			f.at = f.at[:0]
		}
	}
	f := newFixture(t, Config{Tick: tick})
	for i, d := range durations {
		f.start(f.entry(string(rune('a'+i))), d)
	}
	f.clk.Set(110000 * tick)
	f.w.Advance(f.clk.Now())
	if len(f.at) != len(want) {
		t.Fatalf("one step fired %d, many steps %d", len(f.at), len(want))
	}
	for i := range want {
		if f.at[i] != want[i] {
			t.Fatalf("firing %d: one step at %v, many steps at %v", i, f.at[i], want[i])
		}
	}
}

func TestLongDeadlines(t *testing.T) {
	const tick = 10 * time.Microsecond
	for _, d := range []time.Duration{
		time.Hour, 26 * time.Hour, 40 * 24 * time.Hour, 3 * 365 * 24 * time.Hour, 100 * 365 * 24 * time.Hour,
	} {
		t.Run(d.String(), func(t *testing.T) {
			f := newFixture(t, Config{Tick: tick})
			f.advanceTo(7 * time.Millisecond) // not aligned to anything
			from := f.w.Now()
			e := f.entry("long")
			f.start(e, d)
			// Jump through the wheel's levels; the entry cascades and must not fire early.
			for _, frac := range []time.Duration{d / 3, d / 2, d - time.Second, d - 1} {
				f.expectFired(from + frac)
			}
			f.expectFired(from+d, "long")
			if f.at[0] != from+d {
				t.Fatalf("fired at %v, want %v", f.at[0], from+d)
			}
		})
	}
}

func TestAbsurdDurationClamps(t *testing.T) {
	f := newFixture(t, Config{})
	f.advanceTo(time.Hour)
	e := f.entry("e")
	f.start(e, math.MaxInt64)
	f.start(f.entry("f"), math.MaxInt64-1)
	if !e.Pending() {
		t.Fatal("entry with the largest duration is not pending")
	}
	f.expectFired(200 * 365 * 24 * time.Hour)
	if got := f.w.Len(); got != 2 {
		t.Fatalf("Len = %d, want 2", got)
	}
	next, ok := f.w.NextDeadline()
	if !ok || next <= 200*365*24*time.Hour {
		t.Fatalf("NextDeadline = %v, %v; want far in the future", next, ok)
	}
	if !f.w.Stop(e) {
		t.Fatal("Stop of a clamped entry returned false")
	}
}

func TestStop(t *testing.T) {
	f := newFixture(t, Config{Tick: time.Millisecond})
	a, b, c := f.entry("a"), f.entry("b"), f.entry("c")
	f.start(a, 10*time.Millisecond)
	f.start(b, 10*time.Millisecond)
	f.start(c, 10*time.Second)
	if !f.w.Stop(a) {
		t.Fatal("Stop(pending a) = false, want true")
	}
	if f.w.Stop(a) {
		t.Fatal("second Stop(a) = true, want false")
	}
	if !c.Stop() {
		t.Fatal("Entry.Stop(pending c) = false, want true")
	}
	f.expectFired(10*time.Millisecond, "b")
	if f.w.Stop(b) {
		t.Fatal("Stop of a fired entry = true, want false")
	}
	f.expectFired(20 * time.Second)
	st := f.w.Stats()
	if st.Stopped != 2 || st.Fired != 1 || st.Pending != 0 {
		t.Fatalf("stats = %+v, want stopped 2, fired 1, pending 0", st)
	}
	var idle Entry
	if idle.Stop() || f.w.Stop(&idle) {
		t.Fatal("Stop of an idle zero entry returned true")
	}
}

func TestRestartMovesDeadline(t *testing.T) {
	f := newFixture(t, Config{Tick: time.Millisecond})
	e := f.entry("e")
	f.start(e, 10*time.Millisecond)
	f.start(e, 5*time.Millisecond) // earlier
	f.expectFired(5*time.Millisecond, "e")
	f.start(e, 10*time.Millisecond) // at 15ms
	f.advanceTo(8 * time.Millisecond)
	f.start(e, 100*time.Millisecond) // later: 108ms
	f.expectFired(15 * time.Millisecond)
	f.expectFired(107 * time.Millisecond)
	f.expectFired(108*time.Millisecond, "e")
	if st := f.w.Stats(); st.Pending != 0 || st.Fired != 2 || st.Stopped != 0 {
		t.Fatalf("stats %+v: want pending 0, fired 2, stopped 0 (re-arming is not stopping)", st)
	}
}

func TestCallbacks(t *testing.T) {
	const ms = time.Millisecond
	t.Run("re-arms itself", func(t *testing.T) {
		f := newFixture(t, Config{Tick: ms})
		var e Entry
		n := 0
		e.Init(func() {
			n++
			f.fired = append(f.fired, "e")
			f.at = append(f.at, f.w.Now())
			if n < 5 {
				f.start(&e, 3*ms)
			}
		})
		f.start(&e, 3*ms)
		f.clk.Set(100 * ms)
		f.w.Advance(f.clk.Now())
		want := []time.Duration{3 * ms, 6 * ms, 9 * ms, 12 * ms, 15 * ms}
		if len(f.at) != len(want) {
			t.Fatalf("fired at %v, want %v", f.at, want)
		}
		for i := range want {
			if f.at[i] != want[i] {
				t.Fatalf("fired at %v, want %v", f.at, want)
			}
		}
	})
	t.Run("stops a sibling due in the same tick", func(t *testing.T) {
		f := newFixture(t, Config{Tick: ms})
		a, b := &Entry{}, f.entry("b")
		stopped := false
		a.Init(func() { f.fired = append(f.fired, "a"); stopped = f.w.Stop(b) })
		f.start(b, 5*ms)
		f.start(a, 5*ms) // lists push to the front: a runs first
		f.expectFired(5*ms, "a")
		if !stopped {
			t.Fatal("Stop of a due sibling from a callback returned false")
		}
	})
	t.Run("stops itself", func(t *testing.T) {
		f := newFixture(t, Config{Tick: ms})
		var e Entry
		var got bool
		e.Init(func() { got = f.w.Stop(&e) })
		f.start(&e, ms)
		f.advanceTo(ms)
		if got {
			t.Fatal("Stop of the firing entry from its own callback = true, want false")
		}
	})
	t.Run("zero re-arm waits for the next Advance", func(t *testing.T) {
		f := newFixture(t, Config{Tick: ms})
		var e Entry
		n := 0
		e.Init(func() { n++; f.start(&e, 0) })
		f.start(&e, ms)
		f.advanceTo(ms)
		if n != 1 {
			t.Fatalf("fired %d times in one Advance, want 1", n)
		}
		if next, ok := f.w.NextDeadline(); !ok || next != ms {
			t.Fatalf("NextDeadline = %v, %v; want %v, true (due now)", next, ok, ms)
		}
		f.advanceTo(ms)
		if n != 2 {
			t.Fatalf("fired %d times after the second Advance, want 2", n)
		}
		f.w.Stop(&e)
	})
	t.Run("starts a timer due inside the same Advance", func(t *testing.T) {
		f := newFixture(t, Config{Tick: ms})
		b := f.entry("b")
		a := &Entry{}
		a.Init(func() { f.fired = append(f.fired, "a"); f.start(b, 2*ms) })
		f.start(a, 10*ms)
		f.expectFired(50*ms, "a", "b")
		if len(f.at) != 1 || f.at[0] != 12*ms {
			t.Fatalf("b fired with Now %v, want [12ms]", f.at)
		}
	})
	t.Run("nested Advance is ignored", func(t *testing.T) {
		f := newFixture(t, Config{Tick: ms})
		var e Entry
		nested := -1
		e.Init(func() { nested = f.w.Advance(time.Hour) })
		f.start(&e, ms)
		f.start(f.entry("later"), 2*ms)
		f.advanceTo(ms)
		if nested != 0 {
			t.Fatalf("nested Advance fired %d, want 0", nested)
		}
		f.expectFired(2*ms, "later")
	})
	t.Run("closes the wheel", func(t *testing.T) {
		f := newFixture(t, Config{Tick: ms})
		var left []*Entry
		var e Entry
		e.Init(func() { left = f.w.Close() })
		f.start(f.entry("same tick"), ms)
		f.start(f.entry("later"), 5*ms)
		f.start(&e, ms) // lists push to the front: e runs first
		f.advanceTo(10 * ms)
		if len(left) != 2 {
			t.Fatalf("Close in a callback returned %d entries, want 2", len(left))
		}
		if len(f.fired) != 0 {
			t.Fatalf("fired %v after Close, want nothing", f.fired)
		}
	})
}

func TestOrderWithinAdvance(t *testing.T) {
	f := newFixture(t, Config{Tick: time.Millisecond})
	names := []string{"d", "b", "e", "a", "c"}
	delays := []time.Duration{400, 200, 5000, 100, 300}
	for i := range names {
		f.start(f.entry(names[i]), delays[i]*time.Millisecond)
	}
	f.expectFired(10*time.Second, "a", "b", "c", "d", "e")
	for i := 1; i < len(f.at); i++ {
		if f.at[i] < f.at[i-1] {
			t.Fatalf("firing instants go backwards: %v", f.at)
		}
	}
}

func TestErrors(t *testing.T) {
	f := newFixture(t, Config{MaxPending: 2})
	var noFn Entry
	if err := f.w.Start(&noFn, time.Second); !errors.Is(err, ErrNoFunc) {
		t.Fatalf("Start without function: %v, want ErrNoFunc", err)
	}
	a, b, c := f.entry("a"), f.entry("b"), f.entry("c")
	f.start(a, time.Second)
	f.start(b, time.Second)
	if err := f.w.Start(c, time.Second); !errors.Is(err, ErrTooManyTimers) {
		t.Fatalf("Start past the cap: %v, want ErrTooManyTimers", err)
	}
	if c.Pending() {
		t.Fatal("refused entry is pending")
	}
	// Re-arming a pending entry at the cap is not a new timer.
	if err := f.w.Start(a, 2*time.Second); err != nil {
		t.Fatalf("re-arm at the cap: %v", err)
	}
	other := newFixture(t, Config{})
	if err := other.w.Start(a, time.Second); !errors.Is(err, ErrOtherWheel) {
		t.Fatalf("Start on a second wheel: %v, want ErrOtherWheel", err)
	}
	if other.w.Stop(a) {
		t.Fatal("Stop on the wrong wheel returned true")
	}
	if !a.Pending() || other.w.Len() != 0 {
		t.Fatal("the other wheel's refusal changed the entry or itself")
	}
	left := f.w.Close()
	if len(left) != 2 {
		t.Fatalf("Close returned %d entries, want 2", len(left))
	}
	for _, e := range left {
		if e != a && e != b {
			t.Fatalf("Close returned an entry that was not pending")
		}
		if e.Pending() {
			t.Fatal("entry returned by Close is still pending")
		}
	}
	if err := f.w.Start(c, time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close: %v, want ErrClosed", err)
	}
	if f.w.Close() != nil {
		t.Fatal("second Close returned entries")
	}
	if n := f.w.Advance(time.Hour); n != 0 {
		t.Fatalf("Advance after Close fired %d", n)
	}
	if _, ok := f.w.NextDeadline(); ok {
		t.Fatal("NextDeadline after Close reports work")
	}
	// Entries of a closed wheel can go to another.
	if err := other.w.Start(a, time.Second); err != nil {
		t.Fatalf("Start on a new wheel after Close: %v", err)
	}
}

func TestNextDeadline(t *testing.T) {
	const ms = time.Millisecond
	f := newFixture(t, Config{Tick: ms})
	if _, ok := f.w.NextDeadline(); ok {
		t.Fatal("empty wheel reports a deadline")
	}
	a := f.entry("a")
	f.start(a, 10*ms)
	if next, ok := f.w.NextDeadline(); !ok || next != 10*ms {
		t.Fatalf("NextDeadline = %v, %v; want 10ms", next, ok)
	}
	f.w.Stop(a)
	if _, ok := f.w.NextDeadline(); ok {
		t.Fatal("NextDeadline after the only entry stopped reports work")
	}
	// A long timer: the next work is a cascade, never after the deadline.
	f.start(a, 10*time.Second)
	next, ok := f.w.NextDeadline()
	if !ok || next > 10*time.Second {
		t.Fatalf("NextDeadline = %v, %v; want <= 10s", next, ok)
	}
	wakeups := 0
	for {
		next, ok := f.w.NextDeadline()
		if !ok {
			break
		}
		wakeups++
		if wakeups > 10 {
			t.Fatalf("more than 10 wakeups for one timer")
		}
		f.advanceTo(next)
	}
	if f.clk.Now() != 10*time.Second {
		t.Fatalf("the last wakeup was at %v, want 10s", f.clk.Now())
	}
}

func TestManyLevelsSmallSlots(t *testing.T) {
	// Two slots per level: 63 levels, every boundary is a cascade.
	f := newFixture(t, Config{Tick: MinTick, Slots: 2})
	ds := []time.Duration{MinTick, 3 * MinTick, 1000 * MinTick, time.Hour, 1000 * time.Hour}
	for i, d := range ds {
		f.start(f.entry(string(rune('a'+i))), d)
	}
	for i, d := range ds {
		f.expectFired(d - 1)
		f.expectFired(d, string(rune('a'+i)))
	}
}

func TestBigSlots(t *testing.T) {
	f := newFixture(t, Config{Tick: time.Millisecond, Slots: 4096})
	ds := []time.Duration{time.Millisecond, 70 * time.Millisecond, 4095 * time.Millisecond, 4096 * time.Millisecond, 5000 * time.Millisecond, 3 * time.Hour}
	for i, d := range ds {
		f.start(f.entry(string(rune('a'+i))), d)
	}
	for i, d := range ds {
		f.expectFired(d - 1)
		f.expectFired(d, string(rune('a'+i)))
	}
}

func TestAfterFuncAndTicker(t *testing.T) {
	const ms = time.Millisecond
	f := newFixture(t, Config{Tick: ms})
	n := 0
	tm, err := f.w.AfterFunc(5*ms, func() { n++ })
	if err != nil {
		t.Fatal(err)
	}
	f.advanceTo(5 * ms)
	if n != 1 || tm.Pending() {
		t.Fatalf("AfterFunc: ran %d times, pending %v", n, tm.Pending())
	}
	if tm.Stop() {
		t.Fatal("Stop after firing = true")
	}
	if err := tm.Reset(ms); err != nil {
		t.Fatal(err)
	}
	f.advanceTo(6 * ms)
	if n != 2 {
		t.Fatalf("Reset after firing: ran %d times, want 2", n)
	}
	if _, err := f.w.AfterFunc(ms, nil); !errors.Is(err, ErrNoFunc) {
		t.Fatalf("AfterFunc(nil): %v", err)
	}

	var ticks []time.Duration
	var tk *Ticker
	tk, err = f.w.Every(10*ms, func() {
		ticks = append(ticks, f.w.Now())
		if len(ticks) == 4 {
			tk.Stop()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	f.advanceTo(15 * ms) // late, on purpose
	f.advanceTo(time.Second)
	want := []time.Duration{16 * ms, 26 * ms, 36 * ms, 46 * ms}
	if len(ticks) != len(want) {
		t.Fatalf("ticks at %v, want %v", ticks, want)
	}
	for i := range want {
		if ticks[i] != want[i] {
			t.Fatalf("ticks at %v, want %v", ticks, want)
		}
	}
	if tk.Stop() {
		t.Fatal("second Ticker.Stop = true")
	}
	if _, err := f.w.Every(0, func() {}); !errors.Is(err, ErrPeriod) {
		t.Fatalf("Every(0): %v, want ErrPeriod", err)
	}
}

func TestLateHistogram(t *testing.T) {
	const ms = time.Millisecond
	f := newFixture(t, Config{Tick: ms})
	for i := 0; i < 10; i++ {
		f.start(f.entry("x"), 10*ms)
	}
	f.advanceTo(10*ms + 500*time.Microsecond) // all fire 0.5 ms after their tick
	st := f.w.Stats()
	if st.Late.Count() != 10 {
		t.Fatalf("histogram counts %d, want 10", st.Late.Count())
	}
	q := st.Late.Quantile(0.5)
	if q < 500*time.Microsecond || q >= ms {
		t.Fatalf("median lateness bound %v, want in [0.5ms, 1ms)", q)
	}
	var h LateHistogram
	if h.Quantile(0.99) != 0 {
		t.Fatal("empty histogram quantile != 0")
	}
	h.Add(-5)
	h.Add(0)
	if h.Quantile(1) != 0 || h.Count() != 2 {
		t.Fatal("zero and negative durations are not counted as zero")
	}
}

// TestTarget: inside a callback, Now is the tick being processed and Target the
// instant the Advance moves to; outside, both are Now.
func TestTarget(t *testing.T) {
	const ms = time.Millisecond
	f := newFixture(t, Config{Tick: ms})
	var now, target []time.Duration
	e := &Entry{}
	e.Init(func() { now, target = append(now, f.w.Now()), append(target, f.w.Target()) })
	f.start(e, 10*ms)
	if got := f.w.Target(); got != 0 {
		t.Fatalf("Target before any Advance: %v, want 0", got)
	}
	f.advanceTo(37 * ms) // a wake 27 ms late
	if len(now) != 1 || now[0] != 10*ms || target[0] != 37*ms {
		t.Fatalf("inside the callback: Now %v, Target %v; want [10ms] and [37ms]", now, target)
	}
	if got := f.w.Target(); got != 37*ms {
		t.Fatalf("Target after the Advance: %v, want 37ms (Now)", got)
	}
	f.w.MoveNow(40 * ms)
	if got := f.w.Target(); got != 40*ms {
		t.Fatalf("Target after MoveNow(40ms): %v, want 40ms", got)
	}
}

func TestReciprocalDivision(t *testing.T) {
	ticks := []time.Duration{MinTick, 10001, 16383, 16384, 16385, 100 * time.Microsecond, 333333, 1 << 29, 1<<29 + 1, 999999937, MaxTick}
	// And random ticks, checked at the edges of the range below.
	r := uint64(0x9e3779b97f4a7c15)
	for range 300 {
		r ^= r << 13
		r ^= r >> 7
		r ^= r << 17
		ticks = append(ticks, MinTick+time.Duration(r%uint64(MaxTick-MinTick+1)))
	}
	for i, tick := range ticks {
		w, err := New(Config{Tick: tick, Clock: NewManualClock(0)})
		if err != nil {
			t.Fatal(err)
		}
		tn := uint64(tick)
		check := func(x uint64) {
			if got, want := w.floorTicks(x), x/tn; got != want {
				t.Fatalf("tick %v: floor(%d) = %d, want %d", tick, x, got, want)
			}
			want := x / tn
			if x%tn != 0 {
				want++
			}
			if got := w.ceilTicks(x); got != want {
				t.Fatalf("tick %v: ceil(%d) = %d, want %d", tick, x, got, want)
			}
		}
		for _, k := range []uint64{0, 1, 2, 1000, 1 << 20, 1 << 40, math.MaxInt64 / tn} {
			for _, delta := range []int64{-1, 0, 1} {
				x := int64(k*tn) + delta
				if x >= 0 {
					check(uint64(x))
				}
			}
		}
		check(math.MaxInt64)
		check(math.MaxInt64 - 1)
		if i >= 11 {
			continue
		}
		// Random-ish sweep.
		x := uint64(88172645463325252)
		for i := 0; i < 100000; i++ {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			check(x >> 1)
			check((x >> 1) % (1 << 45))
		}
	}
}

func TestClocks(t *testing.T) {
	c := NewManualClock(5)
	if c.Advance(-10) != 5 {
		t.Fatal("negative Advance moved the clock")
	}
	if c.Set(3) != 5 {
		t.Fatal("Set moved the clock backwards")
	}
	if c.Set(9) != 9 || c.Advance(1) != 10 {
		t.Fatal("Set/Advance forward")
	}
	m := NewMonotonicClock()
	a := m.Now()
	b := m.Now()
	if b < a || a < 0 {
		t.Fatalf("monotonic clock went backwards: %v then %v", a, b)
	}
	if d := time.Until(m.Time(a)); d > 0 {
		t.Fatalf("Time(Now()) is in the future by %v", d)
	}
}

func TestClockEdges(t *testing.T) {
	t.Run("end of time with a positive origin", func(t *testing.T) {
		clk := NewManualClock(5 * time.Second)
		w, err := New(Config{Tick: time.Millisecond, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		var e Entry
		e.Init(func() {})
		if err := w.StartAt(&e, math.MaxInt64); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 20; i++ {
			next, ok := w.NextDeadline()
			if !ok {
				t.Fatal("the entry vanished")
			}
			if next < clk.Now() {
				t.Fatalf("NextDeadline %v is before now %v: it overflowed", next, clk.Now())
			}
			if next == math.MaxInt64 {
				return
			}
			w.Advance(clk.Set(next))
		}
		t.Fatal("NextDeadline never reached the end of time")
	})
	t.Run("negative origin", func(t *testing.T) {
		clk := NewManualClock(-time.Second)
		w, err := New(Config{Tick: time.Millisecond, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		fired := false
		var e Entry
		e.Init(func() { fired = true })
		if err := w.StartAt(&e, math.MaxInt64-5); err != nil {
			t.Fatal(err)
		}
		w.Advance(clk.Advance(time.Hour))
		if fired {
			t.Fatal("an entry due at the end of time fired after an hour")
		}
		if err := w.StartAt(&e, -2*time.Second); err != nil { // before the origin: due
			t.Fatal(err)
		}
		w.Advance(clk.Now())
		if !fired {
			t.Fatal("an entry due before the origin did not fire")
		}
	})
}

// TestMoveNow: MoveNow moves Now without running anything; a due entry stopped
// before the next Advance never runs; one started after it measures from the
// new Now; the next Advance runs the due ones in deadline order, with Now never
// going back; a now at or before Now is ignored.
func TestMoveNow(t *testing.T) {
	const ms = time.Millisecond
	f := newFixture(t, Config{Tick: ms})
	a, b, c := f.entry("a"), f.entry("b"), f.entry("c")
	f.start(a, 10*ms)
	f.start(b, 12*ms)
	f.start(c, 500*ms) // a higher level: its slot must not be skipped either
	f.clk.Set(600 * ms)
	f.w.MoveNow(f.clk.Now())
	if len(f.fired) != 0 {
		t.Fatalf("MoveNow ran %v", f.fired)
	}
	if got := f.w.Now(); got != 600*ms {
		t.Fatalf("Now after MoveNow = %v, want 600ms", got)
	}
	if next, ok := f.w.NextDeadline(); !ok || next > 10*ms {
		t.Fatalf("NextDeadline after MoveNow = %v, %v; want at most a's 10ms", next, ok)
	}
	if !b.Stop() {
		t.Fatal("Stop of a due entry after MoveNow = false, want true")
	}
	d := f.entry("d")
	f.start(d, 5*ms)      // from the moved Now: due at 605ms
	f.w.MoveNow(300 * ms) // backwards: ignored
	if got := f.w.Now(); got != 600*ms {
		t.Fatalf("Now after MoveNow backwards = %v, want 600ms", got)
	}
	if got := f.advanceTo(604 * ms); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("fired %v at 604ms, want [a c] (b stopped, d not due)", got)
	}
	for i, at := range f.at {
		if at < 600*ms {
			t.Fatalf("callback %d saw Now %v, before the moved Now 600ms", i, at)
		}
	}
	f.expectFired(605*ms, "d")
}

// TestMoveNowInsideCallbackDoesNothing: Now during expiry is the wheel's own.
func TestMoveNowInsideCallbackDoesNothing(t *testing.T) {
	const ms = time.Millisecond
	f := newFixture(t, Config{Tick: ms})
	var e Entry
	var seen time.Duration
	e.Init(func() { f.w.MoveNow(time.Hour); seen = f.w.Now() })
	f.start(&e, 3*ms)
	f.advanceTo(3 * ms)
	if seen != 3*ms || f.w.Now() != 3*ms {
		t.Fatalf("Now in and after the callback %v, %v; want 3ms", seen, f.w.Now())
	}
}

// TestTickerAfterMoveNow: a ticker keeps its period from its deadlines even when
// MoveNow has moved Now past one of them.
func TestTickerAfterMoveNow(t *testing.T) {
	const ms = time.Millisecond
	f := newFixture(t, Config{Tick: ms})
	var runs int
	if _, err := f.w.Every(10*ms, func() { runs++ }); err != nil {
		t.Fatal(err)
	}
	f.clk.Set(13 * ms)
	f.w.MoveNow(13 * ms)
	f.advanceTo(13 * ms) // runs the 10ms deadline late
	f.advanceTo(20 * ms) // the next is at 20ms, not 23ms
	if runs != 2 {
		t.Fatalf("ticker ran %d times by 20ms, want 2", runs)
	}
}

// TestMoveNowZeroRearmCannotLoop: a callback that re-arms itself with zero
// after a MoveNow fires at most twice in one Advance (once more at Now's tick),
// then waits for the next Advance.
func TestMoveNowZeroRearmCannotLoop(t *testing.T) {
	const ms = time.Millisecond
	f := newFixture(t, Config{Tick: ms})
	var e Entry
	runs := 0
	e.Init(func() { runs++; _ = f.w.Start(&e, 0) })
	f.start(&e, 2*ms)
	f.clk.Set(5*ms + ms/2)
	f.w.MoveNow(f.clk.Now())
	f.advanceTo(6*ms + ms/2)
	if runs < 1 || runs > 2 {
		t.Fatalf("runs in one Advance = %d, want 1 or 2", runs)
	}
	before := runs
	f.advanceTo(6*ms + ms/2)
	if runs != before+1 {
		t.Fatalf("runs at the next Advance = %d, want 1", runs-before)
	}
}

// countHandler counts its expiries and when the last one ran.
type countHandler struct {
	w    *Wheel
	n    int
	last time.Duration
}

func (h *countHandler) Expire() { h.n++; h.last = h.w.Now() }

// TestInitHandler: an entry given a Handler runs its Expire at the deadline
// (Advance), hands it back from AdvanceCollect, is stored without
// allocating, and a nil func or Handler leaves the entry without a function.
func TestInitHandler(t *testing.T) {
	clk := NewManualClock(0)
	w, err := New(Config{Clock: clk, Tick: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h := &countHandler{w: w}
	var e Entry
	if a := testing.AllocsPerRun(100, func() { e.InitHandler(h) }); a != 0 {
		t.Fatalf("InitHandler allocates %v times, want 0", a)
	}
	if a := testing.AllocsPerRun(100, func() { e.Init(h.Expire) }); a > 1 { // the method value only
		t.Fatalf("Init allocates %v times, want at most 1", a)
	}
	e.InitHandler(h)
	if err := w.Start(&e, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	clk.Set(5*time.Millisecond - 1)
	w.Advance(clk.Now())
	if h.n != 0 {
		t.Fatalf("fired %d times before the deadline", h.n)
	}
	clk.Set(5 * time.Millisecond)
	w.Advance(clk.Now())
	if h.n != 1 || h.last != 5*time.Millisecond {
		t.Fatalf("fired %d times, last at %v; want once at 5ms", h.n, h.last)
	}
	// AdvanceCollect returns the Handler's Expire, run later by the caller.
	if err := w.Start(&e, 2*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	clk.Set(7 * time.Millisecond)
	due := w.AdvanceCollect(clk.Now(), nil)
	if len(due) != 1 || h.n != 1 {
		t.Fatalf("collected %d, fired %d times; want 1 collected, not run", len(due), h.n)
	}
	due[0]()
	if h.n != 2 || h.last != 7*time.Millisecond {
		t.Fatalf("collected function: fired %d times, last at %v; want twice, at 7ms", h.n, h.last)
	}
	for _, init := range []func(*Entry){
		func(e *Entry) { e.Init(nil) },
		func(e *Entry) { e.InitHandler(nil) },
	} {
		var n Entry
		n.InitHandler(h)
		init(&n)
		if err := w.Start(&n, time.Millisecond); !errors.Is(err, ErrNoFunc) {
			t.Fatalf("Start after a nil Init: %v, want ErrNoFunc", err)
		}
	}
}

// TestReplace: the replacing entry fires at the replaced one's tick and in
// its place among that tick's entries (also after a cascade), the replaced
// one not at all; Stats count neither a stop nor a start; refusals change
// nothing.
func TestReplace(t *testing.T) {
	f := newFixture(t, Config{Tick: time.Millisecond, Slots: 4})
	a, b, c := f.entry("a"), f.entry("b"), f.entry("c")
	f.start(a, 30*time.Millisecond) // a level above the first: it cascades
	f.start(b, 30*time.Millisecond)
	f.start(c, 30*time.Millisecond)
	r := f.entry("r")
	before := f.w.Stats()
	if !f.w.Replace(b, r) {
		t.Fatal("Replace(pending b, idle r) = false")
	}
	if b.Pending() || !r.Pending() {
		t.Fatalf("after Replace: b pending %v, r pending %v; want false, true", b.Pending(), r.Pending())
	}
	if st := f.w.Stats(); st != before {
		t.Fatalf("Stats after Replace = %+v, want %+v (unchanged)", st, before)
	}
	// Refused: r is pending, b idle, an entry without a function, one
	// pending on another wheel.
	var bare Entry
	g := newFixture(t, Config{Tick: time.Millisecond})
	o := g.entry("o")
	g.start(o, 5*time.Millisecond)
	for _, tc := range []struct {
		name   string
		old, e *Entry
	}{{"pending e", a, r}, {"idle old", b, f.entry("x")}, {"no function", a, &bare}, {"old on another wheel", o, f.entry("y")}, {"itself", a, a}} {
		if f.w.Replace(tc.old, tc.e) {
			t.Fatalf("Replace (%s) = true, want false", tc.name)
		}
	}
	f.expectFired(29 * time.Millisecond)
	// a, b and c were started in that order; the lists are LIFO, so they
	// fire c, b, a: r in b's place.
	f.expectFired(30*time.Millisecond, "c", "r", "a")
	if f.w.Stop(b) {
		t.Fatal("the replaced entry was still pending")
	}
	if st := f.w.Stats(); st.Fired != 3 || st.Pending != 0 || st.Stopped != 0 {
		t.Fatalf("stats %+v: want fired 3, pending 0, stopped 0", st)
	}
	// The last entry of a list: its neighbour's pointer moves too.
	x, y := f.entry("x"), f.entry("y")
	f.start(x, 5*time.Millisecond)
	f.start(y, 5*time.Millisecond) // y heads the list, x is its last
	z := f.entry("z")
	if !f.w.Replace(x, z) {
		t.Fatal("Replace of a list's last entry = false")
	}
	if !f.w.Stop(z) || !y.Pending() {
		t.Fatal("Stop of the replacing last entry failed, or took y with it")
	}
	f.expectFired(40*time.Millisecond, "y")
	// The entry after the replaced one: stopping it unlinks it from the
	// replacing one.
	p, q, s := f.entry("p"), f.entry("q"), f.entry("s")
	f.start(p, 5*time.Millisecond)
	f.start(q, 5*time.Millisecond)
	f.start(s, 5*time.Millisecond) // s, q, p
	q2 := f.entry("q2")
	if !f.w.Replace(q, q2) || !f.w.Stop(p) {
		t.Fatal("Replace(q) or Stop(p) = false")
	}
	if got := f.advanceTo(45 * time.Millisecond); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"q2", "s"}) {
		t.Fatalf("at 45ms: fired %v, want q2 and s", got)
	}
}

// TestDeadline: a pending entry's deadline is the instant of the tick it
// fires at (rounded up), on the wheel's clock; an idle entry, a fired or
// stopped one, or one pending on another wheel has none.
func TestDeadline(t *testing.T) {
	f := newFixture(t, Config{Tick: time.Millisecond})
	a := f.entry("a")
	if _, ok := f.w.Deadline(a); ok {
		t.Fatal("a deadline for an idle entry")
	}
	f.advanceTo(1500 * time.Microsecond)
	f.start(a, 2200*time.Microsecond)
	if d, ok := f.w.Deadline(a); !ok || d != 4*time.Millisecond {
		t.Fatalf("Deadline = %v, %v; want 4ms, true", d, ok)
	}
	f.advanceTo(4*time.Millisecond - 1)
	if len(f.fired) != 0 {
		t.Fatalf("fired %v before its deadline", f.fired)
	}
	f.advanceTo(4 * time.Millisecond)
	if len(f.fired) != 1 || f.at[0] != 4*time.Millisecond {
		t.Fatalf("fired %v at %v, want a at its deadline 4ms", f.fired, f.at)
	}
	if _, ok := f.w.Deadline(a); ok {
		t.Fatal("a deadline for a fired entry")
	}
	f.start(a, time.Hour)
	g := newFixture(t, Config{Tick: time.Millisecond})
	if _, ok := g.w.Deadline(a); ok {
		t.Fatal("a deadline on another wheel")
	}
	f.w.Stop(a)
	if _, ok := f.w.Deadline(a); ok {
		t.Fatal("a deadline for a stopped entry")
	}
}
