package stack

import (
	"fmt"
	"net"
	"time"

	"github.com/tcpwheel/tcpwheel/loop"
	"github.com/tcpwheel/tcpwheel/timer"
)

// Manual is a stack on a manual loop (loop.Manual), for deterministic runs in
// tests and pcap replay. It starts no goroutine: there is no loop goroutine and
// no device reader. The caller is the loop. It hands the stack packets with
// Inject (or Wake, for a late wake that finds packets waiting) and moves time
// with AdvanceTo, which sets the stack's
// *timer.ManualClock to each timer deadline in turn, so that every segment a
// timer sends is written to the Device at its exact instant.
//
// The embedded *Stack is the stack itself: its application calls (Listen,
// Conn.Write, Close, ...) run synchronously on the caller's goroutine. The
// calls that would wait for the network (Accept with nothing queued, Read with
// nothing received, DialContext, a Write larger than the send buffer's room)
// would wait forever, so use the non-blocking Listener.TryAccept, Conn.TryRead,
// Conn.TryWrite and Manual.StartDial instead. The Device's ReadPacket is never
// called; Stats.InputPath is "manual".
type Manual struct {
	*Stack
	m *loop.Manual
}

// NewManual returns a stack on cfg.Device driven by its caller. cfg.Clock must
// be a *timer.ManualClock.
func NewManual(cfg Config) (*Manual, error) {
	if _, ok := cfg.Clock.(*timer.ManualClock); !ok {
		return nil, fmt.Errorf("%w: NewManual needs a *timer.ManualClock as Clock", ErrConfig)
	}
	s, m, err := newManualStack(cfg)
	if err != nil {
		return nil, err
	}
	if s.recw != nil {
		if err := m.SetExpireHook(s.onExpire); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	return &Manual{Stack: s, m: m}, nil
}

// newManualStack is a stack on a manual loop of its own.
func newManualStack(cfg Config) (*Stack, *loop.Manual, error) {
	s, err := newStack(cfg)
	if err != nil {
		return nil, nil, err
	}
	m, err := loop.NewManual(s.wheel)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	s.run, s.input = m, inputManual
	return s, m, nil
}

// Inject hands the stack one IPv4 packet as if the device had read it, at the
// clock's current time: Wake at the clock's reading. The stack does not keep
// pkt.
func (m *Manual) Inject(pkt []byte) error {
	return m.Wake(m.m.Clock().Now(), pkt)
}

// Wake is a turn of the stack's loop that wakes at now and finds pkts waiting
// in the device, as loop.Manual.Wake: the clock moves to now, the packets are
// handled, in order, and then the timers due by now fire, late, at now. Input
// comes before expiry, as on the real loop: a packet that arrived before a
// timer's deadline but is read after it (the loop woke late) still stops the
// timer if it acknowledges its segment. (AdvanceTo then Inject is the other
// order: the timers due on the way fire first, at their own instants.) A now
// before the clock's reading leaves the clock where it is. The stack does not
// keep the packets. It fails with net.ErrClosed after Close.
func (m *Manual) Wake(now time.Duration, pkts ...[]byte) error {
	err := m.m.Wake(now, func() {
		for _, pkt := range pkts {
			m.handlePacketNow(pkt)
		}
		if len(pkts) > 0 {
			m.endBatch()
		}
	})
	if err != nil {
		return net.ErrClosed
	}
	return nil
}

// AdvanceTo moves the clock to now, stopping at each timer deadline on the way
// so that the timers fire, and send, at their own instants. A now before the
// clock's reading leaves the clock where it is. It fails with net.ErrClosed
// after Close.
func (m *Manual) AdvanceTo(now time.Duration) error {
	if m.m.AdvanceTo(now) != nil {
		return net.ErrClosed
	}
	return nil
}

// NextDeadline returns the instant at which the stack next has timer work, and
// false when no timer is pending.
func (m *Manual) NextDeadline() (time.Duration, bool) { return m.m.NextDeadline() }

// StartDial sends a SYN to address ("ip:port") from the local port local (0
// picks an ephemeral port) and returns the connection at once, in SYN-SENT:
// the handshake goes on as packets are injected. network must be "tcp",
// "tcp4" or "tcp6".
func (m *Manual) StartDial(network string, local uint16, address string) (*Conn, error) {
	fail := func(err error) error { return &net.OpError{Op: "dial", Net: network, Err: err} }
	n, ok := netOf(network, "tcp")
	if !ok {
		return nil, fail(net.UnknownNetworkError(network))
	}
	ap, err := parseRemote(address)
	if err == nil {
		err = m.checkRemote(n, ap)
	}
	if err != nil {
		return nil, fail(err)
	}
	c, err := m.startDial(local, ap)
	if err != nil {
		return nil, fail(err)
	}
	return c, nil
}

// TryAccept returns a connection waiting for Accept, if there is one.
func (l *Listener) TryAccept() (*Conn, bool) {
	select {
	case c := <-l.acceptq:
		return c, true
	default:
		return nil, false
	}
}

// TryWrite puts as much of p as fits in the send buffer and returns at once.
func (c *Conn) TryWrite(p []byte) (int, error) {
	if c.isClosed() {
		return 0, c.opErr("write", net.ErrClosed)
	}
	return c.writeSome(p, nil)
}

// TryRead reads what has been received, if anything, and returns at once:
// (0, nil) when nothing is there yet, io.EOF after the peer's FIN.
func (c *Conn) TryRead(p []byte) (int, error) {
	if c.isClosed() {
		return 0, c.opErr("read", net.ErrClosed)
	}
	n, _, err := c.readSome(p, nil)
	return n, err
}
