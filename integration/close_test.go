package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"

	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tun/impair"
)

// TestClose covers the three ways a connection ends: the stack closes first
// (and waits in TIME-WAIT), the kernel closes first, the kernel resets.
func TestClose(t *testing.T) {
	t.Run("active", func(t *testing.T) {
		const timeWait = 500 * time.Millisecond
		e := newEnv(t, envOptions{Subnet: 10, TCP: tcp.Config{TimeWait: timeWait, TraceTimers: true}})
		c, k := connectedPair(t, e, 9003, 0)
		if _, err := c.Write([]byte("bye")); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		k.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := io.ReadAll(k) // the stack's FIN is the kernel's EOF
		if err != nil || string(got) != "bye" {
			t.Fatalf("kernel read %q, %v; want bye, EOF", got, err)
		}
		before := time.Now()
		k.Close() // the kernel's FIN: the stack goes FIN-WAIT-2 -> TIME-WAIT
		if !waitUntil(5*time.Second, func() bool { return c.Info().State == tcp.StateTimeWait }) {
			t.Fatalf("state %v after both FINs, want TIME-WAIT", c.Info().State)
		}
		if n := e.Stack.Stats().Connections; n != 1 {
			t.Errorf("in TIME-WAIT the stack's table holds %d connections, want 1", n)
		}
		// The wait is long enough to tell a TIME-WAIT of the configured
		// length from one of the default 60 s; how long it took is then
		// judged below.
		var left time.Duration
		if !waitUntil(timeWait+10*time.Second, func() bool {
			left = time.Since(before)
			return e.Stack.Stats().Connections == 0
		}) {
			t.Fatalf("connection still in the table %v after the kernel's FIN (state %v)", time.Since(before), c.Info().State)
		}
		t.Logf("left the table %s after the kernel closed (TIME-WAIT %v)", ms(left), timeWait)
		// Never early (before was read before the kernel's FIN left, and
		// left when the poll saw the table empty, both on the safe side).
		if left < timeWait {
			t.Errorf("left TIME-WAIT %s after the kernel's FIN, earlier than %v", ms(left), timeWait)
		}
		// How long the timer ran, on the stack's own clock (the env traces
		// timers): a loop or a poll that a busy machine delays is late, but
		// cannot change a duration.
		var closes []tcp.TimerExpiry
		for _, x := range c.Info().TimerLog {
			if x.Timer == tcp.TimerClose {
				closes = append(closes, x)
			}
		}
		if len(closes) != 1 {
			t.Fatalf("close-timer expiries: %+v, want one (TIME-WAIT's)", closes)
		}
		x := closes[0]
		t.Logf("the stack's TIME-WAIT timer ran %s and fired %s late", ms(x.Due-x.Armed), ms(x.Fired-x.Due))
		if x.Due-x.Armed != timeWait || x.Fired < x.Due {
			t.Errorf("TIME-WAIT timer ran %s (armed %s, due %s, fired %s); want %v, fired at or after its deadline",
				ms(x.Due-x.Armed), ms(x.Armed), ms(x.Due), ms(x.Fired), timeWait)
		}
		e.checkNoResets(t)
	})

	t.Run("passive", func(t *testing.T) {
		e := newEnv(t, envOptions{Subnet: 11})
		c, k := connectedPair(t, e, 9004, 0)
		if _, err := k.Write([]byte("bye")); err != nil {
			t.Fatal(err)
		}
		k.Close()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := io.ReadAll(c)
		if err != nil || string(got) != "bye" {
			t.Fatalf("stack read %q, %v; want bye, then io.EOF", got, err)
		}
		n, err := c.Read(make([]byte, 1))
		if n != 0 || err != io.EOF {
			t.Errorf("Read after EOF = %d, %v; want 0, io.EOF (bare)", n, err)
		}
		if s := c.Info().State; s != tcp.StateCloseWait {
			t.Errorf("state after the kernel's FIN: %v, want CLOSE-WAIT", s)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		// LAST-ACK, then CLOSED once the kernel ACKs our FIN: no TIME-WAIT.
		if !waitUntil(2*time.Second, func() bool { return e.Stack.Stats().Connections == 0 }) {
			t.Errorf("connection still in the table (state %v)", c.Info().State)
		}
		e.checkNoResets(t)
	})

	t.Run("reset", func(t *testing.T) {
		e := newEnv(t, envOptions{Subnet: 12})
		c, k := connectedPair(t, e, 9005, 0)
		readErr := make(chan error, 1)
		go func() {
			_, err := c.Read(make([]byte, 1))
			readErr <- err
		}()
		if err := k.SetLinger(0); err != nil {
			t.Fatal(err)
		}
		k.Close() // SO_LINGER 0: a RST
		var err error
		select {
		case err = <-readErr:
		case <-time.After(5 * time.Second):
			t.Fatal("Read still blocked 5 s after the kernel's RST")
		}
		if !errors.Is(err, syscall.ECONNRESET) || !errors.Is(err, tcp.ErrConnectionReset) {
			t.Errorf("Read after RST: %v; want an error matching ECONNRESET and tcp.ErrConnectionReset", err)
		}
		var oe *net.OpError
		if !errors.As(err, &oe) || oe.Op != "read" {
			t.Errorf("Read error %#v is not a *net.OpError for read", err)
		}
		if _, err := c.Write([]byte("x")); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("Write after RST: %v; want ECONNRESET", err)
		}
		st := e.Stack.Stats()
		if st.Connections != 0 || st.TCP.ResetsReceived != 1 || st.TCP.ResetsSent != 0 {
			t.Errorf("after the RST: %d connections, %d RSTs received, %d sent; want 0, 1, 0", st.Connections, st.TCP.ResetsReceived, st.TCP.ResetsSent)
		}
	})
}

