package tcp

import "github.com/tcpwheel/tcpwheel/tcp/seqnum"

// fastRecovery is the state of fast retransmit and fast recovery (RFC 5681
// 3.2, RFC 6582 NewReno; with SACK, RFC 6675): the duplicate ACKs counted, and
// the recovery point. Entering and leaving recovery, and what is resent in it,
// live here; how cwnd and ssthresh respond is congestion control's (cc.go);
// RACK-TLP (rack.go) can start recovery too.
type fastRecovery struct {
	dupAcks int
	active  bool         // in fast recovery
	recover seqnum.Value // RFC 6582 "recover": the highest sequence number sent when recovery (or an RTO) began
	prr     prrState     // with SACK, Proportional Rate Reduction (RFC 6937) sizes what is sent
}

// prrState is Proportional Rate Reduction's state (RFC 6937 3) for a fast
// recovery with SACK. In bytes, as the RFC; Linux (tcp_cwnd_reduction)
// counts segments, which is the same while segments are full-sized.
type prrState struct {
	// recoverFS is RFC 6937's RecoverFS: what congestion control reduced
	// ssthresh from, so that the proportional part ends at ssthresh: the
	// flight size (RFC 6937, NewReno) or cwnd (Linux's prior_cwnd, CUBIC).
	recoverFS int
	delivered int // prr_delivered: data delivered to the peer since recovery began
	out       int // prr_out: data sent since recovery began
	// hold: an ACK is being processed (handleAck, with SACK). What fast
	// recovery would send waits until the ACK's delivered data is known and
	// PRR has sized cwnd (prrStep); entering recovery and marking losses do not.
	hold bool
	// newLoss: the ACK being processed marked a segment lost (it is not a
	// "safe" ACK, draft-ietf-tcpm-prr-rfc6937bis: no extra segment).
	newLoss bool
}

// pipe is RFC 6675's estimate of the data in the network: sent up to SND.NXT,
// not acknowledged, not SACKed and not marked lost by RACK (a lost segment
// counts again once resent).
//
// Without RACK, a segment is lost when DupThresh segments above it are
// SACKed (RFC 6675 4 IsLost), and one resent in this recovery counts once
// more (RFC 6675 4 SetPipe).
func (e *Endpoint) pipe() int {
	rack := e.rackOn()
	p, above := 0, 0 // above: segments SACKed above s
	for i := len(e.snd.rtxq) - 1; i >= 0; i-- {
		s := e.snd.rtxq[i]
		switch {
		case !s.seq.LessThan(e.snd.nxt):
			// waiting to be resent after an RTO
		case s.sacked:
			above++
		case rack:
			if !s.lost {
				p += int(s.len)
			}
		default:
			if above < dupThresh {
				p += int(s.len)
			}
			if s.rtxInRecovery {
				p += int(s.len)
			}
		}
	}
	return p
}

// sackRecovery reports fast recovery with SACK: the congestion window is not
// inflated by duplicate ACKs, and pipe, not the flight size, is held to it
// (RFC 6675 5).
func (e *Endpoint) sackRecovery() bool { return e.fr.active && e.sackOK }

// enterRecovery starts fast recovery on a loss found by the third duplicate
// ACK or by RACK: congestion control reduces ssthresh (RFC 5681 (4), RFC 6582
// 3.2 (2)), recover is the highest sequence number sent (RFC 6582 3.2 (2),
// RFC 6675 5 (2)), and PRR starts from the congestion window it reduces
// (RFC 6937 3: prr_delivered = prr_out = 0).
func (e *Endpoint) enterRecovery(by lossSignal) {
	from := e.cc.enterRecovery(e.snd.flightSize(), by)
	e.fr.recover = e.snd.max
	e.fr.active = true
	e.fr.prr = prrState{recoverFS: max(from, 1), hold: e.fr.prr.hold, newLoss: e.fr.prr.newLoss}
}

