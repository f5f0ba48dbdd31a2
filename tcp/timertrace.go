package tcp

import "time"

// TimerKind names one of an endpoint's timers in TimerExpiry.
type TimerKind uint8

// The endpoint's timers: the retransmission timer (one per segment in flight)
// and the others, one each.
const (
	TimerRTO        TimerKind = iota // RFC 6298
	TimerDelayedACK                  // RFC 1122 4.2.3.2
	TimerKeepalive                   // RFC 1122 4.2.3.6
	TimerPersist                     // RFC 9293 3.8.6.1
	TimerClose                       // TIME-WAIT and the FIN-WAIT-2 timeout
	TimerUser                        // RFC 5482
	TimerPTO                         // RFC 8985 7.2
	TimerReorder                     // RFC 8985 6.2
)

var timerKindNames = [...]string{"rto", "delayed-ack", "keepalive", "persist", "close", "user-timeout", "pto", "reorder"}

func (k TimerKind) String() string {
	if int(k) < len(timerKindNames) {
		return timerKindNames[k]
	}
	return "timer?"
}

// kindOf is the TimerKind of one of the endpoint's other timers.
func kindOf(k timerKind) TimerKind { return TimerKind(k) + 1 }

// TimerExpiry is one timer's life on the endpoint's clock: when it was started,
// when it was due, and when the loop ran its expiry. Due - Armed is the
// duration it ran (for the RTO, backoff included: RFC 6298 (5.5)); Fired -
// Due is how late the loop ran it. These are the stack's own instants, so a
// test against a real peer can tell a timer started with a wrong duration from
// a loop that a busy machine delayed.
type TimerExpiry struct {
	Timer             TimerKind
	Armed, Due, Fired time.Duration
}

// maxTimerLog bounds Config.TraceTimers's log: later expiries are counted
// (timerTrace.dropped) but not kept.
const maxTimerLog = 256

// timerTrace is Config.TraceTimers's state: when each of the other timers was
// last started and its deadline, and the log of expiries.
type timerTrace struct {
	started [numTimers][2]time.Duration
	log     []TimerExpiry
	dropped int
}

// traceFired logs the expiry of timer k (with Config.TraceTimers).
func (e *Endpoint) traceFired(k timerKind) {
	st := e.trace.started[k]
	e.traceExpiry(TimerExpiry{Timer: kindOf(k), Armed: st[0], Due: st[1], Fired: e.w.Target()})
}

// traceExpiry appends x to the log, if it has room.
func (e *Endpoint) traceExpiry(x TimerExpiry) {
	if len(e.trace.log) >= maxTimerLog {
		e.trace.dropped++
		return
	}
	e.trace.log = append(e.trace.log, x)
}
