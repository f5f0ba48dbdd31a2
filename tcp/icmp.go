package tcp

import (
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// ICMP errors about a connection (RFC 1122 4.2.3.9, RFC 5927, RFC 5461),
// handed in by the stack once it found the connection the error quotes:
//
//   - The quoted sequence number must be one we sent and is not yet
//     acknowledged, SND.UNA <= SEG.SEQ < SND.MAX (SND.MAX: the highest sent,
//     the RFC's SND.NXT; ours falls back after an RTO), or the error is not
//     acted on (RFC 5927 4.1): a blind attacker would have to guess it.
//   - Soft errors (net or host unreachable, time exceeded, and hard ones
//     in a synchronized state, RFC 5461 4.1) are remembered; a connection
//     that then times out fails with its timeout and the last soft error
//     (Linux's sk_err_soft, reported instead of ETIMEDOUT).
//   - A hard error (port or protocol unreachable, administratively
//     prohibited) in SYN-SENT aborts the connection with it, without a
//     RST (RFC 5461, as Linux); one about a listener's half-open
//     connection (our SYN-ACK) drops it (Linux's tcp_req_err).
//   - "Fragmentation needed" and "packet too big" (RFC 1191, RFC 8201)
//     lower the path MTU, and with it the MSS we send with, never below
//     Linux's floors (an IPv4 path MTU of 552, ip_rt_min_pmtu; IPv6's
//     minimum of 1280); the segments in flight that no longer fit are cut
//     to the new size and resent at once, without touching cwnd, as
//     Linux's tcp_v4_mtu_reduced -> tcp_simple_retransmit (go-back-N from
//     SND.UNA, as after an RTO but without its backoff or window cut).
//     Congestion control keeps counting its increments in the old SMSS.
//
// Each reports whether the error was acted on (false: a sequence number
// out of the window, for the stack to count as a drop).

const (
	minPMTU4 = 552  // Linux's ip_rt_min_pmtu: 512 bytes of data + 40 of headers
	minPMTU6 = 1280 // RFC 8200 5
)

// icmpState is what ICMP errors left on the connection.
type icmpState struct {
	soft error // the last soft error
	mss  int   // the MSS the path MTU allows (options not taken off); 0: no limit learned
}

// icmpSeqOK is RFC 5927 4.1's check: seq was sent and is unacknowledged.
func (e *Endpoint) icmpSeqOK(seq seqnum.Value) bool {
	return e.state != StateClosed && e.state != StateListen && e.snd.una.LessThanEq(seq) && seq.LessThan(e.snd.max)
}

// ICMPError takes an ICMP error (destination unreachable, time exceeded)
// that quotes our segment with sequence number seq. cause is the error to
// report (the stack's, matching the errno a kernel socket gives); hard
// says whether it is a hard error (RFC 5461).
func (e *Endpoint) ICMPError(seq seqnum.Value, cause error, hard bool) bool {
	defer e.flush()
	if !e.icmpSeqOK(seq) {
		return false
	}
	if hard && (e.state == StateSynSent || e.state == StateSynReceived && e.passive) {
		// RFC 5461: abort the connection attempt; a listener's half-open
		// connection is dropped, as Linux's tcp_req_err drops the request
		// (the listener counts it in HalfOpenTimeouts).
		e.enterClosed(cause)
		return true
	}
	e.icmp.soft = cause // RFC 1122 4.2.3.9: a soft error, reported if the connection times out
	return true
}

// ICMPTooBig takes a "fragmentation needed" (RFC 1191) or "packet too big"
// (RFC 8201) that quotes our segment with sequence number seq and says the
// path carries at most mtu bytes.
func (e *Endpoint) ICMPTooBig(seq seqnum.Value, mtu int) bool {
	defer e.flush()
	if !e.icmpSeqOK(seq) {
		return false
	}
	e.limitPathMTU(mtu)
	return true
}

// LimitPathMTU starts the connection with a path MTU that the stack
// learned earlier for its remote address (its cache of ICMP errors): as
// ICMPTooBig, without a quoted sequence number to check.
func (e *Endpoint) LimitPathMTU(mtu int) {
	defer e.flush()
	e.limitPathMTU(mtu)
}

func (e *Endpoint) limitPathMTU(mtu int) {
	hl, floor := 20, minPMTU4
	if !e.id.Local.Addr().Is4() {
		hl, floor = 40, minPMTU6
	}
	mss := max(mtu, floor) - hl - HeaderMinSize
	if e.icmp.mss != 0 && mss >= e.icmp.mss {
		return // no news
	}
	e.icmp.mss = mss
	if e.state == StateSynSent || e.state == StateClosed {
		return // negotiate applies it (pmtuCap) when the SYN-ACK comes
	}
	old := e.snd.smss
	e.pmtuCap()
	if e.snd.smss < old {
		e.cc.setSMSS(e.snd.smss)
		e.resegment()
	}
}

// pmtuCap lowers the send MSS to what the path MTU allows, if ICMP told
// us of one.
func (e *Endpoint) pmtuCap() {
	if e.icmp.mss == 0 {
		return
	}
	m := e.icmp.mss
	if e.tsOK {
		m -= 12
	}
	e.snd.smss = max(min(e.snd.smss, m), 64)
}

// mssCap is the most a segment's payload and options may take: the MSS
// both sides allow and the path MTU's.
func (e *Endpoint) mssCap() int {
	m := min(e.snd.peerMSS, e.cfg.MSS)
	if e.icmp.mss != 0 {
		m = min(m, e.icmp.mss)
	}
	return m
}

// resegment cuts the data in flight into segments of the send MSS where
// a segment is larger: each run of unSACKed data segments that holds one
// is cut anew, and the flight is resent from SND.UNA (Linux's
// tcp_simple_retransmit): it was lost to the smaller MTU. Karn's
// algorithm still holds: the pieces keep the run's most transmissions. A
// TSO segment (gso.go) is cut with its run as any segment larger than the
// new MSS.
func (e *Endpoint) resegment() {
	if len(e.snd.rtxq) == 0 {
		return
	}
	q := make([]*txSeg, 0, len(e.snd.rtxq))
	rtxq, cut := e.snd.rtxq, false
	for i := 0; i < len(rtxq); {
		j, big := i, false
		for ; j < len(rtxq) && !rtxq[j].sacked && rtxq[j].flags&FlagSYN == 0; j++ {
			big = big || rtxq[j].dataLen() > e.snd.smss
		}
		if !big {
			q = append(q, rtxq[i:max(j, i+1)]...)
			i = max(j, i+1)
			continue
		}
		q = e.recut(q, rtxq[i:j])
		i, cut = j, true
	}
	if !cut {
		return // nothing in flight is too large: the next segments are cut to size
	}
	e.snd.rtxq = q
	for _, s := range e.snd.rtxq {
		if !s.sacked {
			e.w.Stop(&s.entry) // re-armed when resent
		}
	}
	e.fr.recover = e.snd.max // no fast retransmit for the ACKs of this flight (as after an RTO)
	e.stats.PMTUResends++
	e.snd.nxt = e.snd.una
	e.output()
	if e.state != StateClosed && len(e.snd.rtxq) > 0 && !e.snd.rtxq[0].entry.Pending() && !e.snd.rtxq[0].sacked {
		e.armRTO(e.snd.rtxq[0]) // the windows let nothing out: the RTO still runs
	}
}

// recut appends to q the run of data segments run, cut into segments of
// the send MSS; the last carries the run's FIN and PSH.
func (e *Endpoint) recut(q, run []*txSeg) []*txSeg {
	first, last := run[0], run[len(run)-1]
	xmits := 0
	for _, s := range run {
		xmits = max(xmits, s.xmits)
	}
	fin := last.flags&FlagFIN != 0
	data := int(last.end() - first.seq)
	if fin {
		data--
	}
	seq := first.seq
	for left := data; left > 0; {
		k := min(left, e.snd.smss)
		l, flags := seqnum.Size(k), Flags(0)
		if k == left {
			flags = last.flags & (FlagFIN | FlagPSH)
			if fin {
				l++
			}
		}
		p := e.newSeg(seq, l, flags)
		p.push = last.push && k == left
		p.xmits, p.sentAt, p.prevSentAt, p.order = xmits, last.sentAt, last.prevSentAt, last.order
		q = append(q, p)
		seq, left = seq.Add(l), left-k
	}
	for _, s := range run {
		e.freeSeg(s)
	}
	return q
}

// withSoftError is the error a connection that timed out fails with: the
// timeout, and the last soft ICMP error if there was one.
func (e *Endpoint) withSoftError(err error) error {
	if err != ErrTimeout || e.icmp.soft == nil {
		return err
	}
	return &softTimeout{e.icmp.soft}
}

// softTimeout is ErrTimeout after a soft ICMP error: it matches both.
type softTimeout struct{ soft error }

func (t *softTimeout) Error() string {
	return ErrTimeout.Error() + " (last ICMP error: " + t.soft.Error() + ")"
}
func (t *softTimeout) Unwrap() []error { return []error{ErrTimeout, t.soft} }

// HalfOpenConn returns the listener's half-open connection (SYN-RECEIVED) with
// the 4-tuple id, or nil: for an ICMP error that quotes our SYN-ACK.
func (l *Listener) HalfOpenConn(id ID) *Endpoint { return l.half[id] }
