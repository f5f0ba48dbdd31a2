package tcp

import (
	"reflect"
	"testing"
	"time"
)

// sparesScript is a passive connection's life from the peer's side: the
// handshake, a request, a reply, an out-of-order segment and its hole
// filled, a retransmission, the peer's FIN. It returns every segment the
// endpoint sent, with when, and its Info at the end.
func sparesScript(h *harness) ([]Segment, Info) {
	h.t.Helper()
	h.send(h.peerSyn())
	h.pack = testISS + 1
	h.send(h.seg(FlagACK, nil))
	h.sendData(data(300))
	buf := make([]byte, 4096)
	h.ep.Read(buf)
	h.ep.Write(data(2000))
	h.advance(5 * time.Millisecond)
	ooo := h.seg(FlagACK, data(100))
	ooo.Seq += 100
	h.send(ooo)
	h.sendData(data(100))
	h.pseq += 100
	h.advance(time.Second) // the reply's RTO
	h.ackUpTo(testISS + 1 + 2000)
	h.send(h.seg(FlagACK|FlagFIN, nil))
	h.ep.Read(buf)
	h.advance(50 * time.Millisecond)
	return h.out.segs, h.ep.Info()
}

// TestSparesReuse: an endpoint put back after a connection (its TIME-WAIT
// handed to a record) is forgotten at once, and the listener's next
// connection takes it; that connection sends the same segments and ends
// with the same Info as one on a new endpoint.
func TestSparesReuse(t *testing.T) {
	var p Spares
	old := passiveTimeWait(t, true)
	if p.Put(old.ep) || p.Len() != 0 {
		t.Fatal("Put took an endpoint in TIME-WAIT")
	}
	handOver(t, old) // CLOSED, its TIME-WAIT in a record
	ep := old.ep
	if !p.Put(ep) || p.Len() != 1 {
		t.Fatalf("Put refused a CLOSED endpoint: %d kept", p.Len())
	}
	if !reflect.DeepEqual(*ep, Endpoint{}) {
		t.Fatal("a kept endpoint still holds its connection's state")
	}
	fresh, reused := listen(t, ListenerConfig{}), listen(t, ListenerConfig{Spares: &p})
	segsF, infoF := sparesScript(fresh)
	segsR, infoR := sparesScript(reused)
	if reused.ep != ep || fresh.ep == ep || p.Len() != 0 {
		t.Fatalf("the listener with spares did not take the kept endpoint (%d kept)", p.Len())
	}
	if len(segsF) < 5 || !reflect.DeepEqual(segsF, segsR) {
		t.Fatalf("a reused endpoint sent\n%v\na new one\n%v", segsR, segsF)
	}
	if !reflect.DeepEqual(infoF, infoR) {
		t.Fatalf("a reused endpoint's Info %+v, a new one's %+v", infoR, infoF)
	}
	if infoF.State != StateCloseWait || infoF.RTOEvents == 0 {
		t.Fatalf("the script ended in %v with %d RTOs; want CLOSE-WAIT after one", infoF.State, infoF.RTOEvents)
	}
}

// TestSparesRefuse: Put keeps only a CLOSED endpoint with no timer
// pending, and at most MaxSpares.
func TestSparesRefuse(t *testing.T) {
	var p Spares
	h := newHarness(t)
	e := newEndpoint(OnWheel(h.w), h.out, testID, testConfig(), testISS, nil)
	e.timers[timerKeepalive].Init(func() {})
	if err := h.w.Start(&e.timers[timerKeepalive], time.Second); err != nil {
		t.Fatal(err)
	}
	if p.Put(nil) || p.Put(e) || p.Len() != 0 {
		t.Fatal("Put took nil, or an endpoint with a timer pending")
	}
	h.w.Stop(&e.timers[timerKeepalive])
	if !p.Put(e) {
		t.Fatal("Put refused a CLOSED endpoint with no timer pending")
	}
	for p.Len() < MaxSpares {
		if !p.Put(new(Endpoint)) {
			t.Fatalf("Put refused with %d kept", p.Len())
		}
	}
	if p.Put(new(Endpoint)) || p.Len() != MaxSpares {
		t.Fatalf("Put took more than MaxSpares (%d)", p.Len())
	}
}

// TestSparesDial: Spares.Dial takes a kept endpoint, and its SYN is the
// one Dial sends from a new endpoint.
func TestSparesDial(t *testing.T) {
	var p Spares
	old := passiveEstablished(t, true)
	old.ep.Abort()
	ep := old.ep
	if !p.Put(ep) {
		t.Fatal("Put refused an aborted endpoint")
	}
	fresh, reused := newHarness(t), newHarness(t)
	a, err := Dial(OnWheel(fresh.w), fresh.out, testID, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Dial(OnWheel(reused.w), reused.out, testID, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if b != ep || a == ep || p.Len() != 0 {
		t.Fatalf("Spares.Dial did not take the kept endpoint (%d kept)", p.Len())
	}
	if len(fresh.out.segs) != 1 || !reflect.DeepEqual(fresh.out.segs, reused.out.segs) {
		t.Fatalf("SYN from a reused endpoint %v, from a new one %v", reused.out.segs, fresh.out.segs)
	}
}
