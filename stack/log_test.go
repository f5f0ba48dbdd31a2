package stack

import (
	"bytes"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/timer"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// lockedBuffer is a bytes.Buffer that the loop and the test may share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLogDrops: with a debug logger, each dropped packet is logged with the
// name of the counter it went to and its addresses; without one, nothing.
func TestLogDrops(t *testing.T) {
	var out lockedBuffer
	local, martian := netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("224.0.0.1")
	for _, tc := range []struct {
		level slog.Level
		want  bool
	}{{slog.LevelDebug, true}, {slog.LevelInfo, false}} {
		out.mu.Lock()
		out.b.Reset()
		out.mu.Unlock()
		dev, _ := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500})
		logger := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: tc.level}))
		s, err := NewManual(Config{Device: dev, Addr: local, Clock: timer.NewManualClock(0), Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Inject(synPacket(t, martian, local, 80)); err != nil {
			t.Fatal(err)
		}
		s.Close()
		got := strings.Contains(out.String(), "packet dropped") && strings.Contains(out.String(), "reason=stack.MartianMulticast") &&
			strings.Contains(out.String(), "src=224.0.0.1")
		if got != tc.want {
			t.Errorf("logger at %v: drop logged %v, want %v; log:\n%s", tc.level, got, tc.want, out.String())
		}
	}
}

// TestLogTCPDrops: a drop inside TCP is logged with the listener's (or the
// connection's) counter: a SYN+FIN to a listening port is listen.BadFlags.
func TestLogTCPDrops(t *testing.T) {
	var out lockedBuffer
	local, peer := netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("198.18.0.1")
	dev, _ := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500})
	logger := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := NewManual(Config{Device: dev, Addr: local, Clock: timer.NewManualClock(0), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Listen("tcp", ":80"); err != nil {
		t.Fatal(err)
	}
	seg := tcp.Segment{SrcPort: 40000, DstPort: 80, Seq: 1000, Flags: tcp.FlagSYN | tcp.FlagFIN, Window: 65535}
	b := make([]byte, seg.EncodedLen())
	if _, err := seg.Encode(b); err != nil {
		t.Fatal(err)
	}
	tcp.SetChecksum(peer, local, b)
	if err := s.Inject(ipv4Packet(peer, local, protoTCP, b)); err != nil {
		t.Fatal(err)
	}
	if log := out.String(); !strings.Contains(log, "reason=listen.BadFlags") || !strings.Contains(log, "src=198.18.0.1") {
		t.Errorf("no debug record of the SYN+FIN's drop; log:\n%s", log)
	}
}

// TestLogConnectionEnded: a connection reset by its peer is logged at info,
// with its addresses and the error; a clean close is not.
func TestLogConnectionEnded(t *testing.T) {
	var out lockedBuffer
	logger := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))
	a, b := pair(t, Config{Logger: logger})
	c, srv := dialPair(t, a, b)
	c.(*Conn).Abort() // a RST to b's connection
	buf := make([]byte, 1)
	if _, err := srv.Read(buf); err == nil {
		t.Fatal("read after the peer's RST: no error")
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "connection ended") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	log := out.String()
	if !strings.Contains(log, "connection ended") || !strings.Contains(log, "reset") || !strings.Contains(log, "remote="+addrA.String()) {
		t.Errorf("no info record of the reset connection; log:\n%s", log)
	}
}
