// Package compare is `tcpwheel compare`: the same scenarios, through the same
// TUN path, namespace, impairment layer and pcap tap, with the Linux kernel
// as the peer, for three stacks: tcpwheel, gVisor (Go runtime timers) and
// gVisor on tcpwheel's wheel.
//
// Files: compare.go (Config and its checks, Run: the loop over runs),
// stacks.go (the stacks under test), env.go (one run's namespace and device
// chain, the kernel side), scenarios.go (the scenarios, as a table of
// descriptors, and what they share), scenarios_loss.go, scenarios_idle.go and
// scenarios_flood.go (each scenario's run), load.go (-load's CPU hogs),
// report.go (statistics, table, JSON, goals), plot.go. The
// watcher that tells RTOs from fast retransmissions and probes on the wire
// is package segwatch.
//
// Every stack reads its packets on the path it takes in `tcpwheel run`: the
// whole device chain (watcher, pcap tap, impairment) forwards the TUN's
// tun.Pollable, so tcpwheel's loop reads the TUN directly.
package compare

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tcpwheel/tcpwheel/internal/testbed"
	"github.com/tcpwheel/tcpwheel/stack"
)

// Stack names.
const (
	stackTcpwheel    = "tcpwheel"
	stackTcpwheelRT  = "tcpwheel-rt"  // tcpwheel with its loop under SCHED_FIFO (stack.Config.RealTime)
	stackTcpwheelRec = "tcpwheel-rec" // tcpwheel with its flight recorder on (stack.Config.Record, to a temporary file)
	stackGVisor      = "gvisor"
	stackGVisorWheel = "gvisor-wheel"
	stackGVisorGSO   = "gvisor-gso" // gVisor in its best configuration on a TUN: host GSO, the kernel's large segments in (real-client scenarios only)
	stackKernel      = "kernel"     // the kernel's own loopback in the run's namespace: the ceiling (real-client scenarios only)
)

// allStacks are the stacks, in the order they are reported.
var allStacks = []string{stackTcpwheel, stackTcpwheelRT, stackTcpwheelRec, stackGVisor, stackGVisorWheel, stackGVisorGSO, stackKernel}

// defaultStacks are the stacks compared when -stacks is not given: tcpwheel-rt
// only when asked for (with -load, to see what real-time priority buys), and
// tcpwheel-rec too (beside tcpwheel, to see what the flight recorder costs).
// gvisor-gso and kernel run only the real-client scenarios.
var defaultStacks = []string{stackTcpwheel, stackGVisor, stackGVisorWheel, stackGVisorGSO, stackKernel}

// rtPriority is tcpwheel-rt's SCHED_FIFO priority, as `tcpwheel run -rt`'s.
const rtPriority = 10

// Stacks returns the names of the stacks that can be compared.
func Stacks() []string { return slices.Clone(allStacks) }

// MaxBulkSize is the largest Config.BulkSize: 1 TiB.
const MaxBulkSize = 1 << 40

