package replay

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
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
	for i := range sess.Packets {
		p := &sess.Packets[i]
		me, peer := &sides[0], &sides[1]
		if p.Src != first {
			me, peer = peer, me
		}
		for _, e := range checkPacket(me, peer, &p.Seg) {
			errs = append(errs, fmt.Sprintf("packet %d (%v -> %v [%v]): %s", p.N, p.Src, p.Dst, p.Seg.Flags, e))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New("replay: invalid capture:\n  " + strings.Join(errs, "\n  "))
}

// checkPacket checks one segment that me sent to peer, updates what is known
// of both, and returns what is wrong with it.
func checkPacket(me, peer *side, seg *tcp.Segment) []string {
	var errs []string
	if e := me.onSYN(seg); e != "" {
		errs = append(errs, e)
	}
	rst := seg.Flags&tcp.FlagRST != 0
	if !me.synSeen && !rst {
		return append(errs, "data or ACK before this side's SYN")
	}
	ack := seg.Flags&tcp.FlagACK != 0 && !rst
	if ack {
		if e := peer.checkAck(seg.Ack); e != "" {
			errs = append(errs, e)
		}
	}
	if me.synSeen && !rst {
		if e := me.onSend(peer, seg); e != "" {
			errs = append(errs, e)
		}
	}
	if ack {
		me.onAdvertise(peer, seg)
	}
	return errs
}

// onSYN records the ISN and window scale of s's first SYN, and checks
// that a repeated SYN keeps the ISN.
func (s *side) onSYN(seg *tcp.Segment) string {
	if seg.Flags&tcp.FlagSYN == 0 {
		return ""
	}
	if !s.synSeen {
		s.isn, s.sndMax, s.synSeen = seg.Seq, seg.Seq, true
		s.ws, s.hasWS = seg.Options.WindowScale, seg.Options.HasWS
		return ""
	}
	if seg.Seq != s.isn {
		return fmt.Sprintf("SYN with sequence %d, not the ISN %d", uint32(seg.Seq), uint32(s.isn))
	}
	return ""
}

// checkAck checks an ACK of what s sent, from the other side (RFC 9293
// 3.10.7.4).
func (s *side) checkAck(ack seqnum.Value) string {
	switch {
	case !s.synSeen:
		return "ACK before the other side's SYN"
	case s.sndMax.LessThan(ack):
		return fmt.Sprintf("unacceptable ACK: acknowledges %d bytes never sent", uint32(ack-s.sndMax))
	case ack.LessThanEq(s.isn):
		return "unacceptable ACK: at or before the other side's ISN"
	}
	return ""
}

// onSend advances s's highest sequence sent and checks that the
// segment's data lies within peer's advertised window (RFC 9293 3.8.6), a
// one-byte zero-window probe excepted.
func (s *side) onSend(peer *side, seg *tcp.Segment) string {
	if end := seg.End(); s.sndMax.LessThan(end) {
		s.sndMax = end
	}
	n := len(seg.Payload)
	if n == 0 || !peer.hasEdge {
		return ""
	}
	dataEnd := seg.Seq.Add(seqnum.Size(n))
	if peer.rwndEdge.LessThan(dataEnd) && !(n == 1 && seg.Seq == peer.rwndEdge) {
		return fmt.Sprintf("data beyond the receiver's window by %d bytes", uint32(dataEnd-peer.rwndEdge))
	}
	return ""
}

// onAdvertise records the right edge of the window s advertised in an
// ACK.
func (s *side) onAdvertise(peer *side, seg *tcp.Segment) {
	wnd := uint32(seg.Window)
	if seg.Flags&tcp.FlagSYN == 0 && s.hasWS && peer.hasWS {
		wnd <<= s.ws // RFC 7323 2.3: not scaled in a SYN
	}
	edge := seg.Ack.Add(seqnum.Size(wnd))
	if !s.hasEdge || s.rwndEdge.LessThan(edge) {
		s.rwndEdge, s.hasEdge = edge, true // the edge never shrinks (RFC 9293 3.8.6)
	}
}
