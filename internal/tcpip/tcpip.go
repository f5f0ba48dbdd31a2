// Package tcpip holds the address and protocol-number types that the header
// package's fields are written in.
//
// Its identifiers are those of gVisor's pkg/tcpip, which tcpwheel used
// before; only what tcpwheel uses is here.
package tcpip

import "net/netip"

// TransportProtocolNumber is the number of a transport protocol (IPv4's
// Protocol field, IPv6's Next Header).
type TransportProtocolNumber uint32

// NetworkProtocolNumber is the EtherType of a network protocol.
type NetworkProtocolNumber uint32

// Address is an IPv4 (4 bytes) or IPv6 (16 bytes) address, or the empty
// address.
type Address struct {
	addr   [16]byte
	length int
}

// AddrFrom4 returns the IPv4 address a.
func AddrFrom4(a [4]byte) Address {
	var r Address
	copy(r.addr[:], a[:])
	r.length = 4
	return r
}

// AddrFrom16 returns the IPv6 address a.
func AddrFrom16(a [16]byte) Address {
	return Address{addr: a, length: 16}
}

// AddrFromSlice returns the address held in b: IPv4 for 4 bytes, IPv6 for
// 16. Any other length gives the empty address.
func AddrFromSlice(b []byte) Address {
	if len(b) != 4 && len(b) != 16 {
		return Address{}
	}
	var r Address
	r.length = copy(r.addr[:], b)
	return r
}

// AsSlice returns the address's bytes (4, 16 or none).
func (a Address) AsSlice() []byte {
	return a.addr[:a.length]
}

// As4 returns the first four bytes: the address of an IPv4 Address.
func (a Address) As4() [4]byte {
	return [4]byte(a.addr[:4])
}

// As16 returns the address's 16 bytes (an IPv4 address in the first four).
func (a Address) As16() [16]byte {
	return a.addr
}

// Len returns the address's length in bytes: 4, 16 or 0.
func (a Address) Len() int {
	return a.length
}

// String formats the address as net/netip does; the empty address is "".
func (a Address) String() string {
	switch a.length {
	case 4:
		return netip.AddrFrom4(a.As4()).String()
	case 16:
		return netip.AddrFrom16(a.addr).String()
	}
	return ""
}
