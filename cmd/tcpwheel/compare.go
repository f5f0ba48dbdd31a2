package main

// `tcpwheel compare`: the same scenarios, through the same TUN path, namespace,
// impairment layer and pcap tap, with the Linux kernel as the peer, for three
// stacks: tcpwheel, gVisor (Go runtime timers) and gVisor on tcpwheel's wheel.
//
// Files: compare.go (flags, the loop over runs), compare_stacks.go (the stacks
// under test), compare_env.go (one run's namespace and device chain, the kernel
// side), compare_scenarios.go, compare_report.go (statistics, table, JSON,
// goals), compare_plot.go.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tcpwheel/tcpwheel/tun/netns"
)

// Stack names.
const (
	stackTcpwheel    = "tcpwheel"
	stackGVisor      = "gvisor"
	stackGVisorWheel = "gvisor-wheel"
)

var allStacks = []string{stackTcpwheel, stackGVisor, stackGVisorWheel}

// Scenario names, in the order they run.
var allScenarios = []string{
	"tail-loss", "backoff", "synack-loss", "mid-loss", "bulk", "keepalive", "zero-window", "many-conns",
}

// compareConfig is what `tcpwheel compare` is told by its flags.
type compareConfig struct {
	stacks     []string
	scenarios  []string
	runs       int
	jsonPath   string
	plotPath   string
	pcapDir    string
	seed       uint64
	bulkSize   int64
	bulkLoss   []float64 // probabilities
	conns      int
	hold       time.Duration
	runTimeout time.Duration
	quiet      bool // no progress line
}

