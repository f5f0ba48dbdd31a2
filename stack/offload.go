package stack

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
	"github.com/tcpwheel/tcpwheel/tun"
)

// Link offloads, on a device that is a tun.Offloader (a TUN opened with
// tun.OpenOffload):
//
//   - GRO, inbound: the kernel hands over TCP segments of up to 64 KiB (its
//     TSO) behind a virtio-net header. Each is one segment for TCP (never
//     split); its checksum is not checked when the header says it was
//     verified (DATA_VALID) or left partial (NEEDS_CSUM: the kernel sent it
//     and did not fill it in). A partial checksum is completed only when
//     something reads it: a recording, or a protocol other than TCP.
//   - GSO, outbound: the TCP segments the loop sends in one turn are written
//     as frames (TCP/IPv4's always, TCP/IPv6's when the device has TSO6:
//     GSO_TCPV6, the checksum's start after the 40-byte IPv6 header):
//     consecutive segments of one connection, contiguous, whose
//     headers are the same but for the sequence number, PSH and FIN (the
//     last may have FIN), go out as one frame of up to 64 KiB with gso_size
//     the first's payload (which all but the last have), which the kernel
//     segments, or takes whole when it is the receiver. TCP sets PSH on
//     every data segment (tcp/snd.go sendData); a frame has the last's
//     flags, and the kernel's segmentation (tcp_gso_segment) leaves PSH on
//     the last packet only: the one change on the wire, which no receiver
//     of a frame's packets tells apart (Linux takes them whole). TCP sends
//     its segments, each in flight with its timer, one MSS at a time or as
//     TSO segments (tcp.Config.GSOMax, which New sets on a device with GSO):
//     sendTSO cuts those into the segments they stand for, and the flight
//     recorder records each and the counters (SegmentsOut, PacketsOut)
//     count each as sent: a frame is a link-layer matter. The frame being built is written when a segment
//     does not fit it, before any other packet (so the order on the wire is
//     the order sent), and at the end of the loop's turn (loop.SetTurnHook);
//     on a stack without a loop.Loop (NewManual, a Playback) at once.
//   - Views, not copies: on a device that writes a frame in pieces
//     (tun.FrameVecWriter: a TUN, one writev), a stack that neither records
//     nor hands its writes to a writer goroutine keeps the segments'
//     payloads where they are, in the send buffers (tcp.Segment's
//     PayloadStable: views, which stay as they are until acknowledged),
//     and writes the frame as its headers (in buf) and those views,
//     merged where they continue one another: the payload is not copied on
//     the loop. A payload that is not stable (a span of the send buffer
//     that wraps, copied by tcp into a scratch buffer that its next send
//     reuses) is copied into buf at its place in the frame, and so is a
//     short one (minView: a request-response exchange's frames stay one
//     write) and every payload once the frame has tun.MaxFramePieces-1
//     pieces. The frame is
//     written before its connection is handed a segment whose ACK covers
//     any of its bytes (flushBeforeAck): only then may the endpoint consume
//     them and the storage be written again (tcp.Output's contract); and
//     before the stack forgets its connection (flushFrameOf), after which
//     its buffers may be reused.

// OffloadStats reports the link offloads: what the device offered when the
// stack started, and the frames that moved.
type OffloadStats struct {
	// GSO and GRO: the device's tun.Offloads (GRO as the direct path
	// uses it: a device read by the reader path, or a wrapper, has none).
	GSO, GRO bool
	// GSO6: GSO frames of TCP/IPv6 too (the device's TSO6).
	GSO6 bool
	// Why is why there are no offloads (tun.Offloads.Err), or empty.
	Why string
	// Frames read, those larger than one packet of the MTU (the kernel's
	// TSO segments), and the largest, in bytes (the packet, without the
	// virtio-net header).
	FramesIn, LargeFramesIn uint64
	MaxFrameIn              int
	// Frames whose buffer a Conn took with its payload instead of a copy
	// (rxframes.go), and those it still holds: their payload not yet read.
	FramesLent, FramesHeld uint64
	// Frames written, those with several segments (GSO), the segments in
	// those, and the largest frame's packet, in bytes.
	FramesOut, GSOFramesOut, GSOSegmentsOut uint64
	MaxFrameOut                             int
	// Of those, the frames and GSO frames over IPv6.
	FramesOut6, GSOFramesOut6 uint64
	// FINsJoined counts bare FIN segments that went out on the data
	// segment before them, as its FIN flag (queueSegment): segments sent
	// that are no packet of their own.
	FINsJoined uint64
}

