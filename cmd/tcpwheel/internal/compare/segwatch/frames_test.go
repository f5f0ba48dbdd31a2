package segwatch

import (
	"bytes"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// TestFrames: the watcher sees each packet of a frame, both ways, as the
// kernel would segment it, and the frame passes whole: a frame of three
// data segments out counts three segments, not one; the same frame sent
// again counts as retransmissions of them.
func TestFrames(t *testing.T) {
	h := newHarness(t)
	inner := &tuntest.Frames{}
	d := Wrap(inner, h.w)
	if o := d.Offloads(); !o.GSO || !o.GRO {
		t.Fatalf("Offloads %+v: want the wrapped device's", o)
	}
	h.out(tcpSeg{seq: 1000, flags: header.TCPFlagSyn})
	h.in(tcpSeg{seq: 5000, ack: 1001, flags: header.TCPFlagSyn | header.TCPFlagAck})
	out := tuntest.GSOFrame(packet(stackAP, kernelAP, tcpSeg{seq: 1001, ack: 5001, flags: header.TCPFlagAck, payload: 3000}), 1000)
	if err := d.WriteFrame(out); err != nil {
		t.Fatal(err)
	}
	if frames, _ := inner.Written(); len(frames) != 1 || !bytes.Equal(frames[0], out) {
		t.Fatal("the frame did not pass whole")
	}
	in := tuntest.GSOFrame(packet(kernelAP, stackAP, tcpSeg{seq: 5001, ack: 4001, flags: header.TCPFlagAck, payload: 2000}), 1000)
	inner.Queue(in)
	buf := make([]byte, tun.MaxFrame)
	if n, err := d.ReadFrameNonblock(buf); err != nil || !bytes.Equal(buf[:n], in) {
		t.Fatalf("read %d bytes, %v: want the frame whole", n, err)
	}
	st := h.w.Stats()
	if st.EgressSegments != 4 || st.EgressPackets != 4 || st.IngressPackets != 3 {
		t.Fatalf("stats %+v: want 4 segments out (SYN and 3 of the frame), 3 packets in", st)
	}
	h.at(300e6)
	if err := d.WriteFrame(out); err != nil { // the same data again: retransmitted
		t.Fatal(err)
	}
	if n := len(h.w.Events()); n != 3 {
		t.Fatalf("%d retransmissions seen, want the frame's 3", n)
	}
}
