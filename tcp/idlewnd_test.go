package tcp

import (
	"testing"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// TestSlowStartAfterWindowUpdate: with Config.SlowStartAfterIdle, data that
// waited behind a zero window for more than an RTO restarts slow start when
// the window opens (Linux's tcp_ack_update_window checks the idle time
// there too: packetdrill's slow-start-after-win-update); without it, the
// whole cwnd goes. Zero-window probes carry no data and do not count as
// sending.
func TestSlowStartAfterWindowUpdate(t *testing.T) {
	for _, on := range []bool{true, false} {
		h, mss := idleTestStart(t, on)
		h.pwnd = 0
		h.ackUpTo(testISS + 1 + seqnum.Value(10*mss))
		h.ep.Write(data(30 * mss))
		h.expectNone()
		rto := h.ep.Info().RTO
		h.advance(rto*5/2 + ms)
		for len(h.out.segs) > 0 {
			h.expect(lenIs(0)) // zero-window probes
		}
		if got := h.ep.Info().Cwnd; got != 20*mss {
			t.Fatalf("cwnd behind the zero window: got %d, want %d", got, 20*mss)
		}
		h.pwnd = 65535
		h.ackUpTo(testISS + 1 + seqnum.Value(10*mss))
		want := 20
		if on {
			want = 10 // 2.5 RTOs idle: halved, to the initial window
		}
		for i := range want {
			h.expect(seqIs(testISS+1+seqnum.Value((10+i)*mss)), lenIs(mss))
		}
		h.expectNone()
		if got := h.ep.Info().Cwnd; got != want*mss {
			t.Fatalf("SlowStartAfterIdle %v: cwnd %d, want %d", on, got, want*mss)
		}
	}
}
