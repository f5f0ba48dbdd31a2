package tcp

import "time"

// RFC 6298 (2.3) gains: alpha = 1/8, beta = 1/4; K = 4.
const (
	rttAlphaShift = 3
	rttBetaShift  = 2
	rttK          = 4
)

// rttEstimator is the RFC 6298 retransmission timer computation, with the
// exponential backoff of (5.5) kept apart so that a fresh sample undoes it.
type rttEstimator struct {
	g                   time.Duration // clock granularity G: the wheel's tick
	minRTO, maxRTO      time.Duration
	srtt, rttvar        time.Duration
	base                time.Duration // RTO before backoff
	backoff             int           // number of doublings since the last sample
	hasSample           bool
	samples             uint64
	lastSample, minSeen time.Duration
	// varFloor: Config.LinuxRTO: RTO = SRTT + max(K*RTTVAR, minRTO).
	varFloor bool
}

func newRTTEstimator(initial, minRTO, maxRTO, g time.Duration) rttEstimator {
	r := rttEstimator{g: g, minRTO: minRTO, maxRTO: maxRTO}
	r.base = r.clamp(initial) // RFC 6298 (2.1): RTO = 1 s until a sample is taken
	return r
}

func (r *rttEstimator) clamp(d time.Duration) time.Duration {
	if d < r.minRTO {
		d = r.minRTO // RFC 6298 (2.4), with a configurable minimum as Linux does
	}
	if d > r.maxRTO {
		d = r.maxRTO // RFC 6298 (2.5)
	}
	return d
}

// sample folds a round-trip time measurement in and ends any backoff.
func (r *rttEstimator) sample(m time.Duration) {
	if m <= 0 {
		m = r.g // a measurement below the clock's resolution
	}
	r.samples++
	r.lastSample = m
	if !r.hasSample || m < r.minSeen {
		r.minSeen = m
	}
	if !r.hasSample {
		r.srtt = m       // RFC 6298 (2.2): SRTT <- R
		r.rttvar = m / 2 // RFC 6298 (2.2): RTTVAR <- R/2
		r.hasSample = true
	} else {
		delta := r.srtt - m
		if delta < 0 {
			delta = -delta
		}
		r.rttvar += (delta - r.rttvar) >> rttBetaShift // RFC 6298 (2.3): RTTVAR <- (1 - beta) * RTTVAR + beta * |SRTT - R'|
		r.srtt += (m - r.srtt) >> rttAlphaShift        // RFC 6298 (2.3): SRTT <- (1 - alpha) * SRTT + alpha * R'
	}
	v := max(r.g, rttK*r.rttvar)
	if r.varFloor {
		v = max(v, r.minRTO) // Config.LinuxRTO: tcp_rtt_estimator's rttvar_us >= tcp_rto_min
	}
	r.base = r.clamp(r.srtt + v) // RFC 6298 (2.2)/(2.3): RTO <- SRTT + max (G, K*RTTVAR)
	r.backoff = 0                // a fresh sample undoes the backoff of (5.5)
}

// rto returns the current retransmission timeout, backoff included.
func (r *rttEstimator) rto() time.Duration {
	d := r.base
	for i := 0; i < r.backoff && d < r.maxRTO; i++ {
		d *= 2 // RFC 6298 (5.5): RTO <- RTO * 2
	}
	return min(d, r.maxRTO) // RFC 6298 (5.5): a maximum value MAY be placed on RTO
}

// backOff doubles the RTO after a retransmission timeout.
func (r *rttEstimator) backOff() {
	if r.rto() < r.maxRTO {
		r.backoff++ // RFC 6298 (5.5)
	}
}

// synFallback applies RFC 6298 (5.7): after the SYN (or SYN-ACK) was
// retransmitted and no sample was taken, data transfer starts with RTO = 3 s.
func (r *rttEstimator) synFallback() {
	if !r.hasSample {
		r.base = r.clamp(max(r.base, 3*time.Second)) // RFC 6298 (5.7)
		r.backoff = 0
	}
}
