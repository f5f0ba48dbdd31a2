//go:build linux

package stack

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tun"
)

// TestSYNStashDirectPath: on a real loop's direct path, 100 connects whose
// SYNs wait together for a stash of 16 all complete and echo: the stash
// takes every SYN, hands its oldest over at once when full, and the rest are
// answered on posted turns once the device drains.
func TestSYNStashDirectPath(t *testing.T) {
	da, db := seqpacketPair(t)
	a, err := New(Config{Device: da, Addr: addrA})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	const size, n = 16, 100
	b, err := New(Config{Device: db, Addr: addrB, SYNStash: size})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ln, err := b.Listen("tcp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go serveEcho(ln)
	// Hold b's loop until every SYN waits in its device: the first batch
	// is then a full one of SYNs.
	unblock := blockLoop(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := a.DialContext(ctx, "tcp", "198.18.0.2:7")
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			buf := []byte("x")
			if _, err := c.Write(buf); err != nil {
				errs <- err
				return
			}
			if _, err := io.ReadFull(c, buf); err != nil {
				errs <- err
			}
		}()
	}
	for a.Stats().SegmentsOut < n {
		if ctx.Err() != nil {
			unblock()
			t.Fatalf("a sent %d SYNs of %d", a.Stats().SegmentsOut, n)
		}
		time.Sleep(time.Millisecond)
	}
	unblock()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a connection: %v", err)
	}
	in := b.Stats().Input
	if in.SYNsStashed < n || in.SYNsEarly < maxReadBatch-size || in.SYNStashMax != size {
		t.Fatalf("stashed %d, early %d, most at once %d: want >= %d, >= %d, %d", in.SYNsStashed, in.SYNsEarly, in.SYNStashMax, n, maxReadBatch-size, size)
	}
}

// TestSYNStashPostedTurns: SYNs left in the stash when the device drains
// are answered on the loop's posted turns, with no further input to wake
// it: 200 SYNs, read in full batches into a stash that holds them all, all
// get their SYN-ACKs.
func TestSYNStashPostedTurns(t *testing.T) {
	da, db := seqpacketPair(t)
	defer da.Close()
	if err := unix.SetsockoptInt(da.fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 4<<20); err != nil {
		t.Skipf("a socket buffer for the SYNs: %v", err)
	}
	const n = 200
	b, err := New(Config{Device: db, Addr: addrB, SYNStash: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ln, err := b.Listen("tcp", ":80")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	unblock := blockLoop(t, b)
	for i := range n {
		if err := da.WritePacket(tcpPacket(t, uint16(6000+i), 7, 0, tcp.FlagSYN, "")); err != nil {
			unblock()
			t.Fatal(err)
		}
	}
	unblock()
	answered := map[uint16]bool{}
	buf := make([]byte, 1500)
	for deadline := time.Now().Add(20 * time.Second); len(answered) < n; {
		k, err := da.ReadPacketNonblock(buf)
		if errors.Is(err, tun.ErrWouldBlock) {
			if time.Now().After(deadline) {
				t.Fatalf("%d SYNs of %d answered; stats %+v", len(answered), n, b.Stats().Input)
			}
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		seg, err := tcp.ParseSegment(buf[ipv4HeaderLen:k])
		if err != nil {
			t.Fatal(err)
		}
		if seg.Flags&^tcp.FlagPSH == tcp.FlagSYN|tcp.FlagACK {
			answered[seg.DstPort] = true
		}
	}
	if in := b.Stats().Input; in.SYNsStashed != n || in.SYNsEarly != 0 || in.SYNStashMax < 2*maxReadBatch {
		t.Fatalf("stashed %d, early %d, most at once %d: want %d, 0, >= %d", in.SYNsStashed, in.SYNsEarly, in.SYNStashMax, n, 2*maxReadBatch)
	}
}
