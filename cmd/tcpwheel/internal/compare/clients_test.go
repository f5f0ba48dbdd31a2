package compare

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/testbed"
)

const wrkSample = `Running 1s test @ http://127.0.0.1:8000/
  1 threads and 2 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     9.27ms    5.01ms  33.50ms   79.65%
    Req/Sec   218.20     37.60   280.00     70.00%
  Latency Distribution
     50%  754.00us
     75%   10.93ms
     90%   15.53ms
     99%    1.20s
  218 requests in 1.01s, 3.25MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 4
Requests/sec:    215.56
Transfer/sec:      3.21MB
`

const abSample = `Complete requests:      50
Failed requests:        3
Non-2xx responses:      2
Requests per second:    224.99 [#/sec] (mean)
Percentage of the requests served within a certain time (ms)
  50%      7
  98%     20
  99%     21
 100%     22 (longest request)
`

func TestParseClients(t *testing.T) {
	rate, total, p50, p99, errs, err := parseWrk(wrkSample)
	if err != nil || rate != 215.56 || total != 218 || p50 != 0.754 || p99 != 1200 || errs != 7 {
		t.Errorf("parseWrk = %v %v %v %v %v %v; want 215.56 218 0.754 1200 7", rate, total, p50, p99, errs, err)
	}
	if _, _, _, _, _, err := parseWrk("unable to connect to 198.18.0.2:8080 Connection refused"); err == nil {
		t.Error("parseWrk accepted a failure")
	}
	r, complete, failed, p, err := parseAB(abSample)
	if err != nil || r != 224.99 || complete != 50 || failed != 5 || p != 21 {
		t.Errorf("parseAB = %v %v %v %v %v; want 224.99 50 5 21", r, complete, failed, p, err)
	}
	if _, _, _, _, err := parseAB("apr_socket_recv: Connection refused (111)"); err == nil {
		t.Error("parseAB accepted a failure")
	}
	if n, s, c, err := curlFields("20000000 0.125 200"); err != nil || n != 20e6 || s != 0.125 || c != 200 {
		t.Errorf("curlFields = %v %v %v %v", n, s, c, err)
	}
	for _, bad := range []string{"", "1 2", "x 0.1 200"} {
		if _, _, _, err := curlFields(bad); err == nil {
			t.Errorf("curlFields(%q) succeeded", bad)
		}
	}
}

// TestMissingClient: a client program that is not installed is an error
// that names it and its package.
func TestMissingClient(t *testing.T) {
	_, err := (&runEnv{}).client(clientTool{"tcpwheel-no-such-client", "no-such-package"})
	if !errors.Is(err, errNoClient) || !strings.Contains(err.Error(), "no-such-package") {
		t.Errorf("missing client: %v", err)
	}
}

func TestValidateClients(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(c *Config)
		want string
	}{
		{"kernel alone in a loss scenario", func(c *Config) { c.Stacks, c.Scenarios = []string{stackKernel}, []string{"tail-loss"} }, "real-client"},
		{"http size", func(c *Config) { c.HTTPSize = 0 }, "-http-size"},
		{"http streams", func(c *Config) { c.HTTPStreams = 65 }, "-http-streams"},
		{"wrk conns", func(c *Config) { c.WrkConns = 0 }, "-wrk-conns"},
		{"wrk time", func(c *Config) { c.WrkTime = 1500 * time.Millisecond }, "-wrk-time"},
		{"wrk time vs run timeout", func(c *Config) { c.WrkTime, c.RunTimeout = 60*time.Second, 30*time.Second }, "-run-timeout"},
		{"ab requests", func(c *Config) { c.ABRequests = 0 }, "-ab-requests"},
		{"ab conns", func(c *Config) { c.ABRequests, c.ABConns = 10, 20 }, "-ab-conns"},
	} {
		cfg := DefaultConfig()
		tc.set(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want an error about %s", tc.name, err, tc.want)
		}
	}
	cfg := DefaultConfig()
	cfg.Stacks, cfg.Scenarios = []string{stackGVisorGSO, stackKernel}, clientScenarios()
	if err := cfg.Validate(); err != nil {
		t.Errorf("kernel and gvisor-gso in the real-client scenarios: %v", err)
	}
}

