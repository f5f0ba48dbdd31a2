package stack

import (
	"fmt"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// lazyRecvBuffer is the client's receive buffer in the lazy-release tests:
// small enough that a few segments take the peer's window below half.
const lazyRecvBuffer = 10 * 1460

// readN reads exactly n bytes from c, which has them.
func readN(t *testing.T, c *Conn, n int) {
	t.Helper()
	buf := make([]byte, n)
	for got := 0; got < n; {
		k, err := c.Read(buf[got:])
		if err != nil {
			t.Fatalf("Read after %d of %d bytes: %v", got, n, err)
		}
		got += k
	}
}

// ackWindow takes the one packet a's stack sent, a pure ACK, and returns
// its ACK number relative to base and its window in bytes (scaled by ws).
func ackWindow(t *testing.T, p *manualPair, base seqnum.Value, ws int) (ack, wnd int) {
	t.Helper()
	if sent := p.aDev.Stats().Sent - p.aCarried; sent != 1 {
		t.Fatalf("the client sent %d packets, want one ACK", sent)
	}
	_, seg, ok := parseTCP(p.take(p.a))
	if !ok || len(seg.Payload) != 0 || seg.Flags != tcp.FlagACK {
		t.Fatalf("the client sent %v with %d bytes, want a pure ACK", seg.Flags, len(seg.Payload))
	}
	return int(seg.Ack - base), int(seg.Window) << ws
}

// While the window the peer knows is more than half open and no ACK waits,
// a Read posts no release: the loop releases what was read at the end of
// the next batch of data, whose ACK then carries the window it opened.
// Out-of-order data, which shrinks the peer's window, has the batch's end
// release what was read too. Below half the window, Read posts its
// releases, and the last sends the window update the peer waits for.
func TestReleaseWaitsForNextBatch(t *testing.T) {
	p, c, segs, mss := ackBatchSetupWith(t, 10, tcp.Config{QuickAcks: -1, RecvBuffer: lazyRecvBuffer})
	base := firstSeq(t, segs[0])
	ws := max(c.Info().RcvWScale, 0)
	posts := func() uint64 { return p.a.connPosts.releases.Load() }

	// Two segments: the ACK leaves the peer a window above half.
	if err := p.a.Wake(time.Millisecond, segs[0], segs[1]); err != nil {
		t.Fatal(err)
	}
	if ack, wnd := ackWindow(t, p, base, ws); ack != 2*mss || wnd != lazyRecvBuffer-2*mss {
		t.Fatalf("ACK of the first batch: ack=%d window %d, want ack=%d window %d", ack, wnd, 2*mss, lazyRecvBuffer-2*mss)
	}
	before := posts()
	readN(t, c, 2*mss)
	if n := posts() - before; n != 0 {
		t.Fatalf("Reads with the peer's window above half posted %d releases, want none", n)
	}
	if sent := p.aDev.Stats().Sent - p.aCarried; sent != 0 {
		t.Fatalf("the Reads sent %d packets, want none", sent)
	}

	// The next batch's ACK carries the window of everything read: only
	// its own two segments are unread.
	if err := p.a.Wake(2*time.Millisecond, segs[2], segs[3]); err != nil {
		t.Fatal(err)
	}
	if ack, wnd := ackWindow(t, p, base, ws); ack != 4*mss || wnd != lazyRecvBuffer-2*mss {
		t.Fatalf("ACK of the second batch: ack=%d window %d, want ack=%d window %d (what was read released first)", ack, wnd, 4*mss, lazyRecvBuffer-2*mss)
	}
	before = posts()
	readN(t, c, 2*mss)
	if n := posts() - before; n != 0 {
		t.Fatalf("Reads after the second batch posted %d releases, want none", n)
	}

	// Out-of-order data (segment 5, before 4): the batch's end releases
	// what was read.
	if err := p.a.Wake(3*time.Millisecond, segs[5]); err != nil {
		t.Fatal(err)
	}
	if i := c.ep.Info(); i.BytesRead != uint64(4*mss) {
		t.Fatalf("after out-of-order data, the endpoint counts %d bytes read, want %d", i.BytesRead, 4*mss)
	}
	acksOut(t, p, base) // the out-of-order segment's ACK

	// The hole filled: the peer's window is above half again.
	if err := p.a.Wake(4*time.Millisecond, segs[4]); err != nil {
		t.Fatal(err)
	}
	if ack, wnd := ackWindow(t, p, base, ws); ack != 6*mss || wnd != lazyRecvBuffer-2*mss {
		t.Fatalf("ACK of the hole's fill: ack=%d window %d, want ack=%d window %d", ack, wnd, 6*mss, lazyRecvBuffer-2*mss)
	}
	if !c.rx.lazy {
		t.Fatal("after the hole's fill, Read posts releases with the peer's window above half")
	}

	// Four more, none read: the batch's ACK leaves the peer less than half
	// the window (6 segments unread), so Read posts, and reading them all
	// sends the window update.
	if err := p.a.Wake(5*time.Millisecond, segs[6], segs[7], segs[8], segs[9]); err != nil {
		t.Fatal(err)
	}
	if ack, wnd := ackWindow(t, p, base, ws); ack != 10*mss || wnd != lazyRecvBuffer-6*mss {
		t.Fatalf("ACK of the last batch: ack=%d window %d, want ack=%d window %d", ack, wnd, 10*mss, lazyRecvBuffer-6*mss)
	}
	before = posts()
	readN(t, c, 6*mss)
	if n := posts() - before; n == 0 {
		t.Fatal("Reads with the peer's window below half posted no release")
	}
	if ack, wnd := ackWindow(t, p, base, ws); ack != 10*mss || wnd != lazyRecvBuffer {
		t.Fatalf("window update after the Reads: ack=%d window %d, want ack=%d window %d", ack, wnd, 10*mss, lazyRecvBuffer)
	}
}

// A lone segment's ACK waits for the delayed-ACK timer, or for a Read that
// takes everything: the Read does not wait for the next batch to release
// it, however open the window, and its ACK goes at once.
func TestReleaseOfDelayedAckNotLazy(t *testing.T) {
	p, c, segs, mss := ackBatchSetupWith(t, 1, tcp.Config{QuickAcks: -1, RecvBuffer: lazyRecvBuffer})
	base := firstSeq(t, segs[0])
	if err := p.a.Wake(time.Millisecond, segs[0]); err != nil {
		t.Fatal(err)
	}
	if got := acksOut(t, p, base); len(got) != 0 {
		t.Fatalf("a lone segment was ACKed at once: %q", got)
	}
	readN(t, c, mss)
	if got, want := acksOut(t, p, base), []string{fmt.Sprintf("ack=%d", mss)}; !equalStrings(got, want) {
		t.Fatalf("ACKs after the Read took it all: %q, want %q", got, want)
	}
}