// gsoState is the frame being built of the TCP segments sent (loop only).
type gsoState struct {
	on       bool          // the device takes GSO frames
	v6       bool          // of TCP/IPv6 too (TSO6)
	coalesce bool          // flushed at the end of the loop's turn, not at once
	dev      tun.Offloader // the device, when on
	buf      []byte        // the frame: header, IP, TCP, payloads (tun.MaxFrame)
	n        int           // bytes of buf in use; 0: no frame
	segs     int           // segments in it
	id       tcp.ID        // its connection
	ihl      int           // its IP header's length: IPv4's or IPv6's
	hl       int           // IP and TCP header lengths of each segment
	mss      int           // the first segment's payload: gso_size
	last     int           // the last segment's payload
	next     uint32        // the sequence number that extends it
	open     bool          // another segment may join
	// vdev is the device as a tun.FrameVecWriter, if it is one: payloads
	// may then be views (not with a recorder or a writer goroutine, New).
	vdev tun.FrameVecWriter
	// vec is the frame in pieces once it has a view: buf[:n] as it was
	// then, the views, the payloads copied into buf after them; empty
	// while the frame is all in buf. first is the frame's first sequence
	// number (flushBeforeAck).
	vec   [][]byte
	first uint32
	// at is the clock's reading for the frame (atOK: it has one), which
	// timers.SendTime gives the segments that may join it; pendAt is
	// SendTime's latest reading (pend: no segment has taken it yet), which
	// a segment that starts a frame takes, or, if that one had the frame
	// before's reading (a new frame of the same turn: the next ACK's), the
	// next segment to join.
	at, pendAt time.Duration
	atOK, pend bool
	// hdr is the frame's first segment as TCP sent it, less its payload,
	// when hdrOK (not while recording): a segment whose fields are the
	// same but for the sequence number, PSH and FIN (sameSeg) joins the
	// frame without its header being encoded at all.
	hdr   tcp.Segment
	hdrOK bool
}

// initOffload looks at what the device offers: frames, and whether it
// tells of a full queue (CongestedDevice).
func (s *Stack) initOffload() {
	s.cong, _ = s.dev.(CongestedDevice)
	o, ok := s.dev.(tun.Offloader)
	if !ok {
		s.offStats.Why = "the device has no frames (not a tun.Offloader)"
		return
	}
	off := o.Offloads()
	if off.Err != nil {
		s.offStats.Why = off.Err.Error()
	}
	if off.GSO {
		s.gso = gsoState{on: true, v6: off.TSO6, dev: o, buf: make([]byte, tun.MaxFrame)}
		if v, ok := o.(tun.FrameVecWriter); ok {
			s.gso.vdev, s.gso.vec = v, make([][]byte, 0, tun.MaxFramePieces)
		}
	}
	s.offStats.GSO, s.offStats.GSO6 = off.GSO, off.GSO && off.TSO6
}

// groDevice reports whether the direct path reads frames.
func (s *Stack) groDevice() bool {
	o, ok := s.poll.(tun.Offloader)
	s.offStats.GRO = ok && o.Offloads().GRO
	return s.offStats.GRO
}

// noGRO notes that the direct path is gone: the reader path reads packets.
func (s *Stack) noGRO() { s.gro, s.offStats.GRO = false, false }

// readNonblock reads the next packet, or frame, of the direct path into ibuf.
func (s *Stack) readNonblock() (int, error) {
	if s.gro {
		return s.poll.(tun.Offloader).ReadFrameNonblock(s.ibuf)
	}
	return s.poll.ReadPacketNonblock(s.ibuf)
}

// devWriteFrameVec writes a frame in pieces (tun.FrameVecWriter), under
// wmu as devWriteFrame.
func (s *Stack) devWriteFrameVec(pieces [][]byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.gso.vdev.WriteFrameVec(pieces)
}