// requireClients fails (CI=true) or skips when a client program is missing.
func requireClients(t *testing.T) {
	t.Helper()
	for _, tool := range ClientTools() {
		if _, err := exec.LookPath(tool[0]); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s not installed (Debian package %s; scripts/deps.sh): CI=true, not skipping", tool[0], tool[1])
			}
			t.Skipf("%s not installed (Debian package %s; scripts/deps.sh)", tool[0], tool[1])
		}
	}
}

// TestClientsSmoke runs the real-client scenarios once on tcpwheel, gvisor,
// gvisor-gso and the kernel, with tiny sizes, end to end, with the JSON.
func TestClientsSmoke(t *testing.T) {
	testbed.RequireRoot(t)
	requireClients(t)
	before := ourNamespaces(t)
	dir := t.TempDir()
	cfg := DefaultConfig()
	// burst, in which kernel and gvisor-gso take part too, has TestBurstSmoke.
	scs := slices.DeleteFunc(clientScenarios(), func(s string) bool { return s == "burst" })
	cfg.Runs, cfg.Stacks, cfg.Scenarios = 1, []string{stackTcpwheel, stackGVisor, stackGVisorGSO, stackKernel}, scs
	cfg.JSONPath, cfg.PlotPath, cfg.RunTimeout = filepath.Join(dir, "c.json"), filepath.Join(dir, "c.svg"), 40*time.Second
	cfg.HTTPSize, cfg.WrkConns, cfg.WrkTime, cfg.ABRequests, cfg.ABConns = 2e6, 4, time.Second, 200, 4
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	if err := Run(ctx, cfg, &out, &errOut); err != nil {
		t.Fatalf("compare: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	t.Logf("\n%s", out.String())
	for _, want := range []string{"×kernel", "MB/s (http-par", "CPU s per GB moved", "requests/s (wrk", "connections/s (ab", "gvisor-gso", "issue 15"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	rep := readReport(t, cfg.JSONPath)
	if len(rep.Runs) != 20 {
		t.Fatalf("%d runs, want 20", len(rep.Runs))
	}
	want := map[string][]string{
		"http-down": {"mbytes_per_s", "cpu_s_per_gb", "client_cpu_s_per_gb"},
		"http-up":   {"mbytes_per_s", "cpu_s_per_gb", "client_cpu_s_per_gb"},
		"http-par":  {"mbytes_per_s", "cpu_s_per_gb", "streams"},
		"wrk":       {"requests_per_s", "latency_p99_ms"},
		"ab":        {"conns_per_s", "ab_complete"},
	}
	for _, r := range rep.Runs {
		if r.Error != "" {
			t.Errorf("%s %s: %s", r.Case, r.Stack, r.Error)
			continue
		}
		for _, m := range want[r.Case] {
			if v, ok := r.Metrics[m]; !ok || !(v > 0) {
				t.Errorf("%s %s: %s = %v, want > 0", r.Case, r.Stack, m, v)
			}
		}
		if r.Case == "ab" && r.Metrics["ab_complete"] != float64(cfg.ABRequests) {
			t.Errorf("ab %s: %v complete, want %d", r.Stack, r.Metrics["ab_complete"], cfg.ABRequests)
		}
		if _, ok := r.Metrics["ab_stack_retx"]; r.Case == "ab" && ok != (r.Stack != stackKernel) {
			t.Errorf("ab %s: the stack's resent segments recorded: %v, want %v (every stack with counters: not the kernel)", r.Stack, ok, r.Stack != stackKernel)
		}
	}
	if r, ok := rep.row("wrk", "requests_per_s", stackTcpwheel); !ok || r.VsKernel == nil || r.VsGVisor == nil {
		t.Errorf("wrk tcpwheel row %+v: want ratios to the kernel and to gvisor", r)
	}
	if after := ourNamespaces(t); len(after) > len(before) {
		t.Errorf("namespaces left behind: %v (before: %v)", after, before)
	}
}
