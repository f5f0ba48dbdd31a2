// The load scenario: burst.

package compare

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tun/netns"
)

// Burst parameters.
const (
	// MaxBurstConns is the largest Config.BurstConns: the namespace's
	// ephemeral ports (burstPortRange) hold it with room to spare.
	MaxBurstConns = 50000
	// burstWithin is the bound on every connect of a burst.
	burstWithin = time.Second
	// burstLimit is how long a connect, and then the echo, may take before
	// the connection counts as failed: room for three of the kernel's SYN
	// retransmissions (1, 3 and 7 s after the first).
	burstLimit = 15 * time.Second
	// burstPortRange is the namespace's ip_local_port_range during a burst:
	// 55,536 ephemeral ports for the clients (the default, 32768-60999,
	// has 28,232, and connect's search for a free one slows as they fill).
	burstPortRange = "10000 65535"
	burstMsgFormat = "burst %05d" // each connection's message, echoed
)

// checkBurst checks -burst-conns, and that a run has time for a burst.
func (c *Config) checkBurst() error {
	if c.BurstConns < 1 || c.BurstConns > MaxBurstConns {
		return fmt.Errorf("-burst-conns %d: want 1 to %d", c.BurstConns, MaxBurstConns)
	}
	if c.BurstQueue < 0 || c.BurstQueue > netns.MaxTxQueueLen {
		return fmt.Errorf("-burst-queue %d: want 0 (%d packets per connection) or 1 to %d", c.BurstQueue, burstPacketsPerConn, netns.MaxTxQueueLen)
	}
	if c.Loops < 0 || c.Loops > stack.MaxLoops {
		return fmt.Errorf("-loops %d: want 1 to %d", c.Loops, stack.MaxLoops)
	}
	if c.WriteQueue < 0 || c.WriteQueue > stack.MaxWriteQueue {
		return fmt.Errorf("-write-queue %d: want 0 to %d", c.WriteQueue, stack.MaxWriteQueue)
	}
	if c.SYNStash < 0 || c.SYNStash > stack.MaxSYNStash {
		return fmt.Errorf("-syn-stash %d: want 0 to %d", c.SYNStash, stack.MaxSYNStash)
	}
	if slices.Contains(c.Scenarios, "burst") && c.RunTimeout < 2*burstLimit+10*time.Second {
		return fmt.Errorf("-run-timeout %v: burst needs at least %v (a connect, then its echo, may take %v each)",
			c.RunTimeout, 2*burstLimit+10*time.Second, burstLimit)
	}
	return nil
}

// listenBacklog is every listener's backlog in case c, given to each stack
// when it starts (0: the stack's default). For burst it holds every
// connection at once: half-open and waiting for Accept, on every stack
// (tcpwheel's stack.Config.Backlog bounds both; gVisor's listen backlog is its
// accept queue, and it answers with SYN cookies once as many handshakes are
// pending; the kernel's listen(2), with the namespace's somaxconn and
// tcp_max_syn_backlog raised to it).
func listenBacklog(cfg Config, c compareCase) int {
	if c.scenario == "burst" {
		return max(cfg.BurstConns, tcp.DefaultBacklog)
	}
	return 0
}

// burstPacketsPerConn is what the TUN's queue holds per connection of a
// burst by default (Config.BurstQueue): the kernel's SYN, its ACK, its
// message and its FIN may all wait there at once when the stack falls
// behind, and with netns's default (10,000, whatever the burst) a
// burst of 20,000 lost tens of thousands of them, each a SYN resent after
// 1 s or a segment after an RTO.
const burstPacketsPerConn = 4

// limits are what a case changes of the stacks and the link: every
// listener's backlog, and the TUN's queue (its txqueuelen, which tcpwheel's
// stacks are told as stack.Config.InputQueue); zero fields leave the
// defaults.
type limits struct {
	backlog, inputQueue, writeQueue, synStash, loops int
	loopThread                                       stack.LoopThread
}

