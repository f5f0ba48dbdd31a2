package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const goldenCapture = "../../integration/testdata/rto.pcap"

func TestReplayCommand(t *testing.T) {
	for _, mode := range []string{"equal", "validate"} {
		var out, errb bytes.Buffer
		if err := run([]string{"replay", "-mode", mode, goldenCapture}, &out, &errb); err != nil {
			t.Fatalf("-mode %s: %v\n%s", mode, err, errb.String())
		}
		if !strings.Contains(out.String(), "198.18.0.2:7000") {
			t.Errorf("-mode %s: output lacks the stack's address: %s", mode, out.String())
		}
	}
}

func TestReplayCommandErrors(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pcap")
	if err := os.WriteFile(junk, []byte("hello, not a capture"), 0o644); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(goldenCapture)
	if err != nil {
		t.Fatal(err)
	}
	trunc := filepath.Join(dir, "trunc.pcap")
	if err := os.WriteFile(trunc, raw[:len(raw)-7], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  []string
		usage bool
		want  string
	}{
		{[]string{"replay"}, true, "want one capture file"},
		{[]string{"replay", "-mode", "fast", goldenCapture}, true, "-mode"},
		{[]string{"replay", junk}, false, "not a pcap file"},
		{[]string{"replay", trunc}, false, "truncated record"},
		{[]string{"replay", filepath.Join(dir, "missing.pcap")}, false, "no such file"},
	} {
		var out, errb bytes.Buffer
		err := run(tc.args, &out, &errb)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args, err, tc.want)
			continue
		}
		if errors.Is(err, errUsage) != tc.usage {
			t.Errorf("%v: usage error %v, want %v", tc.args, errors.Is(err, errUsage), tc.usage)
		}
	}
}
