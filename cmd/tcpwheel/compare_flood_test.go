package main

import (
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

// TestCompareFloodAndLoadFlags: the synflood and -load flags, a bare -load
// meaning GOMAXPROCS processes, and their bounds as usage errors.
func TestCompareFloodAndLoadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		load int // -1: a usage error
	}{
		{nil, 0},
		{[]string{"-load", "2", "-scenarios", "tail-loss,backoff"}, 2},
		{[]string{"-load=3"}, 3},
		{[]string{"-load"}, runtime.GOMAXPROCS(0)},
		{[]string{"-load", "-scenarios", "tail-loss"}, runtime.GOMAXPROCS(0)},
		{[]string{"--load", "-q"}, runtime.GOMAXPROCS(0)},
		{[]string{"-flood-syns", "500", "-flood-rate", "5000", "-flood-conns", "10"}, 0},
		{[]string{"-load", "0"}, 0},
		{[]string{"-load", "-1"}, -1},
		{[]string{"-load", "1000"}, -1},
		{[]string{"-load", "many"}, -1},
		{[]string{"-flood-syns", "0"}, -1},
		{[]string{"-flood-syns", "2000000"}, -1},
		{[]string{"-flood-rate", "0"}, -1},
		{[]string{"-flood-conns", "0"}, -1},
		{[]string{"-flood-syns", "1000000", "-flood-rate", "1"}, -1}, // days
		{[]string{"-flood-syns", "20000", "-flood-rate", "100", "-run-timeout", "1m"}, -1},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cfg, err := parseCompareFlags(tc.args, io.Discard)
			if tc.load < 0 {
				if !errors.Is(err, errUsage) {
					t.Fatalf("parse: %v, want a usage error (exit 2)", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if cfg.Load != tc.load {
				t.Errorf("Load = %d, want %d", cfg.Load, tc.load)
			}
		})
	}
}
