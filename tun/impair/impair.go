// Package impair wraps a tun.Device and drops packets on purpose: seeded
// random loss per direction, targeted rules ("drop the first two SYN-ACKs",
// "drop the next FIN", "drop the 3rd data segment") and free-form hooks.
//
// It sits between the stack and the device:
//
//	stack ── pcap tap ── impair.Device ── device (TUN or tuntest pipe)
//
// Egress is what the stack writes (WritePacket) towards the device; ingress
// is what the stack reads (ReadPacket) from it. A dropped egress packet makes
// WritePacket return nil without calling the wrapped device, as a lossy link
// would; a dropped ingress packet is discarded and ReadPacket reads on.
//
// # Deciding a drop
//
// Each packet of a direction is shown, in this order and always all of them,
// to:
//
//  1. the direction's hook (Config.DropEgress / Config.DropIngress);
//  2. every armed rule of the direction ([Rule]);
//  3. the direction's random loss: one draw from the direction's own PCG
//     generator per packet, whatever the loss rate, the hook or the rules
//     decide.
//
// The packet is dropped if any of them says so. Because every packet
// consumes exactly one draw and each direction has its own generator seeded
// from Config.Seed, the loss pattern of a direction depends only on the seed
// and on the number of packets of that direction before it: not on the
// other direction, on rules, on hooks or on goroutine scheduling between
// ReadPacket and WritePacket. Packet i is lost when its draw u_i < p, so for
// one seed a lower rate drops a subset of what a higher rate drops.
//
// # Rules
//
// A rule counts the packets of its direction that its [Match] selects, from
// the moment it is armed, lets the first Skip of them pass, drops the next
// Count, and is then spent. Every rule counts every matching packet,
// including packets that another rule, the hook or the random loss drops
// too, and including retransmissions: "the Nth data segment" is the Nth
// data-bearing segment the stack wrote after the rule was armed, first
// transmission or not. So
//
//	Rule{Dir: Egress, Match: MatchData, Skip: 2, Count: 1} // drop the 3rd data segment
//	Rule{Dir: Egress, Match: MatchSYNACK, Count: 2}        // drop the first two SYN-ACKs
//	d.DropNext(Egress, MatchFIN, 1)                        // at run time: drop the next FIN
//
// Rules may be added and cleared at any time, from any goroutine. Two rules
// that both claim a packet both count it as dropped; arm one rule with
// Count: 2 to drop two packets.
//
// Packets that are not well-formed IPv4 carrying a whole TCP header (too
// short, another IP version or protocol, a non-first fragment, inconsistent
// lengths) match no TCP rule; only [MatchAny] selects them. Nothing here
// panics on any input.
package impair

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"

	"github.com/tcpwheel/tcpwheel/tun"
)

// ErrConfig is wrapped by Wrap, AddRule, DropNext and SetLoss when given an
// invalid configuration, rule or loss rate.
var ErrConfig = errors.New("impair: invalid configuration")

// Direction says which way a packet travels through the wrapper.
type Direction uint8

const (
	// Egress packets are written by the stack (WritePacket) towards the device.
	Egress Direction = iota + 1
	// Ingress packets are read by the stack (ReadPacket) from the device.
	Ingress
)

// String returns "egress" or "ingress".
func (d Direction) String() string {
	switch d {
	case Egress:
		return "egress"
	case Ingress:
		return "ingress"
	}
	return fmt.Sprintf("Direction(%d)", uint8(d))
}

