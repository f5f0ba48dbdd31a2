package loop

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/timer"
)

// Real-clock lateness: how long after its requested deadline a timer's function
// starts, for the wheel's Loop (functions run on the loop goroutine), the
// Shared front (the same, behind a mutex) and time.AfterFunc (functions run in a
// new goroutine), measured in the same run. A wheel's lateness includes the
// rounding of the deadline up to its tick.

const (
	latenessTimers   = 300                   // timers armed together per round
	latenessMinDelay = time.Millisecond      // delays are uniform in [min, max)
	latenessMaxDelay = 20 * time.Millisecond //
)

var latenessTicks = []time.Duration{10 * time.Microsecond, 100 * time.Microsecond, time.Millisecond}

// latenessImpl arms one timer per delay, all at once, waits for all to fire and
// writes each one's fire time minus its requested deadline to late.
type latenessImpl interface {
	round(delays, late []time.Duration)
	close()
}

// loopLateness runs timers on a Loop, armed from one posted function.
type loopLateness struct {
	d        *Loop
	w        *timer.Wheel
	clock    *timer.MonotonicClock
	entries  []timer.Entry
	deadline []time.Duration
	late     []time.Duration
	wg       sync.WaitGroup
}

func newLoopLateness(tb testing.TB, tick time.Duration, clock *timer.MonotonicClock) *loopLateness {
	w, err := timer.New(timer.Config{Tick: tick, Clock: clock})
	if err != nil {
		tb.Fatal(err)
	}
	d, err := New(w)
	if err != nil {
		tb.Fatal(err)
	}
	r := &loopLateness{d: d, w: w, clock: clock, entries: make([]timer.Entry, latenessTimers), deadline: make([]time.Duration, latenessTimers)}
	for i := range r.entries {
		r.entries[i].Init(func() {
			r.late[i] = r.clock.Now() - r.deadline[i]
			r.wg.Done()
		})
	}
	return r
}

func (r *loopLateness) round(delays, late []time.Duration) {
	r.late = late
	r.wg.Add(len(delays))
	err := r.d.Post(func() {
		for i, d := range delays {
			r.deadline[i] = r.clock.Now() + d
			if err := r.w.StartAt(&r.entries[i], r.deadline[i]); err != nil {
				panic(err)
			}
		}
	})
	if err != nil {
		panic(err)
	}
	r.wg.Wait()
}

func (r *loopLateness) close() { r.d.Close() }

// sharedLateness runs timers on a Shared, started from the measuring goroutine.
type sharedLateness struct {
	s        *Shared
	clock    *timer.MonotonicClock
	entries  []timer.Entry
	deadline []time.Duration
	late     []time.Duration
	wg       sync.WaitGroup
}

func newSharedLateness(tb testing.TB, tick time.Duration, clock *timer.MonotonicClock) *sharedLateness {
	s, err := NewShared(timer.Config{Tick: tick, Clock: clock})
	if err != nil {
		tb.Fatal(err)
	}
	r := &sharedLateness{s: s, clock: clock, entries: make([]timer.Entry, latenessTimers), deadline: make([]time.Duration, latenessTimers)}
	for i := range r.entries {
		r.entries[i].Init(func() {
			r.late[i] = r.clock.Now() - r.deadline[i]
			r.wg.Done()
		})
	}
	return r
}

func (r *sharedLateness) round(delays, late []time.Duration) {
	r.late = late
	r.wg.Add(len(delays))
	for i, d := range delays {
		r.deadline[i] = r.clock.Now() + d // read before Start's own reading
		if err := r.s.Start(&r.entries[i], d); err != nil {
			panic(err)
		}
	}
	r.wg.Wait()
}

func (r *sharedLateness) close() { r.s.Close() }

// afterFuncLateness runs timers with time.AfterFunc.
type afterFuncLateness struct {
	clock    *timer.MonotonicClock
	deadline []time.Duration
	wg       sync.WaitGroup
}

func (r *afterFuncLateness) round(delays, late []time.Duration) {
	r.wg.Add(len(delays))
	for i, d := range delays {
		r.deadline[i] = r.clock.Now() + d // read before AfterFunc's own reading
		time.AfterFunc(d, func() {
			late[i] = r.clock.Now() - r.deadline[i]
			r.wg.Done()
		})
	}
	r.wg.Wait()
}

func (r *afterFuncLateness) close() {}

func newLatenessImpl(tb testing.TB, name string, tick time.Duration, clock *timer.MonotonicClock) latenessImpl {
	switch name {
	case "driver":
		return newLoopLateness(tb, tick, clock)
	case "driver-nospin":
		r := newLoopLateness(tb, tick, clock)
		if err := r.d.SetSpin(0); err != nil {
			tb.Fatal(err)
		}
		return r
	case "shared":
		return newSharedLateness(tb, tick, clock)
	case "afterfunc":
		return &afterFuncLateness{clock: clock, deadline: make([]time.Duration, latenessTimers)}
	}
	tb.Fatalf("unknown impl %q", name)
	return nil
}

