package tcp

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

func TestSegmentRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		seg  Segment
	}{
		{"bare", Segment{SrcPort: 1, DstPort: 2, Seq: 3, Ack: 4, Flags: FlagACK, Window: 5}},
		{"syn all options", Segment{SrcPort: 80, DstPort: 4000, Seq: 0xfffffff0, Flags: FlagSYN, Window: 65535,
			Options: Options{HasMSS: true, MSS: 1460, HasWS: true, WindowScale: 7, SACKPermitted: true, TS: true, TSVal: 1, TSEcr: 0}}},
		{"syn no ts", Segment{Flags: FlagSYN, Options: Options{HasMSS: true, MSS: 536, SACKPermitted: true}}},
		{"data ts sack", Segment{Seq: 10, Ack: 20, Flags: FlagACK | FlagPSH, Payload: []byte("hello"),
			Options: Options{TS: true, TSVal: 9, TSEcr: 8, NSACK: 3, SACK: [4]SACKBlock{{1, 2}, {3, 4}, {5, 6}}}}},
		{"four sack blocks", Segment{Flags: FlagACK, Options: Options{NSACK: 4, SACK: [4]SACKBlock{{1, 2}, {3, 4}, {5, 6}, {7, 8}}}}},
		{"rst", Segment{Seq: 77, Flags: FlagRST}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := make([]byte, tc.seg.EncodedLen())
			n, err := tc.seg.Encode(b)
			if err != nil || n != len(b) {
				t.Fatalf("Encode: got %d, %v; want %d, nil", n, err, len(b))
			}
			if (n-len(tc.seg.Payload))%4 != 0 {
				t.Fatalf("header length %d is not a multiple of 4", n-len(tc.seg.Payload))
			}
			got, err := ParseSegment(b)
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tc.seg.String() || string(got.Payload) != string(tc.seg.Payload) {
				t.Fatalf("got %v, want %v", &got, &tc.seg)
			}
		})
	}
}

func TestParseSegmentErrors(t *testing.T) {
	hdr := func(off int, opts ...byte) []byte {
		b := make([]byte, 20+len(opts))
		b[12] = byte(off/4) << 4
		copy(b[20:], opts)
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"short", make([]byte, 19), ErrShortSegment},
		{"offset below 20", hdr(16), ErrDataOffset},
		{"offset past end", hdr(24), ErrDataOffset},
		{"option runs past header", hdr(24, 2, 8, 0, 0), ErrBadOption},
		{"zero-length option", hdr(24, 99, 0, 0, 0), ErrBadOption},
		{"MSS wrong length", hdr(24, 2, 3, 0, 1), ErrBadOption},
		{"WS wrong length", hdr(24, 3, 4, 0, 1), ErrBadOption},
		{"TS wrong length", hdr(24, 8, 4, 0, 1), ErrBadOption},
		{"SACK odd length", hdr(24, 5, 4, 0, 1), ErrBadOption},
		{"lone kind byte", hdr(24, 1, 1, 1, 2), ErrBadOption},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseSegment(tc.b); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("unknown option skipped, EOL ends", func(t *testing.T) {
		s, err := ParseSegment(hdr(28, 30, 4, 0, 0, 0, 2, 4, 5))
		if err != nil || s.Options.HasMSS {
			t.Fatalf("got %v, %v; want no MSS, nil", &s, err)
		}
	})
	t.Run("window scale capped at 14", func(t *testing.T) {
		s, err := ParseSegment(hdr(24, 3, 3, 20, 0))
		if err != nil || s.Options.WindowScale != 14 {
			t.Fatalf("got ws %d, %v; want 14", s.Options.WindowScale, err)
		}
	})
}

// refChecksum is RFC 1071, written out plainly.
func refChecksum(parts ...[]byte) uint16 {
	var all []byte
	for _, p := range parts {
		all = append(all, p...)
	}
	if len(all)%2 == 1 {
		all = append(all, 0)
	}
	var sum uint32
	for i := 0; i < len(all); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(all[i:]))
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

func TestChecksum(t *testing.T) {
	seg := Segment{SrcPort: 4000, DstPort: 80, Seq: 1, Ack: 2, Flags: FlagACK, Window: 100, Payload: []byte("odd")}
	b := make([]byte, seg.EncodedLen())
	seg.Encode(b)
	for _, tc := range []struct{ src, dst netip.Addr }{
		{netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")},
		{netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")},
	} {
		t.Run(tc.src.String(), func(t *testing.T) {
			var pseudo []byte
			pseudo = append(pseudo, tc.src.AsSlice()...)
			pseudo = append(pseudo, tc.dst.AsSlice()...)
			if tc.src.Is4() {
				pseudo = append(pseudo, 0, 6, 0, byte(len(b)))
			} else {
				pseudo = append(pseudo, 0, 0, 0, byte(len(b)), 0, 0, 0, 6)
			}
			b[16], b[17] = 0, 0
			want := refChecksum(pseudo, b)
			if got := Checksum(tc.src, tc.dst, b); got != want {
				t.Fatalf("Checksum: got %#04x, want %#04x", got, want)
			}
			SetChecksum(tc.src, tc.dst, b)
			if !VerifyChecksum(tc.src, tc.dst, b) {
				t.Fatal("VerifyChecksum: got false after SetChecksum, want true")
			}
			b[21] ^= 1
			if VerifyChecksum(tc.src, tc.dst, b) {
				t.Fatal("VerifyChecksum: got true for a corrupted segment, want false")
			}
			b[21] ^= 1
		})
	}
}

func TestResetFor(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Segment
		ok   bool
		want Segment
	}{
		{"rst gets nothing", Segment{Flags: FlagRST}, false, Segment{}},
		{"ack", Segment{SrcPort: 1, DstPort: 2, Seq: 5, Ack: 99, Flags: FlagACK, Payload: []byte("x")}, true,
			Segment{SrcPort: 2, DstPort: 1, Seq: 99, Flags: FlagRST}},
		{"syn", Segment{SrcPort: 1, DstPort: 2, Seq: 5, Flags: FlagSYN}, true,
			Segment{SrcPort: 2, DstPort: 1, Ack: 6, Flags: FlagRST | FlagACK}},
		{"syn fin data", Segment{Seq: seqnum.Value(0xffffffff), Flags: FlagSYN | FlagFIN, Payload: []byte("ab")}, true,
			Segment{Ack: 3, Flags: FlagRST | FlagACK}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ResetFor(&tc.in)
			if ok != tc.ok || got.String() != tc.want.String() {
				t.Fatalf("got %v, %v; want %v, %v", &got, ok, &tc.want, tc.ok)
			}
		})
	}
}
