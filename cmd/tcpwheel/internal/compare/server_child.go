// The real-client scenarios' servers, each stack's in a child process of
// its own.

package compare

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tcpwheel/tcpwheel/cmd/tcpwheel/internal/baseline/gvisor"
	"github.com/tcpwheel/tcpwheel/cmd/tcpwheel/internal/compare/segwatch"
	"github.com/tcpwheel/tcpwheel/internal/bytesrv"
	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/impair"
	"github.com/tcpwheel/tcpwheel/tun/pcaptap"
)

// In the real-client scenarios that time a server (http-down, http-up,
// http-par, wrk, ab: scenario.served), every stack, the kernel's included,
// serves from a child process of its own: this same executable, started
// inside the run's namespace with burstChildEnv=serveChild (see
// burst_child.go), which starts the stack and the HTTP server and never
// returns to main. Run in compare's own process, gVisor shared a heap, GC
// pacing and the runtime with tcpwheel's code and what tcpwheel's runs had
// left, and its CPU per request moved when only our code changed; and the
// CPU of a run was compare's whole rusage. A child's CPU is its own
// (getrusage RUSAGE_SELF, asked for at both ends of the measured interval).
// Config.InProcess (-in-process) serves them in compare's process, as before.
//
// The parent makes the run's bed as before (namespace, TUN); a stack on
// the bed's TUN gets its descriptors (every queue's) as the child's 3, 4,
// ... (exec.Cmd.ExtraFiles), from which the child makes its devices
// (tun.FromFD) and the chain the bed would have put on them in the
// real-client scenarios: an impairment layer that drops nothing on a plain
// TUN, and -pcap's tap for gVisor. gvisor-gso's child opens its own TUN in
// the namespace, to which the parent then moves the kernel's address; the
// kernel's child listens on the namespace's loopback.
//
// The child reads one JSON argument, a serverSpec, says "ready PID" once it
// serves on httpPort, then answers each line of its standard input:
//
//	cpu    -> "cpu NS": its user plus system CPU time, in nanoseconds
//	stats  -> "stats JSON": a serverStats
//	close  -> "closed", "closed recording QUOTED" or "closed error QUOTED":
//	          it closes the stack and the server, and exits
//
// An end of its input closes and exits too. The parent waits for each
// answer at most serverWait, and fails at once if the child's output ends:
// a child that crashed or exited is the run's error, with the last lines of
// its standard error, not a hang.
const serveChild = "serve"

// serverWait bounds the parent's wait for a server child's answer ("ready"
// included); a variable for the tests.
var serverWait = 30 * time.Second

// serverSpec is what a server child starts.
type serverSpec struct {
	Stack               string     `json:"stack"`
	Port                int        `json:"port"`
	Addr, Addr6, Kernel netip.Addr `json:",omitzero"`
	MTU                 int        `json:"mtu"`
	// Devs is the count of TUN descriptors, from 3 on, of a stack on the
	// bed's TUN (its queues, the first first).
	Devs int `json:"devs,omitempty"`
	// Impair puts an impairment layer that drops nothing on each, as the
	// bed does on a plain TUN (testbed.Config.Offload).
	Impair bool `json:"impair,omitempty"`
	// PcapPath puts a pcap tap on the one device (gVisor's -pcap).
	PcapPath string `json:"pcap,omitempty"`
	// Dir and RecordPath are newStackUnderTest's: tcpwheel-rec's directory,
	// -pcap's flight recording.
	Dir        string `json:"dir,omitempty"`
	RecordPath string `json:"record,omitempty"`
	// The limits (runLimits).
	Backlog, InputQueue, WriteQueue, SYNStash, Loops int              `json:",omitempty"`
	LoopThread                                       stack.LoopThread `json:",omitempty"`
	// VnetName is the TUN gvisor-gso's child opens.
	VnetName string `json:"vnet,omitempty"`
	// CPUProfile is where the child writes its CPU profile (-cpuprofile).
	CPUProfile string `json:"cpuprofile,omitempty"`
	// Hang makes the child never say ready (the tests').
	Hang bool `json:"hang,omitempty"`
}

// serverStats is a server child's answer to "stats".
type serverStats struct {
	PID        int               `json:"pid"`
	CPUNS      int64             `json:"cpu_ns"`
	InputPath  string            `json:"input_path"`
	LoopThread string            `json:"loop_thread,omitempty"`
	Loops      []stack.LoopStats `json:"loops,omitempty"`
	Timers     *timerCounts      `json:"timers,omitempty"`
	Uploaded   int64             `json:"uploaded"`
	// The stack's segment counters (segmentCounter), if it has them.
	Counts        bool               `json:"counts"`
	Sent, Retrans uint64             `json:",omitempty"`
	More          map[string]float64 `json:"more,omitempty"`
}

