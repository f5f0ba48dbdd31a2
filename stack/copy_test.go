package stack

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/ring"
	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
	"github.com/tcpwheel/tcpwheel/tun"
)

// socketPair returns the two ends of a Unix stream socket pair, as
// *net.UnixConn: descriptors in Go's netpoller, syscall.Conns.
func socketPair(t *testing.T) (x, y *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ends [2]*net.UnixConn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		ends[i] = c.(*net.UnixConn)
		t.Cleanup(func() { c.Close() })
	}
	return ends[0], ends[1]
}

// rawOnly is a descriptor (a socket, a file) whose Read fails the test:
// ReadFrom must read it itself.
type rawOnly struct {
	syscall.Conn
	t *testing.T
}

func (r rawOnly) Read([]byte) (int, error) {
	r.t.Error("ReadFrom called the descriptor's Read, not read(2) into the send buffer")
	return 0, errors.New("rawOnly: Read")
}

// TestConnReadFromDescriptor: ReadFrom reads a descriptor straight into the
// send buffer, never more than the buffer's room (with the loop stopped it
// takes exactly the buffer and waits, until the write deadline, leaving
// the rest in the descriptor), and after that everything to the
// descriptor's EOF, in order.
func TestConnReadFromDescriptor(t *testing.T) {
	const sndbuf = 300000 // not a power of two: the storage's room ends past it
	a, b := pair(t, Config{TCP: tcp.Config{SendBuffer: sndbuf}})
	client, server := dialPair(t, a, b)
	c := client.(*Conn)
	src, feed := socketPair(t)
	data := make([]byte, 3*sndbuf+12345)
	rand.Read(data)
	const first = 1001 // written first: the reads' room ends off the storage's powers of two
	fed := make(chan error, 1)
	go func() {
		_, err := feed.Write(data[first:])
		if err == nil {
			err = feed.CloseWrite()
		}
		fed <- err
	}()
	unblock := blockLoop(t, a)
	if _, err := c.Write(data[:first]); err != nil {
		t.Fatal(err)
	}
	if err := c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	n, err := c.ReadFrom(rawOnly{src, t})
	if n != sndbuf-first || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ReadFrom with the loop stopped: %d, %v; want the send buffer's room, %d, and a deadline error", n, err, sndbuf-first)
	}
	if err := c.SetWriteDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	unblock()
	readsAll(t, server, data, closeAfter(c, len(data)-first-int(n), func() (int64, error) {
		m, err := c.ReadFrom(rawOnly{src, t})
		if err == nil {
			err = <-fed
		}
		return m, err
	}))
}

// closeAfter runs send on a goroutine of its own, checks that it moved
// want bytes, and then CloseWrites c, whatever send returned (so that the
// reader's readsAll ends); the channel it returns has the first error
// (readsAll's done).
func closeAfter(c *Conn, want int, send func() (int64, error)) <-chan error {
	done := make(chan error, 1)
	go func() {
		n, err := send()
		if err == nil && int(n) != want {
			err = fmt.Errorf("sent %d bytes, want %d", n, want)
		}
		if cerr := c.CloseWrite(); err == nil {
			err = cerr
		}
		done <- err
	}()
	return done
}

// TestConnReadFromReader: a reader that is not a descriptor goes through
// io.Copy's buffer, to its EOF; a reader's error comes back as it is, after
// the bytes before it, a descriptor's read error as a syscall error, and a
// closed Conn's write error as Write's.
func TestConnReadFromReader(t *testing.T) {
	a, b := pair(t, Config{})
	client, server := dialPair(t, a, b)
	c := client.(*Conn)
	data := make([]byte, 2*tcp.DefaultSendBuffer+777)
	rand.Read(data)
	boom := errors.New("the reader's error")
	done := make(chan error, 1)
	go func() {
		n, err := c.ReadFrom(io.LimitReader(bytes.NewReader(data), 1000))
		if n != 1000 || err != nil {
			t.Errorf("ReadFrom of a LimitReader: %d, %v; want 1000, nil", n, err)
		}
		n, err = c.ReadFrom(io.MultiReader(bytes.NewReader(data[1000:]), iotestErr{boom}))
		if int(n) != len(data)-1000 || err != boom {
			t.Errorf("ReadFrom of a reader that fails at the end: %d, %v; want %d and its error", n, err, len(data)-1000)
		}
		done <- c.CloseWrite()
	}()
	readsAll(t, server, data, done)
	// A descriptor's read error: a Unix socket whose peer closed with
	// bytes it had not read reads ECONNRESET.
	src, feed := socketPair(t)
	src.Write([]byte("never read"))
	feed.Close()
	if n, err := server.(*Conn).ReadFrom(src); n != 0 || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("ReadFrom of a reset descriptor: %d, %v; want 0 and ECONNRESET", n, err)
	}
	c.Close()
	src, feed = socketPair(t)
	feed.Write([]byte("after Close"))
	if n, err := c.ReadFrom(src); n != 0 || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("ReadFrom on a closed Conn: %d, %v; want 0 and net.ErrClosed", n, err)
	}
}

