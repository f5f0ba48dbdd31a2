package stack

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	mrand "math/rand/v2"
	"net"
	"syscall"
	"testing"

	"github.com/tcpwheel/tcpwheel/tcp"
)

// holdFlush makes c's Writes take bytes without posting a flush, as if one
// were posted and the loop had not run it yet: what they take stays in tx,
// not handed to the endpoint, until something on the loop drains it.
func holdFlush(c *Conn) {
	c.mu.Lock()
	c.tx.posted = true
	c.mu.Unlock()
}

// sendRandom sends n random bytes from from and carries them across; it
// returns them.
func (p *manualPair) sendRandom(from *Conn, n int) []byte {
	p.t.Helper()
	data := make([]byte, n)
	rand.Read(data)
	p.send(from, data)
	return data
}

// TestConnSendsInPlace: the endpoint sends the bytes from where Write copied
// them (tx.q, its tcp.Source), which holds exactly what the endpoint holds
// unacknowledged plus what it was not handed yet (the room of what was
// acknowledged is given back as the ACK comes); the peer reads every byte,
// in order, through many cycles of the send buffer.
func TestConnSendsInPlace(t *testing.T) {
	p := newManualPair(t)
	c, s := p.connect()
	data := make([]byte, 5*tcp.DefaultSendBuffer+12345)
	rand.Read(data)
	rng := newRand(1)
	var got []byte
	buf := make([]byte, 64<<10)
	written := 0
	for range 10000 {
		if written < len(data) {
			n, err := c.TryWrite(data[written:min(len(data), written+1+rng.IntN(200000))])
			if err != nil {
				t.Fatal(err)
			}
			written += n
		}
		var inQ, held, pending int
		p.a.m.Wake(0, func() {
			c.mu.Lock()
			inQ, held, pending = c.tx.q.Len(), c.tx.q.Held(), c.tx.q.Pending()
			c.mu.Unlock()
		})
		if i := c.Info(); inQ != i.SndBuffered || held != i.SndBuffered+pending {
			t.Fatalf("tx.q holds %d for the endpoint, %d in all with %d not handed over; the endpoint holds %d", inQ, held, pending, i.SndBuffered)
		}
		p.shuttle()
		got = p.readAll(s, buf, got)
		if len(got) == len(data) {
			break
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, not the %d written", len(got), len(data))
	}
	if i := c.Info(); i.BytesWritten != uint64(len(data)) || i.BytesRetrans != 0 {
		t.Fatalf("the endpoint took %d bytes (%d resent), want %d", i.BytesWritten, i.BytesRetrans, len(data))
	}
}

func newRand(seed uint64) *mrand.Rand { return mrand.New(mrand.NewPCG(seed, seed+1)) }

// TestConnFinAfterPendingBytes: a CloseWrite that finds bytes Write took
// and the loop has not handed to the endpoint yet hands them over first: the
// FIN follows the last of them.
func TestConnFinAfterPendingBytes(t *testing.T) {
	p := newManualPair(t)
	c, s := p.connect()
	first, second := p.sendRandom(c, 3000), make([]byte, 7000)
	rand.Read(second)
	holdFlush(c)
	if n, err := c.TryWrite(second); n != len(second) || err != nil {
		t.Fatalf("TryWrite: %d, %v", n, err)
	}
	if i := c.Info(); i.BytesWritten != uint64(len(first)) {
		t.Fatalf("the endpoint took %d bytes before the flush, want %d", i.BytesWritten, len(first))
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryWrite([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("Write after CloseWrite: %v, want EPIPE", err)
	}
	p.shuttle()
	got, err := io.ReadAll(readerOf(s))
	if want := append(append([]byte(nil), first...), second...); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes before EOF (%v), want the %d written", len(got), err, len(want))
	}
}

// TestConnAbortDropsPendingBytes: Abort resets at once: bytes Write took
// and the endpoint was not handed are never sent; the peer sees the reset.
func TestConnAbortDropsPendingBytes(t *testing.T) {
	p := newManualPair(t)
	c, s := p.connect()
	first := p.sendRandom(c, 2000)
	holdFlush(c)
	if n, err := c.TryWrite(make([]byte, 9000)); n != 9000 || err != nil {
		t.Fatalf("TryWrite: %d, %v", n, err)
	}
	if err := c.Abort(); err != nil {
		t.Fatal(err)
	}
	p.shuttle()
	if i := c.Info(); i.BytesWritten != uint64(len(first)) || i.BytesSent != uint64(len(first)) {
		t.Fatalf("the endpoint took %d bytes and sent %d, want only the %d before the Abort", i.BytesWritten, i.BytesSent, len(first))
	}
	got := make([]byte, 20000)
	n, _ := s.TryRead(got)
	if n != len(first) || !bytes.Equal(got[:n], first) {
		t.Fatalf("the peer read %d bytes, want the %d sent before the Abort", n, len(first))
	}
	if _, err := s.TryRead(got); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the peer's Read after the Abort: %v, want ECONNRESET", err)
	}
	c.mu.Lock()
	held, pending := c.tx.q.Held(), c.tx.q.Pending()
	c.mu.Unlock()
	if pending != 0 || held > len(first) {
		t.Fatalf("after the Abort tx holds %d (%d not handed over), want none of the dropped bytes", held, pending)
	}
}

// readerOf reads s with TryRead (the manual pair has carried everything).
type tryReader struct{ c *Conn }

func readerOf(c *Conn) io.Reader { return tryReader{c} }

func (r tryReader) Read(p []byte) (int, error) {
	n, err := r.c.TryRead(p)
	if n == 0 && err == nil {
		return 0, io.ErrUnexpectedEOF // nothing more and no EOF: the FIN never came
	}
	return n, err
}

// TestConnWriterRacesLoop: Writes of every size race the loop that hands
// their bytes to the endpoint and frees their room as ACKs come (for -race):
// every byte arrives, in order, and a CloseWrite follows the last.
func TestConnWriterRacesLoop(t *testing.T) {
	a, b := pair(t, Config{})
	client, server := dialPair(t, a, b)
	data := make([]byte, 6<<20)
	rand.Read(data)
	done := make(chan error, 1)
	go func() {
		rng := newRand(2)
		for off := 0; off < len(data); {
			n := min(len(data)-off, 1+rng.IntN(100000))
			if _, err := client.Write(data[off : off+n]); err != nil {
				done <- err
				return
			}
			off += n
		}
		done <- client.(*Conn).CloseWrite()
	}()
	readsAll(t, server, data, done)
}

// readsAll reads r to its EOF, then the writer's verdict from done, and
// checks that r carried exactly data.
func readsAll(t *testing.T, r io.Reader, data []byte, done <-chan error) {
	t.Helper()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("received %d bytes, not the %d written", len(got), len(data))
	}
}