// Config is what a comparison is told (by the flags of `tcpwheel compare`,
// named beside each field). Validate's errors name the fields by those flags.
type Config struct {
	Stacks     []string      // -stacks: some of Stacks(), in that order
	Scenarios  []string      // -scenarios: some of Scenarios(), in that order
	Runs       int           // -runs: runs of each scenario for each stack, 1 to 1000
	JSONPath   string        // -json: where to write the JSON report ("": nowhere)
	PlotPath   string        // -plot: where to write the plot, .svg or .png ("": nowhere)
	PcapDir    string        // -pcap: an existing directory for a pcap of each run ("": none)
	Seed       uint64        // -seed: of the random loss; run i uses Seed+i
	BulkSize   int64         // -bulk-size: bytes per bulk transfer, 1 to MaxBulkSize
	BulkLoss   []float64     // -bulk-loss: the bulk scenario's loss rates, each in [0, 1)
	Conns      int           // -conns: connections of many-conns, 1 to 25000
	Hold       time.Duration // -hold: how long many-conns holds them idle, 0 to 1h
	RunTimeout time.Duration // -run-timeout: the longest one run may take, at least 1s
	Quiet      bool          // -q: no progress line
	FloodSYNs  int           // -flood-syns: spoofed SYNs of synflood, 1 to testbed.MaxFloodSYNs
	FloodRate  int           // -flood-rate: their rate per second, 1 to testbed.MaxFloodRate
	FloodConns int           // -flood-conns: legitimate connects during the flood, 1 to 1000
	BurstConns int           // -burst-conns: burst's concurrent connections, 1 to MaxBurstConns
	// BurstQueue (-burst-queue) is the TUN's txqueuelen in burst (the
	// kernel's queue of packets for the stack): 0 means
	// burstPacketsPerConn per connection, at least netns.DefaultTxQueueLen;
	// else 1 to netns.MaxTxQueueLen.
	BurstQueue int
	// WriteQueue (-write-queue) is the tcpwheel stacks'
	// stack.Config.WriteQueue: 0 (the loop writes to the device itself)
	// to stack.MaxWriteQueue.
	WriteQueue int
	// SYNStash (-syn-stash) is the tcpwheel stacks' stack.Config.SYNStash:
	// 0 (each SYN handled as it is read) to stack.MaxSYNStash. tcpwheel-rec
	// runs without it (a recording replays each packet where it was read).
	SYNStash int
	// Loops (-loops) is the tcpwheel stacks' stack.Config.Loops, on a TUN
	// with as many queues: 0 or 1 (one loop) to stack.MaxLoops. Not with
	// tcpwheel-rec, whose recording is of one loop.
	Loops int
	// LoopThread (-loop-thread) is the tcpwheel stacks'
	// stack.Config.LoopThread (tcpwheel-rt's loops stay locked: RealTime).
	LoopThread stack.LoopThread
	// NoOffload (-no-offload) puts the tcpwheel stacks on a plain TUN
	// (tun.Open, or plain queues with Loops), as gVisor's: one packet of at
	// most the MTU per read and write, no GSO frames.
	NoOffload bool
	// InProcess (-in-process) serves the real-client scenarios that time a
	// server (http-down, http-up, http-par, wrk, ab) in compare's own
	// process, as before 2026-11-24, instead of each stack's in a child
	// process of its own (server_child.go); their CPU figures are then
	// compare's whole rusage.
	InProcess bool
	// CPUProfile (-cpuprofile) names the file the command writes a CPU
	// profile of the whole comparison to: where the stacks' loops spend
	// their time in a scenario (issue 11's burst, issue 15's ab). Run
	// ignores it (Validate checks that it can be written); the command
	// starts and stops the profile around Run.
	CPUProfile string
	// Load (-load) is how many CPU-bound processes run beside each run, to
	// keep every core busy: 0 (none) to MaxLoad.
	Load int
	// Hog is the command of one such process; nil means DefaultHog().
	Hog []string
	// Families (-family) are the IP versions the TCP scenarios run over: 4,
	// 6 or both, in that order; nil means 4. Over IPv6 a case is reported
	// as its own, named with "/v6" (e.g. "bulk-up-0%/v6"), and only the
	// stacks that speak IPv6 and the scenarios marked v6 take part.
	Families []int
	// UDPDatagrams (-udp-datagrams) is udp-echo's burst, 1 to
	// MaxUDPDatagrams datagrams; its latency phase sends a tenth of it.
	UDPDatagrams int

	// The real-client scenarios (http-down, http-up, http-par, wrk, ab).
	HTTPSize    int64         // -http-size: bytes curl downloads and uploads, 1 to MaxBulkSize
	HTTPStreams int           // -http-streams: http-par's parallel transfers, 1 to 64
	WrkConns    int           // -wrk-conns: wrk's connections, 1 to 10000
	WrkTime     time.Duration // -wrk-time: how long wrk runs, 1s to 10m (whole seconds)
	ABRequests  int           // -ab-requests: ab's requests, each on a new connection, 1 to 1000000
	ABConns     int           // -ab-conns: ab's concurrency, 1 to 1000 and at most -ab-requests

	uploadFile string // what http-up's curl sends: Run makes it (makeUploadFile)
	serverHang bool   // the tests': server children never say ready
}