func parseCompareFlags(args []string, stderr io.Writer) (compareConfig, error) {
	fs := flag.NewFlagSet("tcpwheel compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg       compareConfig
		stacks    = fs.String("stacks", strings.Join(allStacks, ","), "comma-separated stacks to compare: "+strings.Join(allStacks, ", "))
		scenarios = fs.String("scenarios", strings.Join(allScenarios, ","), "comma-separated scenarios: "+strings.Join(allScenarios, ", "))
		bulkSize  = fs.String("bulk-size", "20MB", "bytes per bulk transfer (suffixes KB, MB: powers of 1000... KiB, MiB: of 1024)")
		bulkLoss  = fs.String("bulk-loss", "0,1,5", "comma-separated random loss rates of the bulk scenario, in percent, applied to both directions")
	)
	fs.IntVar(&cfg.runs, "runs", 3, "runs of each scenario for each stack (interleaved between stacks)")
	fs.StringVar(&cfg.jsonPath, "json", "", "write the results, every run and every retransmission, as JSON to this file")
	fs.StringVar(&cfg.plotPath, "plot", "", "write a plot (.svg or .png): the CDF of RTO slack per stack, and transfer time per scenario")
	fs.StringVar(&cfg.pcapDir, "pcap", "", "write a pcap of each run into this directory (it must exist)")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the random loss (run i uses seed+i, the same for every stack)")
	fs.IntVar(&cfg.conns, "conns", 10000, "connections of the many-conns scenario")
	fs.DurationVar(&cfg.hold, "hold", 10*time.Second, "how long many-conns keeps its connections idle (with keepalive) while measuring CPU")
	fs.DurationVar(&cfg.runTimeout, "run-timeout", 3*time.Minute, "the longest one run may take before it fails")
	fs.BoolVar(&cfg.quiet, "q", false, "no progress line on standard error")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: tcpwheel compare [flags]

Runs the same scenarios for each stack, through the same TUN device path,
impairment layer and pcap tap, with the Linux kernel in a fresh network namespace
per run as the peer, and prints a table of median, p90, p99 and max with ratios
against gvisor. Needs root.

scenarios:
  tail-loss    the last data segment and the FIN are dropped once
  backoff      one segment dropped twice: two retransmissions
  synack-loss  the stack's SYN-ACK dropped once
  mid-loss     mid-stream drops in a 2 MB transfer: fast retransmit / RACK
  bulk         -bulk-size up and down at each -bulk-loss rate
  keepalive    probe timing, idle 200ms, interval 100ms, count 3
  zero-window  zero-window probe timing against a receiver that stops reading
  many-conns   -conns idle connections with keepalive: CPU and memory per connection

flags:`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, err
		}
		return cfg, fmt.Errorf("%w: %v", errUsage, err)
	}
	bad := func(format string, a ...any) (compareConfig, error) {
		return cfg, fmt.Errorf("%w: compare: %s", errUsage, fmt.Sprintf(format, a...))
	}
	if fs.NArg() > 0 {
		return bad("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if cfg.stacks, err = parseList(*stacks, allStacks); err != nil {
		return bad("-stacks: %v", err)
	}
	if cfg.scenarios, err = parseList(*scenarios, allScenarios); err != nil {
		return bad("-scenarios: %v", err)
	}
	if cfg.runs <= 0 {
		return bad("-runs %d: need at least 1", cfg.runs)
	}
	if cfg.runs > 1000 {
		return bad("-runs %d: at most 1000", cfg.runs)
	}
	if cfg.bulkSize, err = parseSize(*bulkSize); err != nil || cfg.bulkSize <= 0 || cfg.bulkSize > 1<<40 {
		return bad("-bulk-size %q: want a size like 20MB, from 1 byte to 1 TiB", *bulkSize)
	}
	for _, f := range strings.Split(*bulkLoss, ",") {
		p, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(p >= 0 && p < 100) {
			return bad("-bulk-loss %q: want percentages in [0, 100)", *bulkLoss)
		}
		cfg.bulkLoss = append(cfg.bulkLoss, p/100)
	}
	if cfg.conns < 1 || cfg.conns > 25000 {
		return bad("-conns %d: want 1 to 25000 (the stacks' ephemeral ports)", cfg.conns)
	}
	if cfg.hold < 0 || cfg.hold > time.Hour {
		return bad("-hold %v: want 0 to 1h", cfg.hold)
	}
	if cfg.runTimeout < time.Second {
		return bad("-run-timeout %v: want at least 1s", cfg.runTimeout)
	}
	if cfg.plotPath != "" {
		if ext := strings.ToLower(filepath.Ext(cfg.plotPath)); ext != ".svg" && ext != ".png" {
			return bad("-plot %q: the name must end in .svg or .png", cfg.plotPath)
		}
	}
	for _, out := range []struct{ flag, path string }{{"-json", cfg.jsonPath}, {"-plot", cfg.plotPath}} {
		if out.path == "" {
			continue
		}
		if err := checkWritable(out.path); err != nil {
			return bad("%s %q: %v", out.flag, out.path, err)
		}
	}
	if cfg.pcapDir != "" {
		if st, err := os.Stat(cfg.pcapDir); err != nil || !st.IsDir() {
			return bad("-pcap %q: not an existing directory", cfg.pcapDir)
		}
		if err := checkWritable(filepath.Join(cfg.pcapDir, "probe")); err != nil {
			return bad("-pcap %q: %v", cfg.pcapDir, err)
		}
	}
	return cfg, nil
}

// parseList splits a comma-separated list, checks every name against known and
// drops duplicates, keeping known's order.
func parseList(s string, known []string) ([]string, error) {
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

// parseSize reads "20MB", "512KiB", "1000".
func parseSize(s string) (int64, error) {
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

// checkWritable makes sure a file can be created at path, without leaving
// anything behind: the directory must exist, and path must not be a directory.
func checkWritable(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return errors.New("is a directory")
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("directory %s: %w", dir, errors.Unwrap(err))
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	f, err := os.CreateTemp(dir, ".tcpwheel-compare-*")
	if err != nil {
		return fmt.Errorf("cannot create files in %s: %w", dir, errors.Unwrap(err))
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

func cmdCompare(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseCompareFlags(args, stderr)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("compare: needs root (TUN devices and network namespaces)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("compare: needs /dev/net/tun: %w", err)
	}
	// The namespaces of earlier runs that were killed before they could
	// clean up; a failure here never stops this comparison.
	netns.RemoveLeftovers()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return compare(ctx, cfg, stdout, stderr)
}

// compare runs every case for every stack, interleaved, then reports.
func compare(ctx context.Context, cfg compareConfig, stdout, stderr io.Writer) error {
	cases := expandCases(cfg)
	rep := &report{Config: reportConfigOf(cfg), Started: time.Now().UTC()}
	total := len(cases) * cfg.runs * len(cfg.stacks)
	done := 0
	prog := newProgress(stderr, cfg.quiet)
	defer prog.end()
	for _, c := range cases {
		for r := range cfg.runs {
			// Rotate the order of the stacks from run to run, so that none is
			// always first after another's run.
			for k := range cfg.stacks {
				name := cfg.stacks[(k+r)%len(cfg.stacks)]
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("compare: interrupted after %d of %d runs; nothing left behind", done, total)
				}
				done++
				prog.show(fmt.Sprintf("[%d/%d] %s %s run %d/%d", done, total, c.name, name, r+1, cfg.runs))
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
	rep.summarize(cfg.stacks, cases)
	rep.writeTable(stdout)
	if cfg.jsonPath != "" {
		if err := rep.writeJSON(cfg.jsonPath); err != nil {
			return fmt.Errorf("compare: %w", err)
		}
		fmt.Fprintf(stdout, "\nJSON: %s\n", cfg.jsonPath)
	}
	if cfg.plotPath != "" {
		if err := rep.writePlot(cfg.plotPath, cfg.stacks); err != nil {
			return fmt.Errorf("compare: %w", err)
		}
		fmt.Fprintf(stdout, "plot: %s\n", cfg.plotPath)
	}
	if n := rep.failedRuns(); n > 0 {
		return fmt.Errorf("compare: %d of %d runs failed (see the table and the errors above)", n, len(rep.Runs))
	}
	return nil
}

// progress is the line that says what runs now: rewritten in place on a
// terminal, one line per run otherwise.
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