// runServeChild is a server child (see serveChild); it returns its exit
// status.
func runServeChild(args []string, in io.Reader, out io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "server child:", err)
		return 1
	}
	var sp serverSpec
	if len(args) != 1 {
		return fail(fmt.Errorf("args %q: want one JSON spec", args))
	}
	if err := json.Unmarshal([]byte(args[0]), &sp); err != nil {
		return fail(fmt.Errorf("spec %q: %w", args[0], err))
	}
	if sp.Hang {
		io.Copy(io.Discard, in)
		return 0
	}
	if sp.CPUProfile != "" {
		f, err := os.Create(sp.CPUProfile)
		if err != nil {
			return fail(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fail(err)
		}
		defer pprof.StopCPUProfile()
	}
	st, err := sp.start()
	if err != nil {
		return fail(fmt.Errorf("%s: %w", sp.Stack, err))
	}
	ln, err := st.Listen(sp.Port)
	if err != nil {
		st.Close()
		return fail(fmt.Errorf("%s: listen: %w", sp.Stack, err))
	}
	ctr := &bytesrv.Counters{}
	srv := newHTTPServer(ctr)
	go srv.Serve(ln)
	closeAll := func() error {
		err := st.Close() // first, as runEnv.close does
		srv.Close()
		return err
	}
	fmt.Fprintf(out, "ready %d\n", os.Getpid())
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		switch sc.Text() {
		case "cpu":
			fmt.Fprintf(out, "cpu %d\n", int64(cpuTime()))
		case "stats":
			b, err := json.Marshal(statsOf(st, ctr))
			if err != nil {
				closeAll()
				return fail(err)
			}
			fmt.Fprintf(out, "stats %s\n", b)
		case "close":
			switch err := closeAll(); {
			case err == nil:
				fmt.Fprint(out, "closed\n")
			case errors.Is(err, errRecording):
				fmt.Fprintf(out, "closed recording %s\n", strconv.Quote(err.Error()))
			default:
				fmt.Fprintf(out, "closed error %s\n", strconv.Quote(err.Error()))
			}
			return 0
		default:
			closeAll()
			return fail(fmt.Errorf("unknown request %q", sc.Text()))
		}
	}
	closeAll() // the parent went away
	return 0
}

// start starts the spec's stack.
func (sp serverSpec) start() (stackUnderTest, error) {
	switch sp.Stack {
	case stackKernel:
		return &kernelStack{}, nil // this process is in the namespace
	case stackGVisorGSO:
		vt, err := gvisor.OpenVnetTUN(sp.VnetName, sp.MTU)
		if err != nil {
			return nil, err
		}
		return startGVisorGSO(vt, sp.Addr, sp.Kernel, sp.Backlog)
	}
	if sp.Devs < 1 {
		return nil, errors.New("no TUN descriptor")
	}
	devs := make([]tun.Device, 0, sp.Devs)
	fail := func(err error) (stackUnderTest, error) {
		for _, d := range devs {
			d.Close()
		}
		return nil, err
	}
	for i := range sp.Devs {
		t, err := tun.FromFD(3+i, sp.MTU)
		if err != nil {
			return fail(err)
		}
		var d tun.Device = t
		if sp.Impair {
			imp, err := impair.Wrap(t, impair.Config{})
			if err != nil {
				t.Close()
				return fail(err)
			}
			d = imp
		}
		devs = append(devs, d)
	}
	if sp.PcapPath != "" {
		if len(devs) != 1 {
			return fail(errors.New("a pcap tap on a multi-queue TUN"))
		}
		tap, err := pcaptap.Create(sp.PcapPath, devs[0], pcaptap.Config{})
		if err != nil {
			return fail(err)
		}
		devs[0] = tap
	}
	lim := limits{backlog: sp.Backlog, inputQueue: sp.InputQueue, writeQueue: sp.WriteQueue, synStash: sp.SYNStash, loops: sp.Loops, loopThread: sp.LoopThread}
	return newStackUnderTest(sp.Stack, devs, sp.Addr, sp.Addr6, sp.Kernel, sp.Dir, sp.RecordPath, lim)
}

// statsOf is a server child's stats.
func statsOf(st stackUnderTest, ctr *bytesrv.Counters) serverStats {
	s := serverStats{PID: os.Getpid(), CPUNS: int64(cpuTime()), InputPath: st.InputPath(), Uploaded: ctr.Uploaded.Load()}
	if t, ok := st.(*tcpwheelStack); ok {
		ss := t.s.Stats()
		s.Loops, s.LoopThread = ss.Loops, ss.LoopThread
	}
	if t, ok := st.Timers(); ok {
		s.Timers = &t
	}
	if sc, ok := st.(segmentCounter); ok {
		s.Sent, s.Retrans, s.More = sc.burstCounts()
		s.Counts = true
	}
	return s
}

