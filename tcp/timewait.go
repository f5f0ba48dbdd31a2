package tcp

import (
	"net/netip"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
	"github.com/tcpwheel/tcpwheel/timer"
)

// TimeWait is a connection in TIME-WAIT kept as no more than that state
// needs (Linux's inet_timewait_sock): a closed connection waits out 2*MSL
// (a minute by default) to answer a retransmitted FIN and to keep its
// 4-tuple from a new incarnation that old segments could confuse (RFC 9293
// 3.10.8), and a server that closes first keeps one per connection it
// served, for that minute. An Endpoint is 2,304 bytes; a record is 128, in
// its host's table (TimeWaitHost), and holds no pointer at all: a busy
// server's minute of TIME-WAIT is memory the garbage collector does not
// scan (TestTimeWaitRecordSize).
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
// A TimeWait is a handle to a record (TimeWaitHost.Lookup): a small value,
// valid until the record closes, after which Closed reports true and the
// methods do nothing. Records are not safe for concurrent use: they run on
// their host's loop.
type TimeWait struct {
	h   *TimeWaitHost
	i   int32  // the record's slot in h.recs
	gen uint32 // the record's generation: a slot reused has another
}

// TimeWaitHost is what the TimeWait records of a stack share: the timers
// their 2*MSL runs on, the Output they send through, the function told
// when one closes, and the counters they count in (as Endpoint.Counters
// would have). It is also their table: the records themselves, in a slab
// with no pointer in it, indexed by 4-tuple from a map whose keys and
// values hold none either, and kept in the order they end (Linux's death
// row), so that one timer, armed for the first to end, serves them all.
// The zero value, with Timers, Output and Closed set, is ready to use.
type TimeWaitHost struct {
	Timers Timers
	Output Output
	// Closed is called with a record's 4-tuple when the record reaches
	// CLOSED: its 2*MSL ran out, a RST closed it, a new incarnation
	// replaced it (ReuseTimeWaitRecord, Replace), or the wheel refused
	// its host's timer. The record is gone from the table by then (Lookup
	// does not find it) and sends nothing more.
	Closed   func(ID)
	Counters Counters
	// Max, if not zero, is the most records the table holds (Linux's
	// tcp_max_tw_buckets). An endpoint handed over while it is full
	// (Endpoint.TimeWait) goes to CLOSED at once, without a record, as
	// Linux closes a socket whose TIME-WAIT finds its table full ("time
	// wait bucket table overflow"): its 4-tuple and port are free at once,
	// and a segment for it later finds no connection. Overflows counts
	// them.
	Max       int
	Overflows uint64
	// Shrinks counts the compactions of a table that emptied to a quarter
	// of its slab (shrink).
	Shrinks uint64

	recs       []twRecord      // slot 0 unused: 0 is "none" in the links below
	index      map[twKey]int32 // a live record's slot by its 4-tuple: len is the count
	free       int32           // the first free slot, linked by next
	head, tail int32           // the live records by deadline: head ends first
	gen        uint32          // the last generation given
	entry      timer.Entry     // while records live, armed at or before head's deadline
	armed      time.Duration   // the instant entry was armed for
	expiring   bool            // in expire: it arms entry when done
}

// twRecord is a record's state: what handleSynchronized reads and writes
// in TIME-WAIT, and no pointer (see TimeWait).
type twRecord struct { // laid out to fill 128 bytes
	key        twKey
	sndWS      uint8 // the peer's window shift
	ws         uint8 // ours
	tsOK       bool
	gen        uint32       // 0: a free slot
	prev, next int32        // neighbours on the death row (next: the free list's)
	snd        seqnum.Value // SND.NXT (= SND.UNA = SND.MAX: our FIN is acknowledged)
	wl1, wl2   seqnum.Value // SND.WL1, SND.WL2
	maxWnd     uint32       // the largest SND.WND seen: RFC 5961 5.2's bound on old ACKs
	rcv, adv   seqnum.Value // RCV.NXT and the right edge advertised
	space      int32        // the receive buffer's free space when the application closed
	sws        int32        // the receiver's smallest step of the right edge
	tsRecent   uint32
	tsOffset   uint32
	deadline   time.Duration // when 2*MSL ends, on Timers' clock
	dur        time.Duration // Config.TimeWait, which a FIN restarts

	challenges challengeLimit // RFC 5961 7
}

