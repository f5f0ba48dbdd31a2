package stack

import (
	"math/bits"
	"reflect"
	"strings"
	"unsafe"

	"github.com/tcpwheel/tcpwheel/loop"
	"github.com/tcpwheel/tcpwheel/tcp"
)

// Counters are the stack's own counters.
type Counters struct {
	PacketsIn, PacketsOut   uint64
	SegmentsIn, SegmentsOut uint64 // TCP segments parsed, and sent
	ResetsSent              uint64 // RSTs for segments that matched no connection or listener
	EchoReplies             uint64
	// DatagramsIn counts the UDP datagrams delivered to a socket's queue,
	// DatagramsOut those sent.
	DatagramsIn, DatagramsOut uint64
	PortUnreachables          uint64 // ICMP port unreachable sent for UDP to a closed port
	UnreachablesIn            uint64 // ICMP port unreachable received for a connected UDP socket (its read fails: ECONNREFUSED)
	ParamProblems             uint64 // ICMPv6 parameter problems sent (RFC 8200 4: unknown headers, options, next headers)
	// IP fragments (reasm.go): datagrams reassembled and handled, ICMP
	// time exceeded sent for those that timed out with their first
	// fragment, fragments sent for our datagrams larger than the MTU.
	Reassembled, TimeExceededSent, FragmentsOut uint64
	// ICMP errors about our TCP connections (icmptcp.go): acted on (a
	// smaller MSS, a soft error noted, a handshake refused).
	TCPICMPErrors uint64
	// The path MTU cache (pmtu.go): path MTUs learned from those errors
	// and kept per destination, and new connections that started with
	// one.
	PMTULearned, PMTUReused uint64
	DeviceErrors            uint64 // failed reads and writes of the device
	Drops                   Drops
}

// Drops counts the packets the stack itself dropped, on input (and the few
// dropped on output), by reason. The segments TCP drops are counted in
// Stats.TCP (tcp.Counters' Drops* fields) and Stats.Listen (tcp.ListenerStats'
// Drops* fields): between them every drop has a reason.
type Drops struct {
	Truncated     uint64 // longer than the device's MTU
	BadIPHeader   uint64
	NotIPv4       uint64 // neither IPv4 nor IPv6 (also IPv6 to a stack without an IPv6 address)
	BadIPChecksum uint64
	NotForUs      uint64
	// IP fragments (reasm.go), each fragment counted: by reason.
	FragTimeout   uint64 // held when the reassembly timer fired (30 s IPv4, 60 s IPv6)
	FragOverlap   uint64 // overlapping (RFC 5722): the datagram's fragments, held and still to come
	FragDuplicate uint64 // an exact duplicate of one held
	FragTiny      uint64 // a first fragment without its transport header (RFC 1858, RFC 8200 4.5)
	FragBad       uint64 // a length not a multiple of 8, past 65,535 bytes, or disagreeing with the last fragment's
	FragTooMany   uint64 // more than 64 fragments in one datagram
	FragMemory    uint64 // over the reassembly memory limit, per source (256 KB) or over all (4 MB)
	// Martian sources (RFC 1122 3.2.1.3, 4.2.3.10; as Linux): dropped
	// whatever they carry.
	MartianBroadcast uint64 // 255.255.255.255, or the subnet broadcast of Config.Prefix
	MartianMulticast uint64 // 224.0.0.0/4
	MartianReserved  uint64 // 240.0.0.0/4 (class E)
	MartianZeroNet   uint64 // 0.0.0.0/8, or IPv6's ::
	MartianLoopback  uint64 // 127.0.0.0/8, or ::1
	MartianLand      uint64 // our own address
	MartianV4Mapped  uint64 // an IPv4-mapped IPv6 address (::ffff:0:0/96)
	UnknownProtocol  uint64
	BadTCPChecksum   uint64
	BadTCPHeader     uint64
	NoListener       uint64 // answered with a RST unless it was one
	BadUDPHeader     uint64 // shorter than the UDP header
	BadUDPLength     uint64 // a length field below 8 or past the packet's end
	BadUDPChecksum   uint64
	UDPNoPort        uint64 // no socket for it: answered with ICMP port unreachable, unless rate-limited
	UDPQueueFull     uint64 // the socket's receive queue was full (udpQueueLen datagrams)
	ICMPRateLimited  uint64 // ICMP errors not sent: over the rate limit (icmpLimiter: per destination, and over all)
	BadICMP          uint64
	ICMPIgnored      uint64 // ICMP other than echo requests
	// ICMP errors quoting a TCP segment (icmptcp.go): one of no
	// connection of ours, one whose sequence number is not in flight (RFC
	// 5927 4.1; one about a connection in TIME-WAIT too), one whose quote
	// is short or not from our address.
	ICMPNoConnection, ICMPBadSeq, ICMPBadQuote uint64
	TooBig                                     uint64 // an outgoing packet larger than the MTU
	EncodeError                                uint64
	DeviceWrite                                uint64 // outgoing packets the device failed to write (also in DeviceErrors)
	// IPv6's extension headers (ipv6.go, RFC 8200 4); its fragments are
	// counted in the Frag ones, its martians above.
	IPv6BadExtHeader  uint64 // truncated or malformed, or more than 7 bytes of padding in a row
	IPv6ExtChain      uint64 // more than maxExtHeaders (8) extension headers
	IPv6UnknownHeader uint64 // a Hop-by-Hop header not first, or a routing header with segments left: answered with a parameter problem
	IPv6UnknownOption uint64 // an unknown option whose type says to discard the packet (some answered with a parameter problem)
	IPv6NoNextHeader  uint64 // next header 59: nothing after the headers
	// NeighborDiscovery counts ICMPv6 neighbour and router discovery and
	// MLD messages, dropped quietly: a TUN has no link layer.
	NeighborDiscovery uint64
	// Frames of a device with offloads (offload.go, tun.VnetHdr.Check):
	BadVnetHeader     uint64 // a virtio-net header that is short, or has unknown flags or GSO type
	BadGSO            uint64 // a GSO frame that is not one TCP/IPv4 segment as announced, or has gso_size 0
	BadChecksumOffset uint64 // csum_start/csum_offset outside the packet, or not at a GSO frame's TCP checksum
}

