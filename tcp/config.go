package tcp

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// ID names a connection by its 4-tuple. The tcp package treats the addresses as
// opaque: it hands the ID back to Output.Send so that the stack knows where a
// segment goes.
type ID struct {
	Local, Remote netip.AddrPort
}

// Reverse returns the ID seen from the other end.
func (id ID) Reverse() ID { return ID{Local: id.Remote, Remote: id.Local} }

func (id ID) String() string { return id.Local.String() + "->" + id.Remote.String() }

// Output is where endpoints and listeners send segments. Send is called on the
// loop goroutine; seg, and its Payload (which aliases the send buffer), are valid
// only during the call: encode or copy them before returning.
//
// Except a Payload marked PayloadStable: a view into the endpoint's send
// buffer storage (a span that wraps is a temporary copy, valid until the
// endpoint's next send, and never so marked). The storage holding bytes sent
// and not acknowledged is not written to until they are consumed, and an
// endpoint consumes them only when handed a segment whose ACK covers them
// (HandleSegment): so an Output may keep referring to a stable Payload after
// Send returns (the stack writes its GSO frame with writev from such views at
// the end of the loop's turn) as long as it is done with it before it hands
// the endpoint a segment that acknowledges any of those bytes. Growing the
// storage copies the bytes into new storage and leaves the old as it was; an
// endpoint that is reset, aborted or closed leaves its storage as it was, and
// a send buffer's storage is never handed to another connection or another
// buffer while the Output may hold views of it (the stack writes a
// connection's frame when it forgets the connection: a pool may reuse the
// buffers after that). Whoever changes the send buffer keeps these.
type Output interface {
	Send(id ID, seg *Segment)
}

// AckHolder is an Output that hands the endpoints their input in batches
// (the stack reads up to 64 packets per turn of its loop) and lets the ACK
// of in-order data wait for the end of the batch, so that a batch of N
// full-sized segments gets one ACK instead of N/2: ACK coalescing per input
// batch, as Linux's GRO gets by merging the segments themselves. Only the
// ACK that the delayed-ACK rule sends for every second full-sized segment
// (RFC 5681 4.2) waits: the ACKs of out-of-order and duplicate data, of
// data that fills a hole, of a window probe, of a FIN, and the ACKs that
// data segments carry go at once.
type AckHolder interface {
	Output
	// HoldAck reports whether e's ACK may wait for the end of the batch
	// being handled. If it says yes, the Output calls e.FlushAck when the
	// batch ends. It is asked again only after a segment carried the held
	// ACK out; FlushAck with nothing held does nothing.
	HoldAck(e *Endpoint) bool
}

// OutputFunc adapts a function to Output.
type OutputFunc func(id ID, seg *Segment)

// Send implements Output.
func (f OutputFunc) Send(id ID, seg *Segment) { f(id, seg) }

// ISNFunc chooses the initial send sequence number of a connection at the
// instant now (the wheel's time).
type ISNFunc func(id ID, now time.Duration) seqnum.Value

// TSOffsetFunc chooses the offset of a connection's timestamp clock (RFC
// 7323 5.4): its TSval is the wheel's time in milliseconds plus the offset.
// iss is the connection's ISS (for a SYN cookie's connection, the cookie),
// which the rule before 2026-11-24 used as the offset (TSOffsetISS). It is
// asked when the endpoint is made (Dial, a listener's half-open
// connection), and for a SYN cookie also when the cookie's SYN-ACK is sent:
// it must give the same offset both times.
type TSOffsetFunc func(id ID, iss seqnum.Value) uint32

