// Package stack is tcpwheel's userspace TCP/IP stack: IPv4 (with ICMP echo),
// TCP and UDP, demultiplexing by 4-tuple and port, the device's input path
// onto the event loop, and the public API whose connections are net.Conn
// (always a *Conn, with CloseWrite, Info and keepalive setters, and
// io.ReaderFrom and io.WriterTo, so that io.Copy to and from a kernel socket
// or a file moves each byte once: copy.go), whose
// listeners are net.Listener (always a *Listener), and whose UDP sockets are
// net.PacketConn (always a *UDPConn; see UDP below). As in package net, DialTCP, ListenTCP and AcceptTCP hand
// out the concrete types; DialContext, Listen and Accept the interfaces.
//
//	s, err := stack.New(stack.Config{Device: dev, Addr: netip.MustParseAddr("198.18.0.2")})
//	ln, err := s.Listen("tcp", ":80")
//	c, err := s.DialContext(ctx, "tcp", "198.18.0.1:8080")
//
// # The loop
//
// The stack runs on one event loop (package loop), which owns the wheel and
// every TCP endpoint: New starts a loop.Loop of its own, a goroutine on a locked
// OS thread, which runs, in order, the application calls posted by connections
// (and the reader path's packets), the packets the device delivers, and the
// expiry of the wheel's timers: input before expiry (see package loop, "Order of
// work"), so that an ACK waiting in the device when the loop wakes late stops
// its segment's retransmission timer before that can fire. Each packet is
// handled with the wheel's Now moved to the clock (timer.Wheel.MoveNow, which
// fires nothing), so the timers it starts measure from when it is handled. TCP
// code therefore needs no locks, and timers fire on the loop's precise sleep
// rather than on Go runtime timers. Config.RealTime runs the loop's thread
// under SCHED_FIFO, so that a busy machine does not delay it (New fails where
// that is not permitted).
//
// Packets reach the loop by one of two paths, which Stats.InputPath names. When
// the device is a tun.Pollable (a TUN, also through the wrappers tun/impair,
// tun/pcaptap and the comparison's watcher, which forward it), the loop
// watches its descriptor and reads up to 64 packets per turn itself, into
// one buffer of its own, with no handoff: the direct path. Otherwise (an
// in-memory pipe) a reader goroutine blocks in the device's ReadPacket and
// posts what it reads to the loop: the reader path, which also hands the loop
// at most 64 packets per turn. Stats.Input counts the batches. NewManual runs
// the stack on a loop.Manual instead, driven by its caller, who injects the
// packets (Inject, or Wake for a late wake that finds packets waiting): for
// tests and pcap replay (package replay).
//
// # UDP
//
// UDP (RFC 768) over IPv4: ListenUDP and ListenPacket open an unconnected
// socket, DialUDP (and DialContext with "udp" or "udp4") a connected one; each
// is a *UDPConn, a net.PacketConn and a net.Conn, with deadlines.
//
//	pc, err := s.ListenPacket("udp", ":53")
//	c, err := s.DialContext(ctx, "udp", "198.18.0.1:53")
//
// One socket owns a local port (UDP's ports are apart from TCP's); a
// connected one takes datagrams from its remote address only. Each socket
// queues up to 256 datagrams and drops (and counts) the rest until it is
// read. A datagram to a port with no socket is answered with an ICMP port
// unreachable, rate-limited as Linux does; an ICMP port unreachable for a
// connected socket's flow fails its next read with an error matching
// syscall.ECONNREFUSED. Datagrams are not fragmented: a Write larger than
// the MTU allows fails with EMSGSIZE.
//
// # Forwarding
//
// Stack.Forward makes the stack take TCP connections and UDP flows to any
// address that arrives on the device, as tun2socks, sing-tun and Tailscale
// do with gVisor's forwarders: each new flow goes to the application with
// its original destination, a *TCPRequest to Accept (the *Conn's LocalAddr
// is the original destination) or Reject, or a *UDPFlow (a net.Conn whose
// writes are sent from it). The stack's own addresses keep their listeners
// and sockets. See ForwardConfig for the bounds and timeouts.
//
//	s.Forward(stack.ForwardConfig{
//		TCP: func(r *stack.TCPRequest) {
//			up, err := net.Dial("tcp", r.Destination().String())
//			if err != nil {
//				r.Reject(stack.RejectUnreachable)
//				return
//			}
//			c, err := r.Accept()
//			// ... copy between c and up
//		},
//	})
//
// IPv4 input drops, and counts by reason in Stats.Drops, what is malformed, not
// for our address (nor forwarded), fragmented, or from a martian source (a broadcast address,
// the link's subnet broadcast given by Config.Prefix, multicast, class E, 0/8,
// 127/8, or our own address; RFC 1122 3.2.1.3, as Linux). TCP's own drops are
// counted in Stats.TCP and Stats.Listen.
//
// Application goroutines never touch an endpoint. Conn.Read and Write go
// through two buffers of the Conn under a small lock, which the loop fills and
// drains, and wait for the loop only when they must: Write copies into the
// Conn while the send buffer (Conn and endpoint together: SO_SNDBUF) has room
// and posts one flush until the loop has taken it (the loop hands the bytes
// to the endpoint by count: it sends them from there, its tcp.Source); the loop moves received
// data into the Conn as it arrives, straight from the packet (the endpoint's
// tcp.Sink) or from the endpoint's buffer (tcp.Endpoint.Hold), held unread in
// the endpoint so that the window never offers space that is not there, and learns what Read took (tcp.Endpoint.Release) by a post only once
// it adds up to a step worth a window update (RFC 9293 3.8.6.2.2). When there
// is nothing to read or no room, they sleep until the endpoint's event or
// their deadline; a writer of a full buffer wakes once it has room for half
// of what it holds. Close, CloseWrite and the other calls post a function to
// the loop and wait for it; a FIN follows the bytes still in the Conn, and
// Close counts received bytes never returned as unread data (a RST, as on
// Linux).
//
// # Errors
//
// Connection errors are *net.OpError. Their Err matches, with errors.Is, both
// the tcp package's error (tcp.ErrConnectionReset, tcp.ErrTimeout, ...) and the
// errno a kernel socket would give (syscall.ECONNRESET, syscall.ETIMEDOUT, ...);
// a missed deadline matches os.ErrDeadlineExceeded, use after Close
// net.ErrClosed. Read returns a bare io.EOF after the peer's FIN.
package stack
