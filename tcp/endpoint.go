package tcp

import (
	"io"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
	"github.com/tcpwheel/tcpwheel/timer"
)

// Endpoint is one TCP connection. It is not safe for concurrent use: it belongs
// to the goroutine that owns its wheel (see the package documentation).
type Endpoint struct {
	id     ID
	cfg    Config
	w      Timers // the loop's wheel and its time
	out    Output
	notify Notifier
	evs    Event // events not yet delivered
	inNote bool  // notify is running

	state     State
	err       error     // why the connection failed; nil while it has not
	listener  *Listener // the listener of a passive open, until accepted
	appClosed bool      // Close or Abort was called
	passive   bool

	// The connection's parts, each owning its state in the file named after it.
	snd    sender                 // send side: sequence space, buffer, retransmission queue (snd.go)
	rcv    receiver               // receive side: sequence space, buffer, out-of-order queue (rcv.go)
	sb     scoreboard             // what the peer's SACK blocks cover (sack.go)
	fr     fastRecovery           // fast retransmit and recovery, RFC 5681/6582/6675 (recovery.go)
	rtt    rttEstimator           // RFC 6298 (rtt.go)
	rack   rackState              // RACK-TLP, RFC 8985 (rack.go)
	cc     congestionControl      // cwnd and ssthresh: NewReno, RFC 5681/6582 (cc.go), or CUBIC, RFC 9438 (cubic.go)
	reno   newReno                // cc when it is NewReno: in the endpoint, so that making one allocates no cc
	timers [numTimers]timer.Entry // all but retransmission, by kind (timers.go)
	// seg0 is the first txSeg newSeg makes (once seg0.e is set): in the
	// endpoint, whose size class has room for it, not an allocation of its own.
	seg0 txSeg
	// timersInit has bit k set once timers[k] has its expiry handler
	// (startTimer gives it on the first start: timerFn).
	timersInit uint8

	// Negotiated options, which both sides use.
	tsOK, sackOK, wsOK bool
	tsRecent           uint32
	tsOffset           uint32
	lastAckSent        seqnum.Value
	// holder is out as an AckHolder, or nil; ackHeld: it holds an ACK of
	// ours until its batch ends (FlushAck).
	holder  AckHolder
	ackHeld bool
	// emitting says that txScratch is in use (below; beside ackHeld, in
	// its padding).
	emitting bool

	keepProbes int            // unanswered keepalive probes (timers.go)
	icmp       icmpState      // what ICMP errors told (icmp.go)
	challenges challengeLimit // RFC 5961 7 (input.go)

	// txScratch is the segment emit hands to the Output, emitting (above)
	// says it is in use (snd.go).
	txScratch Segment

	stats   Counters
	lastRTO TimerExpiry // Info().LastRTO
	trace   *timerTrace // Config.TraceTimers
}

// Dial starts an active open (RFC 9293 3.5): it sends a SYN for id and returns
// the endpoint in SYN-SENT. The outcome is an EventEstablished, or an
// EventError with ErrConnectionRefused or ErrTimeout.
func Dial(w Timers, out Output, id ID, cfg Config) (*Endpoint, error) {
	return dial(w, out, id, cfg, nil)
}

// dial is Dial with an endpoint of spares' (nil: a new one).
func dial(w Timers, out Output, id ID, cfg Config, spares *Spares) (*Endpoint, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	e := newEndpoint(w, out, id, cfg, cfg.ISN(id, w.Now()), spares)
	e.state = StateSynSent
	e.sendSYN()
	e.flush()
	if e.err != nil {
		return nil, e.err
	}
	return e, nil
}

