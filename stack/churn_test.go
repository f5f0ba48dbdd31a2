package stack

import (
	"errors"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/tcpwheel/tcpwheel/tcp"
)

// TestNewConnAllocs: what making a Conn costs the loop (newConn runs there,
// for every connection a listener accepts). The Conn (its two deadlines in
// it) and the flushFn it posts: not its readable and writable channels
// (made by the first Read or Write that must wait: waitChan), not its net.TCPAddrs (made on the application's goroutine by LocalAddr and
// RemoteAddr), not a settled channel (an accepted one shares the stack's),
// not its deadlines' channels (made when a deadline is first needed), not
// releaseFn (made by the first post of a release), not the endpoint's notify
// function (the Conn is its tcp.Notifier: Listener.accept).
func TestNewConnAllocs(t *testing.T) {
	p := newManualPair(t)
	_, server := p.connect()
	s, ep := p.b.Stack, server.ep
	allocs := testing.AllocsPerRun(100, func() { newConn(s, ep, true) })
	const want = 2
	if allocs > want {
		t.Errorf("newConn: %.1f allocations, want at most %d", allocs, want)
	}
	if allocs := testing.AllocsPerRun(100, func() { ep.SetNotifier((*connNotify)(server)) }); allocs != 0 {
		t.Errorf("SetNotifier with the Conn: %.1f allocations, want none", allocs)
	}
}

// TestNewTCPAddr: the net.TCPAddr that LocalAddr and RemoteAddr make is
// net.TCPAddrFromAddrPort's, for every kind of address, in one allocation.
func TestNewTCPAddr(t *testing.T) {
	for _, s := range []string{"198.18.0.2:7", "[2001:db8::1]:443", "[fe80::1%eth0]:80", "[::ffff:198.18.0.1]:9", "0.0.0.0:0"} {
		ap := netip.MustParseAddrPort(s)
		got, want := newTCPAddr(ap), net.TCPAddrFromAddrPort(ap)
		if !got.IP.Equal(want.IP) || len(got.IP) != len(want.IP) || got.Port != want.Port || got.Zone != want.Zone ||
			got.String() != want.String() || got.AddrPort() != want.AddrPort() {
			t.Errorf("%s: %#v, want %#v", s, got, want)
		}
		var p atomic.Pointer[net.TCPAddr]
		if allocs := testing.AllocsPerRun(100, func() { p.Store(nil); addrOf(&p, ap) }); allocs != 1 {
			t.Errorf("%s: addrOf: %.1f allocations, want 1", s, allocs)
		}
	}
}

// TestConnAddrsMadeOnce: LocalAddr and RemoteAddr, made on first use, are the
// connection's 4-tuple, and the same value on every call (as a net.TCPConn's);
// an error after Close names them.
func TestConnAddrsMadeOnce(t *testing.T) {
	p := newManualPair(t)
	client, server := p.connect()
	for _, c := range []struct {
		name       string
		conn       *Conn
		local, rem string
	}{{"client", client, "", "198.18.0.2:7"}, {"server", server, "198.18.0.2:7", ""}} {
		la, ra := c.conn.LocalAddr(), c.conn.RemoteAddr()
		if la.(*net.TCPAddr).AddrPort() != c.conn.id.Local || ra.(*net.TCPAddr).AddrPort() != c.conn.id.Remote {
			t.Errorf("%s: LocalAddr %v RemoteAddr %v, want %v %v", c.name, la, ra, c.conn.id.Local, c.conn.id.Remote)
		}
		if c.local != "" && la.String() != c.local || c.rem != "" && ra.String() != c.rem {
			t.Errorf("%s: LocalAddr %v RemoteAddr %v", c.name, la, ra)
		}
		if c.conn.LocalAddr() != la || c.conn.RemoteAddr() != ra {
			t.Errorf("%s: a second call returned another net.TCPAddr", c.name)
		}
	}
	if err := server.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	err := server.Close()
	var oe *net.OpError
	if !errors.As(err, &oe) || !errors.Is(err, net.ErrClosed) || oe.Op != "close" ||
		oe.Source != server.LocalAddr() || oe.Addr != server.RemoteAddr() {
		t.Fatalf("second Close: %#v, want a close OpError of net.ErrClosed naming the addresses", err)
	}
}