// handleFrames handles the frames of one read: one from a TUN, or several
// back to back from a wrapper (tun.NextFrame).
func (s *Stack) handleFrames(b []byte) {
	tun.EachFrame(b, len(b), s.handleFrame)
}

// handleFrame checks a frame's virtio-net header and handles its packet as
// one (handlePacketNow), without checking a checksum the header vouches for.
func (s *Stack) handleFrame(frame []byte) {
	d := &s.counters.Drops
	h, err := tun.ParseVnetHdr(frame)
	if err != nil {
		d.BadVnetHeader++
		return
	}
	pkt := frame[tun.VnetHdrLen:]
	if err := h.Check(pkt); err != nil {
		switch {
		case errors.Is(err, tun.ErrVnetCsum):
			d.BadChecksumOffset++
		case errors.Is(err, tun.ErrVnetGSO):
			d.BadGSO++
		default:
			d.BadVnetHeader++
		}
		return
	}
	st := &s.offStats
	st.FramesIn++
	if len(pkt) > s.dev.MTU() {
		st.LargeFramesIn++
	}
	st.MaxFrameIn = max(st.MaxFrameIn, len(pkt))
	// TCP right after the IP header, over IPv4 or IPv6 (with no extension
	// header): the checksum the header vouches for is not computed. (IPv6
	// frames were completed and checked in full until 2026-11-24: two
	// passes over every 64 KB frame, 12% of a download's CPU, and its
	// 1.05-1.19x time against IPv4.)
	tcp := len(pkt) >= ipv4HeaderLen && pkt[0]>>4 == 4 && pkt[9] == protoTCP ||
		len(pkt) >= ipv6HeaderLen && pkt[0]>>4 == 6 && pkt[6] == protoTCP
	switch {
	case h.Flags&tun.VnetFlagNeedsCsum != 0 && tcp && s.rec == nil:
		s.csumValid = true // partial: the kernel's own, never to be checked
	case h.Flags&tun.VnetFlagNeedsCsum != 0:
		tun.CompleteChecksum(h, pkt) // for the recording, or UDP's check
	case h.Flags&tun.VnetFlagDataValid != 0 && tcp:
		s.csumValid = true
	}
	s.handlePacketNow(pkt)
	s.csumValid = false
}

// gsoMax is the TCP data a GSO frame carries at most (tcp.Config.GSOMax,
// on a device with GSO): a 64 KiB IPv4 packet's, less the largest IP and
// TCP headers.
const gsoMax = tun.MaxMTU - ipv4HeaderLen - tcp.HeaderMaxSize

// sendTSO sends a TSO segment (tcp.Segment.GSOSize, tcp.Config.GSOMax) as
// the segments it stands for (tcp.Segment.GSOPiece), each as sendSegment
// sends one: the packets on the wire, in a recording and in the counters
// are those TCP would have sent one MSS at a time. A piece that continues
// the frame the piece before it went into joins it at once (joinPiece):
// the pieces' headers are the same but for FIN, so queueSegment's checks
// would only say so again (copying and checking each piece was 12% of a
// download's CPU), and as many as the frame has room for join it at once.
func (s *Stack) sendTSO(id tcp.ID, seg *tcp.Segment) {
	frames := s.gso.on && s.rec == nil && (id.Local.Addr().Is4() || s.gso.v6)
	for i, k := 0, seg.GSOPieces(); i < k; {
		if frames && i > 0 {
			if n := s.joinPieces(&id, seg, i, k); n > 0 {
				i += n
				continue
			}
		}
		p := seg.GSOPiece(i)
		s.sendSegment(id, &p)
		i++
	}
}

