// Package tcp is a TCP (RFC 9293) core that is free of I/O: parsed segments go
// in through [Endpoint.HandleSegment] and [Listener.HandleSegment], segments to
// send come out through an [Output], and time comes from a [timer.Wheel].
//
// Every TCP timer is an entry on the wheel, embedded in its owner:
//
//   - retransmission: each in-flight segment embeds a timer.Entry. Sending or
//     resending the segment starts it at RTO; a cumulative ACK or a SACK that
//     covers the segment stops it. The expiry of the oldest outstanding segment is
//     an RTO event, RFC 6298 (5.4)-(5.7). SYN and SYN-ACK retransmissions are the
//     same mechanism, with their own retry limit.
//   - loss detection, RACK-TLP (RFC 8985, on unless Config.DisableRACKTLP): the
//     tail-loss probe timeout (PTO, 2*SRTT + 2 ms) and RACK's reordering timer
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
//     the Endpoint.
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
// with [ResetFor]. The endpoint's outgoing segments reach [Output.Send]; the
// stack encodes them with [Segment.Encode] and [SetChecksum]. The application
// side (Read, Write, CloseWrite, Close, Abort) is non-blocking; the stack blocks
// goroutines and wakes them on the [Event]s it is notified of.
package tcp