// newEndpoint returns an endpoint for id in CLOSED whose initial send
// sequence number is iss: one of spares (nil: none) or a new one.
func newEndpoint(w Timers, out Output, id ID, cfg Config, iss seqnum.Value, spares *Spares) *Endpoint {
	cfg = cfg.forID(id)
	e := spares.get()
	e.id, e.cfg, e.w, e.out = id, cfg, w, out
	if !cfg.DisableAckCoalescing {
		e.holder, _ = out.(AckHolder)
	}
	e.rtt = newRTTEstimator(cfg.InitialRTO, cfg.MinRTO, cfg.MaxRTO, w.Tick())
	e.rtt.varFloor = cfg.LinuxRTO
	e.snd = newSender(iss)
	e.snd.cong, _ = out.(LocalCongestion)
	e.fr.recover = iss
	if !cfg.DisableTimestamps {
		e.tsOffset = cfg.TSOffset(id, iss) // RFC 7323 5.4; one clock per address pair (Config.TSOffset)
	}
	if cfg.CUBIC {
		e.cc = newCubic(e.now, func() time.Duration { return e.rtt.srtt })
	} else {
		e.reno = newNewReno()
		e.cc = &e.reno // in the endpoint: no allocation of its own
	}
	e.tsOK = !cfg.DisableTimestamps
	e.sackOK = !cfg.DisableSACK
	e.wsOK = !cfg.DisableWindowScale
	var ws uint8
	if e.wsOK {
		ws = windowShift(cfg.RecvBuffer)
	}
	e.rcv = newReceiver(cfg, ws)
	if cfg.TraceTimers {
		e.trace = &timerTrace{}
	}
	e.rack.fack = iss
	return e
}

// windowShift is the smallest shift that lets a 16-bit field carry buf
// (RFC 7323 2.2).
func windowShift(buf int) uint8 {
	var s uint8
	for s < MaxWindowScale && buf>>s > 0xffff {
		s++
	}
	return s
}

// ID returns the connection's 4-tuple.
func (e *Endpoint) ID() ID { return e.id }

// State returns the connection state.
func (e *Endpoint) State() State { return e.state }

// Err returns why the connection failed, or nil.
func (e *Endpoint) Err() error { return e.err }

// SetNotify sets the function called with events. It runs on the loop goroutine
// after the endpoint has finished handling the call that caused them, so it may
// call back into the endpoint. Events that came before SetNotify are delivered
// at once.
func (e *Endpoint) SetNotify(fn func(Event)) {
	if fn == nil {
		e.SetNotifier(nil)
		return
	}
	e.SetNotifier(NotifyFunc(fn))
}

// Notifier receives an Endpoint's events (SetNotifier).
type Notifier interface {
	Notify(Event)
}

// NotifyFunc is a function as a Notifier.
type NotifyFunc func(Event)

// Notify calls f.
func (f NotifyFunc) Notify(ev Event) { f(ev) }

// SetNotifier is SetNotify with a Notifier: an owner that is one already
// (a pointer with a Notify method) costs no allocation, where its method
// value as a func would cost one per connection.
func (e *Endpoint) SetNotifier(n Notifier) {
	e.notify = n
	e.flush()
}

func (e *Endpoint) event(ev Event) { e.evs |= ev }

// flush delivers pending events. Every exported entry point and timer callback
// ends with it.
func (e *Endpoint) flush() {
	if e.notify == nil || e.inNote {
		return
	}
	e.inNote = true
	for e.evs != 0 {
		ev := e.evs
		e.evs = 0
		e.notify.Notify(ev)
	}
	e.inNote = false
}

// Read copies received data into p. It returns (0, io.EOF) once the peer's FIN
// has been reached, the connection's error after a failure, and (0, nil) when
// nothing is available yet: wait for EventReadable. It is Hold and Release
// at once.
func (e *Endpoint) Read(p []byte) (int, error) {
	defer e.flush()
	n, err := e.Hold(p)
	if n > 0 {
		e.release(n)
	}
	return n, err
}

// Hold takes received data into p, as Read, but holds it as unread: the
// window does not open by it until Release says the application read it.
// (The stack moves data to its Conn's own buffer as it arrives, and the
// window stays exact: space held there is not offered to the peer.) Hold
// sends nothing and raises no event.
func (e *Endpoint) Hold(p []byte) (int, error) {
	if e.appClosed {
		return 0, ErrClosed
	}
	if e.rcv.buf.len() > 0 {
		n := e.rcv.buf.read(p)
		e.rcv.held += n
		return n, nil
	}
	if e.err != nil {
		return 0, e.err
	}
	if e.rcv.finRcvd {
		return 0, io.EOF
	}
	if len(p) == 0 || e.state == StateSynSent || e.state == StateSynReceived || e.state.canReceive() {
		return 0, nil
	}
	return 0, io.EOF
}

