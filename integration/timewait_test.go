package integration

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"
	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tun/impair"
)

// TestTimeWaitReuse: the stack closes first, as an HTTP/1.0 server does, and
// holds TIME-WAIT for the 4-tuple; the kernel connects again from the same
// port. Its SYN carries a newer timestamp, so the stack takes it as a new
// connection (RFC 6191, as Linux): one SYN, a SYN-ACK, no RST, and no SYN
// retransmission by the kernel. (A bare ACK instead, RFC 9293's answer in
// TIME-WAIT, makes the kernel reset and resend its SYN.)
func TestTimeWaitReuse(t *testing.T) {
	e := newEnv(t, envOptions{Subnet: 40})
	ln := e.listen(t, 80)
	const clientPort = 40123
	client := netip.AddrPortFrom(e.KernelAddr, clientPort)
	syns := e.watch(impair.Ingress, func(s segInfo) bool {
		return s.TCP && s.Src == client && s.has(header.TCPFlagSyn)
	})
	resets := e.watch(impair.Ingress, func(s segInfo) bool { return s.TCP && s.has(header.TCPFlagRst) })

	// The server: answer one request per connection, then close first.
	served := make(chan *stack.Conn, 2)
	go func() {
		for {
			c, err := ln.(*stack.Listener).AcceptTCP()
			if err != nil {
				return
			}
			buf := make([]byte, 64)
			n, _ := c.Read(buf)
			c.Write(buf[:n])
			c.Close()
			served <- c
		}
	}()
	bindClientPort := func(fd uintptr) {
		syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
		if err := syscall.Bind(int(fd), &syscall.SockaddrInet4{Port: clientPort, Addr: e.KernelAddr.As4()}); err != nil {
			t.Errorf("bind %v: %v", client, err)
		}
	}
	exchange := func(round int) *stack.Conn {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := e.Bed.KernelDial(ctx, 80, bindClientPort)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("GET / HTTP/1.0\r\n\r\n")); err != nil {
			t.Fatalf("round %d: write: %v", round, err)
		}
		got, err := io.ReadAll(c) // until the stack's FIN
		if err != nil || string(got) != "GET / HTTP/1.0\r\n\r\n" {
			t.Fatalf("round %d: read %q, %v", round, got, err)
		}
		select {
		case sc := <-served:
			return sc
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: the server never finished", round)
		}
		return nil
	}

	first := exchange(1)
	// The kernel closes after our FIN (it was the passive closer, so its port
	// is free again at once); our ACK of its FIN puts the stack in TIME-WAIT,
	// which a record keeps (the Conn's endpoint is CLOSED).
	if !waitUntil(20*time.Second, func() bool { return e.Stack.Stats().TimeWait == 1 }) {
		st := e.Stack.Stats()
		t.Fatalf("the stack's first connection is in %v with %d TIME-WAIT records, want CLOSED and 1", first.Info().State, st.TimeWait)
	}
	if st := first.Info().State; st != tcp.StateClosed {
		t.Fatalf("the first Conn's endpoint is in %v after its TIME-WAIT went to a record, want CLOSED", st)
	}
	exchange(2)
	// The second connection's record replaced the first's.
	if !waitUntil(20*time.Second, func() bool { st := e.Stack.Stats(); return st.TimeWait == 1 && st.Connections == 1 }) {
		st := e.Stack.Stats()
		t.Errorf("after the second connection: %d TIME-WAIT records, %d connections; want 1 1", st.TimeWait, st.Connections)
	}

	if got := e.Stack.Stats().Listen.TimeWaitReused; got != 1 {
		t.Errorf("listener reused TIME-WAIT %d times, want 1", got)
	}
	if r := syns.records(); len(r) != 2 {
		t.Errorf("the kernel sent %d SYNs from %v, want 2 (one per connection, none resent)", len(r), client)
	}
	if r := resets.records(); len(r) != 0 {
		t.Errorf("the kernel sent %d RSTs (first: %+v), want none", len(r), r[0].Seg)
	}
}

// TestTimeWaitOverflow: the stack closes first, as an HTTP/1.0 server
// does, for ten kernel clients, with room for three TIME-WAIT records
// (stack.Config.MaxTimeWait): three connections keep one and the other
// seven close at once (Stats.TimeWaitOverflows), as Linux's do when its
// table is full. Every client gets its whole answer and its FIN ACKed:
// the kernel sends no RST.
func TestTimeWaitOverflow(t *testing.T) {
	const clients, room = 10, 3
	e := newEnv(t, envOptions{Subnet: 42, MaxTimeWait: room})
	ln := e.listen(t, 80)
	resets := e.watch(impair.Ingress, func(s segInfo) bool { return s.TCP && s.has(header.TCPFlagRst) })
	go func() {
		for {
			c, err := ln.(*stack.Listener).AcceptTCP()
			if err != nil {
				return
			}
			go func() {
				buf := make([]byte, 64)
				n, _ := c.Read(buf)
				c.Write(buf[:n])
				c.Close()
			}()
		}
	}()
	for i := range clients {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c, err := e.Bed.KernelDial(ctx, 80, nil)
		cancel()
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		req := fmt.Sprintf("GET /%d HTTP/1.0\r\n\r\n", i)
		if _, err := c.Write([]byte(req)); err != nil {
			t.Fatalf("client %d: write: %v", i, err)
		}
		got, err := io.ReadAll(c) // until the stack's FIN
		c.Close()
		if err != nil || string(got) != req {
			t.Fatalf("client %d: read %q, %v; want %q", i, got, err, req)
		}
	}
	if !waitUntil(20*time.Second, func() bool {
		st := e.Stack.Stats()
		return st.TimeWait == room && st.TimeWaitOverflows == clients-room && st.Connections == room
	}) {
		st := e.Stack.Stats()
		t.Fatalf("%d TIME-WAIT records, %d closed at once, %d connections; want %d, %d, %d",
			st.TimeWait, st.TimeWaitOverflows, st.Connections, room, clients-room, room)
	}
	if r := resets.records(); len(r) != 0 {
		t.Errorf("the kernel sent %d RSTs (first: %+v), want none", len(r), r[0].Seg)
	}
}
