package tcp

import (
	"bytes"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// testSink is a Sink that keeps what it takes, and refuses while refuse is set.
type testSink struct {
	got    []byte
	refuse bool
}

func (s *testSink) Take(p []byte) bool {
	if s.refuse {
		return false
	}
	s.got = append(s.got, p...)
	return true
}

// TestSink: in-order data goes to the sink as it arrives, held as unread:
// the endpoint's buffer stays empty, and what it sends (every ACK, its
// window, its instant) is what it sends when its own buffer holds the data
// and Hold takes it (the subtest "a Read sends an update only when the
// window doubles" of TestWindow, with Release for Read).
func TestSink(t *testing.T) {
	cfg := testConfig()
	cfg.RecvBuffer = 8 << 10 // shift 0
	h := established(t, cfg)
	sink := &testSink{}
	h.ep.SetSink(sink)
	var want []byte
	for i := range 5 {
		p := data(1448 + i)[i:]
		want = append(want, p...)
		h.sendData(p)
	}
	h.expect(ackIs(peerISS + 1 + 2*1448))
	h.expect(ackIs(peerISS + 1 + 4*1448))
	h.expectAt(40*time.Millisecond, ackIs(peerISS+1+5*1448), windowIs(952))
	if !bytes.Equal(sink.got, want) {
		t.Fatalf("the sink took %d bytes, want the %d received, in order", len(sink.got), len(want))
	}
	if n := h.ep.Readable(); n != 0 {
		t.Fatalf("Readable: got %d, want 0 (the sink took it all)", n)
	}
	if i := h.ep.Info(); i.RcvBuffered != 5*1448 {
		t.Fatalf("RcvBuffered: got %d, want %d (held by the sink)", i.RcvBuffered, 5*1448)
	}
	h.ep.Release(2000) // 2952 >= 2 x 952
	h.expect(flagsAre(FlagACK), ackIs(peerISS+1+5*1448), windowIs(2952))
	h.expect(flagsAre(FlagACK), ackIs(peerISS+1+5*1448), windowIs(2952))
	h.ep.Release(2000) // 4952 < 2 x 2952
	h.expectNone()
	h.ep.Release(2000) // 6952 >= 2 x 2952
	h.expect(flagsAre(FlagACK), windowIs(6952))
	h.ep.Release(2000)
	h.expectNone()
	if i := h.ep.Info(); i.RcvBuffered != 0 {
		t.Fatalf("RcvBuffered after releasing everything: got %d, want 0", i.RcvBuffered)
	}
}

// TestSinkRefusesKeepsOrder: data the sink refuses waits in the endpoint's
// buffer, and so does everything after it, even once the sink takes again,
// until Hold has emptied the buffer; data that fills a hole reaches the sink
// with what the out-of-order queue held after it, in order.
func TestSinkRefusesKeepsOrder(t *testing.T) {
	h := established(t, testConfig())
	sink := &testSink{}
	h.ep.SetSink(sink)
	a, b, c, d, e := data(100), data(200)[50:], data(300)[7:], data(400)[9:], data(500)[11:]
	h.sendData(a)
	sink.refuse = true
	h.sendData(b)
	sink.refuse = false
	h.sendData(c)
	if !bytes.Equal(sink.got, a) || h.ep.Readable() != len(b)+len(c) {
		t.Fatalf("sink took %d bytes, buffer holds %d: want %d and %d (the buffer keeps what follows a refusal)",
			len(sink.got), h.ep.Readable(), len(a), len(b)+len(c))
	}
	buf := make([]byte, 1000)
	n, err := h.ep.Hold(buf)
	if err != nil || !bytes.Equal(buf[:n], append(append([]byte(nil), b...), c...)) {
		t.Fatalf("Hold: %d bytes, %v; want b and c", n, err)
	}
	// e arrives above a hole, which d then fills.
	start := h.pseq
	h.pseq = start.Add(seqnum.Size(len(d)))
	h.sendData(e)
	if len(sink.got) != len(a) {
		t.Fatalf("out-of-order data reached the sink")
	}
	h.pseq = start
	h.sendData(d)
	got := sink.got[len(a):]
	if !bytes.Equal(got, append(append([]byte(nil), d...), e...)) {
		t.Fatalf("after the hole filled the sink took %d bytes, want d and e in order (%d)", len(got), len(d)+len(e))
	}
	if i := h.ep.Info(); i.RcvBuffered != len(a)+len(b)+len(c)+len(d)+len(e) {
		t.Fatalf("RcvBuffered: got %d, want %d", i.RcvBuffered, len(a)+len(b)+len(c)+len(d)+len(e))
	}
}
