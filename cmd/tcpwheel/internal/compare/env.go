package compare

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/tcpwheel/tcpwheel/cmd/tcpwheel/internal/compare/segwatch"
	"github.com/tcpwheel/tcpwheel/internal/testbed"
	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/impair"
)

// runEnv is one run: a fresh namespace with the kernel side, the device chain
// and the stack under test.
//
//	stack ── segwatch ── pcap tap ── impair ── TUN ── kernel (namespace)
//
// (a testbed.Bed, with the watcher on top).
type runEnv struct {
	ctx   context.Context
	cfg   Config
	c     compareCase
	run   int
	stack stackUnderTest
	bed   *testbed.Bed
	w     *segwatch.Watcher
	res   *runResult

	// The scenario's drop decisions, called by impair for every packet.
	dropEgress, dropIngress atomic.Pointer[func(pkt []byte) bool]
	egressPackets           atomic.Uint64

	cleanups []func()
	mu       sync.Mutex
}

// runOne runs case c once on the named stack and returns the result; failures
// are recorded in it. Everything the run made is gone when it returns.
func runOne(parent context.Context, cfg Config, c compareCase, stackName string, run int) *runResult {
	res := &runResult{Stack: stackName, Case: c.name, Run: run + 1, Metrics: map[string]float64{}}
	ctx, cancel := context.WithTimeout(parent, cfg.RunTimeout)
	defer cancel()
	start := time.Now()
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
			}
		}()
		e, err := newRunEnv(ctx, cfg, c, stackName, run, res)
		if err != nil {
			return err
		}
		sc, ok := scenarioNamed(c.scenario)
		defer func() {
			res.InputPath = e.stack.InputPath()
			switch t := e.stack.(type) {
			case *tcpwheelStack:
				ss := t.s.Stats()
				res.Loops, res.LoopThread = ss.Loops, ss.LoopThread
			case *childStack:
				ss := t.latest() // a round trip to the child
				res.Loops, res.LoopThread, res.ServerPID = ss.Loops, ss.LoopThread, t.pid
			}
			if ok && !sc.unwatched {
				res.collectEvents(e.w.Events())
			}
			res.addKernelCounters(e.bed)
			if ok && sc.udp {
				delete(res.Metrics, "kernel_dup_segments")
				delete(res.Metrics, "kernel_syn_retrans")
			}
			if clientOnly(stackName) {
				// The bed's TUN, whose queue drops it counts, is not their link.
				delete(res.Metrics, "tun_queue_drops")
			}
			if cerr := e.close(); cerr != nil && err == nil {
				err = cerr
			}
		}()
		// On timeout or SIGINT, tear everything down at once: blocked reads,
		// writes and accepts return.
		stop := context.AfterFunc(ctx, func() { e.closeNow() })
		defer stop()
		if !ok {
			return fmt.Errorf("unknown scenario %q", c.scenario)
		}
		if cfg.Load > 0 {
			h, err := startHogs(cfg.Load, cfg.hogCommand(), cfg.RunTimeout)
			if err != nil {
				return err
			}
			defer h.stop()
			res.Load = cfg.Load
		}
		return sc.run(e)
	}()
	res.WallMS = ms(time.Since(start))
	if err != nil {
		if ctx.Err() != nil && parent.Err() == nil {
			err = fmt.Errorf("%w (run timeout %v)", err, cfg.RunTimeout)
		}
		res.Error = err.Error()
	}
	return res
}

