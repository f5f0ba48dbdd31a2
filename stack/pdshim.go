package stack

import (
	"net"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
)

// What the packetdrill shim (conformance/shim) needs beyond net.Conn and
// net.Listener: poll(2)'s view of a connection or listener, and per-socket
// options set before listen(2) or connect(2).

// Readiness is what poll(2) would see on a connection.
type Readiness struct {
	State    tcp.State
	Readable int   // bytes received and not yet read
	Writable int   // room in the send buffer
	Err      error // why the connection failed, if it did (the endpoint's Err)
}

// Readiness returns the connection's Readiness, or net.ErrClosed after the
// stack's Close.
func (c *Conn) Readiness() (Readiness, error) {
	var r Readiness
	if c.s.do(func() {
		if c.ep == nil { // the endpoint went back to the spares (Conn.ep)
			r.State = tcp.StateClosed
			return
		}
		r.State, r.Err = c.ep.State(), c.ep.Err()
		c.mu.Lock()
		r.Readable = c.rx.len() + c.ep.Readable()
		r.Writable = max(0, c.ep.Writable()-c.tx.q.Pending())
		c.mu.Unlock()
	}) != nil {
		return r, net.ErrClosed
	}
	return r, nil
}

// Pending returns the number of connections waiting for Accept.
func (l *Listener) Pending() int { return len(l.acceptq) }

// SetTCPConfig replaces the TCP configuration that the listeners and
// connections started from now on take (Config.TCP); those that exist keep
// theirs. A zero MSS means the device's MTU less 40, as in New. It fails with a tcp.ErrInvalidConfig error for a configuration that
// cannot work, and with net.ErrClosed after Close.
func (s *Stack) SetTCPConfig(cfg tcp.Config) error {
	if cfg.MSS == 0 {
		cfg.MSS = s.cfg.Device.MTU() - ipv4HeaderLen - tcp.HeaderMinSize
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	shards := []*Stack{s}
	if s.grp != nil {
		shards = s.grp.shards // loops.go
	}
	for _, s := range shards {
		if s.do(func() { s.cfg.TCP = s.keepGenerators(cfg) }) != nil {
			return net.ErrClosed
		}
	}
	return nil
}

// keepGenerators is cfg with the stack's ISN generator and timestamp
// offsets where cfg leaves them nil: a configuration set later draws no new
// secrets (tcp.Config.TSOffset: the stack's connections to one address keep
// one timestamp clock) and keeps the recorder's wrappers. One that sets them
// gets them wrapped (wrapISN, wrapTSOffset). On the loop.
func (s *Stack) keepGenerators(cfg tcp.Config) tcp.Config {
	if cfg.ISN == nil {
		cfg.ISN = s.cfg.TCP.ISN
	} else {
		cfg.ISN = s.wrapISN(cfg.ISN)
	}
	if cfg.TSOffset == nil {
		cfg.TSOffset = s.cfg.TCP.TSOffset
	} else {
		cfg.TSOffset = s.wrapTSOffset(cfg.TSOffset)
	}
	return cfg
}

// SetSendBuffer changes the connection's send buffer (tcp.Endpoint.SetSendBuffer).
func (c *Conn) SetSendBuffer(n int) error {
	var err error
	if c.s.do(func() {
		if c.ep == nil {
			err = c.opErr("set", net.ErrClosed)
			return
		}
		if err = c.ep.SetSendBuffer(n); err == nil {
			c.mu.Lock()
			c.tx.limit = n
			c.mu.Unlock()
			c.wakeOn(&c.writable)
		}
	}) != nil {
		return c.opErr("set", net.ErrClosed)
	}
	return err
}

// SetUserTimeout changes the connection's user timeout (tcp.Endpoint.SetUserTimeout).
func (c *Conn) SetUserTimeout(d time.Duration) error {
	var err error
	if c.s.do(func() {
		if c.ep == nil {
			err = c.opErr("set", net.ErrClosed)
			return
		}
		err = c.ep.SetUserTimeout(d)
	}) != nil {
		return c.opErr("set", net.ErrClosed)
	}
	return err
}

// LossCounts returns the connection's tcp.Endpoint.LossCounts.
func (c *Conn) LossCounts() (lost, retrans int) {
	c.s.do(func() {
		if c.ep != nil {
			lost, retrans = c.ep.LossCounts()
		}
	})
	return lost, retrans
}

// SetTCPConfig replaces the TCP configuration of the connections the listener
// accepts from now on (tcp.Listener.SetEndpointConfig). A zero MSS means the
// device's MTU less 40, as in New.
func (l *Listener) SetTCPConfig(cfg tcp.Config) error {
	if cfg.MSS == 0 {
		cfg.MSS = l.s.cfg.Device.MTU() - ipv4HeaderLen - tcp.HeaderMinSize
	}
	var err error
	if l.s.do(func() { err = l.tl.SetEndpointConfig(l.s.keepGenerators(cfg)) }) != nil {
		return net.ErrClosed
	}
	return err
}
