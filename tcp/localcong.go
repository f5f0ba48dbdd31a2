package tcp

import "time"

// LocalCongestion is an Output whose own queue may refuse segments for a
// while, as a Linux qdisc that is full or drops (dev_queue_xmit returning
// NET_XMIT_DROP to tcp_transmit_skb). An endpoint whose Output implements it
// asks before each segment of new data: while Congested says yes, the data
// stays unsent (it was never on the wire, so it is neither lost nor in
// flight), and, with nothing in flight, the resource probe retries as Linux's
// tcp_probe_timer and tcp_send_probe0 do: first after an RTO
// (tcp_check_probe_timer), then every ResourceProbeInterval, without backoff;
// each failed attempt counts as a probe (Info.Probes, tcpi_probes), and
// Config.UserTimeout (counted from the first attempt, icsk_probes_tstamp) or
// Retries2 attempts end the connection with ErrTimeout, without a RST
// (tcp_write_err). Retransmissions, ACKs and the FIN do not ask: what the
// queue drops of them is a loss like any other (Linux also retries a
// retransmission that failed locally after 500 ms; that is not modelled).
//
// The stack's own output asks its device (stack.LocalCongestion); the
// packetdrill shim's device answers for a qdisc that drops everything
// (tc ... pfifo limit 0).
type LocalCongestion interface {
	Output
	// Congested reports whether a segment of id's would be dropped by the
	// local queue now.
	Congested(id ID) bool
}

// ResourceProbeInterval is how often data held back by local congestion is
// tried again (Linux's TCP_RESOURCE_PROBE_INTERVAL).
const ResourceProbeInterval = 500 * time.Millisecond

// resourceProbeMin is the shortest wait the user timeout clamps a probe's
// to (Linux's TCP_TIMEOUT_MIN, 2 jiffies).
const resourceProbeMin = 2 * time.Millisecond

// localCong is the send side's state of local congestion.
type localCong struct {
	held    bool          // new data waits for the local queue; timerPersist is the resource probe's
	probes  int           // failed attempts (icsk_probes_out)
	started bool          // the first attempt was made, at since
	since   time.Duration // icsk_probes_tstamp
}

// localCongested reports whether the Output's queue refuses new data now.
// If it does, the data is held and, when nothing is in flight, the resource
// probe armed (tcp_check_probe_timer: after max(RTO, MinRTO)); if not, a hold
// ends.
func (e *Endpoint) localCongested() bool {
	if c := e.snd.cong; c == nil || !c.Congested(e.id) {
		if e.snd.local.held {
			e.snd.local = localCong{}
		}
		return false
	}
	e.snd.local.held = true
	if len(e.snd.rtxq) == 0 && !e.timerPending(timerPersist) {
		e.startTimer(timerPersist, e.rtt.rto())
	}
	return true
}

// onResourceProbe is the persist timer's expiry while data is held by local
// congestion: Linux's tcp_probe_timer and tcp_send_probe0 for a send that
// failed locally.
func (e *Endpoint) onResourceProbe() {
	l := &e.snd.local
	if len(e.snd.rtxq) > 0 || e.snd.unsent() == 0 {
		*l = localCong{}
		return
	}
	now := e.now()
	if !l.started {
		l.started, l.since = true, now
	} else if ut := e.cfg.UserTimeout; ut > 0 && now-l.since >= ut {
		e.abort(ErrTimeout, false) // tcp_write_err
		return
	}
	if l.probes >= e.cfg.Retries2 {
		e.abort(ErrTimeout, false)
		return
	}
	e.output() // tcp_write_wakeup: try again
	if e.state == StateClosed || !l.held {
		return // the data went (localCongested ended the hold)
	}
	l.probes++
	d := ResourceProbeInterval
	if ut := e.cfg.UserTimeout; ut > 0 {
		d = min(d, max(ut-(now-l.since), resourceProbeMin)) // tcp_clamp_probe0_to_user_timeout
	}
	e.startTimer(timerPersist, d)
}
