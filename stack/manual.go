package stack

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/timer"
)

// Manual loop: deterministic runs for tests and pcap replay.
//
// With Config.ManualLoop set, New starts no goroutine: there is no timer.Driver
// and no device reader. The caller is the loop. It hands the stack packets with
// Inject and moves time with AdvanceTo, which sets the stack's
// *timer.ManualClock to each timer deadline in turn, so that every segment a
// timer sends is written to the Device at its exact instant. Application calls
// (Listen, Conn.Write, Close, ...) run synchronously on the caller's goroutine;
// the calls that would wait for the network (Accept with nothing queued, Read
// with nothing received, DialContext, a Write larger than the send buffer's
// room) would wait forever, so use the non-blocking TryAccept, TryRead,
// TryWrite and StartDial instead. The Device's ReadPacket is never called.

// ErrNotManual is returned by the manual-loop methods of a stack that runs its
// own loop.
var ErrNotManual = errors.New("stack: not in ManualLoop mode")

// manualLoop is the state of a ManualLoop stack. mu serialises the callers
// (the stack's code is single-threaded), so that an Info or Stats call from
// another goroutine is safe.
type manualLoop struct {
	mu     sync.Mutex
	clock  *timer.ManualClock
	closed bool // guarded by mu
}

func (s *Stack) newManual() (*Stack, error) {
	c, ok := s.wheel.Clock().(*timer.ManualClock)
	if !ok || s.cfg.Clock == nil {
		return nil, fmt.Errorf("%w: ManualLoop needs a *timer.ManualClock as Clock", ErrConfig)
	}
	s.manual = &manualLoop{clock: c}
	return s, nil
}

func (m *manualLoop) do(s *Stack, f func()) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return net.ErrClosed
	}
	select {
	case <-s.done:
		m.closed = true
		return net.ErrClosed
	default:
	}
	f()
	return nil
}

// Inject hands the stack one IPv4 packet as if the device had read it, at the
// clock's current time (timers due by then fire first). The stack does not
// keep pkt.
func (s *Stack) Inject(pkt []byte) error {
	if s.manual == nil {
		return ErrNotManual
	}
	return s.do(func() { s.handlePacketNow(pkt) })
}

// AdvanceTo moves the clock to now, stopping at each timer deadline on the way
// so that the timers fire, and send, at their own instants. A now before the
// clock's reading leaves the clock where it is.
func (s *Stack) AdvanceTo(now time.Duration) error {
	if s.manual == nil {
		return ErrNotManual
	}
	return s.do(func() {
		c := s.manual.clock
		// Bounded: each pass fires the entries of one deadline or moves to now.
		for range 1 << 20 {
			d, ok := s.wheel.NextDeadline()
			if !ok || d > now {
				break
			}
			c.Set(d)
			s.wheel.Advance(d)
		}
		c.Set(now)
		s.wheel.Advance(c.Now())
	})
}

// NextDeadline returns the instant at which a ManualLoop stack next has timer
// work, and false when no timer is pending.
func (s *Stack) NextDeadline() (d time.Duration, ok bool) {
	if s.manual == nil {
		return 0, false
	}
	s.do(func() { d, ok = s.wheel.NextDeadline() })
	return d, ok
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
	var n int
	var err error
	if c.s.do(func() { n, err = c.ep.Write(p) }) != nil {
		return 0, c.opErr("write", net.ErrClosed)
	}
	if err != nil {
		return n, c.opErr("write", mapErr(err))
	}
	return n, nil
}

// TryRead reads what has been received, if anything, and returns at once:
// (0, nil) when nothing is there yet, io.EOF after the peer's FIN.
func (c *Conn) TryRead(p []byte) (int, error) { return c.readOnce(p) }

// StartDial sends a SYN to address ("ip:port") from the local port local (0
// picks an ephemeral port) and returns the connection at once, in SYN-SENT:
// the handshake goes on as packets are injected. network must be "tcp" or
// "tcp4".
func (s *Stack) StartDial(network string, local uint16, address string) (*Conn, error) {
	fail := func(err error) error { return &net.OpError{Op: "dial", Net: network, Err: err} }
	if network != "tcp" && network != "tcp4" {
		return nil, fail(net.UnknownNetworkError(network))
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !ap.Addr().Is4() || ap.Port() == 0 {
		return nil, fail(fmt.Errorf("address %q is not IPv4 with a port", address))
	}
	var c *Conn
	var derr error
	if s.do(func() {
		p := local
		if p == 0 {
			var ok bool
			if p, ok = s.ephemeralPort(ap); !ok {
				derr = fmt.Errorf("no free local port for %v", ap)
				return
			}
		}
		id := tcp.ID{Local: netip.AddrPortFrom(s.cfg.Addr, p), Remote: ap}
		if s.conns[id] != nil {
			derr = fmt.Errorf("%v: address already in use", id)
			return
		}
		ep, err := tcp.Dial(s.wheel, s, id, s.cfg.TCP)
		if err != nil {
			derr = mapErr(err)
			return
		}
		c = newConn(s, ep)
		s.register(c)
		ep.SetNotify(c.notify)
	}) != nil {
		return nil, fail(net.ErrClosed)
	}
	if derr != nil {
		return nil, fail(derr)
	}
	return c, nil
}
