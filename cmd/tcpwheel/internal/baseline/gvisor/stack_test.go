package gvisor

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"runtime"
	"syscall"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"

	"github.com/tcpwheel/tcpwheel/cmd/tcpwheel/internal/tcpipclock"
	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/tcpwheel/tcpwheel/timer"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

var (
	addrG = netip.MustParseAddr("198.18.0.2")
	addrW = netip.MustParseAddr("198.18.0.1")
)

// pair starts a gVisor stack and a tcpwheel stack joined by an in-memory pipe.
func pair(t *testing.T, cfg Config) (*Stack, *stack.Stack) {
	t.Helper()
	a, b := tuntest.Pipe(1500)
	cfg.Device, cfg.Addr = a, addrG
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := stack.New(stack.Config{Device: b, Addr: addrW})
	if err != nil {
		g.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g.Close()
		w.Close()
	})
	return g, w
}

func echo(t *testing.T, ln net.Listener) {
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
}

func roundTrip(t *testing.T, c net.Conn, n int) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	data := bytes.Repeat([]byte("tcpwheel"), n/8)
	go c.Write(data)
	got := make([]byte, len(data))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read back: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("echoed data differs")
	}
}

func TestDialTcpwheel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		clock func(t *testing.T) tcpip.Clock
	}{
		{"std clock", func(*testing.T) tcpip.Clock { return nil }},
		{"wheel clock", func(t *testing.T) tcpip.Clock {
			c, err := tcpipclock.New(timer.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() }) // after the stacks close
			return c
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, w := pair(t, Config{Clock: tc.clock(t), KeepAlive: KeepAlive{Enable: true, Idle: time.Hour}})
			ln, err := w.Listen("tcp", ":7")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			echo(t, ln)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := g.DialContext(ctx, "tcp", "198.18.0.1:7")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			roundTrip(t, c, 200_000)
			info := c.(*Conn).Info()
			if info.RTO < 200*time.Millisecond {
				t.Errorf("Info %+v: want an RTO of at least gVisor's MinRTO, 200ms", info)
			}
			if info.SRTT <= 0 {
				t.Errorf("Info %+v: want an SRTT", info)
			}
			if st := g.Stats(); st.SegmentsSent == 0 || st.SegmentsReceived == 0 {
				t.Errorf("Stats %+v: want segments counted", st)
			}
		})
	}
}

func TestAcceptFromTcpwheel(t *testing.T) {
	g, w := pair(t, Config{})
	ln, err := g.Listen("tcp", ":8080")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if got := ln.Addr().String(); got != "0.0.0.0:8080" {
		t.Errorf("Addr() = %s, want 0.0.0.0:8080", got)
	}
	echo(t, ln)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := w.DialContext(ctx, "tcp", "198.18.0.2:8080")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip(t, c, 10_000)
}

func TestDialRefused(t *testing.T) {
	g, _ := pair(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := g.DialContext(ctx, "tcp", "198.18.0.1:9")
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial a closed port: %v, want ECONNREFUSED", err)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) {
		t.Fatalf("dial error %T, want *net.OpError", err)
	}
}

func TestBadInput(t *testing.T) {
	a, _ := tuntest.Pipe(1500)
	defer a.Close()
	if _, err := New(Config{Device: a}); !errors.Is(err, ErrConfig) {
		t.Errorf("New without an address: %v, want ErrConfig", err)
	}
	if _, err := New(Config{Addr: addrG}); !errors.Is(err, ErrConfig) {
		t.Errorf("New without a device: %v, want ErrConfig", err)
	}
	g, _ := pair(t, Config{})
	for _, addr := range []string{"198.18.0.1", "[::1]:80", "198.18.0.1:0", "nonsense:80"} {
		if _, err := g.DialContext(context.Background(), "tcp", addr); err == nil {
			t.Errorf("DialContext(%q) succeeded", addr)
		}
	}
	if _, err := g.DialContext(context.Background(), "udp", "198.18.0.1:80"); err == nil {
		t.Error("DialContext(udp) succeeded")
	}
	if _, err := New(Config{Device: a, Addr: addrG, Addr6: addrG}); !errors.Is(err, ErrConfig) {
		t.Errorf("New with an IPv4 Addr6: %v, want ErrConfig", err)
	}
}

// TestParseAddrFamilies: "tcp" takes either family, "tcp4" and "tcp6" only
// theirs; a listener's empty host is the family's unspecified address.
func TestParseAddrFamilies(t *testing.T) {
	for _, tc := range []struct {
		network, address string
		listen           bool
		want             string // "" for an error
	}{
		{"tcp", "198.18.0.1:80", false, "198.18.0.1:80"},
		{"tcp", "[2001:db8::1]:80", false, "[2001:db8::1]:80"},
		{"tcp", "[::ffff:198.18.0.1]:80", false, "198.18.0.1:80"},
		{"tcp4", "[2001:db8::1]:80", false, ""},
		{"tcp6", "198.18.0.1:80", false, ""},
		{"tcp6", "[2001:db8::1]:80", false, "[2001:db8::1]:80"},
		{"tcp6", "[::]:80", false, ""},
		{"tcp6", ":80", true, "[::]:80"},
		{"tcp", ":80", true, "0.0.0.0:80"},
		{"udp6", ":80", true, ""},
	} {
		ap, err := parseAddr(tc.network, tc.address, tc.listen)
		if got := ap.String(); (err != nil) != (tc.want == "") || err == nil && got != tc.want {
			t.Errorf("parseAddr(%q, %q, %v) = %v, %v; want %q", tc.network, tc.address, tc.listen, got, err, tc.want)
		}
	}
}

func TestCloseUnblocksAcceptAndLeavesNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	a, b := tuntest.Pipe(1500)
	defer b.Close()
	g, err := New(Config{Device: a, Addr: addrG})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := g.Listen("tcp", ":80")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := ln.Accept()
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	ln.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept still blocked 5s after Close")
	}
	g.Close()
	g.Close()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after Close, %d before", n, before)
	}
}

// TestListenUDPEcho: gVisor's ListenUDP echoes datagrams from a tcpwheel
// UDP socket, and refuses a network that is not udp4 or udp6.
func TestListenUDPEcho(t *testing.T) {
	g, w := pair(t, Config{})
	pc, err := g.ListenUDP("udp4", ":7")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(buf[:n], from)
		}
	}()
	c, err := w.DialUDP("udp4", netip.AddrPortFrom(addrG, 7).String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	in := make([]byte, 2048)
	for i := range 10 {
		out := bytes.Repeat([]byte{byte(i)}, 100+i)
		if _, err := c.Write(out); err != nil {
			t.Fatal(err)
		}
		n, err := c.Read(in)
		if err != nil || !bytes.Equal(in[:n], out) {
			t.Fatalf("echo %d: %d bytes, %v", i, n, err)
		}
	}
	if _, err := g.ListenUDP("tcp4", ":8"); err == nil {
		t.Error("ListenUDP(tcp4): no error")
	}
}
