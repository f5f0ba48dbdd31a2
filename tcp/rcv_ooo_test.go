package tcp

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// TestOOOQueueHoldsAWindowOfSegments: the kernel's download over a plain TUN
// (no GRO: 1448-byte segments) at 5% loss. Above one hole, 600 segments of
// a 1 MB window arrive in order: all are held, in 64 KB entries, each ACK's first
// SACK block covers them all (RFC 2018 4), nothing is dropped; the hole's
// retransmission then takes RCV.NXT past all of them at once. Until
// 2026-11-24 the queue held 256 segments: the rest were dropped unSACKed
// and the sender, seeing no SACK beyond, waited for its RTO.
func TestOOOQueueHoldsAWindowOfSegments(t *testing.T) {
	const mss, n = 1448, 600
	h := established(t, testConfig()) // RecvBuffer 1 MB: 600 segments fit
	h.pseq += mss                     // the first segment is lost
	for i := 1; i <= n; i++ {
		h.sendData(data(mss))
		h.expect(flagsAre(FlagACK), ackIs(peerISS+1),
			sackIs(SACKBlock{Start: peerISS + 1 + mss, End: (peerISS + 1 + mss).Add(seqnum.Size(i * mss))}))
	}
	if st := h.ep.Counters(); st.DropsOOOLimit != 0 || st.OutOfOrderSegs != n {
		t.Fatalf("drops at the queue's limit %d, out-of-order segments %d; want 0, %d", st.DropsOOOLimit, st.OutOfOrderSegs, n)
	}
	if per := oooChunk / mss; len(h.ep.rcv.ooo) != (n+per-1)/per {
		t.Fatalf("out-of-order queue: %d entries, want %d (%d segments of %d bytes in each %d-byte chunk)", len(h.ep.rcv.ooo), (n+per-1)/per, per, mss, oooChunk)
	}
	h.pseq = peerISS + 1
	h.sendData(data(mss))
	h.expect(flagsAre(FlagACK), ackIs((peerISS + 1).Add(seqnum.Size((n+1)*mss))), sackIs())
	got := make([]byte, (n+1)*mss)
	if k, _ := h.ep.Read(got); k != len(got) {
		t.Fatalf("Read: %d bytes, want %d", k, len(got))
	}
	for i := 0; i <= n; i++ {
		if !bytes.Equal(got[i*mss:(i+1)*mss], data(mss)) {
			t.Fatalf("segment %d read back wrong", i)
		}
	}
}

// TestOOOQueueModel holds insertOOO and deliver to a byte model over random
// segments of one stream (random lengths, overlaps, duplicates, order, and
// the FIN on the last one): the queue's entries stay sorted, none of them
// beyond oooChunk, and they hold exactly the bytes received above RCV.NXT
// (with the FIN, once received); the stream comes out whole and in order;
// segments that follow an entry's data extend it instead of taking an entry.
func TestOOOQueueModel(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		total := 2000 + rng.IntN(20000)
		stream := make([]byte, total)
		for i := range stream {
			stream[i] = byte(rng.Uint32())
		}
		withFIN := rng.IntN(2) == 0
		base := seqnum.Value(rng.Uint32()) // across the wrap too
		r := &receiver{nxt: base}
		have := make([]bool, total) // received, in order or not
		finSeen, finRcvd := false, false
		for steps := 0; r.nxt != base.Add(seqnum.Size(total)) || (withFIN && !finSeen); steps++ {
			if steps > 100000 {
				t.Fatalf("seed %d: the stream never completed", seed)
			}
			off := rng.IntN(total)
			n := 1 + rng.IntN(min(3000, total-off))
			if rng.IntN(2) == 0 { // a sender's segments: on a grid, so that they adjoin
				off = rng.IntN((total+499)/500) * 500
				n = min(500*(1+rng.IntN(2)), total-off)
			}
			if rng.IntN(8) == 0 { // now and then the segment at RCV.NXT
				off = int(base.Size(r.nxt))
				if off >= total {
					off = total - 1
				}
				n = min(n, total-off)
			}
			fin := withFIN && off+n == total
			seq := base.Add(seqnum.Size(off))
			d := stream[off : off+n]
			// The endpoint trims what is below RCV.NXT first (receiver.trim).
			if cut := int(seq.Size(r.nxt)); seq.LessThan(r.nxt) {
				if cut >= n {
					continue
				}
				seq, d, off = r.nxt, d[cut:], off+cut
			}
			if seq == r.nxt {
				_, _, finReached := r.deliver(d, fin)
				finSeen = finSeen || finReached
			} else if !r.insertOOO(seq, d, fin) {
				t.Fatalf("seed %d: insertOOO dropped data with %d ranges", seed, len(r.ooo))
			}
			for i := off; i < off+len(d); i++ {
				have[i] = true
			}
			finRcvd = finRcvd || fin
			finHeld := finRcvd && !finSeen
			checkOOO(t, seed, r, base, have, withFIN)
			if held := finInQueue(r); finHeld != held {
				t.Fatalf("seed %d: the FIN received and not yet reached: %v; held by an entry: %v", seed, finHeld, held)
			}
		}
		if got := r.buf.len(); got != total {
			t.Fatalf("seed %d: %d bytes delivered, want %d", seed, got, total)
		}
		out := make([]byte, total)
		r.buf.read(out)
		if !bytes.Equal(out, stream) {
			t.Fatalf("seed %d: the stream came out changed", seed)
		}
	}
}

