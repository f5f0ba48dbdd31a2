package stack

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/timer"
	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// manualPair is two manual stacks whose packets the test carries across
// (shuttle), on clocks that stay at 0: every step is deterministic.
type manualPair struct {
	t                  testing.TB
	a, b               *Manual
	aDev, aTap         *tuntest.Endpoint // a's device, and where its packets come out
	bDev, bTap         *tuntest.Endpoint
	aCarried, bCarried uint64
}

func newManualPair(t *testing.T) *manualPair {
	t.Helper()
	return newManualPairWith(t, tcp.Config{})
}

// newManualPairWith is newManualPair with both stacks' TCP configured by tc.
func newManualPairWith(t testing.TB, tc tcp.Config) *manualPair {
	t.Helper()
	return newManualPairOn(t, tc, func(d *tuntest.Endpoint) tun.Device { return d })
}

// newManualPairOn is newManualPairWith with a's device the one devA makes
// of its pipe.
func newManualPairOn(t testing.TB, tc tcp.Config, devA func(*tuntest.Endpoint) tun.Device) *manualPair {
	t.Helper()
	return newManualPairConfig(t, tc, devA, nil)
}

// newManualPairConfig is newManualPairOn with a's Config changed by modA,
// if not nil.
func newManualPairConfig(t testing.TB, tc tcp.Config, devA func(*tuntest.Endpoint) tun.Device, modA func(*Config)) *manualPair {
	t.Helper()
	p := &manualPair{t: t}
	p.aDev, p.aTap = tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500, QueueLen: 4096})
	p.bDev, p.bTap = tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500, QueueLen: 4096})
	cfgA := Config{Device: devA(p.aDev), Addr: addrA, Clock: timer.NewManualClock(0), TCP: tc}
	if modA != nil {
		modA(&cfgA)
	}
	var err error
	p.a, err = NewManual(cfgA)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.a.Close() })
	p.b, err = NewManual(Config{Device: p.bDev, Addr: addrB, Clock: timer.NewManualClock(0), TCP: tc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.b.Close() })
	return p
}

// shuttle carries the packets each stack has written to the other until both
// are quiet (bounded).
func (p *manualPair) shuttle() {
	p.t.Helper()
	buf := make([]byte, 2048)
	for range 10000 {
		moved := false
		for _, d := range []struct {
			dev, tap *tuntest.Endpoint
			carried  *uint64
			to       *Manual
		}{{p.aDev, p.aTap, &p.aCarried, p.b}, {p.bDev, p.bTap, &p.bCarried, p.a}} {
			for *d.carried < d.dev.Stats().Sent {
				n, err := d.tap.ReadPacket(buf)
				if err != nil {
					p.t.Fatalf("shuttle: %v", err)
				}
				*d.carried++
				if err := d.to.Inject(buf[:n]); err != nil {
					p.t.Fatalf("inject: %v", err)
				}
				moved = true
			}
		}
		if !moved {
			return
		}
	}
	p.t.Fatal("shuttle: the stacks never went quiet")
}

// take reads the next packet that from's stack has written (a copy), without
// carrying it across.
func (p *manualPair) take(from *Manual) []byte {
	p.t.Helper()
	dev, tap, carried := p.aDev, p.aTap, &p.aCarried
	if from == p.b {
		dev, tap, carried = p.bDev, p.bTap, &p.bCarried
	}
	if *carried >= dev.Stats().Sent {
		p.t.Fatal("take: the stack has written nothing more")
	}
	buf := make([]byte, 2048)
	n, err := tap.ReadPacket(buf)
	if err != nil {
		p.t.Fatalf("take: %v", err)
	}
	*carried++
	return buf[:n]
}

// connect returns a's client connection to b and b's accepted one.
func (p *manualPair) connect() (client, server *Conn) {
	p.t.Helper()
	ln, err := p.b.Listen("tcp", ":7")
	if err != nil {
		p.t.Fatal(err)
	}
	return p.open(ln.(*Listener))
}

