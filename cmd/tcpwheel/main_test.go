package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
)

// asTcpwheel, set in its environment, makes the test binary run as tcpwheel
// itself (its arguments are tcpwheel's), so that tests can run the command
// without building it.
const asTcpwheel = "TCPWHEEL_TEST_AS_COMMAND"

// panicOnReady, set in its environment as well, makes that tcpwheel panic
// while it prints its ready line: a panic inside run, after the namespace is
// made, whose deferred cleanup must still take the namespace down.
const panicOnReady = "TCPWHEEL_TEST_PANIC_ON_READY"

func TestMain(m *testing.M) {
	if os.Getenv(asTcpwheel) == "1" {
		var stdout io.Writer = os.Stdout
		if os.Getenv(panicOnReady) == "1" {
			stdout = panicWriter{os.Stdout}
		}
		os.Exit(exitCode(run(os.Args[1:], stdout, os.Stderr), os.Stderr))
	}
	os.Exit(m.Run())
}

// panicWriter panics when it is handed the ready line.
type panicWriter struct{ w io.Writer }

func (p panicWriter) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte("ready")) {
		panic("test: panic on the ready line")
	}
	return p.w.Write(b)
}

// TestExitCodes: -h exits 0 at the top and after every command, and prints
// that command's usage; bad flags and unknown commands exit 2; version prints
// the version and takes no arguments.
func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		out  string // in stdout or stderr
	}{
		{[]string{"-h"}, 0, "tcpwheel <command> -h"},
		{[]string{"run", "-h"}, 0, "-netns"},
		{[]string{"replay", "-h"}, 0, "replay"},
		{[]string{"compare", "-h"}, 0, "tail-loss"},
		{[]string{"version", "-h"}, 0, "usage: tcpwheel version"},
		{[]string{"version"}, 0, "tcpwheel " + version},
		{[]string{"version", "extra"}, 2, "unexpected argument"},
		{[]string{"run", "-bogus"}, 2, "bogus"},
		{[]string{"run", "-loop-thread", "pinned"}, 2, "want auto, locked, parked or unlocked"},
		{[]string{"run", "-loop-thread", "parked", "-rt"}, 2, "-rt: not with -loop-thread parked"},
		{[]string{"compare", "-loop-thread", "pinned"}, 2, "want auto, locked, parked or unlocked"},
		{[]string{"forward", "-loop-thread", "pinned"}, 2, "want auto, locked, parked or unlocked"},
		// Paths are checked before any namespace is made (no root needed here).
		{[]string{"run", "-pcap", "/nonexistent-dir/x.pcap"}, 2, "-pcap"},
		{[]string{"compare", "-json", "/nonexistent-dir/x.json"}, 2, "-json"},
		{[]string{"bogus"}, 2, "unknown command"},
		{nil, 2, "no command given"},
	} {
		var out, errOut bytes.Buffer
		code := exitCode(run(tc.args, &out, &errOut), &errOut)
		if code != tc.code {
			t.Errorf("tcpwheel %s: exit %d, want %d (stderr %q)", strings.Join(tc.args, " "), code, tc.code, errOut.String())
		}
		if all := out.String() + errOut.String(); !strings.Contains(all, tc.out) {
			t.Errorf("tcpwheel %s: output %q lacks %q", strings.Join(tc.args, " "), all, tc.out)
		}
	}
}
