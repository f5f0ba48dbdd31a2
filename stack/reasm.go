package stack

import (
	"encoding/binary"
	"net/netip"
	"sort"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"
	"github.com/tcpwheel/tcpwheel/timer"
)

// IP reassembly: IPv4 (RFC 791, RFC 815's hole list, as a sorted list of
// fragments) and IPv6 (RFC 8200 4.5). A datagram's fragments are kept in
// a fragQueue, keyed by source, destination, identification (and IPv4's
// protocol), until they cover it; the whole datagram then goes to TCP,
// UDP or ICMP as any other packet. Each queue has a timer entry on the
// stack's wheel, started with its first fragment: when it fires before
// the datagram is whole, the fragments are dropped (Drops.FragTimeout)
// and, if the first fragment had come, an ICMP time exceeded (fragment
// reassembly time exceeded) goes to the source, within the ICMP rate
// limit (RFC 792, RFC 1122 3.3.2; RFC 8200 4.5, RFC 4443 3.3).
//
// Choices, and where they come from:
//   - Timeout: 30 s over IPv4, Linux's ipfrag_time (RFC 791 suggests 15 s,
//     RFC 1122 3.3.2 60 to 120 s); 60 s over IPv6, RFC 8200 4.5 (and
//     Linux's IPV6_FRAG_TIMEOUT).
//   - Overlaps: a fragment that overlaps one already held drops the whole
//     datagram, and the queue stays, empty, until its timer, so that the
//     datagram's later fragments are dropped too (RFC 5722, RFC 8200 4.5;
//     Linux does the same for IPv4 since 2018, INET_FRAG_DROP). An exact
//     duplicate (same offset and end) is dropped alone (RFC 5722 allows
//     it; Linux's IPFRAG_DUP). A last fragment that disagrees with the
//     datagram's length seen so far also drops the datagram (Linux: a
//     corrupt queue).
//   - Tiny first fragments: a first fragment that does not hold its
//     transport header (TCP 20 bytes, UDP 8, ICMP 8) is dropped
//     (Drops.FragTiny): RFC 8200 4.5 over IPv6, answered with a parameter
//     problem code 3; RFC 1858 over IPv4, which also drops a TCP fragment
//     at offset 8 (FO = 1), one that could rewrite the flags.
//   - Limits: reasmMaxFrags fragments per datagram (more drops it:
//     Drops.FragTooMany), reasmMemPerSource bytes held per source and
//     reasmMemTotal over all (counting reasmOverhead more per fragment and
//     per queue, and the first fragment's headers and quote, so that a
//     flood of tiny fragments is bounded as well as a flood of large ones). A fragment over a limit is dropped (Drops.FragMemory): as
//     Linux over ipfrag_high_thresh, nothing is evicted, the timers free
//     the memory; the limit per source keeps one source from taking all
//     of it.
//   - A reassembled datagram that is itself a fragment (an IPv6 fragment
//     header inside a fragment) is dropped (Drops.FragBad).
//
// Every drop counts packets (fragments), as the other Drops do.
const (
	reasmTimeout4     = 30 * time.Second
	reasmTimeout6     = 60 * time.Second
	reasmMaxFrags     = 64      // a 64 KB datagram over a 1280-byte link is 52 fragments
	reasmMemPerSource = 1 << 18 // 256 KB: four of the largest datagrams
	reasmMemTotal     = 1 << 22 // 4 MB, Linux's ipfrag_high_thresh
	reasmOverhead     = 128     // charged per fragment and per queue besides its bytes
	maxDatagram       = 65535   // IPv4's total length, IPv6's payload length
	// icmp6IncompleteChain is the parameter problem code for a first
	// fragment without all its headers (RFC 7112, RFC 8200 4.5).
	icmp6IncompleteChain header.ICMPv6Code = 3
)

// fragKey names a datagram being reassembled: RFC 791's (source,
// destination, protocol, identification); RFC 8200's (source, destination,
// identification) with proto 0.
type fragKey struct {
	src, dst netip.Addr
	id       uint32
	proto    uint8
}

// frag is a fragment's data, at [off, end) of the datagram's payload.
type frag struct {
	off, end int
	data     []byte
}

// fragQueue is one datagram being reassembled. It runs on the loop.
type fragQueue struct {
	s     *Stack
	key   fragKey
	entry timer.Entry // the reassembly timeout
	frags []frag      // by offset, none overlapping
	have  int         // bytes held
	mem   int         // charged to the limits
	total int         // the payload's length, once the last fragment came; -1 before
	// hdr is the first fragment's headers: IPv4's header, or IPv6's header
	// and unfragmentable part with the Next Header that named the fragment
	// header set to the fragment header's. nil until the first fragment.
	hdr []byte
	// quote is what an ICMP time exceeded quotes: the first fragment's
	// IPv4 header and 8 bytes of data, or its IPv6 packet up to the
	// minimum MTU.
	quote []byte
	dead  bool // dropped (an overlap, a bad length): fragments are dropped until the timer
	v6    bool
}

