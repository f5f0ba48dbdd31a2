package stack

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"syscall"
	"testing"

	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/timer"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// manualPair is two manual stacks whose packets the test carries across
// (shuttle), on clocks that stay at 0: every step is deterministic.
type manualPair struct {
	t                  *testing.T
	a, b               *Manual
	aDev, aTap         *tuntest.Endpoint // a's device, and where its packets come out
	bDev, bTap         *tuntest.Endpoint
	aCarried, bCarried uint64
}

func newManualPair(t *testing.T) *manualPair {
	t.Helper()
	return newManualPairWith(t, tcp.Config{})
}

// newManualPairWith is newManualPair with both stacks' TCP configured by tc.
func newManualPairWith(t *testing.T, tc tcp.Config) *manualPair {
	t.Helper()
	p := &manualPair{t: t}
	p.aDev, p.aTap = tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500, QueueLen: 4096})
	p.bDev, p.bTap = tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500, QueueLen: 4096})
	var err error
	p.a, err = NewManual(Config{Device: p.aDev, Addr: addrA, Clock: timer.NewManualClock(0), TCP: tc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.a.Close() })
	p.b, err = NewManual(Config{Device: p.bDev, Addr: addrB, Clock: timer.NewManualClock(0), TCP: tc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.b.Close() })
	return p
}

// shuttle carries the packets each stack has written to the other until both
// are quiet (bounded).
func (p *manualPair) shuttle() {
	p.t.Helper()
	buf := make([]byte, 2048)
	for range 10000 {
		moved := false
		for _, d := range []struct {
			dev, tap *tuntest.Endpoint
			carried  *uint64
			to       *Manual
		}{{p.aDev, p.aTap, &p.aCarried, p.b}, {p.bDev, p.bTap, &p.bCarried, p.a}} {
			for *d.carried < d.dev.Stats().Sent {
				n, err := d.tap.ReadPacket(buf)
				if err != nil {
					p.t.Fatalf("shuttle: %v", err)
				}
				*d.carried++
				if err := d.to.Inject(buf[:n]); err != nil {
					p.t.Fatalf("inject: %v", err)
				}
				moved = true
			}
		}
		if !moved {
			return
		}
	}
	p.t.Fatal("shuttle: the stacks never went quiet")
}

// take reads the next packet that from's stack has written (a copy), without
// carrying it across.
func (p *manualPair) take(from *Manual) []byte {
	p.t.Helper()
	dev, tap, carried := p.aDev, p.aTap, &p.aCarried
	if from == p.b {
		dev, tap, carried = p.bDev, p.bTap, &p.bCarried
	}
	if *carried >= dev.Stats().Sent {
		p.t.Fatal("take: the stack has written nothing more")
	}
	buf := make([]byte, 2048)
	n, err := tap.ReadPacket(buf)
	if err != nil {
		p.t.Fatalf("take: %v", err)
	}
	*carried++
	return buf[:n]
}

// connect returns a's client connection to b and b's accepted one.
func (p *manualPair) connect() (client, server *Conn) {
	p.t.Helper()
	ln, err := p.b.Listen("tcp", ":7")
	if err != nil {
		p.t.Fatal(err)
	}
	client, err = p.a.StartDial("tcp", 0, "198.18.0.2:7")
	if err != nil {
		p.t.Fatal(err)
	}
	p.shuttle()
	server, ok := ln.(*Listener).TryAccept()
	if !ok {
		p.t.Fatal("no connection to accept after the handshake")
	}
	return client, server
}

// send writes data on from and carries it to the other side.
func (p *manualPair) send(from *Conn, data []byte) {
	p.t.Helper()
	if n, err := from.TryWrite(data); n != len(data) || err != nil {
		p.t.Fatalf("TryWrite: %d, %v", n, err)
	}
	p.shuttle()
}

func TestReadAhead(t *testing.T) {
	p := newManualPair(t)
	c, s := p.connect()
	data := make([]byte, 10000)
	rand.Read(data)
	p.send(s, data)
	if i := c.Info(); i.RcvBuffered != len(data) {
		t.Fatalf("buffered before the first Read: %d, want %d", i.RcvBuffered, len(data))
	}
	// One small Read takes all that is there from the endpoint (one trip to the
	// loop); the next Reads are served from the Conn, in order.
	got := make([]byte, 0, len(data))
	buf := make([]byte, 333)
	n, err := c.TryRead(buf)
	if n != len(buf) || err != nil {
		t.Fatalf("first Read: %d, %v", n, err)
	}
	got = append(got, buf[:n]...)
	if i := c.Info(); i.RcvBuffered != 0 || i.BytesRead != uint64(len(data)) {
		t.Fatalf("after one Read of %d: endpoint holds %d and has given %d, want 0 and %d (read ahead)", len(buf), i.RcvBuffered, i.BytesRead, len(data))
	}
	for len(got) < len(data) {
		n, err := c.TryRead(buf)
		if n == 0 || err != nil {
			t.Fatalf("Read at %d: %d, %v", len(got), n, err)
		}
		got = append(got, buf[:n]...)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("data read through the read-ahead differs from what was sent")
	}
	// A Read as big as what is there goes straight to the caller's buffer.
	p.send(s, data[:500])
	big := make([]byte, 4096)
	if n, err := c.TryRead(big); n != 500 || err != nil || !bytes.Equal(big[:n], data[:500]) {
		t.Fatalf("big Read: %d, %v", n, err)
	}
	if n, err := c.TryRead(big); n != 0 || err != nil {
		t.Fatalf("Read with nothing there: %d, %v, want 0, nil", n, err)
	}
	// EOF comes after the data, read-ahead included.
	p.send(s, data[:2000])
	if err := s.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	p.shuttle()
	got = got[:0]
	for {
		n, err := c.TryRead(buf[:100])
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil || n == 0 {
			t.Fatalf("Read before EOF: %d, %v", n, err)
		}
	}
	if !bytes.Equal(got, data[:2000]) {
		t.Fatalf("before EOF: got %d bytes, want the 2000 sent", len(got))
	}
}

// Data taken into the read-ahead but never returned to the application is
// unread: Close resets the connection, as it does with data in the endpoint
// (RFC 2525 2.17), instead of a FIN that would tell the peer all was read.
func TestCloseWithUnreadReadAheadResets(t *testing.T) {
	p := newManualPair(t)
	c, s := p.connect()
	p.send(s, make([]byte, 5000))
	if n, err := c.TryRead(make([]byte, 100)); n != 100 || err != nil {
		t.Fatalf("Read: %d, %v", n, err)
	}
	if i := c.Info(); i.RcvBuffered != 0 {
		t.Fatalf("endpoint still holds %d bytes: the read-ahead did not take them", i.RcvBuffered)
	}
	rstsBefore := p.a.Stats().TCP.ResetsSent
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	p.shuttle()
	if got := p.a.Stats().TCP.ResetsSent; got != rstsBefore+1 {
		t.Fatalf("RSTs sent by Close: %d, want 1", got-rstsBefore)
	}
	if _, err := s.TryRead(make([]byte, 10)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the peer's Read after the Close: %v, want ECONNRESET", err)
	}
}
