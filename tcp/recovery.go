package tcp

import "gvisor.dev/gvisor/pkg/tcpip/seqnum"

// fastRecovery is the state of fast retransmit and fast recovery (RFC 5681
// 3.2, RFC 6582 NewReno; with SACK, RFC 6675): the duplicate ACKs counted, and
// the recovery point. Entering and leaving recovery, and what is resent in it,
// live here; how cwnd and ssthresh respond is congestion control's (cc.go);
// RACK-TLP (rack.go) can start recovery too.
type fastRecovery struct {
	dupAcks int
	active  bool         // in fast recovery
	recover seqnum.Value // RFC 6582 "recover": the highest sequence number sent when recovery (or an RTO) began
}

// pipe is RFC 6675's estimate of the data in the network: sent up to SND.NXT,
// not acknowledged, not SACKed and not marked lost by RACK (a lost segment
// counts again once resent).
func (e *Endpoint) pipe() int {
	p := e.snd.inflight() - e.sb.bytes
	if e.rackOn() {
		for _, s := range e.snd.rtxq {
			if !s.seq.LessThan(e.snd.nxt) {
				break
			}
			if s.lost {
				p -= int(s.len)
			}
		}
	}
	return max(p, 0)
}

// sackRecovery reports fast recovery with SACK: the congestion window is not
// inflated by duplicate ACKs, and pipe, not the flight size, is held to it
// (RFC 6675 5).
func (e *Endpoint) sackRecovery() bool { return e.fr.active && e.sackOK }

// enter starts fast recovery: recover is the highest sequence number sent
// (RFC 6582 3.2 (2), RFC 6675 5 (2)).
func (f *fastRecovery) enter(sndMax seqnum.Value) {
	f.recover = sndMax
	f.active = true
}

// congestionOnAck is the part of an ACK of acked new bytes that congestion
// control and fast recovery see: outside recovery cwnd grows; in it, a full
// ACK ends recovery (RFC 6582 3.2 (3)) and a partial one resends the first
// hole.
func (e *Endpoint) congestionOnAck(acked int) {
	if !e.fr.active {
		e.fr.dupAcks = 0
		if e.cwndLimited() {
			e.cc.onAck(acked)
		}
		return
	}
	if !e.snd.una.LessThan(e.fr.recover) {
		e.cc.exitRecovery(e.snd.flightSize()) // RFC 6582 3.2 (3): a full acknowledgment ends recovery
		e.fr.active, e.fr.dupAcks = false, 0
		e.clearRecoveryMarks()
		return
	}
	e.cc.onRecoveryAck(acked)
	e.resendFirstHole()
}

// cwndLimited reports whether the congestion window limited the sender in
// this window, so that an ACK may grow it (RFC 7661 4.x: a sender that is
// not using its cwnd must not grow it; as Linux's tcp_is_cwnd_limited): in
// slow start while cwnd is below twice the window's largest flight, in
// congestion avoidance while that flight came within one segment of cwnd.
func (e *Endpoint) cwndLimited() bool {
	cwnd := e.cc.cwnd()
	if cwnd < e.cc.ssthresh() {
		return cwnd < 2*e.snd.maxOut
	}
	return e.snd.maxOut+e.snd.smss > cwnd
}

// resendFirstHole is a partial ACK's retransmission: the first
// unacknowledged segment (RFC 6582 3.2 (3); with SACK, RFC 6675 NextSeg()
// rule 1, the first hole), once per episode: a segment already resent in it
// (by the SACK hole rule) is not resent again on a partial ACK; its timer,
// or RACK, finds it lost again. With RACK and SACK, RACK alone decides what
// is lost (RFC 8985 7: retransmit what is marked lost), so the partial ACK
// resends nothing itself.
func (e *Endpoint) resendFirstHole() {
	if (e.rackOn() && e.sackOK) || len(e.snd.rtxq) == 0 {
		return
	}
	if h := e.snd.rtxq[0]; !h.sacked && !h.rtxInRecovery {
		e.fastRetransmit(h) // also resets its timer, RFC 6582 3.2 (3)
	}
}

// fastRetransmit resends s in the current recovery episode.
func (e *Endpoint) fastRetransmit(s *txSeg) {
	s.rtxInRecovery = true
	e.stats.FastRetransmits++
	e.transmit(s, true)
}

func (e *Endpoint) clearRecoveryMarks() {
	for _, s := range e.snd.rtxq {
		s.rtxInRecovery = false
	}
}

// onDupAck counts a duplicate ACK: the third starts fast retransmit (RFC 5681
// 3.2, RFC 6582 3.2); later ones inflate cwnd (without SACK) and, with SACK
// and without RACK, resend the next hole.
func (e *Endpoint) onDupAck() {
	e.fr.dupAcks++
	if e.fr.active {
		e.cc.onRecoveryAck(0) // RFC 6582 3.2 (4)
		if e.sackOK && !e.rackOn() {
			e.retransmitNextHole()
		}
		e.output() // RFC 6582 3.2 (4): send new data as cwnd and rwnd allow
		return
	}
	if e.fr.dupAcks < 3 {
		e.limitedTransmit()
		return
	}
	if len(e.snd.rtxq) == 0 {
		return
	}
	if e.snd.una.LessThan(e.fr.recover) {
		// RFC 6582 3.2 (2): the ACK does not cover more than recover: these
		// duplicates belong to a flight already recovered; no fast retransmit.
		return
	}
	e.cc.enterRecovery(e.snd.flightSize(), lossDupAcks) // RFC 5681 (4) / RFC 6582 3.2 (2)
	e.fr.enter(e.snd.max)                               // RFC 6582 3.2 (2): recover <- highest sent
	e.fastRetransmit(e.snd.rtxq[0])                     // RFC 5681 3.2 (3): retransmit the lost segment
	e.output()
}

// limitedTransmit is RFC 3042: on each of the first two duplicate ACKs, one
// new segment, if the peer's window takes it and the flight stays within
// cwnd plus two segments; cwnd itself does not change.
func (e *Endpoint) limitedTransmit() {
	if e.fr.dupAcks > 2 || e.snd.nxt != e.snd.max || e.snd.finSent {
		return
	}
	n := min(e.snd.unsent(), e.snd.smss)
	inflight := e.snd.inflight()
	if n <= 0 || inflight+n > int(e.snd.wnd) || inflight+n > e.cc.cwnd()+e.fr.dupAcks*e.snd.smss {
		return
	}
	e.sendData(n, false)
}

// retransmitNextHole resends, in fast recovery with SACK and without RACK
// (which otherwise decides what is lost), the first segment
// below the highest SACKed byte that is neither SACKed nor already resent in
// this episode (the NextSeg() rule 1 of RFC 6675 4).
func (e *Endpoint) retransmitNextHole() {
	for _, s := range e.snd.rtxq {
		if !s.seq.LessThan(e.sb.high) {
			return
		}
		if s.sacked || s.rtxInRecovery {
			continue
		}
		if e.snd.inflight()-e.sb.bytes >= e.cc.cwnd() {
			return
		}
		e.fastRetransmit(s)
		return
	}
}
