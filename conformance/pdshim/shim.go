// Package pdshim is the Go side of the packetdrill shim (conformance/shim): a
// socket API in the shape of packetdrill's shared-object interface, over a
// stack on the manual loop (stack.NewManual).
//
// Time is virtual. The stack's clock is a *timer.ManualClock that only the
// script moves: Usleep advances it, stopping at each timer deadline on the way
// so that every timer fires at its own instant; Now on packetdrill's main
// thread advances it by one microsecond per call (packetdrill spins on
// gettimeofday for the last microseconds before an event: a frozen clock would
// hold it forever, and one call is a deterministic amount of work); and
// NetdevReceive, when the stack has sent nothing, advances it to the next
// timer deadline until the stack sends. A run is therefore the same on every
// machine and under any load.
//
// Blocking calls block in virtual time. packetdrill makes the calls that a
// script expects to block (those with an end time, "...") on a thread of its
// own while its main thread goes on with the script; such a call waits until
// the main thread's packets or time let it complete, and reports the virtual
// instant it completed at (Hooks.Done). A call on the main thread that would
// block cannot be completed by anyone: it fails at once with EAGAIN and says
// so on stderr. poll and epoll_wait with a timeout on the main thread advance
// the clock through that timeout instead.
//
// No packet leaves the process: the stack's device is a queue that
// NetdevReceive empties.
package pdshim

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/timer"
)

// Epoch is the wall-clock time that virtual time 0 stands for in
// gettimeofday, in microseconds (2026-01-01T00:00:00Z).
const Epoch = 1767225600 * 1000000

// Bounds of the waits in virtual time.
const (
	// ReceiveLimit bounds how far NetdevReceive advances the clock looking for
	// a packet the stack might send.
	ReceiveLimit = 600 * time.Second
	// PollLimit bounds a poll or epoll_wait without a timeout on the main
	// thread.
	PollLimit = 600 * time.Second
	// maxSteps bounds the timer deadlines one advance goes through.
	maxSteps = 1 << 20
)

// CallGrace is how long, in real time, NetdevReceive with nothing to send
// waits for a call that packetdrill's syscall thread may be making before
// it says so (ErrNothingSent).
const CallGrace = 200 * time.Millisecond

// Addresses: the stack's, its prefix, and the default peer, all in
// 198.18.0.0/15 (the project's network rule).
var (
	DefaultLocal  = netip.MustParseAddr("198.18.0.1")
	defaultPrefix = netip.MustParsePrefix("198.18.0.0/15")
)

// Hooks connect the shim to its caller's threads. Main reports whether the
// calling thread is packetdrill's main thread; Done receives, on the calling
// thread, the virtual instant (µs since Epoch's origin, Epoch included) at
// which a call that waited completed. Unsupported receives the name of a call
// or option the shim does not implement. Nil hooks mean: every call is on the
// main thread, nothing is reported, unsupported names go to stderr.
type Hooks struct {
	Main        func() bool
	Done        func(usecs int64)
	Unsupported func(name string)
}

// Shim is one packetdrill run's stack and socket table. Its methods are safe
// for concurrent use (packetdrill calls from two threads).
type Shim struct {
	mu    sync.Mutex
	hooks Hooks
	clk   *timer.ManualClock
	st    *stack.Manual
	dev   *queueDev
	local netip.Addr

	files   map[int]any // *sock or *epollSet, by descriptor
	waiter  *waiter     // the call blocked on packetdrill's syscall thread, if any
	sysctls sysctls
	closed  bool
}

// Options configure New. Their zero values are the defaults.
type Options struct {
	// Local is the stack's address (packetdrill's --local_ip); it must be in
	// 198.18.0.0/15.
	Local netip.Addr
	// Sysctls names a file of "name=value" lines (net.ipv4.tcp_sack=1) that
	// the run's script set, read at each socket(): see sysctls.go.
	Sysctls string
	Hooks   Hooks
}