func newRunEnv(ctx context.Context, cfg Config, c compareCase, stackName string, run int, res *runResult) (_ *runEnv, err error) {
	e := &runEnv{ctx: ctx, cfg: cfg, c: c, run: run, res: res}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	bcfg := testbed.Config{
		Prefix: "twc",
		MTU:    tun.DefaultMTU,
		// tcpwheel's stacks on a TUN with offloads: the chain's wrappers
		// pass its GSO frames (segment by segment to the loss and the
		// watcher), not GRO (see testbed.Config.Offload); a plain one
		// with -no-offload.
		Offload: isTcpwheel(stackName) && !cfg.NoOffload,
		Impair: impair.Config{
			// The same seed for every stack in a run: the same packets are lost.
			Seed:        cfg.Seed + uint64(run),
			EgressLoss:  c.loss,
			IngressLoss: c.loss,
			DropEgress: func(pkt []byte) bool {
				e.egressPackets.Add(1)
				if f := e.dropEgress.Load(); f != nil {
					return (*f)(pkt)
				}
				return false
			},
			DropIngress: func(pkt []byte) bool {
				if f := e.dropIngress.Load(); f != nil {
					return (*f)(pkt)
				}
				return false
			},
		},
	}
	if sc, ok := scenarioNamed(c.scenario); ok && sc.clients && c.loss == 0 {
		// A real-client scenario drops nothing and counts no packets at
		// the chain: without an impairment layer, tcpwheel's GSO frames
		// reach the TUN whole, as gvisor-gso's do (its TUN is off the
		// chain), instead of being taken apart segment by segment to be
		// judged (3-8% of a download's CPU per GB). The testbed still
		// puts a plain device behind one (testbed.Config.Offload).
		bcfg.Impair = impair.Config{}
	}
	bcfg.IPv6 = c.v6
	lim := runLimits(cfg, c)
	bcfg.TxQueueLen = lim.inputQueue
	if lim.loops > 1 && (stackName == stackTcpwheel || stackName == stackTcpwheelRT) {
		bcfg.Queues = lim.loops // a queue per loop (stack.Config.Loops)
	}
	_, stackAddr, err := bcfg.Addrs()
	if err != nil {
		return nil, err
	}
	if c.v6 {
		_, stackAddr = bcfg.Addrs6()
	}
	e.w = segwatch.New(segwatch.Config{Local: stackAddr})
	e.cleanups = append(e.cleanups, e.w.Close)
	// The real-client scenarios that time a server serve from a child
	// process (server_child.go), which puts the pcap tap on its own chain.
	sc, _ := scenarioNamed(c.scenario)
	served := sc != nil && sc.served && !cfg.InProcess
	recordPath, pcapPath := "", ""
	if cfg.PcapDir != "" {
		// tcpwheel's stacks write a flight recording (replayable with
		// tcpwheel replay); gVisor's get a pcap tap on the device chain.
		path := filepath.Join(cfg.PcapDir, fmt.Sprintf("%s-%s-%d.pcap", c.name, stackName, run+1))
		path = strings.ReplaceAll(path, "%", "pct")
		switch {
		case isTcpwheel(stackName):
			recordPath = path + "ng"
		case !clientOnly(stackName) && served:
			pcapPath = path
		case !clientOnly(stackName): // kernel and gvisor-gso do not use the chain: no capture
			bcfg.PcapPath = path
		}
	}
	if sc, ok := scenarioNamed(c.scenario); ok && !sc.unwatched {
		bcfg.Watch = func(dev tun.Device) tun.Device { return segwatch.Wrap(dev, e.w) }
	}
	if e.bed, err = testbed.New(bcfg); err != nil {
		return nil, err
	}
	res.Pcap = bcfg.PcapPath
	if pcapPath != "" {
		res.Pcap = pcapPath
	}
	if recordPath != "" {
		res.Pcap = recordPath
	}
	switch {
	case served:
		var cs *childStack
		if cs, err = e.startServer(stackName, lim, bcfg.Offload, recordPath, pcapPath); err == nil {
			e.stack = cs
		}
	case stackName == stackKernel:
		e.stack = &kernelStack{bed: e.bed}
	case stackName == stackGVisorGSO:
		e.stack, err = newGVisorGSO(e.bed, lim.backlog)
	default:
		kernel := e.bed.KernelAddr
		if c.v6 {
			kernel = e.bed.KernelAddr6
		}
		e.stack, err = newStackUnderTest(stackName, e.bed.Devs, e.bed.StackAddr, e.bed.StackAddr6, kernel, cfg.PcapDir, recordPath, lim)
	}
	if err != nil {
		return nil, err
	}
	return e, nil
}

// onClose adds a cleanup, run (last first) when the run ends.
func (e *runEnv) onClose(f func()) {
	e.mu.Lock()
	e.cleanups = append(e.cleanups, f)
	e.mu.Unlock()
}

// closeNow closes the stack and the namespace, which unblocks everything.
func (e *runEnv) closeNow() {
	if e.stack != nil {
		e.stack.Close()
	}
	e.bed.Close()
}

// close runs the cleanups: connections, the stack, the watcher, the namespace.
func (e *runEnv) close() error {
	e.mu.Lock()
	cs := e.cleanups
	e.cleanups = nil
	e.mu.Unlock()
	var recErr error
	if e.stack != nil {
		// The stack goes first: it aborts its connections and closes the device
		// chain (the pcap tap flushes).
		if err := e.stack.Close(); errors.Is(err, errRecording) {
			recErr = err
		}
	}
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
	if e.bed != nil {
		if err := e.bed.Close(); err != nil {
			return fmt.Errorf("cleaning up: %w", err)
		}
	}
	return recErr
}

// setDrop installs the scenario's drop decisions (nil: none).
func (e *runEnv) setDrop(egress, ingress func(pkt []byte) bool) {
	if egress != nil {
		e.dropEgress.Store(&egress)
	} else {
		e.dropEgress.Store(nil)
	}
	if ingress != nil {
		e.dropIngress.Store(&ingress)
	} else {
		e.dropIngress.Store(nil)
	}
}

// deadline is the run's deadline, for every socket.
func (e *runEnv) deadline() time.Time {
	d, ok := e.ctx.Deadline()
	if !ok {
		d = time.Now().Add(e.cfg.RunTimeout)
	}
	return d
}

// now reads the watcher's clock: every time of a run is on it.
func (e *runEnv) now() time.Duration { return e.w.Now() }