// Defaults of Config.
//
// DefaultRecvBuffer is 1 MB (window scale 5; 256 KB until 2026-11-24, as
// gVisor's default receive buffer, which it moderates up to 4 MB, and
// less than Linux's autotuning reaches). With 256 KB a 200 MB upload by curl
// (tcpwheel compare http-up, the kernel the sender) went in stop-and-go
// cycles: four 64 KB GRO frames filled the window in one batch, the batch's
// ACK closed it, and the reader's release reopened it with an update sent
// twice (Endpoint.sendWindowUpdate): four ACKs per 256 KB, each a TUN write
// that runs the kernel's ACK processing and its next transmission on the
// stack's thread. With 1 MB the stack sent 2.6 times fewer ACKs and its CPU
// per GB fell by about a quarter. (Earlier, 2026-11-23, a larger buffer
// made the 20 MB download from the kernel at 5% loss each way slower: the
// updates that reopened the window were lost and waited for the kernel's
// persist timer. Since such an update goes twice the size matters little
// there: medians of 67 ms at 256 KB, 80 ms at 512 KB, 58 ms at 1 MB, 5
// runs each, seed 10.) The buffer grows as data comes: a connection that
// has received nothing holds none of it.
//
// DefaultSendBuffer is 512 KB (256 KB until 2026-11-24): a download of 200
// MB by curl from the stack (tcpwheel compare http-down, the kernel the
// receiver, 7 runs per invocation, two invocations each, on a loaded VM)
// went at 0.63-0.69x gvisor-gso's MB/s with 256 KB, 0.79-1.15x with 512 KB,
// 0.86-1.14x with 1 MB (4 MB, what Linux autotunes to and gVisor's tuned
// maximum, did no better than 1 MB): with 256 KB the writer, woken when
// half of it is free, and the loop took turns more often than either had
// work, at a fifth more CPU per GB. 1 MB made compare's mid-loss (a 2 MB
// transfer from a new connection) take a quarter longer (medians of 21:
// 7.9-8.4 ms against 6.1-6.5 with 256 KB, 6.0-7.1 with 512 KB): the
// rings' storage, grown and faulted in as the application writes, is
// paid by each new connection. Like the receive buffer, its storage grows
// as the application writes (a connection that never wrote much holds
// little), and is kept once grown (internal/ring does not shrink).
//
// DefaultSendBufferMax is what a default send buffer grows to, 2 MB, once
// its connection has shown itself a bulk sender that the buffer holds back
// (autoGrowSendBuffer; Linux grows its own up to tcp_wmem[2], 4 MB). A 1 GB
// download by curl (tcpwheel compare http-down, three runs per invocation,
// invocations interleaved on the loaded VM) took 0.40-0.45 s of CPU per GB
// growing to 2 MB, 0.45-0.47 growing to 4 MB, 0.48-0.51 with 512 KB; a
// fixed 2 MB did as well as the growth, a fixed 4 MB as the growth to it.
// A connection that has had less than four buffers' worth acknowledged
// keeps 512 KB, and pays nothing for the larger one (mid-loss's 2 MB).
const (
	DefaultSendBuffer    = 512 << 10
	DefaultSendBufferMax = 2 << 20
	DefaultRecvBuffer    = 1 << 20
	DefaultInitialRTO    = time.Second            // RFC 6298 (2.1)
	DefaultMinRTO        = 200 * time.Millisecond // Linux TCP_RTO_MIN
	DefaultMaxRTO        = 120 * time.Second      // Linux TCP_RTO_MAX; RFC 6298 (2.5) allows it
	DefaultSYNRetries    = 6                      // Linux tcp_syn_retries
	DefaultRetries2      = 15                     // Linux tcp_retries2
	DefaultDelayedACK    = 40 * time.Millisecond
	MaxDelayedACK        = 200 * time.Millisecond // RFC 5681 4.2: less than 500 ms; DESIGN.md: at most 200 ms
	DefaultTimeWait      = 60 * time.Second       // 2*MSL with MSL = 30 s, as Linux
	DefaultFinWait2      = 60 * time.Second       // Linux tcp_fin_timeout
	DefaultInitialCwnd   = 10                     // RFC 6928, segments
	DefaultQuickAcks     = 16                     // Linux TCP_MAX_QUICKACKS
	DefaultKeepIdle      = 2 * time.Hour          // RFC 1122 4.2.3.6
	DefaultKeepInterval  = 75 * time.Second
	DefaultKeepCount     = 9
	// DefaultTLPMaxAckDelay is RFC 8985's TLP.max_ack_delay (7.2: implementation
	// specific): what a PTO adds when one segment is in flight, for the peer may
	// hold its ACK that long: Linux delays up to 200 ms (TCP_DELACK_MAX), and
	// adds TCP_RTO_MIN here. A value near the peer's delayed ACK (40 ms) makes
	// the probe race that ACK. With MinRTO at 200 ms the RTO then comes first.
	DefaultTLPMaxAckDelay = MaxDelayedACK
	// DefaultTLPSlack is added to 2*SRTT in every PTO (Linux's
	// TCP_TIMEOUT_MIN): on a sub-millisecond path 2*SRTT is within the
	// scheduling jitter of the ACK path and of the timer's own wake-up, and a
	// probe would go out ahead of ACKs already on their way.
	DefaultTLPSlack = 2 * time.Millisecond
)

