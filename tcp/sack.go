package tcp

import (
	"sort"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// scoreboard is the SACK scoreboard (RFC 2018, RFC 6675 3): what the peer's
// SACK blocks cover above SND.UNA. The marks are the txSeg.sacked flags of
// the retransmission queue; the scoreboard keeps their sums and the highest
// SACKed sequence number.
type scoreboard struct {
	high  seqnum.Value // highest SACKed sequence number + 1 (RFC 6675 HighSACK + 1)
	bytes int          // bytes SACKed above SND.UNA
	segs  int          // segments SACKed above SND.UNA (RACK.segs_sacked)
	// reordering is the largest reordering seen, in segments (Linux's
	// tp->reordering, TCP_INFO's tcpi_reordering): how far below the highest
	// SACKed byte a segment sent once was delivered. At least dupThresh. It
	// is reported, not used: the duplicate-ACK threshold stays dupThresh.
	reordering int
}

// reordered records that a segment sent once, starting at low, was
// delivered (SACKed or cumulatively acknowledged) while data up to fack was
// SACKed (Linux's tcp_check_sack_reordering).
func (b *scoreboard) reordered(low, fack seqnum.Value, mss int) {
	if !low.LessThan(fack) || mss <= 0 {
		return
	}
	if n := (int(fack-low) + mss - 1) / mss; n > b.reordering {
		b.reordering = min(n, 300) // Linux's tcp_max_reordering
	}
}

// mark records s as SACKed (a SACK block covers it). It reports whether it
// was not already.
func (b *scoreboard) mark(s *txSeg) bool {
	if s.sacked {
		return false
	}
	s.sacked, s.lost = true, false
	b.bytes += int(s.len)
	b.segs++
	return true
}

// acked forgets s, now cumulatively acknowledged. It reports whether s was
// SACKed.
func (b *scoreboard) acked(s *txSeg) bool {
	if !s.sacked {
		return false
	}
	b.bytes -= int(s.len)
	b.segs--
	return true
}

// trimmed forgets d bytes cut off the front of s by a cumulative ACK.
func (b *scoreboard) trimmed(s *txSeg, d seqnum.Size) {
	if s.sacked {
		b.bytes -= int(d)
	}
}

// validBlock reports whether blk lies in (SND.UNA, SND.MAX] and is not
// inverted; RFC 2018 allows no other, so only bogus or D-SACK blocks fail.
func validBlock(blk SACKBlock, una, sndMax seqnum.Value) bool {
	return una.LessThan(blk.End) && !sndMax.LessThan(blk.End) && blk.Start.LessThan(blk.End) && !blk.Start.LessThan(una)
}

// raise moves HighSACK up to a block's end. With nothing SACKed, HighSACK
// is stale (zero at first, which sequence-number order may put above any
// block) and the block's end replaces it.
func (b *scoreboard) raise(end, una seqnum.Value) {
	if b.segs == 0 || b.high.LessThan(end) || b.high.LessThan(una) {
		b.high = end
	}
}

// updateSACK marks the queued segments the peer's SACK blocks cover (RFC 2018,
// the scoreboard of RFC 6675) and stops their timers. It reports whether any
// segment was newly SACKed.
func (e *Endpoint) updateSACK(blocks []SACKBlock) bool {
	e.splitGSO() // the blocks mark MSS-sized segments (gso.go)
	news := false
	// low: the lowest segment sent once newly SACKed below HighSACK as it
	// stood before this ACK (Linux's state->reord).
	low, reord := e.snd.max, false
	high := e.snd.una
	if e.sb.segs > 0 {
		high = e.sb.high
	}
	for _, b := range blocks {
		if !validBlock(b, e.snd.una, e.snd.max) {
			continue
		}
		e.sb.raise(b.End, e.snd.una)
		q := e.snd.rtxq
		for i := sort.Search(len(q), func(i int) bool { return b.Start.LessThanEq(q[i].seq) }); i < len(q) && !b.End.LessThan(q[i].end()); i++ {
			if e.sb.mark(q[i]) {
				if q[i].xmits == 1 && q[i].seq.LessThan(high) && q[i].seq.LessThan(low) {
					low, reord = q[i].seq, true
				}
				e.w.Stop(&q[i].entry) // STOP_TIMER: SACKed
				e.rackDelivered(q[i]) // RFC 8985 6.2 steps 2 and 3
				news = true
			}
		}
	}
	if reord {
		e.sb.reordered(low, e.sb.high, e.snd.smss)
	}
	if news {
		e.ensureRTOTimer()
	}
	return news
}