// open returns a new client connection of a's to l, b's listener on port
// 7, and l's accepted one.
func (p *manualPair) open(l *Listener) (client, server *Conn) {
	p.t.Helper()
	client, err := p.a.StartDial("tcp", 0, "198.18.0.2:7")
	if err != nil {
		p.t.Fatal(err)
	}
	p.shuttle()
	server, ok := l.TryAccept()
	if !ok {
		p.t.Fatal("no connection to accept after the handshake")
	}
	return client, server
}

// send writes data on from and carries it to the other side.
func (p *manualPair) send(from *Conn, data []byte) {
	p.t.Helper()
	if n, err := from.TryWrite(data); n != len(data) || err != nil {
		p.t.Fatalf("TryWrite: %d, %v", n, err)
	}
	p.shuttle()
}

// readAll reads what c has received, through buf, and returns it appended
// to got.
func (p *manualPair) readAll(c *Conn, buf, got []byte) []byte {
	p.t.Helper()
	for {
		n, err := c.TryRead(buf)
		if err != nil {
			p.t.Fatal(err)
		}
		if n == 0 {
			return got
		}
		got = append(got, buf[:n]...)
	}
}

// windows returns the window fields of the packets a has written since the
// last take or shuttle, taking them.
func (p *manualPair) windows() []int {
	p.t.Helper()
	var w []int
	for p.aCarried < p.aDev.Stats().Sent {
		_, seg, ok := parseTCP(p.take(p.a))
		if !ok {
			p.t.Fatal("the client sent something other than TCP")
		}
		w = append(w, int(seg.Window))
	}
	return w
}

