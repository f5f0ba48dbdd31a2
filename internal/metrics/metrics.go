// Package metrics exports a stack's counters (stack.Stats) over HTTP: as
// Prometheus metrics, named after their field in Stats and found by
// reflection, and as expvar-style JSON. `tcpwheel run` serves both.
package metrics

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/tcpwheel/tcpwheel/stack"
)

// statsCollector exports a stack's Stats as Prometheus metrics, read afresh at
// each scrape. Every numeric field becomes a metric named after its path in
// Stats (tcpwheel_tcp_segs_retransmitted_total for Stats.TCP.SegsRetransmitted):
// uint64 fields are counters, the others (connections, pending timers, the
// wheel's lateness quantiles in ns) gauges; an array field (the input batch
// sizes) is one metric with a "bucket" label, a slice of structs (the loops
// of a stack with several, Stats.Loops) one with a "loop" label. Found by reflection, so a new
// counter is exported without being listed here.
type statsCollector struct{ s *stack.Stack }

// Describe sends nothing: the metrics follow the Stats struct, so the
// collector is unchecked.
func (c statsCollector) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (c statsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	walkStats("tcpwheel", reflect.ValueOf(st), func(name string, labels prometheus.Labels, counter bool, v float64) {
		kind, full := prometheus.GaugeValue, name
		if counter {
			kind, full = prometheus.CounterValue, name+"_total"
		}
		var keys, vals []string
		for k, lv := range labels {
			keys, vals = append(keys, k), append(vals, lv)
		}
		desc := prometheus.NewDesc(full, "tcpwheel stack.Stats field "+name, keys, nil)
		ch <- prometheus.MustNewConstMetric(desc, kind, v, vals...)
	})
}

// walkStats calls emit for every numeric field under v (a struct), with its
// snake_case path below prefix. Strings (the input path) become a gauge of 1
// with the value as a label.
func walkStats(prefix string, v reflect.Value, emit func(name string, labels prometheus.Labels, counter bool, v float64)) {
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		if !f.IsExported() {
			continue
		}
		name := prefix
		if !f.Anonymous { // embedded Counters: its fields sit at the top
			name += "_" + snake(f.Name)
		}
		switch fv.Kind() {
		case reflect.Struct:
			walkStats(name, fv, emit)
		case reflect.Uint64:
			emit(name, nil, true, float64(fv.Uint()))
		case reflect.Int, reflect.Int64:
			emit(name, nil, false, float64(fv.Int()))
		case reflect.String:
			emit(name, prometheus.Labels{"value": fv.String()}, false, 1)
		case reflect.Slice: // Stats.Loops: a "loop" label per element
			for j := range fv.Len() {
				if e := fv.Index(j); e.Kind() == reflect.Struct {
					walkStats(name, e, func(n string, l prometheus.Labels, counter bool, v float64) {
						if l == nil {
							l = prometheus.Labels{}
						}
						l["loop"] = strconv.Itoa(j)
						emit(n, l, counter, v)
					})
				}
			}
		case reflect.Array:
			for j := range fv.Len() {
				if e := fv.Index(j); e.Kind() == reflect.Uint64 {
					emit(name, prometheus.Labels{"bucket": strconv.Itoa(j)}, true, float64(e.Uint()))
				}
			}
		}
	}
}

// snake turns a Go field name into snake_case: SegsRetransmitted ->
// segs_retransmitted, RTOEvents -> rto_events, LateP99 -> late_p99,
// NotIPv4 -> not_ipv4.
func snake(s string) string {
	s = strings.NewReplacer("IPv4", "Ipv4", "IPv6", "Ipv6").Replace(s)
	r := []rune(s)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) {
			prevLower := i > 0 && (unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1]))
			nextLower := i > 0 && i+1 < len(r) && unicode.IsLower(r[i+1]) && unicode.IsUpper(r[i-1])
			if prevLower || nextLower {
				b.WriteByte('_')
			}
			c = unicode.ToLower(c)
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Handle serves the stack's counters on mux as Prometheus text (GET /metrics)
// and as expvar-style JSON (GET /debug/vars, {"tcpwheel": Stats}), on a
// registry of its own (no process-wide state).
func Handle(mux *http.ServeMux, s *stack.Stack) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(statsCollector{s})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /debug/vars", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		json.NewEncoder(w).Encode(map[string]stack.Stats{"tcpwheel": s.Stats()})
	})
}
