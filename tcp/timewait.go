package tcp

import (
	"time"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
	"github.com/tcpwheel/tcpwheel/timer"
)

// TimeWait is a connection in TIME-WAIT kept as no more than that state
// needs (Linux's inet_timewait_sock): a closed connection waits out 2*MSL
// (a minute by default) to answer a retransmitted FIN and to keep its
// 4-tuple from a new incarnation that old segments could confuse (RFC 9293
// 3.10.8), and a server that closes first keeps one per connection it
// served, for that minute. An Endpoint is 2,304 bytes; a record is 192
// (TestTimeWaitRecordSize), and holds no pointer into the connection's buffers.
//
// A record answers every segment as the Endpoint it replaced would have, by
// the same rules (handleSynchronized in TIME-WAIT; the tests hold the two
// to the same bytes out): PAWS, the acceptability test, RST and SYN (RFC
// 5961's challenge ACKs, rate-limited), old and unsent ACKs, a FIN again
// (an ACK, and 2*MSL restarts); RFC 6191's reuse by a new SYN
// (Listener.ReuseTimeWaitRecord, Replace). The window it advertises is
// the one the endpoint's buffers gave when the application closed: nothing
// changes it after that. Its counters go to its host's.
//
// A record is not safe for concurrent use: it runs on its host's loop.
type TimeWait struct {
	host  *TimeWaitHost
	id    ID
	entry timer.Entry // 2*MSL: CLOSED when it fires

	dur      time.Duration // Config.TimeWait, which a FIN restarts
	snd      seqnum.Value  // SND.NXT (= SND.UNA = SND.MAX: our FIN is acknowledged)
	wl1, wl2 seqnum.Value  // SND.WL1, SND.WL2
	maxWnd   uint32        // the largest SND.WND seen: RFC 5961 5.2's bound on old ACKs
	rcv, adv seqnum.Value  // RCV.NXT and the right edge advertised
	space    int32         // the receive buffer's free space when the application closed
	sws      int32         // the receiver's smallest step of the right edge
	tsRecent uint32
	tsOffset uint32
	sndWS    uint8 // the peer's window shift
	ws       uint8 // ours
	tsOK     bool
	closed   bool

	challenges challengeLimit // RFC 5961 7
}

// TimeWaitHost is what the TimeWait records of a stack share: the timers
// their 2*MSL runs on, the Output they send through, the function told
// when one closes, and the counters they count in (as Endpoint.Counters
// would have).
type TimeWaitHost struct {
	Timers Timers
	Output Output
	// Closed is called when a record reaches CLOSED: its 2*MSL ran out, a
	// RST closed it, a new incarnation replaced it (ReuseTimeWaitRecord,
	// Replace), or the wheel refused its timer. The stack forgets it; the
	// record sends nothing more.
	Closed   func(*TimeWait)
	Counters Counters
}

// TimeWait hands the endpoint, in TIME-WAIT after the application closed
// it (EventTimeWait), over to a new TimeWait record of h, and returns the
// record; the endpoint goes to CLOSED and sends nothing more. The stack
// calls it from the endpoint's Notifier, on EventTimeWait, and the
// endpoint's EventClosed follows once the Notifier returns (called
// elsewhere, TimeWait delivers it before it returns). The record takes the endpoint's
// 2*MSL timer over as it stands (Timers.Replace), so it ends at the same
// instant. TimeWait returns nil, and changes nothing, when the endpoint
// is not in that state (or traces its timers, Config.TraceTimers: a
// record keeps no trace).
func (e *Endpoint) TimeWait(h *TimeWaitHost) *TimeWait {
	r := &e.rcv
	if e.state != StateTimeWait || !e.appClosed || e.trace != nil || e.snd.nxt != e.snd.una || e.snd.una != e.snd.max ||
		len(r.ooo) > 0 || e.lastAckSent != r.nxt || !e.timers[timerClose].Pending() {
		return nil
	}
	t := &TimeWait{
		host: h, id: e.id, dur: e.cfg.TimeWait,
		snd: e.snd.nxt, wl1: e.snd.wl1, wl2: e.snd.wl2, maxWnd: e.snd.maxWnd, sndWS: e.snd.ws,
		rcv: r.nxt, adv: r.adv, space: int32(r.space()), sws: int32(r.sws), ws: r.ws,
		tsOK: e.tsOK, tsRecent: e.tsRecent, tsOffset: e.tsOffset, challenges: e.challenges,
	}
	t.entry.InitHandler((*timeWaitTimer)(t))
	if !e.w.Replace(&e.timers[timerClose], &t.entry) {
		return nil
	}
	e.enterClosed(nil)
	e.flush() // from its Notifier: delivered once that returns
	return t
}

// timeWaitTimer is the record as its timer's handler (no allocation).
type timeWaitTimer TimeWait

func (x *timeWaitTimer) Expire() { (*TimeWait)(x).close() }

// ID returns the connection's 4-tuple.
func (t *TimeWait) ID() ID { return t.id }

// Closed reports whether the record has reached CLOSED.
func (t *TimeWait) Closed() bool { return t.closed }

