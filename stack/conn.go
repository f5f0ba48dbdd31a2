package stack

import (
	"errors"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/ring"
	"github.com/tcpwheel/tcpwheel/stack/record"
	"github.com/tcpwheel/tcpwheel/tcp"
)

// Conn is a TCP connection of the stack. It implements net.Conn; its methods are
// safe for concurrent use.
//
// Read and Write do not wait for the loop: between them and the endpoint are
// two buffers under a small lock (mu), one each way. Write copies into tx, if
// the send buffer has room, and posts one flush to the loop unless one is due
// already; the loop hands the bytes to the endpoint by count (tx.q is the
// endpoint's tcp.Source: it sends them from where Write copied them). The loop moves received
// data into rx as it arrives (connSink.Take, the endpoint's tcp.Sink, or
// tcp.Endpoint.Hold: the window stays closed by it), and Read takes from rx; the loop learns what was read (Release) by a
// post only once it adds up to a step of the window worth an update. A call
// blocks only when the send buffer is full or nothing has been received.
type Conn struct {
	s *Stack
	// ep is touched only on the loop. Nil once the endpoint has gone back
	// to the stack's spares (Stack.recycleEndpoints): the application
	// closed the Conn, and the endpoint reached CLOSED or handed its
	// TIME-WAIT to a record.
	ep *tcp.Endpoint
	id tcp.ID
	// laddr and raddr are the 4-tuple's ends as net.TCPAddrs, made by the
	// first LocalAddr or RemoteAddr (addrOf), on the application's
	// goroutine: not on the loop, which makes the Conn, for four
	// allocations per connection that a burst of them queues behind.
	laddr, raddr atomic.Pointer[net.TCPAddr]
	rd, wd       deadline // in the Conn: no allocation of their own

	// readable and writable hold a pending wakeup each, set by endpoint
	// events and by Close. Each is made by the first Read or Write that
	// must wait (waitChan), under mu, nil until then, and never changes
	// after; most connections' calls never wait for one of them, and an
	// idle connection nobody reads has neither (two allocations of 112
	// bytes each, per connection).
	readable, writable chan struct{}
	settled            chan struct{} // closed once the handshake is over, either way
	settledDone        bool          // loop only
	// closing is set by Close, before it takes mu to wake the waiters:
	// a call that finds it under mu does not wait (waitChan). Only the
	// first Close sets it (CompareAndSwap); a second returns an error.
	closing atomic.Bool

	mu  sync.Mutex
	wmu sync.Mutex // one writeSome at a time (its copy without mu)
	tx  txBuf      // guarded by mu
	rx  rxBuf      // guarded by mu
	// relStep is the reads that add up to a post of Release: the endpoint's
	// UpdateStep (at most half the receive buffer, an int32), or 1 on a
	// manual loop, where a post is a call.
	relStep int32
	// finPending is what the application asked for after the bytes still in
	// tx (a Close or CloseWrite whose FIN must follow them). Loop only.
	finPending finAction
	draining   bool // drain is running (loop only): the endpoint's events do not start another
	fillDue    bool // listed in Stack.fills (loop only)
	wakeHeld   bool // listed in Stack.wakes, its reader not yet woken (loop only)
	relayed    bool // a forwarded flow's: its reader relays at once (loop only)
	// flushFn and releaseFn are c.flush and c.release, posted without an
	// allocation each. releaseFn is made by the first post of a release,
	// under mu.
	flushFn, releaseFn func()

	// rxSpare is rx's storage, which Close released, until the loop takes
	// it for the stack's spares (recycle). Guarded by mu.
	rxSpare []byte
	// recycled: the storage of both buffers went to the stack's spares,
	// or tx had none. Loop only.
	recycled bool
	// made has waitReadable and waitWritable, each set (under mu) once its
	// channel is made: the loop's wakeOn finds the channel there without
	// taking mu, once per endpoint event.
	made atomic.Uint32
}

// txBuf holds what Write took: the bytes the loop has not yet handed to the
// endpoint and those the endpoint holds, unacknowledged. Only Write appends
// to q (its producer, under mu); only the loop takes from it (its consumer,
// the endpoint's tcp.Source), and gives the room of what was acknowledged
// back at its Sync.
type txBuf struct {
	q ring.Shared
	// limit is the send buffer's size (SO_SNDBUF): Write takes bytes only
	// while q holds (Held: not yet handed over, or in the endpoint when the
	// loop last looked, never less than it holds) no more than limit, so
	// q holds no more than the endpoint's own buffer would.
	limit  int
	open   bool  // established: Write may take bytes
	err    error // why Write fails: the endpoint's error, ErrWriteClosed, ErrClosed
	posted bool  // a flush is posted and has not yet looked at q
	// waiting: a Write found no room and waited, since the loop last
	// woke it with room (roomy): that wake is a Loop.YieldToWoken.
	waiting bool
	// closeAfter: a graceful Close; it sets posted too, riding on a flush
	// Write posted or posting the flush itself, which runs the Close's
	// part on the loop (closeGraceful) after the drain.
	closeAfter bool
	// copying: a Write copies into room of q that it reserved, without mu
	// (ring.Shared.Reserve): the storage must not go to the spares.
	copying bool
}