// track samples c's RTO and RTO expirations after every packet of its flow.
func (e *runEnv) track(c net.Conn) {
	f := flowOf(c)
	e.w.Track(f, func() segwatch.Sample { return e.stack.Sample(c) })
}

func flowOf(c net.Conn) segwatch.Flow {
	l, _ := netip.ParseAddrPort(c.LocalAddr().String())
	r, _ := netip.ParseAddrPort(c.RemoteAddr().String())
	return segwatch.Flow{Local: l, Remote: r}
}

// kernelListen listens on the kernel's port inside the namespace; rcvbuf > 0
// sets SO_RCVBUF before listen, so that accepted sockets get it.
func (e *runEnv) kernelListen(port, rcvbuf int) (net.Listener, error) {
	listen := e.bed.KernelListen
	if e.c.v6 {
		listen = e.bed.KernelListen6
	}
	ln, err := listen(e.ctx, port, rcvbuf)
	if err != nil {
		return nil, err
	}
	e.onClose(func() { ln.Close() })
	return ln, nil
}

// kernelDial connects from the namespace to the stack's port.
func (e *runEnv) kernelDial(port int) (net.Conn, error) {
	dial := e.bed.KernelDial
	if e.c.v6 {
		dial = e.bed.KernelDial6
	}
	c, err := dial(e.ctx, port, nil)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(e.deadline())
	e.onClose(func() { c.Close() })
	return c, nil
}

// stackDial connects the stack to the kernel's port, with the run's deadline.
func (e *runEnv) stackDial(port int) (net.Conn, error) {
	c, err := e.stack.Dial(e.ctx, port)
	if err != nil {
		return nil, fmt.Errorf("stack dial: %w", err)
	}
	c.SetDeadline(e.deadline())
	e.onClose(func() { c.Close() })
	return c, nil
}

// accept accepts one connection, with the run's deadline.
func (e *runEnv) accept(ln net.Listener) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		ch <- result{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("accept: %w", r.err)
		}
		r.c.SetDeadline(e.deadline())
		e.onClose(func() { r.c.Close() })
		return r.c, nil
	case <-e.ctx.Done():
		ln.Close()
		return nil, fmt.Errorf("accept: %w", e.ctx.Err())
	}
}

// cpuTime is the process's user plus system CPU time: every thread, the
// stack's, the Go runtime's, and the kernel work done in our syscalls (the
// kernel peer's too, where it runs in them).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU is the CPU time of the process the stack under test and its
// HTTP server run in: its server child's (server_child.go), or this
// process's (cpuTime).
func (e *runEnv) serverCPU() (time.Duration, error) {
	if c, ok := e.stack.(*childStack); ok {
		return c.cpu()
	}
	return cpuTime(), nil
}

// serverCPUOver runs f and returns the server's CPU time over it
// (serverCPU); f's error first.
func (e *runEnv) serverCPUOver(f func() error) (time.Duration, error) {
	c0, err := e.serverCPU()
	if err != nil {
		return 0, err
	}
	if err := f(); err != nil {
		return 0, err
	}
	c1, err := e.serverCPU()
	return c1 - c0, err
}

// measure records the CPU time and the wheel's counters over f.
func (e *runEnv) measure(f func() error) error {
	t0, _ := e.stack.Timers()
	c0 := cpuTime()
	err := f()
	e.res.Metrics["cpu_ms"] = ms(cpuTime() - c0)
	if t1, ok := e.stack.Timers(); ok {
		e.res.Metrics["timers_fired"] = float64(t1.Fired - t0.Fired)
		e.res.Metrics["timers_stopped"] = float64(t1.Stopped - t0.Stopped)
	}
	return err
}

// tcpInfo is what the scenarios' drop decisions read from a packet.
type tcpInfo struct {
	src, dst netip.AddrPort
	seq      uint32
	flags    header.TCPFlags
	payload  int
}

// parseTCPPacket reads a TCP packet over IPv4 or IPv6 (segwatch.TCPPacket).
func parseTCPPacket(pkt []byte) (tcpInfo, bool) {
	src, dst, t, ok := segwatch.TCPPacket(pkt)
	if !ok {
		return tcpInfo{}, false
	}
	if len(t) < header.TCPMinimumSize || int(t.DataOffset()) > len(t) || int(t.DataOffset()) < header.TCPMinimumSize {
		return tcpInfo{}, false
	}
	return tcpInfo{
		src:     netip.AddrPortFrom(src, t.SourcePort()),
		dst:     netip.AddrPortFrom(dst, t.DestinationPort()),
		seq:     t.SequenceNumber(),
		flags:   t.Flags(),
		payload: len(t) - int(t.DataOffset()),
	}, true
}

func (t tcpInfo) has(f header.TCPFlags) bool { return t.flags&f == f }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// errShort is returned when a peer got less than it should have.
var errShort = errors.New("short transfer")
