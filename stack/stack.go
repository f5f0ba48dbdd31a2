package stack

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/ring"
	"github.com/tcpwheel/tcpwheel/loop"
	"github.com/tcpwheel/tcpwheel/stack/record"
	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/timer"
	"github.com/tcpwheel/tcpwheel/tun"
)

// Config configures a Stack.
type Config struct {
	// Device is the link the stack sends and receives IP packets on. Required.
	// The stack closes it on Close.
	Device tun.Device
	// Addr is the stack's IPv4 address. Required.
	Addr netip.Addr
	// Addr6 is the stack's IPv6 address. Optional: without it the stack
	// speaks IPv4 only. It needs a device MTU of at least 1280 (RFC 8200
	// 5); TCP's MSS over IPv6 is the MTU less 60 (tcp.Config.MSS6).
	Addr6 netip.Addr
	// MoreAddrs are further addresses of the stack, IPv4 or IPv6 (an IPv6
	// one needs Addr6), as secondary addresses on a Linux interface: the
	// stack answers pings to them, its listeners and UDP sockets on ":port"
	// take connections and datagrams to any of its addresses (a connection
	// keeps the address it was made to), and a listener or socket bound to
	// one of them takes only what comes to it and sends from it. Dials go
	// from Addr or Addr6. Optional.
	MoreAddrs []netip.Addr
	// Prefix is the link's IPv4 prefix, containing Addr (e.g. 198.18.0.0/24).
	// Optional: with it, packets from the prefix's broadcast address are
	// dropped as martians (see Drops.MartianBroadcast), as Linux does.
	Prefix netip.Prefix
	// Tick is the timing wheel's resolution, and the clock granularity G of RFC
	// 6298. Zero means timer.DefaultTick.
	Tick time.Duration
	// Clock is the wheel's clock. Nil means the monotonic clock. NewManual
	// needs a *timer.ManualClock.
	Clock timer.Clock
	// TCP configures every connection. A zero MSS means the device's MTU less
	// 40, and then a zero MSS6 the MTU less 60.
	TCP tcp.Config
	// Backlog bounds each listener's half-open connections and its queue of
	// connections waiting for Accept. Zero means tcp.DefaultBacklog.
	Backlog int
	// TTL of the packets sent. Zero means 64.
	TTL uint8
	// InputQueue is how many packets the device may hold for the stack (a
	// TUN's txqueuelen): the loop holds back the expiry of due timers while
	// that many wait behind its batches (loop.Loop.SetDeferredTurns: one
	// turn per batch of 64, at least loop.MaxDeferredTurns), so that an ACK
	// still in the queue when its timer came due stops the timer. Zero means
	// loop.MaxDeferredTurns batches (16384 packets, more than netns's default
	// queue of 10000); at most loop.MaxDeferredTurnsLimit batches. A bigger
	// queue with the default let a burst of 20,000 connections' timers fire
	// while their ACKs still waited (1-2% of the segments resent in vain).
	InputQueue int
	// RealTime, if not zero, is the SCHED_FIFO priority (loop.MinRealTime to
	// loop.MaxRealTime) of the loop's thread (Loop.SetRealTime): on a busy
	// machine its timers and packets then wait for no normally scheduled
	// task. Linux only. New fails where it is not permitted, with an error
	// that says why and matches unix.EPERM: whoever asked for it should know
	// that they do not have it. NewManual ignores it.
	RealTime int
	// LoopThread says how the loops hold their threads: LoopAuto (the
	// default), LoopLocked, LoopParked or LoopUnlocked. NewManual ignores
	// it.
	LoopThread LoopThread
	// WriteQueue, if not zero, is the number of packets (or GSO frames)
	// the loop may queue for a writer goroutine of its own, which writes
	// them to the device in order while the loop goes on (writer.go): a
	// TUN's write runs the kernel's receive path on the writer's thread,
	// not the loop's. A turn that sends little, and a frame of several
	// segments while the writer is idle, the loop still writes itself.
	// When every slot is taken the loop waits (Stats.Writer counts it).
	// Zero (the default) means the loop writes each packet itself: on the
	// 2-vCPU VM the writer sped up a burst of 20,000 connections and
	// slowed a bulk transfer (see README, "The device writer"). At most
	// MaxWriteQueue; NewManual ignores it (a manual loop writes inline,
	// synchronously). The slots' buffers take up to WriteQueue times
	// 64 KiB on a device with GSO frames.
	WriteQueue int
	// SYNStash, if not zero, is how many new connections' SYNs the direct
	// path may set aside while it reads on (synstash.go, issue 11): pure
	// SYNs to a listener that match no connection, half-open or in
	// TIME-WAIT, are handled once the device is drained (a batch per turn,
	// expiry between), after the segments of the connections that exist
	// that were queued behind them; a full stash hands its oldest SYN to the
	// listener at once. Under a burst, a client's first data then waits
	// behind fewer SYNs than its tail-loss probe's timeout allows for.
	// Zero (the default) handles each SYN as it is read. At most
	// MaxSYNStash. Not with Record (a recording replays each packet where it
	// was read): New fails with ErrConfig; NewManual, which has no direct
	// path, ignores it.
	SYNStash int
	// Logger receives the stack's events: connections that end in an error
	// (reset, timed out, aborted) at info, and every packet dropped, with its
	// reason (the stack's, the connection's or the listener's counter), at
	// debug (see log.go). Nil discards them.
	Logger *slog.Logger
	// Record, if set, receives a flight recording of the stack (package
	// stack/record): a pcapng file of every packet it handles and sends,
	// with what a replay needs to run it again exactly (the loop's expiries
	// and batches, the application's calls, the ISNs). tcpdump and Wireshark
	// read it; `tcpwheel replay` and package stack/replay replay it. It is
	// encoded on the loop into 1 MiB buffers, which a goroutine writes to
	// Record in order (record.Writer); Close flushes it (not closing
	// Record). A write error ends the recording, not the stack: RecordErr
	// reports it.
	Record io.Writer
	// RecordPayload records TCP and UDP packets whole. Without it the
	// recording keeps their headers and lengths only (the stack's behaviour
	// does not depend on the bytes; the recorder checks the checksums of
	// those it handles), a thirtieth of the bytes of a bulk transfer's
	// recording, and its replay is exact all the same, less the payload
	// bytes and the checksums over them.
	RecordPayload bool
	// Loops is the number of event loops the stack runs, each on a
	// goroutine of its own (LoopThread) with a timing wheel of its own
	// (loops.go). 0 and 1 mean
	// one loop on Device, as before. With more, Device and Queues are the
	// queues of one multi-queue TUN (tun.OpenQueues), one per loop, the
	// kernel spreading the flows over them by hash: a connection lives on
	// the loop whose queue brought its SYN (or that dialed it), and a
	// packet of it that comes on another queue is handed to that loop
	// (Stats.Loops counts such handoffs). Listeners take connections on
	// every loop into one accept queue; UDP sockets, ICMP and IP
	// reassembly live on the first loop. At most MaxLoops. Not with Record
	// (a recording is of one loop), Forward, or NewManual: those fail with
	// ErrConfig. On the 2-vCPU VM, 2 loops did not help (see README): 1
	// stays the default.
	Loops int
	// MaxTimeWait bounds the connections the stack keeps in TIME-WAIT after
	// the application closed them (records, tcp.TimeWaitHost; Linux's
	// tcp_max_tw_buckets, 131,072 on the 24 GB VM the project measures
	// on). A server that closes first keeps one per connection it served
	// in the last 2*MSL (a minute by default): a client making 35,000
	// connections a second would have it keep two million, some 400 MB. A
	// connection that reaches TIME-WAIT while the stack holds this many
	// closes at once instead, as on Linux (Stats.TimeWaitOverflows counts
	// them): its 4-tuple and port are free at once, and a segment for it
	// later is answered with a reset. With several loops (Loops) each
	// keeps its share, MaxTimeWait/Loops rounded up. Zero means
	// DefaultMaxTimeWait; at most MaxMaxTimeWait.
	MaxTimeWait int
	// Queues are the devices of the loops after the first (Config.Loops):
	// Loops-1 of them. The stack closes them on Close; a New that fails
	// after starting some loops closes theirs.
	Queues []tun.Device
}

