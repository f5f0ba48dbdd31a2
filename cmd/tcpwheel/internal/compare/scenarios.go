package compare

import (
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/seqnum"
)

// scenario describes one scenario of the comparison.
type scenario struct {
	name string
	help string // one line of `tcpwheel compare -h`
	// run runs one case on a runEnv and fills its result's metrics.
	run func(*runEnv) error
	// unwatched: the device chain carries no packet watcher (many-conns
	// measures memory and CPU, which the watcher would add to).
	unwatched bool
	// cases expands the scenario into the cases it reports; nil means one
	// case named after the scenario.
	cases func(cfg Config) []compareCase
	// v6: the scenario runs over IPv6 too (Config.Families): it reaches the
	// kernel and the stack only through runEnv's kernelListen, kernelDial,
	// stackDial and the stack's Listen, and parses packets with
	// parseTCPPacket.
	v6 bool
	// clients: a real-client scenario (real programs in the namespace against
	// the stack's HTTP server), in which the kernel and gvisor-gso take part.
	clients bool
	// udp: a UDP scenario, whose rows leave out the kernel's TCP counters.
	udp bool
	// served: a real-client scenario whose stack serves HTTP from a child
	// process of its own (server_child.go; not with Config.InProcess).
	served bool
}

// scenarios is every scenario, in the order they run. It is never written.
var scenarios = [...]scenario{
	{name: "tail-loss", v6: true, help: "the last data segment and the FIN are dropped once", run: scenarioTailLoss},
	{name: "backoff", v6: true, help: "one segment dropped twice: two retransmissions", run: scenarioBackoff},
	{name: "synack-loss", v6: true, help: "the stack's SYN-ACK dropped once", run: scenarioSYNACKLoss},
	{name: "mid-loss", v6: true, help: "mid-stream drops in a 2 MB transfer: fast retransmit / RACK", run: scenarioMidLoss},
	{name: "bulk", v6: true, help: "-bulk-size up and down at each -bulk-loss rate", run: scenarioBulk, cases: bulkCases},
	{name: "udp-echo", v6: true, unwatched: true, udp: true, help: "-udp-datagrams/10 UDP pings, then -udp-datagrams in a burst (64 in flight) to the stack's echo: RTT p50/p99, datagrams/s, MB/s, losses", run: scenarioUDPEcho},
	{name: "tcp-rr", unwatched: true, help: "5000 exchanges of 100 bytes, one at a time, on one connection from the kernel to the stack's echo (netperf's TCP_RR): round trip p50/p99, exchanges/s", run: scenarioTCPRR},
	{name: "keepalive", help: "probe timing, idle 200ms, interval 100ms, count 3", run: scenarioKeepalive},
	{name: "zero-window", help: "zero-window probe timing against a receiver that stops reading", run: scenarioZeroWindow},
	{name: "many-conns", help: "-conns idle connections with keepalive: CPU and memory per connection", run: scenarioManyConns, unwatched: true},
	{name: "synflood", help: "-flood-syns spoofed SYNs at -flood-rate/s while -flood-conns clients connect", run: scenarioSYNFlood, unwatched: true},
	{name: "burst", help: "-burst-conns kernel clients connect to the stack's echo at once, each echoes a message, all open until the last is done: connect p50/p99/max, failures, retransmissions", run: scenarioBurst, unwatched: true, clients: true},
	{name: "http-down", served: true, help: "curl downloads -http-size from the stack's HTTP server: MB/s, CPU per GB", run: scenarioHTTPDown, unwatched: true, clients: true},
	{name: "http-up", served: true, help: "curl uploads -http-size to it (PUT): MB/s, CPU per GB", run: scenarioHTTPUp, unwatched: true, clients: true},
	{name: "http-par", served: true, help: "curl downloads -http-size in -http-streams parallel transfers: aggregate MB/s, CPU per GB", run: scenarioHTTPPar, unwatched: true, clients: true},
	{name: "wrk", served: true, help: "wrk keep-alive, -wrk-conns connections for -wrk-time: requests/s, p99 latency", run: scenarioWrk, unwatched: true, clients: true},
	{name: "ab", served: true, help: "ab -n -ab-requests -c -ab-conns, a new connection per request: connections/s, failures", run: scenarioAB, unwatched: true, clients: true},
}

// clientScenarios lists the real-client scenarios.
func clientScenarios() []string {
	var names []string
	for i := range scenarios {
		if scenarios[i].clients {
			names = append(names, scenarios[i].name)
		}
	}
	return names
}

// caseRuns reports whether the named stack takes part in case c.
func caseRuns(stack string, c compareCase) bool {
	sc, ok := scenarioNamed(c.scenario)
	return !ok || runs(stack, sc) && (!c.v6 || speaksIPv6(stack))
}

// Scenarios returns the names of the scenarios, in the order they run.
func Scenarios() []string {
	names := make([]string, len(scenarios))
	for i := range scenarios {
		names[i] = scenarios[i].name
	}
	return names
}

// ScenarioHelp returns a line per scenario, its name and what it does, as
// `tcpwheel compare -h` lists them.
func ScenarioHelp() string {
	var b strings.Builder
	for i := range scenarios {
		fmt.Fprintf(&b, "  %-12s %s\n", scenarios[i].name, scenarios[i].help)
	}
	return b.String()
}

// scenarioNamed returns the scenario called name.
func scenarioNamed(name string) (*scenario, bool) {
	for i := range scenarios {
		if scenarios[i].name == name {
			return &scenarios[i], true
		}
	}
	return nil, false
}

