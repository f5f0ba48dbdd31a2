package tcp

import (
	"github.com/tcpwheel/tcpwheel/timer"
	"gvisor.dev/gvisor/pkg/tcpip/seqnum"
)

// DefaultBacklog is the default limit of half-open connections per listener.
const DefaultBacklog = 128

// ListenerConfig configures a Listener.
type ListenerConfig struct {
	// Backlog bounds the connections in SYN-RECEIVED; further SYNs are dropped
	// (and counted) so that the peers retry. Zero means DefaultBacklog.
	Backlog int
	// Endpoint configures the accepted endpoints.
	Endpoint Config
	// Accept receives each connection when its handshake completes, before the
	// segment that completed it has been fully processed (its data may follow).
	// The stack registers the endpoint under its ID and queues it for Accept.
	// Returning false refuses it: the endpoint is reset.
	Accept func(ep *Endpoint) bool
	// QueueFull, if set, reports whether the stack's queue of connections
	// waiting for Accept is full. While it is, the ACK that would complete a
	// handshake is dropped and counted (DropsAcceptQueue), as Linux does with
	// tcp_abort_on_overflow = 0: the connection stays in SYN-RECEIVED, its
	// SYN-ACK retransmission makes the peer ACK again, and the handshake
	// completes once the application has accepted.
	QueueFull func() bool
}

// ListenerStats counts a listener's work.
type ListenerStats struct {
	SYNsIn, Accepted, Refused uint64
	DropsBacklog, DropsOther  uint64
	DropsAcceptQueue          uint64 // handshake-completing ACKs dropped: the accept queue was full
	ResetsSent                uint64
	HalfOpenTimeouts          uint64
	TimeWaitReused            uint64 // SYNs that replaced a connection in TIME-WAIT (ReuseTimeWait)
}

// Listener is a passive open on one local port (the LISTEN state, RFC 9293
// 3.10.7.2). The stack hands it the segments for that port that match no
// endpoint. It owns the half-open connections: each is an Endpoint in
// SYN-RECEIVED, retransmitting its SYN-ACK on the wheel, and the listener
// forwards their segments until the handshake completes.
type Listener struct {
	w      loopTimers
	out    Output
	cfg    ListenerConfig
	epCfg  Config
	half   map[ID]*Endpoint
	closed bool
	stats  ListenerStats
}

// NewListener returns a listener whose endpoints use w and out.
func NewListener(w *timer.Wheel, out Output, cfg ListenerConfig) (*Listener, error) {
	if err := cfg.Endpoint.Validate(); err != nil {
		return nil, err
	}
	if cfg.Backlog <= 0 {
		cfg.Backlog = DefaultBacklog
	}
	return &Listener{w: wheelTimers{w}, out: out, cfg: cfg, epCfg: cfg.Endpoint.withDefaults(), half: make(map[ID]*Endpoint)}, nil
}

// HalfOpen returns the number of connections in SYN-RECEIVED.
func (l *Listener) HalfOpen() int { return len(l.half) }

// Stats returns the listener's counters.
func (l *Listener) Stats() ListenerStats { return l.stats }

// HandleSegment processes a segment for id (id.Local is the listening side)
// that matches no established endpoint (RFC 9293 3.10.7.2).
func (l *Listener) HandleSegment(id ID, seg *Segment) {
	if ep := l.half[id]; ep != nil {
		ep.HandleSegment(seg)
		return
	}
	f := seg.Flags
	switch {
	case f&FlagRST != 0:
		l.stats.DropsOther++ // RFC 9293 3.10.7.2: an incoming RST is ignored
		return
	case f&FlagACK != 0 || l.closed:
		if r, ok := ResetFor(seg); ok { // RFC 9293 3.10.7.2: <SEQ=SEG.ACK><CTL=RST>
			l.stats.ResetsSent++
			l.out.Send(id, &r)
		}
		return
	case f&FlagSYN == 0:
		l.stats.DropsOther++
		return
	}
	l.stats.SYNsIn++
	if len(l.half) >= l.cfg.Backlog {
		l.stats.DropsBacklog++
		return
	}
	l.synReceived(id, seg, l.epCfg.ISN(id, l.w.Now()))
}

// synReceived opens a half-open connection for the SYN seg with iss (RFC 9293
// 3.10.7.2) and sends its SYN-ACK.
func (l *Listener) synReceived(id ID, seg *Segment, iss seqnum.Value) {
	e := newEndpoint(l.w, l.out, id, l.epCfg, iss)
	e.passive = true
	e.listener = l
	e.stats.SegsIn++
	e.negotiate(seg)
	e.initCongestion()
	e.setState(StateSynReceived)
	l.half[id] = e
	e.sendSYN() // RFC 9293 3.10.7.2: <SEQ=ISS><ACK=RCV.NXT><CTL=SYN,ACK>
	e.flush()
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
	iss := tw.snd.nxt + 65535 + 2 // Linux tcp_timewait_state_process: isn = tw_snd_nxt + 65535 + 2
	tw.enterClosed(nil)           // RFC 6191: the new incarnation replaces TIME-WAIT
	tw.flush()
	l.stats.SYNsIn++
	l.stats.TimeWaitReused++
	l.synReceived(tw.id, seg, iss)
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
	}
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
