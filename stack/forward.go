package stack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/tcpip"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"
	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/timer"
)

// Forwarding: the stack takes TCP connections and UDP flows to ANY
// destination that arrives on the device, not only to its own addresses,
// and hands each new flow to the application with its original
// destination, as tun2socks, sing-tun and Tailscale do with gVisor's
// tcp.Forwarder and udp.Forwarder. The stack's own addresses keep
// precedence: what is sent to them goes to its listeners and sockets (or
// gets a RST, an ICMP port unreachable) as without forwarding.
//
// A TCP flow is a SYN that no connection and no local listener takes. It
// becomes a TCPRequest, pending until the application decides: Accept
// sends the SYN-ACK (the handshake completes after the decision, so a relay
// can dial the destination first and accept only if it answered), Reject
// answers with a RST, an ICMP destination unreachable, or nothing. With
// ForwardConfig.HandshakeFirst the SYN-ACK goes at once instead, as gVisor's
// users do when they call CreateEndpoint before dialling. Pending flows
// (undecided, and half-open after Accept) are bounded in total and per
// source, and each lives at most PendingTimeout on the wheel, so that
// SYNs to black-holed destinations, whose relays wait for a dial that never
// completes, cannot hold the slots the other flows need: beyond a bound
// a new SYN is dropped and counted (the client retries), and an expired
// flow is rejected. The accepted connection is a *Conn like any other,
// whose LocalAddr is the original destination, on the same wheel timers.
//
// A UDP flow is a 5-tuple: its first datagram makes a UDPFlow, a net.Conn
// whose LocalAddr is the original destination and whose writes are sent
// from it; a flow that carried nothing for UDPIdleTimeout expires on the
// wheel, and the number of flows is bounded.
//
// IPv6 flows need the stack to speak IPv6 (Config.Addr6). The stack keeps
// one address per IP version: forwarding is how it answers for others.
// Forwarding is not in flight recordings yet: Forward fails on a stack
// that records (Config.Record).

// Defaults of ForwardConfig.
const (
	DefaultMaxPending          = 4096
	DefaultMaxPendingPerSource = 2048
	DefaultPendingTimeout      = 30 * time.Second
	DefaultMaxUDPFlows         = 4096
	DefaultUDPIdleTimeout      = 60 * time.Second
)

// Reject says how a TCP flow is refused (TCPRequest.Reject).
type Reject uint8

const (
	// RejectReset answers the SYN with a RST: the client's connect fails
	// with "connection refused" at once.
	RejectReset Reject = iota + 1
	// RejectUnreachable answers it with an ICMP destination unreachable,
	// host unreachable (ICMPv6: address unreachable), from the original
	// destination, within the stack's ICMP rate limit: a Linux client's
	// connect fails with EHOSTUNREACH at once.
	RejectUnreachable
	// RejectDrop answers nothing: the client retransmits its SYN, which
	// is a new request.
	RejectDrop
)