// Config configures Wrap.
type Config struct {
	// Seed seeds the random loss. The two directions use independent
	// generators derived from it.
	Seed uint64

	// EgressLoss and IngressLoss are the probabilities, in [0, 1], that a
	// packet of the direction is dropped at random.
	EgressLoss, IngressLoss float64

	// Rules are armed at Wrap, as if added with AddRule in order.
	Rules []Rule

	// DropEgress and DropIngress, if not nil, are called with every packet
	// of their direction, and drop it by returning true. They are called
	// without any lock held (so they may call the Device's methods, such as
	// DropNext or Stats) on the goroutine calling WritePacket or ReadPacket;
	// they must be safe for concurrent use if that is. They must not retain
	// or modify pkt.
	DropEgress, DropIngress func(pkt []byte) bool

	// OnDrop, if not nil, is called with every packet dropped, after the
	// drop has been counted, without any lock held. It must not retain or
	// modify pkt. A pcap tap, a log or a test can watch drops through it.
	OnDrop func(dir Direction, pkt []byte)
}

// Match selects the packets a rule counts.
type Match uint8

const (
	// MatchAny selects every packet, well-formed or not.
	MatchAny Match = iota + 1
	// MatchData selects TCP segments that carry payload (any flags).
	MatchData
	// MatchSYN selects TCP segments with SYN set and ACK clear.
	MatchSYN
	// MatchSYNACK selects TCP segments with both SYN and ACK set.
	MatchSYNACK
	// MatchFIN selects TCP segments with FIN set (with or without data).
	MatchFIN
	// MatchRST selects TCP segments with RST set.
	MatchRST

	matchEnd
)

var matchNames = [...]string{
	MatchAny:    "any",
	MatchData:   "data",
	MatchSYN:    "SYN",
	MatchSYNACK: "SYN-ACK",
	MatchFIN:    "FIN",
	MatchRST:    "RST",
}

// String names the match: "any", "data", "SYN", "SYN-ACK", "FIN", "RST".
func (m Match) String() string {
	if m >= MatchAny && m < matchEnd {
		return matchNames[m]
	}
	return fmt.Sprintf("Match(%d)", uint8(m))
}

// Matches reports whether m selects pkt, a whole IPv4 packet.
func (m Match) Matches(pkt []byte) bool {
	if m == MatchAny {
		return true
	}
	flags, payload, ok := parseTCP(pkt)
	if !ok {
		return false
	}
	switch m {
	case MatchData:
		return payload > 0
	case MatchSYN:
		return flags&(header.TCPFlagSyn|header.TCPFlagAck) == header.TCPFlagSyn
	case MatchSYNACK:
		return flags&(header.TCPFlagSyn|header.TCPFlagAck) == header.TCPFlagSyn|header.TCPFlagAck
	case MatchFIN:
		return flags&header.TCPFlagFin != 0
	case MatchRST:
		return flags&header.TCPFlagRst != 0
	}
	return false
}

// parseTCP returns the flags and payload length of the TCP segment in pkt,
// or ok false if pkt is not an unfragmented-or-first-fragment IPv4 packet
// holding a whole TCP header. Lengths come from the IPv4 total length, so
// trailing bytes beyond it are ignored.
func parseTCP(pkt []byte) (flags header.TCPFlags, payload int, ok bool) {
	ip := header.IPv4(pkt)
	if !ip.IsValid(len(pkt)) || ip.Protocol() != uint8(header.TCPProtocolNumber) || ip.FragmentOffset() != 0 {
		return 0, 0, false
	}
	hlen, tlen := int(ip.HeaderLength()), int(ip.TotalLength())
	seg := header.TCP(pkt[hlen:tlen])
	if len(seg) < header.TCPMinimumSize {
		return 0, 0, false
	}
	off := int(seg.DataOffset())
	if off < header.TCPMinimumSize || off > len(seg) {
		return 0, 0, false
	}
	return seg.Flags(), len(seg) - off, true
}

// Rule drops Count packets of direction Dir selected by Match, after
// letting the first Skip of them pass. Counting starts when the rule is
// armed; see the package documentation.
type Rule struct {
	Dir   Direction
	Match Match
	Skip  int // matching packets let through first; >= 0
	Count int // matching packets then dropped; >= 1
}

