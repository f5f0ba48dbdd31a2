// Package gvisor is the baseline that tcpwheel is measured against: gVisor's
// netstack (gvisor.dev/gvisor/pkg/tcpip) on a tun.Device, with an API shaped like
// tcpwheel's own package stack: Listen and DialContext return net.Listener and
// net.Conn (gVisor's gonet underneath), and each connection reports TCP_INFO-like
// figures (RTO, SRTT, cwnd) through Conn.Info.
//
//	s, err := gvisor.New(gvisor.Config{Device: dev, Addr: netip.MustParseAddr("198.18.0.2")})
//	c, err := s.DialContext(ctx, "tcp", "198.18.0.1:8080")
//	rto := c.(*gvisor.Conn).Info().RTO
//
// The device carries whole IPv4 packets without a link header, as for tcpwheel's
// stack, so that both stacks run behind the same TUN device, impairment layer and
// pcap tap. Outbound packets are written to the device on the goroutine that
// sends them (no queue that could drop them); one reader goroutine delivers the
// inbound ones.
//
// Config.Clock chooses gVisor's clock: nil means tcpip.NewStdClock (Go runtime
// timers); a tcpipclock.Clock (cmd/tcpwheel/internal/tcpipclock) runs gVisor's timers on tcpwheel's wheel.
//
// It uses nothing of package stack: it lives under internal/baseline, beside
// the comparison (package compare) that is its only user. gVisor reads the
// device through a goroutine (a gVisor link endpoint has no epoll hook of
// ours), so it never uses tun.Pollable.
package gvisor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/tcpwheel/tcpwheel/tun"
)

// nicID is the one NIC of the stack.
const nicID tcpip.NICID = 1

// Config.Tuned's buffer maxima.
const (
	tunedRcvBufMax = 8 << 20
	tunedSndBufMax = 6 << 20
)

// listenBacklog is the default backlog of every listener (Config.ListenBacklog):
// Linux's default somaxconn.
const listenBacklog = 4096

// ErrConfig is wrapped by New for an invalid Config.
var ErrConfig = errors.New("gvisor: invalid config")

// KeepAlive configures keepalive probes (RFC 1122 4.2.3.6) on a connection. Zero
// durations and count mean gVisor's defaults (2 h, 75 s, 9, as Linux).
type KeepAlive struct {
	Enable   bool
	Idle     time.Duration
	Interval time.Duration
	Count    int
}

// Config configures a Stack.
type Config struct {
	// Device is the link: whole IPv4 packets, no link header. Required
	// unless VnetTUN is given. The stack closes it on Close.
	Device tun.Device
	// Addr is the stack's IPv4 address. Required.
	Addr netip.Addr
	// Addr6, when valid, is the stack's IPv6 address too (on-link /64, no
	// duplicate address detection, no NDP: a TUN has no link layer); the
	// stack then speaks IPv6 as well. Only with Device, not VnetTUN.
	Addr6 netip.Addr
	// PrefixLen is the length of the on-link prefix around Addr; zero means 24.
	// Everything else is routed to the device too.
	PrefixLen int
	// Clock is gVisor's clock; nil means tcpip.NewStdClock(). The stack does not
	// close it.
	Clock tcpip.Clock
	// KeepAlive applies to every connection, dialed or accepted.
	KeepAlive KeepAlive
	// VnetTUN, instead of Device, is a TUN opened with IFF_VNET_HDR (see
	// OpenVnetTUN): the stack then runs in its best configuration on a TUN,
	// with gVisor's host GSO (segments of up to 64 KB handed to the kernel
	// with a virtio-net header) and the kernel's large segments taken whole,
	// their checksums trusted (see gsoLink). The stack closes it on Close.
	VnetTUN *VnetTUN
	// Tuned applies the TCP settings that gVisor's users who tune it for
	// throughput apply (Tailscale's netstack among them): receive-buffer
	// moderation (auto-tuning, off by default), receive buffers up to
	// 8 MiB and send buffers up to 6 MiB (gVisor's default maximum is
	// 4 MiB). SACK is on either way.
	Tuned bool
	// DisableSACK turns SACK (and with it RACK-TLP) off; gVisor's default is on.
	DisableSACK bool
	// MinRTO is the lower bound of the RTO; zero means gVisor's 200 ms.
	MinRTO time.Duration
	// Forward, if not nil, makes the stack a forwarder (forward.go): every
	// TCP and UDP flow the link brings, to any address, goes to its
	// handlers.
	Forward *ForwardConfig
	// ListenBacklog is every listener's backlog (its accept queue; gVisor
	// answers with SYN cookies once as many handshakes are pending); zero
	// means 4096, Linux's default somaxconn.
	ListenBacklog int
}