// ForwardConfig configures forwarding (Stack.Forward).
type ForwardConfig struct {
	// TCP is called, on a goroutine of its own, with each new TCP flow to
	// an address that is not the stack's; it must Accept or Reject it (an
	// undecided flow ends at PendingTimeout; with HandshakeFirst, an
	// established one not taken stays until the stack closes).
	// Nil: TCP is not forwarded (such SYNs get a RST).
	TCP func(*TCPRequest)
	// HandshakeFirst completes the client's handshake before the decision:
	// the SYN-ACK goes at once, Accept returns the connection when it is
	// established, and Reject resets it.
	HandshakeFirst bool
	// MaxPending bounds the TCP flows not yet established (undecided, or
	// half-open after Accept); MaxPendingPerSource bounds them per client
	// address. A SYN beyond either is dropped and counted. Zero means
	// DefaultMaxPending, DefaultMaxPendingPerSource.
	MaxPending, MaxPendingPerSource int
	// PendingTimeout bounds how long a TCP flow stays pending: then an
	// undecided one is rejected as TimeoutReject says, a half-open one is
	// reset, and Accept or Reject fails with an error matching
	// os.ErrDeadlineExceeded. Zero means DefaultPendingTimeout.
	PendingTimeout time.Duration
	// TimeoutReject is how an undecided flow is rejected at its timeout;
	// zero means RejectUnreachable.
	TimeoutReject Reject
	// UDP is called, on a goroutine of its own, with each new UDP flow to
	// an address that is not the stack's. Nil: UDP is not forwarded (such
	// datagrams are dropped, counted in Drops.UDPNoPort).
	UDP func(*UDPFlow)
	// MaxUDPFlows bounds the UDP flows: the first datagram of one more is
	// dropped and counted. Zero means DefaultMaxUDPFlows.
	MaxUDPFlows int
	// UDPIdleTimeout ends a UDP flow that has carried no datagram either
	// way for this long. Zero means DefaultUDPIdleTimeout.
	UDPIdleTimeout time.Duration
}

// ForwardStats counts the forwarded flows (Stats.Forward).
type ForwardStats struct {
	TCPRequests       uint64 // new TCP flows handed to ForwardConfig.TCP
	TCPAccepted       uint64 // established
	TCPRejectedReset  uint64 // rejected with a RST
	TCPRejectedICMP   uint64 // rejected with an ICMP unreachable (those the rate limit held back are in Drops.ICMPRateLimited)
	TCPRejectedDrop   uint64 // rejected silently
	TCPTimeouts       uint64 // pending flows that PendingTimeout ended (also in the Rejected counter of TimeoutReject when undecided)
	TCPHandshakeFails uint64 // accepted flows whose handshake did not complete (the client reset it, the SYN-ACK retries ran out)
	TCPClientResets   uint64 // undecided flows the client reset
	DuplicateSYNs     uint64 // SYN retransmissions of an undecided flow (dropped: the decision answers them)
	TimeWaitReused    uint64 // SYNs that replaced a forwarded connection in TIME-WAIT (RFC 6191): new flows
	DropsPending      uint64 // SYNs dropped: MaxPending flows were pending
	DropsPerSource    uint64 // SYNs dropped: MaxPendingPerSource flows of that source were pending
	DropsUndecided    uint64 // other segments of an undecided flow, dropped
	Pending           int    // TCP flows pending now
	UDPFlows          uint64 // new UDP flows handed to ForwardConfig.UDP
	UDPExpired        uint64 // flows that UDPIdleTimeout ended
	UDPIn, UDPOut     uint64 // datagrams delivered to flows, and sent from them
	DropsUDPFlows     uint64 // datagrams dropped: MaxUDPFlows flows were open
	DropsUDPQueue     uint64 // datagrams dropped: the flow's queue was full
	UDPActive         int    // UDP flows open now
	// Listen counts the forwarded handshakes (the half-open table behind
	// Accept).
	Listen tcp.ListenerStats
}

// ErrForwarding is wrapped by Forward's errors.
var ErrForwarding = errors.New("stack: forwarding")

// forwarder is the stack's forwarding state. Loop only.
type forwarder struct {
	s         *Stack
	cfg       ForwardConfig
	tl        *tcp.Listener // the half-open connections of accepted flows
	pending   map[tcp.ID]*TCPRequest
	perSource map[netip.Addr]int
	flows     map[flowKey]*UDPFlow
	stats     ForwardStats
	outDirect atomic.Uint64 // UDPOut of UDPFlow.Write's direct path (forward_udp.go)
}

