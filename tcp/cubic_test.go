package tcp

import (
	"math"
	"testing"
	"time"
)

// TestCUBIC checks RFC 9438's arithmetic on the congestion control alone,
// on a clock the test sets: the reduction to beta = 0.7 (in whole segments,
// as Linux), W_max with fast convergence (4.7), K (4.2), the Reno-friendly
// region's growth of alpha_cubic = 3(1-beta)/(1+beta) segments per window
// (4.3), and the concave growth toward W_max (4.4).
func TestCUBIC(t *testing.T) {
	var now time.Duration
	srtt := 10 * time.Millisecond
	c := newCubic(func() time.Duration { return now }, func() time.Duration { return srtt })
	const mss = 1000
	c.start(mss, 100, true)
	if from := c.enterRecovery(0, lossRACK); from != 100*mss || c.ssthresh() != 70*mss || c.cwnd() != 70*mss {
		t.Fatalf("reduction from %d: ssthresh %d cwnd %d, want 100000 70000 70000", from, c.ssthresh(), c.cwnd())
	}
	if c.wMax != 100 {
		t.Fatalf("W_max %v, want 100", c.wMax)
	}
	c.exitRecovery(0)
	// The first ACK in congestion avoidance starts the epoch: K = cbrt((100 -
	// 70) / 0.4) seconds.
	c.onAck(mss)
	if want := math.Cbrt(30 / cubicC); math.Abs(c.k-want) > 1e-9 {
		t.Fatalf("K %v, want %v", c.k, want)
	}
	// A window's worth of ACKs within the first RTT: W_cubic is far below
	// W_est, which grows by alpha_cubic: cwnd by 0.53 segments.
	for range 69 {
		c.onAck(mss)
	}
	if got, want := float64(c.cwnd())/mss, 70+cubicAlpha; math.Abs(got-want) > 0.02 {
		t.Fatalf("after a window in the Reno-friendly region: cwnd %.3f segments, want %.3f", got, want)
	}
	// At K, W_cubic(K + RTT) is about W_max: cwnd grows by (target - cwnd)
	// / cwnd per segment acknowledged, over ~29 segments here.
	now = time.Duration(c.k * float64(time.Second))
	before := c.cwnd()
	c.onAck(mss)
	target := c.wCubic(c.k + srtt.Seconds())
	cw := float64(before) / mss
	if got, want := float64(c.cwnd()-before)/mss, (target-cw)/cw; math.Abs(got-want) > 0.002 {
		t.Fatalf("growth at K: %.4f segments, want %.4f (target %.2f)", got, want, target)
	}
	// Fast convergence: a loss below W_max lowers it to cwnd (1 + beta) / 2.
	c.wnd = 90 * mss
	c.enterRecovery(0, lossDupAcks)
	if want := 90 * (1 + cubicBeta) / 2; math.Abs(c.wMax-want) > 1e-9 || c.ssthresh() != 63*mss {
		t.Fatalf("second loss at 90: W_max %v ssthresh %d, want %v 63000", c.wMax, c.ssthresh(), want)
	}
	// An RTO: ssthresh reduced once, cwnd one segment, slow start after.
	c.exitRecovery(0)
	c.onRTO(0, true)
	if c.cwnd() != mss || c.ssthresh() != 44*mss {
		t.Fatalf("after the RTO: cwnd %d ssthresh %d, want 1000 44000", c.cwnd(), c.ssthresh())
	}
	c.onAck(mss)
	if c.cwnd() != 2*mss {
		t.Fatalf("slow start after the RTO: cwnd %d, want 2000", c.cwnd())
	}
}