// New starts a shim on a fresh stack whose clock reads 0.
func New(o Options) (*Shim, error) {
	if !o.Local.IsValid() {
		o.Local = DefaultLocal
	}
	if !defaultPrefix.Contains(o.Local) {
		return nil, fmt.Errorf("pdshim: local address %v is outside %v", o.Local, defaultPrefix)
	}
	clk := timer.NewManualClock(0)
	dev := &queueDev{clk: clk, qdisc: &qdisc{path: o.Sysctls}}
	st, err := stack.NewManual(stack.Config{
		Device: dev, Addr: o.Local, Prefix: defaultPrefix, Clock: clk, TCP: linuxTCP(),
	})
	if err != nil {
		return nil, fmt.Errorf("pdshim: %w", err)
	}
	s := &Shim{hooks: o.Hooks, clk: clk, st: st, dev: dev, local: o.Local, files: make(map[int]any)}
	s.sysctls.path = o.Sysctls
	return s, nil
}

// Close closes the stack and fails a blocked call with EBADF. The sockets'
// descriptors are left to packetdrill, which closes them itself (newFD).
func (s *Shim) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if w := s.waiter; w != nil {
		w.finish(syscall.EBADF, s.clk.Now())
		s.waiter = nil
	}
	_ = s.st.Close()
}

func (s *Shim) main() bool { return s.hooks.Main == nil || s.hooks.Main() }

func (s *Shim) unsupported(name string) error {
	if s.hooks.Unsupported != nil {
		s.hooks.Unsupported(name)
	} else {
		fmt.Fprintf(os.Stderr, "unsupported: %s\n", name)
	}
	return syscall.ENOSYS
}

// usecs is virtual time t as gettimeofday shows it.
func usecs(t time.Duration) int64 { return Epoch + int64(t/time.Microsecond) }

// Now returns the virtual time in µs, after advancing the clock by 1 µs (see
// the package comment). packetdrill's two threads never call it at the same
// time: while its syscall thread waits for a blocking call's start time, the
// main thread waits for that call to block.
func (s *Shim) Now() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.advanceTo(s.clk.Now() + time.Microsecond)
	}
	return usecs(s.clk.Now())
}

// Usleep advances virtual time by d µs, firing the timers due on the way at
// their instants.
func (s *Shim) Usleep(d int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed && d > 0 {
		s.advanceTo(s.clk.Now() + time.Duration(d)*time.Microsecond)
	}
}

// advanceTo moves the clock to t, deadline by deadline, and after each step
// lets the blocked call try again. It runs with mu held.
func (s *Shim) advanceTo(t time.Duration) {
	for range maxSteps {
		d, ok := s.st.NextDeadline()
		if !ok || d > t {
			break
		}
		_ = s.st.AdvanceTo(max(d, s.clk.Now()))
		s.poke()
	}
	_ = s.st.AdvanceTo(t)
	s.poke()
}

// NetdevSend hands the stack one IPv4 packet from the script, at the current
// virtual time.
func (s *Shim) NetdevSend(pkt []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return syscall.EBADF
	}
	if err := s.st.Inject(pkt); err != nil {
		return syscall.EIO
	}
	s.poke()
	return nil
}

// ErrNothingSent is NetdevReceive's error when the stack has nothing to send
// and no timer that might make it send within ReceiveLimit.
var ErrNothingSent = errors.New("the stack sends nothing more")

// NetdevReceive copies the next packet the stack sent into buf and returns its
// length and its send instant (µs, as Now). With nothing queued it advances
// virtual time to the next timer deadline until the stack sends, for at most
// ReceiveLimit.
func (s *Shim) NetdevReceive(buf []byte) (int, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, 0, syscall.EBADF
	}
	limit := s.clk.Now() + ReceiveLimit
	var grace time.Time // when the wait for a call on its way ends (real time)
	for range maxSteps {
		if p, ok := s.dev.pop(); ok {
			return copy(buf, p.data), usecs(p.at), nil
		}
		d, ok := s.st.NextDeadline()
		if !ok || d > limit {
			if s.waiter == nil {
				// No blocking call is registered: packetdrill's syscall
				// thread may be on its way into one that it has started
				// (packetdrill goes on once that thread sleeps, and it
				// can sleep in the Go runtime before the call reaches
				// the shim: a connect whose SYN is then missing). Let
				// it in, for CallGrace of real time at most.
				if grace.IsZero() {
					grace = time.Now().Add(CallGrace)
				}
				if time.Now().Before(grace) {
					s.mu.Unlock()
					time.Sleep(100 * time.Microsecond)
					s.mu.Lock()
					if s.closed {
						return 0, 0, syscall.EBADF
					}
					continue
				}
			}
			return 0, 0, fmt.Errorf("%w (virtual time %v, no timer before %v)", ErrNothingSent, s.clk.Now(), limit)
		}
		s.advanceTo(max(d, s.clk.Now()))
	}
	return 0, 0, ErrNothingSent
}