// Forward turns forwarding on (see above). It fails if forwarding is on
// already, if cfg has a negative bound, or if the stack records.
func (s *Stack) Forward(cfg ForwardConfig) error {
	if cfg.MaxPending < 0 || cfg.MaxPendingPerSource < 0 || cfg.PendingTimeout < 0 || cfg.MaxUDPFlows < 0 || cfg.UDPIdleTimeout < 0 || cfg.TimeoutReject > RejectDrop {
		return fmt.Errorf("%w: negative bound or unknown TimeoutReject in %+v", ErrForwarding, cfg)
	}
	if s.recw != nil {
		return fmt.Errorf("%w: not with a flight recording (Config.Record)", ErrForwarding)
	}
	if s.grp != nil {
		return fmt.Errorf("%w: %w: not with several loops (Config.Loops)", ErrForwarding, ErrConfig)
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&cfg.MaxPending, DefaultMaxPending)
	def(&cfg.MaxPendingPerSource, DefaultMaxPendingPerSource)
	def(&cfg.MaxUDPFlows, DefaultMaxUDPFlows)
	if cfg.PendingTimeout == 0 {
		cfg.PendingTimeout = DefaultPendingTimeout
	}
	if cfg.UDPIdleTimeout == 0 {
		cfg.UDPIdleTimeout = DefaultUDPIdleTimeout
	}
	if cfg.TimeoutReject == 0 {
		cfg.TimeoutReject = RejectUnreachable
	}
	f := &forwarder{s: s, cfg: cfg, pending: make(map[tcp.ID]*TCPRequest), perSource: make(map[netip.Addr]int), flows: make(map[flowKey]*UDPFlow)}
	var ferr error
	if s.do(func() {
		if s.fwd != nil {
			ferr = fmt.Errorf("%w: already on", ErrForwarding)
			return
		}
		f.tl, ferr = tcp.NewListener(s.timers(), s.out(), tcp.ListenerConfig{
			Backlog:           cfg.MaxPending, // never reached: pending counts them
			DisableSynCookies: true,
			Endpoint:          s.cfg.TCP,
			Spares:            &s.epSpares, // timewait.go
			Accept:            f.established,
			Dropped:           f.dropped,
		})
		if ferr == nil {
			s.fwd = f
		}
	}) != nil {
		return net.ErrClosed
	}
	return ferr
}

// forwards reports whether the IP layer takes a packet to dst, which is
// not the stack's address, for forwarding: only with forwarding on, and
// only to a unicast address that is not link-local (nor a broadcast,
// multicast, unspecified, loopback or class E one).
func (s *Stack) forwards(dst netip.Addr) bool {
	if s.fwd == nil || dst.IsMulticast() || dst.IsUnspecified() || dst.IsLoopback() || dst.IsLinkLocalUnicast() || dst == s.subnetBroadcast {
		return false
	}
	if dst.Is4() {
		return dst != limitedBroadcast && dst.As4()[0]&0xf0 != 240
	}
	return !dst.Is4In6()
}

// TCPRequest is a new TCP flow to a forwarded destination, waiting for
// the application's decision: Accept or Reject, once.
type TCPRequest struct {
	f  *forwarder
	id tcp.ID
	// Loop only:
	syn   []byte // the latest SYN's TCP segment, header and options
	state reqState
	err   error // why it ended, when it ended without a Conn
	taken bool  // Accept was called
	entry timer.Entry

	res chan reqResult // the outcome of an Accept, once
}

type reqState uint8

const (
	reqUndecided reqState = iota
	reqAccepted           // the SYN-ACK is out: half-open
	reqDone               // established, rejected, timed out or gone
)

type reqResult struct {
	c   *Conn
	err error
}

// Source is the client's address and port.
func (r *TCPRequest) Source() netip.AddrPort { return r.id.Remote }

// Destination is the address and port the client's SYN was sent to.
func (r *TCPRequest) Destination() netip.AddrPort { return r.id.Local }

