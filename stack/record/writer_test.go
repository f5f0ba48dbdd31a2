package record

import (
	"bytes"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// slowWriter takes its writes slowly, from whatever goroutine, and fails
// once it holds more than limit bytes (limit 0: never).
type slowWriter struct {
	mu     sync.Mutex
	b      bytes.Buffer
	limit  int
	writes int
	sizes  []int
}

var errFull = errors.New("disk full")

func (s *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	s.sizes = append(s.sizes, len(p))
	if s.limit > 0 && s.b.Len()+len(p) > s.limit {
		return 0, errFull
	}
	return s.b.Write(p)
}

// testPacket is packet i of a test: 1000 bytes, each its own.
func testPacket(i int) []byte {
	p := bytes.Repeat([]byte{byte(i), byte(i >> 8)}, 500)
	p[0] = 0x45
	return p
}

// writePackets records n packets and an event before each, and flushes.
func writePackets(t *testing.T, out *slowWriter, n int) (*Writer, error) {
	t.Helper()
	w, err := NewWriter(out, Header{Addr: netip.MustParseAddr("198.18.0.2"), MTU: 1500, Tick: Duration(time.Millisecond), Wall: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		w.Event(&Event{Kind: SendTime, T: time.Duration(i)})
		w.Packet(i%2 == 0, time.Duration(i), testPacket(i))
	}
	return w, w.Flush()
}

// The buffers are written by goroutines, behind the caller, to a writer
// slower than the caller: every block arrives, in order.
func TestWriterBuffersInOrder(t *testing.T) {
	const n = 5000 // about 5 MB: five buffers and the rest
	out := &slowWriter{}
	w, err := writePackets(t, out, n)
	if err != nil {
		t.Fatal(err)
	}
	// About 1064 bytes a packet and its event: five full buffers, and the
	// rest at the flush.
	if out.writes != 6 {
		t.Errorf("%d writes to the underlying writer, want 6", out.writes)
	}
	for i, n := range out.sizes[:len(out.sizes)-1] {
		if n < bufSize || n >= bufSize+1100 {
			t.Errorf("write %d: %d bytes, want a full buffer: %d to one record more", i, n, bufSize)
		}
	}
	if st := w.Stats(); st.Packets != n || st.Events != n || st.Errors != 0 || st.Bytes != uint64(out.b.Len()) {
		t.Errorf("stats %+v: want %d packets and events, no errors, %d bytes", st, n, out.b.Len())
	}
	rec, err := Parse(bytes.NewReader(out.b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	ps := rec.Packets()
	if len(ps) != n || len(rec.Events) != 2*n {
		t.Fatalf("read back %d packets and %d events, want %d and %d", len(ps), len(rec.Events), n, 2*n)
	}
	for i, p := range ps {
		if !bytes.Equal(p.Data, testPacket(i)) || p.T != time.Duration(i) || (p.Kind == In) != (i%2 == 0) {
			t.Fatalf("packet %d: %v at %v, %d bytes: not the one written", i, p.Kind, p.T, len(p.Data))
		}
		if e := rec.Events[2*i]; e.Kind != SendTime || e.T != time.Duration(i) {
			t.Fatalf("event %d: %v at %v, want sendtime at %v", 2*i, e.Kind, e.T, time.Duration(i))
		}
	}
}

// A write error ends the recording, not the caller: what was written before
// it stays, a whole number of buffers; later records are counted as errors;
// Flush and Err report it.
func TestWriterErrorEndsRecording(t *testing.T) {
	out := &slowWriter{limit: 2*bufSize + bufSize/2} // the third buffer fails
	w, err := writePackets(t, out, 5000)
	if !errors.Is(err, errFull) || !errors.Is(w.Err(), errFull) {
		t.Fatalf("Flush: %v, Err: %v; want %v", err, w.Err(), errFull)
	}
	if out.writes != 3 {
		t.Errorf("%d writes, want 3: none after the one that failed", out.writes)
	}
	st := w.Stats()
	if st.Errors == 0 || st.Packets+st.Errors < 5000 {
		t.Errorf("stats %+v: want the packets after the error counted as errors", st)
	}
	before := st
	w.Packet(true, 0, testPacket(0))
	if st := w.Stats(); st.Errors != before.Errors+1 || st.Packets != before.Packets {
		t.Errorf("a packet after the error: stats %+v, want one more error than %+v", st, before)
	}
	if out.b.Len() < 2*bufSize || out.b.Len() >= 3*bufSize {
		t.Errorf("%d bytes written, want the two buffers before the error", out.b.Len())
	}
	rec, err := Parse(bytes.NewReader(out.b.Bytes()))
	if err == nil {
		t.Fatalf("the cut recording parsed whole (%d events)", len(rec.Events))
	}
}
