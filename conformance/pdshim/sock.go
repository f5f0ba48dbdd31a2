package pdshim

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"syscall"
	"time"

	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/tcpwheel/tcpwheel/tcp"
	"golang.org/x/sys/unix"
)

// sock is one TCP socket: before listen or connect only its options and
// address; then a listener or a connection.
type sock struct {
	fd       int
	nonblock bool
	opts     sockOpts
	bound    netip.AddrPort
	ln       *stack.Listener
	c        *stack.Conn
	peer     netip.AddrPort
	// connecting: a non-blocking connect is under way; its outcome goes to
	// soErr (SO_ERROR) once the handshake is over.
	connecting bool
	soErr      error
	rdShut     bool
}

// newFD returns a descriptor for a new socket or epoll instance: a real one,
// open on /dev/null, so that its number is the lowest free one, as Linux
// gives, and is nobody else's. packetdrill closes each socket's descriptor
// itself with close(2) at the end of a run (not through the interface): that
// closes the placeholder, never a descriptor of the Go runtime's.
func (s *Shim) newFD() (int, error) {
	fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, syscall.EMFILE
	}
	return fd, nil
}

func (s *Shim) sock(fd int) (*sock, error) {
	switch f := s.files[fd].(type) {
	case *sock:
		return f, nil
	case nil:
		return nil, syscall.EBADF
	}
	return nil, syscall.ENOTSOCK
}

// Socket creates a TCP socket: AF_INET, SOCK_STREAM (SOCK_NONBLOCK allowed),
// protocol 0 or IPPROTO_TCP.
func (s *Shim) Socket(domain, typ, proto int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return -1, syscall.EBADF
	}
	switch {
	case domain != unix.AF_INET:
		return -1, s.unsupported(fmt.Sprintf("socket domain %d (IPv4 only)", domain))
	case typ&^(unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC) != unix.SOCK_STREAM:
		return -1, s.unsupported(fmt.Sprintf("socket type %d (SOCK_STREAM only)", typ))
	case proto != 0 && proto != unix.IPPROTO_TCP:
		return -1, syscall.EPROTONOSUPPORT
	}
	s.sysctls.load()
	fd, err := s.newFD()
	if err != nil {
		return -1, err
	}
	s.files[fd] = &sock{fd: fd, nonblock: typ&unix.SOCK_NONBLOCK != 0, opts: defaultOpts()}
	return fd, nil
}

// Bind sets the socket's local address: the stack's own or 0.0.0.0.
func (s *Shim) Bind(fd int, ap netip.AddrPort) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, err := s.sock(fd)
	if err != nil {
		return err
	}
	switch {
	case k.bound.IsValid() || k.ln != nil || k.c != nil:
		return syscall.EINVAL
	case ap.Addr() != s.local && !ap.Addr().IsUnspecified():
		return syscall.EADDRNOTAVAIL
	}
	k.bound = ap
	return nil
}

// Listen makes the socket a listener on its bound port (an ephemeral one if
// unbound). The stack's accept queue has its own bound: backlog is not used.
func (s *Shim) Listen(fd, backlog int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, err := s.sock(fd)
	if err != nil {
		return err
	}
	if k.ln != nil {
		return nil
	}
	if k.c != nil {
		return syscall.EINVAL
	}
	if err := s.st.SetTCPConfig(s.tcpConfig(k.opts)); err != nil {
		return syscall.EINVAL
	}
	ln, err := s.st.ListenTCP("tcp4", fmt.Sprintf(":%d", k.bound.Port()))
	if err != nil {
		return syscall.EADDRINUSE
	}
	k.ln = ln
	return nil
}

// Accept takes a connection from the listener's queue, waiting for one on a
// blocking socket; the new socket inherits the listener's options.
func (s *Shim) Accept(fd int) (int, netip.AddrPort, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, err := s.sock(fd)
	if err != nil {
		return -1, netip.AddrPort{}, err
	}
	if k.ln == nil {
		return -1, netip.AddrPort{}, syscall.EINVAL
	}
	var c *stack.Conn
	try := func(time.Duration) bool {
		var ok bool
		c, ok = k.ln.TryAccept()
		return ok
	}
	if k.nonblock {
		if !try(0) {
			return -1, netip.AddrPort{}, syscall.EAGAIN
		}
	} else if err := s.block("accept", fd, 0, false, try); err != nil {
		return -1, netip.AddrPort{}, err
	}
	nfd, err := s.newFD()
	if err != nil {
		_ = c.Close()
		return -1, netip.AddrPort{}, err
	}
	peer := c.RemoteAddr().(*net.TCPAddr).AddrPort()
	s.files[nfd] = &sock{fd: nfd, opts: k.opts, c: c, peer: peer}
	return nfd, peer, nil
}

