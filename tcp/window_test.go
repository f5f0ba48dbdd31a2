package tcp

import (
	"testing"
	"time"
)

func TestWindow(t *testing.T) {
	t.Run("peer's window is scaled", func(t *testing.T) {
		h := established(t, testConfig())
		h.pwnd = 10 // << 7 = 1280 bytes
		h.ackUpTo(testISS + 1)
		h.ep.Write(data(3000))
		h.expect(lenIs(1280))
		h.expectNone()
		if i := h.ep.Info(); i.SndWnd != 1280 {
			t.Fatalf("SndWnd: got %d, want 1280", i.SndWnd)
		}
	})
	t.Run("our window is scaled, and opens after Read", func(t *testing.T) {
		cfg := testConfig()
		cfg.RecvBuffer = 8 << 10 // shift 0
		h := established(t, cfg)
		h.sendData(data(1448))
		h.sendData(data(1448))
		h.expect(ackIs(peerISS+1+2896), windowIs(8192-2896))
		for range 3 {
			h.sendData(data(1448))
		}
		h.expect(ackIs(peerISS + 1 + 4*1448)) // after the 4th segment
		h.advance(40 * time.Millisecond)
		h.expect(ackIs(peerISS+1+5*1448), windowIs(8192-5*1448))
		h.ep.Read(make([]byte, 8192))
		h.expect(flagsAre(FlagACK), windowIs(8192)) // window update
	})
	t.Run("zero window: data beyond it is not taken", func(t *testing.T) {
		cfg := testConfig()
		cfg.RecvBuffer = 2000
		h := established(t, cfg)
		h.sendData(data(2000))
		h.expectAt(40*time.Millisecond, ackIs(peerISS+2001), windowIs(0))
		h.sendData(data(10))
		h.expect(ackIs(peerISS+2001), windowIs(0))
		if h.ep.Readable() != 2000 {
			t.Fatalf("Readable: got %d, want 2000", h.ep.Readable())
		}
	})
	t.Run("Writable after the ACK frees the send buffer", func(t *testing.T) {
		cfg := testConfig()
		cfg.SendBuffer = 1000
		h := established(t, cfg)
		h.ep.Write(data(1000))
		h.expect(lenIs(1000))
		h.takeEvents()
		h.ackUpTo(testISS + 501)
		if ev := h.takeEvents(); ev&EventWritable == 0 || h.ep.Writable() != 500 {
			t.Fatalf("events %v writable %d, want Writable and 500", ev, h.ep.Writable())
		}
	})
	t.Run("too old an ACK gets a challenge ACK (RFC 5961 5.2)", func(t *testing.T) {
		h := established(t, testConfig())
		h.pack = testISS
		h.pack -= 1 << 24 // MAX.SND.WND is 65535<<7, about 1<<23
		h.send(h.seg(FlagACK, []byte("x")))
		h.expect(flagsAre(FlagACK), ackIs(peerISS+1))
		if h.ep.Readable() != 0 || h.ep.Info().ChallengeACKs != 1 {
			t.Fatal("the segment was not dropped with a challenge ACK")
		}
	})
	t.Run("challenge ACKs are rate limited", func(t *testing.T) {
		h := established(t, testConfig())
		for range 1500 {
			s := h.seg(FlagRST, nil)
			s.Seq += 5
			h.send(s)
		}
		if i := h.ep.Info(); i.ChallengeACKs != 1000 || i.DropsRateLimited != 500 {
			t.Fatalf("challenge ACKs %d, rate-limited %d; want 1000 500", i.ChallengeACKs, i.DropsRateLimited)
		}
		h.out.segs = nil
		h.advance(time.Second)
		s := h.seg(FlagRST, nil)
		s.Seq += 5
		h.send(s)
		h.expect(flagsAre(FlagACK))
	})
}
