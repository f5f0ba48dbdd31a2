package tcp

import "testing"

// within reports whether p lies in s.
func within(p, s []byte) bool {
	off := cap(s) - cap(p)
	return len(p) > 0 && off >= 0 && off < len(s) && off+len(p) <= len(s) && &s[off] == &p[0]
}

// TestPayloadStable: a data segment's Payload is marked PayloadStable
// exactly when it is a view of the send buffer's storage (the Output may
// then refer to it past Send, config.go), not tcp's copy of a span that
// wraps the ring; a bulk sender whose buffer never empties wraps it again
// and again, and sends both kinds.
func TestPayloadStable(t *testing.T) {
	h := established(t, testConfig())
	stable, copied := 0, 0
	h.ep.out = OutputFunc(func(_ ID, seg *Segment) {
		if len(seg.Payload) == 0 {
			return
		}
		a, b := h.ep.snd.buf.r.Peek()
		view := within(seg.Payload, a) || within(seg.Payload, b)
		if seg.PayloadStable != view {
			t.Fatalf("seq %d, %d bytes: PayloadStable %v, a view of the storage %v", seg.Seq, len(seg.Payload), seg.PayloadStable, view)
		}
		if view {
			stable++
		} else {
			copied++
		}
	})
	chunk := data(50_000)
	for range 300 {
		if _, err := h.ep.Write(chunk); err != nil { // as much as fits
			t.Fatal(err)
		}
		h.ackUpTo(h.ep.snd.nxt)
	}
	if copied == 0 || stable < 100*copied {
		t.Fatalf("%d stable payloads, %d copies: want both, mostly stable", stable, copied)
	}
	t.Logf("%d stable payloads, %d copies", stable, copied)
}
