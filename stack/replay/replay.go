package replay

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
	"github.com/tcpwheel/tcpwheel/timer"
	"github.com/tcpwheel/tcpwheel/tun"
)

// DefaultTolerance is how far, beyond one tick, a replayed segment's instant
// may be from the recorded one: the recording's scheduling jitter.
const DefaultTolerance = 2 * time.Millisecond

// Options configure Run.
type Options struct {
	// Script is the stack's configuration and application; nil means
	// DeriveScript.
	Script *Script
	// Tolerance is added to one tick in comparing instants; zero means
	// DefaultTolerance.
	Tolerance time.Duration
}

// Output is a packet the replayed stack sent.
type Output struct {
	At  time.Duration // since the capture's first event
	Raw []byte
	Seg tcp.Segment
}

// Diff is one mismatch between the recording and the replay.
type Diff struct {
	Index  int    // the stack's packet, counted from 1
	Packet int    // the expected packet's number in the capture; 0 for an extra packet
	Want   string // the recorded packet, or "" if the replay sent one more
	Got    string // the replayed packet, or "" if the replay sent nothing
	Fields []string
}

func (d Diff) String() string {
	var b strings.Builder
	if d.Packet > 0 {
		fmt.Fprintf(&b, "packet %d (the stack's #%d)", d.Packet, d.Index)
	} else {
		fmt.Fprintf(&b, "extra packet (the stack's #%d)", d.Index)
	}
	if len(d.Fields) > 0 {
		fmt.Fprintf(&b, ": %s differ", strings.Join(d.Fields, ", "))
	}
	want, got := d.Want, d.Got
	if want == "" {
		want = "nothing"
	}
	if got == "" {
		got = "nothing"
	}
	fmt.Fprintf(&b, "\n  want %s\n  got  %s", want, got)
	return b.String()
}

// Result is the outcome of Run.
type Result struct {
	Expected int      // packets the stack sent in the capture
	Got      []Output // packets the replayed stack sent
	Diffs    []Diff
}

// Err returns nil if the replay matched, else an error listing the diffs.
func (r *Result) Err() error {
	if len(r.Diffs) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "replay: %d mismatches (%d packets expected from the stack, %d sent):", len(r.Diffs), r.Expected, len(r.Got))
	for i, d := range r.Diffs {
		if i == 10 {
			fmt.Fprintf(&b, "\n... and %d more", len(r.Diffs)-i)
			break
		}
		b.WriteString("\n")
		b.WriteString(d.String())
	}
	return errors.New(b.String())
}

// device is the replayed stack's link: it records what the stack writes, at
// the manual clock's time.
type device struct {
	mtu   int
	clock *timer.ManualClock
	base  time.Duration
	mu    sync.Mutex
	out   []Output
}

var _ tun.Device = (*device)(nil)

func (d *device) ReadPacket([]byte) (int, error) { return 0, net.ErrClosed }
func (d *device) WritePacket(pkt []byte) error {
	if len(pkt) == 0 || len(pkt) > d.mtu {
		return tun.ErrPacketSize
	}
	p, err := parseIPv4TCP(append([]byte(nil), pkt...))
	if err != nil {
		return nil // not TCP: nothing to compare (the stack sends ICMP only in reply)
	}
	d.mu.Lock()
	d.out = append(d.out, Output{At: d.clock.Now() - d.base, Raw: p.Raw, Seg: p.Seg})
	d.mu.Unlock()
	return nil
}
func (d *device) MTU() int     { return d.mtu }
func (d *device) Name() string { return "replay" }
func (d *device) Close() error { return nil }
func (d *device) outputs() []Output {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.out
}

// Run replays sess against a fresh stack and compares what it sends with the
// capture. The error is for a replay that could not run (a bad script);
// mismatches are in the Result.
func Run(sess *Session, opt Options) (*Result, error) {
	sc := opt.Script
	if sc == nil {
		sc = DeriveScript(sess)
	}
	tol := opt.Tolerance
	if tol <= 0 {
		tol = DefaultTolerance
	}
	tick := time.Duration(sc.Tick)
	if tick == 0 {
		tick = timer.DefaultTick
	}
	mtu := sc.MTU
	if mtu == 0 {
		mtu = tun.DefaultMTU
	}
	t0 := sess.Packets[0].Time.UnixNano()
	if len(sc.Actions) > 0 && sc.Actions[0].T < t0 {
		t0 = sc.Actions[0].T
	}
	off := func(t int64) time.Duration { return time.Duration(t - t0) }
	base, tsOff := startInstant(sess, off)
	mc := timer.NewManualClock(base)
	dev := &device{mtu: mtu, clock: mc, base: base}
	cfg := sc.TCP.Config()
	isn := sess.StackISN
	cfg.ISN = func(tcp.ID, time.Duration) seqnum.Value { return isn }
	cfg.TSOffset = func(tcp.ID, seqnum.Value) uint32 { return tsOff }
	s, err := stack.NewManual(stack.Config{
		Device: dev, Addr: sess.Stack.Addr(), Tick: tick, Clock: mc, TCP: cfg,
	})
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	defer s.Close()

	a := &app{s: s, data: stream(sess), autoRead: !sc.ExplicitReads}
	if sess.Passive && !sc.Closed {
		ln, err := s.Listen("tcp", ":"+strconv.Itoa(int(sess.Stack.Port())))
		if err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
		a.ln = ln.(*stack.Listener)
	}
	if !sess.Passive {
		// The stack opened the connection: dial at the instant of its SYN.
		if err := s.AdvanceTo(base + off(sess.Packets[0].Time.UnixNano())); err != nil {
			return nil, err
		}
		c, err := s.StartDial("tcp", sess.Stack.Port(), sess.Peer.String())
		if err != nil {
			return nil, fmt.Errorf("replay: packet %d: %w", sess.Packets[0].N, err)
		}
		a.conn = c
	}
	acts := sc.Actions
	at := func(d time.Duration) error { return s.AdvanceTo(base + d) }
	var last time.Duration
	for i, p := range sess.Packets {
		t := off(p.Time.UnixNano())
		last = max(last, t)
		for len(acts) > 0 && off(acts[0].T) < t {
			if err := a.act(acts[0], at(off(acts[0].T))); err != nil {
				return nil, err
			}
			acts = acts[1:]
		}
		if sess.FromStack[i] {
			continue
		}
		if err := at(t); err != nil {
			return nil, err
		}
		if err := s.Inject(p.Raw); err != nil {
			return nil, fmt.Errorf("replay: packet %d: %w", p.N, err)
		}
		a.poll()
	}
	for _, ac := range acts {
		last = max(last, off(ac.T))
		if err := a.act(ac, at(off(ac.T))); err != nil {
			return nil, err
		}
	}
	if err := at(last + tick + tol); err != nil {
		return nil, err
	}
	return compare(sess, dev.outputs(), off, tick+tol), nil
}