// stackLink is a link endpoint of this package.
type stackLink interface {
	gstack.LinkEndpoint
	base() *linkBase
}

// mtu is the link's MTU.
func (c *Config) mtu() int {
	if c.VnetTUN != nil {
		return c.VnetTUN.MTU()
	}
	return c.Device.MTU()
}

// closeDevice closes the link's device.
func (c *Config) closeDevice() {
	if c.VnetTUN != nil {
		c.VnetTUN.Close()
	} else {
		c.Device.Close()
	}
}

// Stack is a gVisor netstack on a tun.Device. Its methods are safe for concurrent
// use.
type Stack struct {
	cfg  Config
	s    *gstack.Stack
	link stackLink

	closeOnce sync.Once
}

// New starts a stack on cfg.Device.
func New(cfg Config) (*Stack, error) {
	if (cfg.Device == nil) == (cfg.VnetTUN == nil) {
		return nil, fmt.Errorf("%w: want a Device or a VnetTUN, not both or neither", ErrConfig)
	}
	if !cfg.Addr.Is4() {
		return nil, fmt.Errorf("%w: address %v is not IPv4", ErrConfig, cfg.Addr)
	}
	if cfg.Addr6.IsValid() && (!cfg.Addr6.Is6() || cfg.Addr6.Is4In6() || cfg.VnetTUN != nil) {
		return nil, fmt.Errorf("%w: IPv6 address %v: want an IPv6 address, and a Device", ErrConfig, cfg.Addr6)
	}
	if cfg.PrefixLen == 0 {
		cfg.PrefixLen = 24
	}
	if cfg.PrefixLen < 1 || cfg.PrefixLen > 32 {
		return nil, fmt.Errorf("%w: prefix length %d", ErrConfig, cfg.PrefixLen)
	}
	if mtu := cfg.mtu(); mtu < tun.MinMTU {
		return nil, fmt.Errorf("%w: device MTU %d is below IPv4's %d", ErrConfig, mtu, tun.MinMTU)
	}
	if cfg.KeepAlive.Idle < 0 || cfg.KeepAlive.Interval < 0 || cfg.KeepAlive.Count < 0 || cfg.MinRTO < 0 {
		return nil, fmt.Errorf("%w: negative keepalive or RTO setting", ErrConfig)
	}
	if cfg.Forward != nil {
		fc := *cfg.Forward
		if err := fc.check(); err != nil {
			return nil, err
		}
		cfg.Forward = &fc
	}
	if cfg.Clock == nil {
		cfg.Clock = tcpip.NewStdClock()
	}
	protos := []gstack.NetworkProtocolFactory{ipv4.NewProtocol}
	if cfg.Addr6.IsValid() {
		// The zero Options: no DAD, no router solicitation, no SLAAC.
		protos = append(protos, ipv6.NewProtocolWithOptions(ipv6.Options{}))
	}
	s := gstack.New(gstack.Options{
		NetworkProtocols:   protos,
		TransportProtocols: []gstack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol},
		Clock:              cfg.Clock,
	})
	fail := func(what string, err tcpip.Error) (*Stack, error) {
		s.Destroy()
		cfg.closeDevice()
		return nil, fmt.Errorf("gvisor: %s: %s", what, err)
	}
	sack := tcpip.TCPSACKEnabled(!cfg.DisableSACK)
	if err := s.SetTransportProtocolOption(tcp.ProtocolNumber, &sack); err != nil {
		return fail("enable SACK", err)
	}
	if cfg.Tuned {
		moderate := tcpip.TCPModerateReceiveBufferOption(true)
		rcv := tcpip.TCPReceiveBufferSizeRangeOption{Min: tcp.MinBufferSize, Default: tcp.DefaultReceiveBufferSize, Max: tunedRcvBufMax}
		snd := tcpip.TCPSendBufferSizeRangeOption{Min: tcp.MinBufferSize, Default: tcp.DefaultSendBufferSize, Max: tunedSndBufMax}
		for _, o := range []struct {
			what string
			opt  tcpip.SettableTransportProtocolOption
		}{{"moderate receive buffer", &moderate}, {"receive buffer range", &rcv}, {"send buffer range", &snd}} {
			if err := s.SetTransportProtocolOption(tcp.ProtocolNumber, o.opt); err != nil {
				return fail(o.what, err)
			}
		}
	}
	if cfg.MinRTO > 0 {
		opt := tcpip.TCPMinRTOOption(cfg.MinRTO)
		if err := s.SetTransportProtocolOption(tcp.ProtocolNumber, &opt); err != nil {
			return fail("set MinRTO", err)
		}
	}
	if cfg.Forward != nil {
		installForwarders(s, cfg.Forward) // before the NIC's reader starts
	}
	var l stackLink
	if cfg.VnetTUN != nil {
		l = newGSOLink(cfg.VnetTUN)
	} else {
		l = newLink(cfg.Device)
	}
	if err := s.CreateNIC(nicID, l); err != nil {
		l.Close()
		return fail("create NIC", err)
	}
	if cfg.Forward != nil {
		if err := forwardNIC(s); err != nil {
			return fail("forwarding (promiscuous, spoofing)", err)
		}
	}
	pa := tcpip.ProtocolAddress{
		Protocol: ipv4.ProtocolNumber,
		AddressWithPrefix: tcpip.AddressWithPrefix{
			Address:   tcpip.AddrFrom4(cfg.Addr.As4()),
			PrefixLen: cfg.PrefixLen,
		},
	}
	if err := s.AddProtocolAddress(nicID, pa, gstack.AddressProperties{}); err != nil {
		return fail("add address", err)
	}
	routes := []tcpip.Route{{Destination: header.IPv4EmptySubnet, NIC: nicID}}
	if cfg.Addr6.IsValid() {
		pa6 := tcpip.ProtocolAddress{
			Protocol:          ipv6.ProtocolNumber,
			AddressWithPrefix: tcpip.AddressWithPrefix{Address: tcpip.AddrFrom16(cfg.Addr6.As16()), PrefixLen: 64},
		}
		if err := s.AddProtocolAddress(nicID, pa6, gstack.AddressProperties{}); err != nil {
			return fail("add IPv6 address", err)
		}
		routes = append(routes, tcpip.Route{Destination: header.IPv6EmptySubnet, NIC: nicID})
	}
	s.SetRouteTable(routes)
	return &Stack{cfg: cfg, s: s, link: l}, nil
}

