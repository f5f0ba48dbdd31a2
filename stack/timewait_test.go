package stack

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
	"github.com/tcpwheel/tcpwheel/timer"
	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// TestTimeWaitRecord: the side that closes first keeps its TIME-WAIT as a
// record, not its Conn and endpoint: the endpoint goes to CLOSED, the stack
// counts one connection in TIME-WAIT, the 4-tuple and the port stay in use
// (no dial may take them) until exactly 2*MSL after TIME-WAIT began, when
// all are released; a retransmitted FIN meanwhile is ACKed (counted in
// Stats) and restarts 2*MSL.
func TestTimeWaitRecord(t *testing.T) {
	p := newManualPairWith(t, tcp.Config{TimeWait: 10 * time.Second})
	client, server := p.connect()
	a := p.a.Stack
	id := client.id
	client.Close() // the client closes first: its side keeps TIME-WAIT
	p.shuttle()
	server.Close()
	fin := p.take(p.b) // the server's FIN, kept to come again
	if err := p.a.Inject(fin); err != nil {
		t.Fatal(err)
	}
	p.shuttle()
	entered := a.wheel.Now()
	if client.ep != nil || a.epSpares.Len() != 1 || client.Info().State != tcp.StateClosed {
		t.Fatalf("the client's endpoint %v, %d spare endpoints, Info's state %v; want it in the spares (its TIME-WAIT went to a record), 1, CLOSED",
			client.ep, a.epSpares.Len(), client.Info().State)
	}
	st := a.Stats()
	if st.TimeWait != 1 || st.Connections != 1 || len(a.conns) != 0 || !a.inUse(id) || a.ports[id.Local.Port()] != 1 {
		t.Fatalf("after the close: %d TIME-WAIT, %d connections, %d Conns, in use %v, port count %d; want 1 1 0 true 1",
			st.TimeWait, st.Connections, len(a.conns), a.inUse(id), a.ports[id.Local.Port()])
	}
	if _, err := a.dial(id); err == nil {
		t.Fatal("a dial took the 4-tuple of a connection in TIME-WAIT")
	}

	// The server's FIN again, 4 s in: ACKed, and 2*MSL starts over.
	segsOut := st.TCP.SegsOut
	if err := p.a.AdvanceTo(entered + 4*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.a.Inject(fin); err != nil {
		t.Fatal(err)
	}
	ack := p.take(p.a)
	if st := a.Stats(); st.TCP.SegsOut != segsOut+1 || len(ack) == 0 {
		t.Fatalf("the FIN again: segments out %d, want %d (its ACK)", st.TCP.SegsOut, segsOut+1)
	}
	restarted := entered + 4*time.Second
	if err := p.a.AdvanceTo(restarted + 10*time.Second - time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if a.Stats().TimeWait != 1 {
		t.Fatal("the record ended before 2*MSL after the FIN")
	}
	if d, ok := p.a.NextDeadline(); !ok || d != restarted+10*time.Second {
		t.Fatalf("next deadline %v, %v; want %v (the record's 2*MSL)", d, ok, restarted+10*time.Second)
	}
	if err := p.a.AdvanceTo(restarted + 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.TimeWait != 0 || st.Connections != 0 || a.inUse(id) || a.ports[id.Local.Port()] != 0 {
		t.Fatalf("after 2*MSL: %d TIME-WAIT, %d connections, in use %v, port count %d; want 0 0 false 0",
			st.TimeWait, st.Connections, a.inUse(id), a.ports[id.Local.Port()])
	}
	if _, err := a.dial(id); err != nil {
		t.Fatalf("a dial of the 4-tuple after 2*MSL: %v", err)
	}
}

// TestTimeWaitHeap: what a server's connection costs while it waits out
// TIME-WAIT after the server closed first (an HTTP/1.0 server's every
// connection, for a minute): the heap a thousand of them hold, once the
// application has dropped its Conns. A record and its table entry: a few
// hundred bytes; a Conn and its endpoint were some 3 KB.
// TestICMPTimeWaitRecord: an ICMP error quoting a segment of a connection
// whose TIME-WAIT a record holds is dropped as one about nothing in flight
// (Drops.ICMPBadSeq, as its endpoint would have counted it), not as one
// about no connection; the record stays.
func TestICMPTimeWaitRecord(t *testing.T) {
	p := newManualPairWith(t, tcp.Config{TimeWait: 10 * time.Second})
	client, server := p.connect()
	a := p.a.Stack
	id := client.id
	client.Close()
	p.shuttle()
	server.Close()
	p.shuttle()
	if _, ok := a.tws.Lookup(id); !ok {
		t.Fatal("no TIME-WAIT record")
	}
	th := make([]byte, 8)
	binary.BigEndian.PutUint16(th, id.Local.Port())
	binary.BigEndian.PutUint16(th[2:], id.Remote.Port())
	binary.BigEndian.PutUint32(th[4:], 12345) // any: nothing is in flight
	quote := ipv4Packet(id.Local.Addr(), id.Remote.Addr(), protoTCP, th)
	m := append([]byte{unreach4, 3, 0, 0, 0, 0, 0, 0}, quote...) // port unreachable: a hard error
	binary.BigEndian.PutUint16(m[2:], ^checksum.Checksum(m, 0))
	before := a.Stats()
	inject(t, p.a, ipv4Packet(id.Remote.Addr(), id.Local.Addr(), protoICMP, m))
	st := a.Stats()
	if d := st.Drops; d.ICMPBadSeq != before.Drops.ICMPBadSeq+1 || d.ICMPNoConnection != before.Drops.ICMPNoConnection || d.ICMPBadQuote != before.Drops.ICMPBadQuote {
		t.Fatalf("drops: ICMPBadSeq %d, ICMPNoConnection %d, ICMPBadQuote %d; want one more ICMPBadSeq alone", d.ICMPBadSeq, d.ICMPNoConnection, d.ICMPBadQuote)
	}
	if _, ok := a.tws.Lookup(id); !ok || st.TimeWait != 1 {
		t.Fatalf("the record is gone (%d in TIME-WAIT)", st.TimeWait)
	}
}

func TestTimeWaitHeap(t *testing.T) {
	const n = 1000
	p := newManualPairWith(t, tcp.Config{})
	ln, err := p.b.Listen("tcp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	l := ln.(*Listener)
	req, buf := make([]byte, 100), make([]byte, 2048)
	port := uint16(33000) // each connection's own: none meets a TIME-WAIT of its 4-tuple
	churn := func(k int) {
		for i := range k {
			port++
			client, err := p.a.StartDial("tcp", port, "198.18.0.2:7")
			if err != nil {
				t.Fatal(err)
			}
			p.shuttle()
			server, ok := l.TryAccept()
			if !ok {
				t.Fatalf("connection %d of %d: none to accept after the handshake (client %v, %v)", i, k, client.ep.State(), client.id)
			}
			p.send(client, req)
			if m, err := server.TryRead(buf); m != len(req) || err != nil {
				t.Fatalf("TryRead: %d, %v", m, err)
			}
			p.send(server, req)
			if m, err := client.TryRead(buf); m != len(req) || err != nil {
				t.Fatalf("client TryRead: %d, %v", m, err)
			}
			server.Close()
			p.shuttle()
			client.Close()
			p.shuttle()
		}
	}
	churn(1000) // warm: the stacks' spares and tables, the test pipes' rings (4096 packets each way)
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before, tw0 := heap(), p.b.Stats().TimeWait
	churn(n)
	after := heap()
	st := p.b.Stats()
	if st.TimeWait-tw0 != n || st.Connections != st.TimeWait {
		t.Fatalf("%d new TIME-WAIT records, %d connections in all; want %d, all of them records", st.TimeWait-tw0, st.Connections, n)
	}
	per := (int64(after) - int64(before)) / n
	t.Logf("heap per connection in TIME-WAIT: %d bytes", per)
	if per > 1024 {
		t.Fatalf("heap per connection in TIME-WAIT: %d bytes, want at most 1024", per)
	}
}

// TestTimeWaitReuseOwnClient: our stack dials our stack's listener, the
// server closes first and keeps TIME-WAIT as a record; 5 ms later the
// client dials the same 4-tuple again. Its connections share one
// timestamp clock (tcp.Config.TSOffset: one secret per stack, not one per
// connection), so its SYN is newer than the last segment the record saw
// and the server takes it as a new incarnation (RFC 6191): the handshake
// completes at once, no RST, no SYN again; on every one of 50 pairs of
// stacks, each with secrets of its own. The ISNs are random, so that the
// offset alone decides: with the ISS as the offset (the rule before
// 2026-11-24) the stack's own RFC 6528 generator made the offsets of one
// 4-tuple grow too, but not across generators (each loop of a stack had
// its own, a tcp.Dial with no ISN function draws one), nor after 2.4 hours
// (the ISN's 4 µs clock passes 2^31), nor with another ISN function.
func TestTimeWaitReuseOwnClient(t *testing.T) {
	const pairs, port = 50, 40000
	failed := 0
	for i := range pairs {
		rng := rand.New(rand.NewPCG(uint64(i), 6191))
		p := newManualPairWith(t, tcp.Config{ISN: func(tcp.ID, time.Duration) seqnum.Value { return seqnum.Value(rng.Uint32()) }})
		a, b := p.a, p.b
		ln, err := b.Listen("tcp", ":7")
		if err != nil {
			t.Fatal(err)
		}
		l := ln.(*Listener)
		dial := func() *Conn {
			c, err := a.StartDial("tcp", port, "198.18.0.2:7")
			if err != nil {
				t.Fatalf("pair %d: %v", i, err)
			}
			p.shuttle()
			return c
		}
		client := dial()
		server, ok := l.TryAccept()
		if !ok {
			t.Fatalf("pair %d: nothing to accept", i)
		}
		p.send(client, []byte("GET"))
		if n, err := server.TryRead(make([]byte, 8)); n != 3 || err != nil {
			t.Fatalf("pair %d: TryRead %d, %v", i, n, err)
		}
		server.Close() // first: the server keeps TIME-WAIT
		p.shuttle()
		client.Close()
		p.shuttle()
		if st := b.Stats(); st.TimeWait != 1 || client.Info().State != tcp.StateClosed {
			t.Fatalf("pair %d: server %d records in TIME-WAIT, client %v; want 1, CLOSED", i, st.TimeWait, client.Info().State)
		}
		for _, m := range []*Manual{a, b} {
			if err := m.AdvanceTo(5 * time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
		resets := a.Stats().TCP.ResetsSent
		again := dial()
		if _, ok := l.TryAccept(); !ok || again.ep.State() != tcp.StateEstablished || b.Stats().Listen.TimeWaitReused != 1 || a.Stats().TCP.ResetsSent != resets {
			failed++
			t.Logf("pair %d: client %v, accepted %v, TIME-WAITs reused %d, client RSTs %d; want ESTABLISHED, true, 1, 0",
				i, again.ep.State(), ok, b.Stats().Listen.TimeWaitReused, a.Stats().TCP.ResetsSent-resets)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d pairs did not reuse the 4-tuple at once", failed, pairs)
	}
}

// TestTSOffsetOneSecret: a stack's connections to one address take one
// timestamp offset, whatever their ports (Dial does not draw a secret per
// connection, nor SetTCPConfig), and so do the loops of a stack with
// several; the stack's ISN generator is one too.
func TestTSOffsetOneSecret(t *testing.T) {
	p := newManualPairWith(t, tcp.Config{})
	var tsvals []uint32
	for i, port := range []uint16{40000, 40001, 40002} {
		if i == 2 {
			// A configuration set later without an offset function
			// keeps the stack's (the packetdrill shim's socket options).
			if err := p.a.SetTCPConfig(tcp.Config{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := p.a.StartDial("tcp", port, "198.18.0.2:7"); err != nil {
			t.Fatal(err)
		}
		_, seg, ok := parseTCP(p.take(p.a))
		if !ok || seg.Flags != tcp.FlagSYN || !seg.Options.TS {
			t.Fatalf("port %d: want a SYN with timestamps", port)
		}
		tsvals = append(tsvals, seg.Options.TSVal)
	}
	if tsvals[0] != tsvals[1] || tsvals[1] != tsvals[2] {
		t.Errorf("the SYNs of three ports at one instant: TSvals %v, want one", tsvals)
	}
	// The listener's side: its SYN-ACKs, before and after a
	// Listener.SetTCPConfig without an offset function.
	ln, err := p.b.Listen("tcp", ":8")
	if err != nil {
		t.Fatal(err)
	}
	tsvals = tsvals[:0]
	for i, port := range []uint16{41000, 41001} {
		if i == 1 {
			if err := ln.(*Listener).SetTCPConfig(tcp.Config{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := p.a.StartDial("tcp", port, "198.18.0.2:8"); err != nil {
			t.Fatal(err)
		}
		if err := p.b.Inject(p.take(p.a)); err != nil {
			t.Fatal(err)
		}
		_, seg, ok := parseTCP(p.take(p.b))
		if !ok || seg.Flags != tcp.FlagSYN|tcp.FlagACK || !seg.Options.TS {
			t.Fatalf("port %d: want a SYN-ACK with timestamps", port)
		}
		tsvals = append(tsvals, seg.Options.TSVal)
	}
	if tsvals[0] != tsvals[1] {
		t.Errorf("the listener's SYN-ACKs to two ports at one instant: TSvals %v, want one", tsvals)
	}

	_, b, _ := loopsPair(t)
	shards := b.grp.shards
	id := tcp.ID{Local: netip.MustParseAddrPort("198.18.0.2:7"), Remote: netip.MustParseAddrPort("198.18.0.1:40000")}
	for _, s := range shards[1:] {
		if x, y := shards[0].cfg.TCP.TSOffset(id, 1), s.cfg.TCP.TSOffset(id, 2); x != y {
			t.Errorf("loops' timestamp offsets %d and %d, want one", x, y)
		}
		if x, y := shards[0].cfg.TCP.ISN(id, time.Second), s.cfg.TCP.ISN(id, time.Second); x != y {
			t.Errorf("loops' ISNs %d and %d at one instant, want one", x, y)
		}
	}
}

// TestTimeWaitOverflow: with Config.MaxTimeWait records held, a connection
// that reaches TIME-WAIT after Close closes at once instead (counted in
// Stats.TimeWaitOverflows): its 4-tuple and port are free, and the peer's
// FIN again is answered with a reset, as for no connection; once a record
// has ended, the next connection keeps one again. A negative MaxTimeWait,
// or one above MaxMaxTimeWait, is ErrConfig; zero means the default.
func TestTimeWaitOverflow(t *testing.T) {
	p := newManualPairConfig(t, tcp.Config{TimeWait: 10 * time.Second},
		func(d *tuntest.Endpoint) tun.Device { return d }, func(c *Config) { c.MaxTimeWait = 1 })
	a := p.a.Stack
	ln, err := p.b.Listen("tcp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	l := ln.(*Listener)
	// closeFirst closes a connection from a's side first, and returns its
	// 4-tuple and the server's FIN.
	closeFirst := func() (tcp.ID, []byte) {
		client, server := p.open(l)
		client.Close()
		p.shuttle()
		server.Close()
		fin := p.take(p.b)
		if err := p.a.Inject(fin); err != nil {
			t.Fatal(err)
		}
		p.shuttle()
		return client.id, fin
	}
	first, _ := closeFirst()
	entered := a.wheel.Now()
	if st := a.Stats(); st.TimeWait != 1 || st.TimeWaitOverflows != 0 || !a.inUse(first) {
		t.Fatalf("the first close: %d in TIME-WAIT, %d overflows, in use %v; want 1 0 true", st.TimeWait, st.TimeWaitOverflows, a.inUse(first))
	}
	second, fin := closeFirst()
	st := a.Stats()
	if st.TimeWait != 1 || st.TimeWaitOverflows != 1 || st.Connections != 1 || a.inUse(second) || a.ports[second.Local.Port()] != 0 {
		t.Fatalf("the second close, the table full: %d in TIME-WAIT, %d overflows, %d connections, in use %v, port count %d; want 1 1 1 false 0",
			st.TimeWait, st.TimeWaitOverflows, st.Connections, a.inUse(second), a.ports[second.Local.Port()])
	}
	if err := p.a.Inject(fin); err != nil { // the server's FIN again: no connection
		t.Fatal(err)
	}
	if rst := p.take(p.a); len(rst) < ipv4HeaderLen+tcp.HeaderMinSize || rst[ipv4HeaderLen+13]&byte(tcp.FlagRST) == 0 {
		t.Fatalf("the FIN again after the overflow: %x, want a RST", rst)
	}
	if got := a.Stats().ResetsSent; got != st.ResetsSent+1 {
		t.Fatalf("resets sent %d, want %d", got, st.ResetsSent+1)
	}
	if err := p.a.AdvanceTo(entered + 10*time.Second); err != nil {
		t.Fatal(err)
	}
	third, _ := closeFirst()
	if st := a.Stats(); st.TimeWait != 1 || st.TimeWaitOverflows != 1 || !a.inUse(third) || a.inUse(first) {
		t.Fatalf("after the first record ended: %d in TIME-WAIT, %d overflows, the third in use %v, the first %v; want 1 1 true false",
			st.TimeWait, st.TimeWaitOverflows, a.inUse(third), a.inUse(first))
	}

	for _, bad := range []int{-1, MaxMaxTimeWait + 1} {
		dev, _ := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500})
		if _, err := NewManual(Config{Device: dev, Addr: addrA, Clock: timer.NewManualClock(0), MaxTimeWait: bad}); !errors.Is(err, ErrConfig) {
			t.Fatalf("MaxTimeWait %d: %v, want ErrConfig", bad, err)
		}
	}
	dev, _ := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500})
	m, err := NewManual(Config{Device: dev, Addr: addrA, Clock: timer.NewManualClock(0)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.tws.Max != DefaultMaxTimeWait {
		t.Fatalf("the default bound %d, want %d", m.tws.Max, DefaultMaxTimeWait)
	}
}