// A waiter is a call blocked on packetdrill's syscall thread: try runs after
// every step of the stack (poke) until it reports that the call is over.
type waiter struct {
	fd   int
	try  func(now time.Duration) bool
	err  error
	at   time.Duration
	done chan struct{}
}

func (w *waiter) finish(err error, at time.Duration) {
	w.err, w.at = err, at
	close(w.done)
}

// poke lets the blocked call try again. It runs with mu held.
func (s *Shim) poke() {
	if w := s.waiter; w != nil && w.try(s.clk.Now()) {
		s.waiter = nil
		w.finish(nil, s.clk.Now())
	}
}

// errWouldBlock is block's error on the main thread.
var errWouldBlock = syscall.EAGAIN

// block runs try until it reports the call over. It runs with mu held, and
// returns with it held. On packetdrill's syscall thread it waits for the main
// thread's packets and time (try runs in poke); on the main thread nothing
// else could complete the call, so it fails with EAGAIN and a note on stderr,
// unless advance is set: then it moves virtual time on, deadline by deadline,
// up to until (poll's timeout), trying after each step.
func (s *Shim) block(name string, fd int, until time.Duration, advance bool, try func(now time.Duration) bool) error {
	if try(s.clk.Now()) {
		s.done()
		return nil
	}
	if s.main() {
		if !advance {
			fmt.Fprintf(os.Stderr, "pdshim: %s would block on packetdrill's main thread (the script does not expect it to block): EAGAIN\n", name)
			return errWouldBlock
		}
		for range maxSteps {
			d, ok := s.st.NextDeadline()
			if !ok || d > until {
				break
			}
			s.advanceTo(max(d, s.clk.Now()))
			if try(s.clk.Now()) {
				return nil
			}
		}
		s.advanceTo(until)
		try(s.clk.Now())
		return nil
	}
	if s.waiter != nil {
		return syscall.EBUSY
	}
	w := &waiter{fd: fd, try: try, done: make(chan struct{})}
	s.waiter = w
	s.mu.Unlock()
	<-w.done
	s.mu.Lock()
	if s.hooks.Done != nil {
		s.hooks.Done(usecs(w.at))
	}
	return w.err
}

// done reports a call off the main thread that did not need to wait as done
// now, so that packetdrill's syscall thread reads the clock without moving it.
func (s *Shim) done() {
	if !s.main() && s.hooks.Done != nil {
		s.hooks.Done(usecs(s.clk.Now()))
	}
}

// errno turns a stack error into the errno a Linux socket gives.
func errno(err error) error {
	var e syscall.Errno
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e):
		return e
	case errors.Is(err, io.EOF):
		return nil
	case errors.Is(err, tcp.ErrClosed):
		return syscall.EBADF
	}
	return syscall.EIO
}

// queueDev is the stack's link: WritePacket queues each packet with its send
// instant for NetdevReceive. ReadPacket is never called on a manual stack.
type queueDev struct {
	mu    sync.Mutex
	clk   *timer.ManualClock
	q     []sent
	qdisc *qdisc // the tc stand-in's root qdisc (qdisc.go)
}

type sent struct {
	data []byte
	at   time.Duration
}

func (d *queueDev) ReadPacket([]byte) (int, error) { return 0, io.EOF }

func (d *queueDev) WritePacket(pkt []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.qdisc.dropping() {
		return nil // dropped by the qdisc, as a real one does: silently
	}
	d.q = append(d.q, sent{data: append([]byte(nil), pkt...), at: d.clk.Now()})
	return nil
}

func (d *queueDev) pop() (sent, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.q) == 0 {
		return sent{}, false
	}
	p := d.q[0]
	d.q = d.q[1:]
	return p, true
}

func (d *queueDev) MTU() int     { return 1500 }
func (d *queueDev) Name() string { return "pdshim" }
func (d *queueDev) Close() error { return nil }

// waiting reports whether a call is blocked on packetdrill's syscall thread.
func (s *Shim) waiting() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiter != nil
}