// rxBuf holds what the loop took from the endpoint (held there as unread)
// and Read has not yet returned. Only the loop appends to ring; only Read
// (and Close) removes from it.
type rxBuf struct {
	ring ring.Buffer
	// lent holds the frame buffers the sink took instead of copying their
	// payloads into ring (rxframes.go), in order among ring's bytes; nil
	// until the first.
	lent       *lentFrames
	unreleased int  // bytes Read returned that the endpoint still holds as unread
	posted     bool // a release is posted and has not yet taken unreleased
	// lazy: Read posts no release; the loop releases what was read at the
	// end of the next batch that brings data (Stack.releaseRead), where
	// the endpoint has said that nothing waits for it before
	// (tcp.Endpoint.ReleaseCanWait, Conn.pace).
	lazy bool
	// waiting: a Read found nothing and waited, since the loop's last
	// wake of it with a bulk batch (Stack.wakeReaders): that wake is a
	// Loop.YieldToWoken. Other wakes leave it set; clearing it at every
	// answered Read made an upload 0.93x (integration/results/yield-*).
	waiting bool
	eof     bool  // the peer's FIN follows ring's bytes
	err     error // the endpoint's error follows ring's bytes
}

// finAction is a Close or CloseWrite waiting for the bytes in tx.
type finAction uint8

const (
	finNone finAction = iota
	finCloseWrite
	finClose
)

var _ net.Conn = (*Conn)(nil)

// newConn runs on the loop. An accepted connection is settled (its
// handshake is over): it shares the stack's closed settled channel instead of
// making one to close at once.
func newConn(s *Stack, ep *tcp.Endpoint, settled bool) *Conn {
	id := ep.ID()
	c := &Conn{
		s: s, ep: ep, id: id,
		relStep: int32(min(ep.UpdateStep(), math.MaxInt32)),
	}
	if s.input == inputManual {
		c.relStep = 1
	}
	if settled {
		c.settled, c.settledDone = s.settled, true
	} else {
		c.settled = make(chan struct{})
	}
	c.tx.limit = ep.Writable() // the send buffer's size: it holds nothing yet
	// releaseFn is made at its first post (readSome).
	c.flushFn = c.flush
	if s.play == nil { // a Playback's Conns leave their buffers out of the way
		// Storage that closed Conns were done with, if the stack kept
		// some (recycle), instead of an allocation each at the first
		// byte received and written.
		if b := s.takeSpare(); b != nil {
			c.rx.ring.Adopt(b)
		}
		if b := s.takeSpare(); b != nil {
			c.tx.q.Adopt(b)
		}
		ep.SetSink((*connSink)(c))
		ep.SetSource(&c.tx.q)
	}
	s.applyPMTU(ep) // pmtu.go
	return c
}

// connSink is a Conn as its endpoint's tcp.Sink (a type of its own, so that
// Take is not a method of the Conn an application holds).
type connSink Conn

// Take is the endpoint's tcp.Sink, on the loop: in-order data goes straight
// from the input packet into rx, held there as unread, instead of into the
// endpoint's buffer and then, at the batch's end, into rx (fill): one copy
// of every byte received less. A large payload that lies in the frame
// buffer the loop read it into is not copied at all: rx takes the buffer
// (Stack.lendFrame, rxframes.go). The reader is still woken once per batch,
// at its end (fill, from Stack.fills). A closed Conn takes nothing: the
// data stays in the endpoint, for Close's reset.
func (cs *connSink) Take(p []byte) bool {
	c := (*Conn)(cs)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.isClosed() {
		return false
	}
	if buf := c.s.lendFrame(p); buf != nil {
		c.rx.lend(p, buf)
		return true
	}
	c.rx.copyIn(p)
	return true
}

// connNotify is a Conn as its endpoint's tcp.Notifier: set with
// SetNotifier, a pointer costs no allocation where the method value
// c.notify would cost one per connection.
type connNotify Conn

// Notify is the endpoint's tcp.Notifier (Conn.notify).
func (cn *connNotify) Notify(ev tcp.Event) { (*Conn)(cn).notify(ev) }