// Addr returns the stack's IPv4 address.
func (s *Stack) Addr() netip.Addr { return s.cfg.Addr }

// GVisor returns the gVisor stack underneath, for what this package does not
// offer.
func (s *Stack) GVisor() *gstack.Stack { return s.s }

// Close aborts every connection and listener, stops gVisor's goroutines and
// closes the device. It is idempotent and returns nil.
func (s *Stack) Close() error {
	s.closeOnce.Do(func() {
		// The reader must end before gVisor's Wait: Wait holds the stack's
		// lock while it waits for the link, and a packet the reader is still
		// delivering needs that lock (FindRoute), which deadlocked Close.
		s.link.Close() // closes the device: the reader's read fails
		s.link.Wait()  // the reader has ended; no stack lock is held yet
		s.s.Close()
		s.s.Wait()
	})
	return nil
}

// Stats is a snapshot of the stack's TCP counters.
type Stats struct {
	SegmentsSent, SegmentsReceived uint64
	Retransmits                    uint64 // segments resent, for any reason
	Timeouts                       uint64 // RTO expirations
	FastRetransmits                uint64
	TLPRecoveries                  uint64 // tail loss probes that recovered a loss
	SACKRecoveries                 uint64
	CurrentEstablished             uint64
	// Link counters: outbound packets the device refused, inbound read errors,
	// inbound packets that were not IPv4, packets larger than the MTU.
	LinkWriteErrors, LinkReadErrors, LinkNotIPv4, LinkTooBig uint64
	// With Config.VnetTUN: segments handed to the kernel to split (GSO), and
	// segments received larger than the MTU (the kernel's TSO).
	LinkGSOOut, LinkLargeIn uint64
}