// Stats is a snapshot of the stack: its counters, the TCP counters summed over
// every connection it has had, and the timing wheel's counters.
type Stats struct {
	// InputPath is how packets reach the loop: "direct" (the loop watches the
	// device's descriptor and reads it, for a tun.Pollable device), "reader" (a
	// goroutine reads the device and posts the packets to the loop; also after
	// the direct path met a device error) or "manual" (NewManual: the caller
	// injects them).
	InputPath string
	// LoopThread is how the loops hold their threads (Config.LoopThread):
	// "locked", "parked" or "unlocked"; "manual" for NewManual.
	LoopThread string
	Input      InputStats
	Counters
	TCP         tcp.Counters
	Connections int // in the demultiplexer, TIME-WAIT included
	// TimeWait counts the connections in TIME-WAIT after Close, kept as
	// small records (tcp.TimeWait) rather than endpoints; Connections
	// includes them.
	TimeWait int
	// TimeWaitOverflows counts the connections that reached TIME-WAIT
	// after Close while the stack held Config.MaxTimeWait records: each
	// closed at once, with no record (Linux's TCPTimeWaitOverflow).
	TimeWaitOverflows uint64
	// TimeWaitShrinks counts the times the TIME-WAIT table gave memory
	// back: its records fell to a quarter of its slab (tcp.TimeWaitHost).
	TimeWaitShrinks uint64
	Listeners       int
	UDPSockets      int               // open UDP sockets
	Listen          tcp.ListenerStats // summed over the open listeners; their ResetsSent is also in TCP.ResetsSent
	Wheel           WheelStats
	Offload         OffloadStats // the link's offloads (offload.go)
	Forward         ForwardStats // forwarded flows (forward.go), with forwarding on
	Writer          WriterStats  // the device writer (writer.go, Config.WriteQueue)
	// Loops lists each loop's share with Config.Loops > 1 (loops.go); the
	// fields above are summed over the loops. Nil with one loop.
	Loops []LoopStats
}