// notify receives the endpoint's events on the loop, moves data between the
// endpoint and the Conn's buffers, and wakes the waiters. A Playback drives
// the endpoint itself, as the recording says: its Conns' buffers stay out of
// the way.
func (c *Conn) notify(ev tcp.Event) {
	if c.s.play == nil {
		switch {
		case ev&(tcp.EventError|tcp.EventClosed) != 0:
			c.fill()
		case ev&tcp.EventReadable != 0 && c.s.inBatch:
			// Data of a batch of input: moved, and the reader woken, once
			// at its end (Stack.flushAcks), not per segment.
			c.fillAtEnd()
			ev &^= tcp.EventReadable
		case ev&tcp.EventReadable != 0:
			c.fill()
		}
		if ev&(tcp.EventEstablished|tcp.EventWritable|tcp.EventError|tcp.EventClosed) != 0 {
			c.syncTx(ev)
		}
	}
	if ev&(tcp.EventReadable|tcp.EventError|tcp.EventClosed) != 0 {
		c.wakeOn(&c.readable)
	}
	if ev&(tcp.EventEstablished|tcp.EventError|tcp.EventClosed) != 0 || ev&tcp.EventWritable != 0 && (c.s.play != nil || c.roomy()) {
		c.wakeOn(&c.writable)
	}
	if ev&(tcp.EventEstablished|tcp.EventError|tcp.EventClosed) != 0 && !c.settledDone {
		c.settledDone = true
		close(c.settled)
	}
	if ev&(tcp.EventWritable|tcp.EventError|tcp.EventClosed) != 0 && !c.recycled {
		c.recycle() // the last bytes written may have been acknowledged
	}
	if ev&tcp.EventTimeWait != 0 {
		c.s.toTimeWait(c) // timewait.go: its EventClosed follows
	}
	if ev&tcp.EventClosed != 0 {
		c.s.forget(c)
	}
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// The bits of Conn.made.
const (
	waitReadable uint32 = 1 << iota
	waitWritable
)

// madeBit is ch's bit of Conn.made: ch is &c.readable or &c.writable.
func (c *Conn) madeBit(ch *chan struct{}) uint32 {
	if ch == &c.readable {
		return waitReadable
	}
	return waitWritable
}

// wakeOn wakes a call waiting on *ch, c.readable or c.writable, if one
// ever had to (the channel made: its bit of made). It takes no lock: the
// loop changes what the call looks at (rx or tx) under mu before it looks
// at made, and a call that must wait makes the channel and sets its bit
// under mu with its look at them. If the call held mu first, the loop's
// lock of mu came after, and so does its look at made: it finds the bit
// (and the channel, written before the bit); if the loop held it first,
// the call finds the change and does not wait.
func (c *Conn) wakeOn(ch *chan struct{}) {
	if c.made.Load()&c.madeBit(ch) != 0 {
		wake(*ch)
	}
}

// waitChan returns *ch, the channel a call that must wait waits on, making
// it (and setting its bit of made) the first time. Under mu. After Close
// (closing, set before Close takes mu to wake the waiters) it holds a
// wakeup already: the call returns at once, and finds the Conn closed.
func (c *Conn) waitChan(ch *chan struct{}) chan struct{} {
	if *ch == nil {
		*ch = make(chan struct{}, 1)
		c.made.Or(c.madeBit(ch))
	}
	if c.isClosed() {
		wake(*ch)
	}
	return *ch
}

func (c *Conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: addrOf(&c.laddr, c.id.Local), Addr: addrOf(&c.raddr, c.id.Remote), Err: err}
}

// Read implements net.Conn. It returns io.EOF after the peer's FIN.
func (c *Conn) Read(p []byte) (int, error) {
	for {
		if err := c.usable("read", &c.rd); err != nil {
			return 0, err
		}
		var ch chan struct{}
		n, wait, err := c.readSome(p, &ch)
		if !wait {
			return n, err
		}
		c.block(ch, &c.rd)
	}
}

// readSome returns what has been received, if anything, without waiting;
// wait is true when there is nothing yet (nor EOF, nor an error). Then, if
// ch is not nil, *ch is the channel to wait on (readable, made under mu
// with the look at rx: waitChan).
func (c *Conn) readSome(p []byte, ch *chan struct{}) (n int, wait bool, err error) {
	c.mu.Lock()
	if c.rx.len() > 0 {
		n = c.rx.read(p, c.s.frames)
		c.readDone(n)
		return n, false, nil
	}
	wait, err = c.readEmpty(ch, len(p) > 0)
	return 0, wait, err
}

// readDone counts n bytes taken out of rx as read, for the endpoint to
// release, and posts the release when a step's worth is due. Called with mu
// held, which it releases.
func (c *Conn) readDone(n int) {
	c.rx.unreleased += n
	post := !c.rx.posted && !c.rx.lazy && c.rx.unreleased >= int(c.relStep)
	var release func()
	if post {
		c.rx.posted = true
		if c.releaseFn == nil { // made by the first post: most connections read less than a step
			c.releaseFn = c.release
		}
		release = c.releaseFn
	}
	c.mu.Unlock()
	if post {
		c.s.connPosts.releases.Add(1)
		c.s.post(release)
	}
}

