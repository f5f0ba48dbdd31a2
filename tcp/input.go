package tcp

import (
	"gvisor.dev/gvisor/pkg/tcpip/seqnum"
)

// HandleSegment processes a segment the stack demultiplexed to this endpoint
// (RFC 9293 3.10.7). The endpoint copies what it keeps of seg.Payload. Bad input
// is counted and dropped or answered with an ACK, a challenge ACK (RFC 5961) or
// a RST, as the RFCs say; it never panics.
func (e *Endpoint) HandleSegment(seg *Segment) {
	defer e.flush()
	e.stats.SegsIn++
	switch e.state {
	case StateClosed:
		e.stats.DropsClosed++
		return
	case StateSynSent:
		e.handleSynSent(seg)
		return
	}
	e.handleSynchronized(seg)
}

// negotiate applies the options of the peer's SYN or SYN-ACK.
func (e *Endpoint) negotiate(seg *Segment) {
	o := &seg.Options
	e.peerMSS = DefaultMSS // RFC 9293 3.7.1: 536 when no MSS option came
	if o.HasMSS && o.MSS > 0 {
		e.peerMSS = int(o.MSS)
	}
	e.wsOK = e.wsOK && o.HasWS // RFC 7323 2.2: both sides must send it
	if e.wsOK {
		e.sndWS = o.WindowScale
	} else {
		e.sndWS, e.rcvWS = 0, 0
	}
	e.sackOK = e.sackOK && o.SACKPermitted // RFC 2018 2
	e.tsOK = e.tsOK && o.TS                // RFC 7323 3.2
	if e.tsOK {
		e.tsRecent = o.TSVal
	}
	e.smss = min(e.peerMSS, e.cfg.MSS)
	if e.tsOK {
		e.smss -= 12 // RFC 9293 3.7.1: the options in every segment come out of the MSS
	}
	e.smss = max(e.smss, 64)
	e.irs = seg.Seq
	e.rcvNxt = seg.Seq + 1
	e.rcvAdv = e.rcvNxt
	e.sndWnd = uint32(seg.Window) // RFC 7323 2.2: the window of a SYN is not scaled
	e.maxSndWnd = e.sndWnd
	e.sndWL1, e.sndWL2 = seg.Seq, e.iss
}

