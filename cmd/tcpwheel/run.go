package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/bytesrv"
	"github.com/tcpwheel/tcpwheel/internal/dnsrv"
	"github.com/tcpwheel/tcpwheel/internal/metrics"
	"github.com/tcpwheel/tcpwheel/internal/testbed"
	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/tcpwheel/tcpwheel/timer"
	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/impair"
	"github.com/tcpwheel/tcpwheel/tun/netns"
)

// runConfig is what `tcpwheel run` is told by its flags.
type runConfig struct {
	netns    string
	link     string
	addr     netip.Addr
	peer     netip.Prefix
	mtu      int
	tick     time.Duration
	loss     float64
	seed     uint64
	duration time.Duration
	stats    time.Duration
	pcap     string
	payload  bool
	rt       bool
	verbose  bool
	logger   *slog.Logger // with verbose: to standard error (cmdRun)
	backlog  int
	txqueue  int  // the TUN's txqueuelen: the kernel's queue of packets for the stack
	plain    bool // -no-offload
	wqueue   int  // stack.Config.WriteQueue: the device writer's slots (0: none)
	synStash int  // stack.Config.SYNStash: new connections' SYNs set aside (0: none)
	loops    int  // stack.Config.Loops, on a TUN with as many queues
	thread   stack.LoopThread
	cpuprof  string // -cpuprofile: write the process's CPU profile here
}

// defaultRunBacklog is run's listener backlog (stack.Config.Backlog: half-open
// connections and the accept queue, each): Linux's default somaxconn. The
// stack's default, tcp.DefaultBacklog (128), made ab -c 19900 lose thousands
// of completed handshakes at the accept queue (listen.AcceptQueue), each
// client then resending its ACK or request until there was room.
const defaultRunBacklog = 4096

// rtPriority is the SCHED_FIFO priority `tcpwheel run -rt` gives the loop's
// thread: above every normally scheduled task (the CPU hogs of a busy
// machine), below the kernel's threaded interrupt handlers (50).
const rtPriority = 10

func parseRunFlags(args []string, stderr io.Writer) (runConfig, error) {
	fs := flag.NewFlagSet("tcpwheel run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg  runConfig
		addr = fs.String("addr", "198.18.0.2", "the stack's IPv4 address")
		peer = fs.String("peer", "198.18.0.1/24", "the kernel side's address and prefix, inside the namespace")
	)
	fs.StringVar(&cfg.netns, "netns", "tcpwheel", "network namespace to create for the kernel side")
	fs.StringVar(&cfg.link, "tun", "tcpw0", "name of the TUN device")
	fs.IntVar(&cfg.mtu, "mtu", 1500, "MTU of the TUN link")
	fs.DurationVar(&cfg.tick, "tick", timer.DefaultTick, "timing wheel tick (10µs to 1s)")
	fs.Float64Var(&cfg.loss, "loss", 0, "random packet loss probability in each direction, 0 to 1")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the random loss")
	fs.DurationVar(&cfg.duration, "duration", 0, "run this long, then exit (0: until SIGINT or SIGTERM)")
	fs.DurationVar(&cfg.stats, "stats", 0, "print a one-line counters summary at this interval (0: never)")
	fs.BoolVar(&cfg.payload, "pcap-payload", false, "record packets whole in -pcap's recording (default: TCP and UDP headers and lengths only, as tcpdump -s; replay is exact either way)")
	fs.StringVar(&cfg.pcap, "pcap", "", "write a flight recording (pcapng: every packet the stack handles and sends, and what `tcpwheel replay` needs to run it again exactly) to this file")
	fs.BoolVar(&cfg.verbose, "v", false, "log to standard error: connections that end in an error, and every dropped packet with its reason")
	fs.IntVar(&cfg.synStash, "syn-stash", 0, "new connections' SYNs the loop may set aside until the TUN is drained, serving established connections first (0: each SYN as it is read)")
	fs.IntVar(&cfg.wqueue, "write-queue", 0, "packets the stack's loop may queue for a writer goroutine, which writes them to the TUN on its own thread (0: the loop writes them itself)")
	fs.IntVar(&cfg.loops, "loops", 1, "the stack's event loops, each with a queue of a multi-queue TUN of its own (not with -pcap; -loop-thread says how they hold threads)")
	fs.TextVar(&cfg.thread, "loop-thread", stack.LoopAuto, "how the loops hold their threads (stack.Config.LoopThread): auto (parked when they are as many as GOMAXPROCS or more, else unlocked; locked with -rt), locked (each on a thread of its own, sleeping in epoll_wait), unlocked (sleeping in epoll_wait on no thread of its own, in Go's netpoller when quiet, after handing a datagram to a reader, or in a lone exchange of one connection's requests and answers) or parked (sleeping in Go's netpoller, their P free meanwhile)")
	fs.IntVar(&cfg.txqueue, "txqueuelen", netns.DefaultTxQueueLen, "the TUN's transmit queue, the packets the kernel holds for the stack while its loop is busy (a burst beyond it is dropped there)")
	fs.IntVar(&cfg.backlog, "backlog", defaultRunBacklog, "each listener's limit of half-open connections, and of connections waiting for accept")
	fs.BoolVar(&cfg.plain, "no-offload", false, "open the TUN without offloads (virtio-net headers, TSO and checksum offload): one packet of at most the MTU per read and write")
	fs.StringVar(&cfg.cpuprof, "cpuprofile", "", "write a CPU profile of the whole run (go tool pprof) to this file")
	fs.BoolVar(&cfg.rt, "rt", false, "run the stack's loop thread at real-time priority (SCHED_FIFO "+strconv.Itoa(rtPriority)+"); fails where not permitted")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tcpwheel run [flags]\n\nBrings the stack up on a TUN device whose kernel side lives in its own network\nnamespace, and serves echo (7, TCP and UDP), discard (9), DNS (53, UDP and\nTCP: A and AAAA of "+dnsrv.DefaultName+") and HTTP (80).\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, err
		}
		return cfg, fmt.Errorf("%w: %v", errUsage, err)
	}
	if err := cfg.parse(fs, *addr, *peer); err != nil {
		return cfg, fmt.Errorf("%w: run: %v", errUsage, err)
	}
	return cfg, nil
}

