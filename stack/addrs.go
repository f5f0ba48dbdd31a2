package stack

import (
	"fmt"
	"net/netip"
)

// The stack's own addresses: Config.Addr, Config.Addr6, and Config.MoreAddrs.

// isLocal reports whether a is one of the stack's own addresses.
func (s *Stack) isLocal(a netip.Addr) bool {
	if a == s.cfg.Addr || (a == s.cfg.Addr6 && a.IsValid()) {
		return true
	}
	_, ok := s.more[a]
	return ok
}

// checkMoreAddrs checks cfg.MoreAddrs and returns them as a set (nil if
// there are none).
func checkMoreAddrs(cfg Config, mtu int) (map[netip.Addr]struct{}, error) {
	if len(cfg.MoreAddrs) == 0 {
		return nil, nil
	}
	set := make(map[netip.Addr]struct{}, len(cfg.MoreAddrs))
	for _, a := range cfg.MoreAddrs {
		switch {
		case a.Is4():
			if a.IsUnspecified() || a.IsMulticast() || a.IsLoopback() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) || a == directedBroadcast(cfg.Prefix) {
				return nil, fmt.Errorf("%w: address %v is not a unicast IPv4 address", ErrConfig, a)
			}
		case !cfg.Addr6.IsValid():
			return nil, fmt.Errorf("%w: IPv6 address %v without Config.Addr6", ErrConfig, a)
		default:
			if err := checkAddr6(a, mtu); err != nil {
				return nil, err
			}
		}
		if _, dup := set[a]; dup || a == cfg.Addr || a == cfg.Addr6 {
			return nil, fmt.Errorf("%w: address %v given twice", ErrConfig, a)
		}
		set[a] = struct{}{}
	}
	return set, nil
}

// source is the address and port u sends to a from: its bound address, or
// the stack's of a's IP version.
func (u *UDPConn) source(a netip.Addr) netip.AddrPort {
	if u.bound.IsValid() {
		return netip.AddrPortFrom(u.bound, u.port)
	}
	return netip.AddrPortFrom(u.s.localFor(a), u.port)
}