// MaxLoad is the largest Config.Load.
const MaxLoad = 256

// DefaultHog is the command of a CPU hog: a shell's busy loop, which makes
// no system calls and allocates nothing. It never ends by itself: Run kills
// it, with its process group, when the run ends.
func DefaultHog() []string { return []string{"sh", "-c", "while :; do :; done"} }

// DefaultConfig returns the defaults of `tcpwheel compare`.
func DefaultConfig() Config {
	return Config{
		Stacks:       slices.Clone(defaultStacks),
		Scenarios:    Scenarios(),
		Runs:         3,
		Seed:         1,
		BulkSize:     20e6,
		BulkLoss:     []float64{0, 0.01, 0.05},
		Conns:        10000,
		Hold:         10 * time.Second,
		RunTimeout:   3 * time.Minute,
		FloodSYNs:    20000,
		FloodRate:    20000,
		FloodConns:   100,
		BurstConns:   20000,
		UDPDatagrams: 20000,
		HTTPSize:     200e6,
		HTTPStreams:  8,
		WrkConns:     50,
		WrkTime:      5 * time.Second,
		ABRequests:   20000,
		ABConns:      50,
	}
}

// Validate checks every field, and that the outputs can be written (it
// leaves nothing behind).
func (c *Config) Validate() error {
	if err := checkNames(c.Stacks, allStacks); err != nil {
		return fmt.Errorf("-stacks: %w", err)
	}
	if err := checkNames(c.Scenarios, Scenarios()); err != nil {
		return fmt.Errorf("-scenarios: %w", err)
	}
	switch {
	case c.Runs <= 0:
		return fmt.Errorf("-runs %d: need at least 1", c.Runs)
	case c.Runs > 1000:
		return fmt.Errorf("-runs %d: at most 1000", c.Runs)
	case c.BulkSize <= 0 || c.BulkSize > MaxBulkSize:
		return fmt.Errorf("-bulk-size %d: want 1 byte to 1 TiB", c.BulkSize)
	case len(c.BulkLoss) == 0 || slices.ContainsFunc(c.BulkLoss, func(p float64) bool { return !(p >= 0 && p < 1) }):
		return fmt.Errorf("-bulk-loss %v: want rates in [0, 1)", c.BulkLoss)
	case c.Conns < 1 || c.Conns > 25000:
		return fmt.Errorf("-conns %d: want 1 to 25000 (the stacks' ephemeral ports)", c.Conns)
	case c.Hold < 0 || c.Hold > time.Hour:
		return fmt.Errorf("-hold %v: want 0 to 1h", c.Hold)
	case c.RunTimeout < time.Second:
		return fmt.Errorf("-run-timeout %v: want at least 1s", c.RunTimeout)
	case c.UDPDatagrams < 1 || c.UDPDatagrams > MaxUDPDatagrams:
		return fmt.Errorf("-udp-datagrams %d: want 1 to %d", c.UDPDatagrams, MaxUDPDatagrams)
	case c.Load < 0 || c.Load > MaxLoad:
		return fmt.Errorf("-load %d: want 0 (none) to %d processes", c.Load, MaxLoad)
	case c.Families != nil && !slices.Equal(c.Families, []int{4}) && !slices.Equal(c.Families, []int{6}) &&
		!slices.Equal(c.Families, []int{4, 6}):
		return fmt.Errorf("-family %v: want 4, 6 or 4,6", c.Families)
	}
	if err := c.checkFamilies(); err != nil {
		return err
	}
	if err := c.checkFlood(); err != nil {
		return err
	}
	if err := c.checkBurst(); err != nil {
		return err
	}
	if err := c.checkClients(); err != nil {
		return err
	}
	return c.checkOutputs()
}