// TestDeadlineZeroValue: a deadline never set has no channel until one is
// asked for, has not passed, and works as one made with its channel: a time
// in the past passes it, the zero time clears it, a future time passes it
// when it comes.
func TestDeadlineZeroValue(t *testing.T) {
	var d deadline
	if d.passed() || d.ch != nil {
		t.Fatalf("unset: passed %v, channel %v; want false, none", d.passed(), d.ch)
	}
	d.set(time.Time{})
	if d.passed() || d.ch != nil {
		t.Fatalf("cleared while unset: passed %v, channel %v; want false, none", d.passed(), d.ch)
	}
	w := d.wait()
	if w == nil || d.passed() {
		t.Fatal("wait: want a channel, not closed")
	}
	d.set(time.Now().Add(-time.Second))
	select {
	case <-w:
	default:
		t.Fatal("a time in the past did not close the channel wait returned")
	}
	if !d.passed() {
		t.Fatal("a time in the past: not passed")
	}
	d.set(time.Time{})
	if d.passed() || d.ch != nil {
		t.Fatalf("cleared after passing: passed %v, channel %v; want false, none (made by the next wait)", d.passed(), d.ch)
	}
	if w2 := d.wait(); w2 == w || d.passed() {
		t.Fatal("wait after clearing: want a new channel, not closed")
	}
	// Passed and cleared, as net/http's server does on every request: no
	// channel made while nobody waits (the shared closed one), and the
	// deadline works as before after it.
	if allocs := testing.AllocsPerRun(100, func() {
		d.set(time.Time{})
		d.set(time.Now().Add(-time.Second))
		d.set(time.Time{})
	}); allocs != 0 {
		t.Errorf("a deadline passed and cleared: %.1f allocations, want none", allocs)
	}
	var f deadline
	f.set(time.Now().Add(-time.Second))
	if !f.passed() || f.ch != passedCh {
		t.Fatal("a time in the past, nobody waiting: not passed, or a channel of its own")
	}
	select {
	case <-f.wait():
	default:
		t.Fatal("a time in the past, nobody waiting: wait's channel not closed")
	}
	f.set(time.Now().Add(time.Hour))
	if f.passed() || f.ch == passedCh {
		t.Fatal("re-armed after passing: still passed, or on the shared channel")
	}
	select {
	case <-f.wait():
		t.Fatal("re-armed after passing: wait's channel closed")
	default:
	}
	f.set(time.Time{})
	if f.passed() {
		t.Fatal("cleared after re-arming: passed")
	}
	select {
	case <-passedCh:
	default:
		t.Fatal("the shared channel was replaced or reopened")
	}
	var e deadline
	e.set(time.Now().Add(10 * time.Millisecond))
	<-e.wait() // closed when the time comes; the test's timeout if never
	if !e.passed() {
		t.Fatal("a future time came: not passed")
	}
}

