package tcp

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// Timestamp offsets (Config.TSOffset): one clock per address pair, so that a
// new connection's SYN to a 4-tuple in TIME-WAIT passes RFC 6191's test.

// TestTSOffset: the default offset is a keyed hash of the two addresses,
// ports left out; active opens, passive ones and SYN cookies take it, so
// successive connections between two addresses send TSvals of one clock.
func TestTSOffset(t *testing.T) {
	f := NewTSOffset()
	other := ID{Local: localAP, Remote: netip.MustParseAddrPort("198.18.0.3:80")}
	v6 := ID{Local: netip.MustParseAddrPort("[2001:db8::1]:4000"), Remote: netip.MustParseAddrPort("[2001:db8::2]:80")}
	t.Run("a hash of the addresses, not the ports, nor the ISS", func(t *testing.T) {
		ports := ID{Local: netip.AddrPortFrom(localAP.Addr(), 4001), Remote: netip.AddrPortFrom(remoteAP.Addr(), 8080)}
		if a, b := f(testID, 1), f(ports, 99); a != b {
			t.Errorf("%v and %v: offsets %d and %d, want one", testID, ports, a, b)
		}
		swapped := ID{Local: testID.Remote, Remote: testID.Local}
		for _, id := range []ID{other, swapped, v6} {
			if f(id, 1) == f(testID, 1) {
				t.Errorf("%v: the offset of %v", id, testID)
			}
		}
		if g := NewTSOffset(); g(testID, 1) == f(testID, 1) {
			t.Error("two secrets, one offset")
		}
	})
	t.Run("active opens: successive connections on one clock", func(t *testing.T) {
		h := newHarness(t)
		cfg := Config{TSOffset: f}
		dial := func(id ID) uint32 {
			t.Helper()
			if _, err := Dial(OnWheel(h.w), h.out, id, cfg); err != nil {
				t.Fatal(err)
			}
			return h.expect(flagsAre(FlagSYN), tsIs(true)).Options.TSVal
		}
		h.advanceTo(7 * time.Millisecond)
		if got, want := dial(testID), 7+f(testID, 0); got != want {
			t.Fatalf("the first SYN's TSval %d, want %d (7 ms + the offset)", got, want)
		}
		h.advanceTo(907 * time.Millisecond) // before the first SYN's RTO
		second := ID{Local: netip.AddrPortFrom(localAP.Addr(), 4001), Remote: remoteAP}
		if got, want := dial(second), 907+f(testID, 0); got != want {
			t.Fatalf("another port's SYN: TSval %d, want %d (the first's + 900 ms)", got, want)
		}
		if got, want := dial(other), 907+f(other, 0); got != want || got == 907+f(testID, 0) {
			t.Fatalf("another address's SYN: TSval %d, want %d (its own offset)", got, want)
		}
	})
	t.Run("a passive open", func(t *testing.T) {
		h := listen(t, ListenerConfig{Endpoint: Config{TSOffset: f}})
		h.advanceTo(37 * time.Millisecond)
		h.send(h.peerSyn())
		h.expect(flagsAre(FlagSYN|FlagACK), tsIs(true), tsValIs(37+f(testID, 0)))
	})
	t.Run("a SYN cookie's SYN-ACK and its connection", func(t *testing.T) {
		h := listen(t, ListenerConfig{Endpoint: Config{TSOffset: f}, SynCookies: SynCookiesAlways})
		h.advanceTo(37 * time.Millisecond)
		sa := h.cookieSynAck()
		if want := cookieTSVal(37+f(testID, 0), 7, true); sa.Options.TSVal != want {
			t.Fatalf("the cookie's TSval %d, want %d (37 ms + the offset, the options in its low bits)", sa.Options.TSVal, want)
		}
		h.advanceTo(50 * time.Millisecond)
		if h.cookieAck([]byte("hello")) == nil {
			t.Fatal("no connection from the cookie")
		}
		h.expect(flagsAre(FlagACK), ackIs(peerISS+1+5), tsValIs(50+f(testID, 0)))
	})
}

// tsValIs checks the TSval.
func tsValIs(v uint32) check {
	return func(s *Segment) error {
		if !s.Options.TS || s.Options.TSVal != v {
			return fmt.Errorf("TSval %d (present %v), want %d", s.Options.TSVal, s.Options.TS, v)
		}
		return nil
	}
}

