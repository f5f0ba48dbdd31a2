package stack

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/tcpwheel/tcpwheel/tcp"
)

// MaxLoops bounds Config.Loops.
const MaxLoops = 64

// One loop per core (Config.Loops): the stack runs N loops, each what a
// one-loop stack is (a loop.Loop on a thread of its own, its timing wheel,
// its queue of a multi-queue TUN, its connections, GSO frame and counters),
// called shards below. The Stack New returns is the first shard; its
// methods route to the others:
//
//   - A connection lives on one shard: the one whose queue brought its
//     SYN, or the one that dialed it (round-robin). The kernel sends a
//     flow's packets to the queue it was last written on (its flow table,
//     learned from our writes), else by hash, so they normally reach the
//     owner; one that reaches another shard misses there, which then looks
//     in the group's owner table and hands a copy to the owner's loop
//     (Post). Only a miss takes the table's lock: a shard's own packets
//     cost what they cost with one loop.
//   - The owner table holds every connection's 4-tuple, and a listener's
//     half-open ones, by shard: claimed when made (insert if absent, so
//     two shards cannot make the same one), released when gone.
//   - A listener is opened on every shard on the same port, with one SYN
//     cookie key; each shard's accepted connections go into the one accept
//     queue the application reads. SYN-flood protections (cookies, the
//     half-open limit) are per shard: a listener takes up to Backlog
//     half-open connections on each.
//   - Local ports (listeners', connections') are counted in the group,
//     under its lock, and Dial's ephemeral ports are picked there.
//   - UDP sockets, IP reassembly and ICMP errors live on the first shard:
//     the others hand such packets to it (ICMP errors quoting a TCP
//     segment then go on to the connection's owner). Pings are answered
//     where they arrive.
//   - Stats sums the shards and lists each in Stats.Loops.

// loopGroup ties the shards of a stack with several loops.
type loopGroup struct {
	shards []*Stack      // set by newLoops, read-only once New returns
	first  *Stack        // shards[0], which the other shards hand packets to
	next   atomic.Uint32 // the shard the next Dial goes from (round-robin)

	mu     sync.Mutex
	owners map[tcp.ID]*Stack // every connection's shard, and half-open ones'
	ports  map[uint16]int    // local ports: users, over every shard
	lports map[uint16]int    // local ports: listeners (each shard's twin)

	closeOnce sync.Once
	closeErr  error
}

// handoffCounters count a shard's handoffs. Loop only.
type handoffCounters struct {
	out, in uint64 // handed to other shards, taken from them
}

// LoopStats is one loop's share of a stack with several loops
// (Config.Loops).
type LoopStats struct {
	PacketsIn   uint64 // packets read from its queue (Counters.PacketsIn)
	SegmentsIn  uint64 // TCP segments it handled, its handoffs in included
	Connections int    // its connections
	// HandoffsOut counts the packets that came on its queue for another
	// loop's connection (or, for the first loop's UDP sockets,
	// reassembly and ICMP errors), handed to that loop; HandoffsIn those
	// it took from the others.
	HandoffsOut, HandoffsIn uint64
	Wakeups                 uint64 // its loop's (loop.Loop.Wakeups)
}

// newLoops is New with cfg.Loops > 1: a shard per queue.
func newLoops(cfg Config) (*Stack, error) {
	n := cfg.Loops
	switch {
	case n < 2 || n > MaxLoops:
		return nil, fmt.Errorf("%w: Loops %d with %d queues: want 2 to %d loops", ErrConfig, n, len(cfg.Queues), MaxLoops)
	case len(cfg.Queues) != n-1:
		return nil, fmt.Errorf("%w: %d loops need %d Queues besides Device, not %d", ErrConfig, n, n-1, len(cfg.Queues))
	case cfg.Record != nil:
		return nil, fmt.Errorf("%w: %d loops: a flight recording (Record) is of one loop", ErrConfig, n)
	}
	// One ISN generator and one timestamp-offset secret for every loop:
	// successive connections between two addresses may be made on
	// different loops, and their TSvals must come from one clock
	// (tcp.Config.TSOffset; RFC 6191), their ISNs from one RFC 6528
	// generator.
	if cfg.TCP.ISN == nil {
		cfg.TCP.ISN = tcp.NewISN()
	}
	if cfg.TCP.TSOffset == nil {
		cfg.TCP.TSOffset = tcp.NewTSOffset()
	}
	cfg.LoopThread = cfg.LoopThread.resolve(n, cfg.RealTime) // for n loops, not each loop's one
	// Each loop's share of TIME-WAIT records; newStack refuses a bad bound.
	if tw := cfg.maxTimeWait(); tw > 0 {
		cfg.MaxTimeWait = (tw + n - 1) / n
	}
	devs := make([]Config, n)
	for i := range devs {
		devs[i] = cfg
		devs[i].Loops, devs[i].Queues = 0, nil
		if i > 0 {
			devs[i].Device = cfg.Queues[i-1]
			if devs[i].Device == nil {
				return nil, fmt.Errorf("%w: no device for loop %d", ErrConfig, i)
			}
		}
	}
	g := &loopGroup{
		shards: make([]*Stack, 0, n),
		owners: make(map[tcp.ID]*Stack),
		ports:  make(map[uint16]int),
		lports: make(map[uint16]int),
	}
	for i := range devs {
		s, err := newLoop(devs[i], g, i)
		if err != nil {
			g.close()
			return nil, fmt.Errorf("stack: loop %d: %w", i, err)
		}
		if i == 0 {
			g.first = s // before the other shards' loops, which read it
		}
		g.mu.Lock()
		g.shards = append(g.shards, s)
		g.mu.Unlock()
	}
	return g.first, nil
}

