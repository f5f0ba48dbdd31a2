package stack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"
	"github.com/tcpwheel/tcpwheel/stack/record"
	"github.com/tcpwheel/tcpwheel/tcp"
)

// UDP (RFC 768). A UDPConn is a socket on one local port (UDP's port space
// is its own, apart from TCP's): unconnected (ListenUDP, ListenPacket), it
// takes datagrams from anyone; connected (DialUDP), only from its remote
// address, and a datagram from elsewhere finds no socket, as on Linux. The
// loop owns the demultiplexer (Stack.udp) and sends; a socket's receive
// queue is guarded by its own mutex, so that reads need no trip to the loop:
// receiving changes nothing the stack sends, so the flight recorder need not
// see it. Opening and closing, which do change what the stack sends (an ICMP
// port unreachable for a closed port), go through the loop and are recorded
// (UDPOpen, UDPDial, UDPClose). Sending goes straight to the device from the
// caller's goroutine (udpsend.go), except on a recording or manual stack,
// where it goes through the loop and is recorded (UDPSend).

const (
	udpHeaderLen = header.UDPMinimumSize
	protoUDP     = uint8(header.UDPProtocolNumber)
	// udpQueueLen bounds each socket's receive queue, in datagrams (each
	// at most the MTU): what arrives while it is full is dropped and counted
	// (Drops.UDPQueueFull), as a full SO_RCVBUF drops on Linux.
	udpQueueLen = 256
)

// UDPConn is a UDP socket of the stack. It implements net.PacketConn and
// net.Conn (Read and Write need a connected socket, from DialUDP); its
// methods are safe for concurrent use.
type UDPConn struct {
	s      *Stack
	port   uint16
	net    uint8          // the IP versions it takes: netBoth, net4 or net6 (ipv6.go)
	bound  netip.Addr     // the one address of the stack it takes, or the zero Addr: any
	remote netip.AddrPort // connected: the only peer; else the zero AddrPort
	laddr  *net.UDPAddr
	raddr  net.Addr // a *net.UDPAddr when connected, else nil
	rd, wd *deadline

	ipID atomic.Uint32 // the IPv4 ID of the direct path's datagrams (udpsend.go)

	mu       sync.Mutex
	q        dgramQueue    // guarded by mu: the receive queue (udpqueue.go)
	refused  bool          // guarded by mu: a port unreachable came for a connected socket
	readable chan struct{} // a pending wakeup: the queue was empty and is not

	gone      bool // loop only: closed, out of the demultiplexer
	closeOnce sync.Once
	closed    chan struct{}
}

var (
	_ net.PacketConn = (*UDPConn)(nil)
	_ net.Conn       = (*UDPConn)(nil)
)

func (s *Stack) newUDPConn() *UDPConn {
	u := &UDPConn{s: s, rd: newDeadline(), wd: newDeadline(), readable: make(chan struct{}, 1), closed: make(chan struct{})}
	u.ipID.Store(rand.Uint32())
	return u
}

// ListenUDP opens an unconnected UDP socket on the stack's addresses.
// network must be "udp" (IPv4 and IPv6), "udp4" or "udp6"; address is
// ":port" (every address of those versions; it sends from the stack's
// Addr or Addr6, as a Linux socket on INADDR_ANY sends from its route's
// source) or "addr:port" with one of the stack's own addresses (which
// restricts it to that address, and it sends from it), or port 0 for an
// ephemeral port. A port has one socket, bound or not.
func (s *Stack) ListenUDP(network, address string) (*UDPConn, error) {
	fail := func(err error) error {
		return &net.OpError{Op: "listen", Net: network, Err: err}
	}
	n, port, bound, err := s.listenAddr(network, "udp", address)
	if err != nil {
		return nil, fail(err)
	}
	u, err := s.openUDP(port, n, bound, netip.AddrPort{})
	if err != nil {
		return nil, fail(err)
	}
	return u, nil
}

// ListenPacket is ListenUDP returning net.PacketConn, as net.ListenPacket
// does; the net.PacketConn is always a *UDPConn.
func (s *Stack) ListenPacket(network, address string) (net.PacketConn, error) {
	u, err := s.ListenUDP(network, address)
	if err != nil {
		return nil, err // not a nil *UDPConn inside a non-nil net.PacketConn
	}
	return u, nil
}