// Connect starts the handshake to ap; a blocking socket waits for its end, a
// non-blocking one returns EINPROGRESS.
func (s *Shim) Connect(fd int, ap netip.AddrPort) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, err := s.sock(fd)
	if err != nil {
		return err
	}
	switch {
	case k.ln != nil:
		return syscall.EINVAL
	case k.connecting:
		return syscall.EALREADY
	case k.c != nil:
		return syscall.EISCONN
	case !defaultPrefix.Contains(ap.Addr()) || ap.Port() == 0:
		// The network rule: nothing outside 198.18.0.0/15, even in memory.
		return syscall.ENETUNREACH
	}
	if err := s.st.SetTCPConfig(s.tcpConfig(k.opts)); err != nil {
		return syscall.EINVAL
	}
	c, err := s.st.StartDial("tcp4", k.bound.Port(), ap.String())
	if err != nil {
		return syscall.EADDRINUSE
	}
	k.c, k.peer = c, ap
	s.applyConnOpts(k)
	if k.nonblock {
		k.connecting = true
		return syscall.EINPROGRESS
	}
	var cerr error
	err = s.block("connect", fd, 0, false, func(time.Duration) bool {
		var done bool
		done, cerr = connectDone(c)
		return done
	})
	if err != nil {
		return err
	}
	return cerr
}

// connectDone reports whether the handshake of c is over, and its error.
func connectDone(c *stack.Conn) (bool, error) {
	r, err := c.Readiness()
	switch {
	case err != nil:
		return true, syscall.EBADF
	case r.Err != nil:
		return true, errno(r.Err)
	case r.State == tcp.StateSynSent || r.State == tcp.StateSynReceived:
		return false, nil
	case r.State == tcp.StateClosed:
		return true, syscall.ECONNREFUSED
	}
	return true, nil
}

// settle moves a non-blocking connect's outcome to SO_ERROR once it is known.
func settle(k *sock) {
	if !k.connecting {
		return
	}
	if done, err := connectDone(k.c); done {
		k.connecting, k.soErr = false, err
	}
}

// Peer returns the connection's remote address.
func (s *Shim) Peer(fd int) (netip.AddrPort, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, err := s.sock(fd)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if k.c == nil {
		return netip.AddrPort{}, syscall.ENOTCONN
	}
	return k.peer, nil
}

// connOf returns the socket's connection, or ENOTCONN.
func (s *Shim) connOf(fd int) (*sock, error) {
	k, err := s.sock(fd)
	if err != nil {
		return nil, err
	}
	if k.c == nil {
		return nil, syscall.ENOTCONN
	}
	settle(k)
	return k, nil
}

// transfer checks a read or write of n bytes at p (nil for a NULL buffer:
// EFAULT) and reports whether it is non-blocking (the socket's O_NONBLOCK,
// or MSG_DONTWAIT). A nil sock with no error means there is nothing to do
// (n is 0). It runs with mu held.
func (s *Shim) transfer(op string, fd int, p []byte, n, flags int) (*sock, bool, error) {
	k, err := s.connOf(fd)
	switch {
	case err != nil:
		return nil, false, err
	case flags&^(unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL) != 0:
		return nil, false, s.unsupported(fmt.Sprintf("%s flags %#x", op, flags))
	case n > 0 && p == nil:
		return nil, false, syscall.EFAULT
	case n == 0:
		return nil, false, nil
	}
	return k, k.nonblock || flags&unix.MSG_DONTWAIT != 0, nil
}