// parse reads the flags that need parsing and checks every value.
func (cfg *runConfig) parse(fs *flag.FlagSet, addr, peer string) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if cfg.addr, err = netip.ParseAddr(addr); err != nil || !cfg.addr.Is4() {
		return fmt.Errorf("-addr %q is not an IPv4 address", addr)
	}
	if cfg.peer, err = netip.ParsePrefix(peer); err != nil || !cfg.peer.Addr().Is4() {
		return fmt.Errorf("-peer %q is not an IPv4 address with a prefix length (like 198.18.0.1/24)", peer)
	}
	if !cfg.peer.Contains(cfg.addr) || cfg.peer.Addr() == cfg.addr {
		return fmt.Errorf("-addr %v must be another address inside -peer %v", cfg.addr, cfg.peer)
	}
	switch {
	case cfg.netns == "" || strings.ContainsAny(cfg.netns, "/\x00") || cfg.netns == "." || cfg.netns == "..":
		return fmt.Errorf("-netns %q is not a valid namespace name", cfg.netns)
	case cfg.link == "" || len(cfg.link) > 15 || strings.ContainsAny(cfg.link, "/ \x00:"):
		return fmt.Errorf("-tun %q is not a valid interface name (1-15 characters, no '/', ':' or spaces)", cfg.link)
	case cfg.mtu < tun.MinMTU || cfg.mtu > tun.MaxMTU:
		return fmt.Errorf("-mtu %d is outside [%d, %d]", cfg.mtu, tun.MinMTU, tun.MaxMTU)
	case cfg.tick < timer.MinTick || cfg.tick > timer.MaxTick:
		return fmt.Errorf("-tick %v is outside [%v, %v]", cfg.tick, timer.MinTick, timer.MaxTick)
	case !(cfg.loss >= 0 && cfg.loss <= 1):
		return fmt.Errorf("-loss %v is not a probability in [0, 1]", cfg.loss)
	case cfg.duration < 0:
		return fmt.Errorf("-duration %v is negative", cfg.duration)
	case cfg.stats < 0:
		return fmt.Errorf("-stats %v is negative", cfg.stats)
	case cfg.backlog < 1:
		return fmt.Errorf("-backlog %d is not positive", cfg.backlog)
	case cfg.txqueue < 1 || cfg.txqueue > netns.MaxTxQueueLen:
		return fmt.Errorf("-txqueuelen %d: want 1 to %d", cfg.txqueue, netns.MaxTxQueueLen)
	case cfg.wqueue < 0 || cfg.wqueue > stack.MaxWriteQueue:
		return fmt.Errorf("-write-queue %d: want 0 to %d", cfg.wqueue, stack.MaxWriteQueue)
	case cfg.synStash < 0 || cfg.synStash > stack.MaxSYNStash:
		return fmt.Errorf("-syn-stash %d: want 0 to %d", cfg.synStash, stack.MaxSYNStash)
	case cfg.loops < 1 || cfg.loops > stack.MaxLoops:
		return fmt.Errorf("-loops %d: want 1 to %d", cfg.loops, stack.MaxLoops)
	case cfg.loops > 1 && cfg.pcap != "":
		return fmt.Errorf("-loops %d: not with -pcap (a flight recording is of one loop)", cfg.loops)
	case cfg.rt && !cfg.thread.OwnThread():
		return fmt.Errorf("-rt: not with -loop-thread %v (the loop has no thread of its own)", cfg.thread)
	case cfg.synStash > 0 && cfg.pcap != "":
		return fmt.Errorf("-syn-stash %d: not with -pcap (a recording replays each packet where it was read)", cfg.synStash)
	}
	return cfg.checkPaths()
}

