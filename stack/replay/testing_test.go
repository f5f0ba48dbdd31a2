package replay_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tcpwheel/tcpwheel/stack/flighttest"
	"github.com/tcpwheel/tcpwheel/stack/record"
	"github.com/tcpwheel/tcpwheel/stack/replay"
)

// recordEcho records the listener's side of an echo of n bytes between two
// stacks over an in-memory link, into a file under dir.
func recordEcho(t *testing.T, dir string, n int) string {
	t.Helper()
	_, listener := flighttest.Echo(t, 1, n)
	path := filepath.Join(dir, "echo.pcapng")
	if err := os.WriteFile(path, listener, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// fakeT records what Test says.
type fakeT struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fakeT) Helper()        {}
func (f *fakeT) Fatal(a ...any) { f.failed, f.msg = true, fmt.Sprint(a...) }
func (f *fakeT) Fatalf(s string, a ...any) {
	f.failed, f.msg = true, fmt.Sprintf(s, a...)
}
func (f *fakeT) Logf(string, ...any) {}

func TestTestHelper(t *testing.T) {
	path := recordEcho(t, t.TempDir(), 20000)
	replay.Test(t, path) // the recording replays: Test passes

	// A recording that this version would not have made: one packet's
	// window changed. Test fails, naming the connection and the segment.
	rec, err := replay.OpenRecording(path)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	var tampered []byte
	for i := range rec.Events {
		e := &rec.Events[i]
		if e.Kind != record.Out || len(e.Data) < 40 {
			continue
		}
		at := bytes.Index(raw, e.Data)
		if at < 0 {
			t.Fatal("packet not found in the file")
		}
		tampered = bytes.Clone(raw)
		tampered[at+20+14] ^= 0x01 // the TCP window's low byte
		break
	}
	bad := filepath.Join(t.TempDir(), "tampered.pcapng")
	if err := os.WriteFile(bad, tampered, 0o644); err != nil {
		t.Fatal(err)
	}
	ft := &fakeT{TB: t}
	replay.Test(ft, bad)
	if !ft.failed || !strings.Contains(ft.msg, "win") || !strings.Contains(ft.msg, "connection 1") {
		t.Fatalf("Test on a changed recording: failed %v, %q", ft.failed, ft.msg)
	}

	// Update mode rewrites it with what the replay does: it passes again.
	t.Setenv(replay.UpdateEnv, "1")
	replay.Test(t, bad)
	t.Setenv(replay.UpdateEnv, "")
	replay.Test(t, bad)
}
