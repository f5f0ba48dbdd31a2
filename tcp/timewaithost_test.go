package tcp

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/timer"
)

// hostRig is a TimeWaitHost on a wheel of its own, on a manual clock, with
// the records' 4-tuples told as they close.
type hostRig struct {
	t      *testing.T
	clk    *timer.ManualClock
	w      *timer.Wheel
	h      *TimeWaitHost
	closed []ID
	others int // timers of the test's own pending on w
}

func newHostRig(t *testing.T, maxPending int) *hostRig {
	clk := timer.NewManualClock(0)
	w, err := timer.New(timer.Config{Clock: clk, Tick: time.Millisecond, MaxPending: maxPending})
	if err != nil {
		t.Fatal(err)
	}
	g := &hostRig{t: t, clk: clk, w: w}
	g.h = &TimeWaitHost{Timers: OnWheel(w), Output: &capture{}, Closed: func(id ID) { g.closed = append(g.closed, id) }}
	return g
}

func (g *hostRig) advanceTo(at time.Duration) {
	g.clk.Set(at)
	g.w.Advance(at)
}

// rigID is the 4-tuple of record n: IPv4 and IPv6 in turn, one of them
// IPv4-mapped.
func rigID(n int) ID {
	p := uint16(1024 + n)
	switch n % 3 {
	case 0:
		return ID{Local: netip.AddrPortFrom(netip.MustParseAddr("198.18.0.1"), 80), Remote: netip.AddrPortFrom(netip.MustParseAddr("198.18.0.2"), p)}
	case 1:
		return ID{Local: netip.AddrPortFrom(netip.MustParseAddr("2001:db8::1"), 80), Remote: netip.AddrPortFrom(netip.MustParseAddr("2001:db8::2"), p)}
	}
	return ID{Local: netip.AddrPortFrom(netip.MustParseAddr("::ffff:198.18.0.1"), 80), Remote: netip.AddrPortFrom(netip.MustParseAddr("::ffff:198.18.0.2"), p)}
}

// put inserts a record of id ending at deadline, restarted with dur.
func (g *hostRig) put(id ID, deadline, dur time.Duration) (TimeWait, bool) {
	k, ok := keyOf(id)
	if !ok {
		g.t.Fatalf("keyOf(%v) refused", id)
	}
	i, ok := g.h.insert(twRecord{key: k, deadline: deadline, dur: dur})
	if !ok {
		return TimeWait{}, false
	}
	return TimeWait{g.h, i, g.h.recs[i].gen}, true
}

// check holds the table to its invariants: the death row in deadline
// order, every live record on it once and in the index, the count, and
// the host's one timer pending while records live.
func (g *hostRig) check(at string) {
	h := g.h
	n, last, prev := 0, time.Duration(-1<<63), int32(0)
	for i := h.head; i != 0; i = h.recs[i].next {
		r := &h.recs[i]
		if r.gen == 0 || r.prev != prev || r.deadline < last || h.index[r.key] != i {
			g.t.Fatalf("%s: slot %d on the death row: gen %d, prev %d (want %d), deadline %v after %v, index %d",
				at, i, r.gen, r.prev, prev, r.deadline, last, h.index[r.key])
		}
		n, last, prev = n+1, r.deadline, i
	}
	if n != h.Len() || h.tail != prev {
		g.t.Fatalf("%s: %d on the death row, %d records (Len), tail %d (want %d)", at, n, h.Len(), h.tail, prev)
	}
	if want := min(n, 1) + g.others; g.w.Len() != want {
		g.t.Fatalf("%s: %d timers pending with %d records, want %d", at, g.w.Len(), n, want)
	}
}