func (r Rule) validate() error {
	if r.Dir != Egress && r.Dir != Ingress {
		return fmt.Errorf("%w: rule direction %v", ErrConfig, r.Dir)
	}
	if r.Match < MatchAny || r.Match >= matchEnd {
		return fmt.Errorf("%w: rule match %v", ErrConfig, r.Match)
	}
	if r.Skip < 0 || r.Count < 1 {
		return fmt.Errorf("%w: rule skip %d, count %d (want skip >= 0, count >= 1)", ErrConfig, r.Skip, r.Count)
	}
	return nil
}

// RuleStats reports what one rule did.
type RuleStats struct {
	ID      uint64 // as returned by AddRule or DropNext
	Rule    Rule
	Matched uint64 // matching packets seen while armed: skipped and dropped
	Dropped uint64 // matching packets the rule dropped; at most Rule.Count
}

// Spent reports whether the rule has dropped all it was armed to drop.
func (s RuleStats) Spent() bool { return s.Dropped >= uint64(s.Rule.Count) }

// Stats counts packets. A packet is Passed when the wrapped device accepted
// it (egress) or it was delivered to the caller (ingress), and Dropped when
// anything dropped it. The per-cause counts (Lost, Hooked, ByRule) count
// every packet that cause selected, so a packet dropped for two reasons
// appears under both, but only once in Dropped.
type Stats struct {
	EgressPassed, EgressDropped   uint64
	IngressPassed, IngressDropped uint64

	EgressLost, IngressLost     uint64 // selected by random loss
	EgressHooked, IngressHooked uint64 // selected by DropEgress / DropIngress

	// ByRule lists every rule armed since Wrap or the last ClearRules, in
	// the order armed, spent ones included.
	ByRule []RuleStats
}

// Device is a tun.Device that drops packets as configured, then passes the
// rest to the device it wraps. It is a tun.Pollable as well, and forwards the
// wrapped device's: when that is not Pollable, ReadFD returns an error
// wrapping tun.ErrNotPollable. All methods are safe for concurrent use.
type Device struct {
	dev    tun.Device
	hooks  [3]func([]byte) bool // by Direction
	onDrop func(Direction, []byte)
	closed atomic.Bool

	dirs [3]dirState // by Direction; [0] unused

	nextID atomic.Uint64

	// WriteFrame's: a scratch packet and the fate of each packet of the
	// frame.
	fmu      sync.Mutex
	fscratch []byte
	fkeep    []bool
	// ReadFrame's packet filter.
	gmu sync.Mutex
	gro tun.FrameFilter
}

var _ tun.Pollable = (*Device)(nil)

// dirState is one direction's loss generator, rules and counters.
type dirState struct {
	mu    sync.Mutex
	rng   *rand.Rand // guarded by mu
	loss  float64    // guarded by mu
	rules []*rule    // guarded by mu

	passed, dropped, lost, hooked atomic.Uint64
}

// rule is an armed Rule; its counters are guarded by the dirState's mu.
type rule struct {
	id               uint64
	r                Rule
	matched, dropped uint64
}

// Stream constants keep the two directions' PCG sequences apart.
const (
	egressStream  = 0x6567726573730000 // "egress"
	ingressStream = 0x696e677265737300 // "ingress"
)

// Wrap returns a Device that impairs dev as cfg says. The Device owns dev:
// Close closes it. Errors wrap ErrConfig.
func Wrap(dev tun.Device, cfg Config) (*Device, error) {
	if dev == nil {
		return nil, fmt.Errorf("%w: nil device", ErrConfig)
	}
	if err := checkLoss(cfg.EgressLoss); err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	if err := checkLoss(cfg.IngressLoss); err != nil {
		return nil, fmt.Errorf("ingress: %w", err)
	}
	for i, r := range cfg.Rules {
		if err := r.validate(); err != nil {
			return nil, fmt.Errorf("rule %d: %w", i, err)
		}
	}
	d := &Device{dev: dev, onDrop: cfg.OnDrop}
	d.hooks[Egress], d.hooks[Ingress] = cfg.DropEgress, cfg.DropIngress
	d.dirs[Egress].rng = rand.New(rand.NewPCG(cfg.Seed, egressStream))
	d.dirs[Egress].loss = cfg.EgressLoss
	d.dirs[Ingress].rng = rand.New(rand.NewPCG(cfg.Seed, ingressStream))
	d.dirs[Ingress].loss = cfg.IngressLoss
	for _, r := range cfg.Rules {
		d.addRule(r)
	}
	return d, nil
}