// checkFamilies checks that -family 6 alone leaves something to run: a
// scenario that runs over IPv6, on a stack that speaks it.
func (c *Config) checkFamilies() error {
	if c.Families == nil || slices.Contains(c.Families, 4) {
		return nil
	}
	for _, cs := range expandCases(*c) {
		for _, st := range c.Stacks {
			if caseRuns(st, cs) {
				return nil
			}
		}
	}
	var v6 []string
	for i := range scenarios {
		if scenarios[i].v6 {
			v6 = append(v6, scenarios[i].name)
		}
	}
	return fmt.Errorf("-family 6: none of -scenarios runs over IPv6 on -stacks (the scenarios that do: %s; the stacks: tcpwheel's and gVisor's)",
		strings.Join(v6, ", "))
}

// checkFlood checks synflood's parameters: the flood must end well within a
// run, with time for the legitimate connections after it.
func (c *Config) checkFlood() error {
	switch {
	case c.FloodSYNs < 1 || c.FloodSYNs > testbed.MaxFloodSYNs:
		return fmt.Errorf("-flood-syns %d: want 1 to %d", c.FloodSYNs, testbed.MaxFloodSYNs)
	case c.FloodRate < 1 || c.FloodRate > testbed.MaxFloodRate:
		return fmt.Errorf("-flood-rate %d: want 1 to %d SYNs per second", c.FloodRate, testbed.MaxFloodRate)
	case c.FloodConns < 1 || c.FloodConns > 1000:
		return fmt.Errorf("-flood-conns %d: want 1 to 1000", c.FloodConns)
	}
	if d := time.Duration(c.FloodSYNs) * time.Second / time.Duration(c.FloodRate); 2*d+legitLimit > c.RunTimeout || d > 5*time.Minute {
		return fmt.Errorf("-flood-syns %d at -flood-rate %d takes %v: want at most 5m, and twice it plus %v within -run-timeout %v",
			c.FloodSYNs, c.FloodRate, d, legitLimit, c.RunTimeout)
	}
	return nil
}

// checkClients checks the real-client scenarios' parameters, and that some
// chosen stack runs some chosen scenario (kernel and gvisor-gso run only the
// real-client ones).
func (c *Config) checkClients() error {
	switch {
	case c.HTTPSize <= 0 || c.HTTPSize > MaxBulkSize:
		return fmt.Errorf("-http-size %d: want 1 byte to 1 TiB", c.HTTPSize)
	case c.HTTPStreams < 1 || c.HTTPStreams > 64:
		return fmt.Errorf("-http-streams %d: want 1 to 64", c.HTTPStreams)
	case c.WrkConns < 1 || c.WrkConns > 10000:
		return fmt.Errorf("-wrk-conns %d: want 1 to 10000", c.WrkConns)
	case c.WrkTime < time.Second || c.WrkTime > 10*time.Minute || c.WrkTime%time.Second != 0:
		return fmt.Errorf("-wrk-time %v: want whole seconds, 1s to 10m", c.WrkTime)
	case c.WrkTime+10*time.Second > c.RunTimeout:
		return fmt.Errorf("-wrk-time %v: want at least 10s less than -run-timeout %v", c.WrkTime, c.RunTimeout)
	case c.ABRequests < 1 || c.ABRequests > 1000000:
		return fmt.Errorf("-ab-requests %d: want 1 to 1000000", c.ABRequests)
	case c.ABConns < 1 || c.ABConns > 1000 || c.ABConns > c.ABRequests:
		return fmt.Errorf("-ab-conns %d: want 1 to 1000, and at most -ab-requests (%d)", c.ABConns, c.ABRequests)
	}
	for _, st := range c.Stacks {
		for _, name := range c.Scenarios {
			if sc, ok := scenarioNamed(name); ok && runs(st, sc) {
				return nil
			}
		}
	}
	verb := "takes"
	if len(c.Stacks) > 1 {
		verb = "take"
	}
	return fmt.Errorf("-stacks %s: %s %s part only in the real-client scenarios (%s), none of which -scenarios names",
		strings.Join(c.Stacks, ","), strings.Join(c.Stacks, " and "), verb, strings.Join(clientScenarios(), ", "))
}