// TestTimeWaitHostModel runs a host's table against a model: records put
// with deadlines in and out of order, restarted (a FIN again), closed
// (RST, reuse), and time passing. Each record must close exactly at the
// first tick at or after its deadline, as its own timer would have fired,
// in deadline order; handles of closed records must stay closed though
// their slots are reused; the invariants hold after every step.
func TestTimeWaitHostModel(t *testing.T) {
	const tick = time.Millisecond
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		g := newHostRig(t, 0)
		type entry struct {
			tw       TimeWait
			deadline time.Duration
		}
		live := map[ID]*entry{}
		var dead []TimeWait
		now, next := time.Duration(0), 0
		for step := range 400 {
			at := fmt.Sprintf("seed %d step %d", seed, step)
			switch op := rng.IntN(10); {
			case op < 4: // a connection hands its TIME-WAIT over
				dur := time.Duration(1+rng.IntN(3000)) * tick
				deadline := now + dur - time.Duration(rng.IntN(4))*time.Duration(rng.IntN(1000))*tick // its 2*MSL began earlier
				deadline = (deadline + tick - 1) / tick * tick                                        // a timer's instant
				id := rigID(next)
				next++
				tw, ok := g.put(id, deadline, dur)
				if !ok {
					t.Fatalf("%s: insert refused", at)
				}
				live[id] = &entry{tw, deadline}
			case op < 6 && len(live) > 0: // a FIN again
				e := live[pick(rng, live)]
				e.tw.restart(e.tw.rec())
				e.deadline = now + e.tw.rec().dur
			case op < 7 && len(live) > 0: // RST or reuse
				id := pick(rng, live)
				tw := live[id].tw
				g.closed = nil
				g.h.close(tw.i)
				if len(g.closed) != 1 || g.closed[0] != id || !tw.Closed() {
					t.Fatalf("%s: closing %v told %v, Closed %v", at, id, g.closed, tw.Closed())
				}
				delete(live, id)
				dead = append(dead, tw)
			default: // time passes
				now += time.Duration(rng.IntN(1500))*tick + time.Duration(rng.IntN(1000))*time.Microsecond
				var want []ID
				for id, e := range live {
					if (e.deadline+tick-1)/tick <= now/tick {
						want = append(want, id)
					}
				}
				slices.SortFunc(want, func(a, b ID) int { return int(live[a].deadline - live[b].deadline) })
				g.closed = nil
				g.advanceTo(now)
				got := slices.Clone(g.closed)
				slices.SortStableFunc(got, func(a, b ID) int { return int(live[a].deadline - live[b].deadline) })
				if !slices.Equal(got, g.closed) || len(got) != len(want) {
					t.Fatalf("%s: at %v closed %v, want %v (in deadline order)", at, now, g.closed, want)
				}
				for _, id := range got {
					if live[id] == nil {
						t.Fatalf("%s: closed %v, not live", at, id)
					}
					dead = append(dead, live[id].tw)
					delete(live, id)
				}
			}
			g.check(at)
			for id, e := range live {
				if tw, ok := g.h.Lookup(id); !ok || tw != e.tw || tw.Closed() || tw.ID() != id {
					t.Fatalf("%s: Lookup(%v) = %v %v, want %v live", at, id, tw, ok, e.tw)
				}
			}
			for _, tw := range dead {
				if !tw.Closed() || tw.ID() != (ID{}) {
					t.Fatalf("%s: a closed record's handle %v is live again", at, tw)
				}
			}
		}
		g.advanceTo(now + time.Hour)
		if g.h.Len() != 0 || g.w.Len() != 0 || len(g.h.recs) != 0 {
			t.Fatalf("seed %d: after an hour %d records, %d timers, %d slots", seed, g.h.Len(), g.w.Len(), len(g.h.recs))
		}
	}
}

// pick returns one of m's IDs, the same for the same seed.
func pick[V any](rng *rand.Rand, m map[ID]V) ID {
	ids := make([]ID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b ID) int { return int(a.Remote.Port()) - int(b.Remote.Port()) })
	return ids[rng.IntN(len(ids))]
}