// InputStats counts the batches in which packets reach TCP: a batch is what
// one turn of the loop handles, at most 64 packets (the direct path's reads
// of the device, or the reader path's drain of its queue; a manual stack's
// packets are not counted). Full batches left packets waiting for the next
// turn: a burst that the device's queue had to hold.
type InputStats struct {
	Batches uint64
	Packets uint64 // in the batches
	Full    uint64 // batches of the maximum size
	Max     int    // the largest batch
	// Sizes counts batches by size, in powers of two: Sizes[i] counts batches
	// of 2^i to 2^(i+1)-1 packets (Sizes[6]: 64, the maximum).
	Sizes [inputSizeBuckets]uint64
	// The SYN stash (Config.SYNStash, synstash.go): SYNs set aside, those
	// of them handled early because the stash was full (its oldest, when
	// another came) or had waited through the loop's bound of full batches
	// (aged), and the most stashed at once.
	SYNsStashed, SYNsEarly, SYNsAged uint64
	SYNStashMax                      int
}

// inputSizeBuckets is bits.Len(maxReadBatch): one bucket per power of two up
// to the maximum batch.
const inputSizeBuckets = 7

// add counts a batch of n packets.
func (in *InputStats) add(n int) {
	if n <= 0 {
		return
	}
	in.Batches++
	in.Packets += uint64(n)
	in.Max = max(in.Max, n)
	if n >= maxReadBatch {
		in.Full++
	}
	in.Sizes[min(bits.Len(uint(n))-1, inputSizeBuckets-1)]++
}

// WheelStats is what the stack's timing wheel reports.
type WheelStats struct {
	Pending        int
	Fired, Stopped uint64
	Cascaded       uint64
	Wakeups        uint64 // the loop's (loop.Loop.Wakeups); 0 on a manual loop
	// DeferredExpiries counts the loop's turns that held back the expiry of
	// due timers because the device still held packets after a full batch
	// (loop.Loop.DeferredExpiries); 0 on a manual loop.
	DeferredExpiries uint64
	// WokenYields counts the loop's yields of its P to a goroutine it woke
	// with bulk work: a writer given room, a reader given a batch
	// (loop.Loop.YieldToWoken); 0 unless the loop is unlocked (LoopUnlocked).
	WokenYields uint64
	// NetpollSleeps counts the loop's sleeps in Go's netpoller: all of a
	// parked loop's, an unlocked loop's once it is quiet, after it handed
	// a datagram to a waiting reader, or in a lone exchange (LoneSpells),
	// none of a locked loop's
	// (loop.Loop.NetpollSleeps); 0 on a manual loop.
	NetpollSleeps uint64
	// LoneHandOffs counts the batches that woke one connection's reader
	// alone, as the batch before that woke readers did: a lone exchange,
	// after which the loop yielded its P to the reader (WokenYields) or,
	// for a forwarded flow, slept in the netpoller (NetpollSleeps), when
	// unlocked (Stack.handOffLone). Counted on every loop, a manual one too.
	LoneHandOffs uint64
	// LoneSpells counts the spells of netpoller sleeps that lone exchanges
	// started (loop.Loop.LoneExchange); 0 unless the loop is unlocked.
	LoneSpells       uint64
	LateP50, LateP99 int64 // nanoseconds: lateness of fired timers, upper bounds
	LateMax          int64
}

// Stats returns a snapshot of the stack's counters: with several loops
// (Config.Loops), summed over them, and each in Loops.
func (s *Stack) Stats() Stats {
	if s.grp != nil {
		return s.grp.stats() // loops.go
	}
	st, _ := s.statsOne()
	return st
}