// checkOutputs checks that the JSON, the plot and the pcaps can be written.
func (c *Config) checkOutputs() error {
	if c.PlotPath != "" {
		if ext := strings.ToLower(filepath.Ext(c.PlotPath)); ext != ".svg" && ext != ".png" {
			return fmt.Errorf("-plot %q: the name must end in .svg or .png", c.PlotPath)
		}
	}
	for _, out := range []struct{ flag, path string }{{"-json", c.JSONPath}, {"-plot", c.PlotPath}, {"-cpuprofile", c.CPUProfile}} {
		if out.path == "" {
			continue
		}
		if err := testbed.CheckWritable(out.path); err != nil {
			return fmt.Errorf("%s %q: %v", out.flag, out.path, err)
		}
	}
	if c.PcapDir != "" {
		if st, err := os.Stat(c.PcapDir); err != nil || !st.IsDir() {
			return fmt.Errorf("-pcap %q: not an existing directory", c.PcapDir)
		}
		if err := testbed.CheckWritable(filepath.Join(c.PcapDir, "probe")); err != nil {
			return fmt.Errorf("-pcap %q: %v", c.PcapDir, err)
		}
	}
	return nil
}

// checkNames checks that names is a non-empty list of known names, in
// known's order, without duplicates (as ParseList returns).
func checkNames(names, known []string) error {
	if len(names) == 0 {
		return errors.New("empty list")
	}
	last := -1
	for _, n := range names {
		i := slices.Index(known, n)
		if i < 0 {
			return fmt.Errorf("unknown name %q (want some of %s)", n, strings.Join(known, ", "))
		}
		if i <= last {
			return fmt.Errorf("%q out of order or repeated (want the order %s)", n, strings.Join(known, ", "))
		}
		last = i
	}
	return nil
}

// ParseList splits a comma-separated list, checks every name against known
// and drops duplicates, keeping known's order.
func ParseList(s string, known []string) ([]string, error) {
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !slices.Contains(known, f) {
			return nil, fmt.Errorf("unknown name %q (want some of %s)", f, strings.Join(known, ", "))
		}
		seen[f] = true
	}
	var out []string
	for _, k := range known {
		if seen[k] {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

// ParseSize reads "20MB", "512KiB", "1000".
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, err
	}
	if n < 0 || n > (1<<62)/mult {
		return 0, errors.New("out of range")
	}
	return n * mult, nil
}

// ParsePercentages reads a comma-separated list of percentages in [0, 100)
// ("0,1,5") as rates (0, 0.01, 0.05).
func ParsePercentages(s string) ([]float64, error) {
	var rates []float64
	for _, f := range strings.Split(s, ",") {
		p, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(p >= 0 && p < 100) {
			return nil, fmt.Errorf("%q: want percentages in [0, 100)", s)
		}
		rates = append(rates, p/100)
	}
	return rates, nil
}

// ParseFamilies reads -family: "4", "6" or "4,6" (either order, duplicates
// dropped).
func ParseFamilies(s string) ([]int, error) {
	var v4, v6 bool
	for _, f := range strings.Split(s, ",") {
		switch strings.TrimSpace(f) {
		case "4":
			v4 = true
		case "6":
			v6 = true
		default:
			return nil, fmt.Errorf("%q: want 4, 6 or 4,6", s)
		}
	}
	var fs []int
	if v4 {
		fs = append(fs, 4)
	}
	if v6 {
		fs = append(fs, 6)
	}
	return fs, nil
}

