package metrics

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/tcpwheel/tcpwheel/timer"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{
		"SegsRetransmitted": "segs_retransmitted",
		"RTOEvents":         "rto_events",
		"LateP99":           "late_p99",
		"TCP":               "tcp",
		"InputPath":         "input_path",
		"DropsPAWS":         "drops_paws",
		"TLPProbes":         "tlp_probes",
		"NotIPv4":           "not_ipv4",
	} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMetricsEndpoints: /metrics is Prometheus text with the stack's
// counters under their Stats paths, and /debug/vars the same Stats as JSON.
func TestMetricsEndpoints(t *testing.T) {
	dev, _ := tuntest.Pipe(1500)
	s, err := stack.NewManual(stack.Config{Device: dev, Addr: netip.MustParseAddr("198.18.0.2"), Clock: timer.NewManualClock(0)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// One packet that is not for us, so a drop counter is not zero.
	pkt := make([]byte, 20)
	pkt[0] = 0x60 // IPv6: not IPv4
	if err := s.Inject(pkt); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	Handle(mux, s.Stack)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s\n%s", path, resp.Status, b)
		}
		return string(b)
	}
	m := get("/metrics")
	for _, want := range []string{
		"tcpwheel_packets_in_total 1",
		"tcpwheel_drops_not_ipv4_total 1",
		"tcpwheel_tcp_segs_retransmitted_total 0",
		"tcpwheel_listen_syn_cookies_sent_total 0",
		`tcpwheel_input_path{value="manual"} 1`,
		"tcpwheel_wheel_pending 0",
		"# TYPE tcpwheel_tcp_rto_events_total counter",
		"# TYPE tcpwheel_connections gauge",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	var vars map[string]stack.Stats
	if err := json.Unmarshal([]byte(get("/debug/vars")), &vars); err != nil {
		t.Fatal(err)
	}
	if st, ok := vars["tcpwheel"]; !ok || st.PacketsIn != 1 || st.InputPath != "manual" {
		t.Errorf("/debug/vars: %+v", vars)
	}
}

// TestWalkStatsLoops: each loop of Stats.Loops is exported under a "loop"
// label.
func TestWalkStatsLoops(t *testing.T) {
	st := stack.Stats{Loops: []stack.LoopStats{{HandoffsOut: 3}, {HandoffsOut: 5}}}
	got := map[string]float64{}
	walkStats("tcpwheel", reflect.ValueOf(st), func(name string, labels prometheus.Labels, counter bool, v float64) {
		if name == "tcpwheel_loops_handoffs_out" && counter {
			got[labels["loop"]] = v
		}
	})
	if got["0"] != 3 || got["1"] != 5 || len(got) != 2 {
		t.Errorf("tcpwheel_loops_handoffs_out by loop = %v, want loop 0: 3, loop 1: 5", got)
	}
}
