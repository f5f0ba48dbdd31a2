package compare

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/testbed"
)

// TestBurstGoal: the burst goal is met only with no failed connection, no
// connect over 1 s and retransmissions under 1% of the segments, in every
// run; a failed run misses it, and a run without burst leaves it out.
func TestBurstGoal(t *testing.T) {
	stacks := []string{stackTcpwheel, stackGVisor, stackGVisorGSO, stackKernel}
	ok := map[string]float64{"burst_errors": 0, "burst_connect_max_ms": 900, "burst_retx_pct": 0.5}
	with := func(k string, v float64) map[string]float64 {
		m := map[string]float64{}
		for a, b := range ok {
			m[a] = b
		}
		m[k] = v
		return m
	}
	rep := &report{Config: reportConfig{Stacks: stacks}}
	add := func(st string, run int, m map[string]float64, runErr string) {
		rep.Runs = append(rep.Runs, &runResult{Stack: st, Case: "burst", Run: run, Metrics: m, Error: runErr})
	}
	for run := 1; run <= 3; run++ {
		add(stackKernel, run, ok, "")
	}
	add(stackTcpwheel, 1, ok, "")
	add(stackTcpwheel, 2, with("burst_connect_max_ms", 1001), "") // one run's slowest connect over 1 s
	add(stackGVisor, 1, ok, "")
	add(stackGVisor, 2, with("burst_retx_pct", 1), "") // 1% is not under 1%
	add(stackGVisorGSO, 1, with("burst_errors", 0), "")
	add(stackGVisorGSO, 2, nil, "no connection of the burst completed")
	rep.summarize(stacks, []compareCase{{name: "burst", scenario: "burst"}})
	var g *goal
	for i := range rep.Goals {
		if strings.HasPrefix(rep.Goals[i].Name, "burst: 0 errors, every connect within 1 s, retransmissions < 1%") {
			g = &rep.Goals[i]
		}
	}
	if g == nil {
		t.Fatalf("no burst goal in %+v", rep.Goals)
	}
	want := map[string]bool{stackKernel: true, stackTcpwheel: false, stackGVisor: false, stackGVisorGSO: false}
	for st, met := range want {
		if got, judged := g.Result[st]; !judged || got != met {
			t.Errorf("%s: met %v (judged %v), want %v; value %v", st, got, judged, met, g.Value[st])
		}
	}
	if v := fmt.Sprint(g.Value[stackTcpwheel]); !strings.Contains(v, "connect max 1001 ms") {
		t.Errorf("tcpwheel's value %q: want the worst run's connect max", v)
	}
	if v := fmt.Sprint(g.Value[stackGVisorGSO]); !strings.HasPrefix(v, "1 runs failed") {
		t.Errorf("gvisor-gso's value %q: want the failed run said", v)
	}
	var out bytes.Buffer
	rep.writeTable(&out)
	for _, s := range []string{"burst: connect max (ms)", "burst: retransmissions, % of segments sent", "kernel: MET", "tcpwheel: MISSED"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, out.String())
		}
	}

	other := &report{Config: reportConfig{Stacks: stacks}}
	other.Runs = []*runResult{{Stack: stackTcpwheel, Case: "tail-loss", Metrics: map[string]float64{"recovery_ms": 1}}}
	other.summarize(stacks, []compareCase{{name: "tail-loss", scenario: "tail-loss"}})
	for _, g := range other.Goals {
		if strings.HasPrefix(g.Name, "burst") {
			t.Errorf("goal %q judged without a burst run", g.Name)
		}
	}
}

// TestBurstMetrics: the connect quantiles, the share within 1 s and the
// failures of a burst, and the retransmission shares of both sides; a
// client's result lines read back as written.
func TestBurstMetrics(t *testing.T) {
	start := time.Unix(1000, 0)
	var rs []connResult
	for i := range 98 {
		rs = append(rs, connResult{connect: time.Duration(i+1) * time.Millisecond, issued: start.Add(time.Duration(i) * time.Millisecond),
			end: start.Add(time.Duration(i+1) * 10 * time.Millisecond)})
	}
	rs = append(rs, connResult{connect: 1200 * time.Millisecond, end: start.Add(1500 * time.Millisecond)})
	rs = append(rs, connResult{issued: start.Add(120 * time.Millisecond), err: fmt.Errorf("%w: connection 99: read: i/o timeout", errBurstTimeout)})
	// Through a client's lines, as the parent reads them.
	for i, r := range rs {
		j, back, err := parseBurstResult(formatBurstResult(i, r))
		if err != nil || j != i || back.connect != r.connect || !back.end.Equal(r.end) || !back.issued.Equal(r.issued) || (back.err == nil) != (r.err == nil) {
			t.Fatalf("result %d: read back %d %+v %v, want %+v", i, j, back, err, r)
		}
		rs[i] = back
	}
	m := map[string]float64{}
	if err := burstMetrics(m, rs, start); !errors.Is(err, errBurstTimeout) {
		t.Errorf("first error %v, want the timeout", err)
	}
	for k, want := range map[string]float64{
		"burst_errors": 1, "burst_errors_timeout": 1, "burst_concurrent": 99, "burst_within_1s_pct": 98,
		"burst_connect_p50_ms": 50, "burst_connect_p99_ms": 1200, "burst_connect_max_ms": 1200, "burst_total_ms": 1500, "burst_issued_ms": 120,
	} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
	m = map[string]float64{}
	s0 := burstSnapshot{sent: 100, retrans: 1, ok: true, more: map[string]float64{"accept_queue_drops": 5, "timer_late_p99_ms": 1}}
	s1 := burstSnapshot{sent: 1100, retrans: 11, ok: true, more: map[string]float64{"accept_queue_drops": 7, "timer_late_p99_ms": 3}}
	k0 := map[string]uint64{"Tcp.OutSegs": 10, "Tcp.RetransSegs": 0, burstTUNDrops: 4}
	k1 := map[string]uint64{"Tcp.OutSegs": 1010, "Tcp.RetransSegs": 30, burstTUNDrops: 9}
	recordBurstCounters(m, s0, s1, k0, k1)
	for k, want := range map[string]float64{
		"stack_retx_pct": 1, "kernel_retx_pct": 3, "burst_retx_pct": 2, "burst_tun_drops": 5, "accept_queue_drops": 2, "timer_late_p99_ms": 3,
	} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
}