// checkPaths checks the files run will write, before any namespace is made.
func (cfg *runConfig) checkPaths() error {
	if cfg.pcap != "" {
		if err := testbed.CheckWritable(cfg.pcap); err != nil {
			return fmt.Errorf("-pcap %q: %v", cfg.pcap, err)
		}
	}
	if cfg.cpuprof != "" {
		if err := testbed.CheckWritable(cfg.cpuprof); err != nil {
			return fmt.Errorf("-cpuprofile %q: %v", cfg.cpuprof, err)
		}
	}
	return nil
}

func cmdRun(args []string, stdout, stderr io.Writer) (err error) {
	cfg, err := parseRunFlags(args, stderr)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("run: needs root (a TUN device and a network namespace): try 'sudo make run'")
	}
	ctx, stop := namespaceCommand(cfg.duration)
	defer stop()
	if cfg.verbose {
		cfg.logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if cfg.cpuprof != "" {
		stopProf, perr := startCPUProfile(cfg.cpuprof)
		if perr != nil {
			return fmt.Errorf("run: -cpuprofile: %w", perr)
		}
		defer func() {
			if perr := stopProf(); perr != nil && err == nil {
				err = fmt.Errorf("run: -cpuprofile: %w", perr)
			}
		}()
	}
	return serve(ctx, cfg, stdout)
}

// namespaceCommand prepares a command that makes namespaces (run,
// forward) and returns its context, which ends on SIGINT, SIGTERM or after
// duration (if positive): the command then takes its namespaces down.
func namespaceCommand(duration time.Duration) (context.Context, context.CancelFunc) {
	// The namespaces of earlier runs that were killed before they could
	// clean up; a failure here never stops this run.
	netns.RemoveLeftovers()
	// A closed stdout (tcpwheel run | head -1) must not kill the process with
	// SIGPIPE before it has taken its namespace down: a write then fails with
	// EPIPE instead, and the deferred cleanup runs.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if duration <= 0 {
		return ctx, stop
	}
	ctx, cancel := context.WithTimeout(ctx, duration)
	return ctx, func() { cancel(); stop() }
}

