package stack

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/timer"
	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// mqPeer is the far end of a fake two-queue link, as the kernel is of a
// multi-queue TUN: it writes each packet into the queue pick chooses and
// reads what either queue brings.
type mqPeer struct {
	qs   []*tuntest.Endpoint
	pick atomic.Pointer[func(pkt []byte) int]
	in   chan []byte
	done chan struct{}
	once sync.Once
}

var _ tun.Device = (*mqPeer)(nil)

// newMQ returns a two-queue link: the peer's end, and the queues of the
// stack with two loops.
func newMQ() (*mqPeer, []tun.Device) {
	p := &mqPeer{in: make(chan []byte, 1024), done: make(chan struct{})}
	var qs []tun.Device
	for range 2 {
		a, b := tuntest.NewPipe(tuntest.PipeConfig{QueueLen: 4096})
		p.qs = append(p.qs, a)
		qs = append(qs, b)
		go func() {
			for {
				buf := make([]byte, tun.DefaultMTU)
				n, err := a.ReadPacket(buf)
				if err != nil {
					return
				}
				select {
				case p.in <- buf[:n]:
				case <-p.done:
					return
				}
			}
		}()
	}
	p.setPick(flowHash)
	return p, qs
}

// flowHash picks a TCP or UDP packet's queue from the sum of its ports, the
// same both ways, as the kernel's symmetric hash: queue 0 for an even sum.
func flowHash(pkt []byte) int {
	hl := int(pkt[0]&0x0f) * 4
	if len(pkt) < hl+4 {
		return 0
	}
	return int(binary.BigEndian.Uint16(pkt[hl:])+binary.BigEndian.Uint16(pkt[hl+2:])) % 2
}

func (p *mqPeer) setPick(f func([]byte) int) { p.pick.Store(&f) }

func (p *mqPeer) ReadPacket(buf []byte) (int, error) {
	select {
	case pkt := <-p.in:
		return copy(buf, pkt), nil
	case <-p.done:
		return 0, net.ErrClosed
	}
}

func (p *mqPeer) WritePacket(pkt []byte) error { return p.qs[(*p.pick.Load())(pkt)].WritePacket(pkt) }
func (p *mqPeer) MTU() int                     { return tun.DefaultMTU }
func (p *mqPeer) Name() string                 { return "mq-peer" }
func (p *mqPeer) Close() error {
	p.once.Do(func() {
		close(p.done)
		for _, q := range p.qs {
			q.Close()
		}
	})
	return nil
}

// loopsPair returns a stack with one loop (a, on the peer's end) and one
// with two (b), over a fake two-queue link.
func loopsPair(t *testing.T) (a, b *Stack, mq *mqPeer) {
	t.Helper()
	mq, qs := newMQ()
	b, err := New(Config{Device: qs[0], Queues: qs[1:], Loops: 2, Addr: addrB})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	a, err = New(Config{Device: mq, Addr: addrA})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a, b, mq
}

// echoOn serves an echo on ln until the test ends, which closes ln and
// the connections it accepted.
func echoOn(t *testing.T, ln net.Listener) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { defer c.Close(); io.Copy(c, c) })
		}
	})
}

// roundTrip writes a message on each conn and checks the echo.
func roundTrip(t *testing.T, conns []net.Conn, round int) {
	t.Helper()
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			msg := bytes.Repeat(fmt.Appendf(nil, "conn %d round %d;", i, round), 3000)
			c.SetDeadline(time.Now().Add(5 * time.Second))
			werr := make(chan error, 1)
			go func() { _, err := c.Write(msg); werr <- err }()
			got := make([]byte, len(msg))
			_, err := io.ReadFull(c, got)
			if err == nil {
				err = <-werr
			}
			if err != nil || !bytes.Equal(got, msg) {
				t.Errorf("conn %d round %d: echo intact %v, err %v", i, round, bytes.Equal(got, msg), err)
			}
		})
	}
	wg.Wait()
}