// TestDeadlineTimerReused: a deadline's timer runs only for calls that wait
// on it. net/http's server sets a connection's read deadline several times a
// request (a future time, none, a past time, none) with nobody waiting under
// it: no timer and no allocation; a deadline set and reached meanwhile is
// passed all the same. A call that waits arms the timer, made once and
// re-armed after; a set that overtakes a timer about to fire is not passed by
// that fire, which re-arms for the new time while the call waits, and a
// re-armed deadline passes when its own time comes.
func TestDeadlineTimerReused(t *testing.T) {
	var d deadline
	if allocs := testing.AllocsPerRun(200, func() {
		d.set(time.Now().Add(10 * time.Second)) // ReadHeaderTimeout
		if d.passed() {
			t.Fatal("a deadline 10 s on: passed")
		}
		d.set(time.Time{})
		d.set(time.Now().Add(-time.Second)) // the background read's abort
		if !d.passed() {
			t.Fatal("a past deadline: not passed")
		}
		d.set(time.Time{})
	}); allocs != 0 {
		t.Errorf("a request's four deadline sets, nobody waiting: %.1f allocations, want none", allocs)
	}
	if d.tm == nil || d.tm.t != nil {
		t.Fatal("a deadline's time not kept, or a timer made with nobody waiting")
	}
	var r deadline
	r.set(time.Now().Add(5 * time.Millisecond))
	time.Sleep(6 * time.Millisecond)
	if r.tm.t != nil || !r.passed() {
		t.Fatalf("a deadline reached while nobody waited: timer %v, passed %v; want none, true", r.tm.t, r.passed())
	}

	// A call waits: the timer is made once, and the sets while it waits
	// re-arm it.
	w := d.wait()
	if d.tm.t != nil {
		t.Fatal("a wait with no deadline set made a timer")
	}
	d.set(time.Now().Add(time.Hour))
	tm := d.tm.t
	if tm == nil || d.tm.armed.IsZero() {
		t.Fatal("a deadline set while a call waits: no timer armed")
	}
	if allocs := testing.AllocsPerRun(200, func() {
		d.set(time.Now().Add(10 * time.Second))
		d.set(time.Time{})
		d.set(time.Now().Add(time.Hour))
	}); allocs != 0 || d.tm.t != tm {
		t.Errorf("deadlines set while a call waits: %.1f allocations, timer remade %v; want none, false", allocs, d.tm.t != tm)
	}
	d.set(time.Now().Add(-time.Second))
	select {
	case <-w:
	default:
		t.Fatal("a past deadline set while a call waits: its channel not closed")
	}
	d.done()

	// Overtaken fires: each round arms a deadline due at once, then moves
	// it an hour on before its fire can take the lock; no round may pass.
	var o deadline
	o.wait() // a call waits while the sets go on
	for range 200 {
		o.set(time.Now().Add(time.Microsecond))
		o.set(time.Now().Add(time.Hour))
	}
	o.done()
	// The channel now: a round's microsecond may pass before its second
	// set, which closes the first wait's channel (the deadline passed), and
	// the set an hour on then starts a new one.
	w = o.wait()
	time.Sleep(20 * time.Millisecond) // every overtaken fire has run by now, or runs later to the same effect
	// A fire that lost the race to a set: the timer's function runs after
	// the set moved the deadline on; the call still waits, so it re-arms.
	o.fire()
	if o.passed() || o.tm.armed.IsZero() {
		t.Fatalf("a fire for a deadline since moved an hour on: passed %v, re-armed %v; want false, true", o.passed(), !o.tm.armed.IsZero())
	}
	select {
	case <-w:
		t.Fatal("a fire for a deadline since moved an hour on closed wait's channel")
	default:
	}
	var c deadline
	c.wait()
	c.set(time.Now().Add(time.Hour))
	c.set(time.Time{})
	c.fire()
	if c.passed() {
		t.Fatal("a fire for a deadline since cleared passed it")
	}
	// The same, the cleared deadline's time reached: its fire was due
	// (held here, as the lock would hold it) when the set cleared it.
	c.set(time.Now().Add(time.Millisecond))
	c.tm.t.Stop()
	time.Sleep(2 * time.Millisecond)
	c.set(time.Time{})
	c.fire()
	if c.passed() {
		t.Fatal("a fire held back while its deadline was cleared passed it")
	}
	// A fire for a deadline moved on after its call stopped waiting
	// leaves the timer unarmed; the next wait arms it again.
	c.set(time.Now().Add(time.Hour))
	c.done()
	c.fire()
	if c.passed() || !c.tm.armed.IsZero() {
		t.Fatalf("a fire with nobody waiting: passed %v, armed %v; want false, false", c.passed(), !c.tm.armed.IsZero())
	}
	o.set(time.Now().Add(5 * time.Millisecond)) // re-armed, the same timer
	<-w                                         // closed when the time comes; the test's timeout if never
	if !o.passed() {
		t.Fatal("the re-armed deadline came: not passed")
	}
	o.done()
	var e deadline
	e.set(time.Now().Add(5 * time.Millisecond))
	<-e.wait() // the wait arms the timer for a deadline set before it; the test's timeout if never
	e.done()
	if !e.passed() {
		t.Fatal("a deadline set before the wait came: not passed")
	}
}

