package tcp

import (
	"fmt"
	"time"

	"github.com/tcpwheel/tcpwheel/timer"
)

// The endpoint's timers other than retransmission (which lives in each txSeg,
// see snd.go). Each is a timer.Entry in Endpoint.timers, indexed by its kind,
// armed and stopped eagerly: a stop is O(1) on the wheel, so there is no lazy
// cancellation to reason about. States in which each runs:
//
//   - timerDelayedACK: ESTABLISHED, FIN-WAIT-1/2 (data may arrive); stopped by
//     any segment that carries the ACK.
//   - timerKeepalive: ESTABLISHED and CLOSE-WAIT, when Config.KeepAlive is set;
//     restarted by every acceptable segment received.
//   - timerPersist: while the peer's window is zero, data waits and nothing is
//     in flight.
//   - timerClose: TIME-WAIT (2*MSL), and FIN-WAIT-2 after Close.
//   - timerUser: while sent data is unacknowledged, when Config.UserTimeout is
//     set.
//   - timerPTO (RFC 8985 7.2, rack.go): the tail-loss probe timeout, while data
//     is in flight, an SRTT is known, nothing is SACKed, no recovery (fast or
//     RTO) is under way and no probe is outstanding; (re)started when new data
//     is sent and when an ACK acknowledges new data; stopped otherwise. In fast
//     recovery it is the recovery probe's timer instead (rack.go,
//     recoveryProbeAllowed): restarted by every ACK and by RACK's reordering
//     timer, at most one probe until the next ACK.
//   - timerReorder (RFC 8985 6.2 step 5, rack.go): RACK's reordering timer,
//     while a segment sent before the most recently delivered one may yet
//     arrive.
//
// Leaving the connection stops them all with stopAll: CLOSED (enterClosed),
// and TIME-WAIT, which keeps only timerClose (enterTimeWait).
//
// RACK-TLP beside per-segment RTO entries. Linux (and RFC 8985 8) keeps one
// timer that is either the RTO, the PTO or the reordering timer. Here each
// in-flight segment keeps its own RTO entry exactly as without RACK-TLP, and
// the PTO and the reordering timer are two more entries on the same wheel,
// armed with Start and cancelled with Stop. The PTO (2*SRTT + Config.TLPSlack,
// or + TLP.max_ack_delay for a lone segment, our FIN included) is capped at the
// oldest segment's RTO entry, as Linux's tcp_schedule_loss_probe: it then fires
// one tick before that entry would, and the probe re-arms the entry from there,
// not backed off (RFC 8985 7.2 would let the RTO fire instead). When it fires,
// the probe (new data, else the last segment again) goes out and the RTO
// entries keep running: the probed segment's entry restarts with the probe,
// like any transmission (7.3: after a probe the RTO is armed, not the PTO). If the probe's ACK reveals a
// loss (a SACK of the probe above a hole), RACK marks the hole lost and it is
// resent at once, in fast recovery; if the probe is unanswered, the oldest
// segment's RTO entry expires as it always did. An RTO stops both RACK-TLP
// timers and ends the probe episode.

// Timers is all an endpoint asks of the event loop's time: the loop's
// "now", the tick, and START_TIMER/STOP_TIMER for the timer.Entry values the
// endpoint embeds (DESIGN.md, timer/). The endpoint reads no clock: both of
// its instants come from here.
//
//   - Now is the instant the loop handed in with its last Advance. Every
//     timestamp, RTT sample, RACK xmit_ts and relative timer is taken from it.
//   - SendTime is the instant a segment handed to the Output now leaves,
//     never before Now. Only a segment's retransmission timer runs from it
//     (transmit), so that a resend leaves a full RTO after the segment it
//     repeats even when the packet that let the segment out was handled some
//     time after the loop's last Advance (seen on the wire: a SYN-ACK resent
//     999.994 ms after the first).
//
// The loop owns the wheel and its clock; OnWheel adapts a *timer.Wheel whose
// clock is the loop's. Dial and NewListener take a Timers, so a loop that
// knows better when a segment leaves can say so itself.
type Timers interface {
	Now() time.Duration
	// Target is, inside an expiry, the instant the loop's Advance moves to
	// (timer.Wheel.Target): Target - Now is how late the expiry runs.
	Target() time.Duration
	SendTime() time.Duration
	Tick() time.Duration
	Start(e *timer.Entry, d time.Duration) error
	StartAt(e *timer.Entry, t time.Duration) error
	Stop(e *timer.Entry) bool
	// Deadline is the instant a pending e fires at (timer.Wheel.Deadline):
	// a connection handing its TIME-WAIT to a record (Endpoint.TimeWait)
	// hands over when it ends.
	Deadline(e *timer.Entry) (time.Duration, bool)
}