// TestTUNDrops: the TUN drops of /proc/net/dev are every link's tx_dropped
// but the loopback's.
func TestTUNDrops(t *testing.T) {
	dev := `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     100       1    0    7    0     0          0         0      100       1    0    9    0     0       0          0
twc123:    8442   66984    0    0    0     0          0         0  4911498   70721    0 86252    0     0       0          0
twc456:       0       0    0    0    0     0          0         0        0       0    0   100    0     0       0          0
`
	if got := tunDrops([]byte(dev)); got != 86352 {
		t.Errorf("tunDrops = %d, want 86352", got)
	}
}

// TestBurstSmoke runs a small burst (300 connections, in two client
// processes) on every stack it is judged on, end to end: every connection
// connects and echoes, all are open at once, both sides' segments are
// counted, and no namespace is left behind.
func TestBurstSmoke(t *testing.T) {
	testbed.RequireRoot(t)
	before := ourNamespaces(t)
	cfg := DefaultConfig()
	stacks := []string{stackTcpwheel, stackGVisor, stackGVisorGSO, stackKernel}
	cfg.Runs, cfg.Scenarios, cfg.Stacks, cfg.Quiet = 1, []string{"burst"}, stacks, true
	cfg.BurstConns = 300
	jsonPath := filepath.Join(t.TempDir(), "burst.json")
	cfg.JSONPath = jsonPath
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	saved := burstPerChild
	burstPerChild = 200 // two clients, and two kernel servers
	defer func() { burstPerChild = saved }()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := Run(ctx, cfg, &out, io.Discard); err != nil {
		t.Fatalf("compare: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	rep := readReport(t, jsonPath)
	if len(rep.Runs) != len(stacks) {
		t.Fatalf("%d runs, want %d", len(rep.Runs), len(stacks))
	}
	for _, r := range rep.Runs {
		m := r.Metrics
		if r.Error != "" || m["burst_errors"] != 0 || m["burst_concurrent"] != float64(cfg.BurstConns) {
			t.Errorf("%s: error %q, %v failed, %v open at once; want none failed, %d", r.Stack, r.Error, m["burst_errors"], m["burst_concurrent"], cfg.BurstConns)
		}
		if !(m["burst_connect_max_ms"] > 0 && m["burst_connect_p50_ms"] <= m["burst_connect_max_ms"] && m["burst_total_ms"] > 0) {
			t.Errorf("%s: connect p50 %v, max %v, total %v ms", r.Stack, m["burst_connect_p50_ms"], m["burst_connect_max_ms"], m["burst_total_ms"])
		}
		// The kernel side sends at least a SYN, an ACK and the message per
		// connection; a stack with counters at least a SYN-ACK and the echo.
		if m["kernel_segs_out"] < 3*float64(cfg.BurstConns) {
			t.Errorf("%s: the kernel side sent %v segments, want at least %d", r.Stack, m["kernel_segs_out"], 3*cfg.BurstConns)
		}
		if _, has := m["stack_segs_out"]; has != (r.Stack != stackKernel) || has && m["stack_segs_out"] < 2*float64(cfg.BurstConns) {
			t.Errorf("%s: stack segments %v (reported %v)", r.Stack, m["stack_segs_out"], has)
		}
	}
	if !strings.Contains(out.String(), "burst: 0 errors, every connect within 1 s") {
		t.Errorf("table lacks the burst goal")
	}
	if after := ourNamespaces(t); len(after) > len(before) {
		t.Errorf("namespaces left behind: %v (before: %v)", after, before)
	}
	if os.Getenv(burstChildEnv) != "" {
		t.Errorf("%s set in the parent", burstChildEnv)
	}
}
