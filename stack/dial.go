package stack

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/tcpwheel/tcpwheel/stack/record"
	"github.com/tcpwheel/tcpwheel/tcp"
)

// DialContext connects to address ("ip:port", IPv4 or IPv6; no name resolution) over the
// stack; it is DialTCP returning net.Conn, so that it can be http.Transport's
// DialContext. The net.Conn is always a *Conn: use DialTCP for the concrete type
// (CloseWrite, Info, the keepalive setters) without a type assertion. For
// network "udp", "udp4" or "udp6" it is DialUDP: the net.Conn is a
// connected *UDPConn.
func (s *Stack) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if _, ok := netOf(network, "udp"); ok {
		if err := ctx.Err(); err != nil {
			return nil, &net.OpError{Op: "dial", Net: network, Err: err}
		}
		u, err := s.DialUDP(network, address)
		if err != nil {
			return nil, err // not a nil *UDPConn inside a non-nil net.Conn
		}
		return u, nil
	}
	c, err := s.DialTCP(ctx, network, address)
	if err != nil {
		return nil, err // not a nil *Conn inside a non-nil net.Conn
	}
	return c, nil
}

// DialTCP connects to address ("ip:port", IPv4 or IPv6; no name resolution)
// over the stack, as net.DialTCP does over the kernel, from the stack's
// address of the same IP version. network must be "tcp", "tcp4" or "tcp6".
// It returns when the handshake completes, fails (connection refused, timed
// out after the SYN retries), or ctx ends, in which case the half-open
// connection is reset. Errors are *net.OpError.
func (s *Stack) DialTCP(ctx context.Context, network, address string) (*Conn, error) {
	fail := func(raddr net.Addr, err error) error {
		return &net.OpError{Op: "dial", Net: network, Addr: raddr, Err: err}
	}
	n, ok := netOf(network, "tcp")
	if !ok {
		return nil, fail(nil, net.UnknownNetworkError(network))
	}
	ap, err := parseRemote(address)
	if err == nil {
		err = s.checkRemote(n, ap)
	}
	raddr := net.TCPAddrFromAddrPort(ap)
	if err != nil {
		if !ap.IsValid() {
			return nil, fail(nil, err)
		}
		return nil, fail(raddr, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fail(raddr, err)
	}
	if s.grp != nil {
		s = s.grp.dialer() // loops.go: the loop whose queue sends the SYN
	}
	c, err := s.startDial(0, ap)
	if err != nil {
		return nil, fail(raddr, err)
	}
	select {
	case <-c.settled:
	case <-ctx.Done():
		s.do(func() { c.event(record.Abort, 0); c.ep.Abort() })
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

// parseRemote parses a remote address to dial: "ip:port", IPv4 or IPv6 (an
// IPv4-mapped one is IPv4), with a port that is not 0. On an error the
// AddrPort is the parsed one, if it parsed.
func parseRemote(address string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bad address %q: %w", address, err)
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if ap.Port() == 0 || ap.Addr().IsUnspecified() {
		return ap, fmt.Errorf("address %s is not an IP address with a port", address)
	}
	return ap, nil
}

// startDial sends a SYN to remote from the local port local (0 picks an
// ephemeral port) and returns the connection at once, in SYN-SENT. The error is
// net.ErrClosed if the stack is closed, else the reason it could not start.
func (s *Stack) startDial(local uint16, remote netip.AddrPort) (*Conn, error) {
	var c *Conn
	var derr error
	if s.do(func() {
		p := local
		if p == 0 {
			var ok bool
			if p, ok = s.ephemeralPort(remote); !ok {
				derr = fmt.Errorf("no free local port for %v", remote)
				return
			}
		}
		c, derr = s.dial(tcp.ID{Local: netip.AddrPortFrom(s.localFor(remote.Addr()), p), Remote: remote})
	}) != nil {
		return nil, net.ErrClosed
	}
	return c, derr
}

// dial is startDial's part on the loop, once the port is chosen.
func (s *Stack) dial(id tcp.ID) (*Conn, error) {
	if s.inUse(id) || s.grp != nil && !s.grp.claim(id, s) {
		return nil, fmt.Errorf("%v: address already in use", id)
	}
	s.note(record.Dial, id, 0)
	ep, err := s.epSpares.Dial(s.timers(), s.out(), id, s.cfg.TCP) // timewait.go
	if err != nil {
		if s.grp != nil {
			s.grp.release(id, s)
		}
		return nil, mapErr(err)
	}
	c := newConn(s, ep, false)
	s.register(c)
	ep.SetNotifier((*connNotify)(c))
	return c, nil
}
