package tcp

import (
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// TSO segments (Config.GSOMax). A bulk sender with nothing to recover sends
// its full-sized segments up to GSOMax bytes at a time as one txSeg, as
// Linux's tcp_write_xmit sends one skb of up to 64 KB: one transmission,
// one RTO entry started when it is sent and stopped when it is acknowledged,
// one RACK and ACK step, where MSS-sized segments took one each (44 per
// 64 KB of a 1448-byte MSS). The Output cuts it into the packets the MSS
// segments would have been (Segment.GSOSize, GSOPiece).
//
// Everything that needs a part of such a segment first cuts it into its MSS
// pieces (splitGSO, Linux's tcp_fragment): a SACK block, a duplicate ACK,
// the RTO, the tail-loss probe, RACK's reordering timer, a smaller path MTU.
// Each piece is what the MSS-sized segment at its place would have been: its
// sequence space, FIN and the retransmission's PSH (push) on the last piece
// alone, the send time, transmissions and RTO deadline of the whole, RACK's
// transmission order counted per piece (transmitAt gives the whole the last
// piece's). A cumulative ACK of a part trims the segment instead (gsoAcked),
// as Linux's tcp_tso_acked: no piece is made for what is freed at once.
// New TSO segments go only while nothing is SACKed, lost or being
// recovered (gsoOK), so all of fast recovery, RACK's loss detection and the
// RTO's go-back-N work on MSS-sized segments, as without TSO.

// gsoOK reports whether the next new data may go as a TSO segment: the
// Config allows two MSS or more, PSH goes on every segment (PushEvery: a
// TSO segment's pieces all carry it, as the MSS-sized segments would), and
// nothing is SACKed, in fast or RTO recovery, or backed off.
func (e *Endpoint) gsoOK() bool {
	return e.cfg.GSOMax >= 2*e.snd.smss && e.cfg.PushPolicy == PushEvery && !e.fr.active &&
		e.sb.segs == 0 && e.sb.bytes == 0 && e.snd.rtoRetries == 0 && !e.recovering()
}

// gsoRoom is how many full-sized segments of the room n (new data the
// windows let out) the next TSO segment takes: 0 when it may not go
// (gsoOK); as many as Config.GSOMax holds, but no more than fit before the
// send buffer's storage wraps, where its payload would be a copy (the
// Output keeps a stable payload where it is: Segment.PayloadStable),
// unless Config.GSOAcrossWrap.
func (e *Endpoint) gsoRoom(n int) int {
	if !e.gsoOK() {
		return 0
	}
	k := min(n, e.cfg.GSOMax) / e.snd.smss
	if e.cfg.GSOAcrossWrap {
		return k
	}
	off := int(e.snd.nxt - e.snd.bufSeq)
	for k >= 2 && !e.snd.buf.stable(off, k*e.snd.smss) {
		k-- // once per turn of the storage
	}
	return k
}

// Chunks: new data goes in chunks of at most half cwnd, as Linux's
// tcp_write_xmit cuts its skbs at tcp_cwnd_test's half cwnd ("ensure we have
// at least 2 GSO packets in flight") and at the GSO size: a TSO segment is at
// most a chunk, and the last segment of each carries Segment.ChunkEnd, where
// an Output that joins segments into GSO frames ends the frame. A receiver
// ACKs each frame it takes whole (Linux, its GRO too, ACKs per skb), so a
// flight of one frame drew one ACK, and when that was lost the sender had
// nothing until its loss probe (and, that or its ACK lost too, the RTO): with
// two frames or more a flight draws two ACKs or more.

// chunkMaxDefault is a chunk's most data without a GSOMax (one MSS per
// segment): Linux's GSO size, sk_gso_max_size less its headers' room
// (tcp_xmit_size_goal), so that the chunks, and the frames a stack cuts at
// their ends, are the same with TSO segments and without.
const chunkMaxDefault = linuxGSOMaxSize - 1 - linuxMaxTCPHdr

// startChunk opens a chunk if none is open: half cwnd (at least one
// segment), no more than the windows let go (usable) nor than a GSO frame
// takes. It returns the bytes the open chunk still takes, the most a TSO
// segment may carry now; with Config.DisableHalfCwndChunks there is no
// chunk, and it returns usable.
func (e *Endpoint) startChunk(usable int) int {
	if e.cfg.DisableHalfCwndChunks {
		return usable
	}
	if e.snd.chunkLeft == 0 {
		most := chunkMaxDefault
		if e.cfg.GSOMax >= 2*e.snd.smss {
			most = e.cfg.GSOMax
		}
		c := min(max(e.cc.cwnd()/2, e.snd.smss), usable, most) / e.snd.smss
		e.snd.chunkLeft = int32(max(c, 1))
	}
	return int(e.snd.chunkLeft) * e.snd.smss
}

// takeChunk counts k segments about to be sent into the open chunk and
// notes whether they end it (chunkEnd, which the transmission puts on its
// Segment).
func (e *Endpoint) takeChunk(k int) {
	if e.cfg.DisableHalfCwndChunks {
		return
	}
	e.snd.chunkLeft = max(e.snd.chunkLeft-int32(k), 0)
	e.snd.chunkEnd = e.snd.chunkLeft == 0
}

// gsoPieces is how many MSS-sized segments s stands for: 1 but for a TSO
// segment (gso set), whose data is cut at gso bytes from its end (its data
// was a multiple of gso when sent; a cumulative ACK may have trimmed its
// head).
func (s *txSeg) gsoPieces() int {
	if s.gso == 0 {
		return 1
	}
	m := int(s.gso)
	return (s.dataLen() + m - 1) / m
}

// gsoFirst is the data of the TSO segment s's first piece: gso bytes, or
// less where a cumulative ACK trimmed its head.
func (s *txSeg) gsoFirst() int {
	return s.dataLen() - (s.gsoPieces()-1)*int(s.gso)
}

// packetsOut is how many packets are in flight, unacknowledged (Linux's
// packets_out, tcpi_unacked): a TSO segment counts as its pieces.
func (snd *sender) packetsOut() int {
	n := len(snd.rtxq)
	if snd.gsoSegs > 0 {
		for _, s := range snd.rtxq {
			n += s.gsoPieces() - 1
		}
	}
	return n
}

// sendGSO sends n bytes of new data, a multiple of the MSS of at least two,
// as one TSO segment: what outputOne's loop would have sent as n/MSS
// full-sized segments of PushEvery, each with PSH, the last with the FIN if
// it empties the buffer and the FIN is queued (sendDataPSH). push (the
// retransmission's PSH, transmit) is the last piece's: burstEnd of the
// MSS-sized segments, whose burst is more than one segment long.
func (e *Endpoint) sendGSO(n int, burstEnd bool) {
	l := seqnum.Size(n)
	flags := FlagPSH
	last := n == e.snd.unsent()
	if last && e.snd.finQueued {
		l++
		flags |= FlagFIN
	}
	s := e.queueNew(l, flags)
	s.push = burstEnd || last
	s.gso = uint16(e.snd.smss)
	e.snd.gsoSegs++
	now := e.now()
	e.rcv.pingpong = e.rcv.gotData && now-e.rcv.dataAt < e.cfg.DelayedACK // as sendDataPSH
	if out := e.snd.inflight(); !e.snd.una.LessThan(e.snd.maxOutSeq) || out > e.snd.maxOut {
		e.snd.maxOut, e.snd.maxOutSeq = out, e.snd.nxt // as sendDataPSH: tcp_cwnd_validate
	}
	e.stopTimer(timerPersist)
	e.transmitAt(s, false, now)
}

// splitGSO cuts every TSO segment in the retransmission queue into its MSS
// pieces (Linux's tcp_fragment, for all of them at once): each piece is a
// txSeg of its own with the whole's state, its RTO entry started at the
// whole's deadline if that runs. The first piece keeps the whole's txSeg and
// entry.
func (e *Endpoint) splitGSO() {
	if e.snd.gsoSegs == 0 {
		return
	}
	q := make([]*txSeg, 0, e.snd.packetsOut()) // every piece
	for _, s := range e.snd.rtxq {
		q = append(q, s)
		if s.gso == 0 {
			continue
		}
		k, m := s.gsoPieces(), int(s.gso)
		whole := s.segState
		first := s.gsoFirst()
		s.gso = 0
		s.len, s.flags, s.push = seqnum.Size(first), whole.flags&^FlagFIN, false
		s.order = whole.order - uint64(k-1)
		seq := whole.seq.Add(seqnum.Size(first))
		for i := 1; i < k; i++ {
			p := e.newSeg(seq, seqnum.Size(m), whole.flags&^FlagFIN)
			p.segState = whole
			p.seq, p.len, p.flags, p.push, p.gso = seq, seqnum.Size(m), whole.flags&^FlagFIN, false, 0
			p.order = whole.order - uint64(k-1-i)
			if i == k-1 {
				p.flags, p.push = whole.flags, whole.push
				if whole.flags&FlagFIN != 0 {
					p.len++
				}
			}
			if s.entry.Pending() {
				if err := e.w.StartAt(&p.entry, whole.rtoAt); err != nil {
					e.timerFailed(err)
				}
			}
			q = append(q, p)
			seq = seq.Add(seqnum.Size(m))
		}
		if k == 1 { // a single piece left: it keeps the FIN and push
			s.len, s.flags, s.push = whole.len, whole.flags, whole.push
		}
	}
	e.snd.gsoSegs = 0
	e.snd.rtxq, e.snd.rtxqMem = q, q
}

// gsoAcked cuts off the TSO segment s (the head of the queue once the
// segments that ack covers whole are taken off) the MSS pieces that ack
// covers whole, if any, into p: a txSeg in no queue and with no timer
// running, which the ACK processing then treats as a segment it
// acknowledges (RTT sample, RACK), as it would the MSS-sized segments
// (Linux's tcp_tso_acked, tcp_clean_rtx_queue). It reports whether it did:
// not when ack ends within s's first piece (which trimHead trims, as any
// segment).
func (e *Endpoint) gsoAcked(s *txSeg, ack seqnum.Value, p *txSeg) bool {
	if s.gso == 0 || !s.seq.LessThan(ack) {
		return false
	}
	m := int(s.gso)
	first := s.gsoFirst()
	acked := int(ack - s.seq) // below s.len: s is not covered whole
	if acked < first {
		return false
	}
	cut := first + (acked-first)/m*m // the data of the pieces covered whole
	left := (s.dataLen() - cut) / m  // the pieces after them
	p.e, p.segState = e, s.segState
	p.gso, p.len, p.flags, p.push = 0, seqnum.Size(cut), s.flags&^FlagFIN, false
	p.order = s.order - uint64(left)
	s.seq, s.len = s.seq.Add(seqnum.Size(cut)), s.len-seqnum.Size(cut)
	if s.dataLen() == 0 { // the FIN alone is left
		s.gso = 0
		e.snd.gsoSegs--
	}
	return true
}
