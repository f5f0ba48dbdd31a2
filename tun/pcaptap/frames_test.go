package pcaptap_test

import (
	"bytes"
	"testing"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"

	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/pcaptap"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// TestFrames: a frame passes the tap whole both ways, and the capture holds
// its packets one by one, as the kernel makes them (checksums filled in),
// so that it reads like a capture of the wire.
func TestFrames(t *testing.T) {
	frame := tuntest.GSOFrame(tcpPacket(stackAddr, peerAddr, header.TCPFlagAck, 1, 2500), 1000)
	segs := tuntest.Segments(frame)
	inner := &tuntest.Frames{}
	var capture bytes.Buffer
	tap := mustWrap(t, inner, &capture, pcaptap.Config{})
	if err := tap.WriteFrame(frame); err != nil {
		t.Fatal(err)
	}
	inner.Queue(frame)
	buf := make([]byte, tun.MaxFrame)
	n, err := tap.ReadFrameNonblock(buf)
	if err != nil || !bytes.Equal(buf[:n], frame) {
		t.Fatalf("read %d bytes, %v: want the frame whole", n, err)
	}
	if err := tap.Close(); err != nil {
		t.Fatal(err)
	}
	if frames, _ := inner.Written(); len(frames) != 1 || !bytes.Equal(frames[0], frame) {
		t.Fatalf("%d frames written, want the frame whole", len(frames))
	}
	_, recs := readCapture(t, bytes.NewReader(capture.Bytes()))
	want := append(append([][]byte(nil), segs...), segs...)
	if len(segs) != 3 || len(recs) != len(want) {
		t.Fatalf("%d records of %d packets each way, want 3 each way", len(recs), len(segs))
	}
	for i, r := range recs {
		if !bytes.Equal(r.data, want[i]) {
			t.Errorf("record %d differs from packet %d of the frame", i, i%3)
		}
	}
}