// finInQueue reports whether an entry of the queue holds the FIN.
func finInQueue(r *receiver) bool {
	for _, o := range r.ooo {
		if o.fin {
			return true
		}
	}
	return false
}

// checkOOO checks the queue's invariants against the model: the entries are
// sorted, above RCV.NXT, at most oooChunk long, and every byte received
// above RCV.NXT is in one of them.
func checkOOO(t *testing.T, seed uint64, r *receiver, base seqnum.Value, have []bool, withFIN bool) {
	t.Helper()
	nxt := int(base.Size(r.nxt))
	in := make([]bool, len(have))
	prevStart, prevEnd := -1, -1
	for k, o := range r.ooo {
		s := int(base.Size(o.seq))
		e := s + len(o.data)
		if s < prevStart {
			t.Fatalf("seed %d: entry %d [%d,%d) before the one before it (from %d)", seed, k, s, e, prevStart)
		}
		if len(o.data) == 0 && !o.fin || len(o.data) > oooChunk {
			t.Fatalf("seed %d: entry %d [%d,%d): %d bytes, want 1 to %d", seed, k, s, e, len(o.data), oooChunk)
		}
		if s < nxt && e <= nxt {
			t.Fatalf("seed %d: range %d [%d,%d) is below RCV.NXT %d", seed, k, s, e, nxt)
		}
		if o.fin && (!withFIN || e != len(have)) {
			t.Fatalf("seed %d: range %d [%d,%d) has a FIN (%d ranges, stream %d bytes): %v", seed, k, s, e, len(r.ooo), len(have), dumpOOO(r, base))
		}
		for i := s; i < e; i++ {
			in[i] = true
		}
		prevStart, prevEnd = s, max(prevEnd, e)
	}
	for i := nxt; i < len(have); i++ {
		if have[i] != in[i] {
			t.Fatalf("seed %d: byte %d received %v, in the queue %v", seed, i, have[i], in[i])
		}
	}
}

func dumpOOO(r *receiver, base seqnum.Value) [][3]int {
	var out [][3]int
	for _, o := range r.ooo {
		f := 0
		if o.fin {
			f = 1
		}
		out = append(out, [3]int{int(base.Size(o.seq)), int(base.Size(o.seq)) + len(o.data), f})
	}
	return out
}

// TestOOOQueueBogusFINs: a peer whose FINs contradict each other (FINs in
// the middle of its data, data past them, segments repeated with and
// without one) gets no panic, the queue stays sorted by sequence number and
// within its bound, and deliver takes what it can.
func TestOOOQueueBogusFINs(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 11))
		base := seqnum.Value(rng.Uint32())
		r := &receiver{nxt: base}
		for range 400 {
			off := rng.IntN(8000)
			d := make([]byte, 1+rng.IntN(1500))
			seq, fin := base.Add(seqnum.Size(off)), rng.IntN(5) == 0
			if seq.LessThanEq(r.nxt) {
				if cut := int(seq.Size(r.nxt)); cut < len(d) {
					r.deliver(d[cut:], fin)
				}
				continue
			}
			r.insertOOO(seq, d, fin)
			if len(r.ooo) > maxOOO {
				t.Fatalf("seed %d: %d ranges, over the bound %d", seed, len(r.ooo), maxOOO)
			}
			for k := 1; k < len(r.ooo); k++ {
				if r.ooo[k].seq.LessThan(r.ooo[k-1].seq) {
					t.Fatalf("seed %d: ranges out of order: %v", seed, dumpOOO(r, base))
				}
			}
		}
	}
}