// TestRecycleBuffers: a closed Conn's buffers serve the next Conns
// (Conn.recycle, Stack.spares): rx's storage at Close, tx's only once the
// bytes written in it are acknowledged, not while the endpoint may still
// send them; the next accepted Conn takes both, and moves its bytes through
// them intact.
func TestRecycleBuffers(t *testing.T) {
	p := newManualPair(t)
	ln, err := p.b.Listen("tcp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	open := func() (client, server *Conn) {
		t.Helper()
		client, err := p.a.StartDial("tcp", 0, "198.18.0.2:7")
		if err != nil {
			t.Fatal(err)
		}
		p.shuttle()
		server, ok := ln.(*Listener).TryAccept()
		if !ok {
			t.Fatal("no connection to accept")
		}
		return client, server
	}
	exchange := func(client, server *Conn, req, resp string) {
		t.Helper()
		buf := make([]byte, 100)
		p.send(client, []byte(req))
		if n, err := server.TryRead(buf); string(buf[:n]) != req || err != nil {
			t.Fatalf("server read %q, %v; want %q", buf[:n], err, req)
		}
		p.send(server, []byte(resp))
		if n, err := client.TryRead(buf); string(buf[:n]) != resp || err != nil {
			t.Fatalf("client read %q, %v; want %q", buf[:n], err, resp)
		}
	}
	s := p.b.Stack
	client, server := open()
	exchange(client, server, "request", "response")
	if n, err := server.TryWrite([]byte("the last words")); n != 14 || err != nil {
		t.Fatalf("TryWrite: %d, %v", n, err)
	}
	server.Close() // the last words not yet acknowledged: the peer has not had them
	if len(s.spares) != 1 {
		t.Fatalf("after Close with bytes unacknowledged: %d spares, want 1 (rx's alone)", len(s.spares))
	}
	p.shuttle()
	if st := server.ep.State(); st != tcp.StateFinWait2 || len(s.spares) != 2 {
		t.Fatalf("after the peer's ACK: %v, %d spares; want FIN-WAIT-2, 2 (tx's too)", st, len(s.spares))
	}
	buf := make([]byte, 100)
	if n, err := client.TryRead(buf); string(buf[:n]) != "the last words" || err != nil {
		t.Fatalf("client read %q, %v", buf[:n], err)
	}
	client.Close()
	p.shuttle()
	if server.ep != nil || s.tws.Len() != 1 || len(s.spares) != 2 || s.epSpares.Len() != 1 {
		t.Fatalf("after the peer's FIN: endpoint %v, %d TIME-WAIT records, %d spares, %d spare endpoints; want none (TIME-WAIT went to a record, the endpoint to the spares), 1, 2, 1",
			server.ep, s.tws.Len(), len(s.spares), s.epSpares.Len())
	}
	client, server = open()
	if len(s.spares) != 0 || s.epSpares.Len() != 0 {
		t.Fatalf("a new Conn left %d spares, %d spare endpoints; want 0 0 (it takes them)", len(s.spares), s.epSpares.Len())
	}
	exchange(client, server, "second request", "second response")
	exchange(client, server, strings.Repeat("q", 90), strings.Repeat("r", 90))
}

// TestConnSizeClass: a Conn, made on the loop for every connection, stays in
// the 512-byte size class (504 bytes): a field more moves every connection,
// idle ones included, to the 576-byte class.
func TestConnSizeClass(t *testing.T) {
	if got := unsafe.Sizeof(Conn{}); got > 512 {
		t.Fatalf("Conn is %d bytes, want at most 512 (its size class)", got)
	}
}