// prrStep is RFC 6937's step on an ACK in fast recovery with SACK (or on
// RACK's reordering timer starting recovery), after the ACK's SACK
// information and cumulative acknowledgment are taken and RACK has marked
// what is lost: delivered is its DeliveredData (the bytes SND.UNA advanced
// plus the change in bytes SACKed), advanced whether it moved SND.UNA. It
// sets cwnd to pipe + sndcnt, as Linux's tcp_cwnd_reduction, and resends
// what is lost within it; new data follows in output.
//
// While pipe is above ssthresh, the proportional part: sndcnt =
// CEIL(prr_delivered * ssthresh / RecoverFS) - prr_out. Below, the
// slow-start reduction bound, as draft-ietf-tcpm-prr-rfc6937bis and Linux
// by default: sndcnt = MIN(ssthresh - pipe, MAX(prr_delivered - prr_out,
// DeliveredData) + SMSS if the ACK is safe (it advanced SND.UNA and marked
// nothing newly lost)). The first step sends at least one segment (the fast
// retransmit). An ACK that delivers nothing leaves cwnd as it is. sndcnt is
// rounded up to whole segments, as Linux counts them.
func (e *Endpoint) prrStep(delivered int, advanced bool) {
	p := &e.fr.prr
	if delivered > 0 {
		p.delivered += delivered
		pipe, ssthresh, smss := e.pipe(), e.cc.ssthresh(), e.snd.smss
		var sndcnt int
		if pipe > ssthresh {
			sndcnt = (p.delivered*ssthresh+p.recoverFS-1)/p.recoverFS - p.out // RFC 6937 3: proportional
		} else {
			limit := max(p.delivered-p.out, delivered) // PRR-SSRB
			if advanced && !p.newLoss {
				limit += smss
			}
			sndcnt = min(ssthresh-pipe, limit)
		}
		if p.out == 0 {
			sndcnt = max(sndcnt, smss) // the fast retransmit goes out
		}
		sndcnt = (max(sndcnt, 0) + smss - 1) / smss * smss
		e.cc.setCwnd(pipe + sndcnt)
	}
	p.newLoss = false
	if e.rackOn() {
		e.rackRetransmitLost()
		return
	}
	for e.state != StateClosed && e.retransmitNextHole() { // the first is the fast retransmit, RFC 5681 3.2 (3)
	}
}

// prrAck runs prrStep for the ACK handleAck processed, in fast recovery
// with SACK: una and sacked are SND.UNA and the bytes SACKed before it.
func (e *Endpoint) prrAck(una seqnum.Value, sacked int) {
	e.fr.prr.hold = false
	if !e.sackRecovery() || e.state == StateClosed || len(e.snd.rtxq) == 0 {
		return
	}
	e.prrStep(int(e.snd.una-una)+e.sb.bytes-sacked, una != e.snd.una)
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
	if !e.fr.prr.hold {
		e.resendFirstHole() // with SACK, prrStep resends
	}
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
	e.splitGSO() // fast retransmit and limited transmit go by MSS-sized segments (gso.go)
	e.fr.dupAcks++
	if e.fr.active {
		e.cc.onRecoveryAck(0) // RFC 6582 3.2 (4)
		if !e.fr.prr.hold {
			e.output() // RFC 6582 3.2 (4): send new data as cwnd and rwnd allow; with SACK, prrStep sizes it
		}
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
	e.enterRecovery(lossDupAcks) // RFC 5681 (4) / RFC 6582 3.2 (2)
	if e.fr.prr.hold {
		// With SACK, PRR sizes what goes out once the ACK is processed
		// (prrAck). With RACK, the first segment counts as lost, as three
		// segments above it are SACKed (RFC 6675 4 IsLost), whatever RACK's
		// timing says of it.
		if h := e.snd.rtxq[0]; e.rackOn() && !h.sacked && !h.lost && h.seq.LessThan(e.snd.nxt) {
			h.lost = true
		}
		return
	}
	e.fastRetransmit(e.snd.rtxq[0]) // RFC 5681 3.2 (3): retransmit the lost segment
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
// (which otherwise decides what is lost), if pipe is below cwnd, the first
// segment below the highest SACKed byte (or the first unacknowledged one)
// that is neither SACKed nor already resent in this episode (the NextSeg()
// rule 1 of RFC 6675 4). It reports whether it resent one.
func (e *Endpoint) retransmitNextHole() bool {
	for i, s := range e.snd.rtxq {
		if i > 0 && !s.seq.LessThan(e.sb.high) || !s.seq.LessThan(e.snd.nxt) {
			return false
		}
		if s.sacked || s.rtxInRecovery {
			continue
		}
		if e.pipe() >= e.cc.cwnd() {
			return false
		}
		e.fastRetransmit(s)
		return true
	}
	return false
}