// TestConnReadBuffer: the loop moves received data into the Conn as it
// arrives, and the window the stack advertises counts it until the
// application has read it: never space that is not there.
func TestConnReadBuffer(t *testing.T) {
	const buffer = 256 << 10 // window shift 3: 15000 bytes unread are exactly 1875 units
	p := newManualPairWith(t, tcp.Config{RecvBuffer: buffer})
	c, s := p.connect()
	data := make([]byte, 15000)
	rand.Read(data)
	p.send(s, data[:10000])
	if r, err := c.Readiness(); err != nil || r.Readable != 10000 {
		t.Fatalf("Readiness: %+v, %v: want 10000 readable", r, err)
	}
	i := c.Info()
	if i.RcvBuffered != 10000 || i.BytesRead != 0 {
		t.Fatalf("before any Read: endpoint counts %d unread and %d read, want 10000 and 0", i.RcvBuffered, i.BytesRead)
	}
	// 5000 more, carried by hand: the ACK they draw (delayed: the clock moves
	// past DelayedACK) offers the buffer less all 15000 bytes unread, though
	// the endpoint's own buffer is empty.
	if n, err := s.TryWrite(data[10000:]); n != 5000 || err != nil {
		t.Fatalf("TryWrite: %d, %v", n, err)
	}
	for p.bCarried < p.bDev.Stats().Sent {
		if err := p.a.Inject(p.take(p.b)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.a.AdvanceTo(time.Second); err != nil {
		t.Fatal(err)
	}
	const ws = 3
	want := (buffer - 15000) >> ws
	w := p.windows()
	if len(w) == 0 || w[len(w)-1] != want {
		t.Fatalf("windows after 15000 bytes unread: %v, want the last %d", w, want)
	}
	// A Read of less than the update step opens the window by too little for
	// an update (RFC 9293 3.8.6.2.2).
	got := make([]byte, 0, len(data))
	buf := make([]byte, 333)
	n, err := c.TryRead(buf)
	if n != len(buf) || err != nil {
		t.Fatalf("first Read: %d, %v", n, err)
	}
	got = append(got, buf[:n]...)
	if i := c.Info(); i.RcvBuffered != 15000-333 || i.BytesRead != 333 {
		t.Fatalf("after one Read of 333: %d unread, %d read, want %d and 333", i.RcvBuffered, i.BytesRead, 15000-333)
	}
	if w := p.windows(); len(w) != 0 {
		t.Fatalf("a Read of 333 bytes sent window updates %v", w)
	}
	for len(got) < len(data) {
		n, err := c.TryRead(buf)
		if n == 0 || err != nil {
			t.Fatalf("Read at %d: %d, %v", len(got), n, err)
		}
		got = append(got, buf[:n]...)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("data read through the Conn's buffer differs from what was sent")
	}
	// Releasing every byte sends no update: the window the peer knows never
	// fell to half the buffer (tcp_cleanup_rbuf's rule, tcp.TestWindow), and
	// the delayed ACK went long ago.
	if w := p.windows(); len(w) != 0 {
		t.Fatalf("window updates after reading everything: %v, want none (the peer's window, %d, never fell to half of %d)", w, want<<ws, buffer)
	}
	if i := c.Info(); i.RcvBuffered != 0 || i.BytesRead != uint64(len(data)) {
		t.Fatalf("after reading everything: %d unread, %d read, want 0 and %d", i.RcvBuffered, i.BytesRead, len(data))
	}
	if n, err := c.TryRead(buf); n != 0 || err != nil {
		t.Fatalf("Read with nothing there: %d, %v, want 0, nil", n, err)
	}
	// EOF comes after the data.
	p.send(s, data[:2000])
	if err := s.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	p.shuttle()
	got = got[:0]
	for {
		n, err := c.TryRead(buf[:100])
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil || n == 0 {
			t.Fatalf("Read before EOF: %d, %v", n, err)
		}
	}
	if !bytes.Equal(got, data[:2000]) {
		t.Fatalf("before EOF: got %d bytes, want the 2000 sent", len(got))
	}
}

// Data in the Conn's buffer that was never returned to the application is
// unread: Close resets the connection, as it does with data in the endpoint
// (RFC 2525 2.17), instead of a FIN that would tell the peer all was read.
func TestCloseWithUnreadResets(t *testing.T) {
	p := newManualPair(t)
	c, s := p.connect()
	p.send(s, make([]byte, 5000))
	if n, err := c.TryRead(make([]byte, 100)); n != 100 || err != nil {
		t.Fatalf("Read: %d, %v", n, err)
	}
	rstsBefore := p.a.Stats().TCP.ResetsSent
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	p.shuttle()
	if got := p.a.Stats().TCP.ResetsSent; got != rstsBefore+1 {
		t.Fatalf("RSTs sent by Close: %d, want 1", got-rstsBefore)
	}
	if _, err := s.TryRead(make([]byte, 10)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the peer's Read after the Close: %v, want ECONNRESET", err)
	}
}

// TestConnSendBufferExact: what Write takes and the endpoint holds never
// exceed the send buffer (SO_SNDBUF), and Write takes again exactly what
// the peer's ACKs free.
func TestConnSendBufferExact(t *testing.T) {
	p := newManualPair(t)
	c, s := p.connect()
	big := make([]byte, 3*tcp.DefaultSendBuffer)
	if n, err := c.TryWrite(big); n != tcp.DefaultSendBuffer || err != nil {
		t.Fatalf("first TryWrite: %d, %v, want the whole buffer, %d", n, err, tcp.DefaultSendBuffer)
	}
	if n, err := c.TryWrite(big[:1]); n != 0 || err != nil {
		t.Fatalf("TryWrite into a full buffer: %d, %v", n, err)
	}
	if r, _ := c.Readiness(); r.Writable != 0 {
		t.Fatalf("Readiness of a full buffer: %d writable", r.Writable)
	}
	// As the peer's ACKs free the buffer, Write takes exactly what they freed.
	acked := c.Info().BytesAcked
	for range 4 {
		p.shuttle()
		freed := int(c.Info().BytesAcked - acked)
		acked += uint64(freed)
		if freed == 0 {
			t.Fatal("no more data went through")
		}
		if n, _ := c.TryWrite(big); n != freed {
			t.Fatalf("TryWrite took %d, want the %d bytes the ACKs freed", n, freed)
		}
		if i := c.Info(); i.SndBuffered != tcp.DefaultSendBuffer {
			t.Fatalf("the endpoint holds %d, want a full buffer", i.SndBuffered)
		}
		if _, err := s.TryRead(make([]byte, 100000)); err != nil {
			t.Fatal(err)
		}
	}
}

// blockLoop stops s's loop until the returned function is called.
func blockLoop(t *testing.T, s *Stack) (unblock func()) {
	t.Helper()
	in, out := make(chan struct{}), make(chan struct{})
	if err := s.run.Post(func() { close(in); <-out }); err != nil {
		t.Fatal(err)
	}
	<-in
	var once sync.Once
	unblock = func() { once.Do(func() { close(out) }) }
	t.Cleanup(unblock)
	return unblock
}

// TestWriteWithoutLoopTrip: with room in the send buffer, Write returns
// without waiting for the loop (here stopped), and posts one flush for any
// number of Writes until the loop takes them; with the buffer full, it
// blocks, exactly at the buffer's size, until its deadline.
func TestWriteWithoutLoopTrip(t *testing.T) {
	a, b := pair(t, Config{})
	client, server := dialPair(t, a, b)
	c := client.(*Conn)
	data := make([]byte, tcp.DefaultSendBuffer+5000)
	rand.Read(data)
	unblock := blockLoop(t, a)
	before := a.connPosts.flushes.Load()
	const writes, size = 100, 1000
	for i := range writes {
		if n, err := c.Write(data[i*size : (i+1)*size]); n != size || err != nil {
			t.Fatalf("Write %d with the loop stopped: %d, %v", i, n, err)
		}
	}
	if got := a.connPosts.flushes.Load() - before; got != 1 {
		t.Fatalf("%d Writes posted %d flushes, want 1", writes, got)
	}
	// The rest does not fit: Write takes what does and waits for room,
	// until its deadline.
	if err := c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	n, err := c.Write(data[writes*size:])
	if want := tcp.DefaultSendBuffer - writes*size; n != want || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write into the full buffer: %d, %v, want %d and a deadline error", n, err, want)
	}
	if err := c.SetWriteDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	unblock()
	rest := writes*size + n
	done := make(chan error, 1)
	go func() {
		_, err := c.Write(data[rest:])
		if err == nil {
			err = c.CloseWrite()
		}
		done <- err
	}()
	readsAll(t, server, data, done)
}

// TestReadPostsPerUpdateStep: Reads tell the loop what they took only once
// it adds up to a step of the window worth an update, not per Read.
func TestReadPostsPerUpdateStep(t *testing.T) {
	a, b := pair(t, Config{})
	client, server := dialPair(t, a, b)
	const size = 64 << 10
	go func() {
		server.Write(make([]byte, size))
		server.(*Conn).CloseWrite()
	}()
	before := a.connPosts.releases.Load()
	buf := make([]byte, 100)
	total, reads := 0, 0
	for {
		n, err := client.Read(buf)
		total += n
		reads++
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if total != size {
		t.Fatalf("read %d bytes, want %d", total, size)
	}
	step := client.(*Conn).updateStep()
	posts := a.connPosts.releases.Load() - before
	// None at all is right too: the loop releases what was read itself at
	// the end of a batch that brought data (Conn.pace), and lazily while
	// the window stays wide (tcp.Endpoint.ReleaseCanWait), and on a busy
	// machine the reader may take every byte in such stretches.
	if max := uint64(size/step + 1); posts > max {
		t.Fatalf("%d Reads of 100 bytes posted %d releases, want at most %d (one per %d bytes)", reads, posts, max, step)
	}
	if i := client.(*Conn).Info(); i.BytesRead < uint64(size-step) {
		t.Fatalf("the endpoint counts %d bytes read, want at least %d", i.BytesRead, size-step)
	}
}

// TestConnConcurrentClose runs Read, Write and Close on one Conn at once
// (for -race): each call returns, with data or an error, and the peer sees
// the connection end.
func TestConnConcurrentClose(t *testing.T) {
	for range 5 {
		a, b := pair(t, Config{})
		client, server := dialPair(t, a, b)
		go io.Copy(server, server) // echo until the client goes
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(2)
			go func() {
				defer wg.Done()
				p := make([]byte, 3000)
				for {
					if _, err := client.Write(p); err != nil {
						return
					}
				}
			}()
			go func() {
				defer wg.Done()
				p := make([]byte, 1000)
				for {
					if _, err := client.Read(p); err != nil {
						return
					}
				}
			}()
		}
		time.Sleep(20 * time.Millisecond)
		client.Close()
		wg.Wait()
		server.Close()
	}
}

// updateStep is c's endpoint's UpdateStep.
func (c *Conn) updateStep() int {
	var n int
	c.s.do(func() { n = c.ep.UpdateStep() })
	return n
}

// TestResetAfterBufferedData: data that came before the peer's RST is read
// first, then the reset (ECONNRESET), as from the endpoint itself.
func TestResetAfterBufferedData(t *testing.T) {
	p := newManualPair(t)
	c, s := p.connect()
	data := make([]byte, 3000)
	rand.Read(data)
	if n, err := s.TryWrite(data); n != len(data) || err != nil {
		t.Fatalf("TryWrite: %d, %v", n, err)
	}
	if err := s.Abort(); err != nil {
		t.Fatal(err)
	}
	// The data and the RST reach the client in one batch.
	var pkts [][]byte
	for p.bCarried < p.bDev.Stats().Sent {
		pkts = append(pkts, p.take(p.b))
	}
	if err := p.a.Wake(0, pkts...); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 0, len(data))
	buf := make([]byte, 1000)
	for {
		n, err := c.TryRead(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			if !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("Read after %d bytes: %v, want ECONNRESET", len(got), err)
			}
			break
		}
		if n == 0 {
			t.Fatalf("Read after %d bytes: nothing, and no error", len(got))
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes before the reset, want the %d sent", len(got), len(data))
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Write after the reset: %v, want ECONNRESET", err)
	}
}

