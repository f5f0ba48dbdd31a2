// Package tcp is a TCP (RFC 9293) core that is free of I/O: parsed segments go
// in through [Endpoint.HandleSegment] and [Listener.HandleSegment], segments to
// send come out through an [Output], and time comes from the event loop
// through the small [Timers] interface (now, the send instant, start and stop
// of the timer.Entry values an endpoint embeds), which [Dial] and
// [NewListener] take; [OnWheel] adapts a *timer.Wheel.
//
// # Layout
//
// An [Endpoint] is the state machine and the glue; each of its parts owns its
// fields and the methods that touch only them, in the file named after it:
//
//   - endpoint.go: Endpoint (state, error, events and their delivery, the
//     parts below), Dial, the application calls (Read, Write, CloseWrite,
//     Close, Abort), enterClosed, Info and Counters.
//   - input.go: segment arrival, RFC 9293 3.10.7. SYN-SENT (3.10.7.3) and the
//     synchronized states (3.10.7.4) are pipelines of the RFC's checks, one
//     function each, named after the step: checkPAWS, checkSequence (first),
//     checkRST (second), checkSYN (fourth), checkACK (fifth), processText
//     (seventh), processFIN (eighth); handleSynchronized only drives them.
//     Also the flags dropped in every state (badFlags: SYN with FIN or RST),
//     option negotiation, the challenge-ACK limit (RFC 5961 7), TIME-WAIT's
//     entry and the test for its reuse (reusableBy).
//   - snd.go: the sender (send sequence space, send buffer, retransmission
//     queue of txSegs, retransmission and persist counts) and the send path:
//     transmit, send (the fields every segment shares), output with SWS
//     avoidance, ACK processing (handleAck, ackRange) and the RTO (onRTO).
//   - rcv.go: the receiver (receive sequence space, buffer, out-of-order
//     queue, advertised window and SWS avoidance, delayed-ACK accounting,
//     SACK blocks to send). It sends nothing: input.go decides the ACKs.
//   - sack.go: the scoreboard of what the peer's SACK blocks cover.
//   - recovery.go: fast retransmit and fast recovery (RFC 5681 3.2, RFC 6582,
//     RFC 6675): duplicate ACKs, the recovery point, what is resent.
//   - cc.go: congestion control behind a small interface (cwnd, ssthresh,
//     and a hook per event: ACK, recovery entered, ACK in recovery, recovery
//     left, RTO, probe repair); newReno is the one implementation.
//   - rack.go: RACK-TLP (RFC 8985): rackState, loss detection, the probes.
//   - rtt.go: the RFC 6298 estimator.
//   - timers.go: the endpoint's timers as an array indexed by timerKind, with
//     one stopAll; their expiry functions (delayed ACK, keepalive, persist,
//     TIME-WAIT/FIN-WAIT-2, user timeout); Timers and OnWheel.
//   - listen.go: the Listener (LISTEN, RFC 9293 3.10.7.2), its half-open
//     endpoints (at most Backlog; fewer SYN-ACK retries while the table is
//     under pressure), and TIME-WAIT reuse (RFC 6191; the test is
//     reusableBy, in input.go).
//   - cookie.go: SYN cookies (RFC 4987 3.6) as Linux makes them, for SYNs
//     beyond the half-open table: the cookie, and the SYN's options in our
//     TSval's low bits. config.go, segment.go, state.go, errors.go, buffer.go: the
//     configuration, the wire format, the states, errors and events, and the
//     byte queue both buffers use (a ring, internal/ring).
//
// # Time
//
// The endpoint reads no clock. It sees time only through [Timers], the
// loop's wheel: Now, the instant the loop handed in with its last Advance,
// for everything (timestamps, RTT samples, RACK's xmit_ts, relative timers);
// and SendTime, the instant a segment handed to the Output now leaves, from
// which its retransmission timer runs, so that a resend leaves a full RTO
// after the segment it repeats even when the packet that let the segment out
// was handled some time after the last Advance. [Dial] and [NewListener]
// take a Timers; [OnWheel] adapts a *timer.Wheel: its SendTime is the wheel's
// own clock read at the send, never before the wheel's Now. (timer.Wheel has
// no such method: the wheel reads no clock of its own accord.)
//
// Every TCP timer is an entry on the wheel, embedded in its owner:
//
//   - retransmission: each in-flight segment embeds a timer.Entry. Sending or
//     resending the segment starts it at RTO; a cumulative ACK or a SACK that
//     covers the segment stops it. The expiry of the oldest outstanding segment is
//     an RTO event, RFC 6298 (5.4)-(5.7). SYN and SYN-ACK retransmissions are the
//     same mechanism, with their own retry limit.
//   - loss detection, RACK-TLP (RFC 8985, on unless Config.DisableRACKTLP): the
//     tail-loss probe timeout (PTO, 2*SRTT + 2 ms; 2*SRTT + TLP.max_ack_delay
//     when one segment is in flight, whatever it carries, as Linux adds
//     TCP_RTO_MIN) and RACK's reordering timer
//     are two entries embedded in the Endpoint, beside the per-segment RTO
//     entries, which stay as they are. A PTO is armed only when it comes
//     before the oldest segment's RTO; its probe (new data, else the last
//     segment again) elicits an ACK whose SACK lets RACK find the lost segments
//     and resend them at once; an unanswered probe leaves the RTO to fire as
//     before. RACK marks a segment lost once one sent reo_wnd (min RTT/4) or
//     more after it was delivered; it works beside NewReno's three duplicate
//     ACKs (RFC 5681, RFC 6582), whichever detects the loss first starting
//     fast recovery. With SACK, fast recovery is RFC 6675's: cwnd drops to
//     ssthresh without inflation and pipe (sent, not SACKed, not marked
//     lost) paces resends and new data; with RACK on, only the segments RACK
//     marks lost are resent (the third duplicate ACK resends the head), each
//     once until RACK finds the resend lost too. RACK orders transmissions
//     sent in the same clock tick by when they were sent, not by sequence
//     number. One step beyond RFC 8985 7.2, which schedules no probe in
//     recovery: when fast recovery hears no ACK for a PTO (the ACKs that
//     clock it were lost), the same timer sends one probe, so that a lost
//     retransmission, or a lost ACK of it, costs a PTO instead of an RTO
//     (Config.DisableRecoveryProbe turns it off). See timers.go.
//   - delayed ACK, keepalive, persist (zero-window probes), TIME_WAIT and the
//     FIN_WAIT_2 timeout, and the user timeout (RFC 5482) are entries embedded in
//     the Endpoint (Endpoint.timers, by timerKind).
//
// Where each timer starts (START_TIMER) and stops (STOP_TIMER):
//
//   - retransmission (txSeg.entry): started by transmit (snd.go) from
//     SendTime, and by ensureRTOTimer (snd.go) when an ACK or SACK leaves the
//     oldest segment without one; stopped by ackRange through freeSeg
//     (acknowledged), by updateSACK (sack.go, SACKed), by onRTO for all but
//     the head (go-back-N), and by enterClosed.
//   - timerDelayedACK: started by ackReceived (input.go); stopped by send
//     (snd.go) whenever a segment carries the ACK, including the one
//     FlushAck sends at the end of an input batch (AckHolder).
//   - timerKeepalive: started by armKeepalive (timers.go) on establishment and
//     on every acceptable ACK, and by onKeepalive; stopped by SetKeepAlive.
//   - timerPersist: started by armPersist from output when the peer's window
//     is zero, and by onPersist; stopped by sendData and by takeWindow (snd.go)
//     when the window opens.
//   - timerClose: started by Close in FIN-WAIT-2, by ackOurFIN (input.go) on
//     entering FIN-WAIT-2 after Close, by enterTimeWait, and by a FIN again in
//     TIME-WAIT (checkSequence, ackOurFIN).
//   - timerUser: started by transmit when data first waits for an ACK and by
//     ackRange on progress; stopped by ackRange once nothing is outstanding.
//   - timerPTO and timerReorder: started and stopped in rack.go (armPTO,
//     rackDetectLoss, rackRecover, rackOnAck, rackOnRTO).
//   - all of the endpoint's timers: stopped by stopAll (timers.go), from
//     enterClosed (endpoint.go), and from enterTimeWait (input.go), which
//     keeps timerClose.
//
// # Concurrency
//
// Nothing here is safe for concurrent use. An Endpoint, a Listener and their
// wheel belong to one goroutine, the event loop that owns the wheel: it calls
// wheel.Advance(clock.Now()) when it wakes, then hands segments and application
// calls to the endpoints, which call back into the Output and into their Notify
// function on the same goroutine.
//
// # Boundary
//
// The stack parses the IP header, verifies the checksum (it needs the
// pseudo-header), calls [ParseSegment], and demultiplexes by [ID]: to the
// Endpoint that has it, else to the Listener of the local port, else it answers
// with [ResetFor]. A SYN for an Endpoint in TIME-WAIT goes first to the
// Listener of its port, if there is one, through [Listener.ReuseTimeWait]
// (RFC 6191), and to the Endpoint only if the Listener does not take it. The endpoint's outgoing segments reach [Output.Send]; the
// stack encodes them with [Segment.Encode] and [SetChecksum]. The application
// side (Read, Write, CloseWrite, Close, Abort) is non-blocking; the stack blocks
// goroutines and wakes them on the [Event]s it is notified of.
package tcp
