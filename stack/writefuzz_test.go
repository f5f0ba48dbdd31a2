package stack

import (
	"bytes"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
)

// FuzzConnWrite drives a connection between two manual stacks with Writes
// of every size (large ones copy without the Conn's lock), the peer's
// reads, carried packets, and, during a large Write's copy or between
// calls, a Close, a CloseWrite or the peer's reset. Whatever the order, the
// peer reads a prefix of the bytes the Writes reported as taken, in order,
// never a byte more or another; all of them when the connection ended
// without a reset; and a Write that took nothing says why with an error
// that names the cause.
func FuzzConnWrite(f *testing.F) {
	f.Add([]byte{1, 9, 2, 3, 0, 4, 2, 1, 40, 2, 3})
	f.Add([]byte{4, 0, 1, 20, 2, 3, 5})
	f.Add([]byte{4, 1, 1, 20, 2, 3, 1, 2, 2, 3})
	f.Add([]byte{4, 2, 1, 20, 2, 3, 0, 7})
	f.Add([]byte{1, 255, 1, 255, 1, 255, 2, 3, 2, 3, 6})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 200 {
			ops = ops[:200]
		}
		p := newManualPair(t)
		c, s := p.connect()
		var (
			want, got []byte // the bytes Writes took; the bytes the peer read
			reset     bool   // the peer reset the connection
			ended     bool   // c was closed or shut down for writing
			during    byte   // what happens during the next large Write's copy (0: nothing)
		)
		buf := make([]byte, 64<<10)
		read := func() {
			for {
				n, err := s.TryRead(buf)
				got = append(got, buf[:n]...)
				if n == 0 || err != nil {
					return
				}
			}
		}
		act := func(a byte) {
			switch a % 4 {
			case 0:
				ended = true
				_ = c.Close()
			case 1:
				ended = true
				_ = c.CloseWrite()
			case 2:
				reset = true
				_ = s.Abort()
			case 3:
				read()
			}
			p.shuttle()
		}
		setAfterFill(t, func(*Conn) {
			if a := during; a != 0 {
				during = 0
				act(a - 1)
			}
		})
		next := func(i *int) byte {
			if *i+1 < len(ops) {
				*i++
				return ops[*i]
			}
			return 0
		}
		for i := 0; i < len(ops); i++ {
			switch op := ops[i] % 7; op {
			case 0, 1: // a Write, small or large
				size := 1 + int(next(&i))*16
				if op == 1 {
					size = minCopyUnlocked + (size-1)/16*512
				}
				data := streamBytes(len(want), size)
				n, err := c.TryWrite(data)
				if n < 0 || n > size {
					t.Fatalf("TryWrite of %d took %d", size, n)
				}
				want = append(want, data[:n]...)
				if n == 0 && err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
					t.Fatalf("TryWrite: %v, want ErrClosed, EPIPE or ECONNRESET", err)
				}
				if err != nil && !ended && !reset {
					t.Fatalf("TryWrite failed (%v) with the connection open and not reset", err)
				}
			case 2:
				p.shuttle()
			case 3:
				read()
			case 4:
				during = 1 + next(&i)%4
			case 5:
				act(next(&i))
			case 6:
				p.shuttle()
				read()
			}
		}
		drain := func() {
			for range 1000 {
				before := len(got)
				p.shuttle()
				read()
				if len(got) == before {
					return
				}
			}
		}
		drain()
		if !bytes.HasPrefix(want, got) {
			t.Fatalf("the peer read %d bytes that are not a prefix of the %d the Writes took", len(got), len(want))
		}
		if ended && !reset {
			if err := c.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
				t.Fatal(err)
			}
			drain()
			if _, err := s.TryRead(buf); err != io.EOF {
				t.Fatalf("after the Close the peer's Read: %v, want EOF", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("closed without a reset: the peer read %d bytes, the Writes took %d", len(got), len(want))
			}
		}
	})
}

// streamBytes returns n bytes of a stream whose byte at position i is a
// function of i: any slip, loss or repeat changes them.
func streamBytes(at, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		j := at + i
		b[i] = byte(j*7 + j/251)
	}
	return b
}