// close closes every shard.
func (g *loopGroup) close() error {
	g.closeOnce.Do(func() {
		g.mu.Lock()
		shards := g.shards
		g.mu.Unlock()
		var errs []error
		for i := len(shards) - 1; i >= 0; i-- {
			errs = append(errs, shards[i].closeOne())
		}
		g.closeErr = errors.Join(errs...)
	})
	return g.closeErr
}

// dialer returns the shard the next Dial goes from.
func (g *loopGroup) dialer() *Stack {
	return g.shards[int(g.next.Add(1)-1)%len(g.shards)]
}

// owner returns the shard that owns id, or nil.
func (g *loopGroup) owner(id tcp.ID) *Stack {
	g.mu.Lock()
	o := g.owners[id]
	g.mu.Unlock()
	return o
}

// claim makes s the owner of id unless another shard is, and reports
// whether s is.
func (g *loopGroup) claim(id tcp.ID, s *Stack) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if o := g.owners[id]; o != nil {
		return o == s
	}
	g.owners[id] = s
	return true
}

// release forgets id if s owns it.
func (g *loopGroup) release(id tcp.ID, s *Stack) {
	g.mu.Lock()
	if g.owners[id] == s {
		delete(g.owners, id)
	}
	g.mu.Unlock()
}

// forgetAll releases every 4-tuple s owns (Close). A nil group does
// nothing.
func (g *loopGroup) forgetAll(s *Stack) {
	if g == nil {
		return
	}
	g.mu.Lock()
	for id, o := range g.owners {
		if o == s {
			delete(g.owners, id)
		}
	}
	g.mu.Unlock()
}

// usePort counts a user of the local port p in (d 1) or out (d -1).
func (g *loopGroup) usePort(p uint16, d int) {
	g.mu.Lock()
	if g.ports[p] += d; g.ports[p] <= 0 {
		delete(g.ports, p)
	}
	g.mu.Unlock()
}

// portInUse reports whether any shard uses the local port p.
func (g *loopGroup) portInUse(p uint16) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ports[p] > 0
}

// ephemeralPort is Stack.ephemeralPort over every shard: a port no
// listener uses and no connection to remote.
func (g *loopGroup) ephemeralPort(s *Stack, remote netip.AddrPort) (uint16, bool) {
	local := s.localFor(remote.Addr())
	g.mu.Lock()
	defer g.mu.Unlock()
	return s.pickPort(func(p uint16) bool {
		if g.lports[p] > 0 {
			return false
		}
		_, ok := g.owners[tcp.ID{Local: netip.AddrPortFrom(local, p), Remote: remote}]
		return !ok
	})
}

// listen opens twins of l, opened on the first shard, on the others.
func (g *loopGroup) listen(l *Listener, key []byte) error {
	for _, s := range g.shards[1:] {
		t := &Listener{s: s, net: l.net, bound: l.bound, acceptq: l.acceptq, closed: l.closed}
		var lerr error
		if s.do(func() { lerr = s.listen(t, l.port, key) }) != nil {
			lerr = net.ErrClosed
		}
		if lerr != nil {
			return lerr
		}
		l.twins = append(l.twins, t)
	}
	return nil
}

// listening counts a listener (one shard's) on the local port p in (d 1)
// or out (d -1).
func (g *loopGroup) listening(p uint16, d int) {
	g.mu.Lock()
	if g.lports[p] += d; g.lports[p] <= 0 {
		delete(g.lports, p)
	}
	g.mu.Unlock()
}

// halfOpenDropped returns the listeners' tcp.ListenerConfig.Dropped: with
// several loops, a half-open connection that ends releases its 4-tuple
// (claimHalfOpen); nil with one loop.
func (s *Stack) halfOpenDropped() func(tcp.ID) {
	if s.grp == nil {
		return nil
	}
	return func(id tcp.ID) { s.grp.release(id, s) }
}

// claimHalfOpen claims the 4-tuple of the half-open connection a SYN made
// on l, if it made one, so that the handshake's ACK finds it from any shard.
func (s *Stack) claimHalfOpen(l *Listener, id tcp.ID) {
	if l.tl.HalfOpenConn(id) != nil {
		s.grp.claim(id, s)
	}
}

