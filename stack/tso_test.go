package stack

import (
	"bytes"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
	"github.com/tcpwheel/tcpwheel/timer"
)

// tsoRun is what tsoTransfer saw of A: every frame it wrote, its counters,
// and its wheel's stopped entries.
type tsoRun struct {
	frames  [][]byte
	stats   Stats
	off     OffloadStats
	stopped uint64
	gsoMax  int
}

// tsoTransfer sends size bytes from A (on devA) to B (its dstB:80) over
// offload peers, both with fixed ISNs (and the timestamp offsets they
// make: the same TSvals on every run) and A's local port fixed, A's TCP with
// gsoMax (0: the stack's default), step by step until B has read them all.
func tsoTransfer(t *testing.T, devA offloadDev, dstB netip.Addr, gsoMax, size int) tsoRun {
	t.Helper()
	isn := func(v seqnum.Value) tcp.ISNFunc { return func(tcp.ID, time.Duration) seqnum.Value { return v } }
	a := newOffloadPeerOn(t, devA, Config{Addr: addrA, Addr6: addr6A, Clock: timer.NewManualClock(0), TCP: tcp.Config{ISN: isn(0xfff00000), TSOffset: tcp.TSOffsetISS, GSOMax: gsoMax, SendBuffer: size}})
	b := newOffloadPeerOn(t, &frameDev{no6: devA.base().no6}, Config{Addr: addrB, Addr6: addr6B, Clock: timer.NewManualClock(0), TCP: tcp.Config{ISN: isn(7), TSOffset: tcp.TSOffsetISS}})
	if d, ok := devA.(*vecDev); ok {
		d.buf = a.gso.buf
	}
	ln, err := b.Listen("tcp", ":80")
	if err != nil {
		t.Fatal(err)
	}
	var ca *Conn
	run := tsoRun{gsoMax: a.cfg.TCP.GSOMax}
	pending := a.step(func() {
		if ca, err = a.StartDial("tcp", 40000, netip.AddrPortFrom(dstB, 80).String()); err != nil {
			t.Fatal(err)
		}
	})
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + i>>12)
	}
	var cb *Conn
	var got []byte
	buf := make([]byte, 1<<16)
	written := 0
	eof := false
	for step := 0; step < 20000 && !eof; step++ {
		run.frames = append(run.frames, pending...)
		fb := b.deliver(t, pending)
		if cb == nil {
			if c, ok := ln.(*Listener).TryAccept(); ok {
				cb = c
			}
		}
		if cb != nil {
			got = readReady(cb, got, buf)
			if _, err := cb.TryRead(buf); err == io.EOF {
				eof = true
			}
			fb = append(fb, b.step(func() {})...)
		}
		pending = append(a.deliver(t, fb), a.step(func() {
			if ca.Info().State == tcp.StateEstablished && written < size {
				n, err := ca.TryWrite(data[written:])
				if err != nil {
					t.Fatal(err)
				}
				written += n
				if written == size {
					ca.CloseWrite() // with data waiting: the FIN rides on the last TSO segment
				}
			}
		})...)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("B read %d bytes, want %d intact", len(got), size)
	}
	run.stats, run.stopped = a.Stats(), a.m.Wheel().Stats().Stopped
	run.off = run.stats.Offload
	return run
}

// TestTSOSameFrames: with TSO segments (tcp.Config.GSOMax, which the stack
// sets on a device with GSO), A writes the same frames, byte for byte, as
// with one MSS per segment, and counts the same segments and packets: over
// IPv4 and IPv6 GSO frames, frames of views (a writev), and IPv6 on a
// device without TSO6, where the stack cuts them into packets itself
// (sendTSO). The segments' RTO entries are the TSO segments': far fewer
// stopped.
func TestTSOSameFrames(t *testing.T) {
	for _, tc := range []struct {
		name string
		dev  func() offloadDev
		dst  netip.Addr
	}{
		{"IPv4 GSO frames", func() offloadDev { return &frameDev{} }, addrB},
		{"IPv6 GSO frames", func() offloadDev { return &frameDev{} }, addr6B},
		{"IPv4 views", func() offloadDev { return &vecDev{} }, addrB},
		{"IPv6 without TSO6: packets", func() offloadDev { return &frameDev{no6: true} }, addr6B},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const size = 1448 * 1428 // full-sized segments over IPv4 and IPv6: a FIN on a TSO segment
			mss := tsoTransfer(t, tc.dev(), tc.dst, -1, size)
			tso := tsoTransfer(t, tc.dev(), tc.dst, 0, size)
			if mss.gsoMax != -1 || tso.gsoMax != gsoMax {
				t.Fatalf("GSOMax %d and %d, want -1 (as set) and the stack's %d", mss.gsoMax, tso.gsoMax, gsoMax)
			}
			if len(mss.frames) != len(tso.frames) {
				t.Fatalf("%d frames with one MSS per segment, %d with TSO", len(mss.frames), len(tso.frames))
			}
			for i := range mss.frames {
				if !bytes.Equal(mss.frames[i], tso.frames[i]) {
					t.Fatalf("frame %d of %d differs (%d bytes, %d with TSO)", i, len(mss.frames), len(mss.frames[i]), len(tso.frames[i]))
				}
			}
			if mss.stats.SegmentsOut != tso.stats.SegmentsOut || mss.stats.PacketsOut != tso.stats.PacketsOut || mss.off != tso.off {
				t.Fatalf("counters differ: segments %d/%d, packets %d/%d, offloads %+v / %+v",
					mss.stats.SegmentsOut, tso.stats.SegmentsOut, mss.stats.PacketsOut, tso.stats.PacketsOut, mss.off, tso.off)
			}
			if tso.stopped*2 > mss.stopped { // one RTO entry per TSO segment; the ACKs restart the PTO in both
				t.Fatalf("%d timer entries stopped with TSO, %d without: want fewer than half", tso.stopped, mss.stopped)
			}
			t.Logf("%d frames, %d segments; entries stopped %d with TSO, %d without", len(mss.frames), mss.stats.SegmentsOut, tso.stopped, mss.stopped)
		})
	}
}

