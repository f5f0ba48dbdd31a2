package compare

import (
	"fmt"
	"math"
	"strings"
)

// The goals of issue 15 (link speed), judged in the real-client scenarios
// against the kernel's loopback and gVisor measured in the same run.
const (
	goalBulkVsKernel    = 0.5 // bulk MB/s, both directions, over the kernel's
	goalBulkVsGVisorGSO = 1.5 // over gVisor's best configuration
	goalBulkVsGVisor    = 3.0 // over the gVisor adapter of before
	goalCPUPerGB        = 0.5 // CPU per GB over gVisor's (the lower of gvisor and gvisor-gso)
	goalABVsKernel      = 0.9
	goalABVsGVisor      = 2.0
)

// httpCases are the bulk real-client cases.
var httpCases = []string{"http-down", "http-up"}

// medianRatio is st's median of metric over base's in case c, if both have
// one (base's not zero).
func (rep *report) medianRatio(c, metric, st, base string) (float64, bool) {
	mine, ok1 := rep.row(c, metric, st)
	b, ok2 := rep.row(c, metric, base)
	if !ok1 || !ok2 || b.Median == 0 {
		return 0, false
	}
	return mine.Median / b.Median, true
}

// worstRatio judges metric over base's in every http case: the lowest ratio
// (or, with lower, the highest) and whether it meets want; st == base is the
// baseline.
func (rep *report) worstRatio(metric, base string, want float64, lower bool) func(st string) (any, bool, bool) {
	return func(st string) (any, bool, bool) {
		if st == base {
			return "the baseline", true, true
		}
		worst := math.Inf(1)
		if lower {
			worst = math.Inf(-1)
		}
		var each []string
		for _, c := range httpCases {
			r, ok := rep.medianRatio(c, metric, st, base)
			if !ok {
				continue
			}
			each = append(each, fmt.Sprintf("%s %.2f", c, r))
			if lower {
				worst = max(worst, r)
			} else {
				worst = min(worst, r)
			}
		}
		if len(each) == 0 {
			return nil, false, false
		}
		met := worst >= want
		if lower {
			met = worst <= want
		}
		return strings.Join(each, ", "), met, true
	}
}

// gvisorCPUBase is the gVisor stack whose CPU per GB the goal is judged
// against: the lower of gvisor's and gvisor-gso's (medians, summed over the
// http cases).
func (rep *report) gvisorCPUBase() string {
	best, bestV := "", math.Inf(1)
	for _, st := range []string{stackGVisor, stackGVisorGSO} {
		v, n := 0.0, 0
		for _, c := range httpCases {
			if r, ok := rep.row(c, "cpu_s_per_gb", st); ok {
				v += r.Median
				n++
			}
		}
		if n > 0 && v < bestV {
			best, bestV = st, v
		}
	}
	return best
}

// clientGoals are issue 15's goals.
func (rep *report) clientGoals(add func(name, source string, judge func(st string) (any, bool, bool))) {
	add(fmt.Sprintf("http bulk MB/s >= %gx the kernel loopback's, both directions", goalBulkVsKernel), "issue 15",
		rep.worstRatio("mbytes_per_s", stackKernel, goalBulkVsKernel, false))
	add(fmt.Sprintf("http bulk MB/s >= %gx gvisor-gso's, both directions", goalBulkVsGVisorGSO), "issue 15",
		rep.worstRatio("mbytes_per_s", stackGVisorGSO, goalBulkVsGVisorGSO, false))
	add(fmt.Sprintf("http bulk MB/s >= %gx gvisor's, both directions", goalBulkVsGVisor), "issue 15",
		rep.worstRatio("mbytes_per_s", stackGVisor, goalBulkVsGVisor, false))
	if base := rep.gvisorCPUBase(); base != "" {
		add(fmt.Sprintf("CPU per GB moved <= %gx %s's (the lower gVisor), both directions", goalCPUPerGB, base), "issue 15",
			rep.worstRatio("cpu_s_per_gb", base, goalCPUPerGB, true))
	}
	add("wrk keep-alive: requests/s >= the kernel's, p99 <= the kernel's", "issue 15", func(st string) (any, bool, bool) {
		if st == stackKernel {
			return "the baseline", true, true
		}
		rate, ok1 := rep.medianRatio("wrk", "requests_per_s", st, stackKernel)
		p99, ok2 := rep.medianRatio("wrk", "latency_p99_ms", st, stackKernel)
		if !ok1 || !ok2 {
			return nil, false, false
		}
		return fmt.Sprintf("requests/s %.2fx, p99 %.2fx", rate, p99), rate >= 1 && p99 <= 1, true
	})
	add(fmt.Sprintf("ab churn: connections/s >= %gx the kernel's and >= %gx gvisor's", goalABVsKernel, goalABVsGVisor), "issue 15", func(st string) (any, bool, bool) {
		if st == stackKernel || st == stackGVisor {
			return "the baseline", true, true
		}
		k, ok1 := rep.medianRatio("ab", "conns_per_s", st, stackKernel)
		g, ok2 := rep.medianRatio("ab", "conns_per_s", st, stackGVisor)
		if !ok1 || !ok2 {
			return nil, false, false
		}
		return fmt.Sprintf("%.2fx kernel, %.2fx gvisor", k, g), k >= goalABVsKernel && g >= goalABVsGVisor, true
	})
}
