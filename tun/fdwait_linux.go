//go:build linux

package tun

import (
	"encoding/binary"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// fdWait is the wait of a non-blocking descriptor kept off Go's network
// poller (every TUN's: Open's, OpenOffload's, OpenQueues'): an EAGAIN read
// or write waits in poll(2) for it, and for Close and SetReadDeadline,
// which wake the wait through eventfds.
//
// Why off the poller: the loop of package stack watches the descriptor
// with its own epoll and reads it without blocking; registered with Go's
// poller as well (edge-triggered), every packet the kernel queued woke an
// idle Go thread blocked in the runtime's netpoll, which found nothing to
// run: in tcpwheel compare's download and ab runs, 12-14% of the
// process's CPU (runtime.findRunnable's netpoll), and the wakeups did not
// make the hand-offs between the loop and the application's goroutines
// any quicker (see CHANGELOG.md).
type fdWait struct {
	// mu is held shared by a wait while it polls the eventfds and by
	// SetReadDeadline's kick; close takes it to close them.
	mu     sync.RWMutex
	closed atomic.Bool
	done   int // eventfd written once by close and never drained: a closed device
	kick   int // eventfd written by setReadDeadline, drained by the read it wakes
	// rdl is the read deadline (nil: none).
	rdl atomic.Pointer[time.Time]
}

// offPoller wraps the TUN descriptor fd (blocking or not, close-on-exec)
// in an *os.File that Go's network poller does not watch, and returns it
// non-blocking with its RawConn and its fdWait. os.NewFile registers a
// descriptor with the poller only when it is non-blocking, so fd is made
// non-blocking only after. On an error fd is closed.
func offPoller(fd int) (*os.File, syscall.RawConn, *fdWait, error) {
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, nil, nil, os.NewSyscallError("fcntl", err)
	}
	file := os.NewFile(uintptr(fd), "/dev/net/tun")
	if err := unix.SetNonblock(fd, true); err != nil {
		file.Close()
		return nil, nil, nil, os.NewSyscallError("fcntl", err)
	}
	rc, err := file.SyscallConn()
	if err != nil {
		file.Close()
		return nil, nil, nil, err
	}
	wt, err := newFDWait()
	if err != nil {
		file.Close()
		return nil, nil, nil, err
	}
	return file, rc, wt, nil
}

func newFDWait() (*fdWait, error) {
	w := &fdWait{done: -1, kick: -1}
	var err error
	if w.done, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		return nil, os.NewSyscallError("eventfd", err)
	}
	if w.kick, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		unix.Close(w.done)
		return nil, os.NewSyscallError("eventfd", err)
	}
	return w, nil
}

// wait blocks until fd polls ready for ev (unix.POLLIN or unix.POLLOUT),
// or with an error or a hang-up the caller's next attempt reports. It
// fails with os.ErrClosed once the device is closed, and a read
// (unix.POLLIN) with os.ErrDeadlineExceeded once the read deadline has
// passed. A SetReadDeadline during a read's wait wakes it to look at the
// new deadline.
func (w *fdWait) wait(fd uintptr, ev int16) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	for {
		if w.closed.Load() {
			return os.ErrClosed
		}
		timeout := -1
		fds := [3]unix.PollFd{{Fd: int32(fd), Events: ev}, {Fd: int32(w.done), Events: unix.POLLIN}, {Fd: int32(w.kick), Events: unix.POLLIN}}
		n := 2
		if ev == unix.POLLIN {
			n = 3
			if d := w.rdl.Load(); d != nil {
				rem := time.Until(*d)
				if rem <= 0 {
					return os.ErrDeadlineExceeded
				}
				timeout = int((rem + time.Millisecond - 1) / time.Millisecond) // late, never early
			}
		}
		if _, err := unix.Poll(fds[:n], timeout); err != nil && !errors.Is(err, unix.EINTR) {
			return os.NewSyscallError("poll", err)
		}
		if w.closed.Load() {
			return os.ErrClosed
		}
		if fds[0].Revents != 0 {
			return nil
		}
		if fds[2].Revents != 0 {
			var buf [8]byte
			_, _ = unix.Read(w.kick, buf[:]) // the deadline is looked at again
		}
	}
}

// setReadDeadline sets the deadline of pending and future reads; the zero
// time means none.
func (w *fdWait) setReadDeadline(t time.Time) error {
	if t.IsZero() {
		w.rdl.Store(nil)
	} else {
		w.rdl.Store(&t)
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed.Load() {
		return os.ErrClosed
	}
	signal(w.kick)
	return nil
}

// close wakes every wait for good, waits for them to leave, and closes
// the eventfds.
func (w *fdWait) close() {
	if w.closed.Swap(true) {
		return
	}
	signal(w.done)
	w.mu.Lock()
	unix.Close(w.done)
	unix.Close(w.kick)
	w.mu.Unlock()
}

// signal adds one to the eventfd fd, which makes it readable.
func signal(fd int) {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, _ = unix.Write(fd, one[:]) // fails only if the counter is full: then it is readable anyway
}

// PollReadable reports whether the descriptor fd polls readable now, without
// waiting (poll(2) with a zero timeout): for a Pollable's ReadFD, whether a
// packet waits to be read. The answer may be stale by the time the caller
// acts on it; an error reads as false.
func PollReadable(fd int) bool {
	fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds[:], 0)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0 && fds[0].Revents&unix.POLLIN != 0
	}
}