// Config configures an endpoint (and, through a Listener, the endpoints it
// accepts). The zero value of each field means its default; use the Disable*
// booleans to turn the default-on options off.
type Config struct {
	MSS int // the MSS we announce (receive side) over IPv4; default 1460
	// MSS6 is the MSS announced over IPv6 (a connection whose local address
	// is IPv6): zero means MSS less 20, the IPv6 header's extra bytes (RFC
	// 8200: MSS = MTU - 60).
	MSS6       int
	SendBuffer int // bytes; bounds Write
	// SendBufferMax is what the send buffer may grow to while a bulk
	// sender keeps it full (autoGrowSendBuffer, as Linux's tcp_wmem[2]):
	// zero means DefaultSendBufferMax when SendBuffer is left to its
	// default, and SendBuffer (no growth) when it is set.
	SendBufferMax int
	RecvBuffer    int // bytes; the receive window

	InitialRTO time.Duration
	MinRTO     time.Duration
	MaxRTO     time.Duration
	// LinuxRTO computes the RTO as Linux does (tcp_rtt_estimator keeps its
	// rttvar at tcp_rto_min at least, __tcp_set_rto adds it to SRTT): RTO =
	// SRTT + max(4*RTTVAR, MinRTO) instead of RFC 6298 (2.2)-(2.4)'s
	// max(SRTT + 4*RTTVAR, MinRTO). On a path of steady RTT the RTO is then
	// SRTT + MinRTO rather than MinRTO: 300 ms against 212 ms at a 100 ms RTT.
	// Off by default (RFC 6298); the packetdrill shim turns it on, as the
	// scripts assume Linux's timers.
	LinuxRTO bool

	// SYNRetries: SYN retransmissions of an active open (and SYN-ACK ones
	// after a simultaneous open) before giving up; -1 means none. A
	// Listener's half-open connections use ListenerConfig.SynAckRetries.
	SYNRetries int
	Retries2   int // RTO expirations in a row (no progress) before giving up
	// UserTimeout (RFC 5482): the longest time sent data may stay
	// unacknowledged before the connection is aborted. Zero means none.
	UserTimeout time.Duration

	// Keepalive (RFC 1122 4.2.3.6): off unless KeepAlive is set.
	KeepAlive    bool
	KeepIdle     time.Duration
	KeepInterval time.Duration
	KeepCount    int

	DelayedACK time.Duration // default 40 ms, at most MaxDelayedACK; negative disables
	// QuickAcks: how many data segments are ACKed at once, without delay, at
	// the start of a connection and when data comes after more than an RTO
	// without any (Linux's quickack mode: the peer's slow start, or its
	// restart, is not held back by our delayed ACKs; RFC 1122 4.2.3.2 lets
	// an ACK be delayed, never requires it). At most RecvBuffer/(2 MSS), at
	// least 2. Zero means DefaultQuickAcks; negative none.
	QuickAcks int
	TimeWait  time.Duration // 2*MSL
	FinWait2  time.Duration // FIN_WAIT_2 timeout after Close

	InitialCwnd int // segments

	// CUBIC makes congestion control CUBIC (RFC 9438: cwnd reduced to 0.7
	// of itself on loss, cubic growth in time; Linux's default) instead of
	// NewReno (RFC 5681, RFC 6582: halved, one segment per RTT). NewReno is
	// the default: in tcpwheel compare's bulk transfers to the Linux kernel
	// at 1% and 5% random loss, over TUN (sub-millisecond RTTs, where CUBIC
	// grows as its Reno-friendly region, 0.53 segments per RTT), it was the
	// faster (2026-11-23; CHANGELOG). The packetdrill shim turns it on, as
	// the scripts assume Linux's default.
	CUBIC bool
	// SlowStartAfterIdle restarts slow start when data is written after the
	// connection sent none for more than an RTO (RFC 5681 4.1; as Linux's
	// tcp_slow_start_after_idle, tcp_cwnd_restart: cwnd halved for each RTO
	// of the idle time, down to the initial window at least). Off by
	// default (Linux's default is on; the conformance scripts turn it off but
	// for the ones that test it): a bulk sender that pauses keeps its window.
	SlowStartAfterIdle bool

	// PushPolicy says which data segments carry PSH: PushEvery (the zero
	// value) or PushLinux. PushEvery is the default: with PushLinux, 20 MB
	// uploads to the Linux kernel over TUN were slower at every loss rate
	// (2026-11-23, integration/results/linux-policies-2026-11-23.txt; a
	// Linux receiver ACKs a full-sized PSH segment as soon as its reader
	// took the data, and holds other ACKs for every second segment or its
	// 40 ms timer). The packetdrill shim sets PushLinux, as the scripts
	// assert Linux's marking.
	PushPolicy PushPolicy
	// TSOMinSegs is the least TSO chunk of PushLinux, in segments (Linux's
	// tcp_min_tso_segs): zero means 2.
	TSOMinSegs int

	// Nagle turns on Nagle's algorithm (RFC 896, RFC 1122 4.2.3.4) with
	// Minshall's refinement, as Linux has it: a segment short of a full one
	// waits while an earlier short segment is unacknowledged. Off by default,
	// as Go's net.TCPConn (TCP_NODELAY); Endpoint.SetNoDelay changes it.
	Nagle bool

	// DisableRACKTLP turns off RACK-TLP (RFC 8985): time-based loss detection
	// and tail-loss probes. Loss is then detected by three duplicate ACKs
	// (RFC 5681, RFC 6582, with SACK holes resent) and the RTO alone.
	DisableRACKTLP bool
	// DisableRecoveryProbe turns off the probe in fast recovery: with it on
	// (and RACK-TLP on), a connection in fast recovery that hears no ACK for a
	// PTO sends one probe, as TLP does outside recovery, instead of waiting for
	// the RTO. RFC 8985 7.2 schedules no probe in recovery, for the ACK clock
	// runs there; when the ACKs that carry it are lost (a receiver that
	// compresses its SACKs sends few), nothing else restarts it before the RTO
	// (200 ms at least). Off, the stack follows RFC 8985 7.2 to the letter.
	DisableRecoveryProbe bool
	// TLPMaxAckDelay is RFC 8985 7.2's TLP.max_ack_delay, added to the probe
	// timeout when a single segment is in flight, whatever it carries (our FIN
	// too, as Linux adds TCP_RTO_MIN when packets_out == 1). Zero means
	// DefaultTLPMaxAckDelay; negative means none.
	TLPMaxAckDelay time.Duration
	// TLPSlack is added to 2*SRTT in every PTO, or TLPMaxAckDelay if larger
	// where that applies. Zero means DefaultTLPSlack; negative means none.
	TLPSlack time.Duration
	// FINJoinsData says that the Output sends a bare FIN that follows a
	// data segment at the same instant on that segment, as one packet
	// (data+FIN): package stack sets it on a device that takes GSO frames
	// (stack/offload.go). The tail-loss probe then counts the two as one
	// packet in flight (TLPMaxAckDelay applies), as Linux counts a FIN
	// on the data's skb (packets_out == 1). (On a device without TSO6 an
	// IPv6 connection's two still leave as two packets, counted as one all
	// the same: its probe waits the longer timeout for them.)
	FINJoinsData bool
	// GSOMax is the most data one segment of new data may carry, in bytes:
	// when it is at least two send MSS, a bulk sender sends its full-sized
	// segments up to that many bytes at a time as one Segment (TSO, as
	// Linux's tcp_write_xmit sends one skb of up to 64 KB), whose
	// Segment.GSOSize is the MSS the Output cuts it at: the packets are the
	// ones the MSS-sized segments would have been. It is one in-flight
	// segment (one txSeg, one RTO entry) until an event needs a part of it
	// (a SACK block, a duplicate ACK, an RTO, a probe, a smaller path MTU:
	// splitGSO cuts every such segment into its MSS pieces, as Linux's
	// tcp_fragment). Only while nothing is being recovered, with
	// PushEvery. Zero (the default) sends one MSS per segment, and so
	// does a negative value, which package stack leaves as it is: it sets
	// a zero GSOMax (stack.Config.TCP, as FINJoinsData) to a GSO frame's
	// payload on a device that takes GSO frames, and a recording keeps it.
	GSOMax int
	// DisableHalfCwndChunks sends new data in chunks as large as the
	// windows and GSOMax allow, with no Segment.ChunkEnd, as before
	// 2026-11-24. By default a chunk (a TSO segment, or the MSS-sized
	// segments a frame joins) is at most half cwnd, as Linux's
	// tcp_cwnd_test cuts its skbs, so that a flight leaves as two GSO
	// frames or more and draws two ACKs or more from a receiver that ACKs
	// each frame it takes whole (gso.go, "Chunks"). Recordings from
	// before then replay with it set.
	DisableHalfCwndChunks bool
	// GSOAcrossWrap lets a TSO segment span the place where the send
	// buffer's storage wraps (its payload then a copy) instead of ending
	// there. Package stack sets it on a recording stack and on a replay:
	// the storage is the application's ring live and another in the
	// replay, so a cut at its wrap made a recording's segments and its
	// replay's differ.
	GSOAcrossWrap bool

	DisableTimestamps  bool
	DisableSACK        bool
	DisableWindowScale bool
	// DisableAckCoalescing sends the ACK of every second full-sized segment,
	// and of every out-of-order one, at once even when the Output would hold
	// it to the end of its input batch (AckHolder): for captures whose replay cannot know the batches
	// (a plain pcap shows when packets were read, not which were handled
	// together), and for measuring what coalescing changes.
	DisableAckCoalescing bool
	// OutOfOrderAcksAtOnce ACKs each out-of-order segment as it arrives
	// (RFC 5681 4.2) even when the Output holds ACKs to the end of its
	// input batch (AckHolder). By default, with SACK on, a segment that
	// extends the SACK block of the out-of-order segment before it waits
	// for the batch's end, one ACK for the run, as a Linux receiver's GRO
	// merges a run of segments and ACKs it once; a segment that opens a
	// block is ACKed at once, so the peer learns of each hole as before.
	// Without SACK every one goes at once (the peer's fast retransmit
	// counts duplicate ACKs). A download from the kernel over
	// a plain TUN at 1% loss sent 530-630 ACKs per MB, one per segment
	// above a hole, and the stack and the kernel spent their CPU on them
	// (tcpwheel compare -no-offload, 2026-11-24). Recordings from before
	// then replay with it set.
	OutOfOrderAcksAtOnce bool

	// TraceTimers keeps a log of the endpoint's timer expiries (Info.TimerLog:
	// each timer's start, deadline and the instant its expiry ran, on the
	// endpoint's clock), for tests against a real peer on a busy machine,
	// which can then tell a timer that ran a wrong duration from a loop that
	// ran it late. Off, the endpoint keeps none (Info.LastRTO is always kept).
	TraceTimers bool

	// ISN picks the initial sequence number; nil means RFC 6528: a keyed hash of
	// the 4-tuple plus a 4 µs clock.
	ISN ISNFunc
	// TSOffset picks the offset of a connection's timestamp clock (RFC 7323
	// 5.4); nil means NewTSOffset's: a keyed hash of the local and remote
	// addresses, ports left out, as Linux's secure_tcp_ts_off. The TSvals
	// of successive connections between two addresses then come from one
	// clock and grow, so that a new SYN to a 4-tuple the peer still holds
	// in TIME-WAIT carries a TSval newer than the old connection's last,
	// which is what lets the peer take it as a new incarnation (RFC 6191
	// 2; Linux's tcp_timewait_state_process). An offset of its own per
	// connection is older half the time: the peer answers the SYN with an
	// ACK, which the client resets, and the SYN goes again only at its RTO
	// (1 s). The ISS (TSOffsetISS, the rule before 2026-11-24) grows from
	// one connection of a 4-tuple to the next only while their ISNs come
	// from one RFC 6528 generator (not from two Dials with a nil ISN, which
	// draw one each, nor from a stack's loops, which had one each) and for
	// less than 2.4 hours (its 4 µs clock passes 2^31). A nil TSOffset draws
	// its secret where the Config takes its defaults: each Dial, NewListener
	// and Listener.SetEndpointConfig; connections that are to share the
	// clock share a Config whose TSOffset is set (package stack sets one per
	// stack).
	TSOffset TSOffsetFunc
}