func checkLoss(p float64) error {
	if math.IsNaN(p) || p < 0 || p > 1 {
		return fmt.Errorf("%w: loss %v not in [0, 1]", ErrConfig, p)
	}
	return nil
}

// AddRule arms r and returns its ID, which identifies it in Stats().ByRule.
// Errors wrap ErrConfig.
func (d *Device) AddRule(r Rule) (uint64, error) {
	if err := r.validate(); err != nil {
		return 0, err
	}
	return d.addRule(r), nil
}

func (d *Device) addRule(r Rule) uint64 {
	id := d.nextID.Add(1)
	s := &d.dirs[r.Dir]
	s.mu.Lock()
	s.rules = append(s.rules, &rule{id: id, r: r})
	s.mu.Unlock()
	return id
}

// DropNext arms a rule that drops the next n packets of direction dir that
// m selects; it is AddRule(Rule{Dir: dir, Match: m, Count: n}).
func (d *Device) DropNext(dir Direction, m Match, n int) (uint64, error) {
	return d.AddRule(Rule{Dir: dir, Match: m, Count: n})
}

// ClearRules disarms and forgets every rule, spent or not. Spent rules
// otherwise stay listed in Stats, and are skipped with one comparison per
// packet, until ClearRules.
func (d *Device) ClearRules() {
	for _, dir := range [...]Direction{Egress, Ingress} {
		s := &d.dirs[dir]
		s.mu.Lock()
		s.rules = nil
		s.mu.Unlock()
	}
}

// SetLoss changes the random loss rate of direction dir. The generator is
// not reset: see the package documentation. Errors wrap ErrConfig.
func (d *Device) SetLoss(dir Direction, p float64) error {
	if dir != Egress && dir != Ingress {
		return fmt.Errorf("%w: direction %v", ErrConfig, dir)
	}
	if err := checkLoss(p); err != nil {
		return fmt.Errorf("%v: %w", dir, err)
	}
	s := &d.dirs[dir]
	s.mu.Lock()
	s.loss = p
	s.mu.Unlock()
	return nil
}

// Stats returns the counters. The directions are read one after the
// other, not as one snapshot.
func (d *Device) Stats() Stats {
	var st Stats
	e, in := &d.dirs[Egress], &d.dirs[Ingress]
	st.EgressPassed, st.EgressDropped = e.passed.Load(), e.dropped.Load()
	st.EgressLost, st.EgressHooked = e.lost.Load(), e.hooked.Load()
	st.IngressPassed, st.IngressDropped = in.passed.Load(), in.dropped.Load()
	st.IngressLost, st.IngressHooked = in.lost.Load(), in.hooked.Load()
	for _, s := range []*dirState{e, in} {
		s.mu.Lock()
		for _, r := range s.rules {
			st.ByRule = append(st.ByRule, RuleStats{ID: r.id, Rule: r.r, Matched: r.matched, Dropped: r.dropped})
		}
		s.mu.Unlock()
	}
	// IDs grow in arming order.
	for i := 1; i < len(st.ByRule); i++ {
		for j := i; j > 0 && st.ByRule[j].ID < st.ByRule[j-1].ID; j-- {
			st.ByRule[j], st.ByRule[j-1] = st.ByRule[j-1], st.ByRule[j]
		}
	}
	return st
}

