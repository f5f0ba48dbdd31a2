package tcp

import (
	"math"
	"time"
)

// CUBIC (RFC 9438), Config.CUBIC (Linux's default congestion control): NewReno's
// slow start, fast recovery without SACK, and window state (embedded), with
// CUBIC's multiplicative decrease (beta 0.7) and its window growth in
// congestion avoidance. With SACK, PRR (recovery.go prrStep) takes cwnd
// from the reduced flight down to ssthresh in recovery.
const (
	cubicC = 0.4 // RFC 9438 4.1: C, in segments per second cubed
	// cubicBeta is RFC 9438 4.6's beta_cubic, as Linux's 717/1024.
	cubicBetaNum, cubicBetaDen = 717, 1024
	cubicBeta                  = float64(cubicBetaNum) / cubicBetaDen
	// cubicAlpha is RFC 9438 4.3's alpha_cubic, the Reno-friendly
	// region's additive increase: 3 * (1 - beta) / (1 + beta).
	cubicAlpha = 3 * (1 - cubicBeta) / (1 + cubicBeta)
)

var _ congestionControl = (*cubic)(nil)

type cubic struct {
	newReno
	now  func() time.Duration // the loop's clock
	srtt func() time.Duration // the smoothed RTT, for W_cubic(t + RTT)

	// In segments, as RFC 9438 counts them.
	wMax  float64 // W_max: cwnd just before the last reduction
	prior float64 // cwnd_prior: cwnd before the last reduction
	wEst  float64 // W_est: the Reno-friendly estimate
	k     float64 // K, seconds: when W_cubic reaches W_max again
	// epoch is when the current congestion avoidance stage began, while
	// inEpoch (RFC 9438 4.2: t counts from it).
	epoch   time.Duration
	inEpoch bool
	frac    float64 // bytes of growth not yet added to cwnd
}

func newCubic(now, srtt func() time.Duration) *cubic {
	return &cubic{newReno: newNewReno(), now: now, srtt: srtt}
}

// wCubic is RFC 9438 4.2's W_cubic(t), in segments.
func (c *cubic) wCubic(t float64) float64 {
	d := t - c.k
	return cubicC*d*d*d + c.wMax
}

func (c *cubic) onAck(acked int) {
	if c.wnd < c.thresh {
		c.newReno.onAck(acked) // slow start, as NewReno (RFC 9438 4.10)
		return
	}
	smss := float64(c.smss)
	cw := float64(c.wnd) / smss
	now := c.now()
	if !c.inEpoch {
		// RFC 9438 4.2: a congestion avoidance stage begins.
		c.inEpoch, c.epoch = true, now
		c.wEst = cw
		if c.wMax <= cw {
			c.k, c.wMax = 0, cw
		} else {
			c.k = math.Cbrt((c.wMax - cw) / cubicC) // RFC 9438 4.2 (2), with cwnd_epoch = cwnd
		}
	}
	t := (now - c.epoch).Seconds()
	// RFC 9438 4.3: W_est grows by alpha_cubic segments per cwnd acknowledged
	// (by 1 once past cwnd_prior).
	alpha := cubicAlpha
	if c.wEst >= c.prior {
		alpha = 1
	}
	c.wEst += alpha * float64(acked) / smss / cw
	var grow float64 // bytes
	if c.wCubic(t) < c.wEst {
		grow = (c.wEst - cw) * smss // RFC 9438 4.3: the Reno-friendly region, cwnd = W_est
	} else {
		// RFC 9438 4.4, 4.5: toward target = W_cubic(t + RTT), within [cwnd,
		// 1.5 cwnd], by (target - cwnd) / cwnd per segment acknowledged.
		target := min(max(c.wCubic(t+c.srtt().Seconds()), cw), 1.5*cw)
		grow = (target - cw) / cw * float64(acked)
	}
	if grow <= 0 {
		return
	}
	c.frac += grow
	whole := int(c.frac)
	c.wnd += whole
	c.frac -= float64(whole)
}

// reduce is RFC 9438 4.6's response to congestion: W_max, with fast
// convergence (4.7), and ssthresh = cwnd * beta_cubic (as Linux, from cwnd,
// in whole segments; not below 2), for a new congestion avoidance stage.
// The window is cwnd, not the flight (RFC 9438 4.6 allows it where cwnd
// cannot grow while the flight is below it: cwndLimited).
func (c *cubic) reduce() {
	segs := c.wnd / c.smss
	cw := float64(c.wnd) / float64(c.smss)
	if cw < c.wMax {
		c.wMax = cw * (1 + cubicBeta) / 2 // RFC 9438 4.7: fast convergence
	} else {
		c.wMax = cw
	}
	c.prior = cw
	c.thresh = max(segs*cubicBetaNum/cubicBetaDen, 2) * c.smss
	c.inEpoch, c.frac, c.caAcked = false, 0, 0
}

func (c *cubic) enterRecovery(_ int, by lossSignal) int {
	from := c.wnd
	c.reduce()
	c.wnd = c.thresh // with SACK, PRR takes over (prrStep)
	if by == lossDupAcks && !c.sack {
		c.wnd += 3 * c.smss // RFC 6582 3.2 (2)/RFC 5681 3.2 (3): inflate by the three segments that left
	}
	return from
}

// setSMSS keeps CUBIC's windows in bytes: W_max, cwnd_prior and W_est count
// segments (RFC 9438), so they grow by the ratio of the old SMSS to the
// new, and the curve aims at the same bytes in flight as before (K, a
// time, stays).
func (c *cubic) setSMSS(smss int) {
	if smss <= 0 || smss == c.smss {
		return
	}
	f := float64(c.smss) / float64(smss)
	c.wMax, c.prior, c.wEst = c.wMax*f, c.prior*f, c.wEst*f
	c.newReno.setSMSS(smss)
}

func (c *cubic) onRTO(_ int, first bool) {
	if first {
		c.reduce() // RFC 9438 4.8, once per timeout episode
	}
	c.wnd = c.smss // RFC 5681 3.1: LW = 1 SMSS
	c.inEpoch = false
}

func (c *cubic) onProbeRepair() {
	c.reduce() // RFC 8985 7.4.2: lower cwnd and ssthresh, here by CUBIC's beta
	c.wnd = c.thresh
}