// reassembler is the stack's reassembly state. Loop only.
type reassembler struct {
	queues map[fragKey]*fragQueue
	perSrc map[netip.Addr]int // memory charged per source
	mem    int                // charged over all
	buf    []byte             // the reassembled datagram, handed on and reused
	// delivering: a reassembled datagram is being handled (a fragment
	// inside it is dropped).
	delivering bool
}

// fragment is a fragment that came in: the datagram's key, the fragment's
// offset and data, whether more follow, the first fragment's headers
// (its IP header, and over IPv6 the unfragmentable part and the upper
// layer's protocol), and the packet itself.
type fragment struct {
	key   fragKey
	off   int
	more  bool
	data  []byte
	hdr   []byte // the headers before the data (IPv6: with the next header fixed up)
	proto uint8  // the upper-layer protocol of the first fragment's data
	pkt   []byte
	v6    bool
	// IPv6: where the fragment header is, for a parameter problem's pointer.
	fragOff int
}

// transportMin is the least of a transport header a first fragment must
// hold (RFC 1858, RFC 8200 4.5; Linux's ipv6frag_thdr_truncated).
func transportMin(proto uint8) int {
	switch proto {
	case protoTCP:
		return 20
	case protoUDP, protoICMP, protoICMPv6:
		return 8
	}
	return 0
}

// fragment4 takes an IPv4 fragment (its header checked, of length hl).
func (s *Stack) fragment4(pkt []byte, hl int, src, dst netip.Addr) {
	if s.grp != nil && s.shard != 0 { // reassembly is the first loop's (loops.go)
		s.handOffFirst(pkt, func(o *Stack, p []byte) { o.fragment4(p, hl, src, dst) })
		return
	}
	ip := header.IPv4(pkt)
	f := fragment{
		key:  fragKey{src: src, dst: dst, id: uint32(ip.ID()), proto: ip.Protocol()},
		off:  int(ip.FragmentOffset()),
		more: ip.More(),
		data: pkt[hl:],
		hdr:  pkt[:hl],
		pkt:  pkt,
	}
	f.proto = f.key.proto
	if f.proto == protoTCP && f.off == 8 { // RFC 1858 3.2: FO = 1 rewrites TCP's flags
		s.counters.Drops.FragTiny++
		return
	}
	if hl+f.off+len(f.data) > maxDatagram {
		s.counters.Drops.FragBad++
		return
	}
	s.reassemble(&f)
}

// fragment6 takes an IPv6 fragment: c is the walk that found its fragment
// header at c.off, named by the Next Header at c.nhOff.
func (s *Stack) fragment6(pkt []byte, c ipv6Chain, src, dst netip.Addr) {
	if s.grp != nil && s.shard != 0 { // reassembly is the first loop's (loops.go)
		s.handOffFirst(pkt, func(o *Stack, p []byte) { o.fragment6(p, c, src, dst) })
		return
	}
	h := pkt[c.off : c.off+8]
	offM := binary.BigEndian.Uint16(h[2:])
	f := fragment{
		key:     fragKey{src: src, dst: dst, id: binary.BigEndian.Uint32(h[4:])},
		off:     int(offM &^ 7),
		more:    offM&1 != 0,
		data:    pkt[c.off+8:],
		proto:   h[0],
		pkt:     pkt,
		v6:      true,
		fragOff: c.off,
	}
	d := &s.counters.Drops
	switch {
	case f.more && (len(f.data) == 0 || len(f.data)%8 != 0):
		d.FragBad++ // RFC 8200 4.5: not a multiple of 8, pointing at the payload length
		s.icmp6Error(header.ICMPv6ParamProblem, header.ICMPv6ErroneousHeader, 4, pkt)
		return
	case c.off-ipv6HeaderLen+f.off+len(f.data) > maxDatagram:
		d.FragBad++ // RFC 8200 4.5: past 65,535 bytes, pointing at the fragment offset
		s.icmp6Error(header.ICMPv6ParamProblem, header.ICMPv6ErroneousHeader, uint32(c.off+2), pkt)
		return
	}
	if f.off == 0 {
		proto, ok := upperLayer(f.proto, f.data)
		if !ok {
			d.FragTiny++ // RFC 8200 4.5: not all headers through the upper layer's
			s.icmp6Error(header.ICMPv6ParamProblem, icmp6IncompleteChain, 0, pkt)
			return
		}
		hdr := append([]byte(nil), pkt[:c.off]...)
		hdr[c.nhOff] = f.proto
		f.hdr, f.proto = hdr, proto
	}
	s.reassemble(&f)
}