// TestAcceptHandOverAtBatchEnd: connections accepted during a batch of input
// are handed to Accept at its end (Stack.handOver), and the room the accept
// queue has for them counts those the batch holds already: with room for
// two, three handshakes completed in one batch give two connections to
// accept, and the third is refused as with a full queue (not accepted and
// then reset at the batch's end), and no packet with RST leaves b.
func TestAcceptHandOverAtBatchEnd(t *testing.T) {
	p := newManualPair(t)
	p.b.cfg.Backlog = 2 // the accept queue's room (newListener)
	ln, err := p.b.Listen("tcp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := p.a.StartDial("tcp", 0, "198.18.0.2:7"); err != nil {
			t.Fatal(err)
		}
	}
	batch := func(from, to *Manual, n int) {
		t.Helper()
		var pkts [][]byte
		for range n {
			pkts = append(pkts, p.take(from))
		}
		if err := to.Wake(to.m.Clock().Now(), pkts...); err != nil {
			t.Fatal(err)
		}
	}
	batch(p.a, p.b, 3) // the SYNs
	batch(p.b, p.a, 3) // the SYN-ACKs
	sentBefore := p.bDev.Stats().Sent
	batch(p.a, p.b, 3) // the ACKs that complete the three handshakes, in one batch
	accepted := 0
	for {
		if _, ok := ln.(*Listener).TryAccept(); !ok {
			break
		}
		accepted++
	}
	if accepted != 2 {
		t.Errorf("accepted %d connections, want 2 (the accept queue's room)", accepted)
	}
	for range p.bDev.Stats().Sent - sentBefore {
		if pkt := p.take(p.b); pkt[20+13]&0x04 != 0 {
			t.Errorf("b reset a connection after the batch: %x", pkt[20:40])
		}
	}
	if d := p.b.Stats().Listen.DropsAcceptQueue; d != 1 {
		t.Errorf("ACKs dropped for a full accept queue: %d, want 1 (the third handshake's)", d)
	}

	// Mid-batch: a handshake's ACK handled, the batch not over yet: the
	// connection waits for the batch's end, with the data that came
	// behind its ACK in the same batch.
	q := newManualPair(t)
	qln, err := q.b.Listen("tcp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	client, err := q.a.StartDial("tcp", 0, "198.18.0.2:7")
	if err != nil {
		t.Fatal(err)
	}
	if err := q.b.Inject(q.take(q.a)); err != nil { // the SYN
		t.Fatal(err)
	}
	if err := q.a.Inject(q.take(q.b)); err != nil { // the SYN-ACK
		t.Fatal(err)
	}
	ack := q.take(q.a)
	if _, err := client.Write([]byte("GET / HTTP/1.0\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	req := q.take(q.a)
	var midBatch bool
	if err := q.b.m.Wake(q.b.m.Clock().Now(), func() {
		q.b.handlePacketNow(ack)
		_, midBatch = qln.(*Listener).TryAccept()
		q.b.handlePacketNow(req)
		q.b.endBatch()
	}); err != nil {
		t.Fatal(err)
	}
	if midBatch {
		t.Error("a connection went to Accept in the middle of its batch")
	}
	server, ok := qln.(*Listener).TryAccept()
	if !ok {
		t.Fatal("no connection to accept after the batch")
	}
	buf := make([]byte, 100)
	if n, err := server.TryRead(buf); n != 18 || err != nil {
		t.Errorf("the first read after Accept: %d bytes, %v; want the request's 18", n, err)
	}
}

// TestConnWaitChannelsLazy: a Conn has no readable or writable channel
// until a Read or Write must wait (waitChan); TryRead and TryWrite, which
// never wait, make none; a Read that waits makes readable only, and data
// wakes it.
func TestConnWaitChannelsLazy(t *testing.T) {
	p := newManualPair(t)
	client, server := p.connect()
	chans := func(c *Conn) (r, w bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.readable != nil, c.writable != nil
	}
	if _, err := server.TryRead(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	p.send(client, []byte("ping"))
	for _, c := range []*Conn{client, server} {
		if r, w := chans(c); r || w {
			t.Fatalf("after TryRead and TryWrite: readable %v, writable %v; want neither made", r, w)
		}
	}
	if n, err := server.Read(make([]byte, 10)); n != 4 || err != nil {
		t.Fatalf("Read: %d, %v", n, err)
	}
	if r, _ := chans(server); r {
		t.Fatal("a Read that found data made readable")
	}
	got := make(chan error, 1)
	go func() {
		_, err := server.Read(make([]byte, 10))
		got <- err
	}()
	for r, _ := chans(server); !r; r, _ = chans(server) {
		runtime.Gosched() // until the Read waits
	}
	p.send(client, []byte("pong"))
	if err := <-got; err != nil {
		t.Fatalf("Read woken by data: %v", err)
	}
	if r, w := chans(server); !r || w {
		t.Fatalf("after a Read waited: readable %v, writable %v; want readable only", r, w)
	}
}

// TestCloseWakesWaitingCalls: Close returns every call that waits on the
// Conn, two Reads and a Write (a full send buffer) at once, with
// net.ErrClosed; and a Close racing with a Read that is about to wait
// (closing set before or after the Read makes its channel) never leaves
// the Read waiting.
func TestCloseWakesWaitingCalls(t *testing.T) {
	p := newManualPair(t)
	ln, err := p.b.Listen("tcp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	open := func() *Conn {
		t.Helper()
		if _, err := p.a.StartDial("tcp", 0, "198.18.0.2:7"); err != nil {
			t.Fatal(err)
		}
		p.shuttle()
		c, ok := ln.(*Listener).TryAccept()
		if !ok {
			t.Fatal("no connection to accept")
		}
		return c
	}
	returned := func(what string, errs chan error, n int) {
		t.Helper()
		for range n {
			select {
			case err := <-errs:
				if !errors.Is(err, net.ErrClosed) {
					t.Fatalf("%s: %v, want net.ErrClosed", what, err)
				}
			case <-time.After(10 * time.Second): // a hang, not a measure
				t.Fatalf("%s: still waiting after Close", what)
			}
		}
	}
	c := open()
	errs := make(chan error, 3)
	for range 2 {
		go func() { _, err := c.Read(make([]byte, 10)); errs <- err }()
	}
	go func() { _, err := c.Write(make([]byte, 4*c.tx.limit)); errs <- err }()
	for {
		c.mu.Lock()
		r, w := c.readable, c.writable
		c.mu.Unlock()
		if r != nil && w != nil {
			break
		}
		runtime.Gosched()
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	returned("two Reads and a Write", errs, 3)
	// A Read and a Write that found the Conn open (usable) before Close and
	// look at their buffers after it: the channel they would wait on holds
	// a wakeup already (waitChan), although Close found none to wake.
	c = open()
	if n, err := c.TryWrite(make([]byte, c.tx.limit)); n != c.tx.limit || err != nil {
		t.Fatalf("TryWrite: %d, %v", n, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	var rch, wch chan struct{}
	if _, wait, _ := c.readSome(make([]byte, 10), &rch); !wait || rch == nil || len(rch) != 1 {
		t.Fatalf("readSome after Close: wait %v, channel %v holding %d wakeups; want a wakeup to find", wait, rch, len(rch))
	}
	if n, _ := c.writeSome(make([]byte, 10), &wch); n != 0 || wch == nil || len(wch) != 1 {
		t.Fatalf("writeSome after Close: %d bytes, channel %v holding %d wakeups; want a wakeup to find", n, wch, len(wch))
	}
	p.shuttle()
	for range 200 {
		c := open()
		go func() { _, err := c.Read(make([]byte, 10)); errs <- err }()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		returned("a Read racing with Close", errs, 1)
		p.shuttle()
	}
}
