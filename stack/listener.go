package stack

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"

	"github.com/tcpwheel/tcpwheel/stack/record"
	"github.com/tcpwheel/tcpwheel/tcp"
)

// Listener is a TCP listener of the stack. It implements net.Listener.
type Listener struct {
	s       *Stack
	tl      *tcp.Listener // loop only
	port    uint16
	net     uint8      // the IP versions it takes: netBoth, net4 or net6 (ipv6.go)
	bound   netip.Addr // the one address it takes, or the zero Addr: any of the stack's
	addr    *net.TCPAddr
	acceptq chan *Conn
	// twins are the listeners on the same port of the other loops
	// (Config.Loops, loops.go), which share acceptq and closed.
	twins []*Listener

	closeOnce sync.Once
	closed    chan struct{}
	// held is the connections accepted during the batch of input being
	// handled that wait in Stack.accepts for its end. Loop only.
	held int
}

var _ net.Listener = (*Listener)(nil)

// Listen announces on the stack's addresses. network must be "tcp" (IPv4 and
// IPv6, if the stack has an IPv6 address), "tcp4" or "tcp6", as in package
// net; address is ":port" (every address of the stack of those versions),
// or "addr:port" with one of the stack's own addresses (which restricts it
// to that address), or port 0 for an ephemeral port. A port has one
// listener, bound or not. The net.Listener is always a *Listener: use ListenTCP for
// the concrete type, whose AcceptTCP returns *Conn.
func (s *Stack) Listen(network, address string) (net.Listener, error) {
	l, err := s.ListenTCP(network, address)
	if err != nil {
		return nil, err // not a nil *Listener inside a non-nil net.Listener
	}
	return l, nil
}

// ListenTCP is Listen returning the concrete *Listener, as net.ListenTCP does.
func (s *Stack) ListenTCP(network, address string) (*Listener, error) {
	fail := func(err error) error {
		return &net.OpError{Op: "listen", Net: network, Err: err}
	}
	n, port, bound, err := s.listenAddr(network, "tcp", address)
	if err != nil {
		return nil, fail(err)
	}
	l := s.newListener()
	l.net, l.bound = n, bound
	key := tcp.NewCookieKey() // one for every loop's listener: a cookie checks on any
	var lerr error
	if s.do(func() {
		p := uint16(port)
		if p == 0 {
			var ok bool
			if p, ok = s.ephemeralPort(netip.AddrPort{}); !ok {
				lerr = fmt.Errorf("no free port")
				return
			}
		}
		if s.portInUse(p) {
			lerr = fmt.Errorf("port %d: address already in use", p)
			return
		}
		lerr = s.listen(l, p, key)
	}) != nil {
		return nil, fail(net.ErrClosed)
	}
	if lerr != nil {
		return nil, fail(lerr)
	}
	if s.grp != nil {
		if err := s.grp.listen(l, key); err != nil { // loops.go: on every loop
			l.Close()
			return nil, fail(err)
		}
	}
	return l, nil
}

// listenAddr parses what ListenTCP and ListenUDP are asked to open: the IP
// version of network (proto, proto4 or proto6) as address narrows it, and
// the port of address.
func (s *Stack) listenAddr(network, proto, address string) (uint8, uint16, netip.Addr, error) {
	n, ok := netOf(network, proto)
	if !ok {
		return 0, 0, netip.Addr{}, net.UnknownNetworkError(network)
	}
	port, bound, err := s.localPort(address)
	if err == nil {
		n, err = s.localNet(n, address)
	}
	return n, port, bound, err
}

// localPort parses a local address to listen on: ":port", or "addr:port" with
// one of the stack's own addresses (returned as bound: the listener or
// socket takes only what comes to it) or an unspecified one; port 0 asks
// for an ephemeral port.
func (s *Stack) localPort(address string) (port uint16, bound netip.Addr, err error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return 0, bound, err
	}
	if host != "" {
		a, err := netip.ParseAddr(host)
		if err != nil || (!s.isLocal(a.Unmap()) && !a.IsUnspecified()) {
			return 0, bound, fmt.Errorf("address %s is not the stack's (%v)", host, s.cfg.Addr)
		}
		if !a.IsUnspecified() {
			bound = a.Unmap()
		}
	}
	p, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return 0, bound, fmt.Errorf("bad port %q", portStr)
	}
	return uint16(p), bound, nil
}