// TestConnTakesDataAsItArrives: in-order data goes from the packet straight
// into the Conn's buffer (connSink, the endpoint's tcp.Sink) while the batch
// is handled, not into the endpoint's buffer to be moved at the batch's end
// (fill): one copy of every byte less. The reader is still woken once, at
// the batch's end.
func TestConnTakesDataAsItArrives(t *testing.T) {
	p := newManualPair(t)
	c, s := p.connect()
	data := make([]byte, 4000)
	rand.Read(data)
	if n, err := s.TryWrite(data); n != len(data) || err != nil {
		t.Fatalf("TryWrite: %d, %v", n, err)
	}
	var pkts [][]byte
	for p.bCarried < p.bDev.Stats().Sent {
		pkts = append(pkts, p.take(p.b))
	}
	if len(pkts) < 2 {
		t.Fatalf("%d packets carry 4000 bytes, want several", len(pkts))
	}
	c.mu.Lock()
	c.waitChan(&c.readable) // as a Read that waits makes it
	c.mu.Unlock()
	select {
	case <-c.readable:
	default:
	}
	var inEP, inConn, woken int
	err := p.a.m.Wake(0, func() {
		for _, pkt := range pkts {
			p.a.handlePacketNow(pkt)
		}
		c.mu.Lock()
		inEP, inConn, woken = c.ep.Readable(), c.rx.ring.Len(), len(c.readable)
		c.mu.Unlock()
		p.a.endBatch()
	})
	if err != nil {
		t.Fatal(err)
	}
	if inEP != 0 || inConn != len(data) || woken != 0 {
		t.Fatalf("before the batch's end: the endpoint's buffer holds %d, the Conn's %d, reader woken %d times; want 0, %d, 0",
			inEP, inConn, woken, len(data))
	}
	if len(c.readable) != 1 {
		t.Fatal("the reader was not woken at the batch's end")
	}
	got := make([]byte, 2*len(data))
	if n, err := c.TryRead(got); n != len(data) || err != nil || !bytes.Equal(got[:n], data) {
		t.Fatalf("TryRead: %d, %v, want the %d bytes sent", n, err, len(data))
	}
	if i := c.Info(); i.RcvBuffered != 0 || i.BytesRead != uint64(len(data)) {
		t.Fatalf("after the read: %d unread, %d read, want 0 and %d", i.RcvBuffered, i.BytesRead, len(data))
	}
}

