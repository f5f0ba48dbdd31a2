// Package flighttest makes flight recordings (stack.Config.Record) for tests
// of the packages that read and replay them: two stacks joined by an
// in-memory pipe (tuntest.Pipe), the listener echoing what the dialer sends.
// Nothing leaves the process.
package flighttest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// The two stacks' addresses, and the echo port.
var (
	DialerAddr   = netip.MustParseAddr("198.18.0.1")
	ListenerAddr = netip.MustParseAddr("198.18.0.2")
	// The IPv6 addresses of EchoIPv6.
	DialerAddr6   = netip.MustParseAddr("2001:db8::1")
	ListenerAddr6 = netip.MustParseAddr("2001:db8::2")
)

// Port is the listener's echo port.
const Port = 7

// Echo records conns connections, one after the other, from the dialer to
// the listener's echo port: each sends size bytes, shuts down its sending
// side, and reads the echo to its end. It returns the dialer's and the
// listener's recordings, both stacks closed.
func Echo(t testing.TB, conns, size int) (dialer, listener []byte) {
	t.Helper()
	return echoOver(t, conns, size, false)
}

// EchoIPv6 is Echo over IPv6: the stacks have DialerAddr6 and
// ListenerAddr6 too, and the dialer dials the listener's.
func EchoIPv6(t testing.TB, conns, size int) (dialer, listener []byte) {
	t.Helper()
	return echoOver(t, conns, size, true)
}

func echoOver(t testing.TB, conns, size int, ipv6 bool) (dialer, listener []byte) {
	t.Helper()
	da, db := tuntest.Pipe(1500)
	var ra, rb bytes.Buffer
	to := ListenerAddr
	var a6, b6 netip.Addr
	if ipv6 {
		to, a6, b6 = ListenerAddr6, DialerAddr6, ListenerAddr6
	}
	a, err := stack.New(stack.Config{Device: da, Addr: DialerAddr, Addr6: a6, Record: &ra, RecordPayload: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := stack.New(stack.Config{Device: db, Addr: ListenerAddr, Addr6: b6, Record: &rb, RecordPayload: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := b.Listen("tcp", fmt.Sprintf(":%d", Port))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				io.Copy(c, c)
			}()
		}
	}()
	for i := range conns {
		if err := echo(a, to, bytes.Repeat([]byte{byte('a' + i%26)}, size)); err != nil {
			t.Fatalf("connection %d: %v", i+1, err)
		}
	}
	ln.Close()
	time.Sleep(50 * time.Millisecond) // the last ACKs (as stack's flight tests)
	a.Close()
	b.Close()
	for _, s := range []*stack.Stack{a, b} {
		if err := s.RecordErr(); err != nil {
			t.Fatal(err)
		}
	}
	return ra.Bytes(), rb.Bytes()
}

func echo(s *stack.Stack, to netip.Addr, msg []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := s.DialContext(ctx, "tcp", netip.AddrPortFrom(to, Port).String())
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(msg)
		if err == nil {
			err = c.(*stack.Conn).CloseWrite()
		}
		errc <- err
	}()
	got, err := io.ReadAll(c)
	if werr := <-errc; werr != nil {
		return fmt.Errorf("write: %w", werr)
	}
	if err != nil || !bytes.Equal(got, msg) {
		return fmt.Errorf("echo of %d bytes: got %d, %v", len(msg), len(got), err)
	}
	return nil
}

// ListenOnly records a stack that opens a listener, closes it and stops:
// a recording without a connection.
func ListenOnly(t testing.TB) []byte {
	t.Helper()
	da, _ := tuntest.Pipe(1500)
	var r bytes.Buffer
	s, err := stack.New(stack.Config{Device: da, Addr: ListenerAddr, Record: &r})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := s.Listen("tcp", fmt.Sprintf(":%d", Port))
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	s.Close()
	if err := s.RecordErr(); err != nil {
		t.Fatal(err)
	}
	return r.Bytes()
}