// TestTSOffsetTimeWaitReuse is the case Config.TSOffset is for: our
// client's connection ends with the server (our listener's side) in
// TIME-WAIT, as an endpoint or a record; the client connects again from the
// same port 5 ms later. Its SYN's TSval is newer than the last one the
// server saw, so the server takes it as a new incarnation (RFC 6191 2) and
// the handshake completes one round trip after the SYN: for every secret
// and every pair of random ISNs. (With the ISS as the offset, half of them
// are older: the server ACKs, the client resets, and its SYN goes again
// after 1 s.)
func TestTSOffsetTimeWaitReuse(t *testing.T) {
	const seeds, delay = 200, time.Millisecond
	for _, record := range []bool{false, true} {
		failed := 0
		for seed := range uint64(seeds) {
			if err := reuseAfterTimeWait(t, seed, record, delay); err != nil {
				failed++
				if failed <= 3 {
					t.Errorf("record %v, seed %d: %v", record, seed, err)
				}
			}
		}
		if failed > 0 {
			t.Errorf("record %v: %d of %d seeds failed", record, failed, seeds)
		}
	}
}

// reuseAfterTimeWait runs one such case: the client's ISNs from seed, its
// timestamp offsets from a secret of their own shared by its connections,
// as a stack's (the server's its own); the server's TIME-WAIT is a record
// when record.
func reuseAfterTimeWait(t *testing.T, seed uint64, record bool, delay time.Duration) error {
	l := newLink(t, delay)
	rng := rand.New(rand.NewPCG(seed, 6191))
	ccfg := Config{ISN: func(ID, time.Duration) seqnum.Value { return seqnum.Value(rng.Uint32()) }, TSOffset: NewTSOffset()}
	c := l.open(t, ListenerConfig{}, ccfg)
	buf := make([]byte, 64)
	sent, closed := false, false
	for steps := 0; ; steps++ {
		if steps > 1000 || !l.step() {
			return fmt.Errorf("the first connection: client %v, server %v after %d steps", c.State(), l.server.State(), steps)
		}
		if c.State() == StateEstablished && !sent {
			c.Write([]byte("GET"))
			sent = true
		}
		if s := l.server; s != nil && s.Readable() > 0 {
			s.Read(buf)
			s.Write([]byte("reply"))
			s.Close() // the server closes first: its side keeps TIME-WAIT
		}
		if c.Readable() > 0 {
			c.Read(buf)
		}
		if _, err := c.Read(buf); err == io.EOF && !closed {
			c.Close()
			closed = true
		}
		if c.State() == StateClosed && l.server != nil && l.server.State() == StateTimeWait && len(l.queue) == 0 {
			break
		}
	}
	tw := l.server
	var rec TimeWait
	if record {
		var ok bool
		if rec, ok = tw.TimeWait(&TimeWaitHost{Timers: OnWheel(l.w), Output: linkOut{l, 1}, Closed: func(ID) {}}); !ok {
			return fmt.Errorf("no TIME-WAIT record")
		}
	}
	// The stack's demultiplexer: a SYN to the 4-tuple in TIME-WAIT is
	// offered to the listener first (RFC 6191), else TIME-WAIT answers it.
	l.server = nil
	l.toServer = func(seg *Segment) bool {
		switch {
		case record && !rec.Closed():
			if !l.ln.ReuseTimeWaitRecord(rec, seg) {
				rec.HandleSegment(seg)
			}
			return true
		case !record && tw.State() == StateTimeWait:
			if !l.ln.ReuseTimeWait(tw, seg) {
				tw.HandleSegment(seg)
			}
			return true
		}
		return false
	}
	l.w.Advance(l.clk.Advance(5 * time.Millisecond))
	dialAt := l.w.Now()
	c2, err := Dial(OnWheel(l.w), linkOut{l, 0}, testID, ccfg)
	if err != nil {
		return err
	}
	l.client = c2
	for c2.State() == StateSynSent && l.step() {
	}
	if c2.State() != StateEstablished || l.w.Now() != dialAt+2*delay || l.ln.Stats().TimeWaitReused != 1 {
		return fmt.Errorf("the second connection: %v at %v (dialled at %v, want ESTABLISHED one round trip later), %d TIME-WAITs reused, want 1; client offsets %d and %d, first ISS %d",
			c2.State(), l.w.Now(), dialAt, l.ln.Stats().TimeWaitReused, c.tsOffset, c2.tsOffset, c.snd.iss)
	}
	return nil
}
