package main

import (
	"bytes"
	"context"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// TestReplayEvents: `tcpwheel replay -events` prints a recording's events, the
// handshake among them, and `tcpwheel replay` replays it.
func TestReplayEvents(t *testing.T) {
	da, db := tuntest.Pipe(1500)
	var rec bytes.Buffer
	a, err := stack.New(stack.Config{Device: da, Addr: netip.MustParseAddr("198.18.0.1"), Record: &rec})
	if err != nil {
		t.Fatal(err)
	}
	b, err := stack.New(stack.Config{Device: db, Addr: netip.MustParseAddr("198.18.0.2")})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := b.Listen("tcp", ":9")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		if c, err := ln.Accept(); err == nil {
			io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := a.DialTCP(ctx, "tcp", "198.18.0.2:9")
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("hello"))
	c.Close()
	time.Sleep(20 * time.Millisecond) // the peer's FIN and the last ACK
	a.Close()
	b.Close()
	path := filepath.Join(t.TempDir(), "dial.pcapng")
	if err := os.WriteFile(path, rec.Bytes(), 0o644); err != nil {
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