// Accept completes the handshake (sends the SYN-ACK, unless
// HandshakeFirst sent it already) and waits until the client's ACK
// establishes the connection, whose LocalAddr is the original
// destination. It fails if the request was decided already, timed out
// (os.ErrDeadlineExceeded), or the client reset it (ECONNRESET) or never
// answered.
func (r *TCPRequest) Accept() (*Conn, error) {
	var err error
	if r.f.s.do(func() { err = r.f.accept(r) }) != nil {
		return nil, r.opErr(net.ErrClosed)
	}
	if err != nil {
		return nil, r.opErr(err)
	}
	select {
	case res := <-r.res:
		if res.err != nil {
			return nil, r.opErr(res.err)
		}
		return res.c, nil
	case <-r.f.s.done:
		return nil, r.opErr(net.ErrClosed)
	}
}

// Reject refuses the flow as how says; with HandshakeFirst (or after
// Accept) the half-open connection is reset instead. It fails if the
// request was decided already or timed out.
func (r *TCPRequest) Reject(how Reject) error {
	if how < RejectReset || how > RejectDrop {
		return r.opErr(fmt.Errorf("unknown Reject %d", how))
	}
	var err error
	if r.f.s.do(func() { err = r.f.reject(r, how) }) != nil {
		return r.opErr(net.ErrClosed)
	}
	if err != nil {
		return r.opErr(err)
	}
	return nil
}

func (r *TCPRequest) opErr(err error) error {
	return &net.OpError{Op: "forward", Net: "tcp", Source: net.TCPAddrFromAddrPort(r.id.Local), Addr: net.TCPAddrFromAddrPort(r.id.Remote), Err: err}
}

// Errors of a request.
var (
	errDecided        = errors.New("flow decided already")
	errPendingTimeout = fmt.Errorf("flow not established within the pending timeout: %w", os.ErrDeadlineExceeded)
	errRejected       = errors.New("flow rejected")
	errClientReset    = &connError{err: errors.New("the client reset the flow"), errno: syscall.ECONNRESET}
)

// segment takes a TCP segment to an address that is not the stack's and
// that no connection took: a new flow's SYN, or a segment of a pending
// flow. It reports false for what it does not take (the caller answers it
// as a closed port's), and for segments to the stack's own addresses.
func (f *forwarder) segment(id tcp.ID, seg *tcp.Segment, raw []byte) bool {
	if f.cfg.TCP == nil || f.s.isLocal(id.Local.Addr()) {
		return false
	}
	const ctl = tcp.FlagSYN | tcp.FlagACK | tcp.FlagRST | tcp.FlagFIN
	if r := f.pending[id]; r != nil {
		switch {
		case r.state == reqAccepted:
			f.tl.HandleSegment(id, seg)
		case seg.Flags&ctl == tcp.FlagSYN:
			r.syn = append(r.syn[:0], raw...)
			f.stats.DuplicateSYNs++
		case seg.Flags&tcp.FlagRST != 0:
			f.stats.TCPClientResets++
			f.finish(r, nil, errClientReset)
		default:
			f.stats.DropsUndecided++
		}
		return true
	}
	if seg.Flags&ctl != tcp.FlagSYN {
		return false
	}
	src := id.Remote.Addr()
	switch {
	case len(f.pending) >= f.cfg.MaxPending:
		f.stats.DropsPending++
		return true
	case f.perSource[src] >= f.cfg.MaxPendingPerSource:
		f.stats.DropsPerSource++
		return true
	}
	r := &TCPRequest{f: f, id: id, syn: append([]byte(nil), raw...), res: make(chan reqResult, 1)}
	r.entry.Init(func() { f.timeout(r) })
	f.s.wheel.Start(&r.entry, f.cfg.PendingTimeout)
	f.pending[id] = r
	f.perSource[src]++
	f.stats.TCPRequests++
	if f.cfg.HandshakeFirst {
		f.sendSYNACK(r)
	}
	go f.cfg.TCP(r)
	return true
}

