package impair_test

import (
	"bytes"
	"testing"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"

	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/impair"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// TestFrames: impair decides on each packet of a frame, both ways. A frame
// with nothing dropped passes whole; of one with its second packet dropped,
// the others go on: one by one on the way out (with full checksums), as the
// frames of the runs kept on the way in; the counters count packets.
func TestFrames(t *testing.T) {
	frame := tuntest.GSOFrame(tcpPacket(header.TCPFlagAck|header.TCPFlagPsh, 3000, 100), 1000)
	segs := tuntest.Segments(frame)
	if len(segs) != 3 {
		t.Fatalf("%d packets in the frame", len(segs))
	}
	inner := &tuntest.Frames{}
	d, err := impair.Wrap(inner, impair.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if o := d.Offloads(); !o.GSO || !o.GRO {
		t.Fatalf("Offloads %+v: want the wrapped device's", o)
	}

	// Out.
	if err := d.WriteFrame(frame); err != nil {
		t.Fatal(err)
	}
	if _, err := d.AddRule(impair.Rule{Dir: impair.Egress, Match: impair.MatchData, Skip: 1, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFrame(frame); err != nil {
		t.Fatal(err)
	}
	frames, pkts := inner.Written()
	if len(frames) != 1 || !bytes.Equal(frames[0], frame) {
		t.Fatalf("%d frames written, want the first whole", len(frames))
	}
	if len(pkts) != 2 || !bytes.Equal(pkts[0], segs[0]) || !bytes.Equal(pkts[1], segs[2]) {
		t.Fatalf("%d packets written, want packets 1 and 3 of the frame", len(pkts))
	}

	// In.
	if _, err := d.AddRule(impair.Rule{Dir: impair.Ingress, Match: impair.MatchData, Skip: 4, Count: 1}); err != nil {
		t.Fatal(err)
	}
	inner.Queue(frame)
	inner.Queue(frame)
	inner.Queue(frame)
	buf := make([]byte, tun.MaxFrame)
	var got [][][]byte // by read
	for range 2 {
		n, err := d.ReadFrameNonblock(buf)
		if err != nil {
			t.Fatal(err)
		}
		var read [][]byte
		tun.EachFrame(buf, n, func(fr []byte) { read = append(read, tuntest.Segments(fr)...) })
		got = append(got, read)
	}
	// The rule skips four packets and drops the fifth: the first frame
	// passes whole, the second loses its middle packet and comes as two
	// frames (its packets 1 and 3).
	if len(got[0]) != 3 || len(got[1]) != 2 || !bytes.Equal(got[1][0], segs[0]) || !bytes.Equal(got[1][1], segs[2]) {
		t.Fatalf("reads of %d and %d packets: want 3, then packets 1 and 3", len(got[0]), len(got[1]))
	}
	st := d.Stats()
	if st.EgressPassed != 5 || st.EgressDropped != 1 || st.IngressPassed != 5 || st.IngressDropped != 1 {
		t.Fatalf("stats %+v: want 5 passed and 1 dropped each way", st)
	}
}
