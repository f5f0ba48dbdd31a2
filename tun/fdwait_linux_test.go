//go:build linux

package tun

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
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

// TestOffPoller: every TUN's descriptor, Open's (water's), OpenOffload's
// and each of OpenQueues' plain and offload queues, is close-on-exec and
// in no epoll set of the process (not Go's network poller's). A blocking
// ReadPacket waits until SetReadDeadline or Close ends it: a vnet
// device's in fdWait, a plain one's on a duplicate of the descriptor on
// Go's poller (readPlain), which leaves ReadFD's descriptor off it.
// Closing the device deletes the link.
func TestOffPoller(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func() ([]*TUN, error)
	}{
		{"Open", func() ([]*TUN, error) { d, err := Open("twpoll0", 1500); return []*TUN{d}, err }},
		{"OpenOffload", func() ([]*TUN, error) { d, err := OpenOffload("twpoll0", 1500); return []*TUN{d}, err }},
		{"OpenQueues plain", func() ([]*TUN, error) { return OpenQueues("twpoll0", 1500, 2, false) }},
		{"OpenQueues offload", func() ([]*TUN, error) { return OpenQueues("twpoll0", 1500, 2, true) }},
	} {
		inFreshNamespace(t, func() {
			qs, err := tc.open()
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			defer func() {
				for _, q := range qs {
					q.Close()
				}
			}()
			for i, q := range qs {
				fd, err := q.ReadFD()
				if err != nil {
					t.Fatal(err)
				}
				if n := epollWatchers(t, fd); n != 0 {
					t.Errorf("%s: queue %d's descriptor is in %d epoll sets, want 0", tc.name, i, n)
				}
				if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
					t.Errorf("%s: queue %d's descriptor flags %#x, %v: want FD_CLOEXEC", tc.name, i, flags, err)
				}
				if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK == 0 {
					t.Errorf("%s: queue %d's status flags %#x, %v: want O_NONBLOCK", tc.name, i, fl, err)
				}
			}
			q := qs[0]
			done := make(chan error, 1)
			read := func() {
				_, err := q.ReadPacket(make([]byte, 1500))
				done <- err
			}
			go read()
			time.Sleep(20 * time.Millisecond) // let it wait; the test holds without it
			if err := q.SetReadDeadline(time.Now()); err != nil {
				t.Fatal(err)
			}
			if err := result(t, done); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("%s: pending ReadPacket after SetReadDeadline(now) = %v, want os.ErrDeadlineExceeded", tc.name, err)
			}
			q.SetReadDeadline(time.Time{})
			fd, _ := q.ReadFD()
			if n := epollWatchers(t, fd); n != 0 {
				t.Errorf("%s: after a blocking ReadPacket the descriptor is in %d epoll sets, want 0", tc.name, n)
			}
			if f := q.pfile.Load(); (f != nil) != !q.vnet {
				t.Errorf("%s: vnet %v, the blocking reader's file %v", tc.name, q.vnet, f)
			} else if f != nil {
				rc, _ := f.SyscallConn()
				rc.Control(func(pfd uintptr) {
					if n := epollWatchers(t, int(pfd)); n != 1 {
						t.Errorf("%s: the blocking reader's descriptor is in %d epoll sets, want 1 (Go's poller)", tc.name, n)
					}
					if flags, err := unix.FcntlInt(pfd, unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
						t.Errorf("%s: the blocking reader's descriptor flags %#x, %v: want FD_CLOEXEC", tc.name, flags, err)
					}
				})
			}
			go read()
			time.Sleep(20 * time.Millisecond)
			for _, q := range qs {
				q.Close()
			}
			if err := result(t, done); !errors.Is(err, net.ErrClosed) {
				t.Errorf("%s: pending ReadPacket after Close = %v, want net.ErrClosed", tc.name, err)
			}
			if err := q.WritePacket(make([]byte, 40)); !errors.Is(err, net.ErrClosed) {
				t.Errorf("%s: WritePacket after Close = %v, want net.ErrClosed", tc.name, err)
			}
			if err := q.SetReadDeadline(time.Now()); !errors.Is(err, net.ErrClosed) {
				t.Errorf("%s: SetReadDeadline after Close = %v, want net.ErrClosed", tc.name, err)
			}
			if ok, err := LinkExists("twpoll0"); ok || err != nil {
				t.Errorf("%s: after Close LinkExists = %v, %v; want the link gone", tc.name, ok, err)
			}
		})
	}
}

// readUntilDeadline is a ReadPacket of d with a deadline 5ms on, its
// result, or a failure if it still waits 2s on (the deadline lost).
func readUntilDeadline(t *testing.T, d *TUN) error {
	t.Helper()
	done := make(chan error, 1)
	d.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
	go func() {
		_, err := d.ReadPacket(make([]byte, 1500))
		done <- err
	}()
	err := result(t, done)
	d.SetReadDeadline(time.Time{})
	return err
}

// openDescriptors is how many descriptors the process has open: the least
// of a few readings after a GC, as the runtime or a finalizer may hold one
// for a moment.
func openDescriptors(t *testing.T) int {
	t.Helper()
	n := -1
	for range 5 {
		runtime.GC()
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		if n < 0 || len(ents) < n {
			n = len(ents)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return n
}

// TestOpenReleasesDescriptors: Open, a blocking read and Close leave no
// descriptor behind (not water's, which Open duplicates and closes, nor
// fdWait's eventfds, nor the blocking reader's duplicate).
func TestOpenReleasesDescriptors(t *testing.T) {
	inFreshNamespace(t, func() {
		cycle := func() {
			d, err := Open("twleak0", 1500)
			if err != nil {
				t.Fatal(err)
			}
			// A blocking read that waits makes the poller's duplicate.
			if err := readUntilDeadline(t, d); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("ReadPacket of a quiet device with a deadline = %v, want os.ErrDeadlineExceeded", err)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
		}
		cycle() // warm up whatever the runtime opens once
		before := openDescriptors(t)
		const cycles = 10
		for range cycles {
			cycle()
		}
		// One of slack for a transient holder; a leak per cycle leaves 10.
		if after := openDescriptors(t); after > before+1 {
			t.Errorf("open descriptors: %d before %d Open/Close cycles, %d after", before, cycles, after)
		}
	})
}