// withDefaults returns cfg with zero fields replaced by the defaults.
func (cfg Config) withDefaults() Config {
	def := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	if cfg.MSS == 0 {
		cfg.MSS = 1460
	}
	if cfg.MSS6 == 0 {
		cfg.MSS6 = max(cfg.MSS-20, 64)
	}
	if cfg.SendBuffer == 0 {
		cfg.SendBuffer = DefaultSendBuffer
		if cfg.SendBufferMax == 0 {
			cfg.SendBufferMax = DefaultSendBufferMax
		}
	}
	cfg.SendBufferMax = max(cfg.SendBufferMax, cfg.SendBuffer)
	if cfg.RecvBuffer == 0 {
		cfg.RecvBuffer = DefaultRecvBuffer
	}
	def(&cfg.InitialRTO, DefaultInitialRTO)
	def(&cfg.MinRTO, DefaultMinRTO)
	def(&cfg.MaxRTO, DefaultMaxRTO)
	if cfg.SYNRetries == 0 {
		cfg.SYNRetries = DefaultSYNRetries
	} else if cfg.SYNRetries < 0 {
		cfg.SYNRetries = 0
	}
	if cfg.Retries2 == 0 {
		cfg.Retries2 = DefaultRetries2
	}
	def(&cfg.KeepIdle, DefaultKeepIdle)
	def(&cfg.KeepInterval, DefaultKeepInterval)
	if cfg.KeepCount == 0 {
		cfg.KeepCount = DefaultKeepCount
	}
	def(&cfg.DelayedACK, DefaultDelayedACK)
	if cfg.QuickAcks == 0 {
		cfg.QuickAcks = DefaultQuickAcks
	}
	def(&cfg.TimeWait, DefaultTimeWait)
	def(&cfg.FinWait2, DefaultFinWait2)
	def(&cfg.TLPMaxAckDelay, DefaultTLPMaxAckDelay) // negative stays: none
	def(&cfg.TLPSlack, DefaultTLPSlack)
	if cfg.InitialCwnd == 0 {
		cfg.InitialCwnd = DefaultInitialCwnd
	}
	if cfg.ISN == nil {
		cfg.ISN = NewISN()
	}
	if cfg.TSOffset == nil {
		cfg.TSOffset = NewTSOffset()
	}
	return cfg
}