// Release gives back n bytes that Hold took (the application read them): the
// window opens by them, and a window update goes out if it is due.
func (e *Endpoint) Release(n int) {
	defer e.flush()
	e.release(n)
}

func (e *Endpoint) release(n int) {
	n = min(max(n, 0), e.rcv.held)
	e.rcv.held -= n
	e.stats.BytesRead += uint64(n)
	if n > 0 && e.state.canReceive() && (e.readAckDue() || e.rcv.windowUpdateDue()) {
		e.sendWindowUpdate()
	}
}

// sendWindowUpdate sends the ACK that moves the right edge after a Read
// freed space (RFC 1122 4.2.3.3). When the peer has less than one MSS left
// of the window it knows (receiver.room), a window-limited peer has stopped
// sending and waits for this update: it goes twice, back to back. That is
// a zero window, typically, after a retransmission filled the hole below a
// window's worth of out-of-order data; or that data reaching the right edge
// while the hole waits. An ACK is not retransmitted: a lost update is
// recovered only by the peer's window probe (RFC 9293 3.8.6.1), or with a
// hole, its RTO, at least 200 ms later on Linux (TCP_RTO_MIN), more after a
// backoff. The copy is harmless: it acknowledges nothing new and opens
// nothing more (Linux's tcp_may_update_window takes it and changes
// nothing), and with data in flight by the time it arrives it is one
// duplicate ACK with no new SACK information, which no sender counts
// toward a fast retransmit (RFC 6675 5 counts SACKed bytes; RFC 5681 3.2
// needs three). In the 20 MB download from the kernel at 5% loss each way,
// the window closed about 70 times per transfer, and the 3 or 4 updates
// lost each cost 200 to 640 ms: most of the transfer time (tcpwheel
// compare, 2026-11-23).
func (e *Endpoint) sendWindowUpdate() {
	reopen := e.rcv.room() < e.rcv.mss
	e.sendAck()
	if reopen && e.state != StateClosed {
		e.stats.WindowUpdateCopies++
		e.sendAck()
	}
}

// UpdateStep is the smallest opening of the window worth a window update:
// min(RecvBuffer/2, MSS) (receiver SWS avoidance, RFC 9293 3.8.6.2.2). Of
// bytes Released in smaller steps, no update goes out until they add up to
// it.
func (e *Endpoint) UpdateStep() int { return e.rcv.sws }

// readAckDue reports whether a Read should send the delayed ACK now, as
// Linux's tcp_cleanup_rbuf does: more than one full-sized segment waits for
// it, or the Read took everything (none left in the buffer or held) and the data ended with a push (PSH, or a
// short segment: the end of a write, after which the sender may be waiting
// for this ACK), unless the exchange is interactive (our reply will carry
// it). Otherwise the delayed-ACK timer sends it.
func (e *Endpoint) readAckDue() bool {
	if e.rcv.unacked == 0 || !e.timerPending(timerDelayedACK) {
		return false
	}
	return e.rcv.unacked > e.rcv.mss || (e.rcv.pushed && e.rcv.buf.len() == 0 && e.rcv.held == 0 && !e.rcv.pingpong)
}

// Readable returns the number of bytes Read can return now.
func (e *Endpoint) Readable() int { return e.rcv.buf.len() }

// Write copies as much of p as the send buffer has room for, and returns the
// count: short, possibly zero, when the buffer is full (wait for
// EventWritable). Before the connection is established it returns (0, nil).
// With a Source (SetSource) it takes nothing: Append hands the bytes over.
func (e *Endpoint) Write(p []byte) (int, error) {
	if e.snd.buf.external() {
		return 0, ErrInvalidConfig
	}
	return e.take(p, len(p))
}

// Append is Write for an endpoint with a Source: the Source's next k bytes,
// as far as the send buffer has room for them, join the send buffer without a
// copy. It returns the count taken, as Write does.
func (e *Endpoint) Append(k int) (int, error) {
	if !e.snd.buf.external() {
		return 0, ErrInvalidConfig
	}
	return e.take(nil, k)
}