// serverChild is a server child, from the parent's side.
type serverChild struct {
	*burstChild
	lines chan string // its output, a line at a time; closed when it ends
	mu    sync.Mutex  // one request at a time
}

// readLines sends the child's lines to lines until its output ends.
func (s *serverChild) readLines() {
	defer close(s.lines)
	for {
		line, err := s.stdout.ReadString('\n')
		if err != nil {
			return
		}
		s.lines <- strings.TrimSuffix(line, "\n")
	}
}

// next is the child's next line, within serverWait: an error if its
// output ends first (it exited: the error says how, and what it wrote to
// its standard error) or if the wait is over.
func (s *serverChild) next(what string) (string, error) {
	t := time.NewTimer(serverWait)
	defer t.Stop()
	select {
	case line, ok := <-s.lines:
		if ok {
			return line, nil
		}
		how := "ended"
		if s.wait(); s.cmd.ProcessState != nil {
			how = s.cmd.ProcessState.String() // "exit status 1", "signal: killed"
		}
		return "", fmt.Errorf("the server's process ended before its %s (%s)%s", what, how, s.stderrNote())
	case <-t.C:
		return "", fmt.Errorf("the server's process said no %s within %v%s", what, serverWait, s.stderrNote())
	}
}

// stderrNote is ": " and the last lines of the child's standard error, if
// it wrote any.
func (s *serverChild) stderrNote() string {
	if f := s.failure(); f != "" {
		return ": " + f
	}
	return ""
}

// request sends req and returns the answer, which must start with want
// and a space (or be want alone), less that.
func (s *serverChild) request(req, want string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := io.WriteString(s.stdin, req+"\n"); err != nil {
		return "", fmt.Errorf("the server's process: %s: %w", req, err)
	}
	line, err := s.next(req + "'s answer")
	if err != nil {
		return "", err
	}
	if line == want {
		return "", nil
	}
	rest, ok := strings.CutPrefix(line, want+" ")
	if !ok {
		return "", fmt.Errorf("the server's process answered %s with %q", req, line)
	}
	return rest, nil
}

// errChildServes is what a childStack answers for what only its child can do.
var errChildServes = errors.New("the stack runs in the server's child process, which only serves HTTP")

// childStack is a stack under test whose HTTP server runs in a server child
// (see serveChild): what a scenario asks of it is asked of the child.
type childStack struct {
	name string
	ch   *serverChild
	pid  int
	host netip.Addr // where the clients reach it
	url  string

	mu   sync.Mutex
	last serverStats // the latest stats, for after the child is gone

	once     sync.Once
	closeErr error
}

// startServer starts the named stack's server child (see serveChild) on
// the run's bed, and returns it once it serves. offload is whether the bed's
// TUN has offloads; pcapPath a gVisor stack's -pcap.
func (e *runEnv) startServer(name string, lim limits, offload bool, recordPath, pcapPath string) (*childStack, error) {
	kernel := e.bed.KernelAddr
	if e.c.v6 {
		kernel = e.bed.KernelAddr6
	}
	sp := serverSpec{
		Stack: name, Port: httpPort, Addr: e.bed.StackAddr, Addr6: e.bed.StackAddr6, Kernel: kernel,
		MTU: tun.DefaultMTU, Dir: e.cfg.PcapDir, RecordPath: recordPath, PcapPath: pcapPath,
		Backlog: lim.backlog, InputQueue: lim.inputQueue, WriteQueue: lim.writeQueue, SYNStash: lim.synStash, Loops: lim.loops, LoopThread: lim.loopThread,
		Hang: e.cfg.serverHang,
	}
	cs := &childStack{name: name, host: e.bed.StackAddr}
	if e.c.v6 {
		cs.host = e.bed.StackAddr6
	}
	var files []*os.File
	defer func() { closeFiles(files) }()
	switch name {
	case stackKernel:
		cs.host = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	case stackGVisorGSO:
		sp.VnetName = tun.UniqueName("twc")
	default:
		sp.Impair = !offload
		for _, q := range e.bed.Att.Queues {
			f, err := dupTUN(q)
			if err != nil {
				return nil, err
			}
			files = append(files, f)
		}
		sp.Devs = len(files)
	}
	if e.cfg.CPUProfile != "" {
		sp.CPUProfile = fmt.Sprintf("%s.%s-%s-%d", e.cfg.CPUProfile, strings.ReplaceAll(e.c.name, "/", "_"), name, e.run+1)
	}
	spec, err := json.Marshal(sp)
	if err != nil {
		return nil, err
	}
	c, err := e.startChild(serveChild, files, string(spec))
	if err != nil {
		return nil, fmt.Errorf("%s's server: %w", name, err)
	}
	closeFiles(files) // the child has its own
	files = nil
	cs.ch = &serverChild{burstChild: c, lines: make(chan string, 4)}
	go cs.ch.readLines()
	line, err := cs.ch.next("ready")
	if err != nil {
		return nil, fmt.Errorf("%s's server: %w", name, err)
	}
	pid, perr := strconv.Atoi(strings.TrimPrefix(line, "ready "))
	if !strings.HasPrefix(line, "ready ") || perr != nil {
		return nil, fmt.Errorf("%s's server: said %q, want ready and its PID", name, line)
	}
	cs.pid = pid
	if name == stackGVisorGSO {
		if err := e.bed.MoveKernelAddr(sp.VnetName, sp.MTU); err != nil {
			return nil, err
		}
	}
	cs.url = "http://" + addrPort(cs.host, httpPort)
	if _, err := cs.stats(); err != nil { // InputPath's, should the child die
		return nil, fmt.Errorf("%s's server: %w", name, err)
	}
	return cs, nil
}

