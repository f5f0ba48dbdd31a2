package replay_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/tcpwheel/tcpwheel/stack/record"
	"github.com/tcpwheel/tcpwheel/stack/replay"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// recordEcho records the listener's side of an echo of n bytes between two
// stacks over an in-memory link, into a file under dir.
func recordEcho(t *testing.T, dir string, n int) string {
	t.Helper()
	da, db := tuntest.Pipe(1500)
	var rb bytes.Buffer
	a, err := stack.New(stack.Config{Device: da, Addr: netip.MustParseAddr("198.18.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	b, err := stack.New(stack.Config{Device: db, Addr: netip.MustParseAddr("198.18.0.2"), Record: &rb})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := b.Listen("tcp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := a.DialTCP(ctx, "tcp", "198.18.0.2:7")
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	msg := bytes.Repeat([]byte("x"), n)
	go func() { c.Write(msg); c.CloseWrite() }()
	got, err := io.ReadAll(c)
	if err != nil || len(got) != n {
		t.Fatalf("echo: %d of %d bytes, %v", len(got), n, err)
	}
	c.Close()
	ln.Close()
	a.Close()
	b.Close()
	path := filepath.Join(dir, "echo.pcapng")
	if err := os.WriteFile(path, rb.Bytes(), 0o644); err != nil {
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