// startInstant picks the manual clock's reading at the capture's first
// event, and the offset of the stack's timestamp clock. A tcpwheel stack's
// TSval is its clock in milliseconds plus an offset, so the stack's first
// TSval tells its clock at that packet once the offset is known. Until
// 2026-11-24 the offset was the ISN: when that makes a plausible clock (a
// reading of at most a day, not before the capture's start) the clock
// starts to match it (to within half a millisecond). Else (a capture of a
// stack whose offset is a hash of the addresses, tcp.Config.TSOffset) the
// clock starts at a second, mid-millisecond at the first TSval, and the
// offset is what makes that TSval. Either way the replayed TSvals, and the
// RTT samples taken from the peer's echoes of them, are those of the
// recording.
func startInstant(sess *Session, off func(int64) time.Duration) (time.Duration, uint32) {
	const fallback = time.Second
	isn := uint32(sess.StackISN)
	for i, p := range sess.Packets {
		if !sess.FromStack[i] {
			continue
		}
		if !p.Seg.Options.TS || !sess.HasStackISN {
			return fallback, isn
		}
		at := off(p.Time.UnixNano())
		ms := time.Duration(p.Seg.Options.TSVal-isn) * time.Millisecond
		if base := ms + 500*time.Microsecond - at; base >= 0 && ms <= 24*time.Hour {
			return base, isn
		}
		ms = (fallback + at).Truncate(time.Millisecond)
		return ms + 500*time.Microsecond - at, p.Seg.Options.TSVal - uint32(ms/time.Millisecond)
	}
	return fallback, isn
}

// app is the replayed application: it accepts the connection and performs the
// script's actions in order, a write holding back what follows until the send
// buffer has taken it all, a read until it has had its bytes. Without
// explicit reads it reads all that arrives at once.
type app struct {
	s       *stack.Manual
	ln      *stack.Listener
	conn    *stack.Conn
	data    []byte // the stack's stream
	written int
	queue   []Action
	partial int // bytes of queue[0] written, for a write
	readEnd bool
	// autoRead: read all that arrives at once, else only at OpRead actions
	autoRead bool
	buf      [4096]byte
}

func (a *app) act(ac Action, advErr error) error {
	if advErr != nil {
		return advErr
	}
	a.queue = append(a.queue, ac)
	a.poll()
	return nil
}

// poll does what the application can do now. Bounded: each pass makes
// progress or stops.
func (a *app) poll() {
	for range 1 << 16 {
		if a.conn == nil && a.ln != nil {
			if c, ok := a.ln.TryAccept(); ok {
				a.conn = c
			}
		}
		if a.conn == nil {
			return
		}
		progress := false
		for a.autoRead && !a.readEnd {
			n, err := a.conn.TryRead(a.buf[:])
			if err != nil {
				a.readEnd = true
			}
			if n == 0 {
				break
			}
			progress = true
		}
		if len(a.queue) > 0 {
			ac := a.queue[0]
			switch ac.Op {
			case OpWrite:
				want := ac.N - a.partial
				p := make([]byte, want)
				if a.written < len(a.data) {
					copy(p, a.data[a.written:])
				}
				n, err := a.conn.TryWrite(p)
				a.partial += n
				a.written += n
				if n > 0 {
					progress = true
				}
				if a.partial == ac.N || err != nil {
					a.queue, a.partial, progress = a.queue[1:], 0, true
				}
			case OpRead:
				n, err := a.conn.TryRead(a.buf[:min(len(a.buf), ac.N-a.partial)])
				a.partial += n
				if n > 0 {
					progress = true
				}
				if a.partial == ac.N || err != nil {
					a.queue, a.partial, progress = a.queue[1:], 0, true
				}
			case OpClose:
				a.conn.Close()
				a.queue, progress = a.queue[1:], true
			case OpCloseWrite:
				a.conn.CloseWrite()
				a.queue, progress = a.queue[1:], true
			case OpAbort:
				a.conn.Abort()
				a.queue, progress = a.queue[1:], true
			}
		}
		if !progress {
			return
		}
	}
}
