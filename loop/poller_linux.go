//go:build linux

package loop

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"syscall"
	"time"

	"github.com/tcpwheel/tcpwheel/timer"
	"golang.org/x/sys/unix"
)

// poller is the Linux sleep of a Loop: epoll_wait on a timerfd (the next
// deadline), an eventfd (Post and Shared's wake-ups) and any file descriptors
// added with Watch.
type poller struct {
	// Immutable between open and close.
	epfd, tfd, efd int
	tid            int // the loop's thread; set by setup before New returns; 0 when parked
	// A parked loop (NewParked): the epoll descriptor as a file of Go's
	// netpoller, in which wait sleeps, and the loop goroutine's id. An
	// unlocked loop (NewUnlocked) has a duplicate of the descriptor there
	// while it is quiet (see wait's park), none while it is busy.
	ef       *os.File
	erc      syscall.RawConn
	unlocked bool // NewUnlocked's: ef, if any, is the duplicate
	goid     string

	// The loop goroutine's alone.
	armed   int64 // CLOCK_MONOTONIC ns the timerfd fires at; 0 when disarmed
	events  [16]unix.EpollEvent
	readers map[int32]func() bool // Watch callbacks by fd
	ready   []int32               // readable reader fds reported by the last epoll_wait
}

func (p *poller) open() error {
	p.epfd, p.tfd, p.efd = -1, -1, -1
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return os.NewSyscallError("epoll_create1", err)
	}
	p.epfd = fd
	if fd, err = unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC); err != nil {
		p.close()
		return os.NewSyscallError("timerfd_create", err)
	}
	p.tfd = fd
	if fd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		p.close()
		return os.NewSyscallError("eventfd", err)
	}
	p.efd = fd
	for _, fd := range []int{p.tfd, p.efd} {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			p.close()
			return os.NewSyscallError("epoll_ctl", err)
		}
	}
	return nil
}

// setup runs first on the loop goroutine. The goroutine keeps its thread to the
// end: the thread's timer slack is changed, and it dies with the goroutine.
// A parked loop's goroutine keeps none: its epoll descriptor goes to Go's
// netpoller instead (non-blocking: epoll_wait does not look at the flag).
// An unlocked loop's keeps none either and sleeps in epoll_wait, or in the
// netpoller when it is quiet (netpoll).
func (p *poller) setup(mode threadMode) error {
	if mode == threadUnlocked {
		p.goid, p.unlocked = goroutineID(), true
		return nil
	}
	if mode == threadParked {
		if err := unix.SetNonblock(p.epfd, true); err != nil {
			return os.NewSyscallError("fcntl(O_NONBLOCK)", err)
		}
		f, rc, err := netpollFile(p.epfd)
		if err != nil {
			p.epfd = -1
			return err
		}
		p.ef, p.erc, p.goid = f, rc, goroutineID()
		return nil
	}
	runtime.LockOSThread()
	p.tid = unix.Gettid()
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0); err != nil {
		return os.NewSyscallError("prctl(PR_SET_TIMERSLACK)", err)
	}
	return nil
}

// netpollFile makes fd, a non-blocking epoll descriptor, a file of Go's
// netpoller, which owns it from now on (and closes it on an error).
func netpollFile(fd int) (*os.File, syscall.RawConn, error) {
	f := os.NewFile(uintptr(fd), "loop-epoll")
	rc, err := f.SyscallConn()
	if err == nil {
		// A descriptor the netpoller did not take has no deadlines:
		// the wait would block its thread, as a locked loop's.
		err = f.SetReadDeadline(time.Time{})
	}
	if err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("loop: the epoll descriptor in Go's netpoller: %w", err)
	}
	return f, rc, nil
}

