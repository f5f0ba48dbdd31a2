package compare

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"

	"github.com/tcpwheel/tcpwheel/cmd/tcpwheel/internal/baseline/gvisor"
	"github.com/tcpwheel/tcpwheel/cmd/tcpwheel/internal/compare/segwatch"
	"github.com/tcpwheel/tcpwheel/cmd/tcpwheel/internal/tcpipclock"
	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/tcpwheel/tcpwheel/timer"
	"github.com/tcpwheel/tcpwheel/tun"
)

// timerCounts are a wheel's counters, where the stack has a wheel.
type timerCounts struct {
	Fired, Stopped, Pending uint64
}

// listenCounts are a stack's listener counters, summed over its listeners.
type listenCounts struct {
	CookiesSent  uint64 // SYNs answered with a SYN cookie
	CookiesValid uint64 // connections made from a returned cookie
	BacklogDrops uint64 // SYNs dropped: the half-open table or the queue was full
}

// stackUnderTest is what a scenario needs from a stack; the three stacks differ
// only here.
type stackUnderTest interface {
	// Listen listens on the stack's port.
	Listen(port int) (net.Listener, error)
	// Dial connects to the kernel's port.
	Dial(ctx context.Context, port int) (net.Conn, error)
	// Sample returns the connection's current RTO (TCP_INFO-like) and its count
	// of RTO expirations. It may block on the stack: never call it from the
	// packet path.
	Sample(c net.Conn) segwatch.Sample
	// SetKeepAlive configures keepalive on the connection.
	SetKeepAlive(c net.Conn, cfg net.KeepAliveConfig) error
	// Timers reports the wheel's counters, and false for a stack without one.
	Timers() (timerCounts, bool)
	// ListenCounts reports the listeners' SYN cookie and drop counters.
	ListenCounts() listenCounts
	// InputPath says how the stack reads its packets, "direct" or "reader",
	// or "" when it cannot say.
	InputPath() string
	Close() error
}

// newStackUnderTest starts the named stack on devs, which it then owns (a
// tcpwheel stack runs a loop on each, stack.Config.Loops; the others take
// the first), at
// addr and, when valid, addr6 too; its Dial connects to the kernel at kernel
// (of either family: an IPv6 kernel address makes its Listen IPv6 too). tcpwheel-rec records into
// a temporary file in dir ("": the system's), removed when it closes. With
// recordPath, a tcpwheel stack writes a flight recording there, kept
// (compare -pcap). lim's non-zero fields replace the stacks' defaults (see
// runLimits).
func newStackUnderTest(name string, devs []tun.Device, addr, addr6, kernel netip.Addr, dir, recordPath string, lim limits) (stackUnderTest, error) {
	backlog := lim.backlog
	dev := devs[0]
	closeDevs := func() {
		for _, d := range devs {
			d.Close()
		}
	}
	switch name {
	case stackTcpwheel, stackTcpwheelRT, stackTcpwheelRec:
		cfg := stack.Config{Device: dev, Addr: addr, Addr6: addr6, Backlog: backlog, InputQueue: lim.inputQueue, WriteQueue: lim.writeQueue, SYNStash: lim.synStash, LoopThread: lim.loopThread}
		if len(devs) > 1 {
			cfg.Queues, cfg.Loops = devs[1:], len(devs)
		}
		t := &tcpwheelStack{kernel: kernel}
		switch name {
		case stackTcpwheelRT:
			cfg.RealTime, cfg.LoopThread = rtPriority, stack.LoopLocked
		}
		if recordPath != "" {
			f, err := os.Create(recordPath)
			if err != nil {
				closeDevs()
				return nil, err
			}
			t.rec, t.keep, cfg.Record, cfg.SYNStash = f, true, f, 0
		} else if name == stackTcpwheelRec {
			f, err := os.CreateTemp(dir, "tcpwheel-rec-*.pcapng")
			if err != nil {
				closeDevs()
				return nil, err
			}
			t.rec, cfg.Record, cfg.SYNStash = f, f, 0 // a recording replays each packet where it was read
		}
		s, err := stack.New(cfg)
		if err != nil {
			closeDevs()
			t.removeRecording()
			return nil, err
		}
		t.s = s
		return t, nil
	case stackGVisor:
		s, err := gvisor.New(gvisor.Config{Device: dev, Addr: addr, Addr6: addr6, ListenBacklog: backlog})
		if err != nil {
			return nil, err
		}
		return &gvisorStack{s: s, kernel: kernel}, nil
	case stackGVisorWheel:
		clock, err := tcpipclock.New(timer.Config{})
		if err != nil {
			dev.Close()
			return nil, err
		}
		s, err := gvisor.New(gvisor.Config{Device: dev, Addr: addr, Addr6: addr6, Clock: clock, ListenBacklog: backlog})
		if err != nil {
			clock.Close()
			return nil, err
		}
		return &gvisorStack{s: s, clock: clock, kernel: kernel}, nil
	}
	dev.Close()
	return nil, fmt.Errorf("unknown stack %q", name)
}

// addrPort returns "addr:port".
func addrPort(addr netip.Addr, port int) string {
	return net.JoinHostPort(addr.String(), strconv.Itoa(port))
}

// tcpwheelStack is tcpwheel's own stack.
type tcpwheelStack struct {
	s      *stack.Stack
	kernel netip.Addr
	rec    *os.File // the flight recording: tcpwheel-rec's, removed on Close, or compare -pcap's (keep); nil for none
	keep   bool
	once   sync.Once
	err    error
}