// readEmpty is a read's answer when rx is empty: the error or EOF that
// follows its bytes, or, if the caller would wait (want), wait true and
// *ch (if ch is not nil) the channel to wait on. Called with mu held, which
// it releases.
func (c *Conn) readEmpty(ch *chan struct{}, want bool) (wait bool, err error) {
	eof, rerr := c.rx.eof, c.rx.err
	if ch != nil && !eof && rerr == nil && want {
		*ch = c.waitChan(&c.readable)
		c.rx.waiting = true
	}
	c.mu.Unlock()
	switch {
	case rerr != nil:
		return false, c.opErr("read", mapErr(rerr))
	case eof:
		return false, io.EOF
	case c.s.isDone():
		return false, c.opErr("read", net.ErrClosed)
	case !want:
		return false, nil
	}
	return true, nil
}

// Write implements net.Conn: it returns once all of p is in the send buffer, or
// with the count written so far and an error.
func (c *Conn) Write(p []byte) (int, error) {
	total := 0
	for {
		if err := c.usable("write", &c.wd); err != nil {
			return total, err
		}
		var ch chan struct{}
		n, err := c.writeSome(p[total:], &ch)
		total += n
		if err != nil || total == len(p) {
			return total, err
		}
		if n == 0 {
			c.block(ch, &c.wd)
		}
	}
}

// minCopyUnlocked is the smallest copy writeSome makes without mu: the loop
// takes mu at every flush and every ACK, and a loop that found it held for
// a large copy waited for the copy, and then for a P (Go's runtime had it
// run next on the writer's P, which a spinning thread steals only after a
// sleep: 50 µs and more with Linux's default timer slack). Smaller copies
// go under mu, in one lock.
const minCopyUnlocked = 8 << 10

// testHookAfterFill, when set, runs after a Write's copy without mu and
// before the copy is counted (tests: what the loop may do meanwhile).
var testHookAfterFill func(*Conn)

// writeSome takes as much of p as the send buffer has room for, without
// waiting, and has the loop flush it unless a flush is due already. When
// it takes nothing of a p that is not empty, and ch is not nil, *ch is the
// channel to wait on (writable, made under mu with the look at tx:
// waitChan).
func (c *Conn) writeSome(p []byte, ch *chan struct{}) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	room, err := c.txRoom(ch, len(p) > 0)
	if err != nil || room <= 0 || len(p) == 0 {
		c.mu.Unlock()
		return 0, err
	}
	n := min(room, len(p))
	if n < minCopyUnlocked {
		c.tx.q.Write(p[:n])
	} else if err := c.copyUnlocked(p[:n]); err != nil {
		c.mu.Unlock()
		return 0, err
	}
	c.wrote()
	return n, nil
}

// txRoom is the send buffer's room for a write (writeSome, ReadFrom's
// readFd), with mu held: the error Write returns, or 0 when there is no
// room or the connection is not established yet, and then, if want and ch
// is not nil, *ch is the channel to wait on (writable, made under mu with
// the look at tx: waitChan).
func (c *Conn) txRoom(ch *chan struct{}, want bool) (int, error) {
	if err := c.tx.err; err != nil {
		return 0, c.opErr("write", mapErr(err))
	}
	if c.s.isDone() {
		return 0, c.opErr("write", net.ErrClosed)
	}
	if room := c.tx.limit - c.tx.q.Held(); c.tx.open && room > 0 {
		return room, nil
	}
	if ch != nil && want {
		*ch = c.waitChan(&c.writable)
		c.tx.waiting = true
	}
	return 0, nil
}

// wrote has the loop flush what a write added to tx, unless a flush is
// due already. Called with mu held, which it releases.
func (c *Conn) wrote() {
	post := !c.tx.posted
	c.tx.posted = true
	c.mu.Unlock()
	if post {
		c.s.connPosts.flushes.Add(1)
		c.s.post(c.flushFn)
	}
}

// copyUnlocked copies p into tx.q without mu: into room reserved under mu
// (ring.Shared.Reserve), counted as written (Commit) only if nothing
// happened meanwhile that the bytes may not follow: a Close or a CloseWrite
// (the FIN may be out already), the endpoint's error, or a Drop of what
// Write took (a reset, an abort). Then it returns the error Write returns,
// and the bytes are not sent. Called with mu held, which it releases for
// the copy and holds again on return; c.wmu held, so that no other
// writeSome reserves room meanwhile.
func (c *Conn) copyUnlocked(p []byte) error {
	span := c.tx.q.Reserve(len(p))
	c.tx.copying = true // recycle leaves the storage alone
	c.mu.Unlock()
	span.Fill(p)
	if testHookAfterFill != nil {
		testHookAfterFill(c)
	}
	c.mu.Lock()
	c.tx.copying = false
	return c.commitFilled(span)
}