var _ Timers = wheelTimers{}

// OnWheel returns w as an endpoint's Timers: Now, Tick, Start, StartAt and
// Stop are the wheel's; SendTime reads the wheel's clock (see wheelTimers).
func OnWheel(w *timer.Wheel) Timers { return wheelTimers{w} }

// wheelTimers is a *timer.Wheel as the endpoint's Timers. Its SendTime is
// the wheel's clock as it reads now, not before the wheel's Now (a clock
// behind its wheel never moves a deadline earlier). The clock is read before
// the segment goes to the Output, not after, so that the RTO does not also
// wait out the device write.
type wheelTimers struct{ *timer.Wheel }

// SendTime is the wheel's clock, clamped to the wheel's Now.
func (w wheelTimers) SendTime() time.Duration {
	return max(w.Clock().Now(), w.Now())
}

// timerKind names one of the endpoint's timers: an index into Endpoint.timers.
type timerKind int

const (
	timerDelayedACK timerKind = iota // RFC 1122 4.2.3.2
	timerKeepalive                   // RFC 1122 4.2.3.6
	timerPersist                     // RFC 9293 3.8.6.1: zero-window probes
	timerClose                       // TIME-WAIT (RFC 9293 3.10.8) and the FIN-WAIT-2 timeout
	timerUser                        // RFC 5482: the user timeout
	timerPTO                         // RFC 8985 7.2: the tail-loss probe timeout
	timerReorder                     // RFC 8985 6.2 step 5: RACK's reordering timer
	numTimers

	timerNone = numTimers // stopAll's "keep none"
)

// timerFn returns timer k's expiry handler: e itself, as the named type of
// k's (below), which converts from *Endpoint without allocating, so starting
// a timer binds no method value. Tracing wraps it in a closure that records
// the expiry first.
func (e *Endpoint) timerFn(k timerKind) timer.Handler {
	var h timer.Handler
	switch k {
	case timerDelayedACK:
		h = (*delayedACKTimer)(e)
	case timerKeepalive:
		h = (*keepaliveTimer)(e)
	case timerPersist:
		h = (*persistTimer)(e)
	case timerClose:
		h = (*closeTimer)(e)
	case timerUser:
		h = (*userTimer)(e)
	case timerPTO:
		h = (*ptoTimer)(e)
	case timerReorder:
		h = (*reorderTimer)(e)
	}
	if e.trace != nil {
		run := h
		h = timer.HandlerFunc(func() { e.traceFired(k); run.Expire() })
	}
	return h
}

// The endpoint as each of its timers' timer.Handler.
type (
	delayedACKTimer Endpoint
	keepaliveTimer  Endpoint
	persistTimer    Endpoint
	closeTimer      Endpoint
	userTimer       Endpoint
	ptoTimer        Endpoint
	reorderTimer    Endpoint
)

func (t *delayedACKTimer) Expire() { (*Endpoint)(t).onDelayedACK() }
func (t *keepaliveTimer) Expire()  { (*Endpoint)(t).onKeepalive() }
func (t *persistTimer) Expire()    { (*Endpoint)(t).onPersist() }
func (t *closeTimer) Expire()      { (*Endpoint)(t).onCloseTimer() }
func (t *userTimer) Expire()       { (*Endpoint)(t).onUserTimeout() }
func (t *ptoTimer) Expire()        { (*Endpoint)(t).onPTO() }
func (t *reorderTimer) Expire()    { (*Endpoint)(t).onReorderTimer() }

