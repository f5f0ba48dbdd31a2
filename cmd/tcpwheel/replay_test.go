package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/tcpwheel/tcpwheel/stack/flighttest"
	"github.com/tcpwheel/tcpwheel/stack/record"
	"github.com/tcpwheel/tcpwheel/stack/replay"
	"github.com/tcpwheel/tcpwheel/timer"
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

// writeRecording writes a flight recording of two echo connections (the
// dialer's) to dir and returns its path, its bytes and connections.
func writeRecording(t *testing.T, dir string) (string, []byte, []replay.Conn) {
	t.Helper()
	dialer, _ := flighttest.Echo(t, 2, 3000)
	path := filepath.Join(dir, "echo.pcapng")
	if err := os.WriteFile(path, dialer, 0o644); err != nil {
		t.Fatal(err)
	}
	rec, err := record.Parse(bytes.NewReader(dialer))
	if err != nil {
		t.Fatal(err)
	}
	cs := replay.Conns(rec)
	if len(cs) != 2 {
		t.Fatalf("%d connections, want 2", len(cs))
	}
	return path, dialer, cs
}

// recordingHead is the first line tcpwheel replay prints for a recording.
func recordingHead(t *testing.T, path string) string {
	t.Helper()
	rec, err := replay.OpenRecording(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s: flight recording of %v (MTU 1500, tick %v), %d events, 2 connections\n", path, flighttest.DialerAddr, timer.DefaultTick, len(rec.Events))
}

func TestReplayRecordingCommand(t *testing.T) {
	path, _, cs := writeRecording(t, t.TempDir())
	head := recordingHead(t, path)
	line := func(c replay.Conn) string {
		return fmt.Sprintf("  %d  %v <-> %v  %d packets sent, %d replayed: exact\n", c.N, c.Local, c.Remote, c.Sent, c.Sent)
	}
	for _, tc := range []struct {
		args []string
		want string // the output, less the last line's time
	}{
		{nil, head + line(cs[0]) + line(cs[1]) + "match: every packet of 2 connections, byte for byte and to the nanosecond; replayed in "},
		{[]string{"-list"}, head + fmt.Sprintf("  1  %v <-> %v  %d packets sent, %d handled\n  2  %v <-> %v  %d packets sent, %d handled\n",
			cs[0].Local, cs[0].Remote, cs[0].Sent, cs[0].Handled, cs[1].Local, cs[1].Remote, cs[1].Sent, cs[1].Handled)},
		{[]string{"-conn", "1"}, head + line(cs[0]) + "match: every packet of 1 connections, byte for byte and to the nanosecond; replayed in "},
		{[]string{"-conn", cs[1].Remote.String() + "-" + cs[1].Local.String()}, head + line(cs[1]) + "match: every packet of 1 connections, byte for byte and to the nanosecond; replayed in "},
	} {
		var out, errb bytes.Buffer
		if err := run(append(append([]string{"replay"}, tc.args...), path), &out, &errb); err != nil {
			t.Errorf("%v: %v\n%s", tc.args, err, errb.String())
			continue
		}
		got := out.String()
		if tc.args == nil || tc.args[0] == "-conn" {
			if i := strings.LastIndex(got, "replayed in "); i >= 0 && strings.HasSuffix(got, "s\n") {
				got = got[:i+len("replayed in ")]
			}
		}
		if got != tc.want {
			t.Errorf("%v: got\n%s\nwant\n%s", tc.args, got, tc.want)
		}
	}
}

func TestReplayRecordingCommandErrors(t *testing.T) {
	dir := t.TempDir()
	path, good, cs := writeRecording(t, dir)
	// A file cut 3 bytes short: its last block lacks its trailing length.
	cut := filepath.Join(dir, "cut.pcapng")
	if err := os.WriteFile(cut, good[:len(good)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	rec, err := record.Parse(bytes.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	lastLen := int(binary.LittleEndian.Uint32(good[len(good)-4:]))
	lastBlock := rec.Events[len(rec.Events)-1].Block
	// A recording of a stack that only listened.
	empty := filepath.Join(dir, "listen.pcapng")
	if err := os.WriteFile(empty, flighttest.ListenOnly(t), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  []string
		usage bool
		want  string
	}{
		{[]string{"replay", "-conn", "3", path}, true, "replay: bad connection: connection 3: the recording has 2"},
		{[]string{"replay", "-conn", "0", path}, true, "connection 0: the recording has 2"},
		{[]string{"replay", "-conn", "first", path}, true, `"first" is neither a number nor ADDR:PORT-ADDR:PORT`},
		{[]string{"replay", "-conn", cs[0].Local.String() + "-198.18.0.9:7", path}, true,
			fmt.Sprintf("no connection %v <-> 198.18.0.9:7 in the recording", cs[0].Local)},
		{[]string{"replay", "-mode", "validate", path}, true, "a flight recording takes no -mode, -stack or -script"},
		{[]string{"replay", "-conn", "1", goldenCapture}, true, "-conn, -list, -events and -update are for flight recordings"},
		{[]string{"replay", cut}, false, fmt.Sprintf("%s: record: bad file: block %d (offset %d): truncated block (no trailing length)", cut, lastBlock, len(good)-lastLen)},
		{[]string{"replay", empty}, false, empty + ": no TCP connection in the recording"},
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
		if want := map[bool]int{true: 2, false: 1}[tc.usage]; exitCode(err, io.Discard) != want {
			t.Errorf("%v: exit status %d, want %d", tc.args, exitCode(err, io.Discard), want)
		}
	}
}

// A recording that no longer replays (here: one packet's window edited)
// fails; -update rewrites it with the replay's own recording, which is the
// recording as it was, and replays.
func TestReplayRecordingUpdate(t *testing.T) {
	path, good, cs := writeRecording(t, t.TempDir())
	rec, err := record.Parse(bytes.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	var data []byte
	for _, e := range rec.Packets() {
		if e.Kind == record.Out && len(e.Data) > 60 { // connection 1's first data segment
			data = e.Data
			break
		}
	}
	off := bytes.Index(good, data)
	if data == nil || off < 0 {
		t.Fatal("no data segment in the file")
	}
	edited := bytes.Clone(good)
	edited[off+20+15]++ // the window's low byte
	if err := os.WriteFile(path, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	err = run([]string{"replay", path}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "1 of 2 connections differ") || !strings.Contains(err.Error(), ": win differ") {
		t.Fatalf("the edited recording: got %v, want a window difference", err)
	}
	if want := fmt.Sprintf("  1  %v <-> %v  %d packets sent, %d replayed: DIFFERS (1 packets)\n", cs[0].Local, cs[0].Remote, cs[0].Sent, cs[0].Sent); !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}

	out.Reset()
	if err := run([]string{"replay", "-update", path}, &out, &errb); err != nil {
		t.Fatalf("-update: %v", err)
	}
	if want := fmt.Sprintf("updated %s with the replay's recording (%d bytes)\n", path, len(good)); !strings.HasSuffix(out.String(), want) {
		t.Errorf("-update printed %q, want it to end with %q", out.String(), want)
	}
	updated, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(updated, good) {
		t.Errorf("the updated file (%d bytes) is not the recording as it was (%d bytes)", len(updated), len(good))
	}
	out.Reset()
	if err := run([]string{"replay", path}, &out, &errb); err != nil {
		t.Fatalf("the updated recording: %v", err)
	}
	if !strings.Contains(out.String(), "match: every packet of 2 connections") {
		t.Errorf("the updated recording: %s", out.String())
	}
}

// A pcapng capture that no recorder wrote replays as a pcap does (the
// capture's replay, with the JSON script beside it).
func TestReplayCommandPcapng(t *testing.T) {
	raw, err := os.ReadFile(goldenCapture)
	if err != nil {
		t.Fatal(err)
	}
	pkts, err := replay.ParseCapture(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := pcapgo.NewNgWriter(&buf, layers.LinkTypeRaw)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkts {
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: p.Time, CaptureLength: len(p.Raw), Length: len(p.Raw)}, p.Raw); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "rto.pcapng")
	script, err := os.ReadFile(replay.ScriptPath(goldenCapture))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(replay.ScriptPath(path), script, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if err := run([]string{"replay", path}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	want := fmt.Sprintf("%s: %d packets, stack 198.18.0.2:7000, peer ", path, len(pkts))
	if !strings.HasPrefix(out.String(), want) || !strings.Contains(out.String(), "\nmatch: ") || strings.Contains(out.String(), "no script") {
		t.Errorf("got %q, want %q..., the script's replay and a match", out.String(), want)
	}
	err = run([]string{"replay", "-list", path}, &out, &errb)
	if err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "are for flight recordings") {
		t.Errorf("-list on a capture: got %v, want a usage error", err)
	}
}