// DialUDP opens a UDP socket on an ephemeral port connected to address
// ("ip:port", IPv4 or IPv6; no name resolution), as net.DialUDP does: it
// sends nothing, takes datagrams from address only, and its Read and Write
// need no address. network must be "udp", "udp4" or "udp6". DialContext
// with "udp" returns it as a net.Conn.
func (s *Stack) DialUDP(network, address string) (*UDPConn, error) {
	fail := func(raddr net.Addr, err error) error {
		return &net.OpError{Op: "dial", Net: network, Addr: raddr, Err: err}
	}
	n, ok := netOf(network, "udp")
	if !ok {
		return nil, fail(nil, net.UnknownNetworkError(network))
	}
	ap, err := parseRemote(address)
	if err == nil {
		err = s.checkRemote(n, ap)
	}
	if err != nil {
		if !ap.IsValid() {
			return nil, fail(nil, err)
		}
		return nil, fail(net.UDPAddrFromAddrPort(ap), err)
	}
	u, err := s.openUDP(0, n, netip.Addr{}, ap)
	if err != nil {
		return nil, fail(net.UDPAddrFromAddrPort(ap), err)
	}
	return u, nil
}

// openUDP opens a socket on port (0: an ephemeral one) for the IP versions
// n, bound to the stack's address bound if it is valid, connected to remote
// if it is valid.
func (s *Stack) openUDP(port uint16, n uint8, bound netip.Addr, remote netip.AddrPort) (*UDPConn, error) {
	u := s.newUDPConn()
	u.net, u.bound = n, bound
	var oerr error
	if s.do(func() {
		p := port
		if p == 0 {
			var ok bool
			if p, ok = s.ephemeralUDPPort(); !ok {
				oerr = fmt.Errorf("no free UDP port")
				return
			}
		}
		oerr = s.udpOpen(u, p, remote)
	}) != nil {
		return nil, net.ErrClosed
	}
	if oerr != nil {
		return nil, oerr
	}
	return u, nil
}

// ephemeralUDPPort picks a free UDP port from the range TCP's come from
// (pickPort). It runs on the loop.
func (s *Stack) ephemeralUDPPort() (uint16, bool) {
	return s.pickPort(func(p uint16) bool { _, ok := s.udp[p]; return !ok })
}

// udpOpen is the loop's part of opening u on port p, connected to remote if
// it is valid: recorded (UDPOpen or UDPDial) before it runs.
func (s *Stack) udpOpen(u *UDPConn, p uint16, remote netip.AddrPort) error {
	if _, ok := s.udp[p]; ok {
		return fmt.Errorf("UDP port %d: address already in use", p)
	}
	local := netip.AddrPortFrom(s.cfg.Addr, p)
	switch {
	case u.bound.IsValid():
		local = netip.AddrPortFrom(u.bound, p)
		if s.rec != nil {
			s.hasSendAt = false
			s.rec.Event(&record.Event{Kind: record.UDPBind, T: s.wheel.Now(), Port: p, Data: u.bound.AsSlice()})
		}
	case remote.IsValid():
		local = netip.AddrPortFrom(s.localFor(remote.Addr()), p)
		s.note(record.UDPDial, tcp.ID{Local: local, Remote: remote}, 0)
		u.raddr = net.UDPAddrFromAddrPort(remote)
	case u.net != netBoth:
		if u.net == net6 {
			local = netip.AddrPortFrom(s.cfg.Addr6, p)
		}
		if s.rec != nil {
			s.hasSendAt = false
			s.rec.Event(&record.Event{Kind: record.UDPOpenNet, T: s.wheel.Now(), Port: p, N: int64(u.net)})
		}
	default:
		s.notePort(record.UDPOpen, p, nil)
	}
	u.port, u.remote, u.laddr = p, remote, net.UDPAddrFromAddrPort(local)
	s.udp[p] = u
	return nil
}