// TestCloseRidesPostedFlush: Close does not wait for the loop (here
// stopped); a graceful Close while Write's flush is still posted makes no
// post of its own but rides on the flush, which sends the FIN after the
// data in the same turn; a Close with no flush posted posts its own. The
// peer reads the data, then EOF, either way.
func TestCloseRidesPostedFlush(t *testing.T) {
	a, b := pair(t, Config{})
	closeStopped := func(c net.Conn) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- c.Close() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Close: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Close waited for the stopped loop")
		}
	}
	readAll := func(server net.Conn, want string) {
		t.Helper()
		server.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.ReadAll(server)
		if err != nil || string(got) != want {
			t.Fatalf("the peer read %q, %v; want %q and EOF", got, err, want)
		}
	}

	client, server := dialPair(t, a, b)
	unblock := blockLoop(t, a)
	flushes, closes := a.connPosts.flushes.Load(), a.connPosts.closes.Load()
	if _, err := client.Write([]byte("response")); err != nil {
		t.Fatal(err)
	}
	closeStopped(client)
	if f, c := a.connPosts.flushes.Load()-flushes, a.connPosts.closes.Load()-closes; f != 1 || c != 0 {
		t.Fatalf("a Write and a Close with the loop stopped posted %d flushes and %d closes, want 1 and 0", f, c)
	}
	unblock()
	readAll(server, "response")

	a, b = pair(t, Config{})
	client, server = dialPair(t, a, b)
	unblock = blockLoop(t, a)
	closes = a.connPosts.closes.Load()
	closeStopped(client)
	if c := a.connPosts.closes.Load() - closes; c != 1 {
		t.Fatalf("a Close with no flush posted posted %d closes, want 1", c)
	}
	unblock()
	readAll(server, "")
}