// LoopThread is Config.LoopThread: how a loop's goroutine holds its thread.
// A locked loop (loop.New) has a thread of its own and sleeps in epoll_wait;
// an unlocked one (loop.NewUnlocked) sleeps in epoll_wait too but keeps no
// thread; a parked one (loop.NewParked) sleeps in Go's netpoller, its P free
// for other goroutines meanwhile.
type LoopThread uint8

const (
	// LoopAuto parks the loops when they are as many as the Ps or more
	// (runtime.GOMAXPROCS when New runs), locks them with RealTime, and
	// unlocks them otherwise. A loop sleeping in epoll_wait holds its P,
	// and a goroutine it readies (a Conn's reader, a handler) waits until
	// another P steals it or the runtime takes the P back (sysmon: 20 µs
	// to 10 ms on): with as many loops as Ps, that was every goroutine.
	// With GOMAXPROCS=1 on the 2-vCPU VM, parked: wrk 2.0x the requests/s,
	// ab 1.4x the connections/s, a download 1.7x the MB/s of a locked
	// loop. With GOMAXPROCS=2 and one loop, unlocked against locked: wrk
	// 1.07x, uploads 1.1x, downloads 1.05x, ab level; parked against
	// locked: bulk 1.17-1.23x at less CPU per GB but ab 0.86x (README,
	// stop 27). Since unlocked loops yield to the goroutines they wake with
	// bulk work (loop.Loop.YieldToWoken), parked against unlocked: bulk
	// 0.96-1.0x, wrk 0.92x, ab 0.91x (README, stop 28).
	LoopAuto LoopThread = iota
	// LoopLocked locks every loop to a thread of its own (loop.New): its
	// timer slack 1 ns, Config.RealTime possible.
	LoopLocked
	// LoopParked parks every loop (loop.NewParked). Not with RealTime.
	LoopParked
	// LoopUnlocked runs every loop unlocked (loop.NewUnlocked: in
	// epoll_wait, in Go's netpoller while quiet). Not with RealTime.
	LoopUnlocked
)

// String returns "auto", "locked", "parked" or "unlocked".
func (t LoopThread) String() string {
	switch t {
	case LoopAuto:
		return "auto"
	case LoopLocked:
		return "locked"
	case LoopParked:
		return "parked"
	case LoopUnlocked:
		return "unlocked"
	}
	return fmt.Sprintf("LoopThread(%d)", uint8(t))
}