// handleSynSent is RFC 9293 3.10.7.3.
func (e *Endpoint) handleSynSent(seg *Segment) {
	f := seg.Flags
	if f&FlagACK != 0 {
		if seg.Ack.LessThanEq(e.iss) || e.sndMax.LessThan(seg.Ack) {
			e.stats.DropsBadACK++
			if f&FlagRST == 0 {
				e.sendRSTFor(seg) // RFC 9293 3.10.7.3: <SEQ=SEG.ACK><CTL=RST>
			}
			return
		}
	}
	if f&FlagRST != 0 {
		if f&FlagACK != 0 { // RFC 5961 3.2 / RFC 9293: only a RST that acknowledges our SYN counts
			e.stats.ResetsReceived++
			e.enterClosed(ErrConnectionRefused)
		} else {
			e.stats.DropsNoACK++
		}
		return
	}
	if f&FlagSYN == 0 {
		e.stats.DropsNoACK++
		return
	}
	e.negotiate(seg)
	e.initCongestion()
	if f&FlagACK != 0 {
		e.setState(StateEstablished)
		e.handleAck(seg, true) // the SYN is acknowledged: SND.UNA advances, RTT sample
		e.established()
		e.sendAck() // RFC 9293 3.10.7.3: <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>
		e.output()
		return
	}
	// Simultaneous open (RFC 9293 3.5, figure 8): SYN-RECEIVED, and our SYN is
	// sent again as a SYN-ACK.
	e.setState(StateSynReceived)
	if len(e.rtxq) > 0 {
		e.transmit(e.rtxq[0], false)
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
	e.cwnd = e.cfg.InitialCwnd * e.smss
	if e.synRetransmit {
		e.cwnd = e.smss // RFC 5681 3.1: IW is one segment after a lost SYN or SYN-ACK
	}
}

// established runs once at the transition to ESTABLISHED.
func (e *Endpoint) established() {
	if e.synRetransmit {
		e.rtt.synFallback() // RFC 6298 (5.7)
		e.cwnd = e.smss     // RFC 5681 3.1
	}
	e.rtoRetries = 0
	e.event(EventEstablished | EventWritable)
	e.armKeepalive()
}

// tsBefore compares timestamps modulo 2^32 (RFC 7323 5.2).
func tsBefore(a, b uint32) bool { return int32(a-b) < 0 }

// handleSynchronized is RFC 9293 3.10.7.4, for SYN-RECEIVED and the
// synchronized states.
func (e *Endpoint) handleSynchronized(seg *Segment) {
	f := seg.Flags
	segLen := seg.Len()
	if e.state == StateSynReceived && f&(FlagSYN|FlagRST|FlagACK) == FlagSYN && seg.Seq == e.irs {
		e.transmitSYNAgain() // the peer retransmitted its SYN: our SYN-ACK was lost
		return
	}
	// RFC 7323 5.3 (R1): PAWS.
	if e.tsOK && seg.Options.TS && f&FlagRST == 0 && tsBefore(seg.Options.TSVal, e.tsRecent) {
		e.stats.DropsPAWS++
		e.sendAck()
		return
	}
	// First check: sequence number (RFC 9293 3.10.7.4, the four cases).
	if !e.acceptable(seg.Seq, segLen) {
		e.stats.DropsOutOfWindow++
		if f&FlagRST == 0 {
			if e.state == StateTimeWait && f&FlagFIN != 0 {
				e.startTimer(timerClose, e.cfg.TimeWait) // a retransmitted FIN restarts 2*MSL
			}
			e.sendAck() // RFC 9293 3.10.7.4: <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>
		}
		return
	}
	// Second check: RST (RFC 5961 3.2).
	if f&FlagRST != 0 {
		if seg.Seq != e.rcvNxt {
			e.challengeAck() // RFC 5961 3.2: in the window but not exact: challenge ACK
			return
		}
		e.stats.ResetsReceived++
		switch e.state {
		case StateSynReceived:
			if e.passive {
				e.enterClosed(nil) // RFC 9293: a passive open returns to LISTEN
			} else {
				e.enterClosed(ErrConnectionRefused)
			}
		case StateEstablished, StateFinWait1, StateFinWait2, StateCloseWait:
			e.enterClosed(ErrConnectionReset)
		default: // CLOSING, LAST-ACK, TIME-WAIT
			e.enterClosed(nil)
		}
		return
	}
	// Fourth check: SYN (RFC 5961 4.2): any SYN here gets a challenge ACK.
	if f&FlagSYN != 0 {
		e.challengeAck()
		return
	}
	// Fifth check: ACK.
	if f&FlagACK == 0 {
		e.stats.DropsNoACK++
		return
	}
	// RFC 7323 4.3 (2): remember the peer's timestamp.
	if e.tsOK && seg.Options.TS && seg.Seq.LessThanEq(e.lastAckSent) && !tsBefore(seg.Options.TSVal, e.tsRecent) {
		e.tsRecent = seg.Options.TSVal
	}
	e.armKeepalive()
	if e.state == StateSynReceived {
		if !seg.Ack.InRange(e.sndUna+1, e.sndMax+1) {
			e.stats.DropsBadACK++
			e.sendRSTFor(seg) // RFC 9293 3.10.7.4: <SEQ=SEG.ACK><CTL=RST>
			return
		}
		if l := e.listener; l != nil && l.queueFull() {
			l.stats.DropsAcceptQueue++ // stay in SYN-RECEIVED: the SYN-ACK retry asks for the ACK again
			return
		}
		e.setState(StateEstablished)
		if e.finQueued {
			e.setState(StateFinWait1)
		}
		e.handleAck(seg, true)
		e.established()
		if l := e.listener; l != nil {
			e.listener = nil
			l.accepted(e)
			if e.state == StateClosed {
				return
			}
		}
	} else if !e.handleAck(seg, false) {
		return
	}
	if e.state == StateClosed {
		return
	}
	ourFINAcked := e.finSent && e.finSeq.LessThan(e.sndUna)
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
			return
		}
		e.output() // data queued before our FIN may still be waiting for the window
		return
	case StateLastAck:
		if ourFINAcked {
			e.enterClosed(nil)
			return
		}
		e.output() // data queued before our FIN may still be waiting for the window
		return
	case StateTimeWait:
		if f&FlagFIN != 0 {
			e.sendAck()
			e.startTimer(timerClose, e.cfg.TimeWait) // RFC 9293 3.10.7.4: restart the 2 MSL timeout
		}
		return
	}
	// Seventh and eighth checks: text and FIN.
	if e.state.canReceive() {
		if len(seg.Payload) > 0 || f&FlagFIN != 0 {
			e.processData(seg)
		}
	}
	if e.state != StateClosed {
		e.output()
	}
}

// acceptable is the table of RFC 9293 3.10.7.4: RCV.WND is what we advertised.
func (e *Endpoint) acceptable(seq seqnum.Value, segLen seqnum.Size) bool {
	wnd := e.rcvWnd()
	if segLen == 0 {
		if wnd == 0 {
			return seq == e.rcvNxt
		}
		return seq.InWindow(e.rcvNxt, wnd)
	}
	if wnd == 0 {
		return false
	}
	last := seq.Add(segLen - 1)
	return seq.InWindow(e.rcvNxt, wnd) || last.InWindow(e.rcvNxt, wnd)
}

// transmitSYNAgain answers a retransmitted SYN in SYN-RECEIVED with the SYN-ACK.
func (e *Endpoint) transmitSYNAgain() {
	if len(e.rtxq) > 0 && e.rtxq[0].flags&FlagSYN != 0 {
		e.transmit(e.rtxq[0], true)
	}
}

// enterTimeWait stops the connection's timers and starts the 2*MSL one.
func (e *Endpoint) enterTimeWait() {
	e.setState(StateTimeWait)
	e.stopAll(timerClose)
	e.startTimer(timerClose, e.cfg.TimeWait) // RFC 9293 3.10.7.4: TIME-WAIT lasts 2 MSL
}