// handleUDP checks a datagram (RFC 768) and queues it on the socket of its
// port, or answers a datagram to a closed port with an ICMP port
// unreachable. ipHdr is the packet's IP header (IPv6: and extension
// headers), for the ICMP's quote.
func (s *Stack) handleUDP(src, dst netip.Addr, ipHdr, b []byte) {
	if s.grp != nil && s.shard != 0 { // the sockets are the first loop's (loops.go)
		hl := len(ipHdr)
		s.handOffFirst(append(ipHdr[:hl:hl], b...), func(o *Stack, p []byte) { o.handleUDP(src, dst, p[:hl], p[hl:]) })
		return
	}
	d := &s.counters.Drops
	if len(b) < udpHeaderLen {
		d.BadUDPHeader++
		return
	}
	u := header.UDP(b)
	n := int(u.Length())
	if n < udpHeaderLen || n > len(b) {
		d.BadUDPLength++
		return
	}
	b, u = b[:n], u[:n] // the rest is padding, as Linux trims it
	// A zero checksum is none: the sender did not compute one (RFC 768;
	// allowed over IPv4).
	if !s.skipChecksum && !udpChecksumOK(src, dst, b) {
		d.BadUDPChecksum++
		return
	}
	from := netip.AddrPortFrom(src, u.SourcePort())
	if s.fwd != nil && !s.isLocal(dst) { // forward.go
		s.fwd.datagram(from, netip.AddrPortFrom(dst, u.DestinationPort()), ipHdr, b)
		return
	}
	if c := s.udp[u.DestinationPort()]; c != nil && (!c.remote.IsValid() && takes(c.net, dst) || c.remote == from) && (!c.bound.IsValid() || c.bound == dst) {
		if !c.deliver(from, u.Payload()) {
			d.UDPQueueFull++
			return
		}
		s.counters.DatagramsIn++
		return
	}
	d.UDPNoPort++
	s.portUnreachable(src, dst, ipHdr, b)
}

// deliver queues a datagram for the application, unless the queue is full.
// It runs on the loop.
func (u *UDPConn) deliver(from netip.AddrPort, p []byte) bool {
	d := u.s.newDatagram(from, p) // udpqueue.go
	u.mu.Lock()
	if !u.q.push(d) {
		u.mu.Unlock()
		u.s.free(d)
		return false
	}
	first := u.q.n == 1
	u.mu.Unlock()
	if first {
		wake(u.readable) // a reader that found it empty; take wakes the next
		u.s.parkForWoken()
	}
	return true
}

// maxUDPPayload is the largest datagram payload the stack sends to a, as
// Linux's: 65,507 bytes over IPv4, 65,527 over IPv6; one larger than the
// MTU goes in fragments (frag.go).
func (s *Stack) maxUDPPayload(a netip.Addr) int {
	if a.Is4() {
		return maxDatagram - ipv4HeaderLen - udpHeaderLen
	}
	return maxDatagram - udpHeaderLen
}

// portUnreachable answers a UDP datagram to a closed port with an ICMP
// destination unreachable, code 3 (RFC 792; RFC 1122 3.2.2.1, 4.1.3.1),
// quoting its IP header and first 8 bytes. Never for a broadcast or
// multicast destination or a martian source (RFC 1122 3.2.2), and at most
// as often as the ICMP rate limit (icmpLimiter) lets it.
func (s *Stack) portUnreachable(src, dst netip.Addr, ipHdr, udp []byte) {
	if !s.isLocal(dst) || s.martianSource(src) != nil {
		return // for another address (a broadcast, a multicast group), or from no one
	}
	s.sendPortUnreachable(src, dst, ipHdr, udp)
}

// sendPortUnreachable sends src the ICMP port unreachable for the datagram
// udp (ipHdr its IP header) that src sent to dst, from dst, as the
// rate limit allows.
func (s *Stack) sendPortUnreachable(src, dst netip.Addr, ipHdr, udp []byte) {
	if dst.Is6() {
		s.portUnreachable6(ipHdr, udp) // icmp6.go
		return
	}
	if !s.icmpLimit.allow(s.wheel.Now(), src) {
		s.counters.Drops.ICMPRateLimited++
		return
	}
	quote := len(ipHdr) + min(len(udp), 8)
	n := ipv4HeaderLen + header.ICMPv4MinimumSize + quote
	if n > len(s.obuf) {
		s.counters.Drops.TooBig++
		return
	}
	out := s.obuf[:n]
	m := out[ipv4HeaderLen:]
	clear(m[:header.ICMPv4MinimumSize])
	m[0], m[1] = byte(header.ICMPv4DstUnreachable), byte(header.ICMPv4PortUnreachable)
	copy(m[header.ICMPv4MinimumSize:], ipHdr)
	copy(m[header.ICMPv4MinimumSize+len(ipHdr):], udp[:quote-len(ipHdr)])
	binary.BigEndian.PutUint16(m[2:], ^checksum.Checksum(m, 0))
	s.counters.PortUnreachables++
	s.writeIPv4(out, dst, src, protoICMP)
}