// compareCase is one row group of the report: a scenario with its parameters
// (bulk expands to one case per direction and loss rate).
type compareCase struct {
	name     string // e.g. "tail-loss", "bulk-up-1%"
	scenario string
	loss     float64 // random loss, both directions
	up       bool    // bulk: stack -> kernel
	v6       bool    // over IPv6: the kernel at testbed's KernelAddr6, the stack at StackAddr6
}

// v6Suffix ends the name of a case over IPv6.
const v6Suffix = "/v6"

// expandCases lists the cases of cfg's scenarios, in the order they run:
// each case over IPv4 then, where cfg.Families has 6 and the scenario runs
// over IPv6, the same case over IPv6 right after it (so that the two sit
// side by side in the table).
func expandCases(cfg Config) []compareCase {
	fams := cfg.Families
	if len(fams) == 0 {
		fams = []int{4}
	}
	var cs []compareCase
	for _, name := range cfg.Scenarios {
		sc, ok := scenarioNamed(name)
		if !ok {
			continue
		}
		base := []compareCase{{name: name, scenario: name}}
		if sc.cases != nil {
			base = sc.cases(cfg)
		}
		for _, c := range base {
			for _, f := range fams {
				switch {
				case f == 4:
					cs = append(cs, c)
				case f == 6 && sc.v6:
					c6 := c
					c6.name, c6.v6 = c.name+v6Suffix, true
					cs = append(cs, c6)
				}
			}
		}
	}
	return cs
}

// bulkCases: bulk up, then down, at each loss rate.
func bulkCases(cfg Config) []compareCase {
	var cs []compareCase
	for _, up := range []bool{true, false} {
		dir := "down"
		if up {
			dir = "up"
		}
		for _, p := range cfg.BulkLoss {
			cs = append(cs, compareCase{name: fmt.Sprintf("bulk-%s-%g%%", dir, p*100), scenario: "bulk", loss: p, up: up})
		}
	}
	return cs
}

// The ports of the scenarios: the kernel's (or the stack's, when it listens).
const cmpPort = 5001

// Scenario parameters.
const (
	tailBytes       = 10000 // fits in the initial window: one burst, then the tail
	backoffWarm     = 4000
	backoffBytes    = 1000
	midLossBytes    = 2 << 20
	keepIdle        = 200 * time.Millisecond
	keepInterval    = 100 * time.Millisecond
	keepCount       = 3
	zwpRcvBuf       = 4096 // the kernel doubles it
	zwpBytes        = 2 << 20
	zwpProbes       = 3 // probes observed before the receiver reads again
	manyKeepIdle    = time.Second
	manyKeepIntvl   = time.Second
	manyDialWorkers = 32
)

// midLossDrops are the original data segments (counted from 1) that mid-loss
// drops once.
var midLossDrops = map[int]bool{100: true, 300: true, 301: true, 600: true}

// pattern fills b with a repeating pattern.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

// writeN writes n bytes to c in chunks.
func writeN(c net.Conn, n int64) error {
	buf := pattern(64 << 10)
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := c.Write(buf[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// readResult is what a reader got, and when its stream ended.
type readResult struct {
	n   int64
	at  time.Duration
	err error
}

// readToEOF reads c until EOF in a goroutine.
func (e *runEnv) readToEOF(c net.Conn) <-chan readResult {
	ch := make(chan readResult, 1)
	go func() {
		n, err := io.Copy(io.Discard, c)
		ch <- readResult{n: n, at: e.now(), err: err}
	}()
	return ch
}

// acceptAndReadToEOF accepts one connection on ln and reads it to EOF.
func (e *runEnv) acceptAndReadToEOF(ln net.Listener) <-chan readResult {
	ch := make(chan readResult, 1)
	go func() {
		c, err := e.accept(ln)
		if err != nil {
			ch <- readResult{err: err}
			return
		}
		ch <- <-e.readToEOF(c)
	}()
	return ch
}

// wait waits for a reader's result, within the run's time.
func (e *runEnv) wait(ch <-chan readResult, want int64) (readResult, error) {
	select {
	case r := <-ch:
		if r.err != nil {
			return r, fmt.Errorf("reader: %w after %d bytes", r.err, r.n)
		}
		if r.n != want {
			return r, fmt.Errorf("%w: %d bytes, want %d", errShort, r.n, want)
		}
		return r, nil
	case <-e.ctx.Done():
		return readResult{}, e.ctx.Err()
	}
}

// sleep sleeps for d or until the run ends.
func (e *runEnv) sleep(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-e.ctx.Done():
		return e.ctx.Err()
	}
}

// waitFor polls cond every millisecond for up to d.
func (e *runEnv) waitFor(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) || e.ctx.Err() != nil {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// issWatch learns the stack's initial sequence number of each flow from its SYN,
// inside a drop decision.
type issWatch struct {
	mu  sync.Mutex
	iss map[string]seqnum.Value // by the stack's address:port
}

func (w *issWatch) see(t tcpInfo) (seqnum.Value, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.iss == nil {
		w.iss = map[string]seqnum.Value{}
	}
	k := t.src.String()
	if t.has(header.TCPFlagSyn) {
		w.iss[k] = seqnum.Value(t.seq)
	}
	v, ok := w.iss[k]
	return v, ok
}

// contains reports whether the segment carries the byte at sequence number v.
func (t tcpInfo) contains(v seqnum.Value) bool {
	s := seqnum.Value(t.seq)
	return t.payload > 0 && s.LessThanEq(v) && v.LessThan(s.Add(seqnum.Size(t.payload)))
}

func closeWrite(c net.Conn) error {
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok {
		return fmt.Errorf("%T has no CloseWrite", c)
	}
	return cw.CloseWrite()
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