// iotestErr is a reader that fails.
type iotestErr struct{ err error }

func (r iotestErr) Read([]byte) (int, error) { return 0, r.err }

// TestConnReadFromCloseMeanwhile: a Close while ReadFrom waits for its
// descriptor ends it at the descriptor's next bytes, which are not sent,
// with net.ErrClosed.
func TestConnReadFromCloseMeanwhile(t *testing.T) {
	a, b := pair(t, Config{})
	client, _ := dialPair(t, a, b)
	c := client.(*Conn)
	src, feed := socketPair(t)
	type result struct {
		n   int64
		err error
	}
	res := make(chan result, 1)
	go func() {
		n, err := c.ReadFrom(src)
		res <- result{n, err}
	}()
	feed.Write([]byte("first"))
	for c.Info().BytesAcked < 5 {
		time.Sleep(time.Millisecond)
	}
	c.Close()
	feed.Write([]byte("second"))
	r := <-res
	if r.n != 5 || !errors.Is(r.err, net.ErrClosed) {
		t.Fatalf("ReadFrom across a Close: %d, %v; want 5 and net.ErrClosed", r.n, r.err)
	}
}

// writeLog records the sizes of the writes it takes, and their bytes.
type writeLog struct {
	sizes []int
	got   []byte
	fail  int // fail the write that would take the total past this (0: never)
}

func (w *writeLog) Write(p []byte) (int, error) {
	if w.fail > 0 && len(w.got)+len(p) > w.fail {
		k := w.fail - len(w.got)
		w.got = append(w.got, p[:k]...)
		return k, errors.New("writeLog: full")
	}
	w.sizes = append(w.sizes, len(p))
	w.got = append(w.got, p...)
	return len(p), nil
}

// TestConnWriteToLentFrames: WriteTo hands a lent frame's payload to the
// writer whole, as it lies in the frame (one write larger than its copy
// buffer), copies the ring's bytes between frames, writes everything in
// order to the FIN, gives every frame back to the pool once, and releases
// what it took as Read does.
func TestConnWriteToLentFrames(t *testing.T) {
	b := newLendBed(t, 1<<20, 0)
	big := tun.MaxFrame / 2
	b.queue(t, b.data(t, 300))   // copied
	b.queue(t, b.data(t, 40000)) // lent
	b.queue(t, b.data(t, 5000))  // copied
	b.queue(t, b.data(t, big))   // lent
	b.queue(t, b.data(t, 60000)) // lent
	b.queue(t, b.frame(t, &tcp.Segment{SrcPort: 5000, DstPort: 80, Seq: seqnum.Value(b.seq), Ack: seqnum.Value(b.ack),
		Flags: tcp.FlagFIN | tcp.FlagACK, Window: 65535}))
	b.m.readReady()
	if lent, held := b.pool(); lent != 3 || held != 3 {
		t.Fatalf("lent %d, held %d: want 3, 3", lent, held)
	}
	var w writeLog
	n, err := b.c.WriteTo(&w)
	if int(n) != len(b.sent) || err != nil {
		t.Fatalf("WriteTo: %d, %v; want %d, nil (the FIN)", n, err, len(b.sent))
	}
	if !bytes.Equal(w.got, b.sent) {
		t.Fatalf("wrote %d bytes, want the %d sent, in order (first difference at %d)", len(w.got), len(b.sent), firstDiff(w.got, b.sent))
	}
	if want := []int{300, 40000, 5000, big, 60000}; !slices.Equal(w.sizes, want) {
		t.Fatalf("writes of %v bytes, want %v: each frame whole, the ring's bytes between them", w.sizes, want)
	}
	if lent, held := b.pool(); lent != 3 || held != 0 {
		t.Fatalf("after WriteTo: lent %d, held %d: want 3, 0", lent, held)
	}
	b.noDoubleFree(t)
	if i := b.c.Info(); i.RcvBuffered != 0 || i.BytesRead != uint64(len(b.sent)) {
		t.Fatalf("after WriteTo the endpoint counts %d unread and %d read, want 0 and %d", i.RcvBuffered, i.BytesRead, len(b.sent))
	}
}