// commitFilled counts span, filled without mu (copyUnlocked, readFd), as
// written, unless a Close, a CloseWrite, the endpoint's error or a Drop came
// meanwhile: then it returns the error Write returns, and the bytes are not
// sent. Called with mu held again after the fill.
func (c *Conn) commitFilled(span ring.Span) error {
	if c.isClosed() {
		return c.opErr("write", net.ErrClosed)
	}
	if err := c.tx.err; err != nil { // a CloseWrite, or the endpoint's error
		return c.opErr("write", mapErr(err))
	}
	if !c.tx.q.Commit(span) { // a Drop with no error set (yet)
		return c.opErr("write", mapErr(tcp.ErrClosed))
	}
	return nil
}

// usable reports why op cannot go on: the connection is closed, or dl passed.
func (c *Conn) usable(op string, dl *deadline) error {
	if c.isClosed() {
		return c.opErr(op, net.ErrClosed)
	}
	if dl.passed() {
		return c.opErr(op, os.ErrDeadlineExceeded)
	}
	return nil
}

// block waits until the endpoint signals on ch, dl passes, the connection is
// closed (Close signals on ch too) or the stack is. A wakeup taken after
// Close is passed on, for another call waiting on ch.
func (c *Conn) block(ch chan struct{}, dl *deadline) {
	select {
	case <-ch:
		if c.isClosed() {
			wake(ch)
		}
	case <-dl.wait():
	case <-c.s.done:
	}
	dl.done()
}

func (c *Conn) isClosed() bool { return c.closing.Load() }

// Close implements net.Conn: it sends a FIN after the data already written and
// releases the connection (RFC 9293 3.10.4). Unread received data makes it a RST,
// as on Linux. A second Close returns an error wrapping net.ErrClosed.
func (c *Conn) Close() error {
	if !c.closing.CompareAndSwap(false, true) {
		return c.opErr("close", net.ErrClosed) // made only here: five allocations
	}
	c.mu.Lock()
	unread := c.rx.len() > 0        // taken from the endpoint but never returned
	c.rxSpare = c.rx.ring.Release() // for the loop's recycle
	c.rx.reset(c.s.frames)
	readable, writable := c.readable, c.writable
	c.mu.Unlock()
	// Calls waiting (waitChan made their channels under mu, before
	// this look, or they find closing set there) return.
	if readable != nil {
		wake(readable)
	}
	if writable != nil {
		wake(writable)
	}
	// The loop's part is posted, not waited for: it cannot fail (the
	// endpoint's Close reports only a second Close, which the swap of
	// closing rules out), and posts run in order, so the FIN still follows
	// every byte written. A graceful Close while Write's flush is
	// still posted rides on it (closeAfter): the FIN then leaves in
	// the same turn as the last data, and joins its frame
	// (queueSegment) as data+FIN in one packet.
	//
	// A graceful Close that does not ride posts Write's flush with
	// closeAfter set: the same closeGraceful, without a method value
	// made for it (an allocation per connection).
	rides := false
	if !unread {
		c.mu.Lock()
		rides = c.tx.posted
		c.tx.closeAfter, c.tx.posted = true, true
		c.mu.Unlock()
	}
	if !rides {
		c.s.connPosts.closes.Add(1)
		if unread {
			c.s.post(c.closeReset)
		} else {
			c.s.post(c.flushFn)
		}
	}
	c.rd.set(time.Time{})
	c.wd.set(time.Time{})
	return nil
}

// closeGraceful is a Close's part on the loop when nothing received was
// left unread: what was read counts as read, and a FIN follows the data
// written.
func (c *Conn) closeGraceful() {
	c.release()
	c.finAfterTx(finClose)
	c.recycle()
	c.s.retire(c) // an endpoint a reset closed before the application did
}

// closeReset is a Close's part on the loop when received data was left
// unread: a reset, as on Linux.
func (c *Conn) closeReset() {
	c.release()
	c.dropTx()
	c.close(true)
	c.recycle()
	c.s.retire(c)
}

// recycle hands the storage of the Conn's buffers to the stack's spares
// (Stack.spare), for the next Conns, once the Conn is done with it: rx's,
// which Close released, and tx's once the application has closed the Conn
// and every byte it wrote has been sent, acknowledged and given back (the
// ring then holds nothing: ring.Shared.Release). By the Output's contract a
// frame with views of those bytes was written before the ACK that let the
// endpoint consume them (offload.go's flushBeforeAck). On the loop, after
// Close's part and after the endpoint's events; a Playback's Conns have no
// buffers of their own.
func (c *Conn) recycle() {
	if c.recycled || c.s.play != nil || !c.isClosed() {
		return
	}
	c.mu.Lock()
	rx := c.rxSpare
	c.rxSpare = nil
	var tx []byte
	done := c.tx.q.Held() == 0 && !c.tx.copying
	if done {
		tx = c.tx.q.Release() // nil if it never had storage
	}
	c.mu.Unlock()
	c.s.spare(rx)
	if done {
		c.recycled = true
		c.s.spare(tx)
	}
}

