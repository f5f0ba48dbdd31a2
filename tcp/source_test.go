package tcp

import (
	"bytes"
	"errors"
	"testing"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// testSource is a Source over a fixed stream: the endpoint may take only the
// bytes offered (avail), and read only those it took and did not consume.
type testSource struct {
	t                  *testing.T
	stream             []byte
	head, taken, avail int // consumed, taken and offered to Append, in all
}

func (s *testSource) Take(k int) {
	if k < 0 || s.taken+k > s.avail {
		s.t.Fatalf("Take(%d) beyond the %d bytes offered", k, s.avail-s.taken)
	}
	s.taken += k
}

func (s *testSource) Len() int { return s.taken - s.head }

func (s *testSource) At(i, k int) []byte {
	if i < 0 || k < 0 || i+k > s.Len() {
		s.t.Fatalf("At(%d, %d) beyond the %d bytes held", i, k, s.Len())
	}
	return s.stream[s.head+i : s.head+i+k]
}

func (s *testSource) Stable(int, int) bool { return true } // the stream itself

func (s *testSource) Consume(k int) {
	if k < 0 || k > s.Len() {
		s.t.Fatalf("Consume(%d) beyond the %d bytes held", k, s.Len())
	}
	s.head += k
}

// TestSource: an endpoint whose send data a Source holds (Append) sends
// exactly what one sends from its own buffer (Write): the same segments, the
// same payloads, the FIN after the last byte; the send buffer bounds Append
// as it bounds Write; the Source drops exactly what the peer acknowledged.
func TestSource(t *testing.T) {
	cfg := testConfig()
	cfg.SendBuffer = 10000
	stream := data(40000)
	src := &testSource{t: t, stream: stream}
	hw, hs := established(t, cfg), established(t, cfg)
	hs.ep.SetSource(src)
	if n, err := hs.ep.Write(stream[:10]); n != 0 || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Write with a Source: %d, %v, want 0 and ErrInvalidConfig", n, err)
	}
	if n, err := hw.ep.Append(10); n != 0 || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Append without a Source: %d, %v, want 0 and ErrInvalidConfig", n, err)
	}
	written := 0 // by both
	write := func(k int) {
		t.Helper()
		nw, errw := hw.ep.Write(stream[written : written+k])
		src.avail = written + k
		ns, errs := hs.ep.Append(k)
		if ns != nw || errs != errw {
			t.Fatalf("Append(%d): %d, %v; Write took %d, %v", k, ns, errs, nw, errw)
		}
		written += ns
		if src.taken != written {
			t.Fatalf("Append took %d, the Source gave %d in all, want %d", ns, src.taken, written)
		}
		src.avail = written
		if hw.ep.Writable() != hs.ep.Writable() {
			t.Fatalf("Writable: %d with a Source, %d without", hs.ep.Writable(), hw.ep.Writable())
		}
	}
	// same pops what both sent and checks it is the same, payloads included.
	same := func() int {
		t.Helper()
		if len(hw.out.segs) != len(hs.out.segs) {
			t.Fatalf("%d segments sent with a Source, %d without", len(hs.out.segs), len(hw.out.segs))
		}
		n := len(hw.out.segs)
		for range n {
			w := hw.expect()
			s := hs.expect(seqIs(w.Seq), ackIs(w.Ack), flagsAre(w.Flags), payloadIs(w.Payload))
			if off := int(s.Seq - (testISS + 1)); len(s.Payload) > 0 && !bytes.Equal(s.Payload, stream[off:off+len(s.Payload)]) {
				t.Fatalf("segment %v: not the stream's bytes at %d", &s, off)
			}
		}
		return n
	}
	ack := func(k int) {
		t.Helper()
		hw.ackUpTo((testISS + 1).Add(seqnum.Size(k)))
		hs.ackUpTo((testISS + 1).Add(seqnum.Size(k)))
	}

	write(25000) // the buffer takes 10000
	if written != 10000 || hs.ep.Writable() != 0 {
		t.Fatalf("Append took %d, Writable %d; want the buffer's 10000 and 0", written, hs.ep.Writable())
	}
	write(1)
	if written != 10000 {
		t.Fatal("Append took a byte into a full buffer")
	}
	if same() == 0 {
		t.Fatal("nothing sent")
	}
	ack(4000)
	if src.head != 4000 || hs.ep.Writable() != 4000 {
		t.Fatalf("after an ACK of 4000: the Source consumed %d, Writable %d; want 4000 and 4000", src.head, hs.ep.Writable())
	}
	write(30000 - written) // takes the 4000 freed
	if written != 14000 {
		t.Fatalf("Append after the ACK: %d written in all, want 14000", written)
	}
	same()
	ack(14000)
	if src.head != 14000 {
		t.Fatalf("the Source consumed %d, want 14000", src.head)
	}
	write(3000)
	if err := hw.ep.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if err := hs.ep.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	same()
	ack(17000)
	same()
	hs.ackUpTo(testISS + 1 + 17000 + 1) // the FIN
	if src.head != 17000 || hs.ep.Info().SndBuffered != 0 {
		t.Fatalf("after the FIN's ACK: the Source consumed %d, the endpoint holds %d; want 17000, 0", src.head, hs.ep.Info().SndBuffered)
	}
	if n, err := hs.ep.Append(1); n != 0 || !errors.Is(err, ErrWriteClosed) {
		t.Fatalf("Append after CloseWrite: %d, %v, want ErrWriteClosed", n, err)
	}
}
