package stack

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/tcpwheel/tcpwheel/stack/record"
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

	// The read-ahead: bytes a Read took from the endpoint beyond what it
	// returned, for the next Reads (readOnce).
	rmu      sync.Mutex
	ahead    []byte  // guarded by rmu
	aheadBuf *[]byte // guarded by rmu: ahead's buffer, from getAhead

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

// readAhead is the most a Read takes from the endpoint in one trip to the loop
// when more is there than it asked for: the rest waits in the Conn for the next
// Reads, which need no trip. A reader of 8 KB at a time (io.Copy) would
// otherwise pay a handoff to the loop's thread and back (two thread wakeups,
// 50-150 µs on a VM) per 8 KB, and open the window 8 KB at a time: a 20 MB
// download took 4x gVisor's time, and 0.8x with this.
const readAhead = 256 << 10

// aheadClasses are the sizes of the read-ahead buffers: the smallest that holds
// what is there, so that a connection with a little unread data does not hold
// a big buffer. Each Stack pools its buffers by class (Stack.aheadPools).
var aheadClasses = [...]int{16 << 10, 64 << 10, readAhead}

// aheadClass is the index of the smallest class that holds n bytes (n <=
// readAhead).
func aheadClass(n int) int {
	k := 0
	for k < len(aheadClasses)-1 && aheadClasses[k] < n {
		k++
	}
	return k
}

// getAhead returns a pooled buffer of the smallest class that holds n bytes.
func (s *Stack) getAhead(n int) *[]byte {
	k := aheadClass(n)
	if bp, ok := s.aheadPools[k].Get().(*[]byte); ok {
		return bp
	}
	b := make([]byte, aheadClasses[k])
	return &b
}

// putAhead returns a buffer of getAhead to its pool (its length is its class's).
func (s *Stack) putAhead(bp *[]byte) { s.aheadPools[aheadClass(len(*bp))].Put(bp) }

// Read implements net.Conn. It returns io.EOF after the peer's FIN.
func (c *Conn) Read(p []byte) (int, error) {
	for {
		if err := c.usable("read", c.rd); err != nil {
			return 0, err
		}
		if n, err := c.readOnce(p); n > 0 || len(p) == 0 || err != nil {
			return n, err
		}
		c.block(c.readable, c.rd)
	}
}

// readOnce returns what has been received, if anything, without waiting: from
// the read-ahead if it holds any, else from the endpoint, on the loop. It
// returns (0, nil) when there is nothing yet, io.EOF after the peer's FIN.
func (c *Conn) readOnce(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if len(c.ahead) > 0 {
		return c.takeAhead(p), nil
	}
	var n int
	var err error
	var bp *[]byte
	if c.s.do(func() {
		if avail := c.ep.Readable(); avail > len(p) && len(p) > 0 && len(p) < readAhead {
			bp = c.s.getAhead(min(avail, readAhead))
			n, err = c.read(*bp)
			return
		}
		n, err = c.read(p)
	}) != nil {
		err = net.ErrClosed
	}
	if bp != nil {
		c.aheadBuf, c.ahead = bp, (*bp)[:n]
		n = c.takeAhead(p)
	}
	switch {
	case n > 0 || err == nil || err == io.EOF:
		return n, err
	case errors.Is(err, net.ErrClosed):
		return 0, c.opErr("read", net.ErrClosed)
	}
	return 0, c.opErr("read", mapErr(err))
}

// takeAhead copies the read-ahead into p and releases its buffer once empty.
// It runs with rmu held.
func (c *Conn) takeAhead(p []byte) int {
	n := copy(p, c.ahead)
	c.ahead = c.ahead[n:]
	if len(c.ahead) == 0 {
		c.dropAhead()
	}
	return n
}

// dropAhead discards the read-ahead, and reports whether it held data. It runs
// with rmu held.
func (c *Conn) dropAhead() bool {
	unread := len(c.ahead) > 0
	if c.aheadBuf != nil {
		c.s.putAhead(c.aheadBuf)
	}
	c.aheadBuf, c.ahead = nil, nil
	return unread
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
		if c.s.do(func() { n, err = c.write(p[total:]) }) != nil {
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
		c.rmu.Lock()
		unread := c.dropAhead() // data read ahead but never returned is unread
		c.rmu.Unlock()
		var cerr error
		if c.s.do(func() { cerr = c.close(unread) }) != nil {
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
	if c.s.do(func() { err = c.closeWrite() }) != nil {
		return c.opErr("close", net.ErrClosed)
	}
	if err != nil {
		return c.opErr("close", mapErr(err))
	}
	return nil
}

// Abort resets the connection at once (SO_LINGER 0).
func (c *Conn) Abort() error {
	if c.s.do(c.abort) != nil {
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
	if c.s.do(func() { c.keepAlive(cfg) }) != nil {
		return c.opErr("set", net.ErrClosed)
	}
	return nil
}

// The application's calls on the loop: each is recorded (flight.go) before
// it runs, so that the events it causes follow it, and a Playback makes the
// same calls.

func (c *Conn) read(p []byte) (int, error) {
	c.event(record.Read, int64(len(p)))
	return c.ep.Read(p)
}

func (c *Conn) write(p []byte) (int, error) {
	c.event(record.Write, int64(len(p)))
	return c.ep.Write(p)
}

// close is Close's part on the loop: unread data makes it a reset, as on
// Linux.
func (c *Conn) close(unread bool) error {
	if unread {
		c.event(record.Close, 1)
		c.ep.Abort()
		return nil
	}
	c.event(record.Close, 0)
	return c.ep.Close()
}

func (c *Conn) closeWrite() error {
	c.event(record.CloseWrite, 0)
	return c.ep.CloseWrite()
}

func (c *Conn) abort() {
	c.event(record.Abort, 0)
	c.ep.Abort()
}

func (c *Conn) keepAlive(cfg net.KeepAliveConfig) {
	if c.s.rec != nil {
		c.s.hasSendAt = false
		on := int64(0)
		if cfg.Enable {
			on = 1
		}
		c.s.rec.Event(&record.Event{Kind: record.KeepAlive, T: c.s.wheel.Now(), Local: c.id.Local, Remote: c.id.Remote,
			N: on, Args: []int64{int64(cfg.Idle), int64(cfg.Interval), int64(cfg.Count)}})
	}
	c.ep.SetKeepAlive(cfg.Enable, cfg.Idle, cfg.Interval, cfg.Count)
}