// Recv reads into p (read, recv, recvfrom, readv, recvmsg). p is nil for a
// NULL buffer: EFAULT. MSG_DONTWAIT makes this one call non-blocking.
func (s *Shim) Recv(fd int, p []byte, n int, flags int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, nonblock, err := s.transfer("recv", fd, p, n, flags)
	if k == nil || err != nil {
		return 0, err
	}
	var got int
	var rerr error
	// After SHUT_RD, data still queued (or arriving: Linux takes it) is read;
	// with none, read returns 0 at once.
	try := func(time.Duration) bool {
		got, rerr = k.c.TryRead(p)
		return got > 0 || rerr != nil || k.rdShut
	}
	if nonblock {
		if !try(0) {
			return -1, syscall.EAGAIN
		}
	} else if err := s.block("read", fd, 0, false, try); err != nil {
		return -1, err
	}
	if rerr != nil && !errors.Is(rerr, io.EOF) {
		return -1, errno(rerr)
	}
	return got, nil
}

// Send writes p (write, send, sendto, writev, sendmsg): a blocking socket
// waits until all of p is in the send buffer, a non-blocking one takes what
// fits (EAGAIN when nothing does).
func (s *Shim) Send(fd int, p []byte, n int, flags int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, nonblock, err := s.transfer("send", fd, p, n, flags)
	if k == nil || err != nil {
		return 0, err
	}
	total := 0
	var werr error
	try := func(time.Duration) bool {
		m, err := k.c.TryWrite(p[total:])
		total += m
		if err != nil {
			werr = err
			return true
		}
		return total == len(p)
	}
	if nonblock {
		try(0)
		if total == 0 && werr == nil {
			return -1, syscall.EAGAIN
		}
	} else if err := s.block("write", fd, 0, false, try); err != nil && total == 0 {
		return -1, err
	}
	if total == 0 && werr != nil {
		return -1, errno(werr)
	}
	return total, nil
}

// Close closes a socket or an epoll descriptor. A call blocked on it fails
// with EBADF.
func (s *Shim) CloseFD(fd int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.files[fd]
	if f == nil {
		return syscall.EBADF
	}
	delete(s.files, fd)
	_ = unix.Close(fd)
	if w := s.waiter; w != nil && w.fd == fd {
		s.waiter = nil
		w.finish(syscall.EBADF, s.clk.Now())
	}
	if k, ok := f.(*sock); ok {
		switch {
		case k.ln != nil:
			_ = k.ln.Close()
		case k.c != nil && k.opts.lingerZero:
			_ = k.c.Abort()
			_ = k.c.Close()
		case k.c != nil:
			_ = k.c.Close()
		}
	}
	s.poke()
	return nil
}

// Shutdown shuts the reading side (reads then return 0), the writing side
// (a FIN after the data written), or both.
func (s *Shim) Shutdown(fd, how int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, err := s.connOf(fd)
	if err != nil {
		return err
	}
	if how < unix.SHUT_RD || how > unix.SHUT_RDWR {
		return syscall.EINVAL
	}
	if how != unix.SHUT_WR {
		k.rdShut = true
	}
	if how != unix.SHUT_RD {
		if err := k.c.CloseWrite(); err != nil {
			return errno(err)
		}
	}
	s.poke()
	return nil
}

// Fcntl supports F_GETFL/F_SETFL (O_NONBLOCK) and F_GETFD/F_SETFD.
func (s *Shim) Fcntl(fd, cmd int, arg int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, err := s.sock(fd)
	if err != nil {
		return -1, err
	}
	switch cmd {
	case unix.F_GETFL:
		fl := unix.O_RDWR
		if k.nonblock {
			fl |= unix.O_NONBLOCK
		}
		return fl, nil
	case unix.F_SETFL:
		k.nonblock = arg&unix.O_NONBLOCK != 0
		return 0, nil
	case unix.F_GETFD, unix.F_SETFD:
		return 0, nil
	}
	return -1, s.unsupported(fmt.Sprintf("fcntl command %d", cmd))
}

// Ioctl supports SIOCINQ (FIONREAD) and SIOCOUTQ: it returns the value that
// the caller stores through the int pointer.
func (s *Shim) Ioctl(fd int, req uint) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, err := s.connOf(fd)
	if err != nil {
		return -1, err
	}
	switch req {
	case unix.SIOCINQ:
		r, err := k.c.Readiness()
		if err != nil {
			return -1, syscall.EBADF
		}
		return r.Readable, nil
	case unix.SIOCOUTQ:
		return k.c.Info().SndBuffered, nil
	}
	return -1, s.unsupported(fmt.Sprintf("ioctl %#x", req))
}

// Owns reports whether fd is one of the shim's sockets.
func (s *Shim) Owns(fd int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.files[fd].(*sock)
	return ok
}