// joinPieces adds the pieces of the TSO segment seg (k in all) from the
// piece i on to the frame being built, as many as it has room for, if they
// continue it: the frame is its connection's, open (its last segment
// full-sized, no FIN) and it ends where piece i starts. So was the piece before, with the same headers
// (sendTSO). As queueSegment's own join, each piece is counted as a
// segment and uses up an IPv4 ID. It returns how many pieces joined.
func (s *Stack) joinPieces(id *tcp.ID, seg *tcp.Segment, i, k int) int {
	g := &s.gso
	m := seg.GSOSize
	from := i * m
	seq := uint32(seg.Seq) + uint32(from)
	// The piece before, the frame's last, was full-sized (open): m is
	// the frame's gso_size.
	if !g.hdrOK || !g.open || g.n == 0 || seq != g.next || !sameID(id, &g.id) {
		return 0
	}
	n := min((len(g.buf)-g.n)/m, k-i)
	if n == 0 {
		return 0
	}
	data := seg.Payload[from:min(from+n*m, len(seg.Payload))]
	flags := seg.Flags
	if i+n < k {
		flags &^= tcp.FlagFIN // on the last piece alone (tcp.Segment.GSOPiece)
	}
	s.counters.SegmentsOut += uint64(n)
	g.joinN(data, seg.PayloadStable && g.vdev != nil, seq, byte(flags), i+n == k && seg.ChunkEnd, n, len(data)-(n-1)*m) // the chunk's end on the last piece alone (tcp.Segment.GSOPiece)
	if g.ihl == ipv4HeaderLen {
		s.ipID += uint16(n) // the IDs the kernel gives these segments' packets (fillIPv4)
	}
	if !g.coalesce {
		s.flushFrame()
	}
	return n
}

// queueSegment sends the TCP segment seg (which fits the MTU; over IPv4,
// or IPv6 when the device has TSO6, ihl the IP header's length) as part of
// a frame: the current one if it extends it, else a new one after the
// current is written. Only its headers are encoded apart; the payload
// joins the frame as a view of the send buffer when it is stable and the
// device writes frames in pieces, else copied (put), unless the segment is
// recorded: the recorder takes the whole packet, checksummed, and the
// frame a copy.
func (s *Stack) queueSegment(id tcp.ID, seg *tcp.Segment, ihl int) {
	g := &s.gso
	// A full-sized segment that continues the frame, with the same
	// fields: only its payload is added. Encoding its header to compare
	// it with the frame's (sameHeader) was 5% of a download's CPU, a
	// header that no packet used.
	if p := len(seg.Payload); g.hdrOK && g.open && g.n > 0 && uint32(seg.Seq) == g.next && sameID(&id, &g.id) &&
		p > 0 && p <= g.mss && g.n+p <= len(g.buf) && sameSeg(&g.hdr, seg) {
		s.counters.SegmentsOut++
		g.join(seg.Payload, seg.PayloadStable && g.vdev != nil, uint32(seg.Seq), byte(seg.Flags), seg.ChunkEnd)
		if ihl == ipv4HeaderLen {
			s.ipID++ // the ID the kernel gives this segment's packet (fillIPv4)
		}
		if !g.coalesce {
			s.flushFrame()
		}
		return
	}
	src, dst := id.Local.Addr(), id.Remote.Addr()
	var hdr, data []byte // the IP and TCP headers, and the payload
	view := false        // data may join the frame as a view (put)
	// fill: the IP header is still to be written, which only a segment that
	// starts a frame needs (the kernel's segmentation writes the others'
	// from the first's): 4.5% of a download's CPU was IPv4 headers, their
	// checksums included, that no frame used.
	fill := false
	if s.rec != nil {
		b := s.obuf[:ihl+seg.EncodedLen()]
		if _, err := seg.Encode(b[ihl:]); err != nil {
			s.counters.Drops.EncodeError++
			return
		}
		s.fillIP(b, src, dst)
		tcp.SetChecksum(src, dst, b[ihl:])
		s.recordOut(b)
		hl := ihl + int(b[ihl+12]>>4)*4
		hdr, data = b[:hl], b[hl:]
	} else {
		h := *seg
		h.Payload = nil
		b := s.obuf[:ihl+h.EncodedLen()]
		if _, err := h.Encode(b[ihl:]); err != nil {
			s.counters.Drops.EncodeError++
			return
		}
		hdr, data, fill = b, seg.Payload, true // the IP header: below
		view = seg.PayloadStable && s.gso.vdev != nil
	}
	s.counters.SegmentsOut++
	t := hdr[ihl:]
	thl, payload := len(t), len(data)
	seq := binary.BigEndian.Uint32(t[4:])
	flags := t[13]
	const fin, syn, rst = 0x01, 0x02, 0x04
	if g.n > 0 && g.open && id == g.id && seq == g.next && payload > 0 && payload <= g.mss &&
		len(hdr) == g.hl && g.n+payload <= len(g.buf) && s.sameHeader(t, thl) {
		if fill && ihl == ipv4HeaderLen {
			s.ipID++ // the ID the kernel gives this segment's packet (fillIPv4)
		}
		g.join(data, view, seq, flags, seg.ChunkEnd)
	} else if g.n > 0 && id == g.id && seq == g.next && payload == 0 && flags&(fin|syn|rst) == fin &&
		g.last > 0 && g.buf[tun.VnetHdrLen+g.ihl+13]&(fin|syn|rst) == 0 &&
		len(hdr) == g.hl && s.sameHeader(t, thl) {
		// A bare FIN right after the frame's last data segment, with the
		// same headers (a Close in the turn of the last Write): it rides on
		// that segment, data+FIN in one packet as TCP could have sent them
		// (Linux's tcp_send_fin onto an unsent skb; the kernel's
		// segmentation keeps FIN on a GSO frame's last packet only). TCP
		// still sent two segments, each with its RTO entry, which one ACK
		// of the FIN stops; one packet less to write, and for the peer to
		// take and answer.
		g.buf[tun.VnetHdrLen+g.ihl+13] |= fin
		g.next = seq + 1
		g.open = false
		s.offStats.FINsJoined++
	} else {
		s.flushFrame()
		if fill {
			s.fillIP(hdr, src, dst) // IPv4's ID; the lengths and checksums are flushFrame's
		}
		g.n = tun.VnetHdrLen + copy(g.buf[tun.VnetHdrLen:], hdr)
		g.put(data, view)
		g.first = seq
		g.segs, g.id, g.ihl, g.hl, g.mss, g.last = 1, id, ihl, len(hdr), payload, payload
		g.next = seq + uint32(payload)
		g.open = payload > 0 && flags&(fin|syn|rst) == 0 && !seg.ChunkEnd
		g.at, g.atOK, g.pend = g.pendAt, g.pend, false
		g.hdr, g.hdrOK = *seg, s.rec == nil
		g.hdr.Payload = nil
	}
	if !g.coalesce {
		s.flushFrame()
	}
}