// upperLayer walks the extension headers at the start of a first IPv6
// fragment's data, the first named nh, and reports the upper-layer
// protocol and whether its header is whole in data.
func upperLayer(nh uint8, data []byte) (uint8, bool) {
	off := 0
	for range maxExtHeaders {
		switch nh {
		case nhHopByHop, nhRouting, nhDestOpts, nhFragment:
		default:
			return nh, len(data)-off >= transportMin(nh)
		}
		if len(data)-off < 8 {
			return nh, false
		}
		hl := (int(data[off+1]) + 1) * 8
		if nh == nhFragment {
			hl = 8
		}
		nh, off = data[off], off+hl
	}
	return nh, true // the walk after reassembly counts the chain
}

// reassemble adds a fragment to its datagram's queue, and hands on the
// datagram when it is whole.
func (s *Stack) reassemble(f *fragment) {
	d := &s.counters.Drops
	r := &s.reasm
	if r.delivering {
		d.FragBad++ // a fragment inside a reassembled datagram
		return
	}
	end := f.off + len(f.data)
	switch {
	case f.more && (len(f.data) == 0 || len(f.data)%8 != 0):
		d.FragBad++ // RFC 791: every fragment but the last holds a multiple of 8 bytes
		return
	case f.off == 0 && len(f.data) < transportMin(f.proto):
		d.FragTiny++ // RFC 1858, RFC 8200 4.5
		if f.v6 {
			s.icmp6Error(header.ICMPv6ParamProblem, icmp6IncompleteChain, 0, f.pkt)
		}
		return
	}
	cost := len(f.data) + reasmOverhead
	if f.off == 0 { // its headers and the quote for a time exceeded are kept too
		cost += 2 * len(f.hdr)
		if f.v6 {
			cost += min(len(f.pkt), ipv6MinMTU)
		}
	}
	q := r.queues[f.key]
	if q == nil {
		cost += reasmOverhead
		if r.mem+cost > reasmMemTotal || r.perSrc[f.key.src]+cost > reasmMemPerSource {
			d.FragMemory++
			return
		}
		if r.queues == nil {
			r.queues, r.perSrc = make(map[fragKey]*fragQueue), make(map[netip.Addr]int)
		}
		q = &fragQueue{s: s, key: f.key, total: -1, v6: f.v6}
		q.entry.Init(q.expire)
		timeout := reasmTimeout4
		if f.v6 {
			timeout = reasmTimeout6
		}
		if err := s.wheel.Start(&q.entry, timeout); err != nil {
			d.FragMemory++ // a wheel that takes no more timers: no room for the datagram
			return
		}
		r.queues[f.key] = q
		q.charge(reasmOverhead)
		cost -= reasmOverhead
	}
	switch {
	case q.dead:
		d.FragOverlap++ // a later fragment of a datagram dropped for an overlap
		return
	case r.mem+cost > reasmMemTotal || r.perSrc[f.key.src]+cost > reasmMemPerSource:
		d.FragMemory++
		return
	case !f.more && (q.total >= 0 && q.total != end || len(q.frags) > 0 && q.frags[len(q.frags)-1].end > end),
		f.more && q.total >= 0 && end > q.total:
		d.FragBad++ // a second, different end, or data past it: drop the datagram
		q.kill(&d.FragBad)
		return
	case len(q.frags) >= reasmMaxFrags:
		d.FragTooMany++
		q.kill(&d.FragTooMany)
		return
	}
	i := sort.Search(len(q.frags), func(i int) bool { return q.frags[i].off >= f.off })
	if i < len(q.frags) && q.frags[i].off == f.off && q.frags[i].end == end {
		d.FragDuplicate++ // RFC 5722: an exact duplicate is dropped alone
		return
	}
	if i > 0 && q.frags[i-1].end > f.off || i < len(q.frags) && q.frags[i].off < end {
		d.FragOverlap++ // RFC 5722: the whole datagram goes
		q.kill(&d.FragOverlap)
		return
	}
	q.frags = append(q.frags, frag{})
	copy(q.frags[i+1:], q.frags[i:])
	q.frags[i] = frag{off: f.off, end: end, data: append([]byte(nil), f.data...)}
	q.have += len(f.data)
	q.charge(cost)
	if !f.more {
		q.total = end
	}
	if f.off == 0 {
		q.hdr = f.hdr
		if !f.v6 {
			q.hdr = append([]byte(nil), f.hdr...)
			q.quote = append(q.hdr[:len(q.hdr):len(q.hdr)], f.data[:min(8, len(f.data))]...)
		} else {
			q.quote = append([]byte(nil), f.pkt[:min(len(f.pkt), ipv6MinMTU)]...)
		}
	}
	if q.total < 0 || q.have != q.total || q.hdr == nil {
		return
	}
	pkt := q.assemble()
	q.remove()
	s.counters.Reassembled++
	// The transport checksum is checked over the whole datagram, whatever
	// a virtio-net header said of the last fragment (offload.go).
	r.delivering, s.csumValid = true, false
	defer func() { r.delivering = false }()
	if f.v6 {
		s.handleIPv6(pkt)
		return
	}
	hl := len(q.hdr)
	s.deliverIPv4(f.key.src, f.key.dst, pkt[:hl], pkt[hl:])
}