// TestTimeWaitKey: a key gives its ID back, IPv4, IPv6 and IPv4-mapped
// IPv6 apart; an address with a zone (which a key does not keep) or none
// at all has no key.
func TestTimeWaitKey(t *testing.T) {
	for n := range 3 {
		id := rigID(n)
		k, ok := keyOf(id)
		if !ok || k.id() != id {
			t.Fatalf("keyOf(%v) = %v, %v: back %v", id, k, ok, k.id())
		}
		if k2, _ := keyOf(rigID(n + 1)); k2 == k {
			t.Fatalf("%v and %v have one key", id, rigID(n+1))
		}
	}
	zoned := ID{Local: netip.MustParseAddrPort("[fe80::1%eth0]:80"), Remote: netip.MustParseAddrPort("[fe80::2]:1024")}
	if _, ok := keyOf(zoned); ok {
		t.Fatal("a key for an address with a zone")
	}
	if _, ok := keyOf(ID{}); ok {
		t.Fatal("a key for no address")
	}
}

// TestTimeWaitHostTimerRefused: a wheel that refuses the host's timer
// refuses the hand-over (nothing changes: the endpoint keeps its
// TIME-WAIT); one that refuses to re-arm it after an expiry closes the
// records left, counted as timer errors, as their endpoints' timers would.
func TestTimeWaitHostTimerRefused(t *testing.T) {
	g := newHostRig(t, 2)
	var a, b timer.Entry
	a.Init(func() {})
	b.Init(func() {})
	if g.w.Start(&a, time.Hour) != nil || g.w.Start(&b, time.Hour) != nil {
		t.Fatal("Start")
	}
	if _, ok := g.put(rigID(0), time.Second, time.Minute); ok || g.h.Len() != 0 || len(g.h.index) != 0 {
		t.Fatalf("insert on a full wheel: ok %v, %d records", ok, g.h.Len())
	}
	g.w.Stop(&b)
	g.others = 1
	for n := range 3 {
		if _, ok := g.put(rigID(n), time.Duration(n+1)*time.Second, time.Minute); !ok {
			t.Fatal("insert refused with room")
		}
	}
	g.check("3 in")
	g.h.Closed = func(id ID) {
		g.closed = append(g.closed, id)
		if len(g.closed) == 1 && g.w.Start(&b, time.Hour) != nil { // the wheel fills meanwhile
			t.Fatal("Start")
		}
	}
	g.advanceTo(time.Second)
	g.others = 2
	if g.h.Len() != 0 || len(g.closed) != 3 || g.h.Counters.TimerErrors != 2 {
		t.Fatalf("the re-arm refused: %d records, %d closed, %d timer errors; want 0 3 2", g.h.Len(), len(g.closed), g.h.Counters.TimerErrors)
	}
	g.check("all closed")
}

// TestTimeWaitHostMax: a full table (Max) takes no record: the endpoint
// handed over goes to CLOSED at once all the same, sends nothing, keeps no
// timer, and is counted (Overflows); once a record has closed there is
// room again.
func TestTimeWaitHostMax(t *testing.T) {
	g := newHostRig(t, 0)
	g.h.Max = 1
	if _, ok := g.put(rigID(1), time.Millisecond, time.Minute); !ok {
		t.Fatal("the first record refused")
	}
	h := toTimeWait(t, twPaths[0])
	if _, ok := h.ep.TimeWait(g.h); ok {
		t.Fatal("a record beyond Max")
	}
	h.wantState(StateClosed)
	if ev := h.takeEvents(); ev&EventClosed == 0 {
		t.Fatalf("the endpoint's events after an overflow: %v, want Closed", ev)
	}
	if h.w.Len() != 0 || len(h.out.segs) != 0 || g.h.Overflows != 1 || g.h.Len() != 1 {
		t.Fatalf("after an overflow: %d timers pending on the endpoint's wheel, %d segments sent, %d overflows, %d records; want 0 0 1 1",
			h.w.Len(), len(h.out.segs), g.h.Overflows, g.h.Len())
	}
	g.check("after an overflow")
	g.advanceTo(time.Millisecond)
	if g.h.Len() != 0 {
		t.Fatalf("%d records after the first ended", g.h.Len())
	}
	h = toTimeWait(t, twPaths[0])
	if _, ok := h.ep.TimeWait(g.h); !ok {
		t.Fatal("no record with room again")
	}
	if g.h.Overflows != 1 || g.h.Len() != 1 {
		t.Fatalf("%d overflows, %d records; want 1 1", g.h.Overflows, g.h.Len())
	}
	g.check("a record again")
}

