package stack

import (
	"runtime"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
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
	if st := client.ep.State(); st != tcp.StateClosed {
		t.Fatalf("the client's endpoint is in %v, want CLOSED (its TIME-WAIT went to a record)", st)
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