// netpoll puts a duplicate of an unlocked loop's epoll descriptor in Go's
// netpoller (on), so that block may sleep there, or takes it out (off): a
// descriptor in the netpoller wakes the netpoller's thread at each of its
// events, for nothing while the loop sleeps in epoll_wait. Both descriptors
// are one epoll instance, non-blocking (epoll_wait does not look at the
// flag). If the netpoller does not take it, block sleeps in epoll_wait.
func (p *poller) netpoll(on bool) {
	if !on {
		if p.unlocked && p.ef != nil {
			_ = p.ef.Close()
			p.ef, p.erc = nil, nil
		}
		return
	}
	if p.ef != nil {
		return // there already
	}
	fd, err := unix.FcntlInt(uintptr(p.epfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return
	}
	if f, rc, err := netpollFile(fd); err == nil {
		p.ef, p.erc = f, rc
	}
}

// onLoop reports whether the caller runs on the loop goroutine: no other
// goroutine can run on the loop's locked thread. A parked or unlocked loop's
// goroutine is told by its id.
func (p *poller) onLoop() bool {
	if p.goid != "" { // immutable after setup, as tid
		return goroutineID() == p.goid
	}
	return unix.Gettid() == p.tid
}

// locked reports whether the loop's goroutine is locked to its thread.
func (p *poller) locked() bool { return p.tid != 0 }

// wake makes the loop's current or next epoll_wait return. Any goroutine may call
// it while the eventfd is open.
func (p *poller) wake() {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, _ = unix.Write(p.efd, one[:]) // fails only if the counter is full: then it is readable anyway
}

// wait sleeps until next on clock (if ok) or until woken, and reports whether it
// woke from a blocking sleep, or a spin was ended by an event. The deadline is translated to CLOCK_MONOTONIC by reading
// clock first and CLOCK_MONOTONIC second, so any error in the translation makes the
// timerfd fire late, never early.
//
// With a spin window, the timerfd fires that much before the deadline and the
// thread waits out the rest awake, polling epoll without blocking: a wake-up from
// an idle CPU takes tens of µs (over a hundred in a VM), a poll well under one.
// Any event ends the spin at once, so spinning delays no packet and no Post.
//
// park sleeps in Go's netpoller (block) instead of epoll_wait: always for a
// parked loop; for an unlocked one, which puts its descriptor there for it
// (netpoll), when the loop is quiet.
func (p *poller) wait(clock timer.Clock, next time.Duration, ok bool, spin time.Duration, park bool) bool {
	if p.unlocked {
		p.netpoll(park) // in the netpoller only to sleep there
	}
	timeout := -1
	var abs int64
	switch {
	case ok:
		c := clock.Now()
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			timeout = int((next - c + 999_999) / 1_000_000) // cannot happen; sleep in ms instead
			break
		}
		now := ts.Nano()
		abs = now
		if rel := int64(next - c); rel > 0 {
			if rel > math.MaxInt64-abs {
				abs = math.MaxInt64
			} else {
				abs += rel
			}
		}
		early := abs - int64(spin)
		if early <= now {
			return p.spinUntil(abs)
		}
		if early != p.armed && !p.arm(early) {
			timeout = int((next - c + 999_999) / 1_000_000)
			abs = 0
		}
	case p.armed != 0:
		p.arm(0) // nothing pending: no stale wake-up
	}
	n := p.block(timeout, park)
	if n == 1 && p.armed == 0 && abs != 0 && spin > 0 {
		// Only the timerfd fired: it was the spin's early alarm.
		p.spinUntil(abs)
	}
	return n > 0
}

// spinUntil polls epoll without blocking until CLOCK_MONOTONIC reaches abs or an
// event arrives, and reports whether one did.
func (p *poller) spinUntil(abs int64) bool {
	var ts unix.Timespec
	for {
		if p.epoll(0) > 0 {
			return true
		}
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil || ts.Nano() >= abs {
			return false
		}
	}
}

// arm sets the timerfd to fire at abs ns on CLOCK_MONOTONIC, or disarms it for 0.
func (p *poller) arm(abs int64) bool {
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(abs)}
	if err := unix.TimerfdSettime(p.tfd, unix.TFD_TIMER_ABSTIME, &spec, nil); err != nil {
		p.armed = 0
		return false
	}
	p.armed = abs
	return true
}

// watching reports whether any fd is watched.
func (p *poller) watching() bool { return len(p.readers) > 0 }

