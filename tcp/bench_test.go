package tcp

import (
	"io"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
	"github.com/tcpwheel/tcpwheel/timer"
)

// BenchmarkTransfer moves 1 MiB from a dialled endpoint to an accepted one
// over the back-to-back link of e2e_test.go (5 ms one way, manual clock): the
// CPU cost of the whole segment path, both ends, handshake to TIME-WAIT.
func BenchmarkTransfer(b *testing.B) {
	for _, bc := range []struct {
		name string
		drop func(from, n int, seg *Segment) bool
	}{
		{"clean", nil},
		{"lose every 50th", func(from, n int, _ *Segment) bool { return from == 0 && n%50 == 0 }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			payload := make([]byte, 1<<20)
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				benchTransfer(b, payload, bc.drop)
			}
		})
	}
}

func benchTransfer(b *testing.B, payload []byte, drop func(from, n int, seg *Segment) bool) {
	clk := timer.NewManualClock(0)
	w, err := timer.New(timer.Config{Clock: clk})
	if err != nil {
		b.Fatal(err)
	}
	l := &link{clk: clk, w: w, delay: 5 * time.Millisecond, drop: drop}
	cfg := Config{ISN: func(ID, time.Duration) seqnum.Value { return 1 }}
	ln, err := NewListener(OnWheel(w), linkOut{l, 1}, ListenerConfig{Endpoint: cfg, Accept: func(ep *Endpoint) bool { l.server = ep; return true }})
	if err != nil {
		b.Fatal(err)
	}
	l.ln = ln
	if l.client, err = Dial(OnWheel(w), linkOut{l, 0}, testID, cfg); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 70000)
	written, received, eof := 0, 0, false
	for l.step() {
		if c := l.client; c.State() == StateEstablished && written < len(payload) {
			n, _ := c.Write(payload[written:])
			if written += n; written == len(payload) {
				c.Close()
			}
		}
		for s := l.server; s != nil && !eof; {
			n, err := s.Read(buf)
			received += n
			if err == io.EOF {
				eof = true
				s.Close()
			}
			if n == 0 {
				break
			}
		}
	}
	if received != len(payload) {
		b.Fatalf("received %d bytes, want %d", received, len(payload))
	}
}

// BenchmarkSynFlood: a listener's cost per spoofed SYN once its half-open
// table is full (a SYN cookie each, nothing kept), and per cookie ACK checked.
func BenchmarkSynFlood(b *testing.B) {
	clk := timer.NewManualClock(0)
	w, err := timer.New(timer.Config{Clock: clk})
	if err != nil {
		b.Fatal(err)
	}
	var last Segment
	ln, err := NewListener(OnWheel(w), OutputFunc(func(_ ID, s *Segment) { last = *s }), ListenerConfig{Backlog: 16})
	if err != nil {
		b.Fatal(err)
	}
	syn := Segment{SrcPort: remoteAP.Port(), DstPort: localAP.Port(), Seq: peerISS, Flags: FlagSYN, Window: 65535}
	syn.Options.HasMSS, syn.Options.MSS, syn.Options.HasWS, syn.Options.WindowScale = true, 1460, true, 7
	syn.Options.SACKPermitted, syn.Options.TS, syn.Options.TSVal = true, true, 777
	for i := range 16 {
		s := syn
		ln.HandleSegment(spoofed(i), &s)
	}
	b.Run("SYN", func(b *testing.B) {
		b.ReportAllocs()
		i := 16
		for b.Loop() {
			s := syn
			ln.HandleSegment(spoofed(i), &s)
			i++
		}
	})
	b.Run("bad ACK", func(b *testing.B) {
		b.ReportAllocs()
		ack := Segment{SrcPort: remoteAP.Port(), DstPort: localAP.Port(), Seq: peerISS + 1, Ack: last.Seq + 9, Flags: FlagACK, Window: 512}
		for b.Loop() {
			s := ack
			ln.HandleSegment(spoofed(1<<20), &s)
		}
	})
}