func randomDelays(rng *rand.Rand, delays []time.Duration) {
	span := int64(latenessMaxDelay - latenessMinDelay)
	for i := range delays {
		delays[i] = latenessMinDelay + time.Duration(rng.Int64N(span))
	}
}

type latenessSummary struct {
	n                  int
	min, p50, p99, max time.Duration
}

func summarize(late []time.Duration) latenessSummary {
	s := slices.Clone(late)
	slices.Sort(s)
	n := len(s)
	return latenessSummary{n: n, min: s[0], p50: s[(n-1)/2], p99: s[(n*99+99)/100-1], max: s[n-1]}
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// BenchmarkLateness arms latenessTimers timers per iteration, with random delays
// of 1-20 ms, and reports how late they fired (p50, p99, max in µs) for the wheel
// loop (with its default spin window and with none) and for time.AfterFunc, for
// each tick, and the CPU time spent per timer. ns/op is the length of a round.
func BenchmarkLateness(b *testing.B) {
	for _, tick := range latenessTicks {
		for _, name := range []string{"driver", "driver-nospin", "afterfunc"} {
			b.Run(fmt.Sprintf("tick=%v/impl=%s", tick, name), func(b *testing.B) {
				clock := timer.NewMonotonicClock()
				impl := newLatenessImpl(b, name, tick, clock)
				defer impl.close()
				rng := rand.New(rand.NewPCG(uint64(tick), 1))
				delays := make([]time.Duration, latenessTimers)
				late := make([]time.Duration, latenessTimers)
				var all []time.Duration
				cpu := processCPU()
				for b.Loop() {
					randomDelays(rng, delays)
					impl.round(delays, late)
					all = append(all, late...)
				}
				cpu = processCPU() - cpu
				s := summarize(all)
				if s.min < 0 {
					b.Errorf("a timer fired %v early", -s.min)
				}
				b.ReportMetric(micros(s.p50), "p50-µs")
				b.ReportMetric(micros(s.p99), "p99-µs")
				b.ReportMetric(micros(s.max), "max-µs")
				// The price of punctuality: the process's CPU time per timer fired,
				// arming and measuring included.
				b.ReportMetric(micros(cpu)/float64(len(all)), "cpu-µs/timer")
			})
		}
	}
}

// TestLatenessReport prints a table of real-clock lateness for the README. It runs
// only with TCPWHEEL_LATENESS=1 (and -v to see the table), and takes a few seconds:
//
//	TCPWHEEL_LATENESS=1 go test -run TestLatenessReport -v ./timer/
func TestLatenessReport(t *testing.T) {
	if os.Getenv("TCPWHEEL_LATENESS") != "1" {
		t.Skip("set TCPWHEEL_LATENESS=1 to measure real-clock lateness")
	}
	if raceEnabled {
		t.Log("note: the race detector is on; the numbers are not representative")
	}
	const rounds = 20
	impls := []string{"driver", "driver-nospin", "shared", "afterfunc"}
	var out strings.Builder
	fmt.Fprintf(&out, "%d timers × %d rounds per row, delays uniform in [%v, %v); lateness = fire time - requested deadline\n\n",
		latenessTimers, rounds, latenessMinDelay, latenessMaxDelay)
	fmt.Fprintf(&out, "| tick | impl | p50 | p99 | max | min |\n|---|---|---:|---:|---:|---:|\n")
	for _, tick := range latenessTicks {
		clock := timer.NewMonotonicClock()
		rng := rand.New(rand.NewPCG(uint64(tick), 2))
		delays := make([]time.Duration, latenessTimers)
		late := make([]time.Duration, latenessTimers)
		var runners []latenessImpl
		all := make([][]time.Duration, len(impls))
		for _, name := range impls {
			runners = append(runners, newLatenessImpl(t, name, tick, clock))
		}
		// Interleave the implementations, so they share the system's conditions.
		for range rounds {
			randomDelays(rng, delays)
			for i, r := range runners {
				r.round(delays, late)
				all[i] = append(all[i], late...)
			}
		}
		for i, r := range runners {
			r.close()
			s := summarize(all[i])
			if s.min < 0 {
				t.Errorf("tick %v, %s: a timer fired %v early", tick, impls[i], -s.min)
			}
			fmt.Fprintf(&out, "| %v | %s | %.1f µs | %.1f µs | %.1f µs | %.1f µs |\n",
				tick, impls[i], micros(s.p50), micros(s.p99), micros(s.max), micros(s.min))
		}
	}
	t.Log("\n" + out.String())
}