// HandleSegment answers a segment the stack demultiplexed to the record
// (RFC 9293 3.10.7.4 in TIME-WAIT, as Endpoint.HandleSegment). It never
// panics.
func (t *TimeWait) HandleSegment(seg *Segment) {
	c := &t.host.Counters
	c.SegsIn++
	switch {
	case t.closed:
		c.DropsClosed++
		return
	case badFlags(seg.Flags):
		c.DropsBadFlags++
		return
	}
	if pawsRejects(seg, t.tsOK, t.tsRecent) {
		c.DropsPAWS++ // RFC 7323 5.3 (checkPAWS)
		t.sendAck()
		return
	}
	if !acceptable(t.rcv, t.adv, seg.Seq, seg.Len()) { // first (checkSequence)
		c.DropsOutOfWindow++
		if seg.Flags&FlagRST == 0 {
			if seg.Flags&FlagFIN != 0 {
				t.restart() // a retransmitted FIN restarts 2*MSL
			}
			t.sendAck()
		}
		return
	}
	if seg.Flags&FlagRST != 0 { // second (checkRST)
		if seg.Seq != t.rcv {
			t.challengeAck() // RFC 5961 3.2
			return
		}
		c.ResetsReceived++
		t.close()
		return
	}
	if seg.Flags&FlagSYN != 0 { // fourth (checkSYN): RFC 5961 4.2
		t.challengeAck()
		return
	}
	if seg.Flags&FlagACK == 0 { // fifth (checkACK)
		c.DropsNoACK++
		return
	}
	if t.tsOK && seg.Options.TS && seg.Seq.LessThanEq(t.rcv) && !tsBefore(seg.Options.TSVal, t.tsRecent) {
		t.tsRecent = seg.Options.TSVal // RFC 7323 4.3 (updateTSRecent): our last ACK's is RCV.NXT
	}
	switch ack := seg.Ack; { // ackAcceptable, handleAck: nothing is in flight
	case t.snd.LessThan(ack):
		c.DropsBadACK++
		t.sendAck() // an ACK of something not yet sent
		return
	case ack.LessThan(t.snd.Add(-seqnum.Size(max(t.maxWnd, 1)))):
		c.DropsBadACK++
		t.challengeAck() // RFC 5961 5.2
		return
	case ack == t.snd:
		t.takeWindow(seg)
	}
	if len(seg.Payload) > 0 {
		c.DropsDataAfterFIN++ // ignoreText
	}
	if seg.Flags&FlagFIN != 0 { // ackOurFIN in TIME-WAIT
		t.sendAck()
		t.restart() // RFC 9293 3.10.7.4: restart the 2 MSL timeout
	}
}

// takeWindow is sender.updateWindow for the one thing the window still
// decides in TIME-WAIT: the largest window seen, which bounds old ACKs.
func (t *TimeWait) takeWindow(seg *Segment) {
	if !windowUpdate(t.wl1, t.wl2, seg) {
		return
	}
	t.wl1, t.wl2 = seg.Seq, seg.Ack
	t.maxWnd = max(t.maxWnd, uint32(seg.Window)<<t.sndWS)
}

// reusableBy is Endpoint.reusableBy for the record.
func (t *TimeWait) reusableBy(seg *Segment) bool {
	return !t.closed && reusable(seg, t.tsOK, t.tsRecent, t.rcv)
}

// Replace is ReplaceTimeWait for a record: when seg may open a new
// incarnation (RFC 6191), the record closes (its host's Closed called)
// and Replace reports true; else it returns false at once.
func (t *TimeWait) Replace(seg *Segment) bool {
	if !t.reusableBy(seg) {
		return false
	}
	t.close()
	return true
}

// restart starts 2*MSL again; a wheel that refuses closes the record, as
// it would the endpoint (timerFailed).
func (t *TimeWait) restart() {
	if err := t.host.Timers.Start(&t.entry, t.dur); err != nil {
		t.host.Counters.TimerErrors++
		t.close()
	}
}

// close is the record's CLOSED: its timer stopped, its host told once.
func (t *TimeWait) close() {
	if t.closed {
		return
	}
	t.closed = true
	t.host.Timers.Stop(&t.entry)
	t.host.Closed(t)
}

// challengeAck is Endpoint.challengeAck (RFC 5961 7).
func (t *TimeWait) challengeAck() {
	if !t.challenges.allow(t.host.Timers.Now()) {
		t.host.Counters.DropsRateLimited++
		return
	}
	t.host.Counters.ChallengeACKs++
	t.sendAck()
}

// sendAck sends <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK> as Endpoint.send would:
// the window of the frozen space, and the timestamps.
func (t *TimeWait) sendAck() {
	seg := Segment{SrcPort: t.id.Local.Port(), DstPort: t.id.Remote.Port(), Seq: t.snd, Ack: t.rcv, Flags: FlagACK}
	seg.Window, t.adv = advertise(t.rcv, t.adv, int(t.space), t.ws, int(t.sws))
	if t.tsOK {
		seg.Options.TS, seg.Options.TSVal, seg.Options.TSEcr = true, tsClock(t.host.Timers.Now(), t.tsOffset), t.tsRecent
	}
	t.host.Counters.SegsOut++
	t.host.Output.Send(t.id, &seg)
}