// serve brings everything up, runs until ctx ends, and takes everything down
// again, whatever failed on the way.
func serve(ctx context.Context, cfg runConfig, stdout io.Writer) (err error) {
	// IPv6 beside IPv4, on a link that can carry it (RFC 8200 5): the
	// kernel 2001:db8::1/64, the stack 2001:db8::2 (testbed.Config.Addrs6).
	ipv6 := cfg.mtu == 0 || cfg.mtu >= 1280
	bed, err := testbed.New(testbed.Config{
		Namespace: cfg.netns, Link: cfg.link, Peer: cfg.peer, Stack: cfg.addr, MTU: cfg.mtu, IPv6: ipv6, TxQueueLen: cfg.txqueue,
		Impair:  impair.Config{Seed: cfg.seed, EgressLoss: cfg.loss, IngressLoss: cfg.loss},
		Offload: !cfg.plain,
		Queues:  cfg.loops,
	})
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	defer func() {
		if cerr := bed.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("run: cleaning up: %w", cerr)
		}
	}()
	scfg := stack.Config{Device: bed.Dev, Addr: cfg.addr, Addr6: bed.StackAddr6, Prefix: cfg.peer.Masked(), Tick: cfg.tick, Backlog: cfg.backlog, InputQueue: cfg.txqueue, WriteQueue: cfg.wqueue, SYNStash: cfg.synStash}
	scfg.Logger, scfg.LoopThread = cfg.logger, cfg.thread
	if cfg.loops > 1 {
		scfg.Queues, scfg.Loops = bed.Devs[1:], cfg.loops
	}
	if cfg.rt {
		scfg.RealTime = rtPriority
	}
	if cfg.pcap != "" {
		// A flight recording: the stack's packets as it handled and sent
		// them (on the stack's side of the loss), and what replay needs.
		f, err := os.Create(cfg.pcap)
		if err != nil {
			return fmt.Errorf("run: %w", err)
		}
		defer func() {
			if cerr := f.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("run: -pcap: %w", cerr)
			}
		}()
		scfg.Record, scfg.RecordPayload = f, cfg.payload
	}
	s, err := stack.New(scfg)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	defer func() {
		s.Close()
		if rerr := s.RecordErr(); rerr != nil && err == nil {
			err = fmt.Errorf("run: -pcap: %w", rerr)
		}
	}()

	srv, err := startServices(s, dnsrv.Zone{Name: dnsrv.DefaultName, Addrs: []netip.Addr{cfg.addr, bed.StackAddr6}})
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	defer srv.close()

	rt := ""
	if cfg.rt {
		rt = fmt.Sprintf(", loop thread SCHED_FIFO %d", rtPriority)
	}
	stackAddrs, kernelAddrs := cfg.addr.String(), cfg.peer.String()
	if ipv6 {
		stackAddrs += " and " + bed.StackAddr6.String()
		kernelAddrs += " and " + netip.PrefixFrom(bed.KernelAddr6, 64).String()
	}
	fmt.Fprintf(stdout, "tcpwheel ready: stack %s on %s, kernel side %s in network namespace %q (tick %v, loss %g%s)\n",
		stackAddrs, cfg.link, kernelAddrs, cfg.netns, cfg.tick, cfg.loss, rt)
	// The hints say sudo to whoever came through sudo; a root shell needs none.
	sudo := ""
	if os.Getenv("SUDO_USER") != "" {
		sudo = "sudo "
	}
	fmt.Fprintf(stdout, "  try: %sip netns exec %s curl http://%v/\n", sudo, cfg.netns, cfg.addr)
	fmt.Fprintf(stdout, "       %sip netns exec %s curl -o /dev/null http://%v/bytes/100000000\n", sudo, cfg.netns, cfg.addr)
	fmt.Fprintf(stdout, "       %sip netns exec %s ping -c 3 %v\n", sudo, cfg.netns, cfg.addr)
	if ipv6 {
		fmt.Fprintf(stdout, "       %sip netns exec %s curl http://[%v]/    (IPv6; also ping -6 -c 3 %v)\n", sudo, cfg.netns, bed.StackAddr6, bed.StackAddr6)
	}
	fmt.Fprintf(stdout, "       echo hello | %sip netns exec %s nc -q1 %v 7\n", sudo, cfg.netns, cfg.addr)
	fmt.Fprintf(stdout, "       echo hello | %sip netns exec %s nc -u -q1 %v 7    (UDP echo)\n", sudo, cfg.netns, cfg.addr)
	fmt.Fprintf(stdout, "       %sip netns exec %s dig @%v %s    (DNS: A and AAAA)\n", sudo, cfg.netns, cfg.addr, strings.TrimSuffix(dnsrv.DefaultName, "."))
	if cfg.pcap != "" {
		fmt.Fprintf(stdout, "  recording to %s (read it with: tcpdump -nr %s; replay it with: tcpwheel replay %s)\n", cfg.pcap, cfg.pcap, cfg.pcap)
	}

	var tick <-chan time.Time
	if cfg.stats > 0 {
		t := time.NewTicker(cfg.stats)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintf(stdout, "tcpwheel stopping: %s\n", statsLine(s))
			return nil
		case <-tick:
			fmt.Fprintln(stdout, statsLine(s))
		}
	}
}