// CloseWrite shuts down the sending side: a FIN follows the data already
// written; reading goes on.
func (c *Conn) CloseWrite() error {
	if c.isClosed() {
		return c.opErr("close", net.ErrClosed)
	}
	c.mu.Lock()
	if c.tx.err == nil {
		c.tx.err = tcp.ErrWriteClosed
	}
	c.mu.Unlock()
	var err error
	if c.s.do(func() { err = c.finAfterTx(finCloseWrite) }) != nil {
		return c.opErr("close", net.ErrClosed)
	}
	if err != nil {
		return c.opErr("close", mapErr(err))
	}
	return nil
}

// Abort resets the connection at once (SO_LINGER 0).
func (c *Conn) Abort() error {
	if c.s.do(func() { c.dropTx(); c.abort() }) != nil {
		return c.opErr("close", net.ErrClosed)
	}
	return nil
}

// LocalAddr implements net.Conn.
func (c *Conn) LocalAddr() net.Addr { return addrOf(&c.laddr, c.id.Local) }

// RemoteAddr implements net.Conn.
func (c *Conn) RemoteAddr() net.Addr { return addrOf(&c.raddr, c.id.Remote) }

// addrOf returns the net.TCPAddr of ap kept in p, making it the first time.
// Every call returns the same one, as a net.TCPConn's LocalAddr does.
func addrOf(p *atomic.Pointer[net.TCPAddr], ap netip.AddrPort) *net.TCPAddr {
	if a := p.Load(); a != nil {
		return a
	}
	p.CompareAndSwap(nil, newTCPAddr(ap))
	return p.Load()
}

// newTCPAddr is net.TCPAddrFromAddrPort(ap) in one allocation instead of
// two: the address and its IP's bytes together (net/http asks every
// connection for both ends).
func newTCPAddr(ap netip.AddrPort) *net.TCPAddr {
	a := ap.Addr()
	if a.Is4() {
		t := &struct {
			net.TCPAddr
			ip [4]byte
		}{ip: a.As4()}
		t.IP, t.Port = t.ip[:], int(ap.Port())
		return &t.TCPAddr
	}
	t := &struct {
		net.TCPAddr
		ip [16]byte
	}{ip: a.As16()}
	t.IP, t.Port, t.Zone = t.ip[:], int(ap.Port()), a.Zone()
	return &t.TCPAddr
}

// SetDeadline implements net.Conn.
func (c *Conn) SetDeadline(t time.Time) error {
	c.rd.set(t)
	c.wd.set(t)
	return nil
}

// SetReadDeadline implements net.Conn.
func (c *Conn) SetReadDeadline(t time.Time) error { c.rd.set(t); return nil }

// SetWriteDeadline implements net.Conn.
func (c *Conn) SetWriteDeadline(t time.Time) error { c.wd.set(t); return nil }

// Info returns the connection's TCP_INFO-like snapshot. After Close, once
// the connection has closed or reached TIME-WAIT (a small record keeps
// that), its endpoint serves a new connection, and Info reports
// StateClosed and nothing else, as a closed socket has no TCP_INFO;
// Stack.Stats keeps the counters of closed connections.
func (c *Conn) Info() tcp.Info {
	var info tcp.Info
	c.s.do(func() {
		c.releaseRead(false) // what was read counts as read, lazy or not (pace)
		if c.ep == nil {
			info.State = tcp.StateClosed // the endpoint is another connection's now
			return
		}
		info = c.ep.Info()
	})
	return info
}

// SetKeepAlive turns keepalive probes on or off, like net.TCPConn's. Probes
// start after the idle time (SetKeepAlivePeriod, or the stack's TCP config).
func (c *Conn) SetKeepAlive(on bool) error {
	return c.setKeepAlive(net.KeepAliveConfig{Enable: on})
}

// SetKeepAlivePeriod sets the idle time before the first probe and the interval
// between probes, like net.TCPConn's. It does not turn keepalive on.
func (c *Conn) SetKeepAlivePeriod(d time.Duration) error {
	var on bool
	if c.s.do(func() { on = c.ep != nil && c.ep.Info().KeepAlive }) != nil {
		return c.opErr("set", net.ErrClosed)
	}
	return c.setKeepAlive(net.KeepAliveConfig{Enable: on, Idle: d, Interval: d})
}

// SetKeepAliveConfig sets every keepalive parameter at once (RFC 1122
// 4.2.3.6), like net.TCPConn's; zero fields keep their current values.
func (c *Conn) SetKeepAliveConfig(cfg net.KeepAliveConfig) error {
	return c.setKeepAlive(cfg)
}

