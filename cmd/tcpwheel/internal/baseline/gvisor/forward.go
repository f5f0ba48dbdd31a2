package gvisor

import (
	"fmt"
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// Forwarding (Config.Forward) with gVisor's own forwarders (tcp.NewForwarder,
// udp.NewForwarder), as the tun2socks-style proxies built on gVisor use
// them: the NIC takes packets to any address (promiscuous) and sends from
// any (spoofing), a SYN to any address goes to the TCP handler, which
// completes the handshake or refuses it, and a datagram of a flow that no
// endpoint has yet goes to the UDP handler. `tcpwheel forward -stack
// gvisor` relays them as it relays tcpwheel's forwarded flows.

// DefaultMaxInFlight is ForwardConfig.MaxInFlight's default: the TCP
// handshakes the handler may hold undecided, for a caller that gives no
// bound (`tcpwheel forward` gives its -max-pending, as tcpwheel's
// forwarder has).
const DefaultMaxInFlight = 1024

// ForwardConfig says what the stack's forwarders do with new flows.
type ForwardConfig struct {
	// TCP is given each new TCP flow, in a goroutine of its own (gVisor's
	// forwarder starts one per SYN); it must call Accept or Refuse. Nil:
	// TCP is not forwarded.
	TCP func(*TCPRequest)
	// UDP is given each new UDP flow, its first datagram queued on c, in a
	// goroutine of its own; the flow is c's until c is closed. Nil: UDP is
	// not forwarded.
	UDP func(c *gonet.UDPConn, dst netip.AddrPort)
	// MaxInFlight bounds the TCP flows the handler holds undecided; SYNs
	// beyond it are dropped (gVisor counts ForwardMaxInFlightDrop). Zero
	// means DefaultMaxInFlight.
	MaxInFlight int
}

// TCPRequest is a new TCP flow: the client's SYN, not yet answered.
type TCPRequest struct {
	r *tcp.ForwarderRequest
}

// Destination is where the client's SYN went: the flow's original
// destination.
func (q *TCPRequest) Destination() netip.AddrPort {
	id := q.r.ID()
	return netip.AddrPortFrom(addrOf(id.LocalAddress), id.LocalPort)
}

// Source is the client's address.
func (q *TCPRequest) Source() netip.AddrPort {
	id := q.r.ID()
	return netip.AddrPortFrom(addrOf(id.RemoteAddress), id.RemotePort)
}

// Accept completes the handshake and returns the client's connection.
func (q *TCPRequest) Accept() (*Conn, error) {
	var wq waiter.Queue
	ep, err := q.r.CreateEndpoint(&wq)
	if err != nil {
		q.r.Complete(true)
		return nil, tcpipErr(err)
	}
	q.r.Complete(false)
	return newConn(&wq, ep), nil
}

// Refuse answers the SYN with a RST when reset is true, and with nothing
// otherwise (the client's SYN times out, as for a destination that does
// not answer).
func (q *TCPRequest) Refuse(reset bool) { q.r.Complete(reset) }

// addrOf converts a gVisor address (4 or 16 bytes) to a netip.Addr.
func addrOf(a tcpip.Address) netip.Addr {
	ip, _ := netip.AddrFromSlice(a.AsSlice())
	return ip
}

// check validates cfg and fills in its defaults.
func (cfg *ForwardConfig) check() error {
	if cfg.TCP == nil && cfg.UDP == nil {
		return fmt.Errorf("%w: Forward with no handler", ErrConfig)
	}
	if cfg.MaxInFlight < 0 {
		return fmt.Errorf("%w: MaxInFlight %d", ErrConfig, cfg.MaxInFlight)
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	return nil
}

// installForwarders makes the forwarders s's handlers of TCP and UDP
// packets that no endpoint takes. gVisor's SetTransportProtocolHandler is
// not safe while packets arrive: New calls it before the NIC exists.
func installForwarders(s *gstack.Stack, cfg *ForwardConfig) {
	if cfg.TCP != nil {
		f := tcp.NewForwarder(s, 0, cfg.MaxInFlight, func(r *tcp.ForwarderRequest) { cfg.TCP(&TCPRequest{r: r}) })
		s.SetTransportProtocolHandler(tcp.ProtocolNumber, f.HandlePacket)
	}
	if cfg.UDP != nil {
		f := udp.NewForwarder(s, func(r *udp.ForwarderRequest) bool {
			var wq waiter.Queue
			ep, err := r.CreateEndpoint(&wq)
			if err != nil {
				return false // gVisor answers as for no socket
			}
			id := r.ID()
			c := gonet.NewUDPConn(&wq, ep)
			go cfg.UDP(c, netip.AddrPortFrom(addrOf(id.LocalAddress), id.LocalPort))
			return true
		})
		s.SetTransportProtocolHandler(udp.ProtocolNumber, f.HandlePacket)
	}
}

// forwardNIC has the NIC take packets to any address and send from any.
func forwardNIC(s *gstack.Stack) tcpip.Error {
	if err := s.SetPromiscuousMode(nicID, true); err != nil {
		return err
	}
	return s.SetSpoofing(nicID, true)
}

// ForwardStats is what gVisor counts of its forwarders' work.
type ForwardStats struct {
	MaxInFlightDrops uint64 // SYNs dropped with MaxInFlight handshakes undecided
}

// ForwardStats returns the forwarders' counters.
func (s *Stack) ForwardStats() ForwardStats {
	return ForwardStats{MaxInFlightDrops: s.s.Stats().TCP.ForwardMaxInFlightDrop.Value()}
}