// poll collects the readable reader fds afresh, without sleeping, for a loop
// that has timers due: readiness is level-triggered, so what the last wait
// found is found again, with what has arrived since.
func (p *poller) poll() bool {
	if len(p.readers) > 0 {
		p.ready = p.ready[:0]
		p.epoll(0)
	}
	return len(p.ready) > 0
}

// block is epoll(timeout), asleep in Go's netpoller if park and the epoll
// descriptor is there (a parked loop's, an unlocked loop's duplicate): it
// polls epoll, and when nothing is ready the goroutine parks until the
// netpoller finds the epoll descriptor readable (an event in its set: the
// timerfd, the eventfd, a watched descriptor), its P free meanwhile. A
// timeout in ms (only when the timerfd could not be armed) is epoll's own.
func (p *poller) block(timeout int, park bool) int {
	if p.erc == nil || timeout >= 0 || !park {
		return p.epoll(timeout)
	}
	n := 0
	if err := p.erc.Read(func(uintptr) bool {
		n = p.epoll(0)
		return n > 0
	}); err != nil {
		return p.epoll(timeout) // the file was closed (only close does, after the last wait)
	}
	return n
}

// epoll waits up to timeout ms (-1: no limit) and returns the number of events:
// readable readers are queued for runReady, the timerfd and eventfd are drained.
func (p *poller) epoll(timeout int) int {
	n, err := unix.EpollWait(p.epfd, p.events[:], timeout)
	if err != nil {
		return 0 // EINTR: the loop goes round and sleeps again
	}
	var buf [8]byte
	for _, ev := range p.events[:n] {
		switch ev.Fd {
		case int32(p.tfd):
			_, _ = unix.Read(p.tfd, buf[:])
			p.armed = 0 // one-shot: fired
		case int32(p.efd):
			_, _ = unix.Read(p.efd, buf[:])
		default:
			p.ready = append(p.ready, ev.Fd)
		}
	}
	return n
}

// runReady calls the callbacks of the fds found readable, unless they were
// removed meanwhile, and reports whether any of them left input behind.
func (p *poller) runReady() (more bool) {
	for _, fd := range p.ready {
		if f := p.readers[fd]; f != nil && f() {
			more = true
		}
	}
	p.ready = p.ready[:0]
	return more
}

func (p *poller) close() error {
	var errs []error
	p.netpoll(false)                // an unlocked loop's duplicate: out of the netpoller, closed
	if p.ef != nil && p.epfd >= 0 { // it owns the epoll descriptor: out of the netpoller, closed
		if err := p.ef.Close(); err != nil {
			errs = append(errs, err)
		}
		p.epfd = -1
	}
	for _, fd := range []*int{&p.tfd, &p.efd, &p.epfd} {
		if *fd >= 0 {
			if err := unix.Close(*fd); err != nil {
				errs = append(errs, os.NewSyscallError("close", err))
			}
			*fd = -1
		}
	}
	return errors.Join(errs...)
}

// MinRealTime and MaxRealTime bound SetRealTime's priority: Linux's
// SCHED_FIFO range (sched_get_priority_min and _max).
const (
	MinRealTime = 1
	MaxRealTime = 99
)