// udpRefused takes the quote of an ICMP port unreachable (the IP header
// and first 8 bytes of a datagram we sent): if it names a connected
// socket's own flow, the socket's next read fails with ECONNREFUSED, once,
// as on Linux (RFC 1122 4.1.3.3: UDP passes ICMP errors up). It reports
// whether it did.
func (s *Stack) udpRefused(quote []byte) bool {
	if len(quote) < ipv4HeaderLen || quote[0]>>4 != 4 {
		return false
	}
	ip := header.IPv4(quote)
	hl := int(ip.HeaderLength())
	if hl < ipv4HeaderLen || len(quote) < hl+udpHeaderLen || ip.Protocol() != protoUDP ||
		!s.isLocal(netip.AddrFrom4(ip.SourceAddress().As4())) {
		return false
	}
	u := header.UDP(quote[hl:])
	return s.refuseUDP(u.SourcePort(), netip.AddrPortFrom(netip.AddrFrom4(ip.DestinationAddress().As4()), u.DestinationPort()))
}

// refuseUDP fails the next read of the socket on port if it is connected
// to `to`, and reports whether it did.
func (s *Stack) refuseUDP(port uint16, to netip.AddrPort) bool {
	c := s.udp[port]
	if c == nil || !c.remote.IsValid() || c.remote != to {
		return false
	}
	c.mu.Lock()
	c.refused = true
	c.mu.Unlock()
	wake(c.readable)
	s.counters.UnreachablesIn++
	return true
}

// ReadFrom implements net.PacketConn: it waits for a datagram and copies
// it into p; what does not fit is lost, as with a kernel socket.
func (u *UDPConn) ReadFrom(p []byte) (int, net.Addr, error) {
	n, from, err := u.ReadFromUDPAddrPort(p)
	if err != nil {
		return n, nil, err
	}
	return n, net.UDPAddrFromAddrPort(from), nil
}

// ReadFromUDP is ReadFrom returning the sender as a *net.UDPAddr.
func (u *UDPConn) ReadFromUDP(p []byte) (int, *net.UDPAddr, error) {
	n, from, err := u.ReadFromUDPAddrPort(p)
	if err != nil {
		return n, nil, err
	}
	return n, net.UDPAddrFromAddrPort(from), nil
}

// ReadFromUDPAddrPort is ReadFrom returning the sender as a netip.AddrPort.
func (u *UDPConn) ReadFromUDPAddrPort(p []byte) (int, netip.AddrPort, error) {
	for {
		if err := u.usable("read", u.rd, nil); err != nil {
			return 0, netip.AddrPort{}, err
		}
		n, from, ok, err := u.take(p)
		if err != nil {
			return 0, netip.AddrPort{}, u.opErr("read", nil, err)
		}
		if ok {
			return n, from, nil
		}
		stopped := false
		select {
		case <-u.readable:
		case <-u.rd.wait():
		case <-u.closed:
		case <-u.s.done:
			stopped = u.queued() == 0
		}
		u.rd.done()
		if stopped {
			return 0, netip.AddrPort{}, u.opErr("read", nil, net.ErrClosed)
		}
	}
}

// take copies the oldest datagram queued, if any, into p (what does not
// fit is lost) and frees its buffer; or returns, before it, the error of a
// port unreachable, once.
func (u *UDPConn) take(p []byte) (n int, from netip.AddrPort, ok bool, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.refused {
		u.refused = false
		return 0, from, false, &connError{err: errRefused, errno: syscall.ECONNREFUSED}
	}
	if u.q.n == 0 {
		return 0, from, false, nil
	}
	d := u.q.pop()
	n = copy(p, (*d.b)[:d.n])
	u.s.free(d)
	if u.q.n > 0 {
		wake(u.readable) // for another reader: deliver woke only one
	}
	return n, d.from, true, nil
}

