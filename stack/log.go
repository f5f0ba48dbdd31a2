package stack

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"reflect"

	"github.com/tcpwheel/tcpwheel/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/header"
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
// reason that the packet counted (the Drops field's name), with its addresses
// where the header has them.
func (s *Stack) handleLogged(pkt []byte) {
	before := s.counters.Drops
	var src, dst netip.Addr
	if len(pkt) >= header.IPv4MinimumSize && pkt[0]>>4 == 4 {
		ip := header.IPv4(pkt)
		src, dst = netip.AddrFrom4(ip.SourceAddress().As4()), netip.AddrFrom4(ip.DestinationAddress().As4())
	}
	s.handlePacket(pkt)
	after := s.counters.Drops
	if after == before {
		return
	}
	b, a := reflect.ValueOf(before), reflect.ValueOf(after)
	for i := range a.NumField() {
		if a.Field(i).Uint() != b.Field(i).Uint() {
			s.log.Debug("packet dropped", "reason", a.Type().Field(i).Name, "src", src, "dst", dst, "len", len(pkt))
		}
	}
}

// logClosed logs, at info, a connection that ended in an error: reset by the
// peer, timed out, refused or aborted. A clean close is not logged.
func (s *Stack) logClosed(c *Conn) {
	err := c.ep.Err()
	if err == nil || errors.Is(err, tcp.ErrClosed) {
		return
	}
	i := c.ep.Info()
	s.log.Info("connection ended", "local", c.id.Local, "remote", c.id.Remote, "err", err,
		"retransmits", i.Counters.SegsRetransmitted, "rto_events", i.Counters.RTOEvents)
}