// dialFrom dials b's port 80 from a's local port p (startDial).
func dialFrom(t *testing.T, a *Stack, p uint16, to netip.AddrPort) net.Conn {
	t.Helper()
	c, err := a.startDial(p, to)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.settled:
	case <-time.After(10 * time.Second):
		t.Fatalf("dial from port %d: no handshake", p)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// handoffs sums the loops' handoffs of st.
func handoffs(st Stats) (out, in uint64) {
	for _, l := range st.Loops {
		out, in = out+l.HandoffsOut, in+l.HandoffsIn
	}
	return out, in
}

// settledStats returns s's Stats once no handoff is in flight (as many
// taken as handed, the loops being read one after the other), or after 5 s.
func settledStats(s *Stack) Stats {
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := s.Stats()
		if out, in := handoffs(st); out == in || time.Now().After(deadline) {
			return st
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLoopsHandOff: connections to a stack with two loops live on the loop
// whose queue brought their SYN; when the link then sends every packet
// on the other queue, each is handed to the owner and the data still
// echoes intact, with no reset.
func TestLoopsHandOff(t *testing.T) {
	a, b, mq := loopsPair(t)
	ln, err := b.Listen("tcp", ":80")
	if err != nil {
		t.Fatal(err)
	}
	echoOn(t, ln)
	var conns []net.Conn
	for p := range uint16(8) { // ports 40000-40007: even and odd sums alternate
		conns = append(conns, dialFrom(t, a, 40000+p, netip.AddrPortFrom(addrB, 80)))
	}
	roundTrip(t, conns, 0)
	st := b.Stats()
	if len(st.Loops) != 2 || st.Loops[0].Connections != 4 || st.Loops[1].Connections != 4 {
		t.Fatalf("loops %+v: want 4 connections on each", st.Loops)
	}
	if out, _ := handoffs(st); out != 0 {
		t.Errorf("%d handoffs while every flow came on its own queue, want 0", out)
	}
	mq.setPick(func(pkt []byte) int { return 1 - flowHash(pkt) }) // every packet on the other loop's queue
	roundTrip(t, conns, 1)
	st = settledStats(b)
	out, in := handoffs(st)
	if out == 0 || out != in || st.Loops[0].HandoffsOut == 0 || st.Loops[1].HandoffsOut == 0 {
		t.Errorf("loops %+v: want handoffs both ways, as many in as out", st.Loops)
	}
	if st.ResetsSent != 0 || st.Listen.ResetsSent != 0 || st.Connections != 8 {
		t.Errorf("resets %d, listeners' %d, connections %d; want 0, 0, 8", st.ResetsSent, st.Listen.ResetsSent, st.Connections)
	}
	if sum := st.Loops[0].SegmentsIn + st.Loops[1].SegmentsIn; sum != st.SegmentsIn {
		t.Errorf("SegmentsIn %d, loops' sum %d: a handed segment counted twice or not at all", st.SegmentsIn, sum)
	}
}

// TestLoopsDialHandOff: a stack with two loops dials round-robin (the first
// dial from loop 0); with every packet of the peer on queue 1, loop 0's
// connections get theirs handed over, and all work.
func TestLoopsDialHandOff(t *testing.T) {
	a, b, mq := loopsPair(t)
	mq.setPick(func([]byte) int { return 1 })
	ln, err := a.Listen("tcp", ":80")
	if err != nil {
		t.Fatal(err)
	}
	echoOn(t, ln)
	var conns []net.Conn
	for i := range 4 {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		c, err := b.DialContext(ctx, "tcp", "198.18.0.1:80")
		cancel()
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		if want := b.grp.shards[i%2]; c.(*Conn).s != want {
			t.Errorf("dial %d on loop %d, want %d (round-robin)", i, c.(*Conn).s.shard, want.shard)
		}
		conns = append(conns, c)
	}
	roundTrip(t, conns, 0)
	st := settledStats(b)
	if st.Loops[0].Connections != 2 || st.Loops[1].Connections != 2 {
		t.Errorf("loops %+v: want 2 connections on each", st.Loops)
	}
	if st.Loops[1].HandoffsOut == 0 || st.Loops[0].HandoffsIn != st.Loops[1].HandoffsOut || st.Loops[0].HandoffsOut != 0 {
		t.Errorf("loops %+v: want loop 1 to hand loop 0 its packets", st.Loops)
	}
	if st.ResetsSent != 0 {
		t.Errorf("%d resets sent, want none", st.ResetsSent)
	}
}

// TestLoopsPorts: a port has one listener over every loop, a closed one's
// port is free again on all of them, and the loops' dials to one remote
// take different ports.
func TestLoopsPorts(t *testing.T) {
	a, b, _ := loopsPair(t)
	ln, err := b.Listen("tcp", ":80")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Listen("tcp", ":80"); err == nil {
		t.Fatal("a second listener on port 80: no error")
	}
	if got := b.Stats().Listeners; got != 1 {
		t.Errorf("Stats.Listeners = %d, want 1 (one listener, on two loops)", got)
	}
	lports := func() int { b.grp.mu.Lock(); defer b.grp.mu.Unlock(); return b.grp.lports[80] }
	if n := lports(); n != 2 {
		t.Errorf("port 80 has %d listeners in the group, want 2 (a twin per loop: no Dial picks it)", n)
	}
	ln.Close()
	if n := lports(); n != 0 {
		t.Errorf("port 80 has %d listeners in the group after Close, want 0", n)
	}
	ln, err = b.Listen("tcp", ":80")
	if err != nil {
		t.Fatalf("listen again after Close: %v", err)
	}
	ln.Close()
	al, err := a.Listen("tcp", ":80")
	if err != nil {
		t.Fatal(err)
	}
	echoOn(t, al)
	seen := map[netip.AddrPort]bool{}
	for i := range 16 {
		c, err := b.DialTCP(t.Context(), "tcp", "198.18.0.1:80")
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		if la := c.LocalAddr().(*net.TCPAddr).AddrPort(); seen[la] {
			t.Errorf("dial %d: local address %v taken twice", i, la)
		} else {
			seen[la] = true
		}
	}
	g := b.grp
	g.mu.Lock()
	owned := len(g.owners)
	g.mu.Unlock()
	if owned != 16 {
		t.Errorf("owner table holds %d 4-tuples, want the 16 connections'", owned)
	}
}

// TestLoopsUDP: UDP sockets live on the first loop; a datagram that comes
// on the second loop's queue is handed to it and delivered.
func TestLoopsUDP(t *testing.T) {
	a, b, mq := loopsPair(t)
	mq.setPick(func([]byte) int { return 1 })
	u, err := b.ListenUDP("udp", ":53")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	c, err := a.DialUDP("udp", "198.18.0.2:53")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("over queue 1")); err != nil {
		t.Fatal(err)
	}
	u.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 100)
	n, _, err := u.ReadFrom(buf)
	if err != nil || string(buf[:n]) != "over queue 1" {
		t.Fatalf("read %q, %v; want the datagram", buf[:n], err)
	}
	st := b.Stats()
	if st.Loops[1].HandoffsOut != 1 || st.Loops[0].HandoffsIn != 1 || st.DatagramsIn != 1 {
		t.Errorf("loops %+v, DatagramsIn %d: want one handed to loop 0 and delivered", st.Loops, st.DatagramsIn)
	}
}

// TestLoopsConfig: what several loops do not take fails with ErrConfig.
func TestLoopsConfig(t *testing.T) {
	_, qs := newMQ()
	defer qs[0].Close()
	defer qs[1].Close()
	for name, cfg := range map[string]Config{
		"no queues":  {Device: qs[0], Loops: 2, Addr: addrB},
		"too many":   {Device: qs[0], Queues: qs[1:], Loops: MaxLoops + 1, Addr: addrB},
		"queues, 1":  {Device: qs[0], Queues: qs[1:], Loops: 1, Addr: addrB},
		"negative":   {Device: qs[0], Loops: -1, Addr: addrB},
		"nil queue":  {Device: qs[0], Queues: []tun.Device{nil}, Loops: 2, Addr: addrB},
		"recording":  {Device: qs[0], Queues: qs[1:], Loops: 2, Addr: addrB, Record: io.Discard},
		"bad config": {Device: qs[0], Queues: qs[1:], Loops: 2, Addr: addr6A},
	} {
		if s, err := New(cfg); !errors.Is(err, ErrConfig) {
			if s != nil {
				s.Close()
			}
			t.Errorf("%s: New: %v, want ErrConfig", name, err)
		}
	}
	if _, err := NewManual(Config{Device: qs[0], Queues: qs[1:], Loops: 2, Addr: addrB, Clock: timer.NewManualClock(0)}); !errors.Is(err, ErrConfig) {
		t.Errorf("NewManual with 2 loops: %v, want ErrConfig", err)
	}
	s, err := New(Config{Device: qs[0], Queues: qs[1:], Loops: 2, Addr: addrB})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Forward(ForwardConfig{TCP: func(*TCPRequest) {}}); !errors.Is(err, ErrConfig) {
		t.Errorf("Forward with 2 loops: %v, want ErrConfig", err)
	}
}

// TestLoopsHandshakeHandOff: the handshake's ACK, and all that follows,
// comes on the other loop's queue than the SYN did: the half-open
// connection's 4-tuple was claimed by the SYN's loop, which gets them, and
// the connection is made and works there.
func TestLoopsHandshakeHandOff(t *testing.T) {
	a, b, mq := loopsPair(t)
	mq.setPick(func(pkt []byte) int {
		hl := int(pkt[0]&0x0f) * 4
		if len(pkt) > hl+13 && pkt[hl+13]&0x12 == 0x02 { // a SYN: by the hash
			return flowHash(pkt)
		}
		return 1 - flowHash(pkt)
	})
	ln, err := b.Listen("tcp", ":80")
	if err != nil {
		t.Fatal(err)
	}
	echoOn(t, ln)
	var conns []net.Conn
	for p := range uint16(4) {
		conns = append(conns, dialFrom(t, a, 40000+p, netip.AddrPortFrom(addrB, 80)))
	}
	roundTrip(t, conns, 0)
	st := settledStats(b)
	if st.Loops[0].Connections != 2 || st.Loops[1].Connections != 2 {
		t.Errorf("loops %+v: want 2 connections on each, where their SYNs came", st.Loops)
	}
	if out, in := handoffs(st); out == 0 || out != in {
		t.Errorf("loops %+v: want handoffs, as many in as out", st.Loops)
	}
	if st.Listen.ResetsSent != 0 || st.ResetsSent != 0 || st.Listen.SynCookiesInvalid != 0 {
		t.Errorf("resets %d, listeners' %d, invalid cookies %d; want none", st.ResetsSent, st.Listen.ResetsSent, st.Listen.SynCookiesInvalid)
	}
}

// TestLoopsHalfOpenReleased: a SYN on loop 0's queue claims its 4-tuple for
// loop 0's half-open connection; the peer's RST, on loop 1's queue, is
// handed to loop 0, ends the half-open connection, and releases the claim:
// the owner table keeps nothing of it.
func TestLoopsHalfOpenReleased(t *testing.T) {
	mq, qs := newMQ()
	b, err := New(Config{Device: qs[0], Queues: qs[1:], Loops: 2, Addr: addrB})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	defer mq.Close()
	ln, err := b.Listen("tcp", ":80")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	src, dst := netip.AddrPortFrom(addrA, 5555), netip.AddrPortFrom(addrB, 80)
	owned := func() int { b.grp.mu.Lock(); defer b.grp.mu.Unlock(); return len(b.grp.owners) }
	if err := mq.qs[0].WritePacket(ipPacket(addrA, addrB, protoTCP, synTo(t, src, dst, 1000))); err != nil {
		t.Fatal(err)
	}
	if !waitFor(5*time.Second, func() bool { return owned() == 1 }) {
		t.Fatalf("owner table holds %d 4-tuples after the SYN, want its half-open one", owned())
	}
	rst := tcp.Segment{SrcPort: src.Port(), DstPort: dst.Port(), Seq: 1001, Flags: tcp.FlagRST}
	if err := mq.qs[1].WritePacket(ipPacket(addrA, addrB, protoTCP, encodeSeg(t, addrA, addrB, &rst))); err != nil {
		t.Fatal(err)
	}
	if !waitFor(5*time.Second, func() bool { return owned() == 0 }) {
		t.Errorf("owner table holds %d 4-tuples after the RST, want none", owned())
	}
	if st := settledStats(b); st.Loops[1].HandoffsOut != 1 {
		t.Errorf("loops %+v: want loop 1 to hand loop 0 the RST", st.Loops)
	}
}

// waitFor polls cond until it holds or d passes, and reports whether it held.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// TestLoopThread: Config.LoopThread's choice, as Stats.LoopThread reports
// it: LoopAuto parks a stack's one loop with one P (GOMAXPROCS) and unlocks
// it with more, parks two loops with two Ps; LoopLocked, LoopParked and
// LoopUnlocked as asked; a connection carries data either way. A value out
// of range, and RealTime with LoopParked or LoopUnlocked, are ErrConfig.
func TestLoopThread(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(procs)
	for _, tc := range []struct {
		name  string
		procs int
		lt    LoopThread
		want  string
	}{
		{"auto, 1 P", 1, LoopAuto, "parked"},
		{"auto, 2 Ps", 2, LoopAuto, "unlocked"},
		{"locked, 1 P", 1, LoopLocked, "locked"},
		{"parked, 4 Ps", 4, LoopParked, "parked"},
		{"unlocked, 1 P", 1, LoopUnlocked, "unlocked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runtime.GOMAXPROCS(tc.procs)
			defer runtime.GOMAXPROCS(procs)
			a, b := pair(t, Config{LoopThread: tc.lt})
			for _, s := range []*Stack{a, b} {
				if got := s.Stats().LoopThread; got != tc.want {
					t.Fatalf("Stats.LoopThread %q, want %q", got, tc.want)
				}
			}
			c, srv := dialPair(t, a, b)
			defer c.Close()
			defer srv.Close()
			// 8.9 MB: more than the send buffer grows to, so that the
			// writer waits for room, and an unlocked loop yields to it
			// when it has some (loop.Loop.YieldToWoken).
			msg := bytes.Repeat([]byte("parked or locked "), 1<<19)
			go func() { _, _ = c.Write(msg) }()
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(srv, got); err != nil || !bytes.Equal(got, msg) {
				t.Fatalf("read %v, intact %v", err, bytes.Equal(got, msg))
			}
			if y := a.Stats().Wheel.WokenYields; (y > 0) != (tc.want == "unlocked") {
				t.Fatalf("the writer's loop yielded to it %d times; want some only if unlocked", y)
			}
			// Left idle (a sleep of a millisecond and more: each of
			// waitFor's rounds), an unlocked loop sleeps in Go's
			// netpoller, as a parked one always does and a locked one
			// never (loop.Loop.NetpollSleeps).
			netpolled := func() bool { return a.Stats().Wheel.NetpollSleeps > 0 }
			if tc.want == "locked" {
				time.Sleep(20 * time.Millisecond)
				if netpolled() {
					t.Fatal("a locked loop slept in Go's netpoller")
				}
			} else if !waitFor(5*time.Second, netpolled) {
				t.Fatalf("an idle %s loop never slept in Go's netpoller", tc.want)
			}
		})
	}
	t.Run("auto, two loops, 2 Ps", func(t *testing.T) {
		runtime.GOMAXPROCS(2)
		defer runtime.GOMAXPROCS(procs)
		_, b, _ := loopsPair(t)
		if got := b.Stats().LoopThread; got != "parked" {
			t.Fatalf("Stats.LoopThread %q, want parked", got)
		}
	})
	for v := LoopAuto; v <= LoopUnlocked; v++ {
		b, err := v.MarshalText()
		var back LoopThread
		if err != nil || back.UnmarshalText(b) != nil || back != v {
			t.Errorf("%v: text %q (%v), read back as %v", v, b, err, back)
		}
	}
	for v, want := range map[LoopThread]bool{LoopAuto: true, LoopLocked: true, LoopParked: false, LoopUnlocked: false} {
		if v.OwnThread() != want {
			t.Errorf("%v.OwnThread() = %v, want %v", v, !want, want)
		}
	}
	var bad LoopThread
	if err := bad.UnmarshalText([]byte("pinned")); err == nil {
		t.Error(`UnmarshalText("pinned"): no error`)
	}
	if _, err := (LoopUnlocked + 1).MarshalText(); err == nil {
		t.Error("MarshalText of a value out of range: no error")
	}
	da, _ := tuntest.Pipe(1500)
	for name, cfg := range map[string]Config{
		"out of range":          {Device: da, Addr: addrA, LoopThread: LoopUnlocked + 1},
		"parked and realtime":   {Device: da, Addr: addrA, LoopThread: LoopParked, RealTime: 10},
		"unlocked and realtime": {Device: da, Addr: addrA, LoopThread: LoopUnlocked, RealTime: 10},
	} {
		if s, err := New(cfg); !errors.Is(err, ErrConfig) {
			if s != nil {
				s.Close()
			}
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

// TestLoopsTimeWaitShare: with several loops each keeps its share of
// Config.MaxTimeWait, rounded up.
func TestLoopsTimeWaitShare(t *testing.T) {
	for _, c := range []struct{ max, want int }{{3, 2}, {0, DefaultMaxTimeWait / 2}} {
		_, qs := newMQ()
		s, err := New(Config{Device: qs[0], Queues: qs[1:], Loops: 2, Addr: addrB, MaxTimeWait: c.max})
		if err != nil {
			t.Fatal(err)
		}
		for i, sh := range s.grp.shards {
			if sh.tws.Max != c.want {
				t.Errorf("MaxTimeWait %d: loop %d keeps up to %d records, want %d", c.max, i, sh.tws.Max, c.want)
			}
		}
		s.Close()
	}
}
