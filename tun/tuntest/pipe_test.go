package tuntest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tun"
)

func TestPipeBoundaries(t *testing.T) {
	a, b := Pipe(100)
	defer a.Close()
	pkts := [][]byte{{1}, bytes.Repeat([]byte{2}, 100), {3, 3, 3}}
	for _, p := range pkts {
		if err := a.WritePacket(p); err != nil {
			t.Fatalf("a.WritePacket(%d bytes): %v", len(p), err)
		}
	}
	buf := make([]byte, 200)
	for i, want := range pkts {
		n, err := b.ReadPacket(buf)
		if err != nil {
			t.Fatalf("b.ReadPacket #%d: %v", i, err)
		}
		if got := buf[:n]; !bytes.Equal(got, want) {
			t.Errorf("b.ReadPacket #%d = %v, want %v", i, got, want)
		}
	}
	// And the other way.
	if err := b.WritePacket([]byte{9, 8}); err != nil {
		t.Fatal(err)
	}
	if n, err := a.ReadPacket(buf); err != nil || !bytes.Equal(buf[:n], []byte{9, 8}) {
		t.Errorf("a.ReadPacket = %v, %v; want [9 8], nil", buf[:n], err)
	}
}

func TestPipeCopies(t *testing.T) {
	a, b := Pipe(0)
	defer a.Close()
	pkt := []byte{1, 2, 3}
	if err := a.WritePacket(pkt); err != nil {
		t.Fatal(err)
	}
	pkt[0] = 99 // the writer reuses its buffer
	buf := make([]byte, tun.DefaultMTU)
	n, err := b.ReadPacket(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := buf[:n]; !bytes.Equal(got, []byte{1, 2, 3}) {
		t.Errorf("read %v after the writer reused its buffer, want [1 2 3]", got)
	}
	// The reader's buffer must not alias the queue either: the next lap of
	// the ring reuses the slot, not buf.
	got := append([]byte(nil), buf[:n]...)
	if err := a.WritePacket([]byte{4, 5, 6}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf[:n], got) {
		t.Errorf("a write changed a buffer already read: %v, want %v", buf[:n], got)
	}
}

func TestPipeMTU(t *testing.T) {
	a, b := Pipe(0)
	defer a.Close()
	if a.MTU() != tun.DefaultMTU || b.MTU() != tun.DefaultMTU {
		t.Errorf("MTU() = %d, %d; want %d", a.MTU(), b.MTU(), tun.DefaultMTU)
	}
	if a.Name() == b.Name() {
		t.Errorf("both ends are called %q", a.Name())
	}
	for _, size := range []int{0, tun.DefaultMTU + 1} {
		if err := a.WritePacket(make([]byte, size)); !errors.Is(err, tun.ErrPacketSize) {
			t.Errorf("WritePacket(%d bytes) = %v, want ErrPacketSize", size, err)
		}
	}
	if err := a.WritePacket(make([]byte, tun.DefaultMTU)); err != nil {
		t.Errorf("WritePacket(MTU bytes) = %v", err)
	}
}

func TestPipeShortBuffer(t *testing.T) {
	a, b := Pipe(0)
	defer a.Close()
	if n, err := b.ReadPacket(nil); n != 0 || !errors.Is(err, io.ErrShortBuffer) {
		t.Errorf("ReadPacket(nil) = %d, %v; want 0, io.ErrShortBuffer", n, err)
	}
	a.WritePacket([]byte{1, 2, 3, 4})
	a.WritePacket([]byte{5})
	buf := make([]byte, 2)
	if n, err := b.ReadPacket(buf); n != 2 || !bytes.Equal(buf, []byte{1, 2}) || !errors.Is(err, io.ErrShortBuffer) {
		t.Errorf("ReadPacket(2 bytes) = %d %v, %v; want 2 [1 2], io.ErrShortBuffer", n, buf[:n], err)
	}
	// The truncated packet was consumed.
	if n, err := b.ReadPacket(buf); err != nil || !bytes.Equal(buf[:n], []byte{5}) {
		t.Errorf("next ReadPacket = %v, %v; want [5], nil", buf[:n], err)
	}
}

func TestPipeQueueFull(t *testing.T) {
	a, b := NewPipe(PipeConfig{QueueLen: 4})
	defer a.Close()
	for i := range 10 {
		if err := a.WritePacket([]byte{byte(i)}); err != nil {
			t.Fatalf("WritePacket #%d: %v (a full queue drops, it does not fail)", i, err)
		}
	}
	if got, want := a.Stats(), (PipeStats{Sent: 4, Dropped: 6}); got != want {
		t.Errorf("a.Stats() = %+v, want %+v", got, want)
	}
	buf := make([]byte, 10)
	for i := range 4 { // the first four survive, in order
		if n, err := b.ReadPacket(buf); err != nil || n != 1 || buf[0] != byte(i) {
			t.Fatalf("ReadPacket #%d = %v, %v; want [%d]", i, buf[:n], err, i)
		}
	}
	if got, want := b.Stats(), (PipeStats{Received: 4}); got != want {
		t.Errorf("b.Stats() = %+v, want %+v", got, want)
	}
	// Room again: the ring wraps.
	for i := range 3 {
		if err := a.WritePacket([]byte{byte(10 + i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if n, err := b.ReadPacket(buf); err != nil || n != 1 || buf[0] != byte(10+i) {
			t.Fatalf("ReadPacket after wrap #%d = %v, %v; want [%d]", i, buf[:n], err, 10+i)
		}
	}
	if got := a.Stats().Dropped; got != 6 {
		t.Errorf("Dropped = %d after draining, want 6", got)
	}
}

func TestPipeCloseUnblocksReaders(t *testing.T) {
	for _, closer := range []string{"a", "b"} {
		t.Run("close "+closer, func(t *testing.T) {
			a, b := Pipe(0)
			ends := map[string]tun.Device{"a": a, "b": b}
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for _, d := range []tun.Device{a, a, b, b} { // two readers per end
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := d.ReadPacket(make([]byte, 10))
					errs <- err
				}()
			}
			time.Sleep(10 * time.Millisecond) // let them block; the test holds without it
			if err := ends[closer].Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("ReadPacket still blocked 5s after Close")
			}
			close(errs)
			for err := range errs {
				if !errors.Is(err, net.ErrClosed) {
					t.Errorf("ReadPacket after Close = %v, want net.ErrClosed", err)
				}
			}
			for name, d := range ends {
				if err := d.WritePacket([]byte{1}); !errors.Is(err, net.ErrClosed) {
					t.Errorf("%s.WritePacket after Close = %v, want net.ErrClosed", name, err)
				}
				if _, err := d.ReadPacket(make([]byte, 10)); !errors.Is(err, net.ErrClosed) {
					t.Errorf("%s.ReadPacket after Close = %v, want net.ErrClosed", name, err)
				}
				if err := d.Close(); err != nil {
					t.Errorf("%s.Close again = %v, want nil", name, err)
				}
			}
		})
	}
}

func TestPipeCloseDiscardsQueued(t *testing.T) {
	a, b := Pipe(0)
	a.WritePacket([]byte{1})
	a.Close()
	if _, err := b.ReadPacket(make([]byte, 10)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("ReadPacket of a queued packet after Close = %v, want net.ErrClosed", err)
	}
}

func TestPipeConcurrent(t *testing.T) {
	const writers, perWriter = 4, 500
	a, b := NewPipe(PipeConfig{QueueLen: writers * perWriter})
	defer a.Close()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				if err := a.WritePacket([]byte(fmt.Sprintf("%d-%d", w, i))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	next := make([]int, writers) // each writer's packets arrive in its order
	buf := make([]byte, 100)
	for range writers * perWriter {
		n, err := b.ReadPacket(buf)
		if err != nil {
			t.Fatal(err)
		}
		var w, i int
		if _, err := fmt.Sscanf(string(buf[:n]), "%d-%d", &w, &i); err != nil {
			t.Fatalf("packet %q: %v", buf[:n], err)
		}
		if i != next[w] {
			t.Fatalf("writer %d: got packet %d, want %d", w, i, next[w])
		}
		next[w]++
	}
	wg.Wait()
	if s := a.Stats(); s.Dropped != 0 {
		t.Errorf("Dropped = %d, want 0", s.Dropped)
	}
}

func BenchmarkPipe(b *testing.B) {
	x, y := Pipe(0)
	defer x.Close()
	pkt := make([]byte, tun.DefaultMTU)
	buf := make([]byte, tun.DefaultMTU)
	b.SetBytes(int64(len(pkt)))
	b.ReportAllocs()
	for b.Loop() {
		if err := x.WritePacket(pkt); err != nil {
			b.Fatal(err)
		}
		if _, err := y.ReadPacket(buf); err != nil {
			b.Fatal(err)
		}
	}
}