// Stats returns the stack's counters.
func (s *Stack) Stats() Stats {
	t := s.s.Stats().TCP
	return Stats{
		SegmentsSent:       t.SegmentsSent.Value(),
		SegmentsReceived:   t.ValidSegmentsReceived.Value(),
		Retransmits:        t.Retransmits.Value(),
		Timeouts:           t.Timeouts.Value(),
		FastRetransmits:    t.FastRetransmit.Value(),
		TLPRecoveries:      t.TLPRecovery.Value(),
		SACKRecoveries:     t.SACKRecovery.Value(),
		CurrentEstablished: t.CurrentEstablished.Value(),
		LinkWriteErrors:    s.link.base().writeErrors.Load(),
		LinkReadErrors:     s.link.base().readErrors.Load(),
		LinkNotIPv4:        s.link.base().notIPv4.Load(),
		LinkTooBig:         s.link.base().tooBig.Load(),
		LinkGSOOut:         s.link.base().gsoOut.Load(),
		LinkLargeIn:        s.link.base().largeIn.Load(),
	}
}

// parseAddr parses "ip:port" (no name resolution) for network "tcp", "tcp4"
// (IPv4 only) or "tcp6" (IPv6 only). An empty or unspecified IP is allowed
// when listen is true: "" is 0.0.0.0, or :: for "tcp6".
func parseAddr(network, address string, listen bool) (netip.AddrPort, error) {
	if network != "tcp" && network != "tcp4" && network != "tcp6" {
		return netip.AddrPort{}, net.UnknownNetworkError(network)
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if host == "" && listen {
		host = "0.0.0.0"
		if network == "tcp6" {
			host = "::"
		}
	}
	ap, err := netip.ParseAddrPort(net.JoinHostPort(host, port))
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bad address %q: %w", address, err)
	}
	a := ap.Addr().Unmap()
	if network == "tcp6" && !ap.Addr().Is6() || network != "tcp6" && !a.Is4() && network != "tcp" ||
		!listen && (ap.Port() == 0 || a.IsUnspecified()) {
		return netip.AddrPort{}, fmt.Errorf("address %s is not %s with a port", address, map[string]string{"tcp": "IP", "tcp4": "IPv4", "tcp6": "IPv6"}[network])
	}
	return netip.AddrPortFrom(a, ap.Port()), nil
}

func fullAddr(ap netip.AddrPort) tcpip.FullAddress {
	fa := tcpip.FullAddress{NIC: nicID, Port: ap.Port()}
	switch {
	case ap.Addr().IsUnspecified():
	case ap.Addr().Is4():
		fa.Addr = tcpip.AddrFrom4(ap.Addr().As4())
	default:
		fa.Addr = tcpip.AddrFrom16(ap.Addr().As16())
	}
	return fa
}

// tcpipErr turns a gVisor error into one that errors.Is can match against the
// errno a kernel socket would give, where there is one.
func tcpipErr(err tcpip.Error) error {
	var errno syscall.Errno
	switch err.(type) {
	case *tcpip.ErrConnectionRefused:
		errno = syscall.ECONNREFUSED
	case *tcpip.ErrConnectionReset:
		errno = syscall.ECONNRESET
	case *tcpip.ErrTimeout:
		errno = syscall.ETIMEDOUT
	case *tcpip.ErrConnectionAborted:
		errno = syscall.ECONNABORTED
	case *tcpip.ErrPortInUse:
		errno = syscall.EADDRINUSE
	case *tcpip.ErrHostUnreachable:
		errno = syscall.EHOSTUNREACH
	case *tcpip.ErrNetworkUnreachable:
		errno = syscall.ENETUNREACH
	default:
		return errors.New(err.String())
	}
	return fmt.Errorf("%s: %w", err, errno)
}

// newEndpoint makes a TCP endpoint with the stack's keepalive configuration.
// newEndpoint makes a TCP endpoint with the stack's keepalive configuration
// (a listener's accepted endpoints inherit it).
func (s *Stack) newEndpoint(ap netip.AddrPort) (tcpip.Endpoint, *waiter.Queue, error) {
	var wq waiter.Queue
	proto := ipv4.ProtocolNumber
	if ap.Addr().Is6() {
		if !s.cfg.Addr6.IsValid() {
			return nil, nil, fmt.Errorf("%v: no IPv6 address (Config.Addr6): %w", ap.Addr(), syscall.EAFNOSUPPORT)
		}
		proto = ipv6.ProtocolNumber
	}
	ep, terr := s.s.NewEndpoint(tcp.ProtocolNumber, proto, &wq)
	if terr != nil {
		return nil, nil, tcpipErr(terr)
	}
	if s.cfg.KeepAlive != (KeepAlive{}) {
		if err := setKeepAlive(ep, s.cfg.KeepAlive); err != nil {
			ep.Close()
			return nil, nil, err
		}
	}
	return ep, &wq, nil
}

