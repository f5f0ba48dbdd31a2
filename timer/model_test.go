package timer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// model runs a wheel beside a reference that knows only the contract: an entry
// started at Now with duration d is due at tick ceil((Now+d)/tick); an Advance to
// T fires exactly the entries due at or before floor(T/tick); each fires with Now
// at its deadline tick (never before Now+d, less than one tick after it).
type model struct {
	t       testing.TB
	clk     *ManualClock
	w       *Wheel
	tick    time.Duration
	entries []Entry
	due     []time.Duration // reference: tick-rounded due instant per entry, -1 when idle
	asked   []time.Duration // the instant the caller asked for
	firedAt []time.Duration // set by the callbacks during one Advance, -1 when not fired
	fired   []int
	ops     int
}

func newModel(t testing.TB, tick time.Duration, slots, n int) *model {
	m := &model{t: t, clk: NewManualClock(0), tick: tick}
	w, err := New(Config{Tick: tick, Slots: slots, Clock: m.clk})
	if err != nil {
		t.Fatal(err)
	}
	m.w = w
	m.entries = make([]Entry, n)
	m.due = make([]time.Duration, n)
	m.asked = make([]time.Duration, n)
	m.firedAt = make([]time.Duration, n)
	for i := range m.entries {
		m.due[i], m.firedAt[i] = -1, -1
		m.entries[i].Init(func() {
			m.firedAt[i] = m.w.Now()
			m.fired = append(m.fired, i)
		})
	}
	return m
}

func (m *model) fail(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("after %d ops (now %v): %s", m.ops, m.w.Now(), fmt.Sprintf(format, args...))
}

func (m *model) start(i int, d time.Duration) {
	m.ops++
	now := m.w.Now()
	if err := m.w.Start(&m.entries[i], d); err != nil {
		m.fail("Start(%d, %v): %v", i, d, err)
	}
	asked := now
	if d > 0 {
		if d > math.MaxInt64-now {
			asked = math.MaxInt64
		} else {
			asked = now + d
		}
	}
	ticks := asked / m.tick
	if asked%m.tick != 0 {
		ticks++
	}
	m.asked[i] = asked
	m.due[i] = ticks * m.tick
	if ticks > math.MaxInt64/m.tick {
		m.due[i] = math.MaxInt64 // never due within the test
	}
}

func (m *model) stop(i int) {
	m.ops++
	want := m.due[i] >= 0
	if got := m.w.Stop(&m.entries[i]); got != want {
		m.fail("Stop(%d) = %v, want %v", i, got, want)
	}
	m.due[i] = -1
}

func (m *model) advance(d time.Duration) {
	m.ops++
	prev := m.w.Now()
	to := m.clk.Advance(d)
	m.fired = m.fired[:0]
	n := m.w.Advance(to)
	if n != len(m.fired) {
		m.fail("Advance returned %d, callbacks ran %d", n, len(m.fired))
	}
	last := time.Duration(-1)
	for _, i := range m.fired {
		at := m.firedAt[i]
		switch {
		case m.due[i] < 0:
			m.fail("entry %d fired but was not pending", i)
		case m.due[i] > to:
			m.fail("entry %d fired at Advance(%v), due at %v: early", i, to, m.due[i])
		case at < m.asked[i] && m.asked[i] > prev:
			m.fail("entry %d fired with Now %v before its deadline %v", i, at, m.asked[i])
		case m.asked[i] > prev && at != m.due[i]:
			m.fail("entry %d fired with Now %v, want its tick %v", i, at, m.due[i])
		case at < last:
			m.fail("entry %d fired with Now %v after one at %v: out of order", i, at, last)
		}
		last = at
		m.due[i] = -1
		m.firedAt[i] = -1
	}
	pending := 0
	for i, due := range m.due {
		if due >= 0 && due <= to {
			m.fail("entry %d due at %v did not fire by %v", i, due, to)
		}
		if due >= 0 {
			pending++
			if !m.entries[i].Pending() {
				m.fail("entry %d should be pending", i)
			}
		}
	}
	if got := m.w.Len(); got != pending {
		m.fail("Len = %d, reference has %d pending", got, pending)
	}
	if pending > 0 {
		next, ok := m.w.NextDeadline()
		if !ok {
			m.fail("NextDeadline reports nothing with %d pending", pending)
		}
		for i, due := range m.due {
			if due >= 0 && due < next {
				m.fail("NextDeadline %v is after entry %d's deadline %v", next, i, due)
			}
		}
	} else if _, ok := m.w.NextDeadline(); ok {
		m.fail("NextDeadline reports work with nothing pending")
	}
}