// errRefused is a connected UDP socket's error after an ICMP port
// unreachable; it matches syscall.ECONNREFUSED.
var errRefused = errors.New("connection refused (ICMP port unreachable)")

// queued is the number of datagrams in the receive queue.
func (u *UDPConn) queued() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.q.n
}

// Read implements net.Conn: ReadFrom, for a connected socket (on an
// unconnected one it reads from anyone).
func (u *UDPConn) Read(p []byte) (int, error) {
	n, _, err := u.ReadFromUDPAddrPort(p)
	return n, err
}

// WriteTo implements net.PacketConn: it sends p as one datagram to addr (a
// *net.UDPAddr with an IPv4 address). A connected socket refuses it
// (net.ErrWriteToConnected), as package net's does.
func (u *UDPConn) WriteTo(p []byte, addr net.Addr) (int, error) {
	a, ok := addr.(*net.UDPAddr)
	if !ok || a == nil {
		return 0, u.opErr("write", addr, syscall.EINVAL)
	}
	return u.WriteToUDPAddrPort(p, a.AddrPort())
}

// WriteToUDP is WriteTo with a *net.UDPAddr.
func (u *UDPConn) WriteToUDP(p []byte, addr *net.UDPAddr) (int, error) {
	if addr == nil {
		return 0, u.opErr("write", nil, syscall.EINVAL)
	}
	return u.WriteToUDPAddrPort(p, addr.AddrPort())
}

// WriteToUDPAddrPort is WriteTo with a netip.AddrPort.
func (u *UDPConn) WriteToUDPAddrPort(p []byte, to netip.AddrPort) (int, error) {
	if u.remote.IsValid() {
		return 0, u.opErr("write", u.raddr, net.ErrWriteToConnected)
	}
	return u.send(p, to)
}

// Write implements net.Conn: it sends p as one datagram to the connected
// socket's remote address.
func (u *UDPConn) Write(p []byte) (int, error) {
	if !u.remote.IsValid() {
		return 0, u.opErr("write", nil, syscall.EDESTADDRREQ)
	}
	return u.send(p, u.remote)
}

// send checks a datagram and sends it: on the caller's goroutine where the
// stack allows it and it fits one packet (sendDirect, udpsend.go), else on
// the loop. Sending never waits: the datagram goes to the device at once.
func (u *UDPConn) send(p []byte, to netip.AddrPort) (int, error) {
	to = netip.AddrPortFrom(to.Addr().Unmap(), to.Port()) // net.IPv4's 16 bytes
	if err := u.checkSend(p, to); err != nil {
		return 0, u.opErr("write", net.UDPAddrFromAddrPort(to), err)
	}
	var err error
	if u.s.udpDirect && u.s.onePacket(to.Addr(), len(p)) {
		err = u.sendDirect(to, p)
	} else if u.s.do(func() { err = u.sendLoop(to, p) }) != nil {
		err = net.ErrClosed
	}
	if err != nil {
		return 0, u.opErr("write", net.UDPAddrFromAddrPort(to), err)
	}
	return len(p), nil
}

// checkSend reports why p cannot be sent to `to` now, as the error of a
// write's net.OpError, or nil.
func (u *UDPConn) checkSend(p []byte, to netip.AddrPort) error {
	select {
	case <-u.closed:
		return net.ErrClosed
	default:
	}
	switch {
	case u.wd.passed():
		return os.ErrDeadlineExceeded
	case u.s.isDone():
		return net.ErrClosed
	}
	if err := u.s.checkDest(to); err != nil {
		return err
	}
	if !u.remote.IsValid() && !takes(u.net, to.Addr()) {
		return syscall.EAFNOSUPPORT
	}
	if len(p) > u.s.maxUDPPayload(to.Addr()) {
		return syscall.EMSGSIZE
	}
	return nil
}

