package tcp

import (
	"github.com/tcpwheel/tcpwheel/timer"
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
	e := newEndpoint(l.w, l.out, id, l.epCfg)
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