func (c *Conn) setKeepAlive(cfg net.KeepAliveConfig) error {
	if c.isClosed() {
		return c.opErr("set", net.ErrClosed)
	}
	if c.s.do(func() { c.keepAlive(cfg) }) != nil {
		return c.opErr("set", net.ErrClosed)
	}
	return nil
}

// The application's calls on the loop: each is recorded (flight.go) before
// it runs, so that the events it causes follow it, and a Playback makes the
// same calls. A write is recorded when the loop moves the bytes into the
// endpoint (drain), a read when it learns that the application read them
// (release): the instants the endpoint sees them.

// write hands the next k bytes of tx.q to the endpoint's send buffer.
func (c *Conn) write(k int) (int, error) {
	if c.ep == nil {
		return 0, tcp.ErrClosed
	}
	c.event(record.Write, int64(k))
	return c.ep.Append(k)
}

// flush is what Write posts: it moves what Write took into the endpoint.
func (c *Conn) flush() {
	c.mu.Lock()
	c.tx.posted = false
	closing := c.tx.closeAfter // a graceful Close's, set with posted
	c.tx.closeAfter = false
	c.mu.Unlock()
	if c.ep == nil {
		return
	}
	if closing {
		// What was read first (its window update rides on the data), then
		// the drain and the FIN, in one turn.
		c.closeGraceful()
		return
	}
	c.drain()
}

// drain hands the bytes in tx that the endpoint does not hold yet to it, as
// far as it takes them (by count: it sends them from tx.q's storage), then
// runs a Close or CloseWrite that waited for them.
func (c *Conn) drain() {
	if c.draining {
		return
	}
	c.draining = true
	defer func() { c.draining = false }()
	c.mu.Lock()
	k := c.tx.q.Sync()
	c.mu.Unlock()
	if k == 0 && c.finPending == finNone {
		return
	}
	var err error
	if k > 0 {
		_, err = c.write(k) // the endpoint takes what it does from tx.q (Take)
	}
	c.mu.Lock()
	if err != nil {
		c.tx.q.Drop()
		if c.tx.err == nil || errors.Is(c.tx.err, tcp.ErrWriteClosed) {
			c.tx.err = err
		}
	}
	empty := c.tx.q.Pending() == 0
	c.mu.Unlock()
	if fin := c.finPending; empty && fin != finNone {
		c.finPending = finNone
		c.finAfterTx(fin)
	}
}

// dropTx discards what Write took and the endpoint never got (a reset).
func (c *Conn) dropTx() {
	c.mu.Lock()
	c.tx.q.Drop()
	c.mu.Unlock()
	c.finPending = finNone
}

// finAfterTx closes (fin is finClose) or shuts down the sending side
// (finCloseWrite) once the bytes in tx are in the endpoint: now if they
// are, else when drain has moved the last of them.
func (c *Conn) finAfterTx(fin finAction) error {
	c.drain()
	c.mu.Lock()
	pending := c.tx.q.Pending() > 0
	c.mu.Unlock()
	if pending {
		c.finPending = max(c.finPending, fin)
		return nil
	}
	if fin == finClose {
		return c.close(false)
	}
	return c.closeWrite()
}

// syncTx takes the endpoint's send side as it now stands: established, what
// its send buffer holds (the room of what was acknowledged goes back to
// Write), its error; and hands more of tx to it if it has room.
func (c *Conn) syncTx(ev tcp.Event) {
	if c.ep == nil {
		return
	}
	c.mu.Lock()
	if ev&tcp.EventEstablished != 0 {
		c.tx.open = true
	}
	c.tx.limit = c.ep.SendBufferSize() // grown (tcp's autoGrowSendBuffer) or set
	more := c.tx.q.Sync() > 0
	if ev&(tcp.EventError|tcp.EventClosed) != 0 {
		err := c.ep.Err()
		if err == nil {
			err = tcp.ErrClosed
		}
		c.tx.err = err
		c.tx.q.Drop()
		more = false
	}
	c.mu.Unlock()
	if more {
		c.drain()
	}
}

// roomy reports whether the send buffer has room enough to wake a writer
// for: at least half of what it holds, as Linux's sk_stream_write_space
// (sk_stream_wspace >= sk_stream_min_wspace). A writer blocked on a full
// buffer then wakes once per many ACKs, and moves a large piece each time,
// instead of a segment or two per ACK.
func (c *Conn) roomy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	held := c.tx.q.Held()
	if 2*(c.tx.limit-held) < held {
		return false
	}
	if c.tx.waiting {
		// The writer comes back with its next bytes at once: let it run
		// before the loop sleeps (a bulk sender's every wake).
		c.tx.waiting = false
		c.s.yieldToWoken()
	}
	return true
}

