package stack

import (
	"testing"

	"github.com/tcpwheel/tcpwheel/tcp"
)

// TestLoneHandOff: a batch that wakes one connection's reader alone, as
// the batch before that woke readers did, is a lone exchange
// (Stack.handOff), counted in Stats.Wheel.LoneHandOffs on the manual loop
// too. A connection's first wake is none (no batch before it woke it);
// exchanges that alternate between two connections are none; a batch that
// wakes two readers is none, and the next batch that wakes the last of
// them alone is one.
func TestLoneHandOff(t *testing.T) {
	p := newManualPair(t)
	ln, err := p.b.Listen("tcp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	l := ln.(*Listener)
	c1, s1 := p.open(l)
	c2, s2 := p.open(l)
	srv := p.b.Stack
	offs := func() uint64 { return srv.Stats().Wheel.LoneHandOffs }
	buf := make([]byte, 64)
	expect := func(c *Conn, want string) {
		t.Helper()
		if got := p.readAll(c, buf, nil); string(got) != want {
			t.Fatalf("read %q, want %q", got, want)
		}
	}
	exchange := func(c, s *Conn) {
		t.Helper()
		p.send(c, []byte("ping"))
		expect(s, "ping")
		p.send(s, []byte("pong"))
		expect(c, "pong")
	}

	base := offs()
	for range 5 {
		exchange(c1, s1)
	}
	if got := offs() - base; got != 4 {
		t.Fatalf("5 exchanges on one connection: %d lone hand-offs, want 4 (all but the first)", got)
	}
	base = offs()
	for range 3 {
		exchange(c2, s2)
		exchange(c1, s1)
	}
	if got := offs() - base; got != 0 {
		t.Fatalf("exchanges alternating between two connections: %d lone hand-offs, want 0", got)
	}

	// One batch with data for both connections, c1's last: none; then c1's
	// alone: one.
	base = offs()
	for _, c := range []*Conn{c2, c1} {
		if _, err := c.TryWrite([]byte("both")); err != nil {
			t.Fatal(err)
		}
	}
	both := [][]byte{p.take(p.a), p.take(p.a)}
	if err := p.b.Wake(srv.wheel.Now(), both...); err != nil {
		t.Fatal(err)
	}
	p.shuttle()
	expect(s1, "both")
	expect(s2, "both")
	if got := offs() - base; got != 0 {
		t.Fatalf("a batch waking two readers: %d lone hand-offs, want 0", got)
	}
	exchange(c1, s1)
	if got := offs() - base; got != 1 {
		t.Fatalf("then the last of them alone: %d lone hand-offs, want 1", got)
	}

	// A connection gone is no batch's last any more.
	c1.Close()
	s1.Close()
	p.shuttle()
	if srv.lastWoken == s1 {
		t.Fatal("the stack still points at a Conn it forgot")
	}
}

// TestLoneHandOffNotBulk: a batch that leaves the reader more than loneMax
// unread is bulk data, not an exchange's, even on the connection of the
// batch before: no lone hand-off; one of loneMax or less is one.
func TestLoneHandOffNotBulk(t *testing.T) {
	p := newManualPairWith(t, tcp.Config{InitialCwnd: 40}) // loneMax and more in one flight
	c, s := p.connect()
	srv := p.b.Stack
	offs := func() uint64 { return srv.Stats().Wheel.LoneHandOffs }
	buf := make([]byte, 64<<10)
	p.send(c, []byte("ping")) // s's first wake: the batch before it woke nobody
	p.readAll(s, buf, nil)
	for _, tc := range []struct {
		size int
		want uint64
	}{{loneMax, 1}, {loneMax + 1, 0}, {100, 1}, {3 * loneMax, 0}} {
		base := offs()
		if n, err := c.TryWrite(make([]byte, tc.size)); n != tc.size || err != nil {
			t.Fatalf("TryWrite of %d: %d, %v", tc.size, n, err)
		}
		var batch [][]byte
		for p.aCarried < p.aDev.Stats().Sent {
			batch = append(batch, p.take(p.a))
		}
		if err := p.b.Wake(srv.wheel.Now(), batch...); err != nil { // one batch
			t.Fatal(err)
		}
		p.shuttle()
		if got := len(p.readAll(s, buf, nil)); got != tc.size {
			t.Fatalf("read %d bytes, want %d", got, tc.size)
		}
		if got := offs() - base; got != tc.want {
			t.Fatalf("a batch of %d bytes (loneMax %d): %d lone hand-offs, want %d", tc.size, loneMax, got, tc.want)
		}
	}
}
