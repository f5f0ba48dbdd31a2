package tcp

import (
	"testing"
	"unsafe"

	"github.com/tcpwheel/tcpwheel/timer"
)

// TestHandshakeAllocs: what a listener allocates for one connection, from its
// SYN (a half-open endpoint, its SYN-ACK sent) to the ACK that hands the
// endpoint to Accept. The burst of issue 11 makes 20,000 of them on the loop:
// the endpoint itself, and nothing else. The SYN-ACK's txSeg (seg0), the
// retransmission queue and the free list the ACK returns it to have their
// first storage in the endpoint; no expiry function, the txSeg's or a
// timer's: their entries' handlers are the txSeg and the endpoint (timerFn);
// and no congestion control of its own (NewReno is in the endpoint).
func TestHandshakeAllocs(t *testing.T) {
	handshake := handshaker(t)
	for range 100 { // the half-open table and the wheel's lists at their size
		handshake()
	}
	allocs := testing.AllocsPerRun(1000, handshake)
	// The endpoint (above).
	const want = 1
	if allocs > want {
		t.Errorf("%.1f allocations per handshake, want at most %d", allocs, want)
	}
}

// TestEndpointSizeClass: the endpoint, with the storage it carries for a
// short connection's send path (seg0, rtxqFirst, freeFirst), stays within
// the 2,304-byte size class it had without them: more would cost every
// connection the next class, 2,688 bytes.
func TestEndpointSizeClass(t *testing.T) {
	if got := unsafe.Sizeof(Endpoint{}); got > 2304 {
		t.Fatalf("Endpoint is %d bytes, want at most 2304 (its size class)", got)
	}
}

// BenchmarkHandshake is TestHandshakeAllocs' handshake: a listener's CPU
// per connection, from its SYN to Accept, without the stack around it.
func BenchmarkHandshake(b *testing.B) {
	handshake := handshaker(b)
	b.ReportAllocs()
	for b.Loop() {
		handshake()
	}
}

// handshaker returns a function that runs one more handshake on a listener
// of its own, from a source of its own each time (spoofed), and fails t
// unless the ACK hands an established endpoint to Accept.
func handshaker(t testing.TB) func() {
	clk := timer.NewManualClock(0)
	w, err := timer.New(timer.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	var synack Segment
	var accepted *Endpoint
	ln, err := NewListener(OnWheel(w), OutputFunc(func(_ ID, s *Segment) { synack = *s }), ListenerConfig{
		Backlog: 1 << 16,
		Accept:  func(ep *Endpoint) bool { accepted = ep; return true },
	})
	if err != nil {
		t.Fatal(err)
	}
	syn := Segment{SrcPort: remoteAP.Port(), DstPort: localAP.Port(), Seq: peerISS, Flags: FlagSYN, Window: 65535}
	syn.Options.HasMSS, syn.Options.MSS, syn.Options.HasWS, syn.Options.WindowScale = true, 1460, true, 7
	syn.Options.SACKPermitted, syn.Options.TS, syn.Options.TSVal = true, true, 777
	i := 0
	handshake := func() {
		i++
		id := spoofed(i)
		s := syn
		ln.HandleSegment(id, &s)
		ack := Segment{SrcPort: remoteAP.Port(), DstPort: localAP.Port(), Seq: peerISS + 1, Ack: synack.Seq + 1, Flags: FlagACK, Window: 512}
		ack.Options.TS, ack.Options.TSVal, ack.Options.TSEcr = true, 778, synack.Options.TSVal
		accepted = nil
		ln.HandleSegment(id, &ack)
		if accepted == nil || accepted.State() != StateEstablished {
			t.Fatalf("handshake %d: not accepted (%v)", i, accepted)
		}
	}
	return handshake
}