// join adds the payload data of the segment at seq, with the TCP flags
// flags, to the frame it continues (its headers the same but for PSH and
// FIN, which the frame takes from its last segment). chunkEnd: the segment
// ends TCP's chunk (tcp.Segment.ChunkEnd), and nothing more joins the frame.
func (g *gsoState) join(data []byte, view bool, seq uint32, flags byte, chunkEnd bool) {
	g.joinN(data, view, seq, flags, chunkEnd, 1, len(data))
}

// joinN is join of n segments at once, contiguous, their payloads data
// (the last's last bytes, the others' g.mss each), flags and chunkEnd the
// last's.
func (g *gsoState) joinN(data []byte, view bool, seq uint32, flags byte, chunkEnd bool, n, last int) {
	const fin = 0x01
	g.put(data, view)
	g.segs += n
	g.last = last
	g.next = seq + uint32(len(data))
	g.buf[tun.VnetHdrLen+g.ihl+13] = flags // PSH and FIN: the last's
	g.open = last == g.mss && flags&fin == 0 && !chunkEnd
	if g.pend && !g.atOK { // a frame started on the frame before's reading
		g.at, g.atOK = g.pendAt, true
	}
	g.pend = false
}

// sameSeg reports whether b's TCP header is the same as a's but for the
// sequence number, PSH and FIN (and the checksum): what sameHeader says
// of their encodings, told from the fields.
func sameSeg(a, b *tcp.Segment) bool {
	const pshFin = tcp.FlagPSH | tcp.FlagFIN
	return a.SrcPort == b.SrcPort && a.DstPort == b.DstPort && a.Ack == b.Ack &&
		a.Flags&^pshFin == b.Flags&^pshFin && a.Window == b.Window && a.Urgent == b.Urgent &&
		sameOptions(&a.Options, &b.Options)
}