// Run runs every case of cfg (which Validate accepted) for every stack,
// interleaved, then reports: a table on stdout, the JSON and the plot where
// cfg asks, progress on stderr. It needs root and /dev/net/tun; a cancelled
// ctx (SIGINT) stops it at once, leaving nothing behind.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	cases := expandCases(cfg)
	if slices.ContainsFunc(cases, func(c compareCase) bool { return c.name == "http-up" }) {
		// One upload file for every run, so that each stack's curl reads
		// the same bytes from the same page cache.
		up, err := makeUploadFile(cfg.HTTPSize)
		if err != nil {
			return fmt.Errorf("compare: %w", err)
		}
		defer up.Close()
		cfg.uploadFile = up.Name()
	}
	rep := &report{Config: reportConfigOf(cfg), Started: time.Now().UTC()}
	total := 0
	for _, c := range cases {
		for _, st := range cfg.Stacks {
			if caseRuns(st, c) {
				total += cfg.Runs
			}
		}
	}
	done := 0
	start := time.Now()
	prog := newProgress(stderr, cfg.Quiet)
	defer prog.end()
	for _, c := range cases {
		for r := range cfg.Runs {
			// Rotate the order of the stacks from run to run, so that none is
			// always first after another's run.
			for k := range cfg.Stacks {
				name := cfg.Stacks[(k+r)%len(cfg.Stacks)]
				if !caseRuns(name, c) {
					continue
				}
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("compare: interrupted after %d of %d runs; nothing left behind", done, total)
				}
				done++
				prog.show(progressLine(done, total, time.Since(start),
					fmt.Sprintf("%s %s run %d/%d", c.name, name, r+1, cfg.Runs)))
				res := runOne(ctx, cfg, c, name, r)
				rep.Runs = append(rep.Runs, res)
				if res.Error != "" {
					prog.log(fmt.Sprintf("%s %s run %d failed: %s", c.name, name, r+1, res.Error))
				}
			}
		}
	}
	prog.end()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("compare: interrupted; nothing left behind")
	}
	rep.Finished = time.Now().UTC()
	rep.summarize(cfg.Stacks, cases)
	rep.writeTable(stdout)
	if cfg.JSONPath != "" {
		if err := rep.writeJSON(cfg.JSONPath); err != nil {
			return fmt.Errorf("compare: %w", err)
		}
		fmt.Fprintf(stdout, "\nJSON: %s\n", cfg.JSONPath)
	}
	if cfg.PlotPath != "" {
		if err := rep.writePlot(cfg.PlotPath, cfg.Stacks); err != nil {
			return fmt.Errorf("compare: %w", err)
		}
		fmt.Fprintf(stdout, "plot: %s\n", cfg.PlotPath)
	}
	if n := rep.failedRuns(); n > 0 {
		return fmt.Errorf("compare: %d of %d runs failed (see the table and the errors above)", n, len(rep.Runs))
	}
	return nil
}

// progress is the line that says what runs now: rewritten in place on a
// terminal, one line per run otherwise.
// progressLine is the progress line of run done (from 1) of total, which
// starts elapsed after the first: what runs, the time so far and, from the
// second run on, an estimate of what is left at the mean pace of the runs
// done (runs differ: a bulk transfer at 5% loss takes seconds, a tail loss
// milliseconds, so the estimate is rough).
func progressLine(done, total int, elapsed time.Duration, what string) string {
	line := fmt.Sprintf("[%d/%d] %s (%s elapsed", done, total, what, clock(elapsed))
	if done > 1 {
		left := elapsed / time.Duration(done-1) * time.Duration(total-done+1)
		line += ", ~" + clock(left) + " left"
	}
	return line + ")"
}

// clock formats d as m:ss.
func clock(d time.Duration) string {
	s := int(d.Round(time.Second) / time.Second)
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

type progress struct {
	w     io.Writer
	quiet bool
	tty   bool
	width int
}

func newProgress(w io.Writer, quiet bool) *progress {
	p := &progress{w: w, quiet: quiet}
	if f, ok := w.(*os.File); ok {
		_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
		p.tty = err == nil
	}
	return p
}

func (p *progress) show(line string) {
	if p.quiet {
		return
	}
	if !p.tty {
		fmt.Fprintln(p.w, line)
		return
	}
	pad := max(p.width-len(line), 0)
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
	p.width = len(line)
}

// log prints a line of its own, above the progress line.
func (p *progress) log(line string) {
	if !p.quiet && p.width > 0 {
		fmt.Fprint(p.w, "\r"+strings.Repeat(" ", p.width)+"\r")
		p.width = 0
	}
	fmt.Fprintln(p.w, line)
}

func (p *progress) end() {
	if !p.quiet && p.width > 0 {
		fmt.Fprint(p.w, "\r"+strings.Repeat(" ", p.width)+"\r")
		p.width = 0
	}
}