// twKey is an ID without pointers (a netip.Addr holds one): both addresses
// as 16 bytes, the ports, and which address is IPv4.
type twKey struct {
	local, remote [16]byte
	lport, rport  uint16
	v4            uint8 // bit 0: local, bit 1: remote
}

// keyOf returns id's key; false for an address with a zone, which a key
// does not keep (such a connection keeps its endpoint in TIME-WAIT).
func keyOf(id ID) (twKey, bool) {
	l, r := id.Local.Addr(), id.Remote.Addr()
	if !l.IsValid() || !r.IsValid() || l.Zone() != "" || r.Zone() != "" {
		return twKey{}, false
	}
	k := twKey{local: l.As16(), remote: r.As16(), lport: id.Local.Port(), rport: id.Remote.Port()}
	if l.Is4() {
		k.v4 |= 1
	}
	if r.Is4() {
		k.v4 |= 2
	}
	return k, true
}

// id is keyOf's inverse.
func (k *twKey) id() ID {
	addr := func(b [16]byte, v4 bool) netip.Addr {
		if v4 {
			return netip.AddrFrom4([4]byte(b[12:]))
		}
		return netip.AddrFrom16(b)
	}
	return ID{
		Local:  netip.AddrPortFrom(addr(k.local, k.v4&1 != 0), k.lport),
		Remote: netip.AddrPortFrom(addr(k.remote, k.v4&2 != 0), k.rport),
	}
}

// TimeWait hands the endpoint, in TIME-WAIT after the application closed
// it (EventTimeWait), over to a new record of h, and returns it; the
// endpoint goes to CLOSED and sends nothing more. The stack calls it from
// the endpoint's Notifier, on EventTimeWait, and the endpoint's EventClosed
// follows once the Notifier returns (called elsewhere, TimeWait delivers
// it before it returns). The record ends at the instant the endpoint's
// 2*MSL timer would have fired (Timers.Deadline). TimeWait returns false,
// and changes nothing, when the endpoint is not in that state, traces its
// timers (Config.TraceTimers: a record keeps no trace), has an address
// with a zone, or h's timer cannot be armed. When h is full (Max) the
// endpoint goes to CLOSED all the same, with no record (counted in
// h.Overflows), and TimeWait returns false: its EventClosed follows as
// above, and the endpoint sends nothing.
func (e *Endpoint) TimeWait(h *TimeWaitHost) (TimeWait, bool) {
	r := &e.rcv
	if e.state != StateTimeWait || !e.appClosed || e.trace != nil || e.snd.nxt != e.snd.una || e.snd.una != e.snd.max ||
		len(r.ooo) > 0 || e.lastAckSent != r.nxt {
		return TimeWait{}, false
	}
	deadline, pending := e.w.Deadline(&e.timers[timerClose])
	k, ok := keyOf(e.id)
	if !pending || !ok {
		return TimeWait{}, false
	}
	if _, dup := h.index[k]; dup {
		return TimeWait{}, false
	}
	if h.Max > 0 && len(h.index) >= h.Max {
		h.Overflows++
		e.enterClosed(nil) // stops timerClose
		e.flush()
		return TimeWait{}, false
	}
	i, ok := h.insert(twRecord{
		key: k, deadline: deadline, dur: e.cfg.TimeWait,
		snd: e.snd.nxt, wl1: e.snd.wl1, wl2: e.snd.wl2, maxWnd: e.snd.maxWnd, sndWS: e.snd.ws,
		rcv: r.nxt, adv: r.adv, space: int32(r.space()), sws: int32(r.sws), ws: r.ws,
		tsOK: e.tsOK, tsRecent: e.tsRecent, tsOffset: e.tsOffset, challenges: e.challenges,
	})
	if !ok {
		return TimeWait{}, false
	}
	t := TimeWait{h, i, h.recs[i].gen}
	e.enterClosed(nil) // stops timerClose
	e.flush()          // from its Notifier: delivered once that returns
	return t, true
}

