package main

// `tcpwheel compare`: the flags; the comparison itself is internal/compare.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"

	"github.com/tcpwheel/tcpwheel/cmd/tcpwheel/internal/compare"
	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/tcpwheel/tcpwheel/tun/netns"
)

func parseCompareFlags(args []string, stderr io.Writer) (compare.Config, error) {
	fs := flag.NewFlagSet("tcpwheel compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := compare.DefaultConfig()
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole comparison (this process: tcpwheel's stacks, gVisor's, the harness; not the clients) to this file; the servers of http-down, http-up, http-par, wrk and ab, each in a child process, write theirs beside it, to FILE.CASE-STACK-RUN")
	var (
		stacks    = fs.String("stacks", strings.Join(cfg.Stacks, ","), "comma-separated stacks to compare: "+strings.Join(compare.Stacks(), ", "))
		scenarios = fs.String("scenarios", strings.Join(cfg.Scenarios, ","), "comma-separated scenarios: "+strings.Join(compare.Scenarios(), ", "))
		bulkSize  = fs.String("bulk-size", "20MB", "bytes per bulk transfer (suffixes KB, MB: powers of 1000... KiB, MiB: of 1024)")
		bulkLoss  = fs.String("bulk-loss", "0,1,5", "comma-separated random loss rates of the bulk scenario, in percent, applied to both directions")
		family    = fs.String("family", "4", "the IP versions the scenarios run over: 4, 6 or 4,6; over IPv6 a case is reported as its own, named with /v6 (tail-loss, backoff, synack-loss, mid-loss, bulk, udp-echo; tcpwheel's stacks and gVisor's)")
		httpSize  = fs.String("http-size", "200MB", "bytes curl downloads (http-down) and uploads (http-up), with the same suffixes as -bulk-size")
	)
	fs.IntVar(&cfg.Runs, "runs", cfg.Runs, "runs of each scenario for each stack (interleaved between stacks)")
	fs.StringVar(&cfg.JSONPath, "json", "", "write the results, every run and every retransmission, as JSON to this file")
	fs.StringVar(&cfg.PlotPath, "plot", "", "write a plot (.svg or .png): the CDF of RTO slack per stack, and transfer time per scenario")
	fs.StringVar(&cfg.PcapDir, "pcap", "", "write a capture of each run into this directory (it must exist): a flight recording (.pcapng, replayable with tcpwheel replay) for tcpwheel, a pcap for gVisor")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the random loss (run i uses seed+i, the same for every stack)")
	fs.IntVar(&cfg.Conns, "conns", cfg.Conns, "connections of the many-conns scenario")
	fs.DurationVar(&cfg.Hold, "hold", cfg.Hold, "how long many-conns keeps its connections idle (with keepalive) while measuring CPU")
	fs.DurationVar(&cfg.RunTimeout, "run-timeout", cfg.RunTimeout, "the longest one run may take before it fails")
	fs.BoolVar(&cfg.Quiet, "q", false, "no progress line on standard error")
	fs.IntVar(&cfg.FloodSYNs, "flood-syns", cfg.FloodSYNs, "spoofed SYNs of the synflood scenario (sources 198.18.N.10-250, inside the run's namespace)")
	fs.IntVar(&cfg.FloodRate, "flood-rate", cfg.FloodRate, "their rate, SYNs per second")
	fs.IntVar(&cfg.FloodConns, "flood-conns", cfg.FloodConns, "legitimate kernel connects started evenly over the flood")
	fs.IntVar(&cfg.BurstConns, "burst-conns", cfg.BurstConns, "kernel clients of the burst scenario, connecting at once and all held open until the last has its echo")
	fs.IntVar(&cfg.BurstQueue, "burst-queue", cfg.BurstQueue, "the TUN's txqueuelen in burst, the kernel's queue of packets for the stack (0: 4 per -burst-conns, at least 10000, netns's default)")
	fs.IntVar(&cfg.WriteQueue, "write-queue", cfg.WriteQueue, "tcpwheel's device writer: packets its loop may queue for a writer goroutine (stack.Config.WriteQueue; 0: the loop writes them itself)")
	fs.IntVar(&cfg.SYNStash, "syn-stash", cfg.SYNStash, "tcpwheel's SYN stash: new connections' SYNs its loop may set aside until the TUN is drained, serving established connections first (stack.Config.SYNStash; 0: each SYN as it is read; not tcpwheel-rec)")
	fs.TextVar(&cfg.LoopThread, "loop-thread", stack.LoopAuto, "tcpwheel's loops: auto (parked when as many as GOMAXPROCS or more, else unlocked), locked, parked or unlocked (stack.Config.LoopThread; tcpwheel-rt's stay locked)")
	fs.IntVar(&cfg.Loops, "loops", 1, "tcpwheel's and tcpwheel-rt's event loops, each on a queue of a multi-queue TUN (stack.Config.Loops)")
	fs.BoolVar(&cfg.NoOffload, "no-offload", false, "tcpwheel's stacks on a plain TUN (tun.Open, or plain queues with -loops), as gVisor's: no virtio-net headers, GSO or GRO")
	fs.BoolVar(&cfg.InProcess, "in-process", false, "serve http-down, http-up, http-par, wrk and ab in this process, as before 2026-11-24 (their CPU figures then this process's rusage), instead of each stack's server in a child process of its own (its CPU its own)")
	fs.IntVar(&cfg.HTTPStreams, "http-streams", cfg.HTTPStreams, "parallel transfers of the http-par scenario, -http-size in all")
	fs.IntVar(&cfg.WrkConns, "wrk-conns", cfg.WrkConns, "wrk's keep-alive connections (the wrk scenario)")
	fs.DurationVar(&cfg.WrkTime, "wrk-time", cfg.WrkTime, "how long wrk runs, whole seconds")
	fs.IntVar(&cfg.ABRequests, "ab-requests", cfg.ABRequests, "ab's requests, each on a new connection (the ab scenario)")
	fs.IntVar(&cfg.ABConns, "ab-conns", cfg.ABConns, "ab's concurrency")
	fs.IntVar(&cfg.UDPDatagrams, "udp-datagrams", cfg.UDPDatagrams, "udp-echo's burst, datagrams of 1000 bytes (its latency phase sends a tenth of it, one at a time)")
	fs.IntVar(&cfg.Load, "load", 0, "run every scenario beside N CPU-bound processes (0: none; -load alone: GOMAXPROCS), killed at the end of each run")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: tcpwheel compare [flags]

Runs the same scenarios for each stack, through the same TUN device path,
impairment layer and pcap tap, with the Linux kernel in a fresh network namespace
per run as the peer, and prints a table of median, p90, p99 and max with ratios
against gvisor (and the kernel). Needs root.

The real-client scenarios (http-down, http-up, http-par, wrk, ab) run curl, wrk and ab
(Debian packages curl, wrk, apache2-utils) inside the run's namespace against
the same HTTP server on each stack. Two stacks take part only in them: kernel
(the server on kernel sockets, the clients over the namespace's loopback: the
ceiling) and gvisor-gso (gVisor on its own TUN opened with IFF_VNET_HDR: host
GSO out, the kernel's 64 KB segments in, checksums left to the kernel).
In http-down, http-up, http-par, wrk and ab each stack's server runs in a
child process of its own (this executable again), so that no stack shares a
heap or a runtime with another, and their CPU figures are that process's own
(-in-process: all in this one, as before).

scenarios:
`+compare.ScenarioHelp()+`
flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(bareLoad(args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, err
		}
		return cfg, fmt.Errorf("%w: %v", errUsage, err)
	}
	bad := func(format string, a ...any) (compare.Config, error) {
		return cfg, fmt.Errorf("%w: compare: %s", errUsage, fmt.Sprintf(format, a...))
	}
	if fs.NArg() > 0 {
		return bad("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if cfg.Stacks, err = compare.ParseList(*stacks, compare.Stacks()); err != nil {
		return bad("-stacks: %v", err)
	}
	if cfg.Scenarios, err = compare.ParseList(*scenarios, compare.Scenarios()); err != nil {
		return bad("-scenarios: %v", err)
	}
	if cfg.BulkSize, err = compare.ParseSize(*bulkSize); err != nil || cfg.BulkSize <= 0 || cfg.BulkSize > compare.MaxBulkSize {
		return bad("-bulk-size %q: want a size like 20MB, from 1 byte to 1 TiB", *bulkSize)
	}
	if cfg.HTTPSize, err = compare.ParseSize(*httpSize); err != nil || cfg.HTTPSize <= 0 || cfg.HTTPSize > compare.MaxBulkSize {
		return bad("-http-size %q: want a size like 200MB, from 1 byte to 1 TiB", *httpSize)
	}
	if cfg.BulkLoss, err = compare.ParsePercentages(*bulkLoss); err != nil {
		return bad("-bulk-loss %v", err)
	}
	if cfg.Families, err = compare.ParseFamilies(*family); err != nil {
		return bad("-family %v", err)
	}
	if err := cfg.Validate(); err != nil {
		return bad("%v", err)
	}
	return cfg, nil
}

// bareLoad gives a -load that no number follows the default of GOMAXPROCS
// processes: "-load -scenarios x" reads as "-load=N -scenarios x".
func bareLoad(args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if (a == "-load" || a == "--load") && (i+1 == len(args) || strings.HasPrefix(args[i+1], "-")) {
			a += "=" + strconv.Itoa(runtime.GOMAXPROCS(0))
		}
		out = append(out, a)
	}
	return out
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
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			return fmt.Errorf("compare: -cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("compare: -cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	return compare.Run(ctx, cfg, stdout, stderr)
}
