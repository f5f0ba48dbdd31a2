package stack

import "net"

// SetNoDelay turns Nagle's algorithm off (true, the default: tcp.Config.Nagle
// false) or on, like net.TCPConn's (TCP_NODELAY). Turning it off sends the
// data it held back.
func (c *Conn) SetNoDelay(noDelay bool) error {
	if c.isClosed() {
		return c.opErr("set", net.ErrClosed)
	}
	if c.s.do(func() { c.ep.SetNoDelay(noDelay) }) != nil {
		return c.opErr("set", net.ErrClosed)
	}
	return nil
}
