package stack

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"
	"github.com/tcpwheel/tcpwheel/tcp"
)

// setLogger installs l (nil: discard) and notes whether it wants the
// per-packet drop records, so that a stack without a debug logger pays one
// bool test per packet.
func (s *Stack) setLogger(l *slog.Logger) {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	s.log = l
	s.logDrops = l.Enabled(context.Background(), slog.LevelDebug)
}

// handleLogged handles pkt as handlePacket does, then logs at debug each drop
// counter that the packet moved (see DropCount for the names), with its
// addresses where the header has them: the stack's, and those of the TCP
// connection or listener the segment went to.
func (s *Stack) handleLogged(pkt []byte) {
	var c *Conn
	var l *Listener
	src, dst, proto, off, end, ok := transportOf(pkt)
	switch {
	case ok:
		c, l = s.tcpTarget(proto, pkt[off:end], src, dst)
	case len(pkt) >= header.IPv4MinimumSize && pkt[0]>>4 == 4: // malformed, or a fragment: its addresses all the same
		ip := header.IPv4(pkt)
		src, dst = netip.AddrFrom4(ip.SourceAddress().As4()), netip.AddrFrom4(ip.DestinationAddress().As4())
	case len(pkt) >= ipv6HeaderLen && pkt[0]>>4 == 6:
		src, dst = netip.AddrFrom16([16]byte(pkt[8:24])), netip.AddrFrom16([16]byte(pkt[24:40]))
	}
	counts := func() []DropCount {
		var conn tcp.Counters
		var listen tcp.ListenerStats
		if c != nil {
			conn = c.ep.Info().Counters
		}
		if l != nil {
			listen = l.tl.Stats()
		}
		return dropCounts(s.counters.Drops, conn, listen, nil)
	}
	before := counts()
	s.handlePacket(pkt)
	for i, r := range counts() {
		if r.N != before[i].N {
			s.log.Debug("packet dropped", "reason", r.Name, "src", src, "dst", dst, "len", len(pkt))
		}
	}
}

// tcpTarget is the connection and the listener a TCP segment b (of an IP
// packet of protocol proto) would reach, if any (the demultiplexer's
// lookup, without its checks).
func (s *Stack) tcpTarget(proto uint8, b []byte, src, dst netip.Addr) (*Conn, *Listener) {
	if proto != protoTCP || len(b) < header.TCPMinimumSize {
		return nil, nil
	}
	t := header.TCP(b)
	id := tcp.ID{Local: netip.AddrPortFrom(dst, t.DestinationPort()), Remote: netip.AddrPortFrom(src, t.SourcePort())}
	return s.conns[id], s.listeners[t.DestinationPort()]
}

// logClosed logs, at info, a connection that ended in an error: reset by the
// peer, timed out, refused or aborted. A clean close is not logged.
func (s *Stack) logClosed(c *Conn) {
	err := c.ep.Err()
	if err == nil || errors.Is(err, tcp.ErrClosed) || !s.log.Enabled(context.Background(), slog.LevelInfo) {
		return // (the arguments of a discarded record are allocations all the same)
	}
	i := c.ep.Info()
	s.log.Info("connection ended", "local", c.id.Local, "remote", c.id.Remote, "err", err,
		"retransmits", i.Counters.SegsRetransmitted, "rto_events", i.Counters.RTOEvents)
}