// runLimits are the limits of case c.
func runLimits(cfg Config, c compareCase) limits {
	return limits{backlog: listenBacklog(cfg, c), inputQueue: burstTxQueueLen(cfg, c), writeQueue: cfg.WriteQueue, synStash: cfg.SYNStash, loops: cfg.Loops, loopThread: cfg.LoopThread}
}

// burstTxQueueLen is the TUN's txqueuelen in case c (0: netns's default).
func burstTxQueueLen(cfg Config, c compareCase) int {
	switch {
	case c.scenario != "burst":
		return 0
	case cfg.BurstQueue > 0:
		return cfg.BurstQueue
	}
	return max(burstPacketsPerConn*cfg.BurstConns, netns.DefaultTxQueueLen)
}

// connResult is one connection of a burst.
type connResult struct {
	connect time.Duration // from connect(2) to connected
	issued  time.Time     // when connect(2) was called
	end     time.Time     // when its echo was read
	err     error
}

// scenarioBurst: -burst-conns kernel clients in the namespace connect to the
// stack's echo listener all at once (each its own non-blocking connect(2),
// from as many goroutines), each sends a short message and reads it back,
// and every one stays open until the last has done so: -burst-conns
// connections at once. Then they close. Reports the connect latency (p50,
// p99, max, the share within 1 s), the connections that failed, the time
// from the first connect to the last echo, and the retransmissions of both
// sides over the segments they sent: the stack's from its own counters, the
// kernel's from the namespace's (nstat). tcpwheel's and gVisor's listener
// drops and SYN cookies, and tcpwheel's loop (timer lateness, full input
// batches), say where a stack falls behind.
//
// The clients run in child processes (burst_child.go), at most
// burstPerChild each: a process may hold no more descriptors than its
// RLIMIT_NOFILE, whose hard limit an unprivileged container cannot raise
// (20,000 on the machine this was built on). For the same reason the kernel
// stack's echo server is child processes too, on one port with SO_REUSEPORT.
func scenarioBurst(e *runEnv) error {
	n := e.cfg.BurstConns
	backlog := listenBacklog(e.cfg, e.c)
	if err := e.bed.Do(func() error {
		for _, s := range [][2]string{
			{"net/core/somaxconn", strconv.Itoa(backlog)},
			{"net/ipv4/tcp_max_syn_backlog", strconv.Itoa(backlog)},
			{"net/ipv4/ip_local_port_range", burstPortRange},
		} {
			if err := os.WriteFile("/proc/sys/"+s[0], []byte(s[1]), 0); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("namespace sysctls: %w", err)
	}
	host := e.bed.StackAddr
	if ca, ok := e.stack.(clientAddresser); ok {
		host = ca.ClientAddr()
	}
	target := netip.AddrPortFrom(host, cmpPort)
	if _, ok := e.stack.(*kernelStack); ok {
		servers := (n + burstPerChild - 1) / burstPerChild
		for range servers + 1 { // SO_REUSEPORT spreads the connections by hash: room for an uneven share
			if _, err := e.startBurstChild(burstServer, target.String(), strconv.Itoa(backlog)); err != nil {
				return err
			}
		}
	} else {
		ln, err := e.stack.Listen(cmpPort)
		if err != nil {
			return err
		}
		e.onClose(func() { ln.Close() })
		go e.burstEchoServer(ln)
	}
	var clients []*burstChild
	for first := 0; first < n; first += burstPerChild {
		c, err := e.startBurstChild(burstClient, target.String(), strconv.Itoa(first), strconv.Itoa(min(burstPerChild, n-first)))
		if err != nil {
			return err
		}
		clients = append(clients, c)
	}

	sc0, k0 := e.burstCounters()
	cpu0 := cpuTime()
	start := time.Now()
	for _, c := range clients {
		if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
			return fmt.Errorf("burst client: %w", err)
		}
	}
	rs := make([]connResult, n)
	errc := make(chan error, len(clients))
	for _, c := range clients {
		go func() { errc <- c.results(rs) }()
	}
	for range clients {
		select {
		case err := <-errc:
			if err != nil {
				return err
			}
		case <-e.ctx.Done():
			return e.ctx.Err()
		}
	}
	// Every connection that did not fail is open here: n at once.
	cpu := cpuTime() - cpu0
	sc1, k1 := e.burstCounters()
	for _, c := range clients {
		c.stdin.Close() // the client closes its connections and exits
	}
	for _, c := range clients {
		if err := c.wait(); err != nil {
			return err
		}
	}

	m := e.res.Metrics
	m["burst_tun_queue"] = float64(burstTxQueueLen(e.cfg, e.c))
	if _, ok := e.stack.(*kernelStack); !ok { // its server is child processes
		m["cpu_ms"] = ms(cpu) // the stack and its echo server, over the burst
	}
	firstErr := burstMetrics(m, rs, start)
	recordBurstCounters(m, sc0, sc1, k0, k1)
	if m["burst_errors"] == float64(n) {
		return fmt.Errorf("no connection of the burst completed: %w", firstErr)
	}
	return nil
}

// burstMetrics records the burst's connections, started at start, in m and
// returns the first error among them.
func burstMetrics(m map[string]float64, rs []connResult, start time.Time) error {
	var connects []float64
	var firstErr error
	errs, within, timeouts := 0, 0, 0
	var last, issued time.Duration
	for _, r := range rs {
		if !r.issued.IsZero() {
			issued = max(issued, r.issued.Sub(start))
		}
		if r.err != nil {
			errs++
			if errors.Is(r.err, errBurstTimeout) {
				timeouts++
			}
			if firstErr == nil {
				firstErr = r.err
			}
			continue
		}
		connects = append(connects, ms(r.connect))
		if r.connect <= burstWithin {
			within++
		}
		last = max(last, r.end.Sub(start))
	}
	slices.Sort(connects)
	m["burst_errors"] = float64(errs)
	m["burst_errors_timeout"] = float64(timeouts)
	m["burst_concurrent"] = float64(len(rs) - errs)
	m["burst_within_1s_pct"] = 100 * float64(within) / float64(len(rs))
	m["burst_issued_ms"] = ms(issued)
	if len(connects) > 0 {
		m["burst_connect_p50_ms"] = quantile(connects, 0.5)
		m["burst_connect_p99_ms"] = quantile(connects, 0.99)
		m["burst_connect_max_ms"] = connects[len(connects)-1]
		m["burst_total_ms"] = ms(last)
	}
	return firstErr
}

// burstEchoServer accepts on ln until it is closed, and echoes each
// connection until its peer closes it.
func (e *runEnv) burstEchoServer(ln net.Listener) {
	e.serveConns(ln, func(c net.Conn) { echo(c) })
}

// echo writes back what it reads from c until either fails.
func echo(c io.ReadWriter) {
	buf := make([]byte, 64)
	for {
		k, err := c.Read(buf)
		if k > 0 {
			if _, werr := c.Write(buf[:k]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// segmentCounter is a stack that counts the TCP segments it sent and
// resent (tcpwheel's and gVisor's; the kernel stack's are the namespace's).
type segmentCounter interface {
	// burstCounts returns the segments sent and retransmitted, and the
	// stack's listener and loop counters worth a look in a burst, by metric.
	burstCounts() (sent, retrans uint64, more map[string]float64)
}

// burstGauges are burstCounts' figures that are levels, not counters.
var burstGauges = []string{"timer_late_p99_ms", "timer_late_max_ms"}

func (t *tcpwheelStack) burstCounts() (uint64, uint64, map[string]float64) {
	st := t.s.Stats()
	more := map[string]float64{}
	var drops uint64
	for _, d := range st.DropCounts() {
		drops += d.N
		if d.N > 0 {
			more["stack_drops."+d.Name] = float64(d.N) // by reason: which drops grow in a burst
		}
	}
	maps.Copy(more, map[string]float64{
		"listen_backlog_drops": float64(st.Listen.DropsBacklog),
		"accept_queue_drops":   float64(st.Listen.DropsAcceptQueue),
		"syn_cookies_sent":     float64(st.Listen.SynCookiesSent),
		"stack_drops":          float64(drops),
		"stack_synack_retx":    float64(st.TCP.SYNRetransmits),
		"stack_rto_events":     float64(st.TCP.RTOEvents),
		"stack_tlp_probes":     float64(st.TCP.TLPProbes),
		"input_full_batches":   float64(st.Input.Full),
		"deferred_expiries":    float64(st.Wheel.DeferredExpiries),
		"syns_stashed":         float64(st.Input.SYNsStashed),
		"syns_early":           float64(st.Input.SYNsEarly + st.Input.SYNsAged),
		"timer_late_p99_ms":    float64(st.Wheel.LateP99) / 1e6,
		"timer_late_max_ms":    float64(st.Wheel.LateMax) / 1e6,
	})
	return st.SegmentsOut, st.TCP.SegsRetransmitted, more
}

func (g *gvisorStack) burstCounts() (uint64, uint64, map[string]float64) {
	st := g.s.GVisor().Stats()
	return st.TCP.SegmentsSent.Value(), st.TCP.Retransmits.Value(), map[string]float64{
		"listen_backlog_drops": float64(st.TCP.ListenOverflowSynDrop.Value()),
		"accept_queue_drops":   float64(st.TCP.ListenOverflowAckDrop.Value()),
		"syn_cookies_sent":     float64(st.TCP.ListenOverflowSynCookieSent.Value()),
		"stack_drops":          float64(st.DroppedPackets.Value()),
	}
}

var (
	_ segmentCounter = (*tcpwheelStack)(nil)
	_ segmentCounter = (*gvisorStack)(nil)
)

// burstSnapshot is a stack's burstCounts at one instant; ok is false for a
// stack without them.
type burstSnapshot struct {
	sent, retrans uint64
	more          map[string]float64
	ok            bool
}

// burstCounters reads the stack's counters and the namespace's kernel
// counters (nil when unreadable).
func (e *runEnv) burstCounters() (burstSnapshot, map[string]uint64) {
	s := e.stackCounters()
	k, err := e.bed.KernelCounters()
	if err != nil {
		return s, nil
	}
	// Every TUN of the namespace: gvisor-gso's is its own, not the bed's.
	err = e.bed.Do(func() error {
		data, err := os.ReadFile("/proc/thread-self/net/dev")
		if err == nil {
			k[burstTUNDrops] = tunDrops(data)
		}
		return err
	})
	if err != nil {
		return s, nil
	}
	return s, k
}

// stackCounters reads the stack's own counters (not ok for a stack without
// them).
func (e *runEnv) stackCounters() burstSnapshot {
	if c, ok := e.stack.(*childStack); ok {
		return c.counters()
	}
	var s burstSnapshot
	if sc, ok := e.stack.(segmentCounter); ok {
		s.sent, s.retrans, s.more = sc.burstCounts()
		s.ok = true
	}
	return s
}

// burstTUNDrops is the key of tunDrops in burstCounters' kernel counters.
const burstTUNDrops = "burst.tun_tx_dropped"

// tunDrops sums the tx_dropped of every link of /proc/net/dev but the
// loopback: the packets the kernel dropped at a TUN's queue, towards the
// stack.
func tunDrops(data []byte) uint64 {
	var n uint64
	for _, line := range strings.Split(string(data), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		f := strings.Fields(rest)
		if !ok || strings.TrimSpace(name) == "lo" || len(f) < 12 {
			continue
		}
		if v, err := strconv.ParseUint(f[11], 10, 64); err == nil {
			n += v
		}
	}
	return n
}

// burstKernelKinds are the kinds of the kernel side's retransmissions
// (nstat), by metric; TcpExt.TCPSynRetrans is every run's kernel_syn_retrans.
var burstKernelKinds = []struct{ metric, counter string }{
	{"kernel_rto", "TcpExt.TCPTimeouts"},              // RTO expiries (SYNs' included)
	{"kernel_tlp", "TcpExt.TCPLossProbes"},            // tail-loss probes
	{"kernel_spurious_rto", "TcpExt.TCPSpuriousRTOs"}, // RTOs found spurious (F-RTO)
}

// recordBurstCounters records the counters' growth over the burst: each
// side's retransmissions over its segments sent, and both sides' together
// (the goal's figure). The kernel stack has no counters of its own: the
// namespace's count both of its sides, the clients' and the server's.
func recordBurstCounters(m map[string]float64, s0, s1 burstSnapshot, k0, k1 map[string]uint64) {
	var sent, retrans float64
	if s0.ok && s1.ok {
		ss, sr := float64(s1.sent-s0.sent), float64(s1.retrans-s0.retrans)
		m["stack_segs_out"], m["stack_retx"] = ss, sr
		if ss > 0 {
			m["stack_retx_pct"] = 100 * sr / ss
		}
		sent, retrans = ss, sr
		for k, v := range s1.more {
			switch {
			case slices.Contains(burstGauges, k):
				m[k] = v
			case v > s0.more[k]:
				m[k] = v - s0.more[k]
			case !strings.HasPrefix(k, "stack_drops."): // a reason that did not grow: no row
				m[k] = 0
			}
		}
	}
	if k0 != nil && k1 != nil {
		ks, kr := float64(k1["Tcp.OutSegs"]-k0["Tcp.OutSegs"]), float64(k1["Tcp.RetransSegs"]-k0["Tcp.RetransSegs"])
		m["kernel_segs_out"], m["kernel_retx"] = ks, kr
		m["burst_tun_drops"] = float64(k1[burstTUNDrops] - k0[burstTUNDrops])
		for _, c := range burstKernelKinds {
			m[c.metric] = float64(k1[c.counter] - k0[c.counter])
		}
		if ks > 0 {
			m["kernel_retx_pct"] = 100 * kr / ks
		}
		sent, retrans = sent+ks, retrans+kr
	}
	if sent > 0 {
		m["burst_retx_pct"] = 100 * retrans / sent
	}
}

// The burst goal, from the issue.
const goalBurstRetxPct = 1.0

// burstGoal judges every stack on the burst: over every run, no connection
// failed, none took more than 1 s to connect, and retransmissions (both
// sides) stayed under 1% of the segments sent. A run that failed misses it.
func (rep *report) burstGoal(add func(name, source string, judge func(st string) (any, bool, bool))) {
	add(fmt.Sprintf("burst: 0 errors, every connect within 1 s, retransmissions < %g%% of segments", goalBurstRetxPct), "issue", func(st string) (any, bool, bool) {
		failed := 0
		for _, r := range rep.Runs {
			if r.Case == "burst" && r.Stack == st && r.Error != "" {
				failed++
			}
		}
		errs := rep.values("burst", st, "burst_errors")
		if len(errs) == 0 && failed == 0 {
			return nil, false, false
		}
		worst := func(metric string) float64 {
			w := math.NaN()
			for _, v := range rep.values("burst", st, metric) {
				if math.IsNaN(w) || v > w {
					w = v
				}
			}
			return w
		}
		e, c, x := worst("burst_errors"), worst("burst_connect_max_ms"), worst("burst_retx_pct")
		v := fmt.Sprintf("errors %s, connect max %s ms, retransmissions %s%% (worst run)", fmtNum(e), fmtNum(c), fmtNum(x))
		if failed > 0 {
			v = fmt.Sprintf("%d runs failed; %s", failed, v)
		}
		met := failed == 0 && e == 0 && c <= ms(burstWithin) && x < goalBurstRetxPct
		return v, met, true
	})
}