// drop decides whether pkt, travelling in direction dir, is dropped, and
// counts the drop (but not a pass, which depends on the wrapped device).
func (d *Device) drop(dir Direction, pkt []byte) bool {
	s := &d.dirs[dir]
	hooked := false
	if h := d.hooks[dir]; h != nil && h(pkt) {
		hooked = true
		s.hooked.Add(1)
	}

	s.mu.Lock()
	lost := s.rng.Float64() < s.loss // one draw per packet, always
	ruled := false
	for _, r := range s.rules {
		if r.dropped >= uint64(r.r.Count) || !r.r.Match.Matches(pkt) {
			continue
		}
		r.matched++
		if r.matched > uint64(r.r.Skip) {
			r.dropped++
			ruled = true
		}
	}
	s.mu.Unlock()

	if lost {
		s.lost.Add(1)
	}
	if !hooked && !lost && !ruled {
		return false
	}
	s.dropped.Add(1)
	if d.onDrop != nil {
		d.onDrop(dir, pkt)
	}
	return true
}

// WritePacket implements tun.Device. A dropped packet returns nil. Packets
// the wrapped device would reject (empty, longer than MTU, after Close)
// are passed to it unimpaired and uncounted, so that its error is returned.
func (d *Device) WritePacket(pkt []byte) error {
	if len(pkt) == 0 || len(pkt) > d.dev.MTU() || d.closed.Load() {
		return d.dev.WritePacket(pkt)
	}
	if d.drop(Egress, pkt) {
		return nil
	}
	if err := d.dev.WritePacket(pkt); err != nil {
		return err
	}
	d.dirs[Egress].passed.Add(1)
	return nil
}

// ReadPacket implements tun.Device. It reads from the wrapped device until
// a packet is not dropped, and returns that one. A read that fails,
// including a truncated packet (io.ErrShortBuffer), is returned as it is,
// unimpaired and uncounted.
func (d *Device) ReadPacket(buf []byte) (int, error) {
	return d.readPacket(buf, d.dev.ReadPacket)
}

// ReadFD implements tun.Pollable: the wrapped device's descriptor, or an
// error wrapping tun.ErrNotPollable if it is not a tun.Pollable.
func (d *Device) ReadFD() (int, error) {
	p, ok := d.dev.(tun.Pollable)
	if !ok {
		return -1, fmt.Errorf("impair %s: %w", d.dev.Name(), tun.ErrNotPollable)
	}
	return p.ReadFD()
}

// ReadPacketNonblock implements tun.Pollable like ReadPacket: it reads on
// past dropped packets until one passes or none is waiting (an error
// wrapping tun.ErrWouldBlock).
func (d *Device) ReadPacketNonblock(buf []byte) (int, error) {
	p, ok := d.dev.(tun.Pollable)
	if !ok {
		return 0, fmt.Errorf("impair %s: read: %w", d.dev.Name(), tun.ErrNotPollable)
	}
	return d.readPacket(buf, p.ReadPacketNonblock)
}

func (d *Device) readPacket(buf []byte, read func([]byte) (int, error)) (int, error) {
	for {
		n, err := read(buf)
		if err != nil {
			return n, err
		}
		if d.closed.Load() {
			return 0, fmt.Errorf("impair %s: read: %w", d.dev.Name(), net.ErrClosed)
		}
		if !d.drop(Ingress, buf[:n]) {
			d.dirs[Ingress].passed.Add(1)
			return n, nil
		}
	}
}

// MTU implements tun.Device: the wrapped device's MTU.
func (d *Device) MTU() int { return d.dev.MTU() }

// Name implements tun.Device: the wrapped device's name.
func (d *Device) Name() string { return d.dev.Name() }

// Close implements tun.Device: it closes the wrapped device.
func (d *Device) Close() error {
	d.closed.Store(true)
	return d.dev.Close()
}

var _ tun.Offloader = (*Device)(nil)

// Offloads implements tun.Offloader: the wrapped device's.
func (d *Device) Offloads() tun.Offloads { return tun.WrappedOffloads(d.dev) }