// setKeepAlive configures keepalive on ep.
func setKeepAlive(ep tcpip.Endpoint, ka KeepAlive) error {
	if ka.Idle > 0 {
		opt := tcpip.KeepaliveIdleOption(ka.Idle)
		if err := ep.SetSockOpt(&opt); err != nil {
			return tcpipErr(err)
		}
	}
	if ka.Interval > 0 {
		opt := tcpip.KeepaliveIntervalOption(ka.Interval)
		if err := ep.SetSockOpt(&opt); err != nil {
			return tcpipErr(err)
		}
	}
	if ka.Count > 0 {
		if err := ep.SetSockOptInt(tcpip.KeepaliveCountOption, ka.Count); err != nil {
			return tcpipErr(err)
		}
	}
	ep.SocketOptions().SetKeepAlive(ka.Enable)
	return nil
}

// DialContext connects to address ("ip:port", IPv4) over the stack. It returns a
// *Conn when the handshake completes, and fails when the connection is refused,
// times out, or ctx ends.
func (s *Stack) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	ap, err := parseAddr(network, address, false)
	raddr := net.TCPAddrFromAddrPort(ap)
	fail := func(err error) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: network, Addr: raddr, Err: err}
	}
	if err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	ep, wq, err := s.newEndpoint(ap)
	if err != nil {
		return fail(err)
	}
	entry, notify := waiter.NewChannelEntry(waiter.WritableEvents)
	wq.EventRegister(&entry)
	defer wq.EventUnregister(&entry)
	terr := ep.Connect(fullAddr(ap))
	if _, ok := terr.(*tcpip.ErrConnectStarted); ok {
		select {
		case <-ctx.Done():
			ep.Abort()
			return fail(ctx.Err())
		case <-notify:
		}
		terr = ep.LastError()
	}
	if terr != nil {
		ep.Close()
		return fail(tcpipErr(terr))
	}
	return newConn(wq, ep), nil
}

// ListenUDP opens an unconnected UDP socket bound to address (":port" or
// "ip:port"; network "udp4" or "udp6"): gVisor's UDP endpoint through its
// gonet adapter (gonet.DialUDP with no remote address), a net.PacketConn
// with deadlines.
func (s *Stack) ListenUDP(network, address string) (*gonet.UDPConn, error) {
	tnet := map[string]string{"udp4": "tcp4", "udp6": "tcp6"}[network]
	if tnet == "" {
		return nil, &net.OpError{Op: "listen", Net: network, Err: net.UnknownNetworkError(network)}
	}
	ap, err := parseAddr(tnet, address, true)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: network, Err: err}
	}
	proto := ipv4.ProtocolNumber
	if network == "udp6" {
		proto = ipv6.ProtocolNumber
	}
	la := fullAddr(ap)
	c, err := gonet.DialUDP(s.s, &la, nil, proto)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: network, Addr: net.UDPAddrFromAddrPort(ap), Err: err}
	}
	return c, nil
}

// Listen listens on address (":port" or "ip:port", IPv4). Accept returns *Conn.
func (s *Stack) Listen(network, address string) (net.Listener, error) {
	ap, err := parseAddr(network, address, true)
	laddr := net.TCPAddrFromAddrPort(ap)
	fail := func(err error) (net.Listener, error) {
		return nil, &net.OpError{Op: "listen", Net: network, Addr: laddr, Err: err}
	}
	if err != nil {
		return fail(err)
	}
	ep, wq, err := s.newEndpoint(ap)
	if err != nil {
		return fail(err)
	}
	if terr := ep.Bind(fullAddr(ap)); terr != nil {
		ep.Close()
		return fail(tcpipErr(terr))
	}
	backlog := s.cfg.ListenBacklog
	if backlog <= 0 {
		backlog = listenBacklog
	}
	if terr := ep.Listen(backlog); terr != nil {
		ep.Close()
		return fail(tcpipErr(terr))
	}
	if ap.Port() == 0 {
		if fa, err := ep.GetLocalAddress(); err == nil {
			laddr.Port = int(fa.Port)
		}
	}
	return &Listener{ep: ep, wq: wq, addr: laddr, closed: make(chan struct{})}, nil
}