// TestSendTSOJoinsAsPieces: sendTSO writes the frames that sending each
// piece (tcp.Segment.GSOPiece) through sendSegment writes, with the same
// counters and IPv4 IDs: a TSO segment that continues a frame fills it,
// the rest starts the next, the FIN on the last piece alone; a segment of
// another size or another connection does not join.
func TestSendTSOJoinsAsPieces(t *testing.T) {
	payload := make([]byte, 200*1448)
	for i := range payload {
		payload[i] = byte(i * 31)
	}
	idA := tcp.ID{Local: netip.AddrPortFrom(addrA, 40000), Remote: netip.AddrPortFrom(addrB, 80)}
	idB := tcp.ID{Local: netip.AddrPortFrom(addrA, 40001), Remote: netip.AddrPortFrom(addrB, 80)}
	type out struct {
		id  tcp.ID
		seg tcp.Segment
	}
	seg := func(id tcp.ID, from, n, mss int, flags tcp.Flags) out {
		s := tcp.Segment{SrcPort: id.Local.Port(), DstPort: id.Remote.Port(), Seq: seqnum.Value(0xffff0000).Add(seqnum.Size(from)), Ack: 9,
			Flags: tcp.FlagACK | tcp.FlagPSH | flags, Window: 100, Payload: payload[from : from+n], GSOSize: mss}
		s.Options.TS, s.Options.TSVal = true, 77
		return out{id, s}
	}
	for _, tc := range []struct {
		name string
		segs []out
	}{
		{"one frame", []out{seg(idA, 0, 30*1448, 1448, 0)}},
		{"a frame filled, the rest and the FIN in the next", []out{seg(idA, 0, 30*1448, 1448, 0), seg(idA, 30*1448, 30*1448, 1448, tcp.FlagFIN)}},
		{"three frames", []out{seg(idA, 0, 2*1448, 1448, 0), seg(idA, 2*1448, 44*1448, 1448, 0), seg(idA, 46*1448, 44*1448, 1448, 0), seg(idA, 90*1448, 5*1448, 1448, tcp.FlagFIN)}},
		{"a smaller MSS", []out{seg(idA, 0, 10*1448, 1448, 0), seg(idA, 10*1448, 10*1000, 1000, 0)}},
		{"another connection", []out{seg(idA, 0, 10*1448, 1448, 0), seg(idB, 10*1448, 10*1448, 1448, 0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var frames [2][][]byte
			var stats [2]Stats
			for i, send := range []func(p *offloadPeer, id tcp.ID, s *tcp.Segment){
				func(p *offloadPeer, id tcp.ID, s *tcp.Segment) {
					for j := range s.GSOPieces() {
						piece := s.GSOPiece(j)
						p.sendSegment(id, &piece)
					}
				},
				func(p *offloadPeer, id tcp.ID, s *tcp.Segment) { p.sendTSO(id, s) },
			} {
				p := newOffloadPeer(t, addrA, timer.NewManualClock(0))
				frames[i] = p.step(func() {
					if err := p.m.Post(func() {
						for _, o := range tc.segs {
							send(p, o.id, &o.seg)
						}
					}); err != nil {
						t.Fatal(err)
					}
				})
				stats[i] = p.Stats()
			}
			if len(frames[0]) != len(frames[1]) {
				t.Fatalf("%d frames piece by piece, %d from sendTSO", len(frames[0]), len(frames[1]))
			}
			for i := range frames[0] {
				if !bytes.Equal(frames[0][i], frames[1][i]) {
					t.Fatalf("frame %d of %d differs", i, len(frames[0]))
				}
			}
			if stats[0].SegmentsOut != stats[1].SegmentsOut || stats[0].PacketsOut != stats[1].PacketsOut || stats[0].Offload != stats[1].Offload {
				t.Fatalf("counters differ: %+v / %+v", stats[0], stats[1])
			}
			t.Logf("%d frames, %d segments", len(frames[0]), stats[0].SegmentsOut)
		})
	}
}