// TestConnSendBufferGrows: once the endpoint's send buffer grows (a bulk
// sender, tcp's autoGrowSendBuffer), Write takes as much more: the Conn's
// limit follows the endpoint's (syncTx). Before, it takes no more than the
// default.
func TestConnSendBufferGrows(t *testing.T) {
	p := newManualPair(t)
	c, s := p.connect()
	big := make([]byte, 4*tcp.DefaultSendBuffer)
	rbuf := make([]byte, 1<<20)
	var sink []byte // what s read, dropped each round
	most := 0       // the most one TryWrite took
	for round := 0; round < 40 && most < 2*tcp.DefaultSendBuffer; round++ {
		n, err := c.TryWrite(big)
		if err != nil {
			t.Fatal(err)
		}
		if n > tcp.DefaultSendBuffer && c.Info().BytesAcked < 4*tcp.DefaultSendBuffer {
			t.Fatalf("round %d: TryWrite took %d with %d bytes acknowledged: more than the default buffer before it may grow", round, n, c.Info().BytesAcked)
		}
		most = max(most, n)
		p.shuttle()
		sink = p.readAll(s, rbuf, sink[:0])
		p.shuttle() // the window updates
	}
	if most != 2*tcp.DefaultSendBuffer {
		t.Fatalf("the most one TryWrite took is %d (%d bytes acknowledged), want a grown buffer's %d", most, c.Info().BytesAcked, 2*tcp.DefaultSendBuffer)
	}
}

// congPipe is a pipe that reports its queue full while full is set
// (CongestedDevice).
type congPipe struct {
	*tuntest.Endpoint
	full bool
}

func (d *congPipe) Congested() bool { return d.full }

// TestCongestedDevice: while the device says its queue is full
// (CongestedDevice), TCP holds new data (tcp.LocalCongestion); once it no
// longer does, the next write sends what was held.
func TestCongestedDevice(t *testing.T) {
	dev := &congPipe{}
	p := newManualPairOn(t, tcp.Config{}, func(d *tuntest.Endpoint) tun.Device { dev.Endpoint = d; return dev })
	c, _ := p.connect()
	dev.full = true
	sent, acked := p.aDev.Stats().Sent, c.Info().BytesAcked
	p.send(c, make([]byte, 1000))
	if got := p.aDev.Stats().Sent; got != sent {
		t.Fatalf("%d packets sent to a congested device", got-sent)
	}
	dev.full = false
	p.send(c, make([]byte, 1))
	if got := c.Info().BytesAcked - acked; got != 1001 {
		t.Fatalf("%d bytes acknowledged once the device took packets again, want 1001", got)
	}
}
