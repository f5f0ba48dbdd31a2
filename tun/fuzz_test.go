package tun

import (
	"encoding/binary"
	"testing"
)

// FuzzVnetHdr feeds arbitrary frames (a virtio-net header and a packet) to
// the parser, Check, and the segmentation a wrapper does (SplitFrame): none
// may panic, and every frame Check accepts must segment into packets no
// larger than their headers and gso_size, whose IP and TCP checksums verify
// and whose payloads add up to the frame's; FrameFilter's output must be
// frames Check accepts, holding the packets kept.
func FuzzVnetHdr(f *testing.F) {
	pkt := tcp4Packet(1, 0x18, make([]byte, 3000), true)
	gso := make([]byte, VnetHdrLen)
	VnetHdr{Flags: VnetFlagNeedsCsum, GSOType: GSOTCPv4, HdrLen: 52, GSOSize: 1448, CsumStart: 20, CsumOffset: 16}.Put(gso)
	f.Add(append(gso, pkt...))
	one := make([]byte, VnetHdrLen)
	VnetHdr{Flags: VnetFlagNeedsCsum, CsumStart: 20, CsumOffset: 16}.Put(one)
	f.Add(append(one, tcp4Packet(1, 0x18, []byte("hi"), true)...))
	f.Add(append(make([]byte, VnetHdrLen), tcp4Packet(1, 0x11, nil, false)...))
	bad := append([]byte(nil), gso...)
	binary.LittleEndian.PutUint16(bad[4:], 0) // gso_size 0
	f.Add(append(bad, pkt...))
	f.Add([]byte{1, 1, 0xff, 0xff, 1, 0, 0xff, 0xff, 0xff, 0xff})
	v6 := make([]byte, VnetHdrLen)
	VnetHdr{Flags: VnetFlagNeedsCsum, GSOType: GSOTCPv6, HdrLen: 72, GSOSize: 1000, CsumStart: 40, CsumOffset: 16}.Put(v6)
	f.Add(append(v6, tcp6Packet(1, 0x18, make([]byte, 2100), true)...))
	scratch := make([]byte, MaxMTU)
	var filter FrameFilter
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, err := ParseVnetHdr(frame)
		if err != nil {
			return
		}
		p := frame[VnetHdrLen:]
		if h.Check(p) != nil {
			if SplitFrame(frame, scratch, true, func([]byte) error { return nil }) == nil {
				t.Fatal("SplitFrame took a frame Check refused")
			}
			return
		}
		total, n := 0, 0
		ihl, thl, _, _ := tcpHeaders(p)
		err = SplitFrame(frame, scratch, true, func(seg []byte) error {
			n++
			if !h.IsGSO() {
				if len(seg) != len(p) {
					t.Fatalf("a frame that is not GSO became a %d-byte packet of %d", len(seg), len(p))
				}
				return nil
			}
			if len(seg) > ihl+thl+int(h.GSOSize) {
				t.Fatalf("segment of %d bytes, more than %d+%d+%d", len(seg), ihl, thl, h.GSOSize)
			}
			if !ipChecksumOK(seg) || !tcpChecksumOK(seg) {
				t.Fatal("segment's checksums do not verify")
			}
			total += len(seg) - ihl - thl
			return nil
		})
		if err != nil {
			t.Fatalf("SplitFrame of a checked frame: %v", err)
		}
		if h.IsGSO() && (total != len(p)-ihl-thl || n != SegmentCount(h, p)) {
			t.Fatalf("segments carry %d bytes in %d, the frame %d in %d", total, n, len(p)-ihl-thl, SegmentCount(h, p))
		}
		// FrameFilter, keeping every other packet of a frame that is one
		// (its IP length its length: a frame with more bytes reads as two,
		// the second bad, which the stack counts): what it leaves are
		// frames that Check accepts, as many packets as were kept.
		if _, rest := NextFrame(frame); len(rest) != 0 {
			return
		}
		buf := make([]byte, MaxFrame)
		m := copy(buf, frame)
		i, kept := 0, 0
		m, lost := filter.Filter(buf, m, func([]byte) bool {
			i++
			if i%2 == 1 {
				kept++
			}
			return i%2 == 1
		})
		left := 0
		EachFrame(buf, m, func(fr []byte) {
			fh, err := ParseVnetHdr(fr)
			if err != nil || fh.Check(fr[VnetHdrLen:]) != nil {
				t.Fatalf("FrameFilter left a bad frame: %v", err)
			}
			left += SegmentCount(fh, fr[VnetHdrLen:])
		})
		if left+lost != kept {
			t.Fatalf("FrameFilter left %d packets (%d lost), %d kept", left, lost, kept)
		}
	})
}
