package stack

import (
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
)

// TestLateWakeInputBeforeExpiry is issue 11's busy-machine case on the manual
// loop. A data segment's retransmission timer is due at D; the peer's ACK of it
// reaches the device at D-1ms, but the loop, preempted, wakes only at D+5ms and
// finds both the due timer and the ACK. Input comes before expiry: the ACK is
// handled first, stops the timer, and nothing is resent. The other order
// (AdvanceTo, which fires the timers due on the way, then Inject) is what the
// loop did before: the segment is resent although its ACK was waiting. (The
// stack cannot see the ACK's arrival instant, D-1ms: a TUN gives none. What
// matters is that it waits in the device when the loop wakes.)
func TestLateWakeInputBeforeExpiry(t *testing.T) {
	// RACK-TLP off: the RTO is the one timer of the sender.
	setup := func(t *testing.T) (p *manualPair, c *Conn, ack []byte, deadline time.Duration) {
		p = newManualPairWith(t, tcp.Config{DisableRACKTLP: true})
		c, _ = p.connect()
		if n, err := c.TryWrite(make([]byte, 100)); n != 100 || err != nil {
			t.Fatalf("TryWrite: %d, %v", n, err)
		}
		data := p.take(p.a)
		deadline = c.Info().RTO // sent at 0, on clocks that have not moved
		if deadline <= 5*time.Millisecond {
			t.Fatalf("RTO %v: too short for the test", deadline)
		}
		// The peer gets the segment at once; its delayed ACK leaves before D-1ms.
		if err := p.b.Inject(data); err != nil {
			t.Fatal(err)
		}
		if err := p.b.AdvanceTo(deadline - time.Millisecond); err != nil {
			t.Fatal(err)
		}
		return p, c, p.take(p.b), deadline
	}
	t.Run("input first", func(t *testing.T) {
		p, c, ack, deadline := setup(t)
		sent := p.aDev.Stats().Sent
		if err := p.a.Wake(deadline+5*time.Millisecond, ack); err != nil {
			t.Fatal(err)
		}
		if got := c.Info().Counters.RTOEvents; got != 0 {
			t.Errorf("RTO events %d, want 0: the ACK waiting at the wake came first", got)
		}
		if got := p.aDev.Stats().Sent - sent; got != 0 {
			t.Errorf("%d packets sent at the wake, want none", got)
		}
		if i := c.Info(); i.Unacked != 0 {
			t.Errorf("%d segments unacknowledged after the ACK, want 0", i.Unacked)
		}
	})
	t.Run("old order resends", func(t *testing.T) {
		p, c, ack, deadline := setup(t)
		sent := p.aDev.Stats().Sent
		if err := p.a.AdvanceTo(deadline + 5*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if err := p.a.Inject(ack); err != nil {
			t.Fatal(err)
		}
		if got := c.Info().Counters.RTOEvents; got != 1 {
			t.Errorf("RTO events %d, want 1 (expiry first resends what the waiting ACK covers)", got)
		}
		if got := p.aDev.Stats().Sent - sent; got != 1 {
			t.Errorf("%d packets sent, want the one spurious resend", got)
		}
	})
}
