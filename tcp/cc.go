package tcp

// congestionControl is the sender's congestion window arithmetic: how much
// may be outstanding (cwnd) and where slow start ends (ssthresh). It sends
// nothing and decides nothing about loss: the sender and fast recovery
// (snd.go, recovery.go) and RACK-TLP (rack.go) decide what to send and
// resend, and when recovery begins and ends; they tell congestion control,
// which answers with cwnd.
//
// NewReno (RFC 5681, RFC 6582) is the default; CUBIC (RFC 9438, cubic.go)
// is Config.CUBIC. With SACK, fast recovery's cwnd is Proportional Rate
// Reduction's (RFC 6937, recovery.go prrStep: setCwnd on each ACK), and
// exitRecovery sets cwnd to ssthresh.
type congestionControl interface {
	cwnd() int     // bytes
	ssthresh() int // bytes
	// start sets the initial window, segs segments of smss (RFC 5681 3.1,
	// RFC 6928), once the handshake has fixed SMSS and SACK; again with one
	// segment when the connection is established after a lost SYN or SYN-ACK.
	start(smss, segs int, sack bool)
	// onAck: acked new bytes acknowledged outside recovery.
	onAck(acked int)
	// enterRecovery: a loss found by the third duplicate ACK or by RACK, with
	// flight bytes outstanding: fast recovery begins. It returns the window
	// ssthresh was reduced from (PRR's RecoverFS).
	enterRecovery(flight int, by lossSignal) (from int)
	// onRecoveryAck: an ACK in fast recovery that does not end it, a partial
	// ACK of acked bytes or a duplicate ACK (acked = 0).
	onRecoveryAck(acked int)
	// setCwnd: in fast recovery with SACK, Proportional Rate Reduction (RFC
	// 6937, recovery.go prrStep) sets cwnd on each ACK.
	setCwnd(w int)
	// exitRecovery: a full ACK ends fast recovery with flight bytes left.
	exitRecovery(flight int)
	// onRTO: the retransmission timer expired with flight bytes outstanding;
	// first is the first expiry of the episode.
	onRTO(flight int, first bool)
	// onProbeRepair: a tail-loss probe repaired a loss (RFC 8985 7.4.2).
	onProbeRepair()
	// restart: the sender was idle for idle rtos RTOs (rounded up);
	// restart is the restart window (RFC 5681 4.1's RW).
	restart(rtos int, restart int)
	// setSMSS: the send MSS fell after the handshake (a smaller path MTU,
	// RFC 1191, RFC 8201): the growth that follows counts the new SMSS (RFC
	// 5681 2: SMSS is the size of the largest segment the sender can
	// transmit), while cwnd and ssthresh keep their bytes.
	setSMSS(smss int)
}

// lossSignal says what found the loss that starts fast recovery.
type lossSignal int

const (
	lossDupAcks lossSignal = iota // the third duplicate ACK (RFC 5681 3.2)
	lossRACK                      // RACK's time-based detection (RFC 8985 6.2)
)

var _ congestionControl = (*newReno)(nil)

// newReno is RFC 5681's slow start and congestion avoidance with RFC 6582's
// fast recovery; with SACK, cwnd is ssthresh in recovery, without inflation,
// and pipe paces the resends (RFC 6675 5).
type newReno struct {
	smss    int
	wnd     int  // cwnd
	thresh  int  // ssthresh
	caAcked int  // bytes acknowledged in congestion avoidance, RFC 5681 3.1 (3)
	sack    bool // SACK is on: no inflation or deflation in recovery
}

func newNewReno() newReno {
	return newReno{smss: DefaultMSS, thresh: 1 << 30} // RFC 5681 3.1: ssthresh arbitrarily high
}

func (r *newReno) cwnd() int     { return r.wnd }
func (r *newReno) ssthresh() int { return r.thresh }

func (r *newReno) start(smss, segs int, sack bool) {
	r.smss, r.sack = smss, sack
	r.wnd = segs * smss // RFC 5681 3.1: IW
}

