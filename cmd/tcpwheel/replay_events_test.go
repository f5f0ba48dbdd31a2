package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tcpwheel/tcpwheel/stack/flighttest"
)

// TestReplayEvents: `tcpwheel replay -events` prints a recording's events, the
// handshake among them, and `tcpwheel replay` replays it.
func TestReplayEvents(t *testing.T) {
	dialer, _ := flighttest.Echo(t, 1, 5)
	path := filepath.Join(t.TempDir(), "dial.pcapng")
	if err := os.WriteFile(path, dialer, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if err := run([]string{"replay", "-events", path}, &out, &errb); err != nil {
		t.Fatalf("replay -events: %v\n%s", err, errb.String())
	}
	text := out.String()
	for _, want := range []string{"dial t=", "isn ", "out t=", "198.18.0.1:", "[SYN]", "write t=", "close t=", "stack-close"} {
		if !strings.Contains(text, want) {
			t.Errorf("replay -events lacks %q:\n%s", want, text)
		}
	}
	out.Reset()
	if err := run([]string{"replay", path}, &out, &errb); err != nil || !strings.Contains(out.String(), "match") {
		t.Fatalf("replay: %v\n%s", err, out.String())
	}
}