// TestTimeWaitHostShrink: a table whose live records fall to a quarter of
// its slab or less gives the memory back at the expiry that finds it so
// (a slab of twice the live count), keeping every live record, its
// deadline and the death row's order; a table at or below twShrinkMin
// slots keeps its slab.
func TestTimeWaitHostShrink(t *testing.T) {
	const n = 10000
	g := newHostRig(t, 0)
	for i := range n {
		if _, ok := g.put(rigID(i), time.Duration(i+1)*time.Millisecond, time.Minute); !ok {
			t.Fatal("insert refused")
		}
	}
	g.advanceTo(7000 * time.Millisecond) // 7,000 close: 3,000 live of 10,001 slots, more than a quarter
	if g.h.Shrinks != 0 || len(g.h.recs) != n+1 {
		t.Fatalf("3,000 live of %d slots: %d shrinks, %d slots; want none", n+1, g.h.Shrinks, len(g.h.recs))
	}
	// The expiry of record 7,501's deadline leaves 2,500 live, a quarter:
	// a slab of 2,501 slots (with room for twice as many) holds them.
	g.advanceTo(7600 * time.Millisecond)
	g.check("after the shrink")
	if g.h.Shrinks != 1 || len(g.h.recs) != 2501 || cap(g.h.recs) > 5001 {
		t.Fatalf("2,400 live: %d shrinks, %d slots (cap %d); want 1, 2,501, at most 5,001", g.h.Shrinks, len(g.h.recs), cap(g.h.recs))
	}
	for i := 7600; i < n; i++ {
		if tw, ok := g.h.Lookup(rigID(i)); !ok || tw.Closed() || tw.ID() != rigID(i) || tw.rec().deadline != time.Duration(i+1)*time.Millisecond {
			t.Fatalf("record %d after the shrink: %v %v", i, tw, ok)
		}
	}
	// New records go on after it; every record closes at its deadline, in
	// order, the new ones among the old.
	for i := n; i < n+100; i++ {
		if _, ok := g.put(rigID(i), time.Duration(i-n)*20*time.Millisecond+7700*time.Millisecond, time.Minute); !ok {
			t.Fatal("insert refused")
		}
	}
	g.check("after more records")
	g.closed = nil
	g.advanceTo(time.Hour)
	if len(g.closed) != 2400+100 || g.h.Len() != 0 {
		t.Fatalf("%d closed, %d left; want 2,500 and none", len(g.closed), g.h.Len())
	}
	for i := 1; i < len(g.closed); i++ {
		if k := g.closed[i-1]; deadlineOf(k) > deadlineOf(g.closed[i]) {
			t.Fatalf("closed out of deadline order at %d", i)
		}
	}
	// At twShrinkMin slots or fewer the slab stays.
	g = newHostRig(t, 0)
	for i := range twShrinkMin - 1 {
		g.put(rigID(i), time.Duration(i+1)*time.Millisecond, time.Minute)
	}
	g.advanceTo(time.Duration(twShrinkMin-10) * time.Millisecond)
	if g.h.Shrinks != 0 || len(g.h.recs) != twShrinkMin {
		t.Fatalf("a small table: %d shrinks, %d slots; want none, %d", g.h.Shrinks, len(g.h.recs), twShrinkMin)
	}
}

// deadlineOf is the deadline TestTimeWaitHostShrink gave rigID(n)'s record.
func deadlineOf(id ID) time.Duration {
	n := int(id.Remote.Port()) - 1024
	if n < 10000 {
		return time.Duration(n+1) * time.Millisecond
	}
	return time.Duration(n-10000)*20*time.Millisecond + 7700*time.Millisecond
}