// TestConnWriteToErrors: the writer's error comes back with the count it
// took; a read deadline with nothing received ends WriteTo with the
// deadline's error and nothing written.
func TestConnWriteToErrors(t *testing.T) {
	a, b := pair(t, Config{})
	client, server := dialPair(t, a, b)
	s := server.(*Conn)
	if err := s.SetReadDeadline(time.Now().Add(30 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if n, err := s.WriteTo(&writeLog{}); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("WriteTo with nothing received: %d, %v; want 0 and a deadline error", n, err)
	}
	if err := s.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 100000)
	rand.Read(data)
	if _, err := client.Write(data); err != nil {
		t.Fatal(err)
	}
	w := &writeLog{fail: 70000}
	n, err := s.WriteTo(w)
	if n != 70000 || err == nil || !bytes.Equal(w.got, data[:70000]) {
		t.Fatalf("WriteTo into a writer that fails at 70000 bytes: %d, %v", n, err)
	}
	// What WriteTo took and the writer did not is gone, as from io.Copy;
	// the rest is still there to read.
	client.(*Conn).CloseWrite()
	rest, err := io.ReadAll(s)
	if err != nil || len(rest) > len(data)-70000 || !bytes.Equal(rest, data[len(data)-len(rest):]) {
		t.Fatalf("read after WriteTo's error: %d bytes, %v", len(rest), err)
	}
}

// TestConnCopyBothWays: io.Copy between a Conn and a descriptor takes
// WriteTo one way and ReadFrom (reading the descriptor itself: rawOnly) the
// other: a relay's two directions, each intact. (A *net.TCPConn source
// comes to ReadFrom through its own WriteTo, whose io.Copy hands over a
// reader that is still a syscall.Conn; tcpwheel forward's tests relay
// kernel TCP sockets so.)
func TestConnCopyBothWays(t *testing.T) {
	a, b := pair(t, Config{})
	client, server := dialPair(t, a, b)
	up, far := socketPair(t)
	s := server.(*Conn)
	relayed := make(chan error, 2)
	go func() { // the relay: server Conn <-> up
		_, err := io.Copy(up, s)
		up.CloseWrite()
		relayed <- err
	}()
	go func() {
		_, err := io.Copy(s, rawOnly{up, t})
		s.CloseWrite()
		relayed <- err
	}()
	toFar := make([]byte, 700000)
	toClient := make([]byte, 900000)
	rand.Read(toFar)
	rand.Read(toClient)
	fromFar := make(chan []byte, 1)
	go func() {
		got, _ := io.ReadAll(far)
		fromFar <- got
	}()
	go func() {
		far.Write(toClient)
		far.CloseWrite()
	}()
	wrote := make(chan error, 1)
	go func() {
		_, err := client.Write(toFar)
		if err == nil {
			err = client.(*Conn).CloseWrite()
		}
		wrote <- err
	}()
	readsAll(t, client, toClient, wrote)
	if got := <-fromFar; !bytes.Equal(got, toFar) {
		t.Fatalf("the far end got %d bytes, not the %d written", len(got), len(toFar))
	}
	for range 2 {
		if err := <-relayed; err != nil {
			t.Fatalf("relay: %v", err)
		}
	}
}

// TestConnReadFromFile: a regular file (a file server's io.Copy, net/http's
// ReadFrom) is read straight into the send buffer too, to its end.
func TestConnReadFromFile(t *testing.T) {
	a, b := pair(t, Config{})
	client, server := dialPair(t, a, b)
	c := client.(*Conn)
	data := make([]byte, 3*tcp.DefaultSendBuffer+4321)
	rand.Read(data)
	path := t.TempDir() + "/data"
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	readsAll(t, server, data, closeAfter(c, len(data), func() (int64, error) { return c.ReadFrom(rawOnly{f, t}) }))
}

// TestConnReadFromSmallRing: a relayed answer of a few bytes leaves the
// send buffer's storage at a ring's smallest (the one a spare gives a new
// Conn): ReadFrom reads into the room there is, and grows the storage only
// when it is short of ring.MinCap (with io.Copy's 32 KB, each of ab's
// connections through the forwarder grew a 64 KB ring).
func TestConnReadFromSmallRing(t *testing.T) {
	a, b := pair(t, Config{})
	client, server := dialPair(t, a, b)
	c := client.(*Conn)
	src, feed := socketPair(t)
	msg := []byte("a short answer, as a relayed request-response has")
	go func() {
		feed.Write(msg)
		feed.CloseWrite()
	}()
	want := msg
	readsAll(t, server, want, closeAfter(c, len(want), func() (int64, error) { return c.ReadFrom(rawOnly{src, t}) }))
	c.mu.Lock()
	size := c.tx.q.Held() + c.tx.q.Free()
	c.mu.Unlock()
	if size > ring.MinCap {
		t.Fatalf("the send buffer's storage grew to %d bytes for a %d-byte answer, want at most %d", size, len(msg), ring.MinCap)
	}
}