// Len returns the number of records.
func (h *TimeWaitHost) Len() int { return len(h.index) }

// Lookup returns the record of the 4-tuple id, if h has one.
func (h *TimeWaitHost) Lookup(id ID) (TimeWait, bool) {
	if len(h.index) == 0 {
		return TimeWait{}, false
	}
	k, ok := keyOf(id)
	if !ok {
		return TimeWait{}, false
	}
	i, ok := h.index[k]
	if !ok {
		return TimeWait{}, false
	}
	return TimeWait{h, i, h.recs[i].gen}, true
}

// insert adds r to the table, arming the timer if r ends first, and
// returns its slot; false, with nothing changed, when the wheel refuses.
func (h *TimeWaitHost) insert(r twRecord) (int32, bool) {
	if empty := len(h.index) == 0; !h.expiring && (empty || r.deadline < h.armed) {
		if empty {
			h.entry.InitHandler((*twExpiry)(h))
		}
		if err := h.Timers.StartAt(&h.entry, r.deadline); err != nil {
			return 0, false
		}
		h.armed = r.deadline
	}
	if h.gen++; h.gen == 0 {
		h.gen = 1
	}
	r.gen = h.gen
	i := h.free
	if i != 0 {
		h.free = h.recs[i].next
		h.recs[i] = r
	} else {
		if len(h.recs) == 0 {
			h.recs = append(h.recs, twRecord{})
		}
		i = int32(len(h.recs))
		h.recs = append(h.recs, r)
	}
	if h.index == nil {
		h.index = make(map[twKey]int32)
	}
	h.index[r.key] = i
	h.link(i)
	return i, true
}

// link puts the record of slot i on the death row by its deadline, after
// those that end no later (a search from the tail: one step when records
// come in the order they end, as one duration makes them).
func (h *TimeWaitHost) link(i int32) {
	r := &h.recs[i]
	p := h.tail
	for p != 0 && h.recs[p].deadline > r.deadline {
		p = h.recs[p].prev
	}
	r.prev = p
	if p == 0 {
		r.next, h.head = h.head, i
	} else {
		r.next, h.recs[p].next = h.recs[p].next, i
	}
	if r.next == 0 {
		h.tail = i
	} else {
		h.recs[r.next].prev = i
	}
}

// unlink takes the record of slot i off the death row.
func (h *TimeWaitHost) unlink(i int32) {
	r := &h.recs[i]
	if r.prev == 0 {
		h.head = r.next
	} else {
		h.recs[r.prev].next = r.next
	}
	if r.next == 0 {
		h.tail = r.prev
	} else {
		h.recs[r.next].prev = r.prev
	}
	r.prev, r.next = 0, 0
}

// twExpiry is the host as its timer's handler (no allocation).
type twExpiry TimeWaitHost

// Expire closes every record whose 2*MSL has ended and arms the timer for
// the next; a wheel that refuses closes the rest, as it would the
// endpoints (timerFailed).
func (x *twExpiry) Expire() {
	h := (*TimeWaitHost)(x)
	h.expiring = true
	now := h.Timers.Now()
	for h.head != 0 && h.recs[h.head].deadline <= now {
		h.close(h.head)
	}
	h.expiring = false
	if h.head == 0 {
		return
	}
	h.shrink()
	h.armed = h.recs[h.head].deadline
	if err := h.Timers.StartAt(&h.entry, h.armed); err != nil {
		for h.head != 0 {
			h.Counters.TimerErrors++
			h.close(h.head)
		}
	}
}

// twShrinkMin is the smallest slab shrink compacts: below it a table keeps
// its high-water mark, as it did always (a few hundred KB at most).
const twShrinkMin = 4096