// timeWaitSYN takes a SYN that the demultiplexer found a forwarded
// connection for (an endpoint or a TIME-WAIT record): if it is in
// TIME-WAIT and the SYN may open a new incarnation (RFC 6191, as a
// listener's ReuseTimeWait), replace closes the old one and reports true,
// and the SYN is a new flow's. It reports whether it took the SYN.
func (f *forwarder) timeWaitSYN(id tcp.ID, seg *tcp.Segment, raw []byte, replace func() bool) bool {
	if f.s.isLocal(id.Local.Addr()) || !replace() {
		return false
	}
	f.stats.TimeWaitReused++
	return f.segment(id, seg, raw) // true: a SYN alone, to another address, with a TCP handler (the old one was a flow)
}

// sendSYNACK hands the request's latest SYN to the half-open table, which
// answers it with a SYN-ACK and retransmits that on the wheel.
func (f *forwarder) sendSYNACK(r *TCPRequest) {
	r.state = reqAccepted
	seg, err := tcp.ParseSegment(r.syn)
	if err != nil { // parsed when it came: cannot happen
		f.finish(r, nil, err)
		return
	}
	f.tl.HandleSegment(r.id, &seg)
}

// accept is Accept's part on the loop.
func (f *forwarder) accept(r *TCPRequest) error {
	switch {
	case r.taken, r.err == errRejected:
		return errDecided
	case r.state == reqDone && r.err != nil:
		return r.err // HandshakeFirst: the handshake failed before Accept
	case r.state == reqUndecided:
		f.sendSYNACK(r)
	}
	r.taken = true // its outcome is in r.res, or will be
	return nil
}

// reject is Reject's part on the loop.
func (f *forwarder) reject(r *TCPRequest, how Reject) error {
	switch r.state {
	case reqDone:
		if r.err == nil && !r.taken { // HandshakeFirst: established, not taken
			r.taken = true
			f.stats.TCPRejectedReset++
			if res := <-r.res; res.c != nil {
				res.c.abort()
			}
			return nil
		}
		if r.err != nil && r.err != errRejected {
			return r.err
		}
		return errDecided
	case reqAccepted:
		r.err = errRejected
		f.stats.TCPRejectedReset++
		if !f.tl.Abort(r.id) { // its RST; dropped finishes r
			f.finish(r, nil, errRejected)
		}
		return nil
	}
	f.refuse(r, how)
	f.finish(r, nil, errRejected)
	return nil
}

// refuse answers an undecided request's SYN as how says.
func (f *forwarder) refuse(r *TCPRequest, how Reject) {
	seg, err := tcp.ParseSegment(r.syn)
	switch {
	case err != nil:
	case how == RejectReset:
		f.stats.TCPRejectedReset++
		if rst, ok := tcp.ResetFor(&seg); ok {
			f.s.sendSegment(r.id, &rst)
		}
	case how == RejectUnreachable:
		f.stats.TCPRejectedICMP++
		f.s.hostUnreachable(r.id, r.syn)
	default:
		f.stats.TCPRejectedDrop++
	}
}

// timeout ends a request that is still pending after PendingTimeout.
func (f *forwarder) timeout(r *TCPRequest) {
	f.stats.TCPTimeouts++
	switch r.state {
	case reqUndecided:
		f.refuse(r, f.cfg.TimeoutReject)
		f.finish(r, nil, errPendingTimeout)
	case reqAccepted:
		r.err = errPendingTimeout
		if !f.tl.Abort(r.id) {
			f.finish(r, nil, errPendingTimeout)
		}
	}
}

// established is the half-open table's Accept: the client's ACK completed
// an accepted flow's handshake.
func (f *forwarder) established(ep *tcp.Endpoint) bool {
	r := f.pending[ep.ID()]
	if r == nil || r.state != reqAccepted {
		return false
	}
	c := newConn(f.s, ep, true)
	c.relayed = true
	f.s.register(c)
	ep.SetNotifier((*connNotify)(c))
	f.stats.TCPAccepted++
	f.finish(r, c, nil)
	return true
}