// sameOptions is a == b, field by field, the timestamps first: the
// compiler's comparison of the whole tcp.Options is a call, made for each
// segment a frame joins. TestSameSegComparesEveryField keeps it whole.
func sameOptions(a, b *tcp.Options) bool {
	return a.TSVal == b.TSVal && a.TSEcr == b.TSEcr && a.TS == b.TS && a.NSACK == b.NSACK &&
		a.SACK == b.SACK && a.MSS == b.MSS && a.HasMSS == b.HasMSS &&
		a.WindowScale == b.WindowScale && a.HasWS == b.HasWS && a.SACKPermitted == b.SACKPermitted
}

// sameID is a == b, field by field: the compiler's comparison of the
// whole tcp.ID is a call, made for each segment a frame joins.
func sameID(a, b *tcp.ID) bool {
	return a.Local.Port() == b.Local.Port() && a.Remote.Port() == b.Remote.Port() &&
		a.Local.Addr() == b.Local.Addr() && a.Remote.Addr() == b.Remote.Addr()
}

// minView is the shortest payload that put makes a view: a shorter one is
// copied, as cheap as a writev's further iovec, so that the frames of a
// request-response exchange (compare's ab and wrk answer a few hundred
// bytes) stay one buffer and one write, as they were.
const minView = 512

// put adds the payload p at the frame's end (n): as a piece of its own, a
// view, when view says p is stable, it is not short (minView) and the
// frame has room for two more pieces (the copy that may follow takes the
// last), else copied into buf. A piece that continues the last one's
// storage extends it instead.
func (g *gsoState) put(p []byte, view bool) {
	if len(p) == 0 {
		return
	}
	if view && len(p) >= minView && len(g.vec) < tun.MaxFramePieces-1 {
		if len(g.vec) == 0 {
			g.vec = append(g.vec, g.buf[:g.n])
		}
		g.piece(p)
		g.n += len(p)
		return
	}
	c := g.buf[g.n : g.n+copy(g.buf[g.n:], p)]
	if len(g.vec) > 0 {
		g.piece(c)
	}
	g.n += len(p)
}

// piece appends p to the frame's pieces, or extends the last piece with it
// when p starts where that one ends, in the same array.
func (g *gsoState) piece(p []byte) {
	if k := len(g.vec); k > 0 {
		last := g.vec[k-1]
		if l := len(last); cap(last)-l >= len(p) && &last[:l+1][l] == &p[0] {
			g.vec[k-1] = last[:l+len(p)]
			return
		}
	}
	g.vec = append(g.vec, p)
}

// flushBeforeAck writes the frame being built before seg goes to the
// endpoint of id, if the frame is that connection's, has views into its
// send buffer, and seg acknowledges any of its bytes: the endpoint would
// consume them, and the storage could be written again (a Write of the
// same turn) before the frame is written. No peer acknowledges what it has
// not received, so only a forged or blind ACK does it.
func (s *Stack) flushBeforeAck(id tcp.ID, seg *tcp.Segment) {
	g := &s.gso
	if len(g.vec) > 0 && seg.Flags&tcp.FlagACK != 0 && seqnum.Value(g.first).LessThan(seg.Ack) && id == g.id {
		s.flushFrame()
	}
}

// flushFrameOf writes the frame being built if it is the connection id's
// and has views, as the stack forgets the connection: nothing may then
// keep its send buffer from being reused (a pool of connections or of
// buffers would overwrite it), and nothing of the frame needs it after.
func (s *Stack) flushFrameOf(id tcp.ID) {
	if g := &s.gso; len(g.vec) > 0 && id == g.id {
		s.flushFrame()
	}
}

// fillIP fills in the IP header of a TCP segment at the front of pkt, as
// writeIP would: IPv4 or IPv6 as the addresses are.
func (s *Stack) fillIP(pkt []byte, src, dst netip.Addr) {
	if src.Is4() {
		s.fillIPv4(pkt, src, dst, protoTCP)
		return
	}
	putIPv6Header(pkt, src, dst, protoTCP, s.cfg.TTL)
}