// statsLine is the one-line counters summary: retransmissions by kind, drops
// with every reason that counted any, and how the loop sleeps (its thread
// mode, its wakeups, its sleeps in Go's netpoller: an unlocked loop's while
// quiet).
func statsLine(s *stack.Stack) string {
	st := s.Stats()
	t := st.TCP
	var drops strings.Builder
	total := uint64(0)
	for _, r := range st.DropCounts() {
		if r.N == 0 {
			continue
		}
		if total == 0 {
			drops.WriteString(" (")
		} else {
			drops.WriteString(", ")
		}
		total += r.N
		fmt.Fprintf(&drops, "%s %d", r.Name, r.N)
	}
	if total > 0 {
		drops.WriteString(")")
	}
	tw := strconv.Itoa(st.TimeWait)
	if st.TimeWaitOverflows > 0 { // stack.Config.MaxTimeWait
		tw += fmt.Sprintf(", %d closed at once: TIME-WAIT full", st.TimeWaitOverflows)
	}
	return fmt.Sprintf("conns %d (time-wait %s) | pkts in %d out %d | segs in %d out %d | udp in %d out %d unreachables %d | retrans %d (rto %d, tlp %d, rack %d, fast %d, syn %d) | keepalives %d | rst %d | drops %d%s | device errors %d | input batches %d max %d full %d | timers pending %d fired %d stopped %d, late p50 %v p99 %v | %s",
		st.Connections, tw, st.PacketsIn, st.PacketsOut, st.SegmentsIn, st.SegmentsOut,
		st.DatagramsIn, st.DatagramsOut, st.PortUnreachables,
		t.SegsRetransmitted, t.RTOEvents, t.TLPProbes, t.RACKRetransmits, t.FastRetransmits-t.RACKRetransmits, t.SYNRetransmits,
		t.KeepaliveProbes, st.ResetsSent+t.ResetsSent, total, drops.String(), st.DeviceErrors,
		st.Input.Batches, st.Input.Max, st.Input.Full,
		st.Wheel.Pending, st.Wheel.Fired, st.Wheel.Stopped, time.Duration(st.Wheel.LateP50), time.Duration(st.Wheel.LateP99),
		loopSummary(st))
}

// loopSummary is how the loop sleeps, the end of run's and forward's stats
// lines: its thread mode, its wakeups, its sleeps in Go's netpoller.
func loopSummary(st stack.Stats) string {
	return fmt.Sprintf("loop %s: wakeups %d, netpoll sleeps %d", st.LoopThread, st.Wheel.Wakeups, st.Wheel.NetpollSleeps)
}

// statsReport is /stats: the summary line, then every drop reason (zeros
// included) and the input batches by size, one per line.
func statsReport(s *stack.Stack) string {
	var b strings.Builder
	b.WriteString(statsLine(s))
	b.WriteString("\n\ndrops by reason:\n")
	st := s.Stats()
	for _, r := range st.DropCounts() {
		fmt.Fprintf(&b, "  %-24s %d\n", r.Name, r.N)
	}
	o := st.Offload
	fmt.Fprintf(&b, "\noffloads: gso %v gro %v gso-ipv6 %v", o.GSO, o.GRO, o.GSO6)
	if o.Why != "" {
		fmt.Fprintf(&b, " (%s)", o.Why)
	}
	fmt.Fprintf(&b, "\n  frames in %d, larger than the MTU %d, largest %d; lent to readers %d, still held %d\n  frames out %d, gso %d of %d segments, largest %d; over IPv6 %d, gso %d; FINs on data %d\n",
		o.FramesIn, o.LargeFramesIn, o.MaxFrameIn, o.FramesLent, o.FramesHeld, o.FramesOut, o.GSOFramesOut, o.GSOSegmentsOut, o.MaxFrameOut, o.FramesOut6, o.GSOFramesOut6, o.FINsJoined)
	if w := st.Writer; w.Queue > 0 {
		fmt.Fprintf(&b, "\ndevice writer: %d slots, queued %d, most taken %d, the loop waited %d times (%v)\n", w.Queue, w.Queued, w.MaxDepth, w.Waits, w.WaitTime)
	}
	if len(st.Loops) > 0 {
		fmt.Fprintf(&b, "\nloops (%d, a queue each):\n", len(st.Loops))
		for i, l := range st.Loops {
			fmt.Fprintf(&b, "  loop %d: packets in %d, segments %d, connections %d, handed off %d, taken %d, wakeups %d\n",
				i, l.PacketsIn, l.SegmentsIn, l.Connections, l.HandoffsOut, l.HandoffsIn, l.Wakeups)
		}
	}
	fmt.Fprintf(&b, "\ninput batches (%s path, %s loop) by size:\n", st.InputPath, st.LoopThread)
	for i, n := range st.Input.Sizes {
		fmt.Fprintf(&b, "  %4d-%-4d %d\n", 1<<i, 1<<(i+1)-1, n)
	}
	return b.String()
}