// SendBufferLimit is what an endpoint of cfg lets its send buffer grow to:
// SendBufferMax as the defaults leave it (DefaultSendBufferMax when
// SendBuffer is left to its default, else at least SendBuffer).
func (cfg Config) SendBufferLimit() int { return cfg.withDefaults().SendBufferMax }

// Validate reports a configuration that cannot work.
func (cfg Config) Validate() error {
	c := cfg.withDefaults()
	switch {
	case c.MSS < 64 || c.MSS > 65535 || c.MSS6 < 64 || c.MSS6 > 65535:
		return fmt.Errorf("%w: MSS %d (IPv6 %d)", ErrInvalidConfig, c.MSS, c.MSS6)
	case c.SendBuffer < 0 || c.RecvBuffer < 0:
		return fmt.Errorf("%w: negative buffer size", ErrInvalidConfig)
	case c.SendBufferMax < 0:
		return fmt.Errorf("%w: negative buffer size", ErrInvalidConfig)
	case c.RecvBuffer > 1<<30 || c.SendBuffer > 1<<30 || c.SendBufferMax > 1<<30:
		return fmt.Errorf("%w: buffer larger than 1 GiB", ErrInvalidConfig)
	case c.MinRTO <= 0 || c.MaxRTO < c.MinRTO || c.InitialRTO <= 0:
		return fmt.Errorf("%w: RTO bounds %v/%v/%v", ErrInvalidConfig, c.InitialRTO, c.MinRTO, c.MaxRTO)
	case c.DelayedACK > MaxDelayedACK:
		return fmt.Errorf("%w: delayed ACK %v above %v", ErrInvalidConfig, c.DelayedACK, MaxDelayedACK)
	case c.Retries2 < 0 || c.KeepCount < 0 || c.InitialCwnd < 0 || c.UserTimeout < 0:
		return fmt.Errorf("%w: negative count", ErrInvalidConfig)
	}
	return nil
}

