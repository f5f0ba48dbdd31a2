package replay

import (
	"bytes"
	"os"
	"testing"
)

// UpdateEnv is the environment variable that turns Test into its update
// mode: `TCPWHEEL_UPDATE=1 go test ./...` (or `tcpwheel replay -update FILE`
// for one file).
const UpdateEnv = "TCPWHEEL_UPDATE"

// Test makes a flight recording a regression test in one line:
//
//	func TestIncident(t *testing.T) { replay.Test(t, "testdata/incident.pcapng") }
//
// It replays the recording at path (Replay) and fails t with the report: each
// connection that differs, its first differing segment (recorded and
// replayed) and the recorded events around it. With UpdateEnv set it
// rewrites the file with the replay's own recording instead, for a change of
// behaviour that is meant: review what changed (the failure's report), then
// update and commit the file.
func Test(t testing.TB, path string) {
	t.Helper()
	rec, err := OpenRecording(path)
	if err != nil {
		t.Fatal(err)
		return
	}
	update := os.Getenv(UpdateEnv) != ""
	var re bytes.Buffer
	opt := ReplayOptions{}
	if update {
		opt.Rerecord = &re
	}
	r, err := Replay(rec, opt)
	if err != nil {
		t.Fatal(err)
		return
	}
	if update {
		if err := os.WriteFile(path, re.Bytes(), 0o644); err != nil {
			t.Fatal(err)
			return
		}
		t.Logf("%s: updated with the replay's recording (%d connections)", path, len(r.Conns))
		return
	}
	if err := r.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