// errRecording is wrapped by the error of a tcpwheel-rec stack whose flight
// recording failed.
var errRecording = errors.New("flight recording failed")

// removeRecording closes and removes tcpwheel-rec's recording.
func (t *tcpwheelStack) removeRecording() {
	if t.rec != nil {
		t.rec.Close()
		if !t.keep {
			os.Remove(t.rec.Name())
		}
	}
}

func (t *tcpwheelStack) Listen(port int) (net.Listener, error) {
	return t.s.Listen(tcpNet(t.kernel), ":"+strconv.Itoa(port))
}

// tcpNet is the network of the kernel's family: "tcp4" or "tcp6".
func tcpNet(kernel netip.Addr) string {
	if kernel.Is6() {
		return "tcp6"
	}
	return "tcp4"
}

func (t *tcpwheelStack) Dial(ctx context.Context, port int) (net.Conn, error) {
	return t.s.DialContext(ctx, "tcp", addrPort(t.kernel, port))
}

func (t *tcpwheelStack) Sample(c net.Conn) segwatch.Sample {
	if tc, ok := c.(*stack.Conn); ok {
		i := tc.Info()
		return segwatch.Sample{RTO: i.RTO, Timeouts: i.RTOEvents, HasTimeouts: true}
	}
	return segwatch.Sample{}
}

func (t *tcpwheelStack) SetKeepAlive(c net.Conn, cfg net.KeepAliveConfig) error {
	return c.(*stack.Conn).SetKeepAliveConfig(cfg)
}

func (t *tcpwheelStack) Timers() (timerCounts, bool) {
	w := t.s.Stats().Wheel
	return timerCounts{Fired: w.Fired, Stopped: w.Stopped, Pending: uint64(w.Pending)}, true
}

func (t *tcpwheelStack) ListenCounts() listenCounts {
	l := t.s.Stats().Listen
	return listenCounts{CookiesSent: l.SynCookiesSent, CookiesValid: l.SynCookiesValid, BacklogDrops: l.DropsBacklog}
}

// InputPath implements stackUnderTest: "direct" on every scenario, since the
// device chain forwards tun.Pollable; "reader" would mean a wrapper hid it.
func (t *tcpwheelStack) InputPath() string { return t.s.Stats().InputPath }

// Close closes the stack; tcpwheel-rec's recording is then flushed, and
// removed. A recording that failed is the run's error: its figures would be
// those of a stack that stopped recording.
func (t *tcpwheelStack) Close() error {
	t.once.Do(func() {
		t.err = t.s.Close()
		if t.rec != nil {
			if err := t.s.RecordErr(); err != nil && t.err == nil {
				t.err = fmt.Errorf("%w: %w", errRecording, err)
			}
			t.removeRecording()
		}
	})
	return t.err
}

// gvisorStack is gVisor's netstack, on the Go runtime's timers or, with clock,
// on tcpwheel's wheel.
type gvisorStack struct {
	s      *gvisor.Stack
	clock  *tcpipclock.Clock // nil: tcpip.NewStdClock
	kernel netip.Addr
	once   sync.Once
}

func (g *gvisorStack) Listen(port int) (net.Listener, error) {
	return g.s.Listen(tcpNet(g.kernel), ":"+strconv.Itoa(port))
}

func (g *gvisorStack) Dial(ctx context.Context, port int) (net.Conn, error) {
	return g.s.DialContext(ctx, "tcp", addrPort(g.kernel, port))
}

func (g *gvisorStack) Sample(c net.Conn) segwatch.Sample {
	if gc, ok := c.(*gvisor.Conn); ok {
		i := gc.Info()
		return segwatch.Sample{RTO: i.RTO, Timeouts: i.Timeouts, HasTimeouts: true}
	}
	return segwatch.Sample{}
}

func (g *gvisorStack) SetKeepAlive(c net.Conn, cfg net.KeepAliveConfig) error {
	return c.(*gvisor.Conn).SetKeepAliveConfig(cfg)
}

func (g *gvisorStack) Timers() (timerCounts, bool) {
	if g.clock == nil {
		return timerCounts{}, false
	}
	st := g.clock.Stats()
	return timerCounts{Fired: st.Fired, Stopped: st.Stopped, Pending: uint64(st.Pending)}, true
}

func (g *gvisorStack) ListenCounts() listenCounts {
	t := g.s.GVisor().Stats().TCP
	return listenCounts{
		CookiesSent: t.ListenOverflowSynCookieSent.Value(), CookiesValid: t.ListenOverflowSynCookieRcvd.Value(),
		BacklogDrops: t.ListenOverflowSynDrop.Value(),
	}
}

// InputPath implements stackUnderTest: gVisor's link endpoint always reads
// through a goroutine.
func (g *gvisorStack) InputPath() string { return "reader" }

func (g *gvisorStack) Close() error {
	g.once.Do(func() {
		g.s.Close()
		if g.clock != nil {
			g.clock.Close()
		}
	})
	return nil
}

// speaksIPv6 reports whether the named stack runs the cases over IPv6.
func speaksIPv6(name string) bool {
	switch name {
	case stackTcpwheel, stackTcpwheelRT, stackTcpwheelRec, stackGVisor, stackGVisorWheel:
		return true
	}
	return false
}

// isTcpwheel reports whether name is one of tcpwheel's own stacks.
func isTcpwheel(name string) bool {
	switch name {
	case stackTcpwheel, stackTcpwheelRT, stackTcpwheelRec:
		return true
	}
	return false
}