// NewISN returns an RFC 6528 generator, the default Config.ISN: ISN = M +
// F(4-tuple, secret), with M a timer ticking every 4 µs and F a keyed hash.
// Each call draws a new secret.
func NewISN() ISNFunc {
	seed := maphash.MakeSeed()
	off := rand.Uint32()
	return func(id ID, now time.Duration) seqnum.Value {
		var h maphash.Hash
		hashAddrs(&h, seed, id)
		h.Write([]byte{byte(id.Local.Port() >> 8), byte(id.Local.Port()), byte(id.Remote.Port() >> 8), byte(id.Remote.Port())})
		return seqnum.Value(uint32(h.Sum64()) + off + uint32(now/(4*time.Microsecond))) // RFC 6528 3
	}
}

// NewTSOffset returns the default Config.TSOffset: a keyed hash of the
// connection's local and remote addresses (not its ports), as Linux's
// secure_tcp_ts_off (a siphash of saddr and daddr with a secret drawn at
// boot). Each call draws a new secret.
func NewTSOffset() TSOffsetFunc {
	seed := maphash.MakeSeed()
	return func(id ID, _ seqnum.Value) uint32 {
		var h maphash.Hash
		hashAddrs(&h, seed, id)
		return uint32(h.Sum64())
	}
}

// hashAddrs keys h with seed and gives it id's local and remote addresses.
func hashAddrs(h *maphash.Hash, seed maphash.Seed, id ID) {
	h.SetSeed(seed)
	b := id.Local.Addr().As16()
	h.Write(b[:])
	b = id.Remote.Addr().As16()
	h.Write(b[:])
}

// TSOffsetISS is the offset rule before 2026-11-24: the connection's ISS,
// an offset of its own per connection (RFC 7323 5.4 allows it, RFC 6191's
// test fails with it half the time, Config.TSOffset). A replay of a
// recording from before then uses it.
func TSOffsetISS(_ ID, iss seqnum.Value) uint32 { return uint32(iss) }

// forID is cfg (with its defaults) for the connection id: over IPv6 its MSS
// is MSS6.
func (cfg Config) forID(id ID) Config {
	if a := id.Local.Addr(); a.Is6() && !a.Is4In6() {
		cfg.MSS = cfg.MSS6
	}
	return cfg
}