// checkDest refuses what a kernel socket without SO_BROADCAST refuses: a
// broadcast destination (EACCES); a destination that is not IPv4 or (if
// the stack has an IPv6 address) unicast IPv6 with a port (EINVAL).
func (s *Stack) checkDest(to netip.AddrPort) error {
	a := to.Addr()
	switch {
	case a.Is6() && s.checkRemote(netBoth, to) != nil:
		return syscall.EINVAL
	case !a.IsValid() || to.Port() == 0 || a.IsUnspecified():
		return syscall.EINVAL
	case a == limitedBroadcast || a == s.subnetBroadcast:
		return syscall.EACCES
	}
	return nil
}

// sendLoop is a send's part on the loop: recorded (UDPSend, with the
// payload) before it runs.
func (u *UDPConn) sendLoop(to netip.AddrPort, p []byte) error {
	if u.gone {
		return net.ErrClosed
	}
	s := u.s
	if s.rec != nil {
		s.hasSendAt = false
		s.rec.Event(&record.Event{Kind: record.UDPSend, T: s.wheel.Now(), Local: u.source(to.Addr()), Remote: to, Data: p})
	}
	s.sendUDPFrom(u.source(to.Addr()), to, p) // forward_udp.go
	return nil
}

// usable reports why op cannot go on: the socket or the stack is closed,
// or dl passed.
func (u *UDPConn) usable(op string, dl *deadline, addr net.Addr) error {
	select {
	case <-u.closed:
		return u.opErr(op, addr, net.ErrClosed)
	default:
	}
	if dl.passed() {
		return u.opErr(op, addr, os.ErrDeadlineExceeded)
	}
	return nil
}

func (u *UDPConn) opErr(op string, addr net.Addr, err error) error {
	if addr == nil {
		addr = u.raddr
	}
	return &net.OpError{Op: op, Net: "udp", Source: u.laddr, Addr: addr, Err: err}
}

// Close implements net.PacketConn and net.Conn: the port is free again, and
// blocked reads and writes return net.ErrClosed. A second Close returns an
// error wrapping net.ErrClosed.
func (u *UDPConn) Close() error {
	err := u.opErr("close", nil, net.ErrClosed)
	u.closeOnce.Do(func() {
		err = nil
		close(u.closed)
		u.s.do(u.closeLoop)
		u.rd.set(time.Time{})
		u.wd.set(time.Time{})
		u.mu.Lock()
		u.s.drain(&u.q)
		u.mu.Unlock()
	})
	return err
}

// closeLoop is Close's part on the loop: recorded (UDPClose) before it runs.
func (u *UDPConn) closeLoop() {
	if u.gone {
		return
	}
	u.s.notePort(record.UDPClose, u.port, nil)
	u.forget()
}

// forget takes u out of the demultiplexer. It runs on the loop.
func (u *UDPConn) forget() {
	u.gone = true
	if u.s.udp[u.port] == u {
		delete(u.s.udp, u.port)
	}
}

// LocalAddr implements net.PacketConn and net.Conn: a *net.UDPAddr.
func (u *UDPConn) LocalAddr() net.Addr { return u.laddr }

// RemoteAddr implements net.Conn: the connected socket's remote address (a
// *net.UDPAddr), or nil for an unconnected one, as package net's.
func (u *UDPConn) RemoteAddr() net.Addr { return u.raddr }

// SetDeadline implements net.Conn and net.PacketConn.
func (u *UDPConn) SetDeadline(t time.Time) error {
	u.rd.set(t)
	u.wd.set(t)
	return nil
}

// SetReadDeadline implements net.Conn and net.PacketConn.
func (u *UDPConn) SetReadDeadline(t time.Time) error { u.rd.set(t); return nil }

// SetWriteDeadline implements net.Conn and net.PacketConn. Writes never
// wait, so it only fails those made after it has passed.
func (u *UDPConn) SetWriteDeadline(t time.Time) error { u.wd.set(t); return nil }

// udpChecksumOK checks a UDP datagram's checksum (b: header and payload, its
// length field's worth); a zero checksum is none (RFC 768; allowed over
// IPv4, not over IPv6: RFC 8200 8.1).
func udpChecksumOK(src, dst netip.Addr, b []byte) bool {
	u := header.UDP(b)
	n := int(u.Length())
	if n < udpHeaderLen || n > len(b) {
		return false
	}
	if u.Checksum() == 0 {
		return src.Is4()
	}
	return checksum.Checksum(b[:n], pseudoHeader(protoUDP, src, dst, n)) == 0xffff
}
