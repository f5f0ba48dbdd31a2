package tcp

import (
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
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
	t.Run("a Read sends an update only when the window doubles, from half the buffer or less (Linux's tcp_cleanup_rbuf)", func(t *testing.T) {
		cfg := testConfig()
		cfg.RecvBuffer = 8 << 10 // shift 0
		h := established(t, cfg)
		for range 5 {
			h.sendData(data(1448))
		}
		h.expect(ackIs(peerISS + 1 + 2*1448))
		h.expect(ackIs(peerISS + 1 + 4*1448))
		h.expectAt(40*time.Millisecond, ackIs(peerISS+1+5*1448), windowIs(952))
		buf := make([]byte, 2000)
		h.ep.Read(buf) // 2952 >= 2 x 952
		h.expect(flagsAre(FlagACK), ackIs(peerISS+1+5*1448), windowIs(2952))
		h.expect(flagsAre(FlagACK), ackIs(peerISS+1+5*1448), windowIs(2952)) // it reopens a window below one MSS: twice (sendWindowUpdate)
		h.ep.Read(buf)                                                       // 4952 < 2 x 2952
		h.expectNone()
		h.ep.Read(buf) // 6952 >= 2 x 2952
		h.expect(flagsAre(FlagACK), ackIs(peerISS+1+5*1448), windowIs(6952))
		h.ep.Read(buf) // the peer knows 6952, more than half of 8192: no update
		h.expectNone()
		if h.ep.Readable() != 0 {
			t.Fatalf("Readable: got %d, want 0", h.ep.Readable())
		}
		// The peer fills what it knows: 1240 bytes free, too small a step to
		// advertise (RFC 9293 3.8.6.2.2): a zero window. The next Read opens it.
		for range 4 {
			h.sendData(data(1448))
		}
		h.sendData(data(1160))
		h.expect(ackIs(peerISS + 1 + 6*1448)) // at once: the first beyond the small window's edge (nearlyClosed)
		h.expect(ackIs(peerISS + 1 + 8*1448))
		h.expectAt(h.now()+40*time.Millisecond, ackIs(peerISS+1+9*1448+1160), windowIs(0))
		h.ep.Read(buf)
		h.expect(flagsAre(FlagACK), windowIs(1240+2000))
		h.expect(flagsAre(FlagACK), windowIs(1240+2000)) // a zero window reopened: twice
	})
	t.Run("a reader that keeps up sends no window updates", func(t *testing.T) {
		h := established(t, testConfig()) // the default buffer
		for range 20 {
			h.sendData(data(1448))
			h.ep.Read(make([]byte, 1448))
		}
		for range 10 { // the ACKs of every second segment, nothing else
			h.expect(flagsAre(FlagACK))
		}
		h.expectNone()
	})
	t.Run("zero window: data beyond it is not taken", func(t *testing.T) {
		h := zeroWindow(t)
		h.sendData(data(10))
		h.expect(ackIs(peerISS+2001), windowIs(0))
		if h.ep.Readable() != 2000 {
			t.Fatalf("Readable: got %d, want 2000", h.ep.Readable())
		}
	})
	t.Run("a probe of a window below one MSS is ACKed at once, after a lost update", func(t *testing.T) {
		cfg := testConfig()
		cfg.RecvBuffer = 3000 // shift 0
		h := established(t, cfg)
		h.sendData(data(1448))
		h.sendData(data(1448))
		h.expect(ackIs(peerISS+1+2896), windowIs(104)) // below one MSS: the peer stops
		if n, _ := h.ep.Read(make([]byte, 4096)); n != 2896 {
			t.Fatalf("Read: got %d, want 2896", n)
		}
		h.expect(flagsAre(FlagACK), ackIs(peerISS+1+2896), windowIs(3000)) // the update, lost
		h.expect(flagsAre(FlagACK), ackIs(peerISS+1+2896), windowIs(3000)) // and its copy, lost too
		h.advance(200 * time.Millisecond)                                  // the peer's persist timer
		h.sendData(data(104))                                              // its probe fills the window it knows
		h.expect(ackIs(peerISS+1+3000), windowIs(2896))                    // at once, not after 40 ms
		h.expectNone()
		h.ep.Read(make([]byte, 4096))
		h.expectNone()         // 104 bytes: too small a step for an update (RFC 9293 3.8.6.2.2)
		h.sendData(data(1448)) // the first segment beyond the small window's edge
		h.expect(ackIs(peerISS+1+3000+1448), windowIs(1448))
		h.sendData(data(100)) // the peer has seen a larger window: delayed ACKs again
		at := h.now() + 40*time.Millisecond
		h.expectAt(at, ackIs(peerISS+1+3000+1548), windowIs(1348))
	})
	t.Run("a probe beyond a zero window whose update was lost is ACKed at once", func(t *testing.T) {
		h := zeroWindow(t)
		h.ep.Read(make([]byte, 2000))
		h.expect(flagsAre(FlagACK), ackIs(peerISS+2001), windowIs(2000)) // lost
		h.expect(flagsAre(FlagACK), ackIs(peerISS+2001), windowIs(2000)) // its copy, lost too
		h.advance(200 * time.Millisecond)
		h.sendData(data(1)) // a one-byte probe (BSD, gVisor); Linux's is an old byte, ACKed at once anyway
		h.expect(ackIs(peerISS+2002), windowIs(1999))
		h.expectNone()
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

// zeroWindow returns a harness whose endpoint, with a 2000-byte receive
// buffer, took 2000 bytes and advertised a zero window in their delayed ACK.
func zeroWindow(t *testing.T) *harness {
	t.Helper()
	cfg := testConfig()
	cfg.RecvBuffer = 2000
	h := established(t, cfg)
	h.sendData(data(2000))
	h.expectAt(40*time.Millisecond, ackIs(peerISS+2001), windowIs(0))
	return h
}

// A full-sized data segment sent while out-of-order data waits has no room
// for SACK blocks: it carries none rather than outgrow the MSS (a
// retransmission that did was dropped as too big every time, and a lossy
// connection stalled for good).
func TestSACKBlocksFitTheMSS(t *testing.T) {
	h := established(t, noTLPConfig())
	h.ep.Write(data(1448))
	h.expect(lenIs(1448), sackIs())
	// The peer's data with a hole: the endpoint holds it out of order.
	h.pseq += 100
	h.sendData(data(50))
	h.expect(flagsAre(FlagACK), lenIs(0), sackIs(SACKBlock{Start: peerISS + 101, End: peerISS + 151}))
	// The RTO resends the full segment: 1448 bytes and the timestamps fill
	// the MSS of 1460, so no SACK block rides along.
	for range 100 {
		if len(h.out.segs) > 0 {
			break
		}
		d, _ := h.w.NextDeadline()
		h.advanceTo(d)
	}
	seg := h.expect(lenIs(1448), sackIs())
	if n := seg.EncodedLen(); n > 1460+HeaderMinSize {
		t.Fatalf("retransmission of %d bytes with options: beyond MSS 1460 + header", n)
	}
	// A small segment has room: it carries the block.
	h.ep.Write(data(100))
	h.ackUpTo(testISS + 1 + 1448)
	h.expect(lenIs(100), sackIs(SACKBlock{Start: peerISS + 101, End: peerISS + 151}))
}

// The download from the kernel at 5% loss each way (tcpwheel compare): the
// peer fills the window above a hole, the retransmission fills the hole, and
// RCV.NXT reaches the right edge: that ACK, sent at once (RFC 5681 4.2: it
// fills a gap), carries a zero window, and the peer stops. Only our window
// update restarts it; were the update lost, the peer would wait for its
// persist timeout (RFC 9293 3.8.6.1), 200 ms or more on Linux, to probe. So
// the update that reopens a window below one MSS goes twice, back to back
// (sendWindowUpdate); later updates, and data beyond the reopened window's
// old edge, are as before.
func TestWindowReopenedAfterHoleFillGoesTwice(t *testing.T) {
	cfg := testConfig()
	cfg.RecvBuffer = 4000 // shift 0
	h := established(t, cfg)
	// The first 1000 bytes are lost; the next 3000 arrive out of order,
	// each ACKed at once with its SACK block (RFC 5681 4.2, RFC 2018 4).
	h.pseq += 1000
	for i := 1; i <= 3; i++ {
		h.sendData(data(1000))
		h.expect(flagsAre(FlagACK), ackIs(peerISS+1), windowIs(4000),
			sackIs(SACKBlock{Start: peerISS + 1001, End: (peerISS + 1).Add(seqnum.Size(1000 * (i + 1)))}))
	}
	// The retransmission fills the hole: ACKed at once, the window closed.
	h.pseq = peerISS + 1
	h.sendData(data(1000))
	h.expect(flagsAre(FlagACK), ackIs(peerISS+4001), windowIs(0), sackIs())
	h.expectNone()
	// The application reads: the update reopens the window, twice.
	if n, _ := h.ep.Read(make([]byte, 4000)); n != 4000 {
		t.Fatalf("Read: got %d, want 4000", n)
	}
	h.pseq = peerISS + 4001
	h.expect(flagsAre(FlagACK), seqIs(testISS+1), ackIs(peerISS+4001), windowIs(4000), lenIs(0), sackIs())
	h.expect(flagsAre(FlagACK), seqIs(testISS+1), ackIs(peerISS+4001), windowIs(4000), lenIs(0), sackIs())
	h.expectNone()
	if c := h.ep.Info().WindowUpdateCopies; c != 1 {
		t.Fatalf("WindowUpdateCopies: got %d, want 1", c)
	}
	// The peer sends into the reopened window: its first segment is ACKed
	// at once (receiver.nearlyClosed), the next waits for a delayed ACK; a
	// further update, from a window the peer knows as at least one MSS,
	// goes once, and carries that ACK.
	h.sendData(data(1000))
	h.expect(flagsAre(FlagACK), ackIs(peerISS+5001), windowIs(3000))
	h.sendData(data(1000))
	h.expectNone()
	h.ep.Read(make([]byte, 2000))
	h.expect(flagsAre(FlagACK), ackIs(peerISS+6001), windowIs(4000))
	h.expectNothingUntil(time.Second)
	if c := h.ep.Info().WindowUpdateCopies; c != 1 {
		t.Fatalf("WindowUpdateCopies: got %d, want 1", c)
	}
}

// The other way a window-limited peer stops: the out-of-order data above a
// hole reaches the right edge, and the peer, with nothing left of the
// window, waits for the hole's retransmission to be ACKed or for an update
// (its lost retransmission is then found only by its RTO: no new data, no
// new SACK). A Read of the in-order data below the hole moves the edge:
// that update goes twice, with the SACK blocks (RFC 2018 4).
func TestWindowUpdateWithTheWindowFilledAboveAHoleGoesTwice(t *testing.T) {
	cfg := testConfig()
	cfg.RecvBuffer = 8000 // shift 0; updates in steps of 1460 (min(RecvBuffer/2, MSS))
	h := established(t, cfg)
	h.sendData(data(1000))
	h.sendData(data(1000))
	h.expect(flagsAre(FlagACK), ackIs(peerISS+2001), windowIs(6000)) // every second segment
	// The next 1000 bytes are lost; the 5000 after them fill the window.
	h.pseq += 1000
	for i := 1; i <= 5; i++ {
		h.sendData(data(1000))
		h.expect(flagsAre(FlagACK), ackIs(peerISS+2001), windowIs(6000),
			sackIs(SACKBlock{Start: peerISS + 3001, End: (peerISS + 3001).Add(seqnum.Size(1000 * i))}))
	}
	h.expectNone()
	if n, _ := h.ep.Read(make([]byte, 8000)); n != 2000 {
		t.Fatalf("Read: got %d, want 2000", n)
	}
	hole := sackIs(SACKBlock{Start: peerISS + 3001, End: peerISS + 8001})
	h.expect(flagsAre(FlagACK), ackIs(peerISS+2001), windowIs(8000), hole)
	h.expect(flagsAre(FlagACK), ackIs(peerISS+2001), windowIs(8000), hole)
	h.expectNone()
	if c := h.ep.Info().WindowUpdateCopies; c != 1 {
		t.Fatalf("WindowUpdateCopies: got %d, want 1", c)
	}
	// The retransmission fills the hole: ACKed at once (RFC 5681 4.2).
	h.pseq = peerISS + 2001
	h.sendData(data(1000))
	h.expect(flagsAre(FlagACK), ackIs(peerISS+8001), windowIs(2000), sackIs())
	h.expectNone()
}
