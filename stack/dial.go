package stack

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/tcpwheel/tcpwheel/tcp"
)

// DialContext connects to address ("ip:port", IPv4; no name resolution) over the
// stack. network must be "tcp" or "tcp4". It returns when the handshake
// completes, fails (connection refused, timed out after the SYN retries), or ctx
// ends, in which case the half-open connection is reset.
func (s *Stack) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	fail := func(raddr net.Addr, err error) error {
		return &net.OpError{Op: "dial", Net: network, Addr: raddr, Err: err}
	}
	if network != "tcp" && network != "tcp4" {
		return nil, fail(nil, net.UnknownNetworkError(network))
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil, fail(nil, fmt.Errorf("bad address %q: %w", address, err))
	}
	raddr := net.TCPAddrFromAddrPort(ap)
	if !ap.Addr().Is4() || ap.Port() == 0 {
		return nil, fail(raddr, fmt.Errorf("address %s is not IPv4 with a port", address))
	}
	if err := ctx.Err(); err != nil {
		return nil, fail(raddr, err)
	}
	var c *Conn
	var derr error
	if s.do(func() {
		p, ok := s.ephemeralPort(ap)
		if !ok {
			derr = fmt.Errorf("no free local port for %v", ap)
			return
		}
		id := tcp.ID{Local: netip.AddrPortFrom(s.cfg.Addr, p), Remote: ap}
		ep, err := tcp.Dial(s.wheel, s, id, s.cfg.TCP)
		if err != nil {
			derr = mapErr(err)
			return
		}
		c = newConn(s, ep)
		s.register(c)
		ep.SetNotify(c.notify)
	}) != nil {
		return nil, fail(raddr, net.ErrClosed)
	}
	if derr != nil {
		return nil, fail(raddr, derr)
	}
	select {
	case <-c.settled:
	case <-ctx.Done():
		s.do(func() { c.ep.Abort() })
		return nil, fail(raddr, ctx.Err())
	case <-s.done:
		return nil, fail(raddr, net.ErrClosed)
	}
	var state tcp.State
	var eerr error
	s.do(func() { state, eerr = c.ep.State(), c.ep.Err() })
	if eerr != nil || state < tcp.StateEstablished {
		if eerr == nil {
			eerr = tcp.ErrConnectionRefused
		}
		return nil, fail(raddr, mapErr(eerr))
	}
	return c, nil
}