// take is Write and Append: k bytes offered, copied from p unless a Source
// holds them.
func (e *Endpoint) take(p []byte, k int) (int, error) {
	defer e.flush()
	switch {
	case e.appClosed:
		return 0, ErrClosed
	case e.err != nil:
		return 0, e.err
	case e.snd.finQueued:
		return 0, ErrWriteClosed
	case e.state == StateSynSent || e.state == StateSynReceived:
		return 0, nil
	case !e.state.canSend():
		return 0, ErrClosed
	}
	n := min(k, e.cfg.SendBuffer-e.snd.buf.len())
	if n <= 0 {
		return 0, nil
	}
	start := e.snd.bufSeq.Add(seqnum.Size(e.snd.buf.len()))
	if o := e.snd.buf.own(); o != nil {
		o.r.Write(p[:n])
	} else {
		e.snd.buf.src.Take(n)
	}
	if e.cfg.PushPolicy == PushLinux {
		e.pushWrite(start, start.Add(seqnum.Size(n)))
	}
	e.stats.BytesWritten += uint64(n)
	e.restartAfterIdle()
	e.output()
	return n, nil
}

// restartAfterIdle restarts slow start when nothing is in flight and no data
// went out for more than an RTO (Config.SlowStartAfterIdle; RFC 5681 4.1).
func (e *Endpoint) restartAfterIdle() {
	if !e.cfg.SlowStartAfterIdle || len(e.snd.rtxq) > 0 || !e.snd.dataSent {
		return
	}
	rto := e.rtt.rto()
	idle := e.now() - e.snd.lastDataAt
	if rto <= 0 || idle <= rto {
		return
	}
	rtos := int((idle + rto - 1) / rto)
	e.cc.restart(rtos, e.cfg.InitialCwnd*e.snd.smss)
}

// Writable returns the free space in the send buffer.
func (e *Endpoint) Writable() int { return max(0, e.cfg.SendBuffer-e.snd.buf.len()) }

// SetNoDelay turns Nagle's algorithm off (true: TCP_NODELAY) or on
// (Config.Nagle). Turning it off sends what it held back.
func (e *Endpoint) SetNoDelay(noDelay bool) {
	defer e.flush()
	e.cfg.Nagle = !noDelay
	if noDelay {
		e.output()
	}
}

// SetSendBuffer changes the send buffer's size (Config.SendBuffer), as
// SO_SNDBUF on an open socket: data already in a smaller buffer stays, and
// Write takes more once it has drained below n. n must be in (0, 1 GiB].
func (e *Endpoint) SetSendBuffer(n int) error {
	if n <= 0 || n > 1<<30 {
		return ErrInvalidConfig
	}
	defer e.flush()
	e.cfg.SendBuffer, e.cfg.SendBufferMax = n, n // set: it grows no more (autoGrowSendBuffer), as Linux locks a set SO_SNDBUF
	if e.Writable() > 0 {
		e.event(EventWritable)
	}
	return nil
}

// CloseWrite queues a FIN after the buffered data (the half-close, RFC 9293
// 3.10.4). Further Writes fail with ErrWriteClosed.
func (e *Endpoint) CloseWrite() error {
	defer e.flush()
	if e.appClosed {
		return ErrClosed
	}
	if e.err != nil {
		return e.err
	}
	return e.closeWrite()
}

func (e *Endpoint) closeWrite() error {
	if e.snd.finQueued {
		return nil
	}
	switch e.state {
	case StateSynSent:
		e.enterClosed(nil) // RFC 9293 3.10.4: SYN-SENT: delete the TCB
		return nil
	case StateEstablished, StateSynReceived:
		e.snd.finQueued = true
		if e.state == StateEstablished {
			e.setState(StateFinWait1)
			e.output()
		}
	case StateCloseWait:
		e.snd.finQueued = true
		e.setState(StateLastAck)
		e.output()
	}
	return nil
}

