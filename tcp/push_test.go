package tcp

import (
	"slices"
	"testing"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

func linuxPushConfig() Config {
	c := testConfig()
	c.PushPolicy = PushLinux
	return c
}

// TestPushPolicies: the same writes under both policies. PushEvery (the
// default) marks every new data segment; PushLinux the end of a write and
// the last segment of each TSO chunk of two or more (here 2 segments:
// tcp_tso_autosize's minimum, for 1 ms of the pacing rate is less than a
// segment at an 8 ms RTT and 10 segments of cwnd), as packetdrill's
// https_client (974 bytes: -, P, P for a write of 2002).
func TestPushPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy PushPolicy
		want   []bool // PSH on each segment of a write of 4*MSS + 100
	}{
		{PushEvery, []bool{true, true, true, true, true}},
		{PushLinux, []bool{false, true, false, true, true}},
	} {
		cfg := testConfig()
		cfg.PushPolicy = tc.policy
		h := establishedRTT(t, cfg, tlpRTT)
		mss := h.ep.Info().SndMSS
		h.ep.Write(data(4*mss + 100))
		for i, psh := range tc.want {
			f := FlagACK
			if psh {
				f |= FlagPSH
			}
			n := mss
			if i == 4 {
				n = 100
			}
			h.expect(flagsAre(f), seqIs(testISS+1+seqnum.Value(i*mss)), lenIs(n))
		}
		h.expectNone()
	}
}

// TestPushLinuxChunks: PushLinux's chunks are bounded by what the windows
// let go, and a chunk of one segment (the last before cwnd is full, a
// tail-loss probe) goes without PSH (packetdrill's prr-ss-30pkt-lost1_4 and
// shutdown-rdwr-send-queue-ack-close); a retransmission carries PSH only
// where a write ended, not where a chunk did.
func TestPushLinuxChunks(t *testing.T) {
	h := establishedRTT(t, linuxPushConfig(), tlpRTT)
	mss := h.ep.Info().SndMSS
	seq := func(i int) seqnum.Value { return testISS + 1 + seqnum.Value(i*mss) }
	h.ep.Write(data(13 * mss))
	for i := range 10 { // cwnd 10: chunks of 2, PSH on the even ones
		f := FlagACK
		if i%2 == 1 {
			f |= FlagPSH
		}
		h.expect(flagsAre(f), seqIs(seq(i)), lenIs(mss))
	}
	h.expectNone()
	// The probe: new data, one segment, not a write's end: no PSH.
	h.advance(2*tlpRTT + DefaultTLPSlack)
	h.expect(flagsAre(FlagACK), seqIs(seq(10)), lenIs(mss))
	if i := h.ep.Info(); i.TLPProbes != 1 {
		t.Fatalf("TLP probes: got %d, want 1", i.TLPProbes)
	}
	// An ACK of 1 segment: slow start makes cwnd 11 with 10 in flight:
	// room for one segment, a chunk of one: no PSH.
	h.ackUpTo(seq(1))
	h.expect(flagsAre(FlagACK), seqIs(seq(11)), lenIs(mss))
	h.expectNone()
	// Segment 1 (a chunk's end, PSH when new) lost: its retransmission goes
	// without PSH.
	for k := 3; k <= 5; k++ {
		h.sackAck(SACKBlock{Start: seq(2), End: seq(k)})
	}
	var resent *Segment
	for len(h.out.segs) > 0 {
		s := h.expect()
		if s.Seq == seq(1) {
			resent = &s
		}
	}
	if resent == nil {
		t.Fatalf("segment 1 not resent")
	}
	if resent.Flags&FlagPSH != 0 {
		t.Fatalf("retransmission of a chunk's end: got %v, want no PSH", resent.Flags)
	}
}

// TestPushLinuxWriteEnd: a write's end loses its PSH when another write
// appends before it went out (Linux appends to that skb, tcp_sendmsg_locked),
// and keeps it once sent.
func TestPushLinuxWriteEnd(t *testing.T) {
	h := establishedRTT(t, linuxPushConfig(), tlpRTT)
	mss := h.ep.Info().SndMSS
	seq := func(i int) seqnum.Value { return testISS + 1 + seqnum.Value(i*mss) }
	h.ep.Write(data(10*mss + 500)) // 500 bytes wait behind cwnd, their end marked
	for range 10 {
		h.expect()
	}
	h.ep.Write(data(2 * mss)) // appends to them: the mark at 10*MSS+500 goes
	if got, want := h.ep.snd.push.marks, []seqnum.Value{seq(12) + 500}; !slices.Equal(got, want) {
		t.Fatalf("marks: got %v, want %v", got, want)
	}
	h.ackUpTo(seq(10))
	// cwnd 20 at an 8 ms RTT: tcp_tso_autosize's chunk is 4 segments, and
	// the 3 go as one: PSH only on the write's end (without the append, the
	// first would carry it too).
	h.expect(flagsAre(FlagACK), seqIs(seq(10)), lenIs(mss))
	h.expect(flagsAre(FlagACK), seqIs(seq(11)), lenIs(mss))
	h.expect(flagsAre(FlagACK|FlagPSH), seqIs(seq(12)), lenIs(500))
	h.expectNone()
	// Sent, the end stays: a write now starts a new mark after it.
	h.ep.Write(data(100))
	h.expect(flagsAre(FlagACK|FlagPSH), seqIs(seq(12)+500), lenIs(100))
}

// TestPushLinuxForced: forced_push: in a write longer than half the peer's
// largest window, the skb (size goal: half that window, whole segments) that
// ends more than half a window after the last PSH is marked.
func TestPushLinuxForced(t *testing.T) {
	h := establishedRTT(t, linuxPushConfig(), tlpRTT)
	mss := h.ep.Info().SndMSS   // 1448
	h.ep.snd.maxWnd = 10 * 1024 // as if the peer's largest window were 10 KB: half 5120, size goal 3*1448 = 4344
	h.ep.snd.wnd = 0            // hold the data: the marks are what is checked
	start := h.ep.snd.nxt
	h.ep.Write(data(20 * mss))
	// skb ends at 4344, 8688, 13032, 17376, 21720, 26064; forced where more
	// than 5120 past the last mark: 8688 (from 0), 17376 (from 8688),
	// 26064; then the write's end, 28960.
	var want []seqnum.Value
	for _, off := range []int{8688, 17376, 26064, 20 * mss} {
		want = append(want, start.Add(seqnum.Size(off)))
	}
	if got := h.ep.snd.push.marks; !slices.Equal(got, want) {
		t.Fatalf("marks: got %v, want %v", got, want)
	}
}
