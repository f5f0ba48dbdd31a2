package stack

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
)

// Conn is a TCP connection of the stack. It implements net.Conn; its methods are
// safe for concurrent use.
type Conn struct {
	s      *Stack
	ep     *tcp.Endpoint // touched only on the loop
	id     tcp.ID
	laddr  *net.TCPAddr
	raddr  *net.TCPAddr
	rd, wd *deadline

	readable, writable chan struct{} // a pending wakeup each, set by endpoint events
	settled            chan struct{} // closed once the handshake is over, either way
	settledDone        bool          // loop only

	closeOnce sync.Once
	closed    chan struct{}
}

var _ net.Conn = (*Conn)(nil)

func newConn(s *Stack, ep *tcp.Endpoint) *Conn {
	id := ep.ID()
	c := &Conn{
		s: s, ep: ep, id: id,
		laddr:    net.TCPAddrFromAddrPort(id.Local),
		raddr:    net.TCPAddrFromAddrPort(id.Remote),
		rd:       newDeadline(),
		wd:       newDeadline(),
		readable: make(chan struct{}, 1),
		writable: make(chan struct{}, 1),
		settled:  make(chan struct{}),
		closed:   make(chan struct{}),
	}
	return c
}

// notify receives the endpoint's events on the loop and wakes the waiters.
func (c *Conn) notify(ev tcp.Event) {
	if ev&(tcp.EventReadable|tcp.EventError|tcp.EventClosed) != 0 {
		wake(c.readable)
	}
	if ev&(tcp.EventWritable|tcp.EventError|tcp.EventClosed) != 0 {
		wake(c.writable)
	}
	if ev&(tcp.EventEstablished|tcp.EventError|tcp.EventClosed) != 0 && !c.settledDone {
		c.settledDone = true
		close(c.settled)
	}
	if ev&tcp.EventClosed != 0 {
		c.s.forget(c)
	}
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (c *Conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.laddr, Addr: c.raddr, Err: err}
}

// Read implements net.Conn. It returns io.EOF after the peer's FIN.
func (c *Conn) Read(p []byte) (int, error) {
	for {
		if err := c.usable("read", c.rd); err != nil {
			return 0, err
		}
		var n int
		var err error
		if c.s.do(func() { n, err = c.ep.Read(p) }) != nil {
			return 0, c.opErr("read", net.ErrClosed)
		}
		switch {
		case n > 0 || len(p) == 0:
			return n, nil
		case err == io.EOF:
			return 0, io.EOF
		case err != nil:
			return 0, c.opErr("read", mapErr(err))
		}
		c.block(c.readable, c.rd)
	}
}

// Write implements net.Conn: it returns once all of p is in the send buffer, or
// with the count written so far and an error.
func (c *Conn) Write(p []byte) (int, error) {
	total := 0
	for {
		if err := c.usable("write", c.wd); err != nil {
			return total, err
		}
		var n int
		var err error
		if c.s.do(func() { n, err = c.ep.Write(p[total:]) }) != nil {
			return total, c.opErr("write", net.ErrClosed)
		}
		total += n
		if err != nil {
			return total, c.opErr("write", mapErr(err))
		}
		if total == len(p) {
			return total, nil
		}
		if n > 0 {
			continue
		}
		c.block(c.writable, c.wd)
	}
}

// usable reports why op cannot go on: the connection is closed, or dl passed.
func (c *Conn) usable(op string, dl *deadline) error {
	if c.isClosed() {
		return c.opErr(op, net.ErrClosed)
	}
	if dl.passed() {
		return c.opErr(op, os.ErrDeadlineExceeded)
	}
	return nil
}

// block waits until the endpoint signals wake, dl passes, or the connection or
// the stack is closed.
func (c *Conn) block(wake <-chan struct{}, dl *deadline) {
	select {
	case <-wake:
	case <-dl.wait():
	case <-c.closed:
	case <-c.s.done:
	}
}

