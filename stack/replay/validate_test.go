package replay

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// TestValidateFindsEachViolation builds captures by hand, each breaking one
// rule, and checks that Validate names the packet and the rule.
func TestValidateFindsEachViolation(t *testing.T) {
	a := netip.MustParseAddrPort("198.18.0.1:40000")
	b := netip.MustParseAddrPort("198.18.0.2:80")
	const isnA, isnB = 1000, 5000
	seg := func(flags tcp.Flags, seq, ack uint32, wnd uint16, payload int) tcp.Segment {
		return tcp.Segment{Flags: flags, Seq: seqnum.Value(seq), Ack: seqnum.Value(ack), Window: wnd, Payload: make([]byte, payload)}
	}
	syn := seg(tcp.FlagSYN, isnA, 0, 100, 0)
	synAck := seg(tcp.FlagSYN|tcp.FlagACK, isnB, isnA+1, 100, 0)
	ack := seg(tcp.FlagACK, isnA+1, isnB+1, 100, 0)
	type pkt struct {
		fromA bool
		seg   tcp.Segment
	}
	for _, tc := range []struct {
		name string
		pkts []pkt
		want string // "" for a valid capture
	}{
		{"valid", []pkt{{true, syn}, {false, synAck}, {true, ack}, {true, seg(tcp.FlagACK, isnA+1, isnB+1, 100, 100)}}, ""},
		{"SYN with another ISN", []pkt{{true, syn}, {true, seg(tcp.FlagSYN, isnA+7, 0, 100, 0)}}, "packet 2 (198.18.0.1:40000 -> 198.18.0.2:80 [SYN]): SYN with sequence 1007, not the ISN 1000"},
		{"data before SYN", []pkt{{true, syn}, {false, seg(tcp.FlagACK, isnB, isnA+1, 100, 0)}}, "packet 2 (198.18.0.2:80 -> 198.18.0.1:40000 [ACK]): data or ACK before this side's SYN"},
		{"ACK of unsent data", []pkt{{true, syn}, {false, seg(tcp.FlagSYN|tcp.FlagACK, isnB, isnA+9, 100, 0)}}, "packet 2 (198.18.0.2:80 -> 198.18.0.1:40000 [SYN|ACK]): unacceptable ACK: acknowledges 8 bytes never sent"},
		{"ACK of the ISN", []pkt{{true, syn}, {false, seg(tcp.FlagSYN|tcp.FlagACK, isnB, isnA, 100, 0)}}, "unacceptable ACK: at or before the other side's ISN"},
		{"beyond the window", []pkt{{true, syn}, {false, synAck}, {true, ack}, {true, seg(tcp.FlagACK, isnA+1, isnB+1, 100, 101)}}, "packet 4 (198.18.0.1:40000 -> 198.18.0.2:80 [ACK]): data beyond the receiver's window by 1 bytes"},
		{"zero-window probe", []pkt{{true, syn}, {false, seg(tcp.FlagSYN|tcp.FlagACK, isnB, isnA+1, 0, 0)}, {true, seg(tcp.FlagACK, isnA+1, isnB+1, 100, 1)}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sess := &Session{}
			for i, p := range tc.pkts {
				src, dst := a, b
				if !p.fromA {
					src, dst = b, a
				}
				sess.Packets = append(sess.Packets, Packet{N: i + 1, Src: src, Dst: dst, Seg: p.seg})
			}
			err := Validate(sess)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("valid capture: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
