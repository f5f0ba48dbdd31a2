// Package stack is tcpwheel's userspace TCP/IP stack: IPv4 (with ICMP echo),
// demultiplexing by 4-tuple, the event loop that owns the timing wheel, and the
// public API whose connections are net.Conn and whose listeners are net.Listener.
//
//	s, err := stack.New(stack.Config{Device: dev, Addr: netip.MustParseAddr("198.18.0.2")})
//	ln, err := s.Listen("tcp", ":80")
//	c, err := s.DialContext(ctx, "tcp", "198.18.0.1:8080")
//
// # The loop
//
// One goroutine, a timer.Driver on a locked OS thread, owns the wheel and every
// TCP endpoint: it runs, in order, the expiry of the wheel's timers, the
// application calls posted by connections, and the packets the device delivers.
// TCP code therefore needs no locks, and timers fire on the wheel's precise sleep
// rather than on Go runtime timers. When the device is a tun.Pollable (a TUN,
// also through tun/impair), the loop's epoll watches its
// descriptor and the loop reads up to 64 packets per wake-up itself, into one
// buffer of its own, with no handoff; otherwise (an in-memory pipe) a reader
// goroutine blocks in the device's ReadPacket and queues what it reads. (A
// tun/pcaptap capture keeps the reader goroutine: replays of captures assume
// its ordering of packets and application calls.)
//
// Application goroutines never touch an endpoint: Conn.Read, Write and Close post
// a function to the loop and wait for it; when an endpoint has nothing to give,
// they sleep until the endpoint's event (readable, writable, closed) or their
// deadline. A Read smaller than what has arrived takes up to 256 KB in that one
// trip and keeps the rest in the Conn (the read-ahead), so that the next Reads
// need no trip; Close counts read-ahead bytes never returned as unread data
// (a RST, as on Linux).
//
// # Errors
//
// Connection errors are *net.OpError. Their Err matches, with errors.Is, both
// the tcp package's error (tcp.ErrConnectionReset, tcp.ErrTimeout, ...) and the
// errno a kernel socket would give (syscall.ECONNRESET, syscall.ETIMEDOUT, ...);
// a missed deadline matches os.ErrDeadlineExceeded, use after Close
// net.ErrClosed. Read returns a bare io.EOF after the peer's FIN.
package stack
