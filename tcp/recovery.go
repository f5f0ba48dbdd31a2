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

// congestionOnAck grows or, in fast recovery, adjusts cwnd for an ACK that
// acknowledged acked new bytes.
func (e *Endpoint) congestionOnAck(acked int) {
	if e.fr.active {
		if !e.snd.una.LessThan(e.fr.recover) {
			// RFC 6582 3.2 (3): a full acknowledgment ends recovery.
			e.cwnd = min(e.ssthresh, max(e.snd.flightSize(), e.snd.smss)+e.snd.smss) // RFC 6582 3.2 (3) option 1
			e.fr.active, e.fr.dupAcks = false, 0
			e.clearRecoveryMarks()
			return
		}
		if e.sackOK {
			// RFC 6675 5: cwnd stays at ssthresh; pipe paces the recovery.
			if !e.rackOn() && len(e.snd.rtxq) > 0 && !e.snd.rtxq[0].sacked && !e.snd.rtxq[0].rtxInRecovery {
				h := e.snd.rtxq[0] // RFC 6675 NextSeg() rule 1: the first hole
				h.rtxInRecovery = true
				e.stats.FastRetransmits++
				e.transmit(h, true)
			}
			return
		}
		// RFC 6582 3.2 (3) partial acknowledgment: retransmit the first
		// unacknowledged segment, deflate cwnd by the amount acknowledged and add
		// back one SMSS if that amount was at least one SMSS.
		e.cwnd -= acked
		if acked >= e.snd.smss {
			e.cwnd += e.snd.smss
		}
		e.cwnd = max(e.cwnd, e.snd.smss)
		if len(e.snd.rtxq) > 0 && !e.snd.rtxq[0].sacked && !e.snd.rtxq[0].rtxInRecovery && !(e.rackOn() && e.sackOK) {
			// Once per episode: a segment already resent in it (by the SACK hole
			// rule, RFC 6675 NextSeg()) is not resent again on a partial ACK;
			// its timer, or RACK, finds it lost again. With RACK and SACK,
			// RACK alone decides what is lost (RFC 8985 7: retransmit what is
			// marked lost), so the partial ACK resends nothing itself.
			h := e.snd.rtxq[0]
			h.rtxInRecovery = true
			e.stats.FastRetransmits++
			e.transmit(h, true) // also resets its timer, RFC 6582 3.2 (3)
		}
		return
	}
	e.fr.dupAcks = 0
	if e.cwnd < e.ssthresh {
		e.cwnd += min(acked, e.snd.smss) // RFC 5681 (2): slow start, RFC 3465 L = 1 SMSS
	} else {
		e.caAcked += acked // RFC 5681 3.1 (3): congestion avoidance by bytes acked
		if e.caAcked >= e.cwnd {
			e.caAcked -= e.cwnd
			e.cwnd += e.snd.smss
		}
	}
}

func (e *Endpoint) clearRecoveryMarks() {
	for _, s := range e.snd.rtxq {
		s.rtxInRecovery = false
	}
}

// onDupAck counts a duplicate ACK: the third starts fast retransmit (RFC 5681
// 3.2, RFC 6582 3.2); later ones inflate cwnd and, with SACK, resend the next
// hole.
func (e *Endpoint) onDupAck() {
	e.fr.dupAcks++
	if e.fr.active {
		if !e.sackOK {
			e.cwnd += e.snd.smss // RFC 6582 3.2 (4): inflate by one SMSS per further duplicate ACK
		}
		if e.sackOK && !e.rackOn() {
			e.retransmitNextHole()
		}
		e.output() // RFC 6582 3.2 (4): send new data as cwnd and rwnd allow
		return
	}
	if e.fr.dupAcks < 3 || len(e.snd.rtxq) == 0 {
		return
	}
	if e.snd.una.LessThan(e.fr.recover) {
		// RFC 6582 3.2 (2): the ACK does not cover more than recover: these
		// duplicates belong to a flight already recovered; no fast retransmit.
		return
	}
	e.ssthresh = max(e.snd.flightSize()/2, 2*e.snd.smss) // RFC 5681 (4) / RFC 6582 3.2 (2)
	e.fr.recover = e.snd.max                             // RFC 6582 3.2 (2): recover <- highest sent
	e.fr.active = true
	h := e.snd.rtxq[0]
	h.rtxInRecovery = true
	e.stats.FastRetransmits++
	e.transmit(h, true)                // RFC 5681 3.2 (3): retransmit the lost segment
	e.cwnd = e.ssthresh + 3*e.snd.smss // RFC 6582 3.2 (2)/RFC 5681 3.2 (3): inflate by the three segments that left
	if e.sackOK {
		e.cwnd = e.ssthresh // RFC 6675 5 (4.2): pipe, not inflation, paces the rest
	}
	e.output()
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
		if e.snd.inflight()-e.sb.bytes >= e.cwnd {
			return
		}
		s.rtxInRecovery = true
		e.stats.FastRetransmits++
		e.transmit(s, true)
		return
	}
}