// shrink gives back the memory of a table whose live records fill a
// quarter of its slab or less, at the end of an expiry: a burst of
// connections that closed first (ab's, a bounded TIME-WAIT's 262,144
// records: 32 MB of slab, and its index) otherwise held its
// high-water mark until the last record closed, minutes after the burst,
// or never under a steady trickle. The live records move, in deadline
// order, into a slab of twice their count and a new index (Go's maps do
// not shrink): O(live), at most once per halving, so amortized over the
// closes that made room. Slots change, so a handle taken before reports
// its record closed: handles live within one call (Lookup's callers),
// never across an expiry.
func (h *TimeWaitHost) shrink() {
	live := len(h.index)
	if len(h.recs) <= twShrinkMin || 4*live > len(h.recs) {
		return
	}
	recs := make([]twRecord, 1, 1+2*live) // slot 0 unused
	index := make(map[twKey]int32, live)
	for i := h.head; i != 0; i = h.recs[i].next {
		r := h.recs[i]
		j := int32(len(recs))
		r.prev, r.next = j-1, 0
		if j > 1 {
			recs[j-1].next = j
		}
		recs = append(recs, r)
		index[r.key] = j
	}
	h.recs, h.index, h.free = recs, index, 0
	h.head, h.tail = 1, int32(live)
	h.Shrinks++
}

// close is the record's CLOSED: out of the table, its host told once. The
// table gives its memory back when its last record closes.
func (h *TimeWaitHost) close(i int32) {
	r := &h.recs[i]
	id := r.key.id()
	h.unlink(i)
	delete(h.index, r.key)
	r.gen, r.next, h.free = 0, h.free, i
	if len(h.index) == 0 {
		if !h.expiring {
			h.Timers.Stop(&h.entry)
		}
		if cap(h.recs) > 256 {
			h.recs, h.index = nil, nil
		}
		h.recs, h.free, h.head, h.tail = h.recs[:0], 0, 0, 0
	}
	h.Closed(id)
}

// rec returns t's record, or nil once it has closed.
func (t TimeWait) rec() *twRecord {
	if t.h == nil || int(t.i) >= len(t.h.recs) || t.h.recs[t.i].gen != t.gen {
		return nil
	}
	return &t.h.recs[t.i]
}

// ID returns the connection's 4-tuple (the zero ID once it has closed).
func (t TimeWait) ID() ID {
	if r := t.rec(); r != nil {
		return r.key.id()
	}
	return ID{}
}

// Closed reports whether the record has reached CLOSED.
func (t TimeWait) Closed() bool { return t.rec() == nil }

