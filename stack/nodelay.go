package stack

import "net"

// SetNoDelay turns Nagle's algorithm off (true, the default: tcp.Config.Nagle
// false) or on, like net.TCPConn's (TCP_NODELAY). Turning it off sends the
// data it held back.
func (c *Conn) SetNoDelay(noDelay bool) error {
	if c.isClosed() {
		return c.opErr("set", net.ErrClosed)
	}
	var gone bool // the endpoint went back to the spares (Conn.ep)
	if c.s.do(func() {
		if gone = c.ep == nil; !gone {
			c.ep.SetNoDelay(noDelay)
		}
	}) != nil || gone {
		return c.opErr("set", net.ErrClosed)
	}
	return nil
}