// moveNow moves the clock and the wheel's Now by d without running anything
// (Wheel.MoveNow), as a loop does before its input: nothing may fire, Now must
// be the clock's, and the next advance must fire what is due by then.
func (m *model) moveNow(d time.Duration) {
	m.ops++
	to := m.clk.Advance(d)
	m.fired = m.fired[:0]
	m.w.MoveNow(to)
	if len(m.fired) != 0 {
		m.fail("MoveNow(%v) ran %d entries", to, len(m.fired))
	}
	if m.w.Now() != to {
		m.fail("Now after MoveNow(%v) = %v", to, m.w.Now())
	}
}

// durations draws from every scale the wheel handles: zero and negative, within
// a tick, each level, and beyond the clock.
func (m *model) duration(r uint64) time.Duration {
	switch r % 10 {
	case 0:
		return 0
	case 1:
		return -time.Duration(r >> 8 % 1000)
	case 2:
		return time.Duration(r >> 8 % uint64(m.tick*2))
	case 3, 4:
		return time.Duration(r >> 8 % uint64(m.tick*64))
	case 5, 6:
		return time.Duration(r >> 8 % uint64(m.tick*4096))
	case 7:
		return time.Duration(r >> 8 % uint64(m.tick*(1<<20)))
	case 8:
		return time.Duration(r >> 8 % uint64(1000*time.Hour))
	default:
		return math.MaxInt64 - time.Duration(r>>8%1000)
	}
}

func (m *model) step(r uint64) {
	i := int(r>>32) % len(m.entries)
	switch r % 8 {
	case 0, 1, 2:
		m.start(i, m.duration(r>>4))
	case 3:
		m.stop(i)
	case 4:
		if r>>4%4 == 0 {
			m.moveNow(time.Duration(r >> 8 % uint64(m.tick*300)))
			return
		}
		fallthrough
	default:
		var d time.Duration
		switch r >> 4 % 6 {
		case 0:
			d = 0
		case 1:
			d = time.Duration(r >> 8 % uint64(m.tick))
		case 2, 3:
			d = time.Duration(r >> 8 % uint64(m.tick*70))
		case 4:
			d = time.Duration(r >> 8 % uint64(m.tick*5000))
		default:
			d = time.Duration(r >> 8 % uint64(48*time.Hour))
		}
		m.advance(d)
	}
}

func TestModel(t *testing.T) {
	ops := 1_000_000
	if raceEnabled || testing.Short() {
		ops = 200_000
	}
	for _, tc := range []struct {
		tick  time.Duration
		slots int
		n     int
	}{
		{DefaultTick, DefaultSlots, 64},
		{time.Millisecond, 64, 1000},
		{MinTick, 2, 50},
		{333 * time.Microsecond, 256, 300},
		{MaxTick, 8, 20},
	} {
		t.Run(fmt.Sprintf("tick=%v/slots=%d/n=%d", tc.tick, tc.slots, tc.n), func(t *testing.T) {
			m := newModel(t, tc.tick, tc.slots, tc.n)
			rng := rand.New(rand.NewPCG(uint64(tc.tick), uint64(tc.slots)))
			for m.ops < ops {
				m.step(rng.Uint64())
			}
			m.advance(math.MaxInt64 / 4)
		})
	}
}

func FuzzWheel(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7})
	f.Add([]byte("start stop advance start start advance"))
	f.Add([]byte{0x10, 0x20, 0x30, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00})
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 255, 4, 0, 0, 0, 0, 0, 0, 7})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		slots := 1 << (1 + data[0]%12)
		tick := MinTick * time.Duration(1+data[1]%100)
		m := newModel(t, tick, slots, 16)
		data = data[2:]
		for len(data) > 0 {
			var r uint64
			for k := 0; k < 8 && len(data) > 0; k++ {
				r = r<<8 | uint64(data[0])
				data = data[1:]
			}
			r *= 0x9e3779b97f4a7c15 // spread the bits of short inputs
			m.step(r)
		}
		m.advance(math.MaxInt64 / 4)
	})
}