// assemble puts the datagram together in the reassembler's buffer: the
// first fragment's headers with the lengths of the whole, then the data.
func (q *fragQueue) assemble() []byte {
	r := &q.s.reasm
	n := len(q.hdr) + q.total
	if cap(r.buf) < n {
		r.buf = make([]byte, n)
	}
	pkt := r.buf[:n]
	copy(pkt, q.hdr)
	for _, f := range q.frags {
		copy(pkt[len(q.hdr)+f.off:], f.data)
	}
	if q.v6 {
		binary.BigEndian.PutUint16(pkt[4:], uint16(n-ipv6HeaderLen))
		return pkt
	}
	ip := header.IPv4(pkt)
	ip.SetTotalLength(uint16(n))
	binary.BigEndian.PutUint16(pkt[6:], binary.BigEndian.Uint16(pkt[6:])&0x4000) // DF kept; MF and offset cleared
	ip.SetChecksum(0)
	ip.SetChecksum(^checksum.Checksum(pkt[:len(q.hdr)], 0))
	return pkt
}

// charge counts n more bytes of memory against the queue's source.
func (q *fragQueue) charge(n int) {
	r := &q.s.reasm
	q.mem += n
	r.mem += n
	r.perSrc[q.key.src] += n
}

// kill drops the datagram's fragments, counting those held in drop: the
// queue stays, dead, until its timer, to drop the fragments still to come
// (counted in FragOverlap).
func (q *fragQueue) kill(drop *uint64) {
	*drop += uint64(len(q.frags))
	q.frags, q.dead, q.hdr, q.quote = nil, true, nil, nil
	q.charge(reasmOverhead - q.mem)
}

// remove forgets the queue and its memory, and stops its timer.
func (q *fragQueue) remove() {
	r := &q.s.reasm
	q.s.wheel.Stop(&q.entry)
	delete(r.queues, q.key)
	r.mem -= q.mem
	if r.perSrc[q.key.src] -= q.mem; r.perSrc[q.key.src] <= 0 {
		delete(r.perSrc, q.key.src)
	}
	q.mem = 0
}

// expire is the reassembly timeout: the fragments held are dropped and, if
// the first had come, the source is told (ICMP time exceeded, code 1).
func (q *fragQueue) expire() {
	s := q.s
	q.remove()
	if q.dead {
		return
	}
	s.counters.Drops.FragTimeout += uint64(len(q.frags))
	if q.quote == nil {
		return // RFC 792, RFC 8200 4.5: only when the first fragment came
	}
	if q.v6 {
		s.icmp6Error(header.ICMPv6TimeExceeded, header.ICMPv6ReassemblyTimeout, 0, q.quote)
		return
	}
	s.icmp4Error(header.ICMPv4TimeExceeded, header.ICMPv4ReassemblyTimeout, 0, q.key.src, q.key.dst, q.quote)
}

// icmp4Error sends an ICMP error of type typ and code code, whose 4-byte
// field after the checksum is rest, to src (from our dst), quoting quote
// (an IP header and the first 8 bytes after it, RFC 792), within the ICMP
// rate limit.
func (s *Stack) icmp4Error(typ header.ICMPv4Type, code header.ICMPv4Code, rest uint32, src, dst netip.Addr, quote []byte) {
	if s.martianSource(src) != nil {
		return
	}
	if !s.icmpLimit.allow(s.wheel.Now(), src) {
		s.counters.Drops.ICMPRateLimited++
		return
	}
	out := s.obuf[:ipv4HeaderLen+header.ICMPv4MinimumSize+len(quote)]
	m := out[ipv4HeaderLen:]
	m[0], m[1], m[2], m[3] = byte(typ), byte(code), 0, 0
	binary.BigEndian.PutUint32(m[4:], rest)
	copy(m[header.ICMPv4MinimumSize:], quote)
	binary.BigEndian.PutUint16(m[2:], ^checksum.Checksum(m, 0))
	s.counters.TimeExceededSent++
	s.writeIPv4(out, dst, src, protoICMP)
}
