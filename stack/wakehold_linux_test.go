package stack

import (
	"testing"

	"golang.org/x/sys/unix"
)

// wakeBed is a lendBed whose loop "watches" a pipe in place of the
// device's descriptor: the test makes it poll readable (input waiting) or
// not, as wakeReaders sees it at the turn's end.
type wakeBed struct {
	*lendBed
	r, w int
}

func newWakeBed(t *testing.T, recvBuffer int) *wakeBed {
	t.Helper()
	b := &wakeBed{lendBed: newLendBed(t, recvBuffer, 0)}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	b.r, b.w = p[0], p[1]
	t.Cleanup(func() { unix.Close(b.r); unix.Close(b.w) })
	b.m.pollFD, b.m.watched = b.r, true
	t.Cleanup(func() { b.m.watched = false })
	b.c.mu.Lock()
	b.c.waitChan(&b.c.readable) // as a Read that waits makes it
	b.c.mu.Unlock()
	b.woken() // the handshake's
	return b
}

// inputWaiting makes the pipe poll readable, or drains it.
func (b *wakeBed) inputWaiting(t *testing.T, on bool) {
	t.Helper()
	var buf [16]byte
	if on {
		if _, err := unix.Write(b.w, buf[:1]); err != nil {
			t.Fatal(err)
		}
		return
	}
	for {
		if _, err := unix.Read(b.r, buf[:]); err != nil {
			return
		}
	}
}

// woken reports whether the Conn's reader was woken since the last call.
func (b *wakeBed) woken() bool {
	select {
	case <-b.c.readable:
		return true
	default:
		return false
	}
}

// wantWoken fails with why unless the reader was woken since the last look
// (want) or not (!want).
func (b *wakeBed) wantWoken(t *testing.T, want bool, why string) {
	t.Helper()
	if b.woken() != want {
		t.Fatal(why)
	}
}

// A batch that leaves a lazy Conn (the peer's window above half) holding
// lent frames holds its reader's wake to the end of the turn, after the
// batch's ACK went out; if input waits on the device by then, one turn
// more, whose data the reader then takes with it; never two.
func TestWakeHeldForInputWaiting(t *testing.T) {
	b := newWakeBed(t, 1<<20)
	b.queue(t, b.data(t, 40000)) // lent
	b.m.readReady()
	b.wantWoken(t, false, "the reader was woken at the batch's end, before the turn's")
	if acks := b.out(t); len(acks) != 1 {
		t.Fatalf("the batch sent %d segments, want its ACK", len(acks))
	}
	b.inputWaiting(t, true)
	b.m.endTurn()
	b.wantWoken(t, false, "the reader was woken at the turn's end with input waiting")
	b.m.endTurn()
	b.wantWoken(t, true, "the reader was not woken at the end of the next turn: held twice")
	// No input waiting: the wake goes at the turn's end.
	b.inputWaiting(t, false)
	b.queue(t, b.data(t, 40000))
	b.m.readReady()
	b.wantWoken(t, false, "the reader was woken at the second batch's end, before the turn's")
	b.m.endTurn()
	b.wantWoken(t, true, "the reader was not woken at the turn's end with no input waiting")
	if got := b.readAll(t, 1<<20); len(got) != len(b.sent) {
		t.Fatalf("read %d bytes, want %d", len(got), len(b.sent))
	}
}

// A Conn that is not lazy, or holds no lent frame, has its reader woken at
// the batch's end, input waiting or not: a small payload (copied), and a
// batch after which the peer has less than half the window.
func TestWakeNotHeldUnlessBulk(t *testing.T) {
	b := newWakeBed(t, 100000)
	b.inputWaiting(t, true)
	b.queue(t, b.data(t, 1000)) // copied
	b.m.readReady()
	b.wantWoken(t, true, "a small payload's reader was not woken at the batch's end")
	b.readAll(t, 1<<20)
	b.queue(t, b.data(t, 40000)) // lent, 60000 of the window left: lazy
	b.m.readReady()
	b.wantWoken(t, false, "the reader of a lent frame was woken at the batch's end, the window above half")
	b.inputWaiting(t, false)
	b.m.endTurn()
	b.wantWoken(t, true, "the reader was not woken at the turn's end with no input waiting")
	b.inputWaiting(t, true)
	b.queue(t, b.data(t, 40000)) // 80000 unread: less than half the window left
	b.m.readReady()
	b.wantWoken(t, true, "the reader was not woken at the batch's end with the peer's window below half")
	b.m.endTurn()
	b.m.endTurn()
	b.wantWoken(t, false, "a second wake at the turn's end")
}