func (r *newReno) onAck(acked int) {
	if r.wnd < r.thresh {
		// Slow start as Linux's tcp_slow_start: cwnd grows by every byte the
		// ACK newly acknowledges, up to ssthresh; the rest of the ACK counts
		// toward congestion avoidance. RFC 5681 3.1 (2) grows it by at most
		// SMSS per ACK, and RFC 3465 2.3 (experimental) allows L = 2 SMSS
		// and says an implementation MUST NOT use more; both keep cwnd from
		// doubling each RTT when the receiver ACKs less often than every
		// second segment. Linux's receivers do: GRO/LRO merge a burst into
		// one segment and ACK it with one stretch ACK, and our own ACK
		// coalescing does the same. A stretch ACK of N bytes means N bytes
		// left the network, so the burst it releases is N plus the growth N,
		// the same 2N slow start sends per ACKed segment; the cap at ssthresh
		// bounds it after an RTO (where RFC 3465 2.3 wants L = 1 SMSS), and
		// cwnd validation (cwndLimited) keeps an application-limited sender
		// from growing it at all. (README, conformance deviations.)
		grow := min(acked, r.thresh-r.wnd)
		r.wnd += grow
		if acked -= grow; acked == 0 {
			return
		}
	}
	// RFC 5681 3.1 (3): congestion avoidance by bytes acked, one SMSS per
	// cwnd's worth; a stretch ACK of several cwnds grows it by several
	// (Linux's tcp_cong_avoid_ai).
	r.caAcked += acked
	if n := r.caAcked / r.wnd; n > 0 {
		r.caAcked -= n * r.wnd
		r.wnd += n * r.smss
	}
}

func (r *newReno) setSMSS(smss int) { r.smss = smss }

// halve is RFC 5681 (4): ssthresh = max(FlightSize / 2, 2*SMSS).
func (r *newReno) halve(flight int) { r.thresh = max(flight/2, 2*r.smss) }

func (r *newReno) enterRecovery(flight int, by lossSignal) int {
	r.halve(flight)  // RFC 5681 (4) / RFC 6582 3.2 (2)
	r.wnd = r.thresh // with SACK, RFC 6675 5 (4.2): cwnd = ssthresh; pipe, not inflation, paces the rest
	if by == lossDupAcks && !r.sack {
		r.wnd += 3 * r.smss // RFC 6582 3.2 (2)/RFC 5681 3.2 (3): inflate by the three segments that left
	}
	if by == lossRACK {
		r.caAcked = 0 // a recovery RACK starts restarts congestion avoidance's count; one the duplicate ACKs start keeps it
	}
	return flight
}

func (r *newReno) onRecoveryAck(acked int) {
	switch {
	case r.sack:
		// RFC 6675 5: cwnd stays at ssthresh; pipe paces the recovery.
	case acked == 0:
		r.wnd += r.smss // RFC 6582 3.2 (4): inflate by one SMSS per further duplicate ACK
	default:
		// RFC 6582 3.2 (3) partial acknowledgment: deflate cwnd by the amount
		// acknowledged and add back one SMSS if that amount was at least one SMSS.
		r.wnd -= acked
		if acked >= r.smss {
			r.wnd += r.smss
		}
		r.wnd = max(r.wnd, r.smss)
	}
}

func (r *newReno) setCwnd(w int) { r.wnd = w }

func (r *newReno) exitRecovery(flight int) {
	if r.sack {
		r.wnd = r.thresh // RFC 6937 3: on exiting recovery, cwnd = ssthresh (PRR)
		return
	}
	r.wnd = min(r.thresh, max(flight, r.smss)+r.smss) // RFC 6582 3.2 (3) option 1
}

func (r *newReno) onRTO(flight int, first bool) {
	if first {
		r.halve(flight) // RFC 5681 (4), once per timeout episode
	}
	r.wnd = r.smss // RFC 5681 3.1: LW = 1 SMSS
	r.caAcked = 0
}

func (r *newReno) onProbeRepair() {
	r.thresh = max(r.wnd/2, 2*r.smss) // RFC 8985 7.4.2: lower cwnd and ssthresh
	r.wnd = r.thresh
	r.caAcked = 0
}

// restart is RFC 5681 4.1's restart after idle as Linux's tcp_cwnd_restart:
// ssthresh keeps at least three quarters of cwnd, and cwnd is halved for
// each RTO of the idle time but the last, to no less than the restart
// window (the initial window, or cwnd if smaller).
func (r *newReno) restart(rtos int, restart int) {
	r.thresh = max(r.thresh, r.wnd/2+r.wnd/4)
	restart = min(restart, r.wnd)
	w := r.wnd
	for i := 1; i < rtos && w > restart; i++ {
		w >>= 1
	}
	r.wnd = max(w, restart)
	r.caAcked = 0
}