// startTimer arms timer k to fire d from now (START_TIMER); a wheel that
// refuses it (closed, full) aborts the connection, for a connection without
// its timers is not TCP.
func (e *Endpoint) startTimer(k timerKind, d time.Duration) {
	if e.trace != nil {
		now := e.w.Now()
		e.trace.started[k] = [2]time.Duration{now, now + d}
	}
	if e.timersInit&(1<<k) == 0 {
		e.timersInit |= 1 << k
		e.timers[k].InitHandler(e.timerFn(k))
	}
	if err := e.w.Start(&e.timers[k], d); err != nil {
		e.timerFailed(err)
	}
}

// stopTimer disarms timer k (STOP_TIMER). An idle one is left alone: the
// wheel's Stop would do nothing, and every segment sent stops the
// delayed-ACK timer.
func (e *Endpoint) stopTimer(k timerKind) {
	if e.timers[k].Pending() {
		e.w.Stop(&e.timers[k])
	}
}

// timerPending reports whether timer k is armed.
func (e *Endpoint) timerPending(k timerKind) bool { return e.timers[k].Pending() }

// stopAll stops every timer of the endpoint except keep (timerNone keeps
// none). A kept timer that runs is left running, not restarted.
func (e *Endpoint) stopAll(keep timerKind) {
	for k := range e.timers {
		if timerKind(k) != keep {
			e.w.Stop(&e.timers[k])
		}
	}
}

// timerFailed counts a timer the wheel refused and aborts the connection.
func (e *Endpoint) timerFailed(err error) {
	e.stats.TimerErrors++
	if e.state != StateClosed {
		e.enterClosed(fmt.Errorf("%w: %w", ErrWheel, err))
	}
}

// onDelayedACK sends the ACK that was held back (RFC 1122 4.2.3.2).
func (e *Endpoint) onDelayedACK() {
	defer e.flush()
	if e.state == StateClosed || e.state == StateTimeWait {
		return
	}
	e.sendAck()
}

// armKeepalive (re)starts the idle timer after activity (RFC 1122 4.2.3.6).
func (e *Endpoint) armKeepalive() {
	if !e.cfg.KeepAlive || (e.state != StateEstablished && e.state != StateCloseWait) {
		return
	}
	e.keepProbes = 0
	e.startTimer(timerKeepalive, e.cfg.KeepIdle)
}

// onKeepalive sends a keepalive probe after KeepIdle of silence, and then every
// KeepInterval; KeepCount unanswered probes abort the connection (RFC 1122
// 4.2.3.6).
func (e *Endpoint) onKeepalive() {
	defer e.flush()
	if e.state != StateEstablished && e.state != StateCloseWait {
		return
	}
	if len(e.snd.rtxq) > 0 || e.snd.unsent() > 0 {
		// Not idle: retransmission or persist looks after the peer.
		e.startTimer(timerKeepalive, e.cfg.KeepIdle)
		return
	}
	if e.keepProbes >= e.cfg.KeepCount {
		e.activeReset(ErrTimeout) // RFC 1122 4.2.3.6: the peer is dead (RST|ACK, as Linux)
		return
	}
	e.keepProbes++
	e.stats.KeepaliveProbes++
	// RFC 1122 4.2.3.6: a probe is a segment with SEG.SEQ = SND.NXT-1, no data
	// (as Linux sends it), which the peer must answer with an ACK.
	seg := Segment{Seq: e.snd.nxt - 1, Flags: FlagACK}
	e.send(&seg)
	e.startTimer(timerKeepalive, e.cfg.KeepInterval)
}

// persistTimeout is the probe interval: the RTO, backed off per probe, at
// least MinRTO and at most MaxRTO (RFC 1122 4.2.2.17).
func (e *Endpoint) persistTimeout() time.Duration {
	r := e.rtt.base
	for i := 0; i < e.snd.persistBackoff && r < e.cfg.MaxRTO; i++ {
		r *= 2
	}
	return min(r, e.cfg.MaxRTO)
}