// MarshalText implements encoding.TextMarshaler: String's name.
func (t LoopThread) MarshalText() ([]byte, error) {
	if t > LoopUnlocked {
		return nil, fmt.Errorf("stack: LoopThread %d out of range", uint8(t))
	}
	return []byte(t.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler: "auto", "locked",
// "parked" or "unlocked" (flag.TextVar's values).
func (t *LoopThread) UnmarshalText(b []byte) error {
	for v := LoopAuto; v <= LoopUnlocked; v++ {
		if string(b) == v.String() {
			*t = v
			return nil
		}
	}
	return fmt.Errorf("loop thread %q: want auto, locked, parked or unlocked", b)
}

// OwnThread reports whether loops of t can hold a thread of their own, as
// Config.RealTime needs: LoopAuto (which locks them with RealTime) and
// LoopLocked; parked and unlocked loops have none.
func (t LoopThread) OwnThread() bool { return t == LoopAuto || t == LoopLocked }

// resolve is what a stack of loops loops runs for t: LoopAuto made
// LoopParked, LoopLocked (with RealTime: the threads' policy) or
// LoopUnlocked.
func (t LoopThread) resolve(loops, realTime int) LoopThread {
	switch {
	case t != LoopAuto:
		return t
	case realTime != 0:
		return LoopLocked
	case runtime.GOMAXPROCS(0) <= loops:
		return LoopParked
	}
	return LoopUnlocked
}

// ErrConfig is wrapped by New for an invalid Config.
var ErrConfig = errors.New("stack: invalid config")

// Stack is a running userspace TCP/IP stack. Its methods are safe for concurrent
// use.
type Stack struct {
	cfg Config
	log *slog.Logger // Config.Logger, or one that discards
	// logDrops: the logger takes debug records, so each packet's drops are
	// looked for (handleLogged); read on the loop only.
	logDrops bool
	dev      tun.Device
	run      loop.Runner  // the loop the stack runs on: a *loop.Loop, or NewManual's *loop.Manual
	wheel    *timer.Wheel // run's
	// subnetBroadcast is cfg.Prefix's broadcast address, a martian source;
	// the zero Addr without one.
	subnetBroadcast netip.Addr
	done            chan struct{} // closed by Close
	// settled is a channel closed from the start: every accepted Conn's
	// settled (newConn), for its handshake is over when it is made.
	settled chan struct{}

	closeOnce sync.Once
	closeErr  error
	readerWG  sync.WaitGroup

	// The direct path, when the device is a tun.Pollable: the loop watches
	// pollFD and reads packets into ibuf itself. Loop only; poll is nil when
	// the reader goroutine reads instead.
	poll   tun.Pollable
	pollFD int
	ibuf   []byte
	// With GRO, ibuf is a buffer of frames (rxframes.go), and lendable is
	// ibuf while readReady handles the frames read into it and no Conn has
	// taken it (lendFrame); nil otherwise.
	frames   *framePool
	lendable []byte
	closing  bool // loop only: Close has begun

	// The reader's queue, handed to the loop.
	inMu sync.Mutex
	inq  [][]byte
	bufs sync.Pool
	// copyBufs are Conn.WriteTo's buffers for the bytes of a receive ring
	// (copy.go), writeToCopy bytes each: a relay's io.Copy made one per
	// connection.
	copyBufs sync.Pool

	// The Conns' posts to the loop (conn.go), for tests: flushes of Write,
	// releases of Read, Close's own (not riding on a flush).
	connPosts struct{ flushes, releases, closes atomic.Uint64 }

	// UDP's direct send path (udpsend.go): udpDirect is set by New, before
	// any socket exists, for a stack on a real loop that is not recording,
	// with mtu, the size of the pool's buffers (bufs); wmu serializes the
	// device's writes, the loop's and the senders'.
	udpDirect bool
	mtu       int
	wmu       sync.Mutex
	udpOut    udpDirectCounters

	// The device writer (writer.go, Config.WriteQueue), or nil.
	wr *devWriter

	// Owned by the loop goroutine.
	conns map[tcp.ID]*Conn
	// tws are the connections in TIME-WAIT after Close, kept as
	// tcp.TimeWait records (timewait.go), with what they share and their
	// counters.
	tws tcp.TimeWaitHost
	// lastWoken is the Conn whose reader the last batch that woke readers
	// with data woke, alone or last (flushAcks, handOffLone); handOffs counts
	// the hand-offs (Stats.Wheel.LoneHandOffs).
	lastWoken *Conn
	handOffs  uint64
	// epSpares are closed endpoints that new connections, accepted or
	// dialed, reuse; retired are the Conns whose endpoints go there at the
	// end of the batch, or the start of the next (recycleEndpoints).
	epSpares   tcp.Spares
	retired    []*Conn
	listeners  map[uint16]*Listener
	ports      map[uint16]int      // local ports in use by connections and listeners
	udp        map[uint16]*UDPConn // the UDP socket on each local port (udp.go)
	obuf       []byte
	ipID       uint16
	rng        *rand.Rand
	counters   Counters
	inputStats InputStats
	closedTCP  tcp.Counters            // counters of endpoints that are gone
	input      string                  // the input path, for Stats: inputDirect, inputReader or inputManual
	icmpLimit  icmpLimiter             // the ICMP errors' rate limit (icmplimit.go)
	reasm      reassembler             // IP reassembly (reasm.go)
	bigbuf     []byte                  // a packet larger than the MTU, sent in fragments (frag.go)
	fragIDs    fragIDs                 // the identifications of fragmented IPv6 datagrams (frag.go)
	pmtu       pmtuCache               // path MTUs learned from ICMP, by destination (pmtu.go)
	fwd        *forwarder              // forwarding (forward.go), or nil
	more       map[netip.Addr]struct{} // Config.MoreAddrs (addrs.go), or nil

	// The flight recorder (flight.go). Loop only.
	rec       sink           // nil: not recording
	recw      *record.Writer // Config.Record's writer, or nil
	play      source         // a Playback's recording, or nil
	sendAt    time.Duration  // the last SendTime read, for the next packet out
	hasSendAt bool
	// skipChecksum: a Playback hands in a packet whose payload the recording
	// did not keep (zeros in its place): its TCP or UDP checksum was checked
	// when recorded.
	skipChecksum bool

	// Link offloads (offload.go): the frame of TCP segments being built,
	// and what the device's frames carry. Loop only.
	gso       gsoState
	cong      CongestedDevice // the device, if it is one (localcong.go; set by initOffload)
	gro       bool            // the direct path reads frames (tun.Offloader's GRO)
	csumValid bool            // the packet being handled has a verified or partial checksum
	offStats  OffloadStats

	// ACK coalescing (output.HoldAck): inBatch while a batch of input is
	// being handled (from its first packet to endBatch), and the endpoints
	// whose ACKs wait for its end. Loop only.
	inBatch  bool
	heldAcks []*tcp.Endpoint
	// syns are the new connections' SYNs set aside (Config.SYNStash,
	// synstash.go). Loop only.
	syns synStash
	// fills are the Conns that data came to during the batch: each moves it
	// into its own buffer, and wakes its reader, once at the batch's end
	// (Conn.fill). Loop only.
	fills []*Conn
	// accepts are the connections accepted during the batch, handed to
	// their listeners' Accept at its end (handOver), after the batch's
	// data went into the Conns. Loop only.
	accepts []heldAccept
	// spares is the buffer storage, ring.MinCap bytes each, that closed
	// Conns were done with (Conn.recycle), for the next Conns' rings
	// (newConn): a connection that moves a few small messages, as ab's
	// churn does, allocates none. At most maxSpares. Loop only.
	spares [][]byte
	// wakes are the readers whose wake a batch held back for one more turn
	// (Conn.wakeHeld): input was waiting at the turn's end (wakeReaders).
	wakes     []*Conn
	wakesHeld bool // wakes has been held one turn already
	// watched: the loop's epoll watches pollFD (startPolling), which
	// wakeReaders may poll too; only then are wakes held.
	watched bool

	// Several loops (Config.Loops, loops.go): grp ties this stack, one
	// loop's, to the others, of which it is the shard'th; nil with one
	// loop. handedIn is set while a packet another loop handed over is
	// handled (it is ours, whatever the owner table says); handoffs counts
	// them. grp is shared (under its own lock); the rest is the loop's.
	grp      *loopGroup
	shard    int
	handedIn bool
	handoffs handoffCounters
}

// The input paths, as Stats.InputPath reports them.
const (
	inputDirect = "direct" // the loop watches the device's descriptor and reads it
	inputReader = "reader" // a reader goroutine reads the device and posts to the loop
	inputManual = "manual" // NewManual: the caller injects packets
)

// New starts a stack on cfg.Device, with a loop (loop.Loop) of its own. If the
// device is a tun.Pollable the loop watches its descriptor and reads packets
// itself (the direct path); otherwise a reader goroutine reads them and posts
// them to the loop (the reader path). Stats.InputPath says which.
func New(cfg Config) (*Stack, error) {
	if cfg.Loops != 0 && cfg.Loops != 1 || len(cfg.Queues) > 0 {
		return newLoops(cfg) // loops.go: more, or a bad count
	}
	return newLoop(cfg, nil, 0)
}

// newLoop is New for one loop: the stack's only one, or the shard'th of
// grp's.
func newLoop(cfg Config, grp *loopGroup, shard int) (*Stack, error) {
	s, err := newStack(cfg)
	if err != nil {
		return nil, err
	}
	s.grp, s.shard = grp, shard
	newRun := loop.New
	switch cfg.LoopThread.resolve(1, cfg.RealTime) { // newLoops chose for its loops
	case LoopParked:
		newRun = loop.NewParked
	case LoopUnlocked:
		newRun = loop.NewUnlocked
	}
	l, err := newRun(s.wheel)
	if err != nil {
		return nil, err
	}
	if cfg.RealTime != 0 {
		if err := l.SetRealTime(cfg.RealTime); err != nil {
			l.Close()
			return nil, fmt.Errorf("stack: %w", err)
		}
	}
	if turns := (cfg.InputQueue + maxReadBatch - 1) / maxReadBatch; turns > loop.MaxDeferredTurns {
		if err := l.SetDeferredTurns(turns); err != nil {
			l.Close()
			return nil, fmt.Errorf("%w: InputQueue %d: %w", ErrConfig, cfg.InputQueue, err)
		}
	}
	s.run = l
	if s.recw != nil {
		if err := l.SetExpireHook(s.onExpire); err != nil {
			l.Close()
			return nil, fmt.Errorf("stack: %w", err)
		}
	}
	s.udpDirect, s.mtu = s.rec == nil, cfg.Device.MTU() // udpsend.go
	if cfg.WriteQueue > 0 {
		s.startWriter(cfg.WriteQueue) // writer.go; before the hook's Post
		s.gso.vdev = nil              // a slot holds the frame whole (offload.go)
	}
	if s.gso.on || cfg.WriteQueue > 0 {
		if err := l.SetTurnHook(s.endTurn); err != nil {
			l.Close()
			s.stopWriter()
			return nil, fmt.Errorf("stack: %w", err)
		}
		s.gso.coalesce = s.gso.on
	}
	if s.startPolling() {
		s.input = inputDirect
		return s, nil
	}
	s.input = inputReader
	s.readerWG.Add(1)
	go s.reader()
	return s, nil
}

// newStack checks cfg, fills in its defaults, and returns a stack with its wheel
// but no loop yet.
func newStack(cfg Config) (*Stack, error) {
	if cfg.Device == nil {
		return nil, fmt.Errorf("%w: no device", ErrConfig)
	}
	if cfg.Loops != 0 && cfg.Loops != 1 || len(cfg.Queues) > 0 {
		return nil, fmt.Errorf("%w: %d loops: only New runs several", ErrConfig, cfg.Loops)
	}
	if cfg.LoopThread > LoopUnlocked {
		return nil, fmt.Errorf("%w: LoopThread %v", ErrConfig, cfg.LoopThread)
	}
	if cfg.RealTime != 0 && !cfg.LoopThread.OwnThread() {
		return nil, fmt.Errorf("%w: RealTime with %v: the loop has no thread of its own", ErrConfig, cfg.LoopThread)
	}
	if !cfg.Addr.Is4() {
		return nil, fmt.Errorf("%w: address %v is not IPv4", ErrConfig, cfg.Addr)
	}
	if cfg.Prefix.IsValid() && (!cfg.Prefix.Addr().Is4() || !cfg.Prefix.Contains(cfg.Addr)) {
		return nil, fmt.Errorf("%w: prefix %v is not an IPv4 prefix holding %v", ErrConfig, cfg.Prefix, cfg.Addr)
	}
	if cfg.TTL == 0 {
		cfg.TTL = 64
	}
	mtu := cfg.Device.MTU()
	if mtu < 68 {
		return nil, fmt.Errorf("%w: device MTU %d is below IPv4's 68", ErrConfig, mtu)
	}
	if cfg.Addr6.IsValid() {
		if err := checkAddr6(cfg.Addr6, mtu); err != nil {
			return nil, err
		}
	}
	more, err := checkMoreAddrs(cfg, mtu)
	if err != nil {
		return nil, err
	}
	if cfg.TCP.MSS == 0 {
		cfg.TCP.MSS = mtu - ipv4HeaderLen - tcp.HeaderMinSize
		if cfg.TCP.MSS6 == 0 && mtu >= ipv6MinMTU {
			cfg.TCP.MSS6 = mtu - ipv6HeaderLen - tcp.HeaderMinSize
		}
	}
	if err := cfg.TCP.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if cfg.RealTime != 0 && (cfg.RealTime < loop.MinRealTime || cfg.RealTime > loop.MaxRealTime) {
		return nil, fmt.Errorf("%w: real-time priority %d outside [%d, %d]", ErrConfig, cfg.RealTime, loop.MinRealTime, loop.MaxRealTime)
	}
	if cfg.Backlog <= 0 {
		cfg.Backlog = tcp.DefaultBacklog
	}
	if cfg.InputQueue < 0 || cfg.InputQueue > loop.MaxDeferredTurnsLimit*maxReadBatch {
		return nil, fmt.Errorf("%w: InputQueue %d outside [0, %d]", ErrConfig, cfg.InputQueue, loop.MaxDeferredTurnsLimit*maxReadBatch)
	}
	if cfg.SYNStash < 0 || cfg.SYNStash > MaxSYNStash {
		return nil, fmt.Errorf("%w: SYNStash %d outside [0, %d]", ErrConfig, cfg.SYNStash, MaxSYNStash)
	}
	if cfg.SYNStash > 0 && cfg.Record != nil {
		return nil, fmt.Errorf("%w: SYNStash with Record: a recording replays each packet where it was read, not where a stashed SYN is handled", ErrConfig)
	}
	if cfg.MaxTimeWait < 0 || cfg.MaxTimeWait > MaxMaxTimeWait {
		return nil, fmt.Errorf("%w: MaxTimeWait %d outside [0, %d]", ErrConfig, cfg.MaxTimeWait, MaxMaxTimeWait)
	}
	cfg.MaxTimeWait = cfg.maxTimeWait()
	if cfg.WriteQueue < 0 || cfg.WriteQueue > MaxWriteQueue {
		return nil, fmt.Errorf("%w: WriteQueue %d outside [0, %d]", ErrConfig, cfg.WriteQueue, MaxWriteQueue)
	}
	w, err := timer.New(timer.Config{Tick: cfg.Tick, Clock: cfg.Clock})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	s := &Stack{
		cfg:             cfg,
		subnetBroadcast: directedBroadcast(cfg.Prefix),
		more:            more,
		dev:             cfg.Device,
		wheel:           w,
		done:            make(chan struct{}),
		settled:         make(chan struct{}),
		conns:           make(map[tcp.ID]*Conn),
		listeners:       make(map[uint16]*Listener),
		ports:           make(map[uint16]int),
		udp:             make(map[uint16]*UDPConn),
		obuf:            make([]byte, mtu),
		rng:             rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}
	close(s.settled)
	s.tws = tcp.TimeWaitHost{Timers: s.timers(), Output: s.out(), Closed: s.forgetTimeWait, Max: cfg.MaxTimeWait} // timewait.go
	s.syns = newSYNStash(cfg.SYNStash)                                                                            // synstash.go
	s.bufs.New = func() any { b := make([]byte, mtu); return &b }
	s.copyBufs.New = func() any { b := make([]byte, writeToCopy); return &b }
	s.initOffload() // offload.go
	// A bare FIN right after a data segment joins its frame: TCP's
	// tail-loss probe counts the two as one packet (offload.go).
	s.cfg.TCP.FINJoinsData = s.cfg.TCP.FINJoinsData || s.gso.on
	// TCP sends its full-sized segments up to a GSO frame's worth at a
	// time, which the stack cuts (sendTSO, offload.go).
	if s.gso.on && s.cfg.TCP.GSOMax == 0 {
		s.cfg.TCP.GSOMax = gsoMax
	}
	// A recording's TSO segments must not depend on where the Conn's ring
	// wraps: the replay's storage is another (tcp.Config.GSOAcrossWrap).
	s.cfg.TCP.GSOAcrossWrap = s.cfg.TCP.GSOAcrossWrap || cfg.Record != nil
	s.setLogger(cfg.Logger)
	s.cfg.TCP.ISN = s.wrapISN(s.cfg.TCP.ISN)
	s.cfg.TCP.TSOffset = s.wrapTSOffset(s.cfg.TCP.TSOffset)
	if cfg.Record != nil {
		rw, err := record.NewWriter(cfg.Record, s.recordHeader(time.Now()))
		if err != nil {
			return nil, err
		}
		s.rec, s.recw = rw, rw
	}
	return s, nil
}

// maxReadBatch bounds the packets the loop handles per turn, on either input
// path, so that a flood cannot starve the timers, whose expiry follows the
// input in each turn (package loop, "Order of work"). A burst larger than this
// waits in the device (or the reader's queue) for the next turn, a few µs
// later (our TUN's kernel queue holds 10000 packets, see tun/netns). It also
// lets the application's calls, posted at the start of each turn, in between
// batches: with 256 packets (370 KB) per turn a download's Reads came too
// seldom, the 256 KB receive window closed, and a lost window update stalled
// the sender for its persist timer; 20 MB down at 5% loss took a median of
// 1.34 s over 15 runs against 0.48 s with 64.
const maxReadBatch = 64

// MaxSYNStash bounds Config.SYNStash.
const MaxSYNStash = 1 << 16

// DefaultMaxTimeWait is Config.MaxTimeWait's default: 262,144 records of
// some 200 bytes each (the record and its index entry), about 50 MB when
// full. (Linux sizes its own bound from its hash table of connections, and
// so from the machine's memory.)
const DefaultMaxTimeWait = 1 << 18

// maxTimeWait is MaxTimeWait with its default: the stack's bound (newStack)
// or the one newLoops shares out among the loops.
func (c *Config) maxTimeWait() int {
	if c.MaxTimeWait == 0 {
		return DefaultMaxTimeWait
	}
	return c.MaxTimeWait
}

// MaxMaxTimeWait bounds Config.MaxTimeWait: a record's slot is an int32.
const MaxMaxTimeWait = 1 << 30

// startPolling sets up the direct path if the device allows it: the loop's
// epoll watches the device's descriptor and readReady reads the packets on the
// loop, with no reader goroutine and no handoff. It reports whether it did.
func (s *Stack) startPolling() bool {
	p, ok := s.dev.(tun.Pollable)
	if !ok {
		return false
	}
	fd, err := p.ReadFD()
	if err != nil {
		return false
	}
	// Set before Watch, whose Post orders these writes before readReady.
	s.poll, s.pollFD, s.ibuf = p, fd, make([]byte, s.dev.MTU())
	if s.gro = s.groDevice(); s.gro {
		if s.frames == nil {
			s.frames = newFramePool(tun.MaxFrame)
		}
		s.ibuf = s.frames.get()
	}
	if err := s.run.Watch(fd, s.readReady); err != nil {
		s.poll, s.ibuf = nil, nil // never registered: readReady cannot run
		s.noGRO()
		return false
	}
	s.watched = true
	return true
}

// stopPolling takes the device's descriptor out of the loop's epoll. It runs on
// the loop.
func (s *Stack) stopPolling() {
	if s.poll == nil {
		return
	}
	_ = s.run.Unwatch(s.pollFD)
	s.poll, s.ibuf, s.watched = nil, nil, false
}

// readReady runs on the loop when the device's descriptor is readable: it reads
// and handles up to maxReadBatch packets, each in the loop's own buffer (the
// tcp package copies what it keeps). Readiness is level-triggered, so packets
// left over are read on the next round of the loop. It reports whether it
// stopped at maxReadBatch, with packets possibly left in the device: the loop
// then holds back the expiry of the timers due until they are read (the ACKs
// that make them moot may be among them), for at most loop.MaxDeferredTurns
// batches, more packets than the TUN's default queue holds, or enough for
// Config.InputQueue.
func (s *Stack) readReady() (more bool) {
	if s.poll == nil {
		return false
	}
	read := 0
	s.syns.on = s.syns.ring != nil
	defer func() {
		s.inputStats.add(read)
		if read > 0 {
			s.endBatch()
		}
		// A full batch (more) may leave SYNs stashed (synstash.go); a
		// drained device, or an error, hands them to the listeners, after
		// the batch's held ACKs went out: a batch of their own.
		if s.stashDue(more) > 0 {
			s.endBatch()
		}
	}()
	for range maxReadBatch {
		n, err := s.readNonblock()
		if err != nil {
			switch {
			case errors.Is(err, tun.ErrWouldBlock):
				return false
			case errors.Is(err, io.ErrShortBuffer):
				read++
				s.counters.Drops.Truncated++
				continue
			case errors.Is(err, tun.ErrBadVnetHdr):
				read++
				s.counters.Drops.BadVnetHeader++
				continue
			}
			// Anything else: count it and fall back to the reader goroutine,
			// which handles device errors (and a closed device) as before.
			s.counters.DeviceErrors++
			s.stopPolling()
			s.noGRO()
			if !s.closing {
				s.input = inputReader
				s.readerWG.Add(1)
				go s.reader()
			}
			return false
		}
		read++
		if s.gro {
			s.lendable = s.ibuf
			s.handleFrames(s.ibuf[:n]) // offload.go
			if s.lendable == nil {
				s.ibuf = s.frames.get() // a Conn took it
			}
			s.lendable = nil
			continue
		}
		s.handlePacketNow(s.ibuf[:n])
	}
	return true
}

// handlePacketNow moves the wheel's Now to the clock and handles pkt: timers
// started for the packet (a delayed ACK, a tail-loss probe, the RTO of the
// segments its ACK lets out) measure from when it is handled, not from the
// start of the batch, which would make them fire early by the time the batch
// took so far. It fires nothing (timer.Wheel.MoveNow): input comes before
// expiry, so a timer that came due before the loop got to the packet, and that
// the packet stops (its ACK), does not fire; the loop's expiry after the input
// runs the rest (see package loop, "Order of work").
func (s *Stack) handlePacketNow(pkt []byte) {
	if len(s.retired) > 0 && !s.inBatch && len(s.heldAcks) == 0 {
		s.recycleEndpoints() // timewait.go: Conns a posted Close retired
	}
	s.wheel.MoveNow(s.wheel.Clock().Now())
	s.inBatch = true // until endBatch
	if s.rec != nil {
		s.recordIn(pkt)
	}
	if s.logDrops {
		s.handleLogged(pkt)
		return
	}
	s.handlePacket(pkt)
}

// RecordErr returns the error that ended the flight recording (Config.Record),
// if one did; after Close, including the last flush's.
func (s *Stack) RecordErr() error {
	if s.recw == nil {
		return nil
	}
	var err error
	if s.do(func() { err = s.recw.Err() }) != nil {
		return s.recw.Err() // the loop is gone: no one else touches it
	}
	return err
}

// Addr returns the stack's IPv4 address.
func (s *Stack) Addr() netip.Addr { return s.cfg.Addr }

// Close stops the stack: connections and listeners fail with net.ErrClosed, the
// loop and the reader end, and the device is closed. Connections are not shut
// down gracefully: close them first for that.
func (s *Stack) Close() error {
	if s.grp != nil {
		return s.grp.close() // loops.go
	}
	return s.closeOne()
}

// closeOne is Close for one loop.
func (s *Stack) closeOne() error {
	s.closeOnce.Do(func() {
		s.do(s.closeLoop)
		close(s.done)
		s.closeErr = s.dev.Close()
		s.readerWG.Wait()
		if err := s.run.Close(); err != nil && s.closeErr == nil {
			s.closeErr = err
		}
		if s.recw != nil {
			s.recw.Flush() // its error: RecordErr
		}
	})
	return s.closeErr
}

// closeLoop is Close's part on the loop.
func (s *Stack) closeLoop() {
	s.note(record.StackClose, noConn, 0)
	s.closing = true
	s.stopPolling() // before the device is closed
	defer func() {
		s.flushFrame() // the RSTs of the aborts below
		s.stopWriter() // writes them, and all queued before (writer.go)
	}()
	for _, c := range s.conns {
		c.ep.Abort()
	}
	s.grp.forgetAll(s) // loops.go: whatever the aborts' forgets left (half-open claims)
	for _, l := range s.listeners {
		l.tl.Close()
	}
	for _, u := range s.udp {
		u.forget()
	}
	if s.fwd != nil {
		s.fwd.close()
	}
}

// do runs f on the loop and waits for it. It reports net.ErrClosed if the stack
// is closed and f did not run.
func (s *Stack) do(f func()) error {
	ch := make(chan struct{})
	if err := s.run.Post(func() { f(); close(ch) }); err != nil {
		return net.ErrClosed
	}
	<-ch
	return nil
}

// isDone reports whether the stack is closed.
func (s *Stack) isDone() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// reader reads packets from the device and hands them to the loop in batches:
// it posts a drain only when the queue was empty, so a busy loop takes many
// packets per wakeup.
func (s *Stack) reader() {
	defer s.readerWG.Done()
	for {
		bp := s.bufs.Get().(*[]byte)
		n, err := s.dev.ReadPacket(*bp)
		if err != nil {
			s.bufs.Put(bp)
			if errors.Is(err, io.ErrShortBuffer) {
				s.post(func() { s.counters.Drops.Truncated++ })
				continue
			}
			if errors.Is(err, tun.ErrBadVnetHdr) {
				s.post(func() { s.counters.Drops.BadVnetHeader++ })
				continue
			}
			select {
			case <-s.done:
			default:
				s.post(func() { s.counters.DeviceErrors++ })
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			return
		}
		s.inMu.Lock()
		s.inq = append(s.inq, (*bp)[:n])
		first := len(s.inq) == 1
		s.inMu.Unlock()
		if first {
			s.post(s.drainInput)
		}
	}
}

func (s *Stack) post(f func()) { _ = s.run.Post(f) }

// drainInput runs on the loop, as a posted function, before the turn's expiry:
// it takes up to maxReadBatch packets of the reader's queue and handles them,
// and posts itself again for the rest, which the next turn handles after the
// timers due by then have fired: a flood cannot starve them.
func (s *Stack) drainInput() {
	s.inMu.Lock()
	n := min(len(s.inq), maxReadBatch)
	q := s.inq[:n:n]
	s.inq = s.inq[n:]
	more := len(s.inq) > 0
	if !more {
		s.inq = nil // the reader's next packet posts a drain
	}
	s.inMu.Unlock()
	s.inputStats.add(len(q))
	for i, pkt := range q {
		q[i] = nil
		s.handlePacketNow(pkt)
		pkt = pkt[:cap(pkt)]
		s.bufs.Put(&pkt)
	}
	if len(q) > 0 {
		s.endBatch()
	}
	if more {
		s.post(s.drainInput)
	}
}

// output is the stack as the tcp package's tcp.Output: the send path of every
// endpoint and listener, unexported so that the stack's API does not show it.
type output Stack

var _ tcp.Output = (*output)(nil)

// out returns s as a tcp.Output.
func (s *Stack) out() *output { return (*output)(s) }

// Send implements tcp.Output: see sendSegment, and sendTSO for a TSO
// segment (tcp.Config.GSOMax).
func (o *output) Send(id tcp.ID, seg *tcp.Segment) {
	s := (*Stack)(o)
	if seg.GSOSize > 0 && len(seg.Payload) > seg.GSOSize {
		s.sendTSO(id, seg) // offload.go
		return
	}
	s.sendSegment(id, seg)
}

var _ tcp.AckHolder = (*output)(nil)

// HoldAck implements tcp.AckHolder: while a batch of input is being handled,
// the ACKs of in-order data wait for its end (endBatch, flushAcks), where
// each endpoint sends one for all that the batch brought it. A batch is what
// the loop read in one turn, and it is recorded (record.Batch): a Playback
// holds and flushes the same ACKs at the same instants.
func (o *output) HoldAck(e *tcp.Endpoint) bool {
	s := (*Stack)(o)
	if !s.inBatch {
		return false
	}
	s.heldAcks = append(s.heldAcks, e)
	return true
}

// releaseRead tells the endpoints that data came to during the batch what
// their applications read since (Conn.release), before the batch's ACKs
// go: they then carry the window that opened, and a Read while the Conn is
// lazy (Conn.pace) needs to post nothing. It runs before the batch is
// recorded, so that a Playback (whose Conns are never in fills) releases
// the same bytes, recorded as Reads, before the same ACKs.
func (s *Stack) releaseRead() {
	for _, c := range s.fills {
		c.releaseRead(false)
	}
}

// flushAcks ends the batch: the held ACKs go, in the order they were held.
func (s *Stack) flushAcks() {
	s.inBatch = false
	for i, e := range s.heldAcks {
		s.heldAcks[i] = nil
		e.FlushAck()
	}
	s.heldAcks = s.heldAcks[:0]
	var woken int
	var last *Conn
	var bulk bool // a reader given bulk data (Conn.pace, or more than loneMax): no exchange
	for i, c := range s.fills {
		s.fills[i] = nil
		c.fillDue = false
		unread := c.fill()
		pace := c.pace()
		bulk = bulk || pace || unread > loneMax
		if pace && s.watched && !c.wakeHeld {
			c.wakeHeld = true // wakeReaders, at the turn's end
			s.wakes = append(s.wakes, c)
			continue
		}
		c.wakeHeld = false
		woken, last = woken+1, c
		c.wakeOn(&c.readable)
	}
	s.fills = s.fills[:0]
	if woken > 0 || bulk {
		s.handOffLone(last, woken == 1 && !bulk && last == s.lastWoken)
	}
	s.handOver()
}

// loneMax is the most data a reader may have unread after a batch that
// is an exchange's (handOffLone): a request or an answer, not a bulk
// transfer's data. An upload by curl (64 KB GRO frames) had batches that
// woke its reader alone but not as bulk (Conn.pace) often enough that
// their spells cost it 4% of its rate (3 and 5 pairs).
const loneMax = 16 << 10

// handOffLone follows a batch that woke readers with data, c's last (nil
// if it gave bulk data alone): if it woke c's alone, with no bulk data
// (Conn.pace, loneMax), as the batch before that woke readers did (lone), the
// exchange is one connection's request and answer, and the loop lets the
// reader run on its own thread at once. Woken by a loop that sleeps in
// epoll_wait (LoopUnlocked), the reader waits in the run queue of the P
// that the loop's sleep keeps until another thread steals it, which on
// the 2-vCPU VM meant waking the idle vCPU: 35 µs (median) of a
// forwarded flow's round trip (a Go execution trace), of ~150. A reader
// of the stack's own (an echo, a request's handler) answers through c,
// back to the loop: the loop yields its P to it (loop.Loop.YieldToWoken),
// and finds its answer posted when it goes on, without a wake. A
// forwarded flow's reader (Conn.relayed) answers through another
// descriptor, the relay's socket: the loop sleeps in the netpoller this
// once (loop.Loop.ParkForWoken), its P free for the reader at once. And
// while the exchange stays lone, the loop sleeps in the netpoller
// (loop.Loop.LoneExchange), where a goroutine of this process that the
// netpoller readies runs on its thread too. Under load (wrk's 50 connections, ab's new connection each time) a batch
// seldom wakes the same connection alone twice in a row, and the loop
// sleeps in epoll_wait as before: a park after every forwarded wake made
// wrk through the forwarder 0.92-0.94x (5 pairs).
func (s *Stack) handOffLone(c *Conn, lone bool) {
	s.lastWoken = c
	if lone {
		s.handOffs++
	}
	if l, ok := s.run.(*loop.Loop); ok {
		l.LoneExchange(lone)
	}
	if !lone {
		return
	}
	if c.relayed {
		s.parkForWoken()
	} else {
		s.yieldToWoken()
	}
}

// heldAccept is a connection accepted during a batch, and its listener.
type heldAccept struct {
	l *Listener
	c *Conn
}

// handOver hands the connections accepted during the batch to their
// listeners' Accept. Listener.accept counted the room for them, and only
// this loop sends to acceptq: the send never waits (a full queue would be a
// bug, and resets the connection rather than stop the loop).
func (s *Stack) handOver() {
	for i, h := range s.accepts {
		s.accepts[i] = heldAccept{}
		h.l.held--
		select {
		case h.l.acceptq <- h.c:
		default:
			h.c.abort()
		}
	}
	s.accepts = s.accepts[:0]
}

// parkForWoken is loop.Loop.ParkForWoken, on the stack's loop (a manual
// one has no sleep to choose).
func (s *Stack) parkForWoken() {
	if l, ok := s.run.(*loop.Loop); ok {
		l.ParkForWoken()
	}
}

// yieldToWoken is loop.Loop.YieldToWoken, on the stack's loop (a manual
// loop has none).
func (s *Stack) yieldToWoken() {
	if l, ok := s.run.(*loop.Loop); ok {
		l.YieldToWoken()
	}
}

// wakeReaders runs at the end of the loop's turn, after its writes (the
// batch's ACKs): it wakes the readers of bulk data whose wake flushAcks
// held back (Conn.pace), unless input waits on the device already, which
// the next turn reads at once: then the readers wait for it, once, and are
// woken a turn later with the data of both. The hand-off to a parked
// reader (a thread woken by the loop's) costs more than its Read; a bulk
// upload's ACK often lets the sender's next frame out before the write
// returns.
func (s *Stack) wakeReaders() {
	if len(s.wakes) == 0 {
		return
	}
	if !s.wakesHeld && s.watched && tun.PollReadable(s.pollFD) {
		s.wakesHeld = true
		return
	}
	for i, c := range s.wakes {
		s.wakes[i] = nil
		if c.wakeHeld {
			c.wakeHeld = false
			if c.readerWaits() {
				// A bulk reader's Read takes this batch and comes
				// back (its release, or the next Read's wait): let it
				// run before the loop sleeps.
				s.yieldToWoken()
			}
			c.wakeOn(&c.readable)
		}
	}
	s.wakes, s.wakesHeld = s.wakes[:0], false
}

// sendSegment wraps the segment in an IPv4 or IPv6 header and writes the
// packet to the device. It runs on the loop.
func (s *Stack) sendSegment(id tcp.ID, seg *tcp.Segment) {
	hl := ipHeaderLen(id.Local.Addr())
	n := hl + seg.EncodedLen()
	if n > len(s.obuf) {
		s.counters.Drops.TooBig++
		return
	}
	if s.gso.on && (hl == ipv4HeaderLen || s.gso.v6) { // TCP/IPv6 with TSO6 only
		s.queueSegment(id, seg, hl) // offload.go
		return
	}
	b := s.obuf[:n]
	if _, err := seg.Encode(b[hl:]); err != nil {
		s.counters.Drops.EncodeError++
		return
	}
	s.counters.SegmentsOut++
	tcp.SetChecksum(id.Local.Addr(), id.Remote.Addr(), b[hl:])
	s.writeIP(b, id.Local.Addr(), id.Remote.Addr(), protoTCP)
}

// usePort and releasePort keep the count of users of a local port: the
// stack's, or with several loops the group's (loops.go).
func (s *Stack) usePort(p uint16) {
	if s.grp != nil {
		s.grp.usePort(p, 1)
		return
	}
	s.ports[p]++
}

func (s *Stack) releasePort(p uint16) {
	if s.grp != nil {
		s.grp.usePort(p, -1)
		return
	}
	if s.ports[p]--; s.ports[p] <= 0 {
		delete(s.ports, p)
	}
}

// portInUse reports whether a connection or listener uses the local port p.
func (s *Stack) portInUse(p uint16) bool {
	if s.grp != nil {
		return s.grp.portInUse(p)
	}
	_, ok := s.listeners[p]
	return ok || s.ports[p] > 0
}

// ephemeralPort picks a local port for a connection to remote, from Linux's
// default range, that no listener uses and no connection to remote uses.
func (s *Stack) ephemeralPort(remote netip.AddrPort) (uint16, bool) {
	if s.grp != nil {
		return s.grp.ephemeralPort(s, remote) // loops.go
	}
	return s.pickPort(func(p uint16) bool {
		if _, ok := s.listeners[p]; ok {
			return false
		}
		id := tcp.ID{Local: netip.AddrPortFrom(s.localFor(remote.Addr()), p), Remote: remote}
		return !s.inUse(id)
	})
}

// pickPort returns a port of Linux's default ephemeral range
// (ip_local_port_range, 32768-60999) that free accepts, trying them in order
// from a random one; TCP and UDP each pick from their own port space.
func (s *Stack) pickPort(free func(uint16) bool) (uint16, bool) {
	const lo, hi = 32768, 60999
	start := lo + s.rng.IntN(hi-lo+1)
	for i := 0; i <= hi-lo; i++ {
		if p := uint16(lo + (start-lo+i)%(hi-lo+1)); free(p) {
			return p, true
		}
	}
	return 0, false
}

// register makes c the endpoint for its 4-tuple.
func (s *Stack) register(c *Conn) {
	if s.play != nil {
		s.play.registered(c)
	}
	s.conns[c.id] = c
	if s.isLocal(c.id.Local.Addr()) { // not a forwarded flow's (forward.go)
		s.usePort(c.id.Local.Port())
	}
}

// maxSpares bounds Stack.spares: 1 MiB of storage at most.
const maxSpares = 1024

// spare keeps b, a ring's storage that nothing uses any more, for a new
// Conn's ring (takeSpare), if it is of the size a new ring would allocate
// and there is room. On the loop.
func (s *Stack) spare(b []byte) {
	if len(b) == ring.MinCap && len(s.spares) < maxSpares {
		s.spares = append(s.spares, b)
	}
}

// takeSpare returns storage that spare kept, or nil. On the loop.
func (s *Stack) takeSpare() []byte {
	n := len(s.spares)
	if n == 0 {
		return nil
	}
	b := s.spares[n-1]
	s.spares[n-1] = nil
	s.spares = s.spares[:n-1]
	return b
}

// release gives up what a connection held of the 4-tuple id: its claim
// with other loops, its local port.
func (s *Stack) release(id tcp.ID) {
	if s.grp != nil {
		s.grp.release(id, s)
	}
	if s.isLocal(id.Local.Addr()) {
		s.releasePort(id.Local.Port())
	}
}

// forget removes a connection whose endpoint reached CLOSED.
func (s *Stack) forget(c *Conn) {
	if s.conns[c.id] != c {
		return
	}
	delete(s.conns, c.id)
	if s.lastWoken == c {
		s.lastWoken = nil // handOffLone: no pointer to a Conn gone
	}
	s.flushFrameOf(c.id)                  // offload.go
	if _, tw := s.tws.Lookup(c.id); !tw { // else its TIME-WAIT record holds the 4-tuple and port on (timewait.go)
		s.release(c.id)
	}
	counters := c.ep.Counters() // not Info: the whole snapshot, for its counters
	addTCPCounters(&s.closedTCP, &counters)
	s.logClosed(c)
	if c.isClosed() {
		s.retire(c) // timewait.go
	}
}