// Listener is a listening gVisor endpoint. It implements net.Listener.
type Listener struct {
	ep        tcpip.Endpoint
	wq        *waiter.Queue
	addr      *net.TCPAddr
	closeOnce sync.Once
	closed    chan struct{}
}

var _ net.Listener = (*Listener)(nil)

// Accept implements net.Listener: it returns the next connection, a *Conn. After
// Close it fails with an error matching net.ErrClosed.
func (l *Listener) Accept() (net.Conn, error) {
	entry, notify := waiter.NewChannelEntry(waiter.ReadableEvents)
	l.wq.EventRegister(&entry)
	defer l.wq.EventUnregister(&entry)
	for {
		select {
		case <-l.closed:
			return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.addr, Err: net.ErrClosed}
		default:
		}
		n, wq, err := l.ep.Accept(nil)
		if _, ok := err.(*tcpip.ErrWouldBlock); ok {
			select {
			case <-l.closed:
			case <-notify:
			}
			continue
		}
		if err != nil {
			return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.addr, Err: tcpipErr(err)}
		}
		return newConn(wq, n), nil
	}
}

// Close implements net.Listener: pending Accepts return, and connections not yet
// accepted are reset.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() {
		close(l.closed)
		l.ep.Close()
	})
	return nil
}

// Addr implements net.Listener.
func (l *Listener) Addr() net.Addr { return l.addr }

// Conn is a gVisor TCP connection: a gonet.TCPConn (net.Conn with deadlines and
// CloseWrite) that also reports its TCP state.
type Conn struct {
	*gonet.TCPConn
	ep tcpip.Endpoint
}

var _ net.Conn = (*Conn)(nil)

func newConn(wq *waiter.Queue, ep tcpip.Endpoint) *Conn {
	return &Conn{TCPConn: gonet.NewTCPConn(wq, ep), ep: ep}
}

// Info is a TCP_INFO-like snapshot of a connection, from gVisor's
// tcpip.TCPInfoOption.
type Info struct {
	State          tcpip.EndpointState
	RTO            time.Duration // current, backoff included
	SRTT, RTTVar   time.Duration
	Cwnd, Ssthresh uint32 // segments
	CcState        tcpip.CongestionControlState
	ReorderSeen    bool
	// Counters of this connection.
	Timeouts        uint64 // RTO expirations
	Retransmits     uint64 // segments resent, for any reason
	FastRetransmits uint64
}

// Info returns the connection's TCP state. It takes the endpoint's lock: do not
// call it from code that runs while gVisor sends a packet (a device's
// WritePacket).
func (c *Conn) Info() Info {
	var o tcpip.TCPInfoOption
	if err := c.ep.GetSockOpt(&o); err != nil {
		return Info{}
	}
	i := Info{
		State: o.State, RTO: o.RTO, SRTT: o.RTT, RTTVar: o.RTTVar,
		Cwnd: o.SndCwnd, Ssthresh: o.SndSsthresh, CcState: o.CcState, ReorderSeen: o.ReorderSeen,
	}
	if st, ok := c.ep.Stats().(*tcp.Stats); ok {
		i.Timeouts = st.SendErrors.Timeouts.Value()
		i.Retransmits = st.SendErrors.Retransmits.Value()
		i.FastRetransmits = st.SendErrors.FastRetransmit.Value()
	}
	return i
}

// SetKeepAliveConfig configures keepalive probes like net.TCPConn's: zero Idle,
// Interval or Count keep the current value.
func (c *Conn) SetKeepAliveConfig(cfg net.KeepAliveConfig) error {
	err := setKeepAlive(c.ep, KeepAlive{Enable: cfg.Enable, Idle: cfg.Idle, Interval: cfg.Interval, Count: cfg.Count})
	if err != nil {
		return &net.OpError{Op: "set", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	}
	return nil
}

// Abort resets the connection at once (RST), as SO_LINGER 0 would.
func (c *Conn) Abort() error {
	c.ep.Abort()
	return nil
}