// HandleSegment answers a segment the stack demultiplexed to the record
// (RFC 9293 3.10.7.4 in TIME-WAIT, as Endpoint.HandleSegment). It never
// panics.
func (t TimeWait) HandleSegment(seg *Segment) {
	if t.h == nil {
		return
	}
	c := &t.h.Counters
	c.SegsIn++
	r := t.rec()
	switch {
	case r == nil:
		c.DropsClosed++
		return
	case badFlags(seg.Flags):
		c.DropsBadFlags++
		return
	}
	if pawsRejects(seg, r.tsOK, r.tsRecent) {
		c.DropsPAWS++ // RFC 7323 5.3 (checkPAWS)
		t.sendAck(r)
		return
	}
	if !acceptable(r.rcv, r.adv, seg.Seq, seg.Len()) { // first (checkSequence)
		c.DropsOutOfWindow++
		if seg.Flags&FlagRST == 0 {
			if seg.Flags&FlagFIN != 0 {
				t.restart(r) // a retransmitted FIN restarts 2*MSL
			}
			t.sendAck(r)
		}
		return
	}
	if seg.Flags&FlagRST != 0 { // second (checkRST)
		if seg.Seq != r.rcv {
			t.challengeAck(r) // RFC 5961 3.2
			return
		}
		c.ResetsReceived++
		t.h.close(t.i)
		return
	}
	if seg.Flags&FlagSYN != 0 { // fourth (checkSYN): RFC 5961 4.2
		t.challengeAck(r)
		return
	}
	if seg.Flags&FlagACK == 0 { // fifth (checkACK)
		c.DropsNoACK++
		return
	}
	if r.tsOK && seg.Options.TS && seg.Seq.LessThanEq(r.rcv) && !tsBefore(seg.Options.TSVal, r.tsRecent) {
		r.tsRecent = seg.Options.TSVal // RFC 7323 4.3 (updateTSRecent): our last ACK's is RCV.NXT
	}
	switch ack := seg.Ack; { // ackAcceptable, handleAck: nothing is in flight
	case r.snd.LessThan(ack):
		c.DropsBadACK++
		t.sendAck(r) // an ACK of something not yet sent
		return
	case ack.LessThan(r.snd.Add(-seqnum.Size(max(r.maxWnd, 1)))):
		c.DropsBadACK++
		t.challengeAck(r) // RFC 5961 5.2
		return
	case ack == r.snd:
		r.takeWindow(seg)
	}
	if len(seg.Payload) > 0 {
		c.DropsDataAfterFIN++ // ignoreText
	}
	if seg.Flags&FlagFIN != 0 { // ackOurFIN in TIME-WAIT
		t.restart(r) // RFC 9293 3.10.7.4: restart the 2 MSL timeout
		t.sendAck(r)
	}
}

// takeWindow is sender.updateWindow for the one thing the window still
// decides in TIME-WAIT: the largest window seen, which bounds old ACKs.
func (r *twRecord) takeWindow(seg *Segment) {
	if !windowUpdate(r.wl1, r.wl2, seg) {
		return
	}
	r.wl1, r.wl2 = seg.Seq, seg.Ack
	r.maxWnd = max(r.maxWnd, uint32(seg.Window)<<r.sndWS)
}

// reusableBy is Endpoint.reusableBy for the record.
func (t TimeWait) reusableBy(seg *Segment) bool {
	r := t.rec()
	return r != nil && reusable(seg, r.tsOK, r.tsRecent, r.rcv)
}

// Replace is ReplaceTimeWait for a record: when seg may open a new
// incarnation (RFC 6191), the record closes (its host's Closed called)
// and Replace reports true; else it returns false at once.
func (t TimeWait) Replace(seg *Segment) bool {
	if !t.reusableBy(seg) {
		return false
	}
	t.h.close(t.i)
	return true
}

// restart starts 2*MSL again: the record moves to its place on the death
// row (the end, for one duration). The host's timer, armed at or before
// the first deadline, stays as it is.
func (t TimeWait) restart(r *twRecord) {
	h := t.h
	h.unlink(t.i)
	r.deadline = h.Timers.Now() + r.dur
	h.link(t.i)
}

// challengeAck is Endpoint.challengeAck (RFC 5961 7).
func (t TimeWait) challengeAck(r *twRecord) {
	if !r.challenges.allow(t.h.Timers.Now()) {
		t.h.Counters.DropsRateLimited++
		return
	}
	t.h.Counters.ChallengeACKs++
	t.sendAck(r)
}

// sendAck sends <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK> as Endpoint.send would:
// the window of the frozen space, and the timestamps. It is the last use
// of r by its callers: the Output may run anything.
func (t TimeWait) sendAck(r *twRecord) {
	id := r.key.id()
	seg := Segment{SrcPort: id.Local.Port(), DstPort: id.Remote.Port(), Seq: r.snd, Ack: r.rcv, Flags: FlagACK}
	seg.Window, r.adv = advertise(r.rcv, r.adv, int(r.space), r.ws, int(r.sws))
	if r.tsOK {
		seg.Options.TS, seg.Options.TSVal, seg.Options.TSEcr = true, tsClock(t.h.Timers.Now(), r.tsOffset), r.tsRecent
	}
	t.h.Counters.SegsOut++
	t.h.Output.Send(id, &seg)
}
