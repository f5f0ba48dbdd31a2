package tcp

import (
	"time"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// HandleSegment processes a segment the stack demultiplexed to this endpoint
// (RFC 9293 3.10.7). The endpoint copies what it keeps of seg.Payload. Bad input
// is counted and dropped or answered with an ACK, a challenge ACK (RFC 5961) or
// a RST, as the RFCs say; it never panics.
func (e *Endpoint) HandleSegment(seg *Segment) {
	defer e.flush()
	e.stats.SegsIn++
	switch {
	case e.state == StateClosed:
		e.stats.DropsClosed++
		return
	case badFlags(seg.Flags):
		e.stats.DropsBadFlags++
		return
	}
	switch e.state {
	case StateSynSent:
		e.handleSynSent(seg)
		return
	}
	e.handleSynchronized(seg)
}

// badFlags reports a SYN with FIN or RST, which no TCP sends (T/TCP's SYN+FIN,
// RFC 1644, is historic): such segments are dropped unanswered, in every
// state, by endpoints and listeners alike, so that they neither open
// connections nor fingerprint the stack. Linux drops SYN+FIN in LISTEN
// (tcp_rcv_state_process: "if (th->fin) goto discard") and a RST there in
// any case; in the synchronized states it would answer SYN+FIN with a
// challenge ACK (RFC 5961 4.2) and take SYN+RST as a RST. Here they are
// dropped there too, as FreeBSD's net.inet.tcp.drop_synfin does.
func badFlags(f Flags) bool { return f&FlagSYN != 0 && f&(FlagFIN|FlagRST) != 0 }

// negotiate applies the options of the peer's SYN or SYN-ACK.
func (e *Endpoint) negotiate(seg *Segment) {
	o := &seg.Options
	e.snd.peerMSS = DefaultMSS // RFC 9293 3.7.1: 536 when no MSS option came
	if o.HasMSS && o.MSS > 0 {
		e.snd.peerMSS = int(o.MSS)
	}
	e.wsOK = e.wsOK && o.HasWS // RFC 7323 2.2: both sides must send it
	if e.wsOK {
		e.snd.ws = o.WindowScale
	} else {
		e.snd.ws, e.rcv.ws = 0, 0
	}
	e.sackOK = e.sackOK && o.SACKPermitted // RFC 2018 2
	e.tsOK = e.tsOK && o.TS                // RFC 7323 3.2
	if e.tsOK {
		e.tsRecent = o.TSVal
	}
	e.snd.smss = min(e.snd.peerMSS, e.cfg.MSS)
	if e.tsOK {
		e.snd.smss -= 12 // RFC 9293 3.7.1: the options in every segment come out of the MSS
	}
	e.snd.smss = max(e.snd.smss, 64)
	e.pmtuCap() // icmp.go
	e.rcv.start(seg.Seq)
	e.snd.wnd = uint32(seg.Window) // RFC 7323 2.2: the window of a SYN is not scaled
	e.snd.maxWnd = e.snd.wnd
	e.snd.wl1, e.snd.wl2 = seg.Seq, e.snd.iss
}

// handleSynSent is RFC 9293 3.10.7.3, SYN-SENT: the RFC's checks in its
// order, then the SYN's processing.
func (e *Endpoint) handleSynSent(seg *Segment) {
	if !e.synSentCheckACK(seg) || // first
		!e.synSentCheckRST(seg) { // second
		return
	}
	// third, security: no IP security option is kept (RFC 9293 3.10.7.3)
	if seg.Flags&FlagSYN == 0 { // fifth: neither SYN nor RST: drop
		e.stats.DropsNoSYN++
		return
	}
	e.synSentSYN(seg) // fourth
}

// synSentCheckACK is the first check in SYN-SENT (RFC 9293 3.10.7.3): an ACK
// of anything but our SYN is dropped, and, unless it is a RST, answered with
// <SEQ=SEG.ACK><CTL=RST>.
func (e *Endpoint) synSentCheckACK(seg *Segment) bool {
	if seg.Flags&FlagACK == 0 || (e.snd.iss.LessThan(seg.Ack) && !e.snd.max.LessThan(seg.Ack)) {
		return true
	}
	e.stats.DropsBadACK++
	if seg.Flags&FlagRST == 0 {
		e.sendRSTFor(seg) // RFC 9293 3.10.7.3: <SEQ=SEG.ACK><CTL=RST>
	}
	return false
}

// synSentCheckRST is the second check in SYN-SENT (RFC 9293 3.10.7.3, RFC
// 5961 3.2): only a RST that acknowledges our SYN refuses the connection;
// one without an ACK is dropped.
func (e *Endpoint) synSentCheckRST(seg *Segment) bool {
	if seg.Flags&FlagRST == 0 {
		return true
	}
	if seg.Flags&FlagACK != 0 {
		e.stats.ResetsReceived++
		e.enterClosed(ErrConnectionRefused)
	} else {
		e.stats.DropsNoACK++
	}
	return false
}

// synSentSYN is the fourth check in SYN-SENT (RFC 9293 3.10.7.3): the peer's
// SYN. With an ACK of ours the connection is established and the SYN ACKed;
// without, it is a simultaneous open (RFC 9293 3.5, figure 8): SYN-RECEIVED,
// and our SYN is sent again as a SYN-ACK.
func (e *Endpoint) synSentSYN(seg *Segment) {
	e.negotiate(seg)
	e.initCongestion()
	if seg.Flags&FlagACK != 0 {
		e.setState(StateEstablished)
		e.handleAck(seg, true) // the SYN is acknowledged: SND.UNA advances, RTT sample
		e.established()
		e.sendAck() // RFC 9293 3.10.7.3: <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>
		e.output()
		return
	}
	e.setState(StateSynReceived)
	if len(e.snd.rtxq) > 0 {
		e.transmit(e.snd.rtxq[0], false)
	}
}

// sendRSTFor sends the RST for an unacceptable ACK: <SEQ=SEG.ACK><CTL=RST>.
func (e *Endpoint) sendRSTFor(seg *Segment) {
	r, ok := ResetFor(seg)
	if !ok {
		return
	}
	e.stats.ResetsSent++
	e.stats.SegsOut++
	e.out.Send(e.id, &r)
}

// initCongestion sets the initial window (RFC 5681 3.1, RFC 6928).
func (e *Endpoint) initCongestion() {
	iw := e.cfg.InitialCwnd
	if e.snd.synRetransmit {
		iw = 1 // RFC 5681 3.1: IW is one segment after a lost SYN or SYN-ACK
	}
	e.cc.start(e.snd.smss, iw, e.sackOK)
}

// established runs once at the transition to ESTABLISHED.
func (e *Endpoint) established() {
	if e.snd.synRetransmit {
		e.rtt.synFallback()                 // RFC 6298 (5.7)
		e.cc.start(e.snd.smss, 1, e.sackOK) // RFC 5681 3.1
	}
	e.snd.rtoRetries = 0
	e.event(EventEstablished | EventWritable)
	e.armKeepalive()
}

// tsBefore compares timestamps modulo 2^32 (RFC 7323 5.2).
func tsBefore(a, b uint32) bool { return int32(a-b) < 0 }

// handleSynchronized is RFC 9293 3.10.7.4, for SYN-RECEIVED and the
// synchronized states: the RFC's checks in its order, one function each. A
// check that is done with the segment (dropped, answered, or the connection
// closed) returns false and ends the pipeline.
func (e *Endpoint) handleSynchronized(seg *Segment) {
	if e.resendSYNACK(seg) || // SYN-RECEIVED: the peer's SYN again
		!e.checkPAWS(seg) || // RFC 7323 5.3, before the first check
		!e.checkSequence(seg) || // first
		!e.checkRST(seg) || // second
		// third, security: no IP security option is kept (RFC 9293 3.10.7.4)
		!e.checkSYN(seg) || // fourth
		!e.checkACK(seg) { // fifth
		return
	}
	// sixth, URG: ignored (RFC 9293 3.10.7.4; RFC 6093 deprecates the urgent mechanism)
	e.processText(seg) // seventh, and the eighth (FIN) with it
	if e.state != StateClosed {
		e.output()
	}
}

// resendSYNACK answers a retransmitted SYN in SYN-RECEIVED with the SYN-ACK
// (the peer's SYN came again: ours was lost). It reports whether it did.
func (e *Endpoint) resendSYNACK(seg *Segment) bool {
	if e.state != StateSynReceived || seg.Flags&(FlagSYN|FlagRST|FlagACK) != FlagSYN || seg.Seq != e.rcv.irs {
		return false
	}
	if len(e.snd.rtxq) > 0 && e.snd.rtxq[0].flags&FlagSYN != 0 {
		e.transmit(e.snd.rtxq[0], true)
	}
	return true
}

// checkPAWS is RFC 7323 5.3 (R1): a segment whose timestamp is older than
// TS.Recent is a wrapped old duplicate: ACK it and drop it.
func (e *Endpoint) checkPAWS(seg *Segment) bool {
	if pawsRejects(seg, e.tsOK, e.tsRecent) {
		e.stats.DropsPAWS++
		e.sendAck()
		return false
	}
	return true
}

// pawsRejects is RFC 7323 5.3's test, with timestamps on (tsOK) and
// TS.Recent tsRecent: a segment other than a RST whose TSval is older
// (shared with a TIME-WAIT record).
func pawsRejects(seg *Segment, tsOK bool, tsRecent uint32) bool {
	return tsOK && seg.Options.TS && seg.Flags&FlagRST == 0 && tsBefore(seg.Options.TSVal, tsRecent)
}

// checkSequence is the first check (RFC 9293 3.10.7.4, the four cases of
// acceptability): an unacceptable segment is dropped and, unless it is a
// RST, answered with <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>.
func (e *Endpoint) checkSequence(seg *Segment) bool {
	if e.rcv.acceptable(seg.Seq, seg.Len()) {
		return true
	}
	e.stats.DropsOutOfWindow++
	if seg.Flags&FlagRST == 0 {
		if e.state == StateTimeWait && seg.Flags&FlagFIN != 0 {
			e.startTimer(timerClose, e.cfg.TimeWait) // a retransmitted FIN restarts 2*MSL
		}
		e.sendAck() // RFC 9293 3.10.7.4: <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>
	}
	return false
}

// checkRST is the second check (RFC 9293 3.10.7.4, with RFC 5961 3.2): a RST
// at exactly RCV.NXT closes the connection; one elsewhere in the window gets a
// challenge ACK.
func (e *Endpoint) checkRST(seg *Segment) bool {
	if seg.Flags&FlagRST == 0 {
		return true
	}
	if seg.Seq != e.rcv.nxt {
		e.challengeAck() // RFC 5961 3.2: in the window but not exact: challenge ACK
		return false
	}
	e.stats.ResetsReceived++
	switch e.state {
	case StateSynReceived:
		if e.passive {
			e.enterClosed(nil) // RFC 9293 3.10.7.4: a passive open returns to LISTEN
		} else {
			e.enterClosed(ErrConnectionRefused)
		}
	case StateEstablished, StateFinWait1, StateFinWait2, StateCloseWait:
		e.enterClosed(ErrConnectionReset)
	default: // CLOSING, LAST-ACK, TIME-WAIT
		e.enterClosed(nil)
	}
	return false
}

// checkSYN is the fourth check (RFC 9293 3.10.7.4, with RFC 5961 4.2): any
// SYN here gets a challenge ACK and is dropped.
func (e *Endpoint) checkSYN(seg *Segment) bool {
	if seg.Flags&FlagSYN == 0 {
		return true
	}
	e.challengeAck()
	return false
}

// checkACK is the fifth check (RFC 9293 3.10.7.4): a segment without ACK is
// dropped; an acceptable ACK completes the handshake in SYN-RECEIVED,
// advances SND.UNA and the send window, and moves the closing states on.
func (e *Endpoint) checkACK(seg *Segment) bool {
	if seg.Flags&FlagACK == 0 {
		e.stats.DropsNoACK++
		return false
	}
	e.updateTSRecent(seg)
	e.armKeepalive()
	if e.state == StateSynReceived {
		if !e.ackSynReceived(seg) {
			return false
		}
	} else if !e.handleAck(seg, false) {
		return false
	}
	if e.state == StateClosed {
		return false
	}
	return e.ackOurFIN(seg)
}

// updateTSRecent is RFC 7323 4.3 (2): remember the peer's timestamp from a
// segment that covers the last ACK we sent.
func (e *Endpoint) updateTSRecent(seg *Segment) {
	if e.tsOK && seg.Options.TS && seg.Seq.LessThanEq(e.lastAckSent) && !tsBefore(seg.Options.TSVal, e.tsRecent) {
		e.tsRecent = seg.Options.TSVal
	}
}

// ackSynReceived is the fifth check in SYN-RECEIVED (RFC 9293 3.10.7.4): an
// ACK of our SYN establishes the connection and hands it to the listener; an
// unacceptable one is answered with <SEQ=SEG.ACK><CTL=RST>.
func (e *Endpoint) ackSynReceived(seg *Segment) bool {
	if !seg.Ack.InRange(e.snd.una+1, e.snd.max+1) {
		e.stats.DropsBadACK++
		e.sendRSTFor(seg) // RFC 9293 3.10.7.4: <SEQ=SEG.ACK><CTL=RST>
		return false
	}
	if l := e.listener; l != nil && l.queueFull() {
		l.stats.DropsAcceptQueue++ // stay in SYN-RECEIVED: the SYN-ACK retry asks for the ACK again
		return false
	}
	e.setState(StateEstablished)
	if e.snd.finQueued {
		e.setState(StateFinWait1)
	}
	e.handleAck(seg, true)
	e.established()
	if l := e.listener; l != nil {
		e.listener = nil
		l.accepted(e)
	}
	return true
}

// ackOurFIN is the rest of the fifth check, by state (RFC 9293 3.10.7.4):
// once our FIN is acknowledged, FIN-WAIT-1 goes to FIN-WAIT-2, CLOSING to
// TIME-WAIT, LAST-ACK to CLOSED; in TIME-WAIT a retransmitted FIN is ACKed
// and restarts the 2 MSL timeout. It reports whether the segment's text and
// FIN are to be processed.
func (e *Endpoint) ackOurFIN(seg *Segment) bool {
	ourFINAcked := e.snd.finAcked()
	if e.state == StateClosing || e.state == StateLastAck || e.state == StateTimeWait {
		e.ignoreText(seg) // the peer's FIN came: these states process no text
	}
	switch e.state {
	case StateFinWait1:
		if ourFINAcked {
			e.setState(StateFinWait2)
			if e.appClosed {
				e.startTimer(timerClose, e.cfg.FinWait2) // Linux tcp_fin_timeout
			}
		}
	case StateClosing:
		if ourFINAcked {
			e.enterTimeWait()
			return false
		}
		e.output() // data queued before our FIN may still be waiting for the window
		return false
	case StateLastAck:
		if ourFINAcked {
			e.enterClosed(nil)
			return false
		}
		e.output() // data queued before our FIN may still be waiting for the window
		return false
	case StateTimeWait:
		if seg.Flags&FlagFIN != 0 {
			e.sendAck()
			e.startTimer(timerClose, e.cfg.TimeWait) // RFC 9293 3.10.7.4: restart the 2 MSL timeout
		}
		return false
	}
	return true
}

// processText is the seventh check (RFC 9293 3.10.7.4): in the states that
// still receive, the segment's text goes to the receiver, trimmed to what is
// new and inside the window; in order, it is delivered and ACKed by the
// delayed-ACK rule (ackReceived); out of order, it is queued and ACKed at
// once. Its FIN, once RCV.NXT reaches it, is the eighth check (processFIN).
func (e *Endpoint) processText(seg *Segment) {
	fin := seg.Flags&FlagFIN != 0
	if len(seg.Payload) == 0 && !fin {
		return
	}
	if !e.state.canReceive() {
		e.ignoreText(seg)
		return
	}
	if len(seg.Payload) > 0 {
		e.stats.DataSegsIn++
	}
	e.rcv.mss = max(e.rcv.mss, min(len(seg.Payload), e.cfg.MSS))
	if len(seg.Payload) > 0 && e.appClosed {
		// RFC 2525 2.17 / Linux: data for a closed socket resets the
		// connection, with the reset a segment to no connection gets (RFC
		// 9293 3.10.7.1: <SEQ=SEG.ACK><CTL=RST>; Linux's tcp_v4_send_reset),
		// not one at SND.NXT.
		if e.state != StateTimeWait && seg.Flags&FlagACK != 0 {
			e.sendRST(seg.Ack)
			e.enterClosed(nil)
		} else {
			e.abort(nil, true)
		}
		return
	}
	seq, data, fin := e.rcv.trim(seg.Seq, seg.Payload, fin)
	if len(data) == 0 && !fin {
		e.sendAck() // a duplicate: ACK at once (RFC 5681 4.2)
		return
	}
	if seq != e.rcv.nxt {
		follows := seq == e.rcv.lastOOOEnd // extends the last one's SACK block
		if !e.rcv.insertOOO(seq, data, fin) {
			e.stats.DropsOOOLimit++
		}
		e.stats.OutOfOrderSegs++
		if !e.holdOutOfOrderAck(follows) {
			e.sendAck() // RFC 5681 4.2: out-of-order data is ACKed at once (with SACK blocks)
		}
		return
	}
	n, filled, fin := e.rcv.deliver(data, fin)
	if len(data) > 0 && (seg.Flags&FlagPSH != 0 || len(data) < e.rcv.mss) {
		e.rcv.pushed = true // Linux's ICSK_ACK_PUSHED (tcp_measure_rcv_mss): see readAckDue
	}
	probe := e.rcv.nearlyClosed(seq) // RFC 9293 3.8.6.1: a probe of a window below one MSS
	e.stats.BytesReceived += uint64(n)
	if len(data) > 0 {
		e.event(EventReadable)
		e.quickAckMode()
	}
	if fin {
		e.rcv.nxt++
		e.processFIN()
		return
	}
	e.ackReceived(filled || probe)
}

// quickAckMode notes in-order data: the first of the connection, or the first
// after more than an RTO without any, starts Config.QuickAcks immediate ACKs
// (Linux's tcp_event_data_recv and tcp_incr_quickack).
func (e *Endpoint) quickAckMode() {
	now := e.now()
	if e.cfg.QuickAcks > 0 && (!e.rcv.gotData || now-e.rcv.dataAt > e.rtt.rto()) {
		q := min(e.cfg.QuickAcks, max(2, e.rcv.size/(2*max(e.rcv.mss, 1))))
		e.rcv.quick = max(e.rcv.quick, q)
	}
	e.rcv.gotData, e.rcv.dataAt = true, now
}

// ignoreText counts the text of a segment that came after the peer's FIN
// (CLOSE-WAIT, CLOSING, LAST-ACK, TIME-WAIT), which is ignored.
func (e *Endpoint) ignoreText(seg *Segment) {
	if len(seg.Payload) > 0 {
		e.stats.DropsDataAfterFIN++ // RFC 9293 3.10.7.4 seventh: "should not occur ... Ignore the segment text"
	}
}

// ackReceived ACKs in-order text (RFC 5681 4.2): at once when it filled a
// hole or came into a window the peer may know as below one MSS (now: see
// receiver.nearlyClosed), in quickack mode (quickAckMode), or with delayed
// ACKs off; for at least every second full-sized segment (full-sized: the
// largest seen, at most our MSS), at the end of the input batch when the
// Output holds ACKs that long (AckHolder), else at once; else after the
// delayed-ACK timeout (RFC 1122 4.2.3.2).
func (e *Endpoint) ackReceived(now bool) {
	if e.rcv.quick > 0 {
		e.rcv.quick--
		now = true
	}
	if now || e.cfg.DelayedACK < 0 {
		e.sendAck()
		return
	}
	if e.rcv.unacked >= 2*e.rcv.mss {
		if !e.holdAck() {
			e.sendAck()
		}
		return
	}
	if !e.timerPending(timerDelayedACK) {
		e.startTimer(timerDelayedACK, e.cfg.DelayedACK) // RFC 1122 4.2.3.2: delay the ACK
	}
}

// holdOutOfOrderAck reports whether the ACK of an out-of-order segment just
// queued waits for the end of the input batch (Config.OutOfOrderAcksAtOnce):
// with SACK and an Output that holds ACKs, when it follows the last
// out-of-order segment (follows: it starts where that one ended), as a
// Linux receiver's GRO merges a run of segments into one and ACKs it once.
// A segment that opens another SACK block (or fills a gap between two) is
// ACKed at once, as RFC 5681 4.2 asks, its block first (RFC 2018 4),
// carrying any ACK held: the peer learns of each new hole at once, and only
// the segments that extend a block it has been told of wait.
func (e *Endpoint) holdOutOfOrderAck(follows bool) bool {
	return follows && e.sackOK && !e.cfg.OutOfOrderAcksAtOnce && e.holdAck()
}

// holdAck reports whether the Output holds our ACK until its batch ends
// (AckHolder), asking it once per batch.
func (e *Endpoint) holdAck() bool {
	if !e.ackHeld && e.holder != nil && e.holder.HoldAck(e) {
		e.ackHeld = true
	}
	return e.ackHeld
}

// FlushAck sends the ACK that an AckHolder held until the end of its batch,
// one for all the data the batch brought, unless a segment since carried
// it. The AckHolder calls it.
func (e *Endpoint) FlushAck() {
	if !e.ackHeld {
		return
	}
	e.ackHeld = false
	if e.state != StateClosed {
		e.sendAck()
	}
}

// processFIN is the eighth check (RFC 9293 3.10.7.4), for a FIN that RCV.NXT
// has passed: the connection moves on (CLOSE-WAIT, CLOSING or TIME-WAIT) and
// the FIN is ACKed at once.
func (e *Endpoint) processFIN() {
	e.rcv.finRcvd = true
	e.event(EventReadable)
	switch e.state {
	case StateSynReceived, StateEstablished:
		e.setState(StateCloseWait)
	case StateFinWait1:
		if e.snd.finAcked() {
			e.enterTimeWait()
		} else {
			e.setState(StateClosing) // simultaneous close
		}
	case StateFinWait2:
		e.enterTimeWait()
	}
	if e.state != StateClosed {
		e.sendAck()
	}
}

// enterTimeWait stops the connection's timers and starts the 2*MSL one.
func (e *Endpoint) enterTimeWait() {
	e.setState(StateTimeWait)
	e.stopAll(timerClose)
	e.startTimer(timerClose, e.cfg.TimeWait) // RFC 9293 3.10.7.4: TIME-WAIT lasts 2 MSL
	if e.appClosed {
		e.event(EventTimeWait)
	}
}

// reusableBy reports whether seg, arriving in TIME-WAIT, is the SYN of a new
// incarnation of the connection (RFC 6191 2, as Linux's
// tcp_timewait_state_process): a SYN alone, not older by its timestamp than
// TS.Recent (PAWS), and either newer by it or above RCV.NXT. (Linux compares
// the timestamp with tw_ts_recent even when the old connection had none, where
// it is 0; here the timestamp counts only when both incarnations use them,
// as RFC 6191 says.)
func (e *Endpoint) reusableBy(seg *Segment) bool {
	return e.state == StateTimeWait && reusable(seg, e.tsOK, e.tsRecent, e.rcv.nxt)
}

// reusable is reusableBy's test for a connection in TIME-WAIT whose
// timestamps are on (tsOK), with TS.Recent and RCV.NXT (shared with a
// TIME-WAIT record).
func reusable(seg *Segment, tsOK bool, tsRecent uint32, rcvNxt seqnum.Value) bool {
	if seg.Flags&(FlagSYN|FlagACK|FlagRST|FlagFIN) != FlagSYN {
		return false
	}
	ts := tsOK && seg.Options.TS
	if ts && tsBefore(seg.Options.TSVal, tsRecent) {
		return false // RFC 6191 2, RFC 7323 5.3: an older timestamp: a duplicate from the old incarnation
	}
	return rcvNxt.LessThan(seg.Seq) || // RFC 9293 3.6.1, RFC 1122 4.2.2.13: its ISN above the old RCV.NXT
		(ts && tsBefore(tsRecent, seg.Options.TSVal)) // RFC 6191 2: a newer timestamp
}

// challengeLimit bounds the challenge ACKs (RFC 5961 7): at most
// challengeACKsPerSecond in any second that began with one, as Linux's
// tcp_challenge_ack_limit.
type challengeLimit struct {
	start time.Duration // when the current second began
	count int           // challenge ACKs sent in it
}

const challengeACKsPerSecond = 1000

// allow reports whether a challenge ACK may go out at now, and counts it.
func (c *challengeLimit) allow(now time.Duration) bool {
	if now-c.start >= time.Second {
		c.start, c.count = now, 0
	}
	if c.count >= challengeACKsPerSecond {
		return false
	}
	c.count++
	return true
}

// challengeAck sends the RFC 5961 challenge ACK, within the rate limit
// (RFC 5961 7).
func (e *Endpoint) challengeAck() {
	if !e.challenges.allow(e.now()) {
		e.stats.DropsRateLimited++
		return
	}
	e.stats.ChallengeACKs++
	e.sendAck()
}