func (c *Conn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// Close implements net.Conn: it sends a FIN after the data already written and
// releases the connection (RFC 9293 3.10.4). Unread received data makes it a RST,
// as on Linux. A second Close returns an error wrapping net.ErrClosed.
func (c *Conn) Close() error {
	err := c.opErr("close", net.ErrClosed)
	c.closeOnce.Do(func() {
		err = nil
		close(c.closed)
		var cerr error
		if c.s.do(func() { cerr = c.ep.Close() }) != nil {
			return
		}
		if cerr != nil && !errors.Is(cerr, tcp.ErrClosed) {
			err = c.opErr("close", mapErr(cerr))
		}
		c.rd.set(time.Time{})
		c.wd.set(time.Time{})
	})
	return err
}

// CloseWrite shuts down the sending side: a FIN follows the data already
// written; reading goes on.
func (c *Conn) CloseWrite() error {
	if c.isClosed() {
		return c.opErr("close", net.ErrClosed)
	}
	var err error
	if c.s.do(func() { err = c.ep.CloseWrite() }) != nil {
		return c.opErr("close", net.ErrClosed)
	}
	if err != nil {
		return c.opErr("close", mapErr(err))
	}
	return nil
}

// Abort resets the connection at once (SO_LINGER 0).
func (c *Conn) Abort() error {
	if c.s.do(func() { c.ep.Abort() }) != nil {
		return c.opErr("close", net.ErrClosed)
	}
	return nil
}

// LocalAddr implements net.Conn.
func (c *Conn) LocalAddr() net.Addr { return c.laddr }

// RemoteAddr implements net.Conn.
func (c *Conn) RemoteAddr() net.Addr { return c.raddr }

// SetDeadline implements net.Conn.
func (c *Conn) SetDeadline(t time.Time) error {
	c.rd.set(t)
	c.wd.set(t)
	return nil
}

// SetReadDeadline implements net.Conn.
func (c *Conn) SetReadDeadline(t time.Time) error { c.rd.set(t); return nil }

// SetWriteDeadline implements net.Conn.
func (c *Conn) SetWriteDeadline(t time.Time) error { c.wd.set(t); return nil }

// Info returns the connection's TCP_INFO-like snapshot.
func (c *Conn) Info() tcp.Info {
	var info tcp.Info
	c.s.do(func() { info = c.ep.Info() })
	return info
}

// SetKeepAlive turns keepalive probes on or off, like net.TCPConn's. Probes
// start after the idle time (SetKeepAlivePeriod, or the stack's TCP config).
func (c *Conn) SetKeepAlive(on bool) error {
	return c.setKeepAlive(net.KeepAliveConfig{Enable: on})
}

// SetKeepAlivePeriod sets the idle time before the first probe and the interval
// between probes, like net.TCPConn's. It does not turn keepalive on.
func (c *Conn) SetKeepAlivePeriod(d time.Duration) error {
	var on bool
	if c.s.do(func() { on = c.ep.Info().KeepAlive }) != nil {
		return c.opErr("set", net.ErrClosed)
	}
	return c.setKeepAlive(net.KeepAliveConfig{Enable: on, Idle: d, Interval: d})
}

// SetKeepAliveConfig sets every keepalive parameter at once (RFC 1122
// 4.2.3.6), like net.TCPConn's; zero fields keep their current values.
func (c *Conn) SetKeepAliveConfig(cfg net.KeepAliveConfig) error {
	return c.setKeepAlive(cfg)
}

func (c *Conn) setKeepAlive(cfg net.KeepAliveConfig) error {
	if c.isClosed() {
		return c.opErr("set", net.ErrClosed)
	}
	if c.s.do(func() { c.ep.SetKeepAlive(cfg.Enable, cfg.Idle, cfg.Interval, cfg.Count) }) != nil {
		return c.opErr("set", net.ErrClosed)
	}
	return nil
}