// readerWaits reports whether a Read found nothing and waits (or did), and
// forgets it: the wake that follows answers it.
func (c *Conn) readerWaits() bool {
	c.mu.Lock()
	w := c.rx.waiting
	c.rx.waiting = false
	c.mu.Unlock()
	return w
}

// fill moves what the endpoint has received into rx, held there as unread
// (tcp.Endpoint.Hold), and notes the FIN or the error that follows it. It
// returns the count of bytes rx holds that Read has not returned.
func (c *Conn) fill() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.isClosed() || c.ep == nil {
		return 0 // unread data stays in the endpoint, for Close's reset
	}
	if k := c.ep.Readable(); k > 0 {
		c.rx.ring.Grow(k)
		a, b := c.rx.ring.Free()
		n, _ := c.ep.Hold(a[:min(len(a), k)])
		if n < k {
			m, _ := c.ep.Hold(b[:min(len(b), k-n)])
			n += m
		}
		c.rx.committed(n)
	}
	if c.ep.Readable() == 0 {
		var one [1]byte
		if _, err := c.ep.Hold(one[:]); err == io.EOF {
			c.rx.eof = true
		} else if err != nil {
			c.rx.err = err
		}
	}
	return c.rx.len()
}

// pace decides, on the loop at the end of a batch that brought c data,
// whether Read posts its releases (rxBuf.lazy): not while the endpoint
// says that they can wait for the next batch of data
// (tcp.Endpoint.ReleaseCanWait), which saves the post, and often the
// loop's wakeup, of every Read of a bulk transfer. When they cannot, bytes
// Read took since the batch's releaseRead that would have been posted are
// released at once (on the loop, as the post would).
//
// It reports whether the reader's wake may wait a turn (Stack.wakeReaders):
// the Conn is lazy and holds lent frames, a bulk transfer's.
func (c *Conn) pace() (bulk bool) {
	if c.ep == nil {
		return false
	}
	lazy := c.ep.ReleaseCanWait()
	c.mu.Lock()
	c.rx.lazy = lazy
	due := !lazy && !c.rx.posted && c.rx.unreleased >= int(c.relStep)
	bulk = lazy && c.rx.lent != nil && len(c.rx.lent.frames) > 0
	c.mu.Unlock()
	if due {
		c.releaseRead(false)
	}
	return bulk
}

// OutOfOrder implements tcp.OutOfOrderSink, on the loop: out-of-order data
// shrinks the peer's window although no in-order data came, so the batch's
// end releases what was read and paces c again, as after data.
func (cs *connSink) OutOfOrder() { (*Conn)(cs).fillAtEnd() }

// fillAtEnd lists c in Stack.fills, once per batch: at the batch's end, the
// loop releases what was read (releaseRead), moves the data (fill), paces
// c and wakes the reader.
func (c *Conn) fillAtEnd() {
	if c.s.inBatch && !c.fillDue {
		c.fillDue = true
		c.s.fills = append(c.s.fills, c)
	}
}

// release is what Read posts: it tells the endpoint what the application
// read, which opens the window.
func (c *Conn) release() { c.releaseRead(true) }

// releaseRead is release; posted: it runs as the posted one, which it ends
// (else a post still pending stays so: it finds what Read took since).
func (c *Conn) releaseRead(posted bool) {
	c.mu.Lock()
	n := c.rx.unreleased
	c.rx.unreleased = 0
	if posted {
		c.rx.posted = false
	}
	c.mu.Unlock()
	if n > 0 && c.ep != nil {
		c.event(record.Read, int64(n))
		c.ep.Release(n)
	}
}

// close is Close's part on the loop: unread data makes it a reset, as on
// Linux.
func (c *Conn) close(unread bool) error {
	if c.ep == nil {
		return tcp.ErrClosed
	}
	if unread {
		c.event(record.Close, 1)
		c.ep.Abort()
		return nil
	}
	c.event(record.Close, 0)
	return c.ep.Close()
}

func (c *Conn) closeWrite() error {
	if c.ep == nil {
		return tcp.ErrClosed
	}
	c.event(record.CloseWrite, 0)
	return c.ep.CloseWrite()
}

func (c *Conn) abort() {
	if c.ep == nil {
		return
	}
	c.event(record.Abort, 0)
	c.ep.Abort()
}

func (c *Conn) keepAlive(cfg net.KeepAliveConfig) {
	if c.ep == nil {
		return
	}
	if c.s.rec != nil {
		c.s.hasSendAt = false
		on := int64(0)
		if cfg.Enable {
			on = 1
		}
		c.s.rec.Event(&record.Event{Kind: record.KeepAlive, T: c.s.wheel.Now(), Local: c.id.Local, Remote: c.id.Remote,
			N: on, Args: []int64{int64(cfg.Idle), int64(cfg.Interval), int64(cfg.Count)}})
	}
	c.ep.SetKeepAlive(cfg.Enable, cfg.Idle, cfg.Interval, cfg.Count)
}