// statsOne is Stats of one loop, and its share as LoopStats.
func (s *Stack) statsOne() (Stats, LoopStats) {
	var st Stats
	var ls LoopStats
	if s.do(func() {
		ls = s.loopStats()
		st.InputPath = s.input
		st.Input = s.inputStats
		st.Counters = s.counters
		s.udpOut.addTo(&st.Counters) // udpsend.go
		st.TCP = s.closedTCP
		addTCPCounters(&st.TCP, &s.tws.Counters) // timewait.go
		for _, c := range s.conns {
			cs := c.ep.Counters()
			addTCPCounters(&st.TCP, &cs)
		}
		for _, l := range s.listeners {
			ls := l.tl.Stats()
			st.TCP.ResetsSent += ls.ResetsSent
			addCounters(&st.Listen, ls)
		}
		st.Connections = len(s.conns) + s.tws.Len()
		st.TimeWait = s.tws.Len()
		st.TimeWaitOverflows = s.tws.Overflows
		st.TimeWaitShrinks = s.tws.Shrinks
		st.Listeners = len(s.listeners)
		st.UDPSockets = len(s.udp)
		st.Offload = s.offStats
		if s.frames != nil {
			st.Offload.FramesLent, st.Offload.FramesHeld = s.frames.counts() // rxframes.go
		}
		if s.wr != nil {
			st.Writer = s.wr.stats
			s.wr.addTo(&st.Counters, &st.Offload) // writer.go
		}
		if s.fwd != nil {
			st.Forward = s.fwd.snapshot()
		}
		ws := s.wheel.Stats()
		st.Wheel = WheelStats{
			Pending: ws.Pending, Fired: ws.Fired, Stopped: ws.Stopped, Cascaded: ws.Cascaded,
			LateP50: int64(ws.Late.Quantile(0.5)), LateP99: int64(ws.Late.Quantile(0.99)), LateMax: int64(ws.Late.Quantile(1)),
			LoneHandOffs: s.handOffs,
		}
	}) != nil {
		return st, ls
	}
	st.LoopThread = "manual"
	if l, ok := s.run.(*loop.Loop); ok { // a manual loop has none of these
		switch {
		case l.Parked():
			st.LoopThread = LoopParked.String()
		case l.Locked():
			st.LoopThread = LoopLocked.String()
		default:
			st.LoopThread = LoopUnlocked.String()
		}
		st.Wheel.Wakeups = l.Wakeups()
		st.Wheel.DeferredExpiries = l.DeferredExpiries()
		st.Wheel.WokenYields = l.WokenYields()
		st.Wheel.NetpollSleeps = l.NetpollSleeps()
		st.Wheel.LoneSpells = l.LoneSpells()
		ls.Wakeups = st.Wheel.Wakeups
	}
	return st, ls
}

// addCounters adds every uint64 field of b to the same field of a: for structs
// of counters (tcp.Counters, tcp.ListenerStats), so that a new counter is summed
// without being listed here.
func addCounters[T any](a *T, b T) {
	av, bv := reflect.ValueOf(a).Elem(), reflect.ValueOf(b)
	for i := 0; i < av.NumField(); i++ {
		if f := av.Field(i); f.Kind() == reflect.Uint64 {
			f.SetUint(f.Uint() + bv.Field(i).Uint())
		}
	}
}

// addTCPCounters is addCounters for tcp.Counters, which forget adds once per
// connection (the reflection was 1% of ab's CPU): a tcp.Counters is uint64s
// alone (TestAddTCPCounters), so it is added as an array of them.
func addTCPCounters(a, b *tcp.Counters) {
	const n = unsafe.Sizeof(tcp.Counters{}) / 8
	as, bs := (*[n]uint64)(unsafe.Pointer(a)), (*[n]uint64)(unsafe.Pointer(b))
	for i := range as {
		as[i] += bs[i]
	}
}

// DropCount is one drop counter, named by where it is counted: "stack." for
// the stack's own (IPv4, demultiplexing, the device: the fields of Drops),
// "tcp." for the connections' and "listen." for the listeners' (the Drops*
// fields of tcp.Counters and tcp.ListenerStats, without that prefix).
type DropCount struct {
	Name string
	N    uint64
}

// DropCounts lists every drop counter of st, in a fixed order. The counters
// are found by reflection, so that a new one is listed without being named
// here.
func (st Stats) DropCounts() []DropCount { return dropCounts(st.Drops, st.TCP, st.Listen, nil) }

// dropCounts appends the drop counters of the stack's d, a connection's (or
// all connections') c and a listener's (or all listeners') l to out.
func dropCounts(d Drops, c tcp.Counters, l tcp.ListenerStats, out []DropCount) []DropCount {
	add := func(prefix string, v reflect.Value, only string) {
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if name, ok := strings.CutPrefix(f.Name, only); ok && f.Type.Kind() == reflect.Uint64 {
				out = append(out, DropCount{prefix + name, v.Field(i).Uint()})
			}
		}
	}
	add("stack.", reflect.ValueOf(d), "")
	add("tcp.", reflect.ValueOf(c), "Drops")
	add("listen.", reflect.ValueOf(l), "Drops")
	return out
}
