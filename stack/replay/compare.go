package replay

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// compare matches the stack's recorded packets with the replayed ones, in
// order. tol bounds the difference of instants.
func compare(sess *Session, got []Output, off func(int64) time.Duration, tol time.Duration) *Result {
	var want []int // indexes into sess.Packets
	for i := range sess.Packets {
		if sess.FromStack[i] {
			want = append(want, i)
		}
	}
	r := &Result{Expected: len(want), Got: got}
	f := formatter{sess: sess}
	var wantTS0, gotTS0 uint32
	haveWantTS, haveGotTS := false, false
	for k := 0; k < max(len(want), len(got)); k++ {
		d := Diff{Index: k + 1}
		if k < len(want) {
			p := &sess.Packets[want[k]]
			d.Packet = p.N
			if p.Seg.Options.TS && !haveWantTS {
				wantTS0, haveWantTS = p.Seg.Options.TSVal, true
			}
			d.Want = f.seg(&p.Seg, off(p.Time.UnixNano()), wantTS0)
		}
		if k < len(got) {
			g := &got[k]
			if g.Seg.Options.TS && !haveGotTS {
				gotTS0, haveGotTS = g.Seg.Options.TSVal, true
			}
			d.Got = f.seg(&g.Seg, g.At, gotTS0)
		}
		if k < len(want) && k < len(got) {
			p, g := &sess.Packets[want[k]], &got[k]
			d.Fields = diffSeg(&p.Seg, &g.Seg, off(p.Time.UnixNano()), g.At, wantTS0, gotTS0, tol)
			if len(d.Fields) == 0 {
				continue
			}
		}
		r.Diffs = append(r.Diffs, d)
	}
	return r
}

// diffSeg names the fields in which got differs from want.
func diffSeg(want, got *tcp.Segment, wantAt, gotAt time.Duration, wantTS0, gotTS0 uint32, tol time.Duration) []string {
	var fs []string
	add := func(cond bool, name string) {
		if cond {
			fs = append(fs, name)
		}
	}
	add(want.Flags != got.Flags, "flags")
	add(want.Seq != got.Seq, "seq")
	add(want.Flags&tcp.FlagACK != 0 && want.Ack != got.Ack, "ack")
	add(len(want.Payload) != len(got.Payload), "len")
	add(len(want.Payload) == len(got.Payload) && !bytes.Equal(want.Payload, got.Payload), "payload")
	add(want.Window != got.Window, "win")
	wo, gopt := &want.Options, &got.Options
	add(wo.HasMSS != gopt.HasMSS || wo.MSS != gopt.MSS, "mss")
	add(wo.HasWS != gopt.HasWS || wo.WindowScale != gopt.WindowScale, "ws")
	add(wo.SACKPermitted != gopt.SACKPermitted, "sackOK")
	add(wo.NSACK != gopt.NSACK || wo.SACK != gopt.SACK, "sack")
	if wo.TS != gopt.TS {
		fs = append(fs, "ts")
	} else if wo.TS {
		add(wo.TSEcr != gopt.TSEcr, "tsecr")
		dw, dg := int64(int32(wo.TSVal-wantTS0)), int64(int32(gopt.TSVal-gotTS0))
		add(abs(dw-dg) > int64(tol/time.Millisecond)+1, "tsval")
	}
	add(abs(int64(wantAt-gotAt)) > int64(tol), "time")
	return fs
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// formatter prints segments with sequence numbers relative to each side's
// ISN, as tcpdump does by default.
type formatter struct{ sess *Session }

func (f formatter) rel(v, isn seqnum.Value) uint32 { return uint32(v - isn) }

func (f formatter) seg(s *tcp.Segment, at time.Duration, ts0 uint32) string {
	var b strings.Builder
	fromStack := s.SrcPort == f.sess.Stack.Port()
	myISN, theirISN := f.sess.PeerISN, f.sess.StackISN
	if fromStack {
		myISN, theirISN = f.sess.StackISN, f.sess.PeerISN
	}
	fmt.Fprintf(&b, "+%.6fs [%s] seq=%d", at.Seconds(), s.Flags, f.rel(s.Seq, myISN))
	if s.Flags&tcp.FlagACK != 0 {
		fmt.Fprintf(&b, " ack=%d", f.rel(s.Ack, theirISN))
	}
	fmt.Fprintf(&b, " win=%d len=%d", s.Window, len(s.Payload))
	o := &s.Options
	if o.HasMSS {
		fmt.Fprintf(&b, " mss=%d", o.MSS)
	}
	if o.HasWS {
		fmt.Fprintf(&b, " ws=%d", o.WindowScale)
	}
	if o.SACKPermitted {
		b.WriteString(" sackOK")
	}
	if o.TS {
		fmt.Fprintf(&b, " tsval=+%d tsecr=%d", int32(o.TSVal-ts0), o.TSEcr)
	}
	for _, blk := range o.SACKBlocks() {
		fmt.Fprintf(&b, " sack=%d-%d", f.rel(blk.Start, theirISN), f.rel(blk.End, theirISN))
	}
	return b.String()
}