// sameHeader reports whether the TCP header t (thl bytes) is the frame's
// first segment's but for the sequence number, PSH and FIN (which the
// segment may not have: see queueSegment) and the checksum.
//
// It compares words, not strings: five comparisons of short strings (each a
// call of the runtime's memequal) were 3% of a download's CPU, once per
// segment.
func (s *Stack) sameHeader(t []byte, thl int) bool {
	f := s.gso.buf[tun.VnetHdrLen+s.gso.ihl:]
	if len(t) < thl || len(f) < thl || thl < 20 {
		return false
	}
	be := binary.BigEndian
	if be.Uint32(t[0:]) != be.Uint32(f[0:]) || // ports
		be.Uint32(t[8:]) != be.Uint32(f[8:]) || // ACK
		t[12] != f[12] || // data offset
		t[13]&^0x09 != f[13]&^0x09 || // flags but PSH, FIN
		be.Uint16(t[14:]) != be.Uint16(f[14:]) { // window
		return false
	}
	i := 18 // the urgent pointer, then the options
	for ; i+8 <= thl; i += 8 {
		if be.Uint64(t[i:]) != be.Uint64(f[i:]) {
			return false
		}
	}
	for ; i+2 <= thl; i += 2 { // a TCP header's length is a multiple of 4
		if be.Uint16(t[i:]) != be.Uint16(f[i:]) {
			return false
		}
	}
	return true
}

// flushFrame writes the frame being built, if there is one: one segment
// with a partial checksum, or several with a GSO header (GSO_TCPV4 or
// GSO_TCPV6, gso_size the first segment's payload, which every one but the
// last has). Its IP header gets the frame's length (IPv4's total length and
// checksum, IPv6's payload length) and its TCP checksum field the sum of
// the pseudo-header of that length.
func (s *Stack) flushFrame() {
	g := &s.gso
	if g.n == 0 {
		return
	}
	frame := g.buf[:g.n]
	pkt := frame[tun.VnetHdrLen:]
	t := pkt[g.ihl:]
	v6 := g.ihl == ipv6HeaderLen
	typ := uint8(tun.GSOTCPv4)
	if v6 {
		typ = tun.GSOTCPv6
		binary.BigEndian.PutUint16(pkt[4:], uint16(len(t)))
		binary.BigEndian.PutUint16(t[16:], tun.PseudoSum6(g.id.Local.Addr().As16(), g.id.Remote.Addr().As16(), len(t)))
	} else {
		binary.BigEndian.PutUint16(pkt[2:], uint16(len(pkt)))
		pkt[10], pkt[11] = 0, 0
		binary.BigEndian.PutUint16(pkt[10:], ^checksum.Checksum(pkt[:ipv4HeaderLen], 0))
		binary.BigEndian.PutUint16(t[16:], tun.PseudoSum4(g.id.Local.Addr().As4(), g.id.Remote.Addr().As4(), len(t)))
	}
	h := tun.VnetHdr{Flags: tun.VnetFlagNeedsCsum, HdrLen: uint16(g.hl), CsumStart: uint16(g.ihl), CsumOffset: 16}
	if g.segs > 1 {
		h.GSOType, h.GSOSize = typ, uint16(g.mss)
	}
	h.Put(frame)
	segs := uint64(g.segs)
	g.n, g.segs = 0, 0
	var err error
	switch {
	case len(g.vec) > 0: // views: a writev (never with a writer, New)
		err = s.devWriteFrameVec(g.vec)
		clear(g.vec) // keeps no send buffer alive
		g.vec = g.vec[:0]
	case s.writing() && (segs == 1 || !s.wr.inline()):
		s.wr.queueFrame(&g.buf, len(frame), segs, v6) // writer.go: counted as written
	default:
		err = s.devWriteFrame(frame)
	}
	if err != nil {
		s.counters.DeviceErrors++
		s.counters.Drops.DeviceWrite += segs
		return
	}
	s.counters.PacketsOut += segs
	st := &s.offStats
	st.FramesOut++
	if v6 {
		st.FramesOut6++
	}
	if segs > 1 {
		st.GSOFramesOut++
		st.GSOSegmentsOut += segs
		if v6 {
			st.GSOFramesOut6++
		}
	}
	st.MaxFrameOut = max(st.MaxFrameOut, len(pkt))
}
