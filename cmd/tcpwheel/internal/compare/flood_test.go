package compare

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/testbed"
)

// TestFloodGoals: synflood's goals judge every stack on the same run's
// figures: the share of legitimate connects within 1 s over all runs, and
// the largest memory growth.
func TestFloodGoals(t *testing.T) {
	rep := &report{Config: reportConfig{Stacks: allStacks, Load: 2, Hog: DefaultHog(), CPUs: 2}}
	for _, st := range allStacks {
		for run, pct := range []float64{100, 99, 100} {
			mem := 1.0
			if st == stackGVisor {
				pct, mem = 90, 12
			}
			rep.Runs = append(rep.Runs, &runResult{Stack: st, Case: "synflood", Run: run + 1,
				Metrics: map[string]float64{"legit_within_1s_pct": pct, "mem_growth_mb": mem, "spurious_retx": 0}})
		}
	}
	rep.summarize(allStacks, expandCases(Config{Scenarios: []string{"synflood"}}))
	want := map[string]map[string]bool{
		"synflood: >= 99% of legitimate":  {stackTcpwheel: true, stackGVisor: false},
		"synflood: memory growth < 10 MB": {stackTcpwheel: true, stackGVisor: false},
	}
	found := 0
	for _, g := range rep.Goals {
		for prefix, met := range want {
			if !strings.HasPrefix(g.Name, prefix) {
				continue
			}
			found++
			for st, m := range met {
				if got, ok := g.Result[st]; !ok || got != m {
					t.Errorf("goal %q for %s: met %v (judged %v), want %v; values %v", g.Name, st, got, ok, m, g.Value)
				}
			}
		}
	}
	if found != len(want) {
		t.Fatalf("found %d of the %d flood goals in %+v", found, len(want), rep.Goals)
	}
	var out bytes.Buffer
	rep.writeTable(&out)
	for _, s := range []string{"UNDER LOAD: 2 CPU-bound processes", "spurious retransmissions", "legitimate connects done within 1 s"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, out.String())
		}
	}
}

// TestSYNFloodSmoke runs a small synflood (500 spoofed SYNs, well over the
// backlog of 128) on tcpwheel and gVisor, end to end: every legitimate
// connection completes and echoes, tcpwheel answers the overflow with SYN
// cookies, the flood crossed the TUN, and no namespace is left behind.
func TestSYNFloodSmoke(t *testing.T) {
	testbed.RequireRoot(t)
	before := ourNamespaces(t)
	cfg := DefaultConfig()
	cfg.Runs, cfg.Scenarios, cfg.Stacks, cfg.RunTimeout = 1, []string{"synflood"}, []string{stackTcpwheel, stackGVisor}, 40*time.Second
	cfg.FloodSYNs, cfg.FloodRate, cfg.FloodConns, cfg.Quiet = 500, 5000, 8, true
	jsonPath := filepath.Join(t.TempDir(), "flood.json")
	cfg.JSONPath = jsonPath
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := Run(ctx, cfg, &out, io.Discard); err != nil {
		t.Fatalf("compare: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	rep := readReport(t, jsonPath)
	if len(rep.Runs) != 2 {
		t.Fatalf("%d runs, want 2", len(rep.Runs))
	}
	for _, r := range rep.Runs {
		m := r.Metrics
		if r.Error != "" || m["legit_failed"] != 0 || len(r.Samples["legit_connect_ms"]) != cfg.FloodConns {
			t.Errorf("%s: error %q, %v legitimate connects failed, %d latencies; want none failed, %d", r.Stack, r.Error,
				m["legit_failed"], len(r.Samples["legit_connect_ms"]), cfg.FloodConns)
		}
		if m["flood_syns_sent"]+m["flood_send_errors"] != float64(cfg.FloodSYNs) || m["flood_syns_sent"] == 0 {
			t.Errorf("%s: %v SYNs sent, %v refused; want %d in all", r.Stack, m["flood_syns_sent"], m["flood_send_errors"], cfg.FloodSYNs)
		}
		// Every legitimate client got a SYN-ACK, and so did spoofed sources.
		if m["synacks_legit"] < float64(cfg.FloodConns) || m["synacks_sent"] <= m["synacks_legit"] {
			t.Errorf("%s: %v SYN-ACKs, %v to legitimate clients", r.Stack, m["synacks_sent"], m["synacks_legit"])
		}
		if _, ok := m["mem_growth_mb"]; !ok {
			t.Errorf("%s: no memory figure", r.Stack)
		}
		if r.Stack == stackTcpwheel && m["syn_cookies_sent"] == 0 {
			t.Errorf("tcpwheel sent no SYN cookie for %v spoofed SYNs over a backlog of 128", m["flood_syns_sent"])
		}
	}
	for _, s := range []string{"legitimate connects done within 1 s", "SYN cookies sent", "synflood: >= 99%"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table lacks %q", s)
		}
	}
	if after := ourNamespaces(t); len(after) > len(before) {
		t.Errorf("namespaces left behind: %v (before: %v)", after, before)
	}
}

// readReport reads the JSON report at path.
func readReport(t *testing.T, path string) report {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("JSON: %v", err)
	}
	return rep
}
