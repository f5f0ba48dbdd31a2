package tcp

import (
	"time"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// PushPolicy says which data segments carry PSH (Config.PushPolicy). RFC
// 1122 4.2.2.2 requires PSH on the last buffered segment and leaves the
// others to the implementation.
type PushPolicy uint8

const (
	// PushEvery, the default: PSH on every new data segment but limited
	// transmit's and those sent in fast recovery (the receiver, holding
	// out-of-order data, ACKs those at once); a retransmission carries it
	// only where PushLinux would (sendDataPSH says why: a Linux receiver
	// ACKs a full-sized PSH segment as soon as its reader took the data).
	PushEvery PushPolicy = iota
	// PushLinux marks as Linux does (tcp_sendmsg_locked, tcp_push,
	// tcp_write_xmit): PSH on the segment that ends a Write (unless another
	// Write appended to it before it was sent), on the one that ends a
	// size goal's worth of data after more than half the peer's largest
	// window went without PSH (forced_push), and on the last segment of each
	// TSO chunk of two or more segments (the chunk is the smaller of
	// tcp_tso_autosize's pacing-rate share, half cwnd and what the windows
	// let go); a retransmission carries PSH only where a Write's end or a
	// forced push put it. The write's end and forced_push are Linux's code
	// (tcp_mark_push); the chunk rule is Linux's output as packetdrill's
	// scripts assert it and the kernel here sends it (https_client,
	// shutdown-rdwr-send-queue-ack-close, slow-start-after-win-update,
	// prr-ss-30pkt-lost1_4), not a line of tcp_write_xmit we traced: there,
	// tso_fragment leaves PSH on the second part only.
	PushLinux
)

// Linux's sizes for PushLinux (tcp_xmit_size_goal, tcp_tso_autosize).
const (
	linuxGSOMaxSize  = 65536 // sk_gso_max_size (GSO_LEGACY_MAX_SIZE)
	linuxMaxTCPHdr   = 320   // MAX_TCP_HEADER, about
	linuxMinTSOSegs  = 2     // tcp_min_tso_segs
	linuxPacingShift = 10    // sk_pacing_shift: a chunk is about 1 ms of the pacing rate
	linuxTCPMSSDef   = 536   // TCP_MSS_DEFAULT (tcp_bound_to_half_wnd)
)

// pushState is PushLinux's bookkeeping on the send side.
type pushState struct {
	// marks are the sequence numbers, after SND.NXT, at which Linux's write
	// queue has an skb that ends with PSH: the end of a Write or a forced
	// push. A data segment that covers one carries PSH.
	marks  []seqnum.Value
	pushed seqnum.Value // tp->pushed_seq: the end of the last mark
	init   bool
	// The TSO chunk being sent: its size in segments and the segments left.
	chunk, left int
}

// pushWrite records the PSH marks of a Write that appended [start, end) to
// the send buffer (PushLinux).
func (e *Endpoint) pushWrite(start, end seqnum.Value) {
	p := &e.snd.push
	if !p.init {
		p.pushed, p.init = start, true // tp->pushed_seq = tp->write_seq at the start
	}
	if k := len(p.marks); k > 0 && p.marks[k-1] == start && e.snd.nxt.LessThan(start) {
		// The previous Write's end is not sent yet: Linux appends to that
		// skb and takes its PSH off ("if (!copied) ... &= ~TCPHDR_PSH").
		p.marks = p.marks[:k-1]
	}
	half := seqnum.Size(e.snd.maxWnd / 2)
	goal := e.pushSizeGoal()
	for b := start.Add(goal); b.LessThan(end); b = b.Add(goal) {
		if p.pushed.Add(half).LessThan(b) { // forced_push: write_seq after pushed_seq + max_window/2
			p.marks = append(p.marks, b)
			p.pushed = b
		}
	}
	p.marks = append(p.marks, end) // tcp_push: tcp_mark_push on the tail skb
	p.pushed = end
}

// pushSizeGoal is Linux's tcp_xmit_size_goal: the payload of the skbs a
// write is cut into, at most half the peer's largest window (tcp_bound_to_half_wnd),
// a multiple of the MSS.
func (e *Endpoint) pushSizeGoal() seqnum.Size {
	goal := linuxGSOMaxSize - 1 - linuxMaxTCPHdr
	if w := int(e.snd.maxWnd); w > 0 {
		cutoff := w
		if w > linuxTCPMSSDef {
			cutoff = w / 2
		}
		goal = min(goal, cutoff)
	}
	return seqnum.Size(max(goal/e.snd.smss, 1) * e.snd.smss)
}

// pushMarked reports whether the n bytes at SND.NXT, about to be sent as a
// new segment, cover a PSH mark, and drops the marks it passes.
func (e *Endpoint) pushMarked(n int) bool {
	p := &e.snd.push
	end := e.snd.nxt.Add(seqnum.Size(n))
	hit, i := false, 0
	for ; i < len(p.marks) && p.marks[i].LessThanEq(end); i++ {
		if e.snd.nxt.LessThan(p.marks[i]) {
			hit = true
		}
	}
	p.marks = p.marks[:copy(p.marks, p.marks[i:])]
	if hit {
		p.left = 0 // an skb ends here: the next segment starts a chunk
	}
	return hit
}

// pushChunkEnd counts the segment about to be sent into the current TSO
// chunk (one is started when none is open) and reports whether it is the
// last of a chunk of two or more: Linux's tcp_write_xmit cuts chunks of
// min(tcp_tso_segs, half cwnd, cwnd - in flight) segments, bounded by the
// receive window (tcp_cwnd_test, tcp_mss_split_point). usable is what the
// windows let go now.
func (e *Endpoint) pushChunkEnd(usable int) bool {
	p := &e.snd.push
	if p.left == 0 {
		quota := min(max(e.cc.cwnd()/2, e.snd.smss), usable)
		p.chunk = max(1, min(e.pushTSOSegs(), quota/e.snd.smss))
		p.left = p.chunk
	}
	p.left--
	return p.chunk >= 2 && p.left == 0
}

// pushTSOSegs is Linux's tcp_tso_autosize: about 1 ms of the pacing rate
// (tcp_update_pacing_rate: cwnd/SRTT, doubled in slow start below half
// ssthresh, 1.2 times otherwise), at least tcp_min_tso_segs (Config.
// TSOMinSegs), at most 64 KB.
func (e *Endpoint) pushTSOSegs() int {
	minSegs := e.cfg.TSOMinSegs
	if minSegs <= 0 {
		minSegs = linuxMinTSOSegs
	}
	bytes := linuxGSOMaxSize
	if srtt := e.rtt.srtt; srtt > 0 {
		cwnd := max(e.cc.cwnd(), e.snd.inflight())
		ratio := 1.2
		if cwnd < e.cc.ssthresh()/2 {
			ratio = 2
		}
		rate := float64(cwnd) * float64(time.Second) / float64(srtt) * ratio // bytes per second
		bytes = int(min(float64(bytes), rate/(1<<linuxPacingShift)))
	}
	return max(bytes/e.snd.smss, minSegs)
}