// accept runs on the loop when a handshake completes: it registers the
// connection and queues it for Accept, or refuses it when the queue is full.
func (l *Listener) accept(ep *tcp.Endpoint) bool {
	if l.s.grp != nil && !l.s.grp.claim(ep.ID(), l.s) { // loops.go
		return false // another loop's connection has the 4-tuple
	}
	c := newConn(l.s, ep, true)
	if !l.s.flag(record.Accepted, c.id, 0, func() bool {
		if l.s.inBatch && l.s.grp == nil {
			// Handed to Accept at the batch's end (handOver), with the
			// data the batch brought its readers: a request that came
			// right behind the handshake's ACK is then in the Conn when
			// the server's first Read looks, and Accept's goroutine is
			// woken once per batch, not mid-batch while the loop still
			// runs. Only this loop sends to acceptq (one loop: grp is
			// nil), so the room counted here is there at the batch's end.
			if l.queueFull() {
				return false
			}
			l.held++
			l.s.accepts = append(l.s.accepts, heldAccept{l, c})
			return true
		}
		select {
		case l.acceptq <- c:
			return true
		default:
			return false
		}
	}) {
		if l.s.grp != nil {
			l.s.grp.release(ep.ID(), l.s)
		}
		return false
	}
	l.s.register(c)
	ep.SetNotifier((*connNotify)(c))
	return true
}

// Accept implements net.Listener. The net.Conn is always a *Conn; AcceptTCP
// returns it as one.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.AcceptTCP()
	if err != nil {
		return nil, err // not a nil *Conn in a non-nil net.Conn
	}
	return c, nil
}

// AcceptTCP waits for the next connection, as Accept does, and returns it as
// the *Conn it is.
func (l *Listener) AcceptTCP() (*Conn, error) {
	select {
	case c := <-l.acceptq:
		return c, nil
	case <-l.closed:
	case <-l.s.done:
	}
	return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.addr, Err: net.ErrClosed}
}

// Close implements net.Listener: it stops accepting, resets the connections that
// were waiting for Accept, and unblocks Accept calls.
func (l *Listener) Close() error {
	err := error(&net.OpError{Op: "close", Net: "tcp", Addr: l.addr, Err: net.ErrClosed})
	l.closeOnce.Do(func() {
		err = nil
		close(l.closed)
		l.s.do(l.closeLoop)
		for _, t := range l.twins { // the other loops' (loops.go)
			t.s.do(t.closeLoop)
		}
	})
	return err
}

// Addr implements net.Listener.
func (l *Listener) Addr() net.Addr { return l.addr }

// listen opens l on port p, with the SYN-cookie key key. It runs on the loop.
func (s *Stack) listen(l *Listener, p uint16, key []byte) error {
	tl, err := tcp.NewListener(s.timers(), s.out(), tcp.ListenerConfig{
		Backlog:   s.cfg.Backlog,
		Endpoint:  s.cfg.TCP,
		Spares:    &s.epSpares, // timewait.go
		CookieKey: key,
		Accept:    l.accept,
		QueueFull: func() bool {
			return s.flag(record.QueueFull, noConn, p, l.queueFull)
		},
		Dropped: s.halfOpenDropped(), // loops.go
	})
	if err != nil {
		return err
	}
	s.notePort(record.Listen, p, s.listenData(key, l.net, l.bound))
	l.tl, l.port = tl, p
	local := s.cfg.Addr
	switch {
	case l.bound.IsValid():
		local = l.bound
	case l.net == net6:
		local = s.cfg.Addr6
	}
	l.addr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(local, p))
	s.listeners[p] = l
	s.usePort(p)
	if s.grp != nil {
		s.grp.listening(p, 1) // loops.go: no Dial picks it
	}
	return nil
}

func (s *Stack) newListener() *Listener {
	return &Listener{s: s, acceptq: make(chan *Conn, s.cfg.Backlog), closed: make(chan struct{})}
}

// queueFull reports whether the accept queue has no room, counting the
// connections held for it until the batch's end (held). Loop only.
func (l *Listener) queueFull() bool { return len(l.acceptq)+l.held >= cap(l.acceptq) }

// closeLoop is Close's part on the loop.
func (l *Listener) closeLoop() {
	if l.held > 0 {
		// Never so far: a batch ends before a posted function runs. Were
		// one still open, its connections must be in acceptq before the
		// loop below resets what waits there.
		l.s.handOver()
	}
	l.s.notePort(record.ListenClose, l.port, nil)
	l.tl.Close()
	if l.s.listeners[l.port] == l {
		delete(l.s.listeners, l.port)
		l.s.releasePort(l.port)
		if l.s.grp != nil {
			l.s.grp.listening(l.port, -1)
		}
	}
	for {
		select {
		case c := <-l.acceptq:
			// Recorded (abort), for what a Playback's accept queue holds
			// is not what the application left in it: the recording
			// answers Accepted, and no one takes from its queue.
			if c.s != l.s {
				c.s.post(c.abort) // another loop's (loops.go)
				continue
			}
			c.abort()
		default:
			return
		}
	}
}