// dropped is the half-open table's Dropped: an accepted flow's handshake
// ended without a connection.
func (f *forwarder) dropped(id tcp.ID) {
	r := f.pending[id]
	if r == nil || r.state != reqAccepted {
		return
	}
	err := r.err
	if err == nil {
		f.stats.TCPHandshakeFails++
		err = errClientReset
	}
	f.finish(r, nil, err)
}

// finish ends a pending request with its connection or its error.
func (f *forwarder) finish(r *TCPRequest, c *Conn, err error) {
	if r.state == reqDone {
		return
	}
	r.state, r.err = reqDone, err
	r.entry.Stop()
	if f.pending[r.id] == r {
		delete(f.pending, r.id)
		src := r.id.Remote.Addr()
		if f.perSource[src]--; f.perSource[src] <= 0 {
			delete(f.perSource, src)
		}
	}
	r.syn = nil
	r.res <- reqResult{c: c, err: err}
}

// close ends everything forwarding holds, when the stack closes.
func (f *forwarder) close() {
	f.tl.Close()
	for _, r := range f.pending {
		f.finish(r, nil, net.ErrClosed)
	}
	for _, fl := range f.flows {
		fl.end(net.ErrClosed)
	}
}

// snapshot is Stats.Forward.
func (f *forwarder) snapshot() ForwardStats {
	st := f.stats
	st.UDPOut += f.outDirect.Load()
	st.Pending = len(f.pending)
	st.UDPActive = len(f.flows)
	st.Listen = f.tl.Stats()
	return st
}

// addr4 is a as gVisor's header package takes it.
func addr4(a netip.Addr) tcpip.Address { return tcpip.AddrFrom4(a.As4()) }

// hostUnreachable answers the SYN syn of flow id with an ICMP destination
// unreachable from the original destination: host unreachable (RFC 792,
// code 1), or ICMPv6's address unreachable (RFC 4443 3.1, code 3). The
// quote is the SYN's IP header as rebuilt from the flow's addresses (its
// TTL, ID and options are not kept), and the SYN's first bytes: what a
// client matches the error to its connection by.
func (s *Stack) hostUnreachable(id tcp.ID, syn []byte) {
	src, dst := id.Remote.Addr(), id.Local.Addr()
	if dst.Is6() {
		pkt := make([]byte, ipv6HeaderLen+len(syn))
		copy(pkt[ipv6HeaderLen:], syn)
		putIPv6Header(pkt, src, dst, protoTCP, s.cfg.TTL)
		s.icmp6Error(header.ICMPv6DstUnreachable, header.ICMPv6AddressUnreachable, 0, pkt)
		return
	}
	if !s.icmpLimit.allow(s.wheel.Now(), src) {
		s.counters.Drops.ICMPRateLimited++
		return
	}
	quote := min(len(syn), 8)
	n := ipv4HeaderLen + header.ICMPv4MinimumSize + ipv4HeaderLen + quote
	out := s.obuf[:n]
	m := out[ipv4HeaderLen:]
	clear(m[:header.ICMPv4MinimumSize])
	m[0], m[1] = byte(header.ICMPv4DstUnreachable), byte(header.ICMPv4HostUnreachable)
	inner := m[header.ICMPv4MinimumSize:]
	copy(inner[ipv4HeaderLen:], syn[:quote])
	s.ipID++
	header.IPv4(inner).Encode(&header.IPv4Fields{TotalLength: uint16(ipv4HeaderLen + len(syn)), ID: s.ipID, TTL: s.cfg.TTL, Protocol: protoTCP,
		SrcAddr: addr4(src), DstAddr: addr4(dst)})
	header.IPv4(inner).SetChecksum(^header.IPv4(inner).CalculateChecksum())
	binary.BigEndian.PutUint16(m[2:], ^checksum.Checksum(m, 0))
	s.writeIPv4(out, dst, src, protoICMP)
}