// setAfterFill sets testHookAfterFill for the test.
func setAfterFill(t *testing.T, f func(*Conn)) {
	t.Cleanup(func() { testHookAfterFill = nil })
	testHookAfterFill = f
}

// TestWriteCopiesWithoutLock: a Write of minCopyUnlocked bytes or more copies
// them into tx without mu (the loop, which takes mu at each flush and ACK,
// does not wait for the copy), a smaller one under it; the bytes arrive, in
// order, both ways.
func TestWriteCopiesWithoutLock(t *testing.T) {
	p := newManualPair(t)
	c, s := p.connect()
	copies, locked := 0, 0
	setAfterFill(t, func(w *Conn) {
		copies++
		if !w.mu.TryLock() {
			locked++
			return
		}
		w.mu.Unlock()
	})
	small, large := make([]byte, minCopyUnlocked-1), make([]byte, 3*minCopyUnlocked+5)
	rand.Read(small)
	rand.Read(large)
	p.send(c, small)
	if copies != 0 {
		t.Fatalf("a Write of %d bytes copied without mu", len(small))
	}
	p.send(c, large)
	if copies != 1 || locked != 0 {
		t.Fatalf("a Write of %d bytes: %d copies without mu, %d of them with mu held; want 1, 0", len(large), copies, locked)
	}
	got := p.readAll(s, make([]byte, 64<<10), nil)
	if want := append(append([]byte(nil), small...), large...); !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, not the %d written", len(got), len(want))
	}
}