// TestCloseUnreadResetsCount: closing with unread data sends one RST (as
// Linux does), and the connection's ResetsSent counter says one.
func TestCloseUnreadResetsCount(t *testing.T) {
	e := newEnv(t, envOptions{Subnet: 13})
	c, k := connectedPair(t, e, 9006, 0)
	rsts := e.watch(impair.Egress, func(s segInfo) bool { return s.TCP && s.has(header.TCPFlagRst) })
	if _, err := k.Write([]byte("unread")); err != nil {
		t.Fatal(err)
	}
	if !waitUntil(2*time.Second, func() bool { return c.Info().RcvBuffered == 6 }) {
		t.Fatalf("the stack did not receive the kernel's 6 bytes: %+v", c.Info())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	k.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := k.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("kernel Read after the stack closed with unread data: %v; want ECONNRESET", err)
	}
	sent := len(rsts.records())
	counted := e.Stack.Stats().TCP.ResetsSent
	if sent != 1 {
		t.Errorf("%d RSTs on the wire, want 1", sent)
	}
	if counted != uint64(sent) {
		t.Errorf("Stats().TCP.ResetsSent = %d, but %d RST went out", counted, sent)
	}
}

// TestICMPEcho: the stack answers pings from the kernel.
func TestICMPEcho(t *testing.T) {
	e := newEnv(t, envOptions{Subnet: 14})

	t.Run("ping", func(t *testing.T) {
		if _, err := exec.LookPath("ping"); err != nil {
			t.Skip("ping is not installed (iputils-ping); the raw-socket subtest covers echo")
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		before := e.Stack.Stats().EchoReplies
		// -W: how long ping waits for each reply before counting it lost;
		// generous, since a loaded machine may delay the stack's loop.
		out, err := e.command(ctx, "ping", "-c", "3", "-W", "5", "-i", "0.2", e.StackAddr.String()).CombinedOutput()
		if err != nil {
			t.Fatalf("ping: %v\n%s", err, out)
		}
		t.Logf("%s", out)
		if n := e.Stack.Stats().EchoReplies - before; n != 3 {
			t.Errorf("stack sent %d echo replies, want 3", n)
		}
	})

	t.Run("raw", func(t *testing.T) {
		var pc *icmp.PacketConn
		if err := e.Do(func() error {
			var err error
			pc, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0")
			return err
		}); err != nil {
			t.Fatalf("raw ICMP socket in the namespace: %v", err)
		}
		defer pc.Close()
		dst := &net.IPAddr{IP: e.StackAddr.AsSlice()}
		before := e.Stack.Stats().EchoReplies
		for seq := 1; seq <= 3; seq++ {
			body := &icmp.Echo{ID: 0x7477, Seq: seq, Data: []byte(fmt.Sprintf("tcpwheel echo %d", seq))}
			msg, err := (&icmp.Message{Type: ipv4.ICMPTypeEcho, Body: body}).Marshal(nil)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if _, err := pc.WriteTo(msg, dst); err != nil {
				t.Fatalf("send echo %d: %v", seq, err)
			}
			if err := readEchoReply(pc, body, time.Now().Add(5*time.Second)); err != nil {
				t.Fatalf("echo %d: %v", seq, err)
			}
			t.Logf("echo %d answered in %v", seq, time.Since(start).Round(time.Microsecond))
		}
		if n := e.Stack.Stats().EchoReplies - before; n != 3 {
			t.Errorf("stack sent %d echo replies, want 3", n)
		}
	})
}

// readEchoReply reads until the reply to want arrives (a raw socket also sees
// other ICMP traffic) or the deadline passes.
func readEchoReply(pc *icmp.PacketConn, want *icmp.Echo, deadline time.Time) error {
	pc.SetReadDeadline(deadline)
	buf := make([]byte, 1500)
	for {
		n, _, err := pc.ReadFrom(buf)
		if err != nil {
			return err
		}
		m, err := icmp.ParseMessage(1, buf[:n])
		if err != nil || m.Type != ipv4.ICMPTypeEchoReply {
			continue
		}
		got, ok := m.Body.(*icmp.Echo)
		if !ok || got.ID != want.ID || got.Seq != want.Seq {
			continue
		}
		if string(got.Data) != string(want.Data) {
			return fmt.Errorf("reply data %q, want %q", got.Data, want.Data)
		}
		return nil
	}
}

// TestClosedPort: a SYN to a port nobody listens on gets a RST, so the
// kernel's connect fails at once with ECONNREFUSED.
func TestClosedPort(t *testing.T) {
	e := newEnv(t, envOptions{Subnet: 15})
	syns := e.watch(impair.Ingress, func(s segInfo) bool { return s.TCP && s.has(header.TCPFlagSyn) })
	start := time.Now()
	_, err := e.kernelDial(9, 10*time.Second)
	elapsed := time.Since(start)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("connect to a closed port: %v; want ECONNREFUSED", err)
	}
	t.Logf("refused in %v", elapsed.Round(time.Microsecond))
	// At once means the kernel's first SYN got the RST: had the stack let it
	// go unanswered, the kernel would have sent it again after its 1 s RTO
	// (and been refused then). Counted on the wire, not on the clock.
	if n := len(syns.records()); n != 1 {
		t.Errorf("the stack received %d SYNs before the kernel gave up; want 1, answered at once", n)
	}
	st := e.Stack.Stats()
	if st.ResetsSent != 1 || st.Drops.NoListener != 1 {
		t.Errorf("stack: %d RSTs sent for unknown segments, %d no-listener drops; want 1, 1", st.ResetsSent, st.Drops.NoListener)
	}
}
