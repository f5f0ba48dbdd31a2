package tcp

import (
	"testing"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// TestRtxqReusesItsStorage: a queue that ACKs drain from the head
// (dropHead) and new segments fill at the tail (queue) keeps its order and
// its storage: the segments left are moved back to the storage's start,
// not copied down on each ACK nor, once the storage is twice the queue, put
// in a new storage each time the end is reached; the freed slots hold no segment.
func TestRtxqReusesItsStorage(t *testing.T) {
	s := newSender(1000)
	s.nxt = s.iss + 1
	mk := func() *txSeg {
		return &txSeg{segState: segState{seq: s.nxt, len: 10}}
	}
	for range 20 {
		s.queue(mk())
	}
	var mem **txSeg
	c := 0
	for round := range 300 {
		if round == 50 { // the storage has grown to twice the queue or more
			mem, c = &s.rtxqMem[:cap(s.rtxqMem)][0], cap(s.rtxqMem)
		}
		s.dropHead(3)
		for range 3 {
			s.queue(mk())
		}
		if len(s.rtxq) != 20 {
			t.Fatalf("round %d: %d queued, want 20", round, len(s.rtxq))
		}
		want := s.rtxq[0].seq
		for i, q := range s.rtxq {
			if q.seq != want {
				t.Fatalf("round %d: segment %d at %d, want %d", round, i, q.seq, want)
			}
			want = want.Add(seqnum.Size(q.len))
		}
		if s.nxt != want {
			t.Fatalf("round %d: SND.NXT %d, queue ends at %d", round, s.nxt, want)
		}
		all := s.rtxqMem[:cap(s.rtxqMem)]
		start := len(all) - cap(s.rtxq)
		for i, q := range all {
			if (i < start || i >= start+len(s.rtxq)) && q != nil {
				t.Fatalf("round %d: slot %d outside the queue holds a segment", round, i)
			}
		}
	}
	if got := &s.rtxqMem[:cap(s.rtxqMem)][0]; got != mem || cap(s.rtxqMem) != c {
		t.Fatalf("the queue's storage changed (cap %d, was %d)", cap(s.rtxqMem), c)
	}
	if &s.rtxq[:1][0] == mem {
		t.Fatal("the queue never moved: dropHead copied it down")
	}
	s.dropHead(len(s.rtxq))
	if len(s.rtxq) != 0 || cap(s.rtxq) != c {
		t.Fatalf("an emptied queue has %d segments and room for %d, want 0 and %d", len(s.rtxq), cap(s.rtxq), c)
	}
}
