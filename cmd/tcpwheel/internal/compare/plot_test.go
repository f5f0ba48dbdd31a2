package compare

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// TestPlotPanels: a panel with no data is left out, so a run of scenarios
// without transfers gets the slack panel alone, half as wide as both.
func TestPlotPanels(t *testing.T) {
	width := func(rep *report) int {
		t.Helper()
		path := filepath.Join(t.TempDir(), "p.png")
		if err := rep.writePlot(path, []string{"tcpwheel"}); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cfg, err := png.DecodeConfig(f)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Width
	}
	slackOnly := &report{Runs: []*runResult{{Stack: "tcpwheel", Samples: map[string][]float64{"rto_slack_ms": {0.01, 0.02}}}}}
	both := &report{
		Runs:    slackOnly.Runs,
		Summary: []summaryRow{{Case: "bulk-up-0%", Metric: "transfer_ms", Stack: "tcpwheel", N: 1, Median: 100}},
	}
	one, two := width(slackOnly), width(both)
	if 2*one != two {
		t.Errorf("plot widths: %d px with the slack panel alone, %d with both; want half", one, two)
	}
	one1 := 1.5
	three := &report{Runs: slackOnly.Runs, Summary: append(both.Summary,
		summaryRow{Case: "wrk", Metric: "requests_per_s", Stack: stackKernel, N: 1, Median: 1000, VsKernel: &one1},
		summaryRow{Case: "wrk", Metric: "requests_per_s", Stack: "tcpwheel", N: 1, Median: 1500, VsKernel: &one1})}
	if w := width(three); w != 3*one {
		t.Errorf("plot width with real-client rates too: %d px, want three panels' %d", w, 3*one)
	}
	if w := width(&report{}); w != one {
		t.Errorf("plot width with no data at all: %d px, want one panel's %d", w, one)
	}
}