// services are the servers `tcpwheel run` offers.
type services struct {
	lns  []net.Listener
	pcs  []net.PacketConn
	http *http.Server
}

func (sv *services) close() {
	if sv.http != nil {
		sv.http.Close()
	}
	for _, ln := range sv.lns {
		ln.Close()
	}
	for _, pc := range sv.pcs {
		pc.Close()
	}
}

func startServices(s *stack.Stack, zone dnsrv.Zone) (*services, error) {
	sv := &services{}
	listen := func(port int) (net.Listener, error) {
		ln, err := s.Listen("tcp", ":"+strconv.Itoa(port))
		if err != nil {
			sv.close()
			return nil, err
		}
		sv.lns = append(sv.lns, ln)
		return ln, nil
	}
	echo, err := listen(7)
	if err != nil {
		return nil, err
	}
	go acceptLoop(echo, func(c net.Conn) { io.Copy(c, c) })
	udpEcho, err := s.ListenPacket("udp", ":7")
	if err != nil {
		sv.close()
		return nil, err
	}
	sv.pcs = append(sv.pcs, udpEcho)
	go echoPackets(udpEcho)
	dns, err := dnsrv.New(zone)
	if err != nil {
		sv.close()
		return nil, err
	}
	udpDNS, err := s.ListenPacket("udp", ":53")
	if err != nil {
		sv.close()
		return nil, err
	}
	sv.pcs = append(sv.pcs, udpDNS)
	go dns.Serve(udpDNS)
	tcpDNS, err := listen(53)
	if err != nil {
		return nil, err
	}
	go acceptLoop(tcpDNS, func(c net.Conn) { dns.ServeConn(c) })
	discard, err := listen(9)
	if err != nil {
		return nil, err
	}
	go acceptLoop(discard, func(c net.Conn) { io.Copy(io.Discard, c) })
	web, err := listen(80)
	if err != nil {
		return nil, err
	}
	sv.http = &http.Server{Handler: httpHandler(s), ReadHeaderTimeout: 10 * time.Second}
	go sv.http.Serve(web)
	return sv, nil
}

// echoPackets sends every datagram back to its sender (RFC 862 over UDP)
// until pc closes.
func echoPackets(pc net.PacketConn) {
	buf := make([]byte, 64<<10)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		pc.WriteTo(buf[:n], from)
	}
}

func acceptLoop(ln net.Listener, handle func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			handle(c)
		}()
	}
}

func httpHandler(s *stack.Stack) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "tcpwheel %s: a userspace TCP/IP stack whose every TCP timer runs on a hashed timing wheel.\n", version)
		fmt.Fprintf(w, "You reached it at %s from %s, over a TUN device; the Linux kernel is your end.\n\n", r.Host, r.RemoteAddr)
		fmt.Fprintln(w, "  GET /bytes/N   streams N bytes (N up to 2^40)")
		fmt.Fprintln(w, "  PUT /upload    reads the body, answers its length; GET /small: a short answer")
		fmt.Fprintln(w, "  GET /stats     the stack's counters")
		fmt.Fprintln(w, "  GET /metrics   the same, as Prometheus metrics (GET /debug/vars: as JSON)")
		fmt.Fprintln(w, "  port 7 echoes (TCP and UDP), port 9 discards, port 53 answers DNS queries for "+dnsrv.DefaultName)
	})
	metrics.Handle(mux, s)
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, statsReport(s))
	})
	bytesrv.Register(mux, nil)
	return mux
}

// startCPUProfile starts the process's CPU profile into the file path (run's
// -cpuprofile: where a transfer's CPU goes, for `go tool pprof`) and returns
// what stops it and closes the file.
func startCPUProfile(path string) (func() error, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
