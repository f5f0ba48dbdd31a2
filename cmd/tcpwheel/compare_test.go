package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCompareFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{nil, true},
		{[]string{"-stacks", "gvisor,tcpwheel", "-scenarios", "tail-loss", "-runs", "1"}, true},
		{[]string{"-stacks", " tcpwheel , gvisor-wheel "}, true},
		{[]string{"-json", filepath.Join(dir, "out.json"), "-plot", filepath.Join(dir, "out.svg")}, true},
		{[]string{"-plot", filepath.Join(dir, "out.png"), "-pcap", dir}, true},
		{[]string{"-bulk-size", "512KiB", "-bulk-loss", "0,0.5,10"}, true},
		{[]string{"-stacks", "linux"}, false},
		{[]string{"-stacks", ""}, false},
		{[]string{"-stacks", ","}, false},
		{[]string{"-scenarios", "tail-loss,bogus"}, false},
		{[]string{"-runs", "0"}, false},
		{[]string{"-runs", "-3"}, false},
		{[]string{"-runs", "x"}, false},
		{[]string{"-json", "/nonexistent-dir/x.json"}, false},
		{[]string{"-json", dir}, false}, // a directory
		{[]string{"-plot", filepath.Join(dir, "out.pdf")}, false},
		{[]string{"-plot", "/nonexistent-dir/x.svg"}, false},
		{[]string{"-pcap", "/nonexistent-dir"}, false},
		{[]string{"-cpuprofile", filepath.Join(dir, "cpu.prof")}, true},
		{[]string{"-cpuprofile", "/nonexistent-dir/cpu.prof"}, false},
		{[]string{"-bulk-size", "lots"}, false},
		{[]string{"-bulk-size", "0"}, false},
		{[]string{"-bulk-loss", "100"}, false},
		{[]string{"-bulk-loss", "-1"}, false},
		{[]string{"-conns", "0"}, false},
		{[]string{"-conns", "100000"}, false},
		{[]string{"-hold", "-1s"}, false},
		{[]string{"-run-timeout", "10ms"}, false},
		{[]string{"-stacks", "tcpwheel,gvisor,gvisor-gso,kernel", "-scenarios", "http-down,http-up,wrk,ab", "-http-size", "2MB", "-wrk-conns", "4", "-wrk-time", "2s", "-ab-requests", "100", "-ab-conns", "4"}, true},
		{[]string{"-stacks", "kernel", "-scenarios", "tail-loss"}, false},
		{[]string{"-stacks", "gvisor-gso,kernel", "-scenarios", "bulk,synflood"}, false},
		{[]string{"-http-size", "0"}, false},
		{[]string{"-http-size", "much"}, false},
		{[]string{"-wrk-conns", "0"}, false},
		{[]string{"-wrk-time", "500ms"}, false},
		{[]string{"-wrk-time", "1h"}, false},
		{[]string{"-ab-requests", "0"}, false},
		{[]string{"-ab-requests", "10", "-ab-conns", "11"}, false},
		{[]string{"-ab-conns", "-1"}, false},
		{[]string{"-family", "4,6", "-scenarios", "tail-loss,bulk"}, true},
		{[]string{"-family", "6,4"}, true},
		{[]string{"-family", "6", "-stacks", "tcpwheel,gvisor", "-scenarios", "mid-loss"}, true},
		{[]string{"-family", "5"}, false},
		{[]string{"-family", ""}, false},
		{[]string{"-family", "4,x"}, false},
		{[]string{"-family", "6", "-scenarios", "keepalive"}, false},               // no IPv6 scenario
		{[]string{"-family", "6", "-stacks", "kernel", "-scenarios", "ab"}, false}, // no IPv6 stack
		{[]string{"-family", "6", "-stacks", "tcpwheel,gvisor", "-scenarios", "udp-echo", "-udp-datagrams", "100"}, true},
		{[]string{"-udp-datagrams", "0"}, false},
		{[]string{"-stacks", "kernel", "-scenarios", "udp-echo"}, false}, // the kernel takes part in the real-client scenarios only
		{[]string{"-bogus"}, false},
		{[]string{"extra"}, false},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := parseCompareFlags(tc.args, io.Discard)
			if tc.ok && err != nil {
				t.Fatalf("parse: %v", err)
			}
			if !tc.ok && !errors.Is(err, errUsage) {
				t.Fatalf("parse: %v, want a usage error (exit 2)", err)
			}
		})
	}
	// Checking the output paths leaves nothing behind.
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("flag checks left %d files in %s", len(left), dir)
	}
}

// TestCompareBadInputExit2 goes through run, as main does: a bad input is a usage
// error, printed with the reason, before anything is set up.
func TestCompareBadInputExit2(t *testing.T) {
	for _, args := range [][]string{
		{"compare", "-stacks", "tcpwheel,nope"},
		{"compare", "-scenarios", "nope"},
		{"compare", "-runs", "0"},
		{"compare", "-burst-conns", "0"},
		{"compare", "-burst-conns", "10000000"},
		{"compare", "-burst-conns", "many"},
		{"compare", "-json", "/proc/no/such/file.json"},
	} {
		var out, errOut bytes.Buffer
		err := run(args, &out, &errOut)
		if !errors.Is(err, errUsage) {
			t.Errorf("run(%q) = %v, want a usage error (exit 2)", args, err)
		}
	}
	var out, errOut bytes.Buffer
	if err := run([]string{"compare", "-h"}, &out, &errOut); !strings.Contains(errOut.String(), "tail-loss") || !strings.Contains(errOut.String(), "gvisor-gso") {
		t.Errorf("compare -h printed %q, want the scenarios listed (err %v)", errOut.String(), err)
	}
}
