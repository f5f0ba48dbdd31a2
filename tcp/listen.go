package tcp

import (
	"time"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// Defaults of ListenerConfig.
const (
	// DefaultBacklog is the default limit of half-open connections per
	// listener.
	DefaultBacklog = 128
	// DefaultSynAckRetries is how many times a half-open connection's SYN-ACK
	// is resent before the connection is dropped: Linux's tcp_synack_retries,
	// resends at 1, 3, 7, 15 and 31 s, dropped at 63 s.
	DefaultSynAckRetries = 5
	// SynAckRetriesUnderPressure caps the SYN-ACK retries while the
	// half-open table is under pressure (Linux lowers them when it is more
	// than half full, in reqsk_timer_handler; here: or was in the last 8 s): resends at 1 and 3 s, dropped
	// at 7 s, so that SYNs nobody ACKs cannot hold the table for a minute.
	SynAckRetriesUnderPressure = 2
	// pressureHold is how long the table stays under pressure after it was
	// last more than half full: longer than a pressured entry lives (7 s),
	// so that the entries of one burst, which expire together, all go by the
	// same rule (Linux's count at each expiry lets the first drops lift the
	// pressure from the rest).
	pressureHold = 8 * time.Second
	// minPressureTable: a table is under pressure when more than half of
	// max(Backlog, minPressureTable) is taken (Linux reqsk_timer_handler).
	minPressureTable = 8
)

// SynCookieMode says when a Listener answers SYNs with SYN cookies (RFC 4987
// 3.6).
type SynCookieMode uint8

// SYN cookie modes, as Linux's tcp_syncookies.
const (
	// SynCookiesWhenFull: once the half-open table is full (tcp_syncookies = 1).
	SynCookiesWhenFull SynCookieMode = iota
	// SynCookiesAlways: for every SYN; no half-open state is kept at all
	// (tcp_syncookies = 2).
	SynCookiesAlways
)

// ListenerConfig configures a Listener.
type ListenerConfig struct {
	// Backlog bounds the connections in SYN-RECEIVED. When it is reached,
	// further SYNs are answered with SYN cookies, or, with DisableSynCookies,
	// dropped (and counted) so that the peers retry. Zero means
	// DefaultBacklog.
	Backlog int
	// SynAckRetries is how many times a half-open connection's SYN-ACK is
	// resent before it is dropped; at most SynAckRetriesUnderPressure while
	// more than half of the table (of max(Backlog, 8)) is taken, or was in
	// the last 8 s. Zero means DefaultSynAckRetries; negative means none.
	// (Config.SYNRetries is the active open's.)
	SynAckRetries int
	// SynCookies says when SYNs get SYN cookies (RFC 4987 3.6, cookie.go);
	// the zero value is SynCookiesWhenFull. DisableSynCookies turns them off.
	SynCookies        SynCookieMode
	DisableSynCookies bool
	// CookieKey keys the SYN cookies' hash (HMAC-SHA-256; CookieKeySize
	// bytes); nil draws one from crypto/rand. A flight recording keeps it so
	// that a replay answers with the same cookies.
	CookieKey []byte
	// Endpoint configures the accepted endpoints.
	Endpoint Config
	// Spares, if set, holds closed endpoints that new connections reuse
	// (Spares.Put); nil allocates every one.
	Spares *Spares
	// Accept receives each connection when its handshake completes, before the
	// segment that completed it has been fully processed (its data may follow).
	// A connection made from a SYN cookie's ACK comes the same way.
	// The stack registers the endpoint under its ID and queues it for Accept.
	// Returning false refuses it: the endpoint is reset.
	Accept func(ep *Endpoint) bool
	// QueueFull, if set, reports whether the stack's queue of connections
	// waiting for Accept is full. While it is, the ACK that would complete a
	// handshake is dropped and counted (DropsAcceptQueue), as Linux does with
	// tcp_abort_on_overflow = 0: the connection stays in SYN-RECEIVED, its
	// SYN-ACK retransmission makes the peer ACK again, and the handshake
	// completes once the application has accepted. (A SYN cookie's ACK is
	// dropped likewise; the peer's next segment brings the cookie again.)
	QueueFull func() bool
	// Dropped, if set, is called with a half-open connection's ID when it
	// ends without completing its handshake: reset by the peer, its SYN-ACK
	// retries ran out, Abort, or Close. (A stack's forwarder learns so that
	// the flow it was deciding about is gone.)
	Dropped func(id ID)
}

// ListenerStats counts a listener's work. Every segment the listener drops
// is counted in one of the Drops fields, by reason; one it answers with a
// RST (an ACK in LISTEN, a segment after Close) in ResetsSent. The half-open
// endpoints count their own drops (Counters), which are lost with them.
type ListenerStats struct {
	SYNsIn, Accepted, Refused uint64
	DropsBacklog              uint64 // SYNs dropped: the half-open table was full and SYN cookies off
	DropsRST                  uint64 // RSTs, ignored in LISTEN (RFC 9293 3.10.7.2)
	DropsOther                uint64 // segments with none of SYN, ACK and RST (RFC 9293 3.10.7.2)
	DropsBadFlags             uint64 // SYN with FIN or RST (badFlags), half-open connections' included
	DropsAcceptQueue          uint64 // handshake-completing ACKs dropped (a cookie's too): the accept queue was full
	ResetsSent                uint64
	HalfOpenTimeouts          uint64 // half-open connections dropped when their SYN-ACK retries ran out
	TimeWaitReused            uint64 // SYNs that replaced a connection in TIME-WAIT (ReuseTimeWait)
	SynCookiesSent            uint64 // SYNs answered with a SYN cookie (RFC 4987 3.6)
	SynCookiesValid           uint64 // ACKs that returned a valid cookie: connections made from cookies
	SynCookiesInvalid         uint64 // ACKs, while cookies were out, that matched nothing and no cookie (answered with a RST)
}

// Listener is a passive open on one local port (the LISTEN state, RFC 9293
// 3.10.7.2). The stack hands it the segments for that port that match no
// endpoint. It owns the half-open connections: each is an Endpoint in
// SYN-RECEIVED, retransmitting its SYN-ACK on the wheel, and the listener
// forwards their segments until the handshake completes. At most Backlog are
// kept; beyond, SYNs get SYN cookies (cookie.go), which keep no state, so
// that a flood of spoofed SYNs costs a bounded table and legitimate
// handshakes still complete.
type Listener struct {
	w       Timers
	out     Output
	cfg     ListenerConfig
	epCfg   Config
	half    map[ID]*Endpoint
	cookies synCookies
	// pressureAt: when the half-open table was last seen more than half
	// full, if pressured (synAckRetries).
	pressureAt time.Duration
	pressured  bool
	closed     bool
	stats      ListenerStats
}

// NewListener returns a listener whose endpoints use w and out.
func NewListener(w Timers, out Output, cfg ListenerConfig) (*Listener, error) {
	if err := cfg.Endpoint.Validate(); err != nil {
		return nil, err
	}
	if cfg.Backlog <= 0 {
		cfg.Backlog = DefaultBacklog
	}
	if cfg.SynAckRetries == 0 {
		cfg.SynAckRetries = DefaultSynAckRetries
	} else if cfg.SynAckRetries < 0 {
		cfg.SynAckRetries = 0
	}
	return &Listener{w: w, out: out, cfg: cfg, epCfg: cfg.Endpoint.withDefaults(), half: make(map[ID]*Endpoint), cookies: newSynCookies(cfg.CookieKey)}, nil
}

// HalfOpen returns the number of connections in SYN-RECEIVED.
func (l *Listener) HalfOpen() int { return len(l.half) }

// HasHalfOpen reports whether id is a connection in SYN-RECEIVED: a SYN for
// it is a retransmission, not a new connection.
func (l *Listener) HasHalfOpen(id ID) bool { return l.half[id] != nil }

// Stats returns the listener's counters.
func (l *Listener) Stats() ListenerStats { return l.stats }

// HandleSegment processes a segment for id (id.Local is the listening side)
// that matches no established endpoint (RFC 9293 3.10.7.2).
func (l *Listener) HandleSegment(id ID, seg *Segment) {
	f := seg.Flags
	if badFlags(f) {
		l.stats.DropsBadFlags++ // SYN+FIN, SYN+RST: dropped, as Linux does in LISTEN
		return
	}
	if ep := l.half[id]; ep != nil {
		ep.HandleSegment(seg)
		return
	}
	switch {
	case f&FlagRST != 0:
		l.stats.DropsRST++ // RFC 9293 3.10.7.2: an incoming RST is ignored
	case f&FlagACK != 0 && !l.closed && l.cookieACK(id, seg):
		// RFC 4987 3.6: the ACK of a SYN cookie
	case f&FlagACK != 0 || l.closed:
		if r, ok := ResetFor(seg); ok { // RFC 9293 3.10.7.2: <SEQ=SEG.ACK><CTL=RST>
			l.stats.ResetsSent++
			l.out.Send(id, &r)
		}
	case f&FlagSYN == 0:
		l.stats.DropsOther++ // RFC 9293 3.10.7.2: "any other control or text-bearing segment": drop
	default:
		l.handleSYN(id, seg)
	}
}

// handleSYN answers a SYN (RFC 9293 3.10.7.2): a half-open connection while
// the table has room, else a SYN cookie, else nothing (the peer retries).
func (l *Listener) handleSYN(id ID, seg *Segment) {
	l.stats.SYNsIn++
	full := len(l.half) >= l.cfg.Backlog
	switch {
	case !l.cfg.DisableSynCookies && (full || l.cfg.SynCookies == SynCookiesAlways):
		l.sendCookie(id, seg) // RFC 4987 3.6
	case full:
		l.stats.DropsBacklog++
	default:
		l.synReceived(id, seg, l.epCfg.ISN(id, l.w.Now()))
	}
}

// synReceived opens a half-open connection for the SYN seg with iss (RFC 9293
// 3.10.7.2) and sends its SYN-ACK.
func (l *Listener) synReceived(id ID, seg *Segment, iss seqnum.Value) {
	e := newEndpoint(l.w, l.out, id, l.epCfg, iss, l.cfg.Spares)
	e.passive = true
	e.listener = l
	e.stats.SegsIn++
	e.negotiate(seg)
	e.initCongestion()
	e.setState(StateSynReceived)
	l.half[id] = e
	l.notePressure()
	e.sendSYN() // RFC 9293 3.10.7.2: <SEQ=ISS><ACK=RCV.NXT><CTL=SYN,ACK>
	e.flush()
}

// synAckRetries is how many times a half-open connection's SYN-ACK is resent
// before it is dropped: SynAckRetries, at most SynAckRetriesUnderPressure
// while the table is under pressure: more than half full now, or at any time
// in the last pressureHold. It is asked at each expiry, so an entry that has
// had its retries when the table fills goes at its next one.
func (l *Listener) synAckRetries() int {
	l.notePressure()
	if l.pressured && l.w.Now()-l.pressureAt < pressureHold {
		return min(l.cfg.SynAckRetries, SynAckRetriesUnderPressure)
	}
	return l.cfg.SynAckRetries
}

// notePressure records the instant if the half-open table is more than half
// full, counting a table as 8 at least (Linux's max(8, backlog)), so that a
// small one is not under pressure with a few entries.
func (l *Listener) notePressure() {
	if 2*len(l.half) > max(l.cfg.Backlog, minPressureTable) {
		l.pressureAt, l.pressured = l.w.Now(), true
	}
}

// sendCookie answers the SYN seg with a SYN-ACK whose ISN is a SYN cookie
// (RFC 4987 3.6), and keeps nothing. The SYN-ACK is the one the endpoint
// would send (synOptions, receiver.synWindow), but for the timestamp, which
// carries the SYN's options, and, without timestamps, the options but the MSS
// (Linux's tcp_clear_options).
func (l *Listener) sendCookie(id ID, seg *Segment) {
	epCfg := l.epCfg.forID(id)
	cfg, o, now := &epCfg, &seg.Options, l.w.Now()
	peerMSS := DefaultMSS
	if o.HasMSS && o.MSS > 0 {
		peerMSS = int(o.MSS)
	}
	iss := l.cookies.make(id, seg.Seq, cookieMSSIndex(peerMSS), now)
	sa := Segment{SrcPort: id.Local.Port(), DstPort: id.Remote.Port(), Seq: iss, Ack: seg.Seq + 1, Flags: FlagSYN | FlagACK,
		Window: uint16(min(cfg.RecvBuffer, 0xffff))} // RFC 7323 2.2: the SYN-ACK's window is not scaled
	sa.Options.HasMSS, sa.Options.MSS = true, uint16(cfg.MSS)
	if !cfg.DisableTimestamps && o.TS {
		ws := -1
		if !cfg.DisableWindowScale && o.HasWS {
			ws = int(o.WindowScale)
			sa.Options.HasWS, sa.Options.WindowScale = true, windowShift(cfg.RecvBuffer) // RFC 7323 2.2
		}
		sa.Options.SACKPermitted = !cfg.DisableSACK && o.SACKPermitted // RFC 2018 2
		// The options in the TSval's low bits, on the clock the endpoint made
		// from the cookie will use (the offset Config.TSOffset gives it,
		// newEndpoint).
		sa.Options.TS, sa.Options.TSEcr = true, o.TSVal
		sa.Options.TSVal = cookieTSVal(tsClock(now, cfg.TSOffset(id, iss)), ws, sa.Options.SACKPermitted)
	}
	l.stats.SynCookiesSent++
	l.out.Send(id, &sa)
}

// cookieACK takes an ACK that matches no half-open connection. If it returns
// a SYN cookie of ours (RFC 4987 3.6), the connection is made from it,
// ESTABLISHED, and goes to Accept as a completed handshake's, then handles
// the ACK (and its data); it reports whether the ACK was a cookie's. ACKs are
// checked only while cookies sent recently may be answered.
func (l *Listener) cookieACK(id ID, seg *Segment) bool {
	now := l.w.Now()
	if seg.Flags&(FlagSYN|FlagRST) != 0 || !l.cookies.recent(now) {
		return false
	}
	iss := seg.Ack - 1
	idx, ok := l.cookies.check(id, seg.Seq-1, iss, now)
	if !ok {
		l.stats.SynCookiesInvalid++ // RFC 9293 3.10.7.2: an ACK in LISTEN gets a RST
		return false
	}
	l.stats.SynCookiesValid++
	if l.queueFull() {
		l.stats.DropsAcceptQueue++
		return true
	}
	e := l.cookieEndpoint(id, seg, iss, idx)
	l.accepted(e)
	if e.state != StateClosed {
		e.HandleSegment(seg) // its data, its FIN
	}
	e.flush()
	return true
}

// cookieEndpoint makes the connection a valid cookie's ACK completes: the SYN
// is rebuilt from the cookie (the MSS) and the ACK's timestamp echo (window
// scale, SACK), and the endpoint starts ESTABLISHED with its SYN-ACK
// acknowledged, as if it had been half-open. It has no RTT sample.
func (l *Listener) cookieEndpoint(id ID, seg *Segment, iss seqnum.Value, mssIndex uint32) *Endpoint {
	syn := Segment{Seq: seg.Seq - 1, Flags: FlagSYN}
	syn.Options.HasMSS, syn.Options.MSS = true, cookieMSS[mssIndex]
	if o := &seg.Options; o.TS && !l.epCfg.DisableTimestamps {
		ws, sack := cookieTSOptions(o.TSEcr)
		syn.Options.TS, syn.Options.TSVal = true, o.TSVal
		syn.Options.HasWS, syn.Options.WindowScale = ws >= 0, uint8(max(ws, 0))
		syn.Options.SACKPermitted = sack
	}
	e := newEndpoint(l.w, l.out, id, l.epCfg, iss, l.cfg.Spares)
	e.passive = true
	e.negotiate(&syn)
	e.rcv.synWindow() // the right edge the SYN-ACK announced
	e.snd.una, e.snd.nxt, e.snd.max = iss+1, iss+1, iss+1
	e.snd.updateWindow(seg, true) // RFC 9293 3.10.7.4: SND.WND, SND.WL1, SND.WL2 from the ACK
	e.lastAckSent = e.rcv.nxt
	e.initCongestion()
	e.setState(StateEstablished)
	e.established()
	return e
}

// ReuseTimeWait offers the listener a SYN that the stack demultiplexed to tw,
// an endpoint of the listener's port in TIME-WAIT, and reports whether the
// listener took it as a new connection's SYN (RFC 6191, as Linux's
// tcp_timewait_state_process): a SYN (no ACK, RST or FIN) whose timestamp is
// newer than tw's TS.Recent when both ends use timestamps, or whose sequence
// number is above tw's RCV.NXT (RFC 9293 3.6.1, RFC 1122 4.2.2.13), unless its
// timestamp is older (PAWS). When it does, tw has gone to CLOSED (its timers
// stopped, EventClosed delivered to its notify function before
// ReuseTimeWait returns) and the listener has a half-open connection for the
// same ID, whose ISS is tw's SND.NXT + 65535 + 2 (as Linux), so that nothing
// the old incarnation sent is acceptable to the new one; its SYN-ACK has been
// sent. That half-open connection is not held to Backlog and gets no SYN
// cookie (Linux's tw_isn), for it replaces tw, one for one. When it does not,
// nothing has changed: the stack hands seg to tw.HandleSegment, which answers
// it as RFC 9293 says (an ACK).
//
// The stack's side: where its demultiplexer finds the endpoint for the
// segment's ID, and the endpoint's local port has a Listener, it calls
// ReuseTimeWait(ep, seg) first (it returns false at once for anything but a
// SYN to an endpoint in TIME-WAIT); on true it is done with the segment, and
// removes ep from its table on ep's EventClosed as for any endpoint, so that
// the next segment for the ID goes to the Listener, which owns the half-open
// connection.
func (l *Listener) ReuseTimeWait(tw *Endpoint, seg *Segment) bool {
	if l.closed || !tw.reusableBy(seg) {
		return false
	}
	tw.enterClosed(nil) // RFC 6191: the new incarnation replaces TIME-WAIT
	tw.flush()
	l.reopen(tw.id, seg, tw.snd.nxt)
	return true
}

// ReuseTimeWaitRecord is ReuseTimeWait for a connection whose TIME-WAIT a
// TimeWait record keeps: when the listener takes seg, the record has
// closed (its host's Closed called before this returns).
func (l *Listener) ReuseTimeWaitRecord(tw TimeWait, seg *Segment) bool {
	if l.closed || !tw.reusableBy(seg) {
		return false
	}
	r := tw.rec()
	id, snd := r.key.id(), r.snd
	tw.h.close(tw.i)
	l.reopen(id, seg, snd)
	return true
}

// reopen makes the half-open connection of a SYN that replaced a
// TIME-WAIT whose SND.NXT was sndNxt.
func (l *Listener) reopen(id ID, seg *Segment, sndNxt seqnum.Value) {
	iss := sndNxt + 65535 + 2 // Linux tcp_timewait_state_process: isn = tw_snd_nxt + 65535 + 2
	l.stats.SYNsIn++
	l.stats.TimeWaitReused++
	l.synReceived(id, seg, iss)
}

// ReplaceTimeWait closes tw, an endpoint in TIME-WAIT, if seg is a SYN
// that RFC 6191 lets open a new incarnation of tw's connection (the rule
// of ReuseTimeWait), and reports whether it did: tw has gone to CLOSED,
// its EventClosed delivered, and the caller handles seg as a new
// connection's SYN (a stack's forwarder: a new flow, whose handshake its
// own Listener makes). It returns false at once for anything else.
func ReplaceTimeWait(tw *Endpoint, seg *Segment) bool {
	if !tw.reusableBy(seg) {
		return false
	}
	tw.enterClosed(nil)
	tw.flush()
	return true
}

// accepted is called by an endpoint whose handshake completed.
func (l *Listener) accepted(e *Endpoint) {
	delete(l.half, e.id)
	if l.closed || l.cfg.Accept == nil || !l.cfg.Accept(e) {
		l.stats.Refused++
		l.stats.ResetsSent++ // the endpoint is never registered: count its RST here
		e.abort(nil, true)
		return
	}
	l.stats.Accepted++
}

// queueFull reports whether a completed handshake would find no room in the
// stack's accept queue.
func (l *Listener) queueFull() bool { return l.cfg.QueueFull != nil && l.cfg.QueueFull() }

// dropHalfOpen is called by a half-open endpoint that closed (reset, or its
// SYN-ACK retries ran out).
func (l *Listener) dropHalfOpen(e *Endpoint) {
	if l.half[e.id] == e {
		delete(l.half, e.id)
		if e.err != nil {
			l.stats.HalfOpenTimeouts++
		}
		if l.cfg.Dropped != nil {
			l.cfg.Dropped(e.id)
		}
	}
}

// Abort resets the half-open connection id, if there is one (its RST goes
// to the peer), and reports whether there was.
func (l *Listener) Abort(id ID) bool {
	e := l.half[id]
	if e == nil {
		return false
	}
	e.Abort()
	return true
}

// Close stops the listener: half-open connections are reset, and later
// segments are answered with RSTs. Established endpoints are not affected.
func (l *Listener) Close() {
	if l.closed {
		return
	}
	l.closed = true
	for _, e := range l.half {
		e.Abort()
	}
}

// SetEndpointConfig replaces the configuration of the endpoints the listener
// accepts from now on (a socket option such as TCP_MAXSEG set on a listening
// socket); the half-open ones keep theirs. A configuration that cannot work is
// an error wrapping ErrInvalidConfig.
func (l *Listener) SetEndpointConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	l.cfg.Endpoint, l.epCfg = cfg, cfg.withDefaults()
	return nil
}
