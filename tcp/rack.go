package tcp

import (
	"time"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// RACK-TLP (RFC 8985): time-based loss detection and tail-loss probes. The
// design, and how its two timers live beside the per-segment RTO entries, is
// described in timers.go and in the package documentation.

// rackState is RFC 8985 5.3's per-connection state.
type rackState struct {
	// RACK.xmit_ts, RACK.end_seq, RACK.rtt: the most recently sent segment
	// among those delivered (cumulatively ACKed or SACKed), and its RTT.
	xmitTS time.Duration
	endSeq seqnum.Value
	order  uint64 // the delivered segment's transmission order (txSeg.order)
	// xmits numbers every transmission of a data segment, in the order sent.
	xmits uint64
	rtt   time.Duration
	valid bool // a segment has been delivered since the connection began
	// RACK.fack: the highest sequence number delivered.
	fack seqnum.Value
	// RACK.reordering_seen: a segment below RACK.fack was delivered without
	// having been retransmitted.
	reorderingSeen bool

	// TLP.end_seq and TLP.is_retrans (RFC 8985 5.3): the probe of the current
	// episode, while tlpActive.
	tlpActive    bool
	tlpEndSeq    seqnum.Value
	tlpIsRetrans bool

	// recProbeOut: a recovery probe went out and no ACK has come since.
	recProbeOut bool
	// ptoCapped: the PTO armed was capped at the RTO's expiration (armPTO).
	ptoCapped bool
}

// dupThresh is RFC 8985 6.2 step 4's DupThresh (RFC 6675's).
const dupThresh = 3

func (e *Endpoint) rackOn() bool { return !e.cfg.DisableRACKTLP }

// rackSentAfter is RFC 8985 6.2's RACK_sent_after: t1 later than t2, or as
// late and sent after it. Segments sent within one clock tick share a time;
// the RFC breaks the tie by sequence number, which is wrong for a
// retransmission sent in the same tick after new data of a higher sequence
// (it would be judged lost as soon as that data was delivered). The
// transmission order breaks it here.
func rackSentAfter(t1 time.Duration, o1 uint64, t2 time.Duration, o2 uint64) bool {
	return t1 > t2 || (t1 == t2 && o1 > o2)
}

// rackDelivered is RFC 8985 6.2 steps 2 and 3 for a segment that the ACK being
// processed newly acknowledges or SACKs.
func (e *Endpoint) rackDelivered(s *txSeg) { e.rackDeliveredAt(s, e.now()) }

// rackDeliveredAt is rackDelivered with the wheel's Now read by the caller
// (now), once for all the segments an ACK delivers.
func (e *Endpoint) rackDeliveredAt(s *txSeg, now time.Duration) {
	if !e.rackOn() || s.flags&FlagSYN != 0 {
		return
	}
	rtt := now - s.sentAt
	if s.xmits > 1 && rtt < e.rtt.minSeen && now-s.prevSentAt <= e.rtt.srtt+rttK*e.rtt.rttvar {
		// RFC 8985 6.2 step 2: the ACK may be for the earlier transmission: an
		// RTT below the minimum says so. Unless that transmission is older
		// than RFC 6298's bound on an RTT (SRTT + 4*RTTVAR, unclamped): a tail
		// probe's original is always, so a SACK of the probe counts, however
		// close to the minimum RTT the path's jitter brings its RTT. (The
		// RFC's other test, a TSecr older than this transmission, is left out,
		// as Linux does: RFC 7323 4.3 makes a receiver echo the last in-order
		// segment's TSval, so a SACK of an out-of-order retransmission carries
		// an older echo.)
		return
	}
	// RFC 8985 6.2 step 2: RACK.rtt is that of every segment delivered, the
	// last one processed setting it; as Linux (tcp_rack_advance) in the order
	// the ACK is processed (by sequence), not the RFC's order of
	// transmission: a cumulative ACK that covers a retransmission and older
	// originals above it leaves the originals' longer RTT, so that segments
	// sent with them are not judged lost by the retransmission's shorter one.
	e.rack.rtt = rtt
	if !e.rack.valid || rackSentAfter(s.sentAt, s.order, e.rack.xmitTS, e.rack.order) {
		e.rack.xmitTS, e.rack.endSeq, e.rack.order, e.rack.valid = s.sentAt, s.end(), s.order, true // RFC 8985 6.2 step 2
	}
	if e.rack.fack.LessThan(s.end()) {
		e.rack.fack = s.end() // RFC 8985 6.2 step 3
	} else if s.end().LessThan(e.rack.fack) && s.xmits == 1 {
		e.rack.reorderingSeen = true // RFC 8985 6.2 step 3: delivered out of order, never resent
	}
}

// recovering reports fast recovery or RTO recovery: SND.UNA has not reached
// the recovery point of either (RFC 6582 "recover").
func (e *Endpoint) recovering() bool { return e.fr.active || e.snd.una.LessThan(e.fr.recover) }

// rackReoWnd is RFC 8985 6.2 step 4 (RACK_update_reo_wnd), without the DSACK
// adaptation: RACK.reo_wnd_mult stays 1.
func (e *Endpoint) rackReoWnd() time.Duration {
	if !e.rack.reorderingSeen {
		if e.recovering() {
			return 0 // RFC 8985 6.2 step 4: in fast or RTO recovery
		}
		if e.sb.segs >= dupThresh {
			return 0 // RFC 8985 6.2 step 4: RACK.segs_sacked >= DupThresh
		}
	}
	return min(e.rtt.minSeen/4, e.rtt.srtt) // RFC 8985 6.2 step 4: min(RACK.min_RTT / 4, SRTT)
}

// rackDetectLoss is RFC 8985 6.2 step 5 (RACK_detect_loss_and_arm_timer): a
// segment sent RACK.rtt + RACK.reo_wnd before the most recently sent one that
// was delivered is lost; one sent later than that, but before it, may still
// be reordered, and the reordering timer runs until it cannot be. It then
// retransmits what is lost.
func (e *Endpoint) rackDetectLoss() {
	if !e.rack.valid || !e.sackOK {
		// RACK needs SACK (RFC 8985 4): without it, segments sent before a
		// delivered retransmission look lost while they are merely not yet
		// cumulatively acknowledged. Duplicate ACKs and the RTO detect loss,
		// and TLP still probes the tail.
		return
	}
	reo := e.rackReoWnd()
	now := e.now()
	var timeout time.Duration
	lost := false
	for _, s := range e.snd.rtxq {
		if !s.seq.LessThan(e.snd.nxt) {
			break // waiting to be resent after an RTO (go-back-N)
		}
		if s.sacked || s.lost || s.flags&FlagSYN != 0 {
			continue
		}
		if !rackSentAfter(e.rack.xmitTS, e.rack.order, s.sentAt, s.order) {
			if s.xmits == 1 {
				// Sent once, not before RACK's segment: nor was anything
				// after it, since first transmissions go in sequence order
				// (a segment resent went last). Linux's tcp_rack_detect_loss
				// stops there too, on its queue in order sent. Without the
				// stop, every ACK of a bulk sender looked at each segment in
				// flight (a 2 MB buffer's 1449): 10% of a download's CPU.
				break
			}
			continue
		}
		if remaining := s.sentAt + e.rack.rtt + reo - now; remaining <= 0 {
			s.lost = true // RFC 8985 6.2 step 5: Segment.lost = TRUE
			lost = true
		} else {
			timeout = max(timeout, remaining) // RFC 8985 6.2 step 5
		}
	}
	if timeout > 0 {
		e.stopTimer(timerPTO)               // RFC 8985 8: one of the reordering timer and the PTO
		e.startTimer(timerReorder, timeout) // RFC 8985 6.2 step 5: arm the RACK timer
	} else {
		e.stopTimer(timerReorder)
	}
	if lost {
		e.fr.prr.newLoss = true
		e.rackRecover()
	}
	if !e.fr.prr.hold {
		e.rackRetransmitLost() // within an ACK, prrAck resends
	}
}

// rackRecover starts fast recovery for a loss RACK detected (RFC 8985 3.3:
// RACK-TLP triggers it instead of, or before, the third duplicate ACK).
func (e *Endpoint) rackRecover() {
	if e.recovering() {
		return
	}
	e.enterRecovery(lossRACK)
	e.stopTimer(timerPTO) // RFC 8985 7.2: no probes in fast recovery
	if !e.fr.prr.hold {
		// RACK's reordering timer: no ACK; as Linux (tcp_rack_reo_timeout),
		// PRR's first step counts one segment delivered.
		e.prrStep(e.snd.smss, false)
	}
}

// rackRetransmitLost resends the segments RACK marked lost, lowest first, as
// long as the data in the network (RFC 6675's pipe: sent, not SACKed, not
// lost) is below cwnd (in recovery, as PRR set it: prrStep).
func (e *Endpoint) rackRetransmitLost() {
	lostBytes := 0
	for _, s := range e.snd.rtxq {
		if s.lost {
			lostBytes += int(s.len)
		}
	}
	if lostBytes == 0 {
		return
	}
	for _, s := range e.snd.rtxq {
		if !s.seq.LessThan(e.snd.nxt) || e.state == StateClosed {
			return
		}
		if !s.lost {
			continue
		}
		pipe := e.snd.inflight() - e.sb.bytes - lostBytes
		if pipe >= e.cc.cwnd() {
			return
		}
		lostBytes -= int(s.len)
		e.stats.RACKRetransmits++
		e.fastRetransmit(s) // RFC 8985 6.1: Segment.lost = FALSE, a new xmit_ts
	}
}

// onReorderTimer runs RACK's reordering timer (RFC 8985 6.2 step 5, 8).
func (e *Endpoint) onReorderTimer() {
	defer e.flush()
	if !e.state.canSendData() || len(e.snd.rtxq) == 0 {
		return
	}
	e.splitGSO() // RACK marks MSS-sized segments lost (gso.go)
	e.stats.RACKReorderTimeouts++
	e.rackDetectLoss()
	e.armPTO() // the recovery probe, if the retransmissions it sent meet silence
}

// rackOnAck runs RACK-TLP's part of an acceptable ACK, after SND.UNA and the
// SACK scoreboard were updated (steps 2 and 3 ran for each segment then).
// advanced: the ACK acknowledged new data.
func (e *Endpoint) rackOnAck(seg *Segment, advanced bool) {
	e.tlpOnAck(seg, advanced)
	if len(e.snd.rtxq) == 0 {
		e.stopTimer(timerPTO)
		e.stopTimer(timerReorder)
		return
	}
	e.rackDetectLoss()
	if e.state == StateClosed {
		return
	}
	e.rack.recProbeOut = false // an ACK: the ACK clock runs
	if advanced || !e.tlpAllowed() {
		e.armPTO() // RFC 8985 7.2: restart on an ACK of new data; stop once not allowed
	}
}

// tlpOnAck is RFC 8985 7.4.2 (TLP_process_ack): the end of a probe episode.
// A probe of new data, or one the peer reports with a D-SACK (RFC 2883) as a
// duplicate, repaired nothing. A retransmission that is acknowledged and
// followed by an ACK beyond it repaired a loss: congestion control responds,
// as it would have to the fast recovery the probe spared. A pure duplicate
// ACK at the probe (no SACK: the peer had the data) ends the episode too.
func (e *Endpoint) tlpOnAck(seg *Segment, advanced bool) {
	r := &e.rack
	if !r.tlpActive || seg.Ack.LessThan(r.tlpEndSeq) {
		return
	}
	switch {
	case !r.tlpIsRetrans:
		r.tlpActive = false // RFC 8985 7.4.2: TLP of new data delivered
	case e.dsackCovers(seg, r.tlpEndSeq):
		r.tlpActive = false // RFC 8985 7.4.2: the retransmission was redundant
	case r.tlpEndSeq.LessThan(seg.Ack):
		r.tlpActive = false // RFC 8985 7.4.2: the probe repaired a single loss
		e.stats.TLPRecoveries++
		e.cc.onProbeRepair() // RFC 8985 7.4.2: lower cwnd and ssthresh
	case !advanced && seg.Options.NSACK == 0 && len(seg.Payload) == 0:
		r.tlpActive = false // RFC 8985 7.4.2: a duplicate ACK without SACK
	}
}

// dsackCovers reports whether seg's first SACK block is a D-SACK (RFC 2883 4:
// below SEG.ACK) that ends at end.
func (e *Endpoint) dsackCovers(seg *Segment, end seqnum.Value) bool {
	if !e.sackOK || seg.Options.NSACK == 0 {
		return false
	}
	b := seg.Options.SACK[0]
	return b.End.LessThanEq(seg.Ack) && b.Start.LessThan(end) && end.LessThanEq(b.End)
}

// tlpAllowed is RFC 8985 7.2's condition for scheduling a probe: data in
// flight, an SRTT, not in fast or RTO recovery, nothing SACKed, no probe
// outstanding (7.3: one per episode), and the RTO timer running.
func (e *Endpoint) tlpAllowed() bool {
	return e.probeable() && !e.rack.tlpActive && !e.recovering() && e.snd.nxt == e.snd.max && e.sb.bytes == 0
}

// probeable is what a tail-loss probe and a recovery probe both need: RACK-TLP
// on, data in flight on a connection that may send it, and not the SYN, an
// SRTT, no RTO backoff under way, and the oldest segment's RTO timer running.
func (e *Endpoint) probeable() bool {
	if !e.rackOn() || len(e.snd.rtxq) == 0 || !e.state.canSendData() {
		return false
	}
	h := e.snd.rtxq[0]
	return h.flags&FlagSYN == 0 && e.rtt.hasSample && e.snd.rtoRetries == 0 && h.entry.Pending()
}

// recoveryProbeAllowed is the condition for a probe in fast recovery (Config.
// DisableRecoveryProbe): in fast recovery (not RTO recovery), with SACK, no
// probe sent since the last ACK, RACK's reordering timer not running (it acts
// first), and the RTO timer running.
func (e *Endpoint) recoveryProbeAllowed() bool {
	return !e.cfg.DisableRecoveryProbe && e.sackOK && e.fr.active && !e.rack.recProbeOut &&
		!e.timerPending(timerReorder) && e.probeable()
}

// armPTO (re)starts the probe timeout (RFC 8985 7.2), or stops it when no
// probe may be scheduled. In fast recovery, the same timeout arms the
// recovery probe (recoveryProbeAllowed), restarted by every ACK. The PTO is
// 2*SRTT plus Config.TLPSlack (Linux's TCP_TIMEOUT_MIN, 2 ms), or plus
// TLP.max_ack_delay when the flight is one segment, whatever it carries (data,
// our FIN, both): Linux's tcp_schedule_loss_probe adds TCP_RTO_MIN whenever
// packets_out == 1. (A FIN is not answered faster than data: a peer that
// delays its ACKs, or a busy one, may hold the ACK of our FIN too, and a probe
// ahead of it is a spurious resend.) RFC 8985 7.2 caps the PTO at the RTO's
// expiry; here a PTO that would not come first is not armed at all, and the
// RTO entry of the oldest segment fires as it always does.
func (e *Endpoint) armPTO() {
	if !e.tlpAllowed() && !e.recoveryProbeAllowed() {
		e.stopTimer(timerPTO)
		return
	}
	extra := max(e.cfg.TLPSlack, 0) // as Linux: 2*SRTT + TCP_TIMEOUT_MIN
	if e.onePacketInFlight() {
		extra = max(extra, e.cfg.TLPMaxAckDelay) // RFC 8985 7.2: FlightSize is one segment: PTO += TLP.max_ack_delay (WCDelAckT)
	}
	pto := 2*e.rtt.srtt + extra // RFC 8985 7.2: PTO = 2*SRTT
	e.rack.ptoCapped = false
	if rem := e.snd.rtxq[0].rtoAt - e.now(); pto >= rem {
		// RFC 8985 7.2 lets the RTO fire instead when Now() + PTO is past
		// its expiration; Linux (tcp_schedule_loss_probe) caps the PTO at the
		// RTO and sends the probe there, and the probe re-arms the RTO
		// without backoff (onPTO): a lone segment (a FIN) is resent after
		// one RTO, then after another, before the backoff starts. As Linux:
		// the probe goes one tick before the RTO would.
		pto = rem - e.w.Tick()
		if pto <= 0 {
			e.stopTimer(timerPTO)
			return
		}
		e.rack.ptoCapped = true
	}
	e.startTimer(timerPTO, pto)
}

// onePacketInFlight reports whether what is in flight is RFC 8985 7.2's "one
// segment", whose ACK the peer may delay: one segment, or, with
// Config.FINJoinsData, a data segment and the bare FIN sent right after it
// at the same instant (a Close in the turn of the last Write: the stack's
// frame carries both as one packet, data+FIN, stack/offload.go). Linux
// counts such a FIN on the data's skb as one packet (packets_out == 1 in
// tcp_schedule_loss_probe), and a Linux peer that takes a FIN enters
// pingpong mode: its ACK waits for its own FIN, often longer than 2*SRTT.
func (e *Endpoint) onePacketInFlight() bool {
	q := e.snd.rtxq
	switch {
	case len(q) == 1:
		return q[0].gsoPieces() <= 1 // a TSO segment is its pieces (gso.go)
	case len(q) == 2 && e.cfg.FINJoinsData:
		return finRodeOn(q[0], q[1]) && q[1].xmits == 1
	}
	return false
}

// finRodeOn reports whether f is a bare FIN that went out with the data
// segment d before it, at the same instant, as often as d: with
// Config.FINJoinsData, one packet, data+FIN (stack/offload.go).
func finRodeOn(d, f *txSeg) bool {
	return d.gsoPieces() == 1 && f.flags&FlagFIN != 0 && f.len == 1 && f.seq == d.end() && f.sentAt == d.sentAt &&
		f.xmits == d.xmits && d.flags&(FlagSYN|FlagFIN) == 0 && d.dataLen() > 0
}

// probeWithFIN returns the data segment the last segment in flight, a bare
// FIN, rode on as one packet (finRodeOn), which the tail-loss probe then
// resends with it: the probe is the last packet sent again, data+FIN, as
// Linux's tcp_send_loss_probe resends the last skb, which holds both. A
// probe of the FIN alone leaves the data's loss to RACK, which cannot use
// the probe's SACK when it comes back sooner than the least RTT seen (RFC
// 8985 6.2: a retransmission's ambiguous ACK), and then to the RTO, 200 ms
// on. Only with Config.GSOMax as well (a stack that sets both, since
// 2026-11-24): a recording without GSOMax replays with the FIN probed alone,
// as it was recorded.
func (e *Endpoint) probeWithFIN() *txSeg {
	q := e.snd.rtxq
	if !e.cfg.FINJoinsData || e.cfg.GSOMax <= 0 || len(q) < 2 {
		return nil
	}
	if d, f := q[len(q)-2], q[len(q)-1]; finRodeOn(d, f) && !d.sacked && !f.sacked {
		return d
	}
	return nil
}

// onPTO sends the tail-loss probe (RFC 8985 7.3): a new segment if there is
// unsent data the peer's window takes (cwnd is not consulted), else the
// highest-sequence segment sent again. One probe per episode: TLP.end_seq
// stays set until an ACK ends the episode (7.4), and no PTO is armed meanwhile.
// The RTO entries keep running (7.3: after the probe the RTO is armed, not the
// PTO): an unanswered probe ends in the RTO.
func (e *Endpoint) onPTO() {
	defer e.flush()
	e.splitGSO() // a probe resends the last MSS-sized segment (gso.go)
	if e.recoveryProbeAllowed() {
		e.recoveryProbe()
		return
	}
	if !e.tlpAllowed() {
		return
	}
	e.stats.TLPProbes++
	r := &e.rack
	if e.sendNewSegment() {
		r.tlpIsRetrans = false // RFC 8985 7.3: new data
	} else {
		r.tlpIsRetrans = true // RFC 8985 7.3: retransmit the highest-sequence segment
		last := e.snd.rtxq[len(e.snd.rtxq)-1]
		if d := e.probeWithFIN(); d != nil {
			e.transmit(d, true) // the packet the FIN rode on, whole
			if e.state == StateClosed {
				return
			}
		}
		e.transmit(last, true) // its RTO entry restarts: RFC 8985 7.3 arms the RTO
	}
	if len(e.snd.rtxq) > 0 && e.snd.rtxq[0].entry.Pending() {
		e.armRTO(e.snd.rtxq[0]) // RFC 8985 7.3: "MUST re-arm the RTO timer" after a probe, from the probe, not backed off (as Linux)
	}
	r.ptoCapped = false
	if e.state == StateClosed {
		return
	}
	r.tlpActive, r.tlpEndSeq = true, e.snd.max // RFC 8985 7.3: TLP.end_seq = SND.NXT
}

// recoveryProbe is the probe in fast recovery: no ACK for a PTO, so the ACKs
// that would clock the recovery were lost, or the segments they answer. Like
// a tail-loss probe (RFC 8985 7.3) it is new data if the peer's window takes
// it (cwnd is not consulted), else the highest-sequence segment not SACKed,
// sent again. Either is sent after everything still unacknowledged, so its
// ACK tells RACK which of those to resend, including a lost retransmission,
// which nothing else would reveal before the RTO. One probe per quiet
// period: the next waits for an ACK. The RTO entries keep running.
func (e *Endpoint) recoveryProbe() {
	e.stats.RecoveryProbes++
	e.rack.recProbeOut = true
	if e.sendNewSegment() {
		return
	}
	for i := len(e.snd.rtxq) - 1; i >= 0; i-- {
		if s := e.snd.rtxq[i]; !s.sacked && s.seq.LessThan(e.snd.nxt) {
			e.transmit(s, true)
			return
		}
	}
}

// rackOnRTO forgets RACK-TLP's transient state at an RTO: the timers stop,
// the go-back-N resend covers every lost mark (RFC 8985 6.3), and the probe
// episode ends.
func (e *Endpoint) rackOnRTO() {
	e.stopTimer(timerPTO)
	e.stopTimer(timerReorder)
	for _, s := range e.snd.rtxq {
		s.lost = false
	}
	e.rack.tlpActive = false
	e.rack.recProbeOut = false
}