// copyRace writes minCopyUnlocked bytes on a connection whose Write, after
// its copy without mu and before the copy is counted, runs act (a Close, a
// CloseWrite) and carries what the loop sends; it checks that the Write
// returns want, and that the peer reads the bytes sent before, then EOF.
// during, if not nil, runs in the hook after act.
func copyRace(t *testing.T, act func(*Conn) error, want error, during func(*Conn)) (c *Conn, first []byte) {
	t.Helper()
	p := newManualPair(t)
	c, s := p.connect()
	first = p.sendRandom(c, 2000)
	setAfterFill(t, func(w *Conn) {
		if err := act(w); err != nil {
			t.Errorf("during the copy: %v", err)
		}
		p.shuttle() // the loop's part, and the FIN
		if during != nil {
			during(w)
		}
	})
	if n, err := c.TryWrite(make([]byte, minCopyUnlocked)); n != 0 || !errors.Is(err, want) {
		t.Fatalf("Write whose copy raced it: %d, %v; want 0, %v", n, err, want)
	}
	p.shuttle()
	got, err := io.ReadAll(readerOf(s))
	if err != nil || !bytes.Equal(got, first) {
		t.Fatalf("the peer read %d bytes before EOF (%v), want the %d written before", len(got), err, len(first))
	}
	return c, first
}

// TestWriteCopyRacesClose: a Close while a Write copies without mu (the
// loop may have sent the FIN by the time the copy is done): the Write
// returns net.ErrClosed and its bytes are not sent; the peer reads what
// was written before, then EOF; tx keeps none of the bytes, and its storage
// does not go to the stack's spares (recycle) during the copy.
func TestWriteCopyRacesClose(t *testing.T) {
	c, _ := copyRace(t, (*Conn).Close, net.ErrClosed, func(w *Conn) {
		if w.recycled {
			t.Error("tx's storage went to the stack's spares while a Write copied into it")
		}
	})
	c.mu.Lock()
	held, copying := c.tx.q.Held(), c.tx.copying
	c.mu.Unlock()
	if held != 0 || copying {
		t.Fatalf("after the Write: tx holds %d bytes, copying %v; want 0, false", held, copying)
	}
}

// TestWriteCopyRacesCloseWrite: a CloseWrite while a Write copies without
// mu (its FIN follows the bytes Write had counted before): the Write
// returns EPIPE, as a Write after the CloseWrite does, and its bytes are not
// sent; the peer reads what came before, then EOF.
func TestWriteCopyRacesCloseWrite(t *testing.T) {
	c, first := copyRace(t, (*Conn).CloseWrite, syscall.EPIPE, nil)
	if i := c.Info(); i.BytesWritten != uint64(len(first)) {
		t.Fatalf("the endpoint took %d bytes, want the %d before the CloseWrite", i.BytesWritten, len(first))
	}
}

// TestWriteCopyRacesReset: a reset from the peer while a Write copies
// without mu drops what Write took (ring.Shared.Drop): the copy is not
// counted, and the Write returns the reset.
func TestWriteCopyRacesReset(t *testing.T) {
	p := newManualPair(t)
	c, s := p.connect()
	setAfterFill(t, func(*Conn) {
		if err := s.Abort(); err != nil {
			t.Errorf("the peer's Abort: %v", err)
		}
		p.shuttle() // its RST reaches c's endpoint
	})
	if n, err := c.TryWrite(make([]byte, 2*minCopyUnlocked)); n != 0 || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Write whose copy raced a reset: %d, %v; want 0, ECONNRESET", n, err)
	}
	c.mu.Lock()
	held, pending := c.tx.q.Held(), c.tx.q.Pending()
	c.mu.Unlock()
	if held != 0 || pending != 0 {
		t.Fatalf("after the reset tx holds %d (%d pending), want none", held, pending)
	}
	if i := c.Info(); i.BytesWritten != 0 {
		t.Fatalf("the endpoint took %d bytes, want none", i.BytesWritten)
	}
}