// handOffTCP hands the TCP segment b (checked), which matched no connection
// of s, to the shard that owns its 4-tuple, if that is another, and reports
// whether it did. A segment handed to s is s's.
func (s *Stack) handOffTCP(id tcp.ID, src, dst netip.Addr, b []byte) bool {
	if s.handedIn {
		return false
	}
	o := s.grp.owner(id)
	if o == nil || o == s {
		return false
	}
	s.counters.SegmentsIn-- // counted where it is handled
	s.handOff(o, b, func(o *Stack, p []byte) {
		o.csumValid = true // checked here
		o.handleTCP(src, dst, p)
		o.csumValid = false
	})
	return true
}

// handOffICMP hands an ICMP message other than an echo request to the
// first shard: UDP sockets' and quoted TCP segments' errors are taken there.
func (s *Stack) handOffICMP(src, dst netip.Addr, b []byte, v6 bool) {
	s.handOffFirst(b, func(o *Stack, p []byte) {
		if v6 {
			o.handleICMPv6(src, dst, p)
			return
		}
		o.handleICMP(src, dst, p)
	})
}

// handOffQuoted hands the ICMP error m, which quotes a segment of id that
// no connection of s has, to id's owner, if that is another shard, and
// reports whether it did.
func (s *Stack) handOffQuoted(id tcp.ID, m []byte, v6 bool) bool {
	if s.handedIn {
		return false
	}
	o := s.grp.owner(id)
	if o == nil || o == s {
		return false
	}
	s.handOff(o, m, func(o *Stack, p []byte) {
		if v6 {
			o.tcpICMP6(p)
			return
		}
		o.tcpICMP4(p)
	})
	return true
}

// handOffFirst hands pkt to the first shard, to run take on it there.
func (s *Stack) handOffFirst(pkt []byte, take func(o *Stack, p []byte)) {
	s.handOff(s.grp.first, pkt, take)
}

// handOff posts a copy of pkt to the shard o, whose loop runs take on it as
// a batch of one, with handedIn set. A closed shard's loop drops it.
func (s *Stack) handOff(o *Stack, pkt []byte, take func(o *Stack, p []byte)) {
	s.handoffs.out++
	p := append([]byte(nil), pkt...)
	o.post(func() {
		o.handoffs.in++
		o.wheel.MoveNow(o.wheel.Clock().Now())
		o.inBatch, o.handedIn = true, true
		take(o, p)
		o.handedIn = false
		o.endBatch()
	})
}

// loopStats returns s's LoopStats. It runs on s's loop.
func (s *Stack) loopStats() LoopStats {
	return LoopStats{
		PacketsIn: s.counters.PacketsIn, SegmentsIn: s.counters.SegmentsIn,
		Connections: len(s.conns) + s.tws.Len(), HandoffsOut: s.handoffs.out, HandoffsIn: s.handoffs.in,
	}
}

// stats sums the shards' Stats, and lists each in Stats.Loops.
func (g *loopGroup) stats() Stats {
	var st Stats
	for i, s := range g.shards {
		one, ls := s.statsOne()
		st.Loops = append(st.Loops, ls)
		if i == 0 {
			st = one
			st.Loops = []LoopStats{ls}
			continue
		}
		prev := st
		addDeep(reflect.ValueOf(&st).Elem(), reflect.ValueOf(one))
		// Not sums: the listeners are the first's twins (and the writer's
		// queue size a setting), the maxima and lateness quantiles are the
		// largest.
		st.Listeners = prev.Listeners
		st.Writer.Queue = prev.Writer.Queue
		st.Input.Max = max(prev.Input.Max, one.Input.Max)
		st.Input.SYNStashMax = max(prev.Input.SYNStashMax, one.Input.SYNStashMax)
		st.Offload.MaxFrameIn = max(prev.Offload.MaxFrameIn, one.Offload.MaxFrameIn)
		st.Offload.MaxFrameOut = max(prev.Offload.MaxFrameOut, one.Offload.MaxFrameOut)
		st.Writer.MaxDepth = max(prev.Writer.MaxDepth, one.Writer.MaxDepth)
		st.Wheel.LateP50 = max(prev.Wheel.LateP50, one.Wheel.LateP50)
		st.Wheel.LateP99 = max(prev.Wheel.LateP99, one.Wheel.LateP99)
		st.Wheel.LateMax = max(prev.Wheel.LateMax, one.Wheel.LateMax)
	}
	return st
}

// addDeep adds every integer of b to the same one of a, through structs
// and arrays, so that a new counter is summed without being listed here
// (addCounters for nested structs).
func addDeep(a, b reflect.Value) {
	switch a.Kind() {
	case reflect.Uint64, reflect.Uint32, reflect.Uint:
		a.SetUint(a.Uint() + b.Uint())
	case reflect.Int, reflect.Int64:
		a.SetInt(a.Int() + b.Int())
	case reflect.Struct:
		for i := range a.NumField() {
			if a.Type().Field(i).IsExported() {
				addDeep(a.Field(i), b.Field(i))
			}
		}
	case reflect.Array:
		for i := range a.Len() {
			addDeep(a.Index(i), b.Index(i))
		}
	}
}