// armPersist starts the persist timer if it is not running (RFC 9293 3.8.6.1).
func (e *Endpoint) armPersist() {
	if !e.timerPending(timerPersist) {
		e.startTimer(timerPersist, e.persistTimeout())
	}
}

// onPersist sends a zero-window probe (RFC 9293 3.8.6.1, RFC 1122 4.2.2.17)
// and backs off. Linux's form of probe: an old sequence number (SND.UNA-1), no
// data, which the peer answers with an ACK carrying its window. The connection
// stays up as long as probes are answered; Retries2 unanswered ones in a row
// abort it.
func (e *Endpoint) onPersist() {
	defer e.flush()
	switch e.state {
	case StateEstablished, StateCloseWait, StateFinWait1, StateClosing, StateLastAck:
	default:
		return
	}
	if e.snd.local.held && e.snd.wnd > 0 {
		e.onResourceProbe() // the timer is local congestion's (localcong.go)
		return
	}
	if e.snd.wnd > 0 || len(e.snd.rtxq) > 0 {
		e.snd.persistBackoff = 0
		e.output()
		return
	}
	if e.snd.persistProbes >= e.cfg.Retries2 {
		e.abort(ErrTimeout, true)
		return
	}
	e.snd.persistProbes++
	e.stats.PersistProbes++
	seg := Segment{Seq: e.snd.una - 1, Flags: FlagACK}
	e.send(&seg)
	if e.state == StateClosed {
		return
	}
	if e.persistTimeout() < e.cfg.MaxRTO {
		e.snd.persistBackoff++ // RFC 1122 4.2.2.17: exponential backoff
	}
	e.startTimer(timerPersist, e.persistTimeout())
}

// onCloseTimer ends TIME-WAIT (RFC 9293 3.10.8), or FIN-WAIT-2 after Close
// (Linux tcp_fin_timeout).
func (e *Endpoint) onCloseTimer() {
	defer e.flush()
	switch e.state {
	case StateTimeWait, StateFinWait2:
		e.enterClosed(nil)
	}
}

// onUserTimeout aborts a connection whose data stayed unacknowledged for
// UserTimeout (RFC 5482, RFC 9293 3.10.8).
func (e *Endpoint) onUserTimeout() {
	defer e.flush()
	if e.state == StateClosed || len(e.snd.rtxq) == 0 {
		return
	}
	e.abort(ErrTimeout, e.state != StateSynSent)
}

// SetKeepAlive changes the connection's keepalive (RFC 1122 4.2.3.6): on or off,
// and, where positive, the idle time before the first probe, the interval
// between probes and the number of unanswered probes that abort the connection.
// Zero or negative values keep the current ones. Turning it on arms the first
// probe at idle from now.
func (e *Endpoint) SetKeepAlive(on bool, idle, interval time.Duration, count int) {
	defer e.flush()
	if idle > 0 {
		e.cfg.KeepIdle = idle
	}
	if interval > 0 {
		e.cfg.KeepInterval = interval
	}
	if count > 0 {
		e.cfg.KeepCount = count
	}
	e.cfg.KeepAlive = on
	if on {
		e.armKeepalive()
	} else {
		e.stopTimer(timerKeepalive)
	}
}

// SetUserTimeout changes the user timeout (RFC 5482; Config.UserTimeout): zero
// turns it off; a new one applies from now to the data already waiting for an
// ACK, as Linux's TCP_USER_TIMEOUT does. A negative d is an error.
func (e *Endpoint) SetUserTimeout(d time.Duration) error {
	if d < 0 {
		return ErrInvalidConfig
	}
	defer e.flush()
	e.cfg.UserTimeout = d
	e.stopTimer(timerUser)
	if d > 0 && len(e.snd.rtxq) > 0 && e.state != StateClosed {
		e.startTimer(timerUser, d)
	}
	return nil
}
