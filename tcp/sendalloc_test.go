package tcp

import "testing"

// TestBulkSendAllocatesNothing: once a bulk sender's window and buffer have
// grown, a round of a full send buffer written, sent and acknowledged
// allocates nothing: the segments go to the Output from the endpoint's
// scratch (emit), not each from the heap, and the txSegs an ACK frees are
// kept for the next window (freeSegsCap: a 256 KB buffer is 182 segments,
// more than the 64 kept before).
func TestBulkSendAllocatesNothing(t *testing.T) {
	h := established(t, testConfig())
	segs := 0
	h.ep.out = OutputFunc(func(_ ID, seg *Segment) {
		if len(seg.Payload) > 0 {
			segs += seg.GSOPieces() // a TSO segment's packets (Config.GSOMax)
		}
	})
	chunk := data(DefaultSendBuffer)
	round := func() {
		if n, err := h.ep.Write(chunk); n != len(chunk) || err != nil {
			t.Fatalf("Write: %d, %v; want %d", n, err, len(chunk))
		}
		for h.ep.snd.buf.len() > 0 { // in slow start: a window each
			h.ackUpTo(h.ep.snd.nxt)
		}
	}
	for range 20 { // slow start opens cwnd past the buffer; the ring grows
		round()
	}
	segs = 0
	if a := testing.AllocsPerRun(10, round); a != 0 {
		t.Errorf("a round of %d bytes allocated %v times, want 0", len(chunk), a)
	}
	if want := 11 * (DefaultSendBuffer/1448 + 1); segs != want { // AllocsPerRun runs one more
		t.Errorf("%d data segments in 11 rounds, want %d", segs, want)
	}
	if c := h.ep.cc.cwnd(); c < DefaultSendBuffer {
		t.Errorf("cwnd %d: the rounds were not sent in one window each", c)
	}
}

// TestNestedSendKeepsTheOuterSegment: a segment sent while the Output still
// holds the one before (an Output that makes the endpoint send again from
// inside Send) is its own: the outer one is unchanged when the inner
// returns.
func TestNestedSendKeepsTheOuterSegment(t *testing.T) {
	h := established(t, testConfig())
	nested := false
	var outer, inner Segment
	h.ep.out = OutputFunc(func(_ ID, seg *Segment) {
		if nested {
			inner = *seg
			return
		}
		nested = true
		before := *seg
		if n, err := h.ep.Write(data(100)); n != 100 || err != nil { // sent at once: no Nagle
			t.Fatalf("nested Write: %d, %v", n, err)
		}
		outer = *seg
		if outer.Seq != before.Seq || len(outer.Payload) != len(before.Payload) {
			t.Errorf("outer segment changed by the nested send: seq %d len %d, was seq %d len %d", outer.Seq, len(outer.Payload), before.Seq, len(before.Payload))
		}
	})
	if n, err := h.ep.Write(data(1000)); n != 1000 || err != nil {
		t.Fatalf("Write: %d, %v", n, err)
	}
	if outer.Seq != testISS+1 || len(outer.Payload) != 1000 || inner.Seq != testISS+1001 || len(inner.Payload) != 100 {
		t.Fatalf("outer seq %d len %d, inner seq %d len %d; want %d/1000 and %d/100", outer.Seq, len(outer.Payload), inner.Seq, len(inner.Payload), testISS+1, testISS+1001)
	}
}