// Close closes both directions. Buffered data is still sent, followed by a FIN;
// but if received data is unread, or data arrives afterwards, the connection is
// reset (RFC 2525 2.17, as Linux does). Read and Write fail with ErrClosed
// afterwards. The endpoint lingers through FIN_WAIT and TIME_WAIT until
// EventClosed.
func (e *Endpoint) Close() error {
	defer e.flush()
	if e.appClosed {
		return ErrClosed
	}
	e.appClosed = true
	if e.state == StateClosed {
		return nil
	}
	if e.rcv.buf.len() > 0 || e.rcv.held > 0 || len(e.rcv.ooo) > 0 {
		e.activeReset(nil) // RFC 2525 2.17: unread data is lost: reset (sendRST counts it)
		return nil
	}
	e.closeWrite()
	switch e.state {
	case StateFinWait2:
		e.startTimer(timerClose, e.cfg.FinWait2)
	case StateTimeWait: // after CloseWrite: the application is gone now
		e.event(EventTimeWait)
	}
	return nil
}

// Abort resets the connection: it sends a RST if the connection is synchronized
// and goes to CLOSED at once (RFC 9293 3.10.5).
func (e *Endpoint) Abort() {
	defer e.flush()
	e.appClosed = true
	if e.state == StateClosed {
		return
	}
	if e.state == StateSynSent {
		e.enterClosed(nil)
		return
	}
	e.activeReset(nil)
}

// activeReset is our own reset of a synchronized connection (Abort, Close
// with unread data, keepalive's dead peer):
// <SEQ=SND.NXT><ACK=RCV.NXT><CTL=RST,ACK> (RFC 9293 3.10.5 allows the ACK; Linux's
// tcp_send_active_reset sends it, with the timestamps), then CLOSED with err.
func (e *Endpoint) activeReset(err error) {
	if e.state != StateClosed && e.state != StateTimeWait {
		e.stats.ResetsSent++
		seg := Segment{Seq: e.snd.nxt, Flags: FlagRST | FlagACK}
		e.send(&seg)
	}
	e.enterClosed(err)
}

// abort sends a RST (if rst) and closes with err.
func (e *Endpoint) abort(err error, rst bool) {
	if rst && e.state != StateClosed && e.state != StateTimeWait {
		e.sendRST(e.snd.nxt)
	}
	e.enterClosed(err)
}

// enterClosed stops every timer and moves to CLOSED with err (nil for a normal
// close).
func (e *Endpoint) enterClosed(err error) {
	if e.state == StateClosed {
		return
	}
	for _, s := range e.snd.rtxq {
		e.w.Stop(&s.entry)
	}
	e.snd.rtxq = e.snd.rtxq[:0]
	e.snd.gsoSegs = 0
	e.stopAll(timerNone)
	e.rcv.ooo = nil
	e.setState(StateClosed)
	err = e.withSoftError(err) // icmp.go
	if err != nil && e.err == nil {
		e.err = err
		e.event(EventError | EventReadable | EventWritable)
	}
	if l := e.listener; l != nil {
		e.listener = nil
		l.dropHalfOpen(e)
	}
	e.event(EventClosed | EventReadable | EventWritable)
}

func (e *Endpoint) setState(s State) {
	if e.state != s {
		e.state = s
	}
}

// now is the loop's time: the instant it handed in with its last Advance.
func (e *Endpoint) now() time.Duration { return e.w.Now() }

// tsVal is our timestamp clock, 1 ms per tick (RFC 7323 5.4).
func (e *Endpoint) tsVal() uint32 { return e.tsAt(e.now()) }

// tsAt is our timestamp clock's value at the wheel's instant t.
func (e *Endpoint) tsAt(t time.Duration) uint32 { return tsClock(t, e.tsOffset) }

// tsClock is a timestamp clock of 1 ms per tick (RFC 7323 5.4) with the
// connection's offset, at the wheel's instant t.
func tsClock(t time.Duration, offset uint32) uint32 { return uint32(t/time.Millisecond) + offset }