// ReadFrame implements tun.Offloader like ReadPacket, packet by packet: each
// packet of the frames read (as the kernel would segment them) is dropped
// or not as ReadPacket's would be, and counted alike; the packets left go
// on as frames (tun.FrameFilter: the frame itself when none was dropped).
// It reads on until a packet passes.
func (d *Device) ReadFrame(buf []byte) (int, error) {
	o, ok := d.dev.(tun.Offloader)
	if !ok {
		return 0, fmt.Errorf("impair %s: read frame: %w", d.dev.Name(), tun.ErrNoOffload)
	}
	return d.readFrame(buf, o.ReadFrame)
}

// ReadFrameNonblock implements tun.Offloader like ReadFrame, without the
// wait (tun.ErrWouldBlock).
func (d *Device) ReadFrameNonblock(buf []byte) (int, error) {
	o, ok := d.dev.(tun.Offloader)
	if !ok {
		return 0, fmt.Errorf("impair %s: read frame: %w", d.dev.Name(), tun.ErrNoOffload)
	}
	return d.readFrame(buf, o.ReadFrameNonblock)
}

func (d *Device) readFrame(buf []byte, read func([]byte) (int, error)) (int, error) {
	for {
		n, err := read(buf)
		if err != nil {
			return n, err
		}
		if d.closed.Load() {
			return 0, fmt.Errorf("impair %s: read: %w", d.dev.Name(), net.ErrClosed)
		}
		d.gmu.Lock()
		m, lost := d.gro.Filter(buf, n, d.keepIngress)
		d.gmu.Unlock()
		if lost > 0 { // kept, but did not fit the buffer (a tiny gso_size): dropped after all
			d.dirs[Ingress].passed.Add(^uint64(lost - 1))
			d.dirs[Ingress].dropped.Add(uint64(lost))
		}
		if m > 0 {
			return m, nil
		}
	}
}

// keepIngress is ReadFrame's decision on one packet.
func (d *Device) keepIngress(pkt []byte) bool {
	if d.drop(Ingress, pkt) {
		return false
	}
	d.dirs[Ingress].passed.Add(1)
	return true
}

// WriteFrame implements tun.Offloader. Each packet of the frame (as the
// kernel would segment it, tun.SplitFrame) is dropped or not as
// WritePacket's would be, and counted alike; when none is dropped the frame
// goes to the wrapped device whole, else the others go one by one.
func (d *Device) WriteFrame(frame []byte) error {
	o, ok := d.dev.(tun.Offloader)
	if !ok || d.closed.Load() {
		if !ok {
			return fmt.Errorf("impair %s: write frame: %w", d.dev.Name(), tun.ErrNoOffload)
		}
		return o.WriteFrame(frame)
	}
	d.fmu.Lock()
	defer d.fmu.Unlock()
	if d.fscratch == nil {
		d.fscratch = make([]byte, tun.MaxMTU)
	}
	d.fkeep = d.fkeep[:0]
	dropped := false
	if err := tun.SplitFrame(frame, d.fscratch, false, func(pkt []byte) error {
		drop := d.drop(Egress, pkt)
		dropped = dropped || drop
		d.fkeep = append(d.fkeep, !drop)
		return nil
	}); err != nil {
		return fmt.Errorf("impair %s: write frame: %w", d.dev.Name(), err)
	}
	if !dropped {
		if err := o.WriteFrame(frame); err != nil {
			return err
		}
		d.dirs[Egress].passed.Add(uint64(len(d.fkeep)))
		return nil
	}
	i := 0
	return tun.SplitFrame(frame, d.fscratch, true, func(pkt []byte) error {
		keep := d.fkeep[i]
		i++
		if !keep {
			return nil
		}
		if err := d.dev.WritePacket(pkt); err != nil {
			return err
		}
		d.dirs[Egress].passed.Add(1)
		return nil
	})
}
