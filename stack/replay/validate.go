package replay

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tcpwheel/tcpwheel/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/seqnum"
)

// side is what Validate knows of one end of the connection.
type side struct {
	isn, sndMax seqnum.Value // sndMax: the highest sequence number sent, plus one
	synSeen     bool
	ws          uint8 // the window scale it announced
	hasWS       bool
	// The right edge of the window it advertised last: ack + window.
	rwndEdge seqnum.Value
	hasEdge  bool
}

// Validate checks a capture of any two stacks for protocol validity, not
// equality: every ACK acknowledges only what the other side sent (RFC 9293
// 3.10.7.4: SND.UNA < SEG.ACK =< SND.NXT), and every data segment lies within
// the window that its receiver advertised (RFC 9293 3.8.6), a one-byte
// zero-window probe excepted. The session already guarantees one connection
// that starts with a SYN. The error lists the offending packets.
func Validate(sess *Session) error {
	var sides [2]side // 0: the first SYN's sender, 1: the other
	first := sess.Packets[0].Src
	var errs []string
	bad := func(p *Packet, format string, a ...any) {
		errs = append(errs, fmt.Sprintf("packet %d (%v -> %v [%v]): %s", p.N, p.Src, p.Dst, p.Seg.Flags, fmt.Sprintf(format, a...)))
	}
	for i := range sess.Packets {
		p := &sess.Packets[i]
		me, peer := &sides[0], &sides[1]
		if p.Src != first {
			me, peer = peer, me
		}
		seg := &p.Seg
		if seg.Flags&tcp.FlagSYN != 0 {
			if !me.synSeen {
				me.isn, me.sndMax, me.synSeen = seg.Seq, seg.Seq, true
				me.ws, me.hasWS = seg.Options.WindowScale, seg.Options.HasWS
			} else if seg.Seq != me.isn {
				bad(p, "SYN with sequence %d, not the ISN %d", uint32(seg.Seq), uint32(me.isn))
			}
		}
		if !me.synSeen && seg.Flags&tcp.FlagRST == 0 {
			bad(p, "data or ACK before this side's SYN")
			continue
		}
		if seg.Flags&tcp.FlagACK != 0 && seg.Flags&tcp.FlagRST == 0 {
			switch {
			case !peer.synSeen:
				bad(p, "ACK before the other side's SYN")
			case peer.sndMax.LessThan(seg.Ack):
				bad(p, "unacceptable ACK: acknowledges %d bytes never sent", uint32(seg.Ack-peer.sndMax))
			case seg.Ack.LessThanEq(peer.isn):
				bad(p, "unacceptable ACK: at or before the other side's ISN")
			}
		}
		if me.synSeen && seg.Flags&tcp.FlagRST == 0 {
			if end := seg.End(); me.sndMax.LessThan(end) {
				me.sndMax = end
			}
			if n := len(seg.Payload); n > 0 && peer.hasEdge {
				dataEnd := seg.Seq.Add(seqnum.Size(n))
				if peer.rwndEdge.LessThan(dataEnd) && !(n == 1 && seg.Seq == peer.rwndEdge) {
					bad(p, "data beyond the receiver's window by %d bytes", uint32(dataEnd-peer.rwndEdge))
				}
			}
		}
		if seg.Flags&tcp.FlagACK != 0 && seg.Flags&tcp.FlagRST == 0 {
			wnd := uint32(seg.Window)
			if seg.Flags&tcp.FlagSYN == 0 && me.hasWS && peer.hasWS {
				wnd <<= me.ws // RFC 7323 2.3: not scaled in a SYN
			}
			edge := seg.Ack.Add(seqnum.Size(wnd))
			if !me.hasEdge || me.rwndEdge.LessThan(edge) {
				me.rwndEdge, me.hasEdge = edge, true // the edge never shrinks (RFC 9293 3.8.6)
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New("replay: invalid capture:\n  " + strings.Join(errs, "\n  "))
}