// Info is a snapshot of the connection, like Linux's TCP_INFO.
type Info struct {
	State                State
	RTO                  time.Duration // current, backoff included
	SRTT, RTTVar, MinRTT time.Duration
	Retransmits          int // RTO expirations since the last progress
	Backoff              int // RTO doublings in force
	Cwnd, Ssthresh       int // bytes
	SndMSS, RcvMSS       int
	Unacked              int // segments in flight, a TSO segment's as its packets (tcpi_unacked)
	Sacked               int // bytes SACKed above SND.UNA
	SndWnd, RcvWnd       int // bytes, scaled
	SndWScale, RcvWScale int // -1 when window scaling is off
	Timestamps, SACK     bool
	InRecovery           bool
	// RACK-TLP (RFC 8985): on unless Config.DisableRACKTLP; RACK.rtt and
	// RACK.reo_wnd as they stand; whether reordering was seen; whether a
	// tail-loss probe is outstanding (its episode not yet ended).
	RACKTLP        bool
	RACKRTT        time.Duration
	ReoWnd         time.Duration
	ReorderingSeen bool
	TLPOutstanding bool
	// Reordering is the largest reordering seen, in segments (at least 3;
	// Linux's tcpi_reordering): how far below the highest SACKed data a
	// segment sent once was delivered.
	Reordering int
	// Probes counts the unanswered probes in progress (Linux's
	// tcpi_probes): zero-window, keepalive, or the resource probes of data
	// held by local congestion (LocalCongestion).
	Probes       int
	SndBuffered  int  // bytes in the send buffer (unacked and unsent)
	RcvBuffered  int  // bytes received and not yet read (Release), held ones included
	KeepAlive    bool // RFC 1122 4.2.3.6 probes on, with these parameters
	KeepIdle     time.Duration
	KeepInterval time.Duration
	KeepCount    int
	// LastRTO is the retransmission timer whose expiry was the latest RTO
	// event (zero before the first): see TimerExpiry.
	LastRTO TimerExpiry
	// TimerLog: with Config.TraceTimers, every timer expiry so far, oldest
	// first (the first 256); nil without.
	TimerLog []TimerExpiry
	Counters
}

// Counters count what the endpoint did and what it dropped. Every segment
// the endpoint drops, whole or in part, is counted once, by reason:
//
//   - DropsClosed: it arrived in CLOSED.
//   - DropsBadFlags: SYN with FIN or RST, in any state (badFlags).
//   - DropsBadACK: in SYN-SENT an ACK of something but our SYN (answered
//     with a RST); in SYN-RECEIVED an unacceptable ACK (a RST); later an ACK
//     of data not yet sent (an ACK) or older than the largest window allows
//     (RFC 5961 5.2: a challenge ACK, counted as well).
//   - DropsNoSYN: in SYN-SENT, neither SYN nor RST.
//   - DropsNoACK: a RST without ACK in SYN-SENT; no ACK after it.
//   - DropsPAWS: an older timestamp (RFC 7323 5.3), answered with an ACK.
//   - DropsOutOfWindow: outside the receive window (RFC 9293 3.10.7.4,
//     first check), answered with an ACK unless it is a RST.
//   - ChallengeACKs, DropsRateLimited: a RST in the window but not at
//     RCV.NXT, or a SYN, in a synchronized state (RFC 5961 3.2, 4.2): it is
//     dropped and answered with a challenge ACK (ChallengeACKs), or not, when
//     the rate limit (RFC 5961 7) holds it back (DropsRateLimited).
//   - DropsOOOLimit: out-of-order data beyond what the queue keeps.
//   - DropsDataAfterFIN: data after the peer's FIN (RFC 9293 3.10.7.4,
//     seventh: ignored); the rest of the segment is processed.
//   - ListenerStats.DropsAcceptQueue: the ACK that would complete the
//     handshake of a half-open connection while the accept queue is full.
type Counters struct {
	SegsIn, SegsOut                 uint64
	DataSegsOut, DataSegsIn         uint64
	BytesWritten, BytesRead         uint64 // through the application calls
	BytesSent, BytesRetrans         uint64 // payload bytes sent, and resent
	BytesAcked, BytesReceived       uint64
	SegsRetransmitted               uint64 // segments resent, for any reason
	RTOEvents, FastRetransmits      uint64 // FastRetransmits includes RACKRetransmits
	TLPProbes                       uint64 // RFC 8985 7.3: tail-loss probes sent
	RecoveryProbes                  uint64 // probes sent in fast recovery (Config.DisableRecoveryProbe)
	TLPRecoveries                   uint64 // RFC 8985 7.4.2: probes that repaired a loss
	RACKRetransmits                 uint64 // segments RACK found lost, resent (RFC 8985 6.2)
	RACKReorderTimeouts             uint64 // expiries of RACK's reordering timer
	SYNRetransmits                  uint64
	DupAcksIn                       uint64
	ChallengeACKs                   uint64
	KeepaliveProbes, PersistProbes  uint64
	OutOfOrderSegs                  uint64
	WindowUpdateCopies              uint64 // window updates sent twice (sendWindowUpdate)
	PMTUResends                     uint64 // flights cut to a smaller path MTU and resent (icmp.go)
	ResetsSent, ResetsReceived      uint64
	DropsOutOfWindow, DropsPAWS     uint64
	DropsNoACK, DropsBadACK         uint64
	DropsRateLimited, DropsOOOLimit uint64
	DropsClosed, DropsBadFlags      uint64
	DropsNoSYN, DropsDataAfterFIN   uint64
	TimerErrors                     uint64
	RTTSamples                      uint64
}

