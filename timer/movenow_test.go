package timer

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The wheel's behaviour depends on the calls that start, stop and fire
// entries, not on the calls between them that only look or move time along:
// an event loop calls NextDeadline before each sleep, MoveNow before each
// posted function, and Advance at the end of each turn whether or not an
// entry is due; a flight recording records only the calls that start, stop
// or fire something (and the instants of those), and its replay
// (stack.Playback) must fire the entries due in one tick in the recorded
// order. Each seed is a random history run twice, with the loop's other
// calls sprinkled in (live) and without; the entries must fire in the same
// order and the bookkeeping must stand at the same tick after every
// recorded call. (Before MoveNow looked past a stale lower bound of the
// next occupied slot, the bookkeeping stood at other ticks at once, and 6
// of 20000 histories with NextDeadline calls alone fired same-tick entries
// in another order.)
func TestNextDeadlineChangesNothing(t *testing.T) {
	const tick = 10 * time.Microsecond
	for seed := range uint64(6000) {
		run := func(peek bool) (order []int, elapsed []uint64) {
			r := rand.New(rand.NewPCG(seed, 1))
			w, err := New(Config{Tick: tick, Clock: NewManualClock(0)})
			if err != nil {
				t.Fatal(err)
			}
			es := make([]Entry, 40)
			for i := range es {
				es[i].Init(func() { order = append(order, i) })
			}
			now := time.Duration(0)
			for range 200 {
				switch op := r.IntN(5); op {
				case 0: // anywhere within 50 ms, or at a level-1 slot's start (many in one tick)
					d := time.Duration(r.IntN(5000)) * tick
					if r.IntN(2) == 0 {
						d = time.Duration(r.IntN(8))*64*tick - now%(64*tick)
					}
					w.Start(&es[r.IntN(len(es))], d)
				case 1:
					w.Stop(&es[r.IntN(len(es))])
				case 2, 4: // time moves on: MoveNow, or Advance (which may fire)
					next := now + time.Duration(r.IntN(300))*tick
					if k := r.IntN(3); peek {
						live(w, now, next, k)
					}
					now = next
					if op == 2 {
						w.MoveNow(now)
					} else {
						w.Advance(now)
					}
				case 3:
					if peek {
						w.NextDeadline()
					}
				}
				elapsed = append(elapsed, w.elapsed)
			}
			w.Advance(now + time.Second)
			return order, elapsed
		}
		o1, e1 := run(true)
		o2, e2 := run(false)
		if !slices.Equal(o1, o2) {
			t.Fatalf("seed %d: entries fired in the order %v with NextDeadline called, %v without", seed, o1, o2)
		}
		if i := slices.Compare(e1, e2); i != 0 {
			t.Fatalf("seed %d: the bookkeeping stood at other ticks with NextDeadline called than without", seed)
		}
	}
}

// live makes one of the calls a live loop makes between two recorded ones,
// between the instants from and to: NextDeadline, MoveNow, or an Advance
// that fires and cascades nothing (the loop's expiry when nothing is due).
func live(w *Wheel, from, to time.Duration, kind int) {
	mid := from + (to-from)/2
	switch kind {
	case 0:
		w.NextDeadline()
	case 1:
		w.MoveNow(mid)
	case 2:
		if d, ok := w.NextDeadline(); !ok || d > mid {
			w.Advance(mid)
		}
	}
}
