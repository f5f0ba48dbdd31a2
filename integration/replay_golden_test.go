package integration

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/stack/replay"
)

// TestReplayGolden replays every golden capture under testdata/ (recorded from
// the kernel by scripts/record-golden.sh) on the manual clock: no root, no
// sleeps, always run. The pcaps replay with their scripts; the flight
// recordings (*.pcapng) must replay exactly, every connection.
func TestReplayGolden(t *testing.T) {
	recs, err := filepath.Glob(filepath.Join("testdata", "*.pcapng"))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 {
		t.Fatal("no golden flight recordings under testdata/")
	}
	for _, f := range recs {
		t.Run(filepath.Base(f), func(t *testing.T) { replayCheckRecording(t, f) })
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no golden captures under testdata/")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { replayCheckFile(t, f, 0) })
	}
}

// replayCheckRecording replays the flight recording at path
// (replay.Replay) and fails the test unless every connection replays
// exactly.
func replayCheckRecording(t *testing.T, path string) {
	t.Helper()
	rec, err := replay.OpenRecording(path)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := replay.Replay(rec, replay.ReplayOptions{})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := rep.Err(); err != nil {
		t.Errorf("%s: %v", path, err)
	}
}

// replayCheckFile replays the capture at path with its script and fails on
// any mismatch.
func replayCheckFile(t *testing.T, path string, tol time.Duration) {
	t.Helper()
	if err := replayFile(t, path, tol); err != nil {
		t.Error(err)
	}
}

// replayFile replays the capture at path exactly and returns the mismatches as an
// error. A capture that is not valid TCP (replay.Validate) fails the test at
// once: that is the stack's fault whatever the timing of the recording.
func replayFile(t *testing.T, path string, tol time.Duration) error {
	t.Helper()
	_, _, res := replayRun(t, path, tol)
	if err := res.Err(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// replayRun replays the capture at path with its script, tol as
// replay.Options.Tolerance, and returns the session, the script and the
// result.
func replayRun(t *testing.T, path string, tol time.Duration) (*replay.Session, *replay.Script, *replay.Result) {
	t.Helper()
	sess, sc, err := replay.Open(path, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	if sc == nil {
		t.Fatalf("%s: no script beside the capture", path)
	}
	if err := replay.Validate(sess); err != nil {
		t.Fatalf("%s: validate: %v", path, err)
	}
	res, err := replay.Run(sess, replay.Options{Script: sc, Tolerance: tol})
	if err != nil {
		t.Fatal(err)
	}
	return sess, sc, res
}
