package tcp_test

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"

	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/timer"
)

// A segment exchange between two endpoints on one wheel and a manual clock:
// a client made by Dial and a server accepted by a Listener, joined by a tiny
// Output that queues each segment for delivery 10 ms later (a 20 ms round
// trip). The package does no I/O and reads no clock: segments go in through
// HandleSegment, come out through the Output, and time moves only when the
// wheel is advanced, so every instant below is exact.
//
// The client's first data segment is dropped on the way. Nothing is heard
// of it, so it is sent again when its own retransmission timer, started when
// it was sent, would fire, one RTO later. The RTO is RFC 6298's SRTT +
// 4*RTTVAR from the handshake's 20 ms sample, 60 ms, raised to
// Config.MinRTO, 200 ms by default as in Linux. A tail-loss probe (RFC 8985)
// with one segment in flight would come at 2*SRTT + 200 ms, after the RTO;
// as Linux, it is capped at the RTO and goes one wheel tick (10 µs) before
// it, the RTO re-armed from there. The server acknowledges the segment at
// once, as the first data of the connection (quickack: Config.QuickAcks),
// and that ACK stops the segment's retransmission timer (STOP_TIMER).
func Example() {
	clk := timer.NewManualClock(0)
	w, err := timer.New(timer.Config{Clock: clk})
	if err != nil {
		panic(err)
	}
	n := &link{clk: clk, w: w, delay: 10 * time.Millisecond}
	n.dropNext = func(s *tcp.Segment) bool { return len(s.Payload) > 0 } // the first data segment

	cfg := func(isn seqnum.Value) tcp.Config {
		// A fixed initial sequence number, for the printout.
		return tcp.Config{ISN: func(tcp.ID, time.Duration) seqnum.Value { return isn }}
	}
	n.ln, err = tcp.NewListener(tcp.OnWheel(w), n.output("server"), tcp.ListenerConfig{
		Endpoint: cfg(5000),
		Accept:   func(ep *tcp.Endpoint) bool { n.server = ep; return true },
	})
	if err != nil {
		panic(err)
	}
	id := tcp.ID{Local: netip.MustParseAddrPort("198.18.0.1:40000"), Remote: netip.MustParseAddrPort("198.18.0.2:80")}
	n.client, err = tcp.Dial(tcp.OnWheel(w), n.output("client"), id, cfg(1000)) // sends the SYN
	if err != nil {
		panic(err)
	}
	n.client.SetNotify(func(ev tcp.Event) {
		if ev&tcp.EventEstablished != 0 {
			fmt.Printf("%-6v client established, RTO %v\n", w.Now(), n.client.Info().RTO)
			n.client.Write([]byte("hello"))
		}
	})
	for n.step() {
	}
	buf := make([]byte, 16)
	k, _ := n.server.Read(buf)
	fmt.Printf("server read %q; client: %v, %d unacked, %d retransmitted\n",
		buf[:k], n.client.State(), n.client.Info().Unacked, n.client.Info().SegsRetransmitted)

	// Output:
	// 0s     client > server  SYN          seq=1000 ack=0    len=0
	// 10ms   server > client  SYN|ACK      seq=5000 ack=1001 len=0
	// 20ms   client > server  ACK          seq=1001 ack=5001 len=0
	// 20ms   client established, RTO 200ms
	// 20ms   client > server  PSH|ACK      seq=1001 ack=5001 len=5 (dropped)
	// 219.99ms client > server  PSH|ACK      seq=1001 ack=5001 len=5
	// 229.99ms server > client  ACK          seq=5001 ack=1006 len=0
	// server read "hello"; client: ESTABLISHED, 0 unacked, 1 retransmitted
}

// link is the path between the two endpoints: a queue of segments in flight,
// each delivered at its instant.
type link struct {
	clk      *timer.ManualClock
	w        *timer.Wheel
	delay    time.Duration
	queue    []flight
	dropNext func(*tcp.Segment) bool // drops the first segment it matches

	client, server *tcp.Endpoint
	ln             *tcp.Listener
}

type flight struct {
	at   time.Duration
	to   tcp.ID // the receiver's view of the connection
	seg  tcp.Segment
	toLn bool
}

// output returns the Output of one side. The segment is valid only during
// Send: it is copied, payload included.
func (n *link) output(from string) tcp.Output {
	return tcp.OutputFunc(func(id tcp.ID, seg *tcp.Segment) {
		s := *seg
		s.Payload = append([]byte(nil), seg.Payload...)
		note := ""
		if n.dropNext != nil && n.dropNext(&s) {
			n.dropNext, note = nil, " (dropped)"
		}
		to := map[string]string{"client": "server", "server": "client"}[from]
		fmt.Printf("%-6v %s > %s  %-12v seq=%-4d ack=%-4d len=%d%s\n", n.w.Now(), from, to, s.Flags, s.Seq, s.Ack, len(s.Payload), note)
		if note == "" {
			n.queue = append(n.queue, flight{at: n.w.Now() + n.delay, to: id.Reverse(), seg: s, toLn: to == "server"})
		}
	})
}

// step moves the clock to whichever comes first, the next delivery or the
// wheel's next deadline, and does it. It reports false when nothing is left.
func (n *link) step() bool {
	next, ok := n.w.NextDeadline()
	if len(n.queue) == 0 || ok && next < n.queue[0].at {
		if !ok {
			return false
		}
		n.w.Advance(n.clk.Set(next)) // the wheel's timers: PER_TICK_BOOKKEEPING, EXPIRY_PROCESSING
		return true
	}
	f := n.queue[0]
	n.queue = n.queue[1:]
	n.w.Advance(n.clk.Set(f.at)) // time first, so the segment's effects start from its arrival
	switch {
	case !f.toLn:
		n.client.HandleSegment(&f.seg)
	case n.server != nil:
		n.server.HandleSegment(&f.seg)
	default:
		n.ln.HandleSegment(f.to, &f.seg)
	}
	return true
}