// dupTUN is a duplicate of t's descriptor, for a child's ExtraFiles. The
// duplicate shares t's open file: os/exec makes it blocking (os.File.Fd),
// and the child's tun.FromFD non-blocking again; this process must not use
// t meanwhile (nor after: it is the child's).
func dupTUN(t *tun.TUN) (*os.File, error) {
	fd, err := t.ReadFD()
	if err != nil {
		return nil, err
	}
	d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dup %s: %w", t.Name(), err)
	}
	return os.NewFile(uintptr(d), t.Name()), nil
}

// cpu is the child's CPU time.
func (c *childStack) cpu() (time.Duration, error) {
	s, err := c.ch.request("cpu", "cpu")
	if err != nil {
		return 0, err
	}
	ns, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("the server's process: cpu %q: %w", s, err)
	}
	return time.Duration(ns), nil
}

// stats asks the child for its stats.
func (c *childStack) stats() (serverStats, error) {
	s, err := c.ch.request("stats", "stats")
	if err != nil {
		return serverStats{}, err
	}
	var st serverStats
	if err := json.Unmarshal([]byte(s), &st); err != nil {
		return serverStats{}, fmt.Errorf("the server's process: stats %q: %w", s, err)
	}
	c.mu.Lock()
	c.last = st
	c.mu.Unlock()
	return st, nil
}

// latest is the child's stats now, or the last it gave.
func (c *childStack) latest() serverStats {
	if st, err := c.stats(); err == nil {
		return st
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

func (c *childStack) Listen(int) (net.Listener, error)                 { return nil, errChildServes }
func (c *childStack) Dial(context.Context, int) (net.Conn, error)      { return nil, errChildServes }
func (c *childStack) Sample(net.Conn) segwatch.Sample                  { return segwatch.Sample{} }
func (c *childStack) SetKeepAlive(net.Conn, net.KeepAliveConfig) error { return errChildServes }
func (c *childStack) ListenCounts() listenCounts                       { return listenCounts{} }

// ClientAddr implements clientAddresser.
func (c *childStack) ClientAddr() netip.Addr { return c.host }

func (c *childStack) Timers() (timerCounts, bool) {
	if t := c.latest().Timers; t != nil {
		return *t, true
	}
	return timerCounts{}, false
}

func (c *childStack) InputPath() string { return c.latest().InputPath }

// counters is the child's stack's segment counters (stackCounters).
func (c *childStack) counters() burstSnapshot {
	st := c.latest()
	return burstSnapshot{sent: st.Sent, retrans: st.Retrans, more: st.More, ok: st.Counts}
}

// Close closes the child's stack and server, and waits for it to exit
// (killing it after serverWait). A recording that failed is an error
// wrapping errRecording, as tcpwheelStack.Close's.
func (c *childStack) Close() error {
	c.once.Do(func() {
		rest, err := c.ch.request("close", "closed")
		switch {
		case err != nil:
			c.closeErr = err
		case rest == "":
		default:
			kind, msg, _ := strings.Cut(rest, " ")
			if text, uerr := strconv.Unquote(msg); uerr == nil {
				msg = text
			}
			c.closeErr = errors.New(msg)
			if kind == "recording" {
				c.closeErr = fmt.Errorf("%w: %s", errRecording, msg)
			}
		}
		c.ch.stdin.Close()
		done := make(chan struct{})
		go func() {
			c.ch.wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(serverWait):
			c.ch.cmd.Process.Kill()
			<-done
		}
	})
	return c.closeErr
}
