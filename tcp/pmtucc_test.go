package tcp

import (
	"math"
	"testing"
	"time"
)

// ccSMSS is the SMSS congestion control counts its growth in.
func ccSMSS(t *testing.T, cc congestionControl) int {
	t.Helper()
	switch c := cc.(type) {
	case *newReno:
		return c.smss
	case *cubic:
		return c.smss
	}
	t.Fatalf("congestion control %T", cc)
	return 0
}

// TestPathMTUDropTellsCC: after a "fragmentation needed" lowers the send
// MSS, congestion control counts its growth in the new SMSS (RFC 5681 2),
// for NewReno and CUBIC; cwnd keeps its bytes.
func TestPathMTUDropTellsCC(t *testing.T) {
	for _, cubic := range []bool{false, true} {
		cfg := testConfig()
		cfg.CUBIC = cubic
		h := established(t, cfg)
		e := h.ep
		if got := ccSMSS(t, e.cc); got != e.snd.smss || got != 1460-12 {
			t.Fatalf("cubic %v: cc's SMSS %d, send MSS %d, want 1448 both", cubic, got, e.snd.smss)
		}
		e.Write(data(4 * 1448))
		for len(h.out.segs) > 0 {
			h.expect()
		}
		cwnd := e.cc.cwnd()
		if !e.ICMPTooBig(e.snd.una, 1280) {
			t.Fatalf("cubic %v: the quoted SND.UNA was not taken", cubic)
		}
		// 1280 - 20 (IP) - 20 (TCP) - 12 (timestamps).
		if got := ccSMSS(t, e.cc); got != e.snd.smss || got != 1228 {
			t.Fatalf("cubic %v: after the MTU drop cc's SMSS %d, send MSS %d, want 1228 both", cubic, got, e.snd.smss)
		}
		if e.cc.cwnd() != cwnd {
			t.Fatalf("cubic %v: cwnd %d after the MTU drop, want %d kept", cubic, e.cc.cwnd(), cwnd)
		}
	}
}

// TestSetSMSSGrowth: congestion avoidance after setSMSS grows one new SMSS
// per window (NewReno, RFC 5681 3.1); CUBIC's segment-counted W_max, cwnd_prior and W_est keep their bytes.
func TestSetSMSSGrowth(t *testing.T) {
	r := newNewReno()
	r.start(1448, 10, true)
	r.setSMSS(1000)
	r.thresh = r.wnd // congestion avoidance from here
	w := r.cwnd()
	for acked := 0; acked < w; acked += 1000 {
		r.onAck(1000)
	}
	if r.cwnd() != w+1000 {
		t.Fatalf("a window in congestion avoidance after setSMSS: cwnd %d, want %d", r.cwnd(), w+1000)
	}

	var now time.Duration
	c := newCubic(func() time.Duration { return now }, func() time.Duration { return 10 * time.Millisecond })
	c.start(1000, 100, true)
	c.enterRecovery(0, lossRACK)
	c.exitRecovery(0)
	c.onAck(1000) // starts the epoch: W_est
	wMax, prior, wEst := c.wMax*1000, c.prior*1000, c.wEst*1000
	c.setSMSS(500)
	if c.smss != 500 || math.Abs(c.wMax*500-wMax) > 1e-6 || math.Abs(c.prior*500-prior) > 1e-6 || math.Abs(c.wEst*500-wEst) > 1e-6 {
		t.Fatalf("CUBIC after setSMSS(500): smss %d, W_max %v, prior %v, W_est %v bytes; want 500, %v, %v, %v",
			c.smss, c.wMax*500, c.prior*500, c.wEst*500, wMax, prior, wEst)
	}
}