// Counters returns the endpoint's counters, as Info's Counters, without the
// rest of Info (the stack sums every connection's for Stats).
func (e *Endpoint) Counters() Counters { return e.stats }

// Info returns a snapshot of the connection.
func (e *Endpoint) Info() Info {
	i := Info{
		State:          e.state,
		RTO:            e.rtt.rto(),
		SRTT:           e.rtt.srtt,
		RTTVar:         e.rtt.rttvar,
		MinRTT:         e.rtt.minSeen,
		Retransmits:    e.snd.rtoRetries,
		Backoff:        e.rtt.backoff,
		Cwnd:           e.cc.cwnd(),
		Ssthresh:       e.cc.ssthresh(),
		SndMSS:         e.snd.smss,
		RcvMSS:         e.rcv.mss,
		Unacked:        e.snd.packetsOut(),
		Sacked:         e.sb.bytes,
		SndWnd:         int(e.snd.wnd),
		RcvWnd:         int(e.rcv.adv - e.rcv.nxt),
		SndWScale:      -1,
		RcvWScale:      -1,
		Timestamps:     e.tsOK,
		SACK:           e.sackOK,
		InRecovery:     e.fr.active,
		RACKTLP:        e.rackOn(),
		RACKRTT:        e.rack.rtt,
		ReoWnd:         e.rackReoWnd(),
		ReorderingSeen: e.rack.reorderingSeen,
		Reordering:     max(e.sb.reordering, dupThresh),
		TLPOutstanding: e.rack.tlpActive,
		Probes:         e.snd.persistProbes + e.keepProbes + e.snd.local.probes,
		SndBuffered:    e.snd.buf.len(),
		RcvBuffered:    e.rcv.buf.len() + e.rcv.held,
		KeepAlive:      e.cfg.KeepAlive,
		KeepIdle:       e.cfg.KeepIdle,
		KeepInterval:   e.cfg.KeepInterval,
		KeepCount:      e.cfg.KeepCount,
		LastRTO:        e.lastRTO,
		Counters:       e.stats,
	}
	if e.wsOK {
		i.SndWScale, i.RcvWScale = int(e.snd.ws), int(e.rcv.ws)
	}
	if e.trace != nil {
		i.TimerLog = append([]TimerExpiry(nil), e.trace.log...)
	}
	return i
}

// LossCounts returns the segments in flight that are marked lost (by RACK, or
// resent and not yet acknowledged: Linux's lost_out) and those resent and not
// yet acknowledged (retrans_out), for TCP_INFO. It walks the retransmission
// queue.
func (e *Endpoint) LossCounts() (lost, retrans int) {
	for _, s := range e.snd.rtxq {
		if s.sacked {
			continue
		}
		if s.lost || s.xmits > 1 {
			lost++
		}
		if s.xmits > 1 {
			retrans++
		}
	}
	return lost, retrans
}
