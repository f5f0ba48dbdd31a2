package tcp

import (
	"testing"
	"time"
)

// sndbufGrowth is one change of the client's send buffer seen by
// bulkGrowth: the size before and after, and the bytes acknowledged then
// and at the step before.
type sndbufGrowth struct {
	from, to          int
	acked, ackedPrior uint64
	at                time.Duration
}

// growthCase is a run of bulkGrowth.
type growthCase struct {
	size int
	cfg  func(*Config)
	set  func(*Endpoint)
	// appLimited: the writer writes 64 KB at a time, only into an empty
	// send buffer.
	appLimited bool
	drop       func(from, n int, seg *Segment) bool
}

// bulkGrowth sends size bytes from a dialled endpoint configured by cfg to
// an accepted one that reads all it gets, over a 1 ms link that drops what
// drop says; the writer fills the send buffer at every step (with
// appLimited, 64 KB when it is empty), and set, if not nil, runs once the
// connection is established. It returns the changes of the client's send
// buffer size, and its final size.
func bulkGrowth(t *testing.T, tc growthCase) ([]sndbufGrowth, int) {
	t.Helper()
	size, cfgf, set := tc.size, tc.cfg, tc.set
	l := newLink(t, time.Millisecond)
	l.drop = tc.drop
	var cfg Config
	if cfgf != nil {
		cfgf(&cfg)
	}
	c := l.open(t, ListenerConfig{Endpoint: Config{}}, cfg)
	payload := make([]byte, 64<<10)
	buf := make([]byte, 256<<10)
	var out []sndbufGrowth
	written, read, prev := 0, 0, c.SendBufferSize()
	var prevAcked uint64
	setDone := false
	for steps := 0; steps < 10_000_000 && read < size; steps++ {
		if c.State() == StateEstablished && (!tc.appLimited || c.Writable() == c.SendBufferSize()) {
			if set != nil && !setDone {
				set(c)
				setDone, prev = true, c.SendBufferSize()
			}
			for written < size {
				n, err := c.Write(payload[:min(len(payload), size-written)])
				if err != nil {
					t.Fatalf("Write: %v", err)
				}
				if n == 0 {
					break
				}
				written += n
				if tc.appLimited {
					break // one write of 64 KB
				}
			}
		}
		if s := l.server; s != nil {
			for {
				n, _ := s.Read(buf)
				read += n
				if n == 0 {
					break
				}
			}
		}
		acked := c.Info().BytesAcked
		if n := c.SendBufferSize(); n != prev {
			out = append(out, sndbufGrowth{from: prev, to: n, acked: acked, ackedPrior: prevAcked, at: l.clk.Now()})
			prev = n
		}
		prevAcked = acked
		if !l.step() {
			break
		}
	}
	if read != size {
		t.Fatalf("read %d of %d bytes", read, size)
	}
	return out, c.SendBufferSize()
}

// TestSendBufferGrows: a default send buffer that a bulk writer keeps full
// doubles, to SendBufferMax, at the first ACK that brings the bytes
// acknowledged to four times its size (autoGrowSendBuffer), and no sooner.
func TestSendBufferGrows(t *testing.T) {
	got, final := bulkGrowth(t, growthCase{size: 12 << 20})
	want := []struct{ from, to int }{{DefaultSendBuffer, 2 * DefaultSendBuffer}, {2 * DefaultSendBuffer, DefaultSendBufferMax}}
	if len(got) != len(want) || final != DefaultSendBufferMax {
		t.Fatalf("growths %+v, final %d; want %v to %d", got, final, want, DefaultSendBufferMax)
	}
	for i, g := range got {
		if g.from != want[i].from || g.to != want[i].to {
			t.Errorf("growth %d: %d to %d, want %d to %d", i, g.from, g.to, want[i].from, want[i].to)
		}
		// At the ACK that crossed four buffers' worth: not before, and
		// not an ACK later (the writer keeps the buffer full, and cwnd,
		// grown in slow start past the buffer, has room).
		if lim := 4 * uint64(g.from); g.acked < lim || g.ackedPrior >= lim {
			t.Errorf("growth %d from %d at %v: %d bytes acknowledged, %d the step before; want it at the crossing of %d", i, g.from, g.at, g.acked, g.ackedPrior, lim)
		}
	}
}

// TestSendBufferStays: a transfer of less than four buffers' worth, a
// writer that never fills the buffer, a sender that cwnd holds back, a
// send buffer set in the Config, or one set on the endpoint
// (SetSendBuffer, as SO_SNDBUF locks Linux's), does not grow; a set
// SendBufferMax bounds the growth.
func TestSendBufferStays(t *testing.T) {
	const big = 12 << 20
	for _, tc := range []struct {
		name string
		growthCase
		want int
	}{
		{"short transfer", growthCase{size: 4*DefaultSendBuffer - 1}, DefaultSendBuffer},
		{"application-limited", growthCase{size: big, appLimited: true}, DefaultSendBuffer},
		{"cwnd-limited", growthCase{size: big, drop: func(from, n int, s *Segment) bool { return from == 0 && n%30 == 0 }}, DefaultSendBuffer},
		{"Config.SendBuffer", growthCase{size: big, cfg: func(c *Config) { c.SendBuffer = DefaultSendBuffer }}, DefaultSendBuffer},
		{"SetSendBuffer", growthCase{size: big, set: func(e *Endpoint) {
			if err := e.SetSendBuffer(300 << 10); err != nil {
				t.Fatal(err)
			}
		}}, 300 << 10},
		{"SendBufferMax", growthCase{size: big, cfg: func(c *Config) { c.SendBuffer, c.SendBufferMax = 256<<10, 600<<10 }}, 600 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, final := bulkGrowth(t, tc.growthCase)
			if final != tc.want {
				t.Fatalf("final send buffer %d (growths %+v), want %d", final, got, tc.want)
			}
		})
	}
}
