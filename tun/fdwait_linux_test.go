//go:build linux

package tun

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// nonblockPipe returns a pipe's read and write ends, both non-blocking.
func nonblockPipe(t *testing.T) (r, w int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	return p[0], p[1]
}

// result is the wait's result, or a failure if it is still waiting 2s on.
func result(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(2 * time.Second):
		t.Fatal("still waiting 2s on")
		return nil
	}
}

func newTestWait(t *testing.T) *fdWait {
	t.Helper()
	w, err := newFDWait()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.close)
	return w
}

// TestFDWaitWritable: a write's wait (EAGAIN on a full pipe) ends when the
// descriptor can take more, not before.
func TestFDWaitWritable(t *testing.T) {
	r, wfd := nonblockPipe(t)
	chunk := make([]byte, 4096)
	for {
		if _, err := unix.Write(wfd, chunk); err == unix.EAGAIN {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	w := newTestWait(t)
	w.setReadDeadline(time.Now()) // a read's deadline: not a write's
	done := make(chan error, 1)
	go func() { done <- w.wait(uintptr(wfd), unix.POLLOUT) }()
	time.Sleep(20 * time.Millisecond) // let it wait; the test holds without it
	select {
	case err := <-done:
		t.Fatalf("wait for a full pipe to be writable returned %v before it was drained", err)
	default:
	}
	for range 4 { // pages of the pipe freed: it polls writable
		if _, err := unix.Read(r, chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := result(t, done); err != nil {
		t.Fatalf("wait after draining = %v, want nil", err)
	}
}

// TestFDWaitReadable: a read's wait ends when data comes, with the read
// deadline when it passes (also one set while it waits), and with close.
func TestFDWaitReadable(t *testing.T) {
	r, wfd := nonblockPipe(t)
	w := newTestWait(t)
	done := make(chan error, 1)
	go func() { done <- w.wait(uintptr(r), unix.POLLIN) }()
	if _, err := unix.Write(wfd, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := result(t, done); err != nil {
		t.Fatalf("wait with data = %v, want nil", err)
	}
	var b [1]byte
	unix.Read(r, b[:])

	go func() { done <- w.wait(uintptr(r), unix.POLLIN) }()
	time.Sleep(20 * time.Millisecond) // let it wait; the test holds without it
	if err := w.setReadDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := result(t, done); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("waiting read after its deadline was set to now = %v, want os.ErrDeadlineExceeded", err)
	}
	w.setReadDeadline(time.Time{})

	go func() { done <- w.wait(uintptr(r), unix.POLLIN) }()
	time.Sleep(20 * time.Millisecond)
	w.close()
	if err := result(t, done); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("waiting read after close = %v, want os.ErrClosed", err)
	}
	if err := w.wait(uintptr(wfd), unix.POLLOUT); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("wait after close = %v, want os.ErrClosed", err)
	}
	if err := w.setReadDeadline(time.Now()); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("setReadDeadline after close = %v, want os.ErrClosed", err)
	}
}

// epollWatchers returns how many of this process's epoll instances watch
// fd (their /proc fdinfo lists it as a tfd).
func epollWatchers(t *testing.T, fd int) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("tfd: %8d ", fd)
	n := 0
	for _, e := range ents {
		if link, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err != nil || link != "anon_inode:[eventpoll]" {
			continue
		}
		info, err := os.ReadFile(filepath.Join("/proc/self/fdinfo", e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if strings.Contains(string(info), want) {
			n++
		}
	}
	return n
}

// TestOffloadOffPoller: OpenOffload's descriptor is in no epoll set of the
// process (not Go's network poller's), while Open's is in Go's.
func TestOffloadOffPoller(t *testing.T) {
	inFreshNamespace(t, func() {
		plain, err := Open("twpoll0", 1500)
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		off, err := OpenOffload("twpoll1", 1500)
		if err != nil {
			t.Fatal(err)
		}
		defer off.Close()
		pfd, _ := plain.ReadFD()
		ofd, _ := off.ReadFD()
		if n := epollWatchers(t, pfd); n != 1 {
			t.Errorf("Open's descriptor is in %d epoll sets, want 1 (Go's poller)", n)
		}
		if n := epollWatchers(t, ofd); n != 0 {
			t.Errorf("OpenOffload's descriptor is in %d epoll sets, want 0", n)
		}
		// Its blocking read waits (fdWait) until Close ends it.
		done := make(chan error, 1)
		go func() {
			_, err := off.ReadFrame(make([]byte, MaxFrame))
			done <- err
		}()
		time.Sleep(20 * time.Millisecond) // let it wait; the test holds without it
		off.Close()
		if err := result(t, done); !errors.Is(err, net.ErrClosed) {
			t.Errorf("pending ReadFrame after Close = %v, want net.ErrClosed", err)
		}
	})
}