// SetRealTime puts the loop's thread under the real-time policy SCHED_FIFO at
// priority prio (MinRealTime to MaxRealTime), so that on a busy machine the
// loop runs as soon as its timer or a packet wakes it, ahead of every
// normally scheduled task, instead of waiting for a time slice. prio 0 puts it
// back under SCHED_OTHER (SCHED_NORMAL). The loop spins at most SetSpin's window (1 ms at
// most) before a deadline and otherwise sleeps, so it cannot hold a CPU; the
// kernel's real-time throttling (kernel.sched_rt_runtime_us) bounds it in any
// case. Where it is not permitted (EPERM: no CAP_SYS_NICE and too low an
// RLIMIT_RTPRIO, or a cgroup without real-time budget) it fails with an error
// that matches unix.EPERM and says so; the thread stays as it was. It may be
// called from any goroutine; it fails with timer.ErrClosed after Close. A
// parked or unlocked loop (NewParked, NewUnlocked) has no thread of its own:
// it fails for any priority but 0.
func (l *Loop) SetRealTime(prio int) error {
	if prio != 0 && (prio < MinRealTime || prio > MaxRealTime) {
		return fmt.Errorf("%w: real-time priority %d outside [%d, %d]", timer.ErrConfig, prio, MinRealTime, MaxRealTime)
	}
	select {
	case <-l.done:
		return timer.ErrClosed
	default:
	}
	if l.mode != threadLocked {
		if prio == 0 {
			return nil // under SCHED_OTHER, as every goroutine's thread
		}
		return errParkedRealTime
	}
	attr := unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: uint32(prio)}
	if prio == 0 {
		attr.Policy = unix.SCHED_NORMAL
	}
	err := unix.SchedSetAttr(l.p.tid, &attr, 0)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("loop: SCHED_FIFO priority %d for the loop's thread not permitted (needs root or CAP_SYS_NICE, or an RLIMIT_RTPRIO of %d; a cgroup may also give real-time tasks no CPU budget): %w",
			prio, prio, os.NewSyscallError("sched_setattr", err))
	}
	return fmt.Errorf("loop: scheduling policy of the loop's thread: %w", os.NewSyscallError("sched_setattr", err))
}

// errParkedRealTime is SetRealTime's error for a parked loop.
var errParkedRealTime = errors.New("loop: SetRealTime is not for a parked or unlocked loop (NewParked, NewUnlocked): its goroutine has no thread of its own")

// ThreadID returns the id of the OS thread the loop runs on (Linux's tid), for
// tools and tests that look at it (its scheduling policy, its CPU time); 0 for
// a parked or unlocked loop, which has none of its own.
func (l *Loop) ThreadID() int { return l.p.tid }

// Watch adds fd to the loop's epoll set: whenever fd is readable, the loop calls
// onReadable on its goroutine, first in a turn: before the posted functions and
// before the expiry of due timers (input before expiry; see the package doc).
// Readiness is level-triggered, so onReadable may read a bounded batch and leave
// the rest: it is called again on each turn of the loop while data remains.
// It reports whether it did leave some (it stopped at its bound, not because
// fd had nothing more): the loop then holds back the expiry of the timers due
// meanwhile until the input is drained, for at most MaxDeferredTurns turns in
// a row (see the package doc, "Order of work"). Watching an fd again replaces
// its function. The fd stays the caller's: Unwatch it before closing it.
// Watch may be called from any goroutine, the loop's included; it fails with
// timer.ErrClosed after Close.
func (l *Loop) Watch(fd int, onReadable func() (more bool)) error {
	if onReadable == nil {
		return timer.ErrNoFunc
	}
	return l.onLoopDo(func() error { return l.p.addReader(fd, onReadable) })
}

// Unwatch removes fd, added by Watch, from the loop's epoll set. Its function is
// not called after Unwatch returns.
func (l *Loop) Unwatch(fd int) error {
	return l.onLoopDo(func() error { return l.p.removeReader(fd) })
}

// onLoopDo runs f on the loop goroutine and returns its result.
func (l *Loop) onLoopDo(f func() error) error {
	select {
	case <-l.done:
		return timer.ErrClosed
	default:
	}
	if l.p.onLoop() {
		return f()
	}
	errc := make(chan error, 1)
	if err := l.Post(func() { errc <- f() }); err != nil {
		return err
	}
	return <-errc
}

func (p *poller) addReader(fd int, f func() bool) error {
	if fd < 0 || fd > math.MaxInt32 || fd == p.epfd || fd == p.tfd || fd == p.efd {
		return fmt.Errorf("loop: fd %d cannot be watched", fd)
	}
	if _, ok := p.readers[int32(fd)]; !ok {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			return os.NewSyscallError("epoll_ctl", err)
		}
	}
	if p.readers == nil {
		p.readers = make(map[int32]func() bool)
	}
	p.readers[int32(fd)] = f
	return nil
}

func (p *poller) removeReader(fd int) error {
	if _, ok := p.readers[int32(fd)]; !ok || fd < 0 || fd > math.MaxInt32 {
		return fmt.Errorf("loop: fd %d is not watched", fd)
	}
	delete(p.readers, int32(fd))
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil); err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}
