package integration

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"
	vnetns "github.com/vishvananda/netns"

	"github.com/tcpwheel/tcpwheel/internal/testbed"
	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/impair"
)

// Names of the namespaces and links the tests make: the prefix, then
// tun.UniqueName adds this process's id and random characters.
const (
	nsPrefix   = "twi"
	linkPrefix = "twl"
	netnsDir   = "/run/netns"
)

// TestMain removes the leftovers of killed runs first, and checks, after all
// the tests, that no namespace of this process is left behind, even from a
// test that failed (see testbed.Main): the harness's (twi), the replay
// recorder's (twr) and the benchmarks' (twb).
func TestMain(m *testing.M) {
	os.Exit(testbed.Main(m, nsPrefix, "twr", "twb"))
}

// envOptions configures newEnv.
type envOptions struct {
	// Subnet is N in 198.18.N.0/24: the kernel is 198.18.N.1, the stack
	// 198.18.N.2.
	Subnet byte
	// MTU of the link; 0 means 1500.
	MTU int
	// IPv6 gives both sides an IPv6 address too (testbed.Config.IPv6): the
	// kernel 2001:db8:0:N::1, the stack 2001:db8:0:N::2 (env.KernelAddr6,
	// env.StackAddr6).
	IPv6 bool
	// Over6 (with IPv6) makes the env's helpers talk IPv6: stackAddr,
	// kernelAddr, kernelDial, kernelListen and dial use the IPv6 addresses.
	Over6 bool
	// TCP and Backlog go to stack.Config.
	TCP     tcp.Config
	Backlog int
	// MaxTimeWait goes to stack.Config.MaxTimeWait.
	MaxTimeWait int
	// MoreAddrs go to stack.Config.MoreAddrs.
	MoreAddrs []netip.Addr
	// Record, if set, receives the stack's flight recording
	// (stack.Config.Record).
	Record io.Writer
	// Random loss in impair, seeded.
	Seed                    uint64
	EgressLoss, IngressLoss float64
}

// env is one test's world: a fresh namespace whose kernel talks through a TUN
// device, wrapped by impair, to a fresh stack (a testbed.Bed without a tap or
// a watcher, and the tests' hooks in impair).
type env struct {
	t          *testing.T
	NS, Link   string
	Bed        *testbed.Bed
	Imp        *impair.Device
	Stack      *stack.Stack
	KernelAddr netip.Addr // the namespace's side, 198.18.N.1
	StackAddr  netip.Addr // ours, 198.18.N.2
	// KernelAddr6 and StackAddr6: with envOptions.IPv6, 2001:db8:0:N::1
	// and ::2.
	KernelAddr6, StackAddr6 netip.Addr
	over6                   bool // envOptions.Over6

	mu        sync.Mutex
	taps      [3][]*tap // by impair.Direction
	blackhole [3]atomic.Bool
	closes    closeTracker
}

// newEnv makes the namespace, the link and the stack, and registers their
// removal (and a check that the namespace is gone) as cleanups.
func newEnv(t *testing.T, opts envOptions) *env {
	t.Helper()
	testbed.RequireRoot(t)
	e := &env{
		t:          t,
		NS:         tun.UniqueName(nsPrefix),
		Link:       tun.UniqueName(linkPrefix),
		KernelAddr: netip.AddrFrom4([4]byte{198, 18, opts.Subnet, 1}),
		StackAddr:  netip.AddrFrom4([4]byte{198, 18, opts.Subnet, 2}),
	}
	// Registered first, so it runs last: after the stack and the attachment
	// are closed, nothing of the namespace may remain.
	t.Cleanup(func() { e.checkGone() })

	bed, err := testbed.New(testbed.Config{
		Namespace: e.NS,
		Link:      e.Link,
		Subnet:    opts.Subnet,
		IPv6:      opts.IPv6,
		MTU:       opts.MTU,
		Impair: impair.Config{
			Seed:        opts.Seed,
			EgressLoss:  opts.EgressLoss,
			IngressLoss: opts.IngressLoss,
			DropEgress:  func(pkt []byte) bool { return e.hook(impair.Egress, pkt) },
			DropIngress: func(pkt []byte) bool { return e.hook(impair.Ingress, pkt) },
			OnDrop:      e.onDrop,
		},
	})
	if err != nil {
		t.Fatalf("test bed: %v", err)
	}
	e.Bed, e.Imp = bed, bed.Imp
	e.KernelAddr6, e.StackAddr6 = bed.KernelAddr6, bed.StackAddr6
	t.Cleanup(func() {
		if err := bed.Close(); err != nil {
			t.Errorf("closing the test bed: %v", err)
		}
	})
	st, err := stack.New(stack.Config{Device: bed.Dev, Addr: e.StackAddr, Addr6: e.StackAddr6, MoreAddrs: opts.MoreAddrs, TCP: opts.TCP, Backlog: opts.Backlog, Record: opts.Record, MaxTimeWait: opts.MaxTimeWait})
	if err != nil {
		t.Fatalf("stack: %v", err)
	}
	e.Stack = st
	t.Cleanup(func() { st.Close() })
	e.over6 = opts.Over6 && opts.IPv6
	return e
}

// checkGone fails the test if the namespace survived its attachment, and
// removes it then.
func (e *env) checkGone() {
	t := e.t
	if ns, err := vnetns.GetFromName(e.NS); err == nil {
		ns.Close()
		t.Errorf("namespace %s still exists after cleanup; removing it", e.NS)
		testbed.ForceRemove(e.NS)
	}
	if _, err := os.Stat(filepath.Join(netnsDir, e.NS)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s/%s: %v, want it gone", netnsDir, e.NS, err)
		testbed.ForceRemove(e.NS)
	}
}

// stackAddr returns "198.18.N.2:port".
func (e *env) stackAddr(port int) string {
	if e.over6 {
		return netip.AddrPortFrom(e.StackAddr6, uint16(port)).String()
	}
	return netip.AddrPortFrom(e.StackAddr, uint16(port)).String()
}

// kernelAddr returns "198.18.N.1:port".
func (e *env) kernelAddr(port int) string {
	if e.over6 {
		return netip.AddrPortFrom(e.KernelAddr6, uint16(port)).String()
	}
	return netip.AddrPortFrom(e.KernelAddr, uint16(port)).String()
}

// Do runs fn in the namespace. Sockets it creates stay in the namespace and
// may be used from any goroutine afterwards.
func (e *env) Do(fn func() error) error { return e.Bed.Do(fn) }

// kernelDial connects from the namespace's kernel to the stack. It may be
// called from any goroutine; the connection is closed at cleanup.
func (e *env) kernelDial(port int, timeout time.Duration) (*net.TCPConn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	dial := e.Bed.KernelDial
	if e.over6 {
		dial = e.Bed.KernelDial6
	}
	c, err := dial(ctx, port, nil)
	if err != nil {
		return nil, err
	}
	e.t.Cleanup(func() { c.Close() })
	return c, nil
}

// kernelListen listens in the namespace on 198.18.N.1:port (0: any). With
// rcvbuf > 0, SO_RCVBUF is set on the listening socket before listen, so
// accepted connections inherit it (and their window scale follows it).
func (e *env) kernelListen(t *testing.T, port, rcvbuf int) *net.TCPListener {
	t.Helper()
	listen := e.Bed.KernelListen
	if e.over6 {
		listen = e.Bed.KernelListen6
	}
	ln, err := listen(context.Background(), port, rcvbuf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// command returns `ip netns exec NS name args...`.
func (e *env) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return e.Bed.Command(ctx, name, args...)
}

// listen listens on the stack; the listener is closed at cleanup.
func (e *env) listen(t *testing.T, port int) net.Listener {
	t.Helper()
	ln, err := e.Stack.Listen("tcp", fmt.Sprintf(":%d", port))
	if err != nil {
		t.Fatalf("stack listen: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// dial connects the stack to the kernel; the connection is closed at cleanup.
func (e *env) dial(t *testing.T, port int) *stack.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := e.Stack.DialContext(ctx, "tcp", e.kernelAddr(port))
	if err != nil {
		t.Fatalf("stack dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*stack.Conn)
}

// acceptOne accepts one connection in a goroutine and returns its
// outcome on a channel.
func acceptOne(ln net.Listener) <-chan acceptResult {
	ch := make(chan acceptResult, 1)
	go func() {
		c, err := ln.Accept()
		ch <- acceptResult{c, err}
	}()
	return ch
}

type acceptResult struct {
	c   net.Conn
	err error
}

// waitAccept returns the accepted connection, failing the test after
// timeout. The connection is closed at cleanup.
func waitAccept(t *testing.T, ch <-chan acceptResult, timeout time.Duration) net.Conn {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("accept: %v", r.err)
		}
		t.Cleanup(func() { r.c.Close() })
		return r.c
	case <-time.After(timeout):
		t.Fatalf("accept: nothing after %v", timeout)
	}
	return nil
}

// echoServer accepts connections on ln and echoes each until the peer's
// FIN, then half-closes and closes. At cleanup it closes ln and waits for its
// goroutines.
func echoServer(t *testing.T, ln net.Listener) {
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				if _, err := io.Copy(c, c); err != nil {
					t.Errorf("echo %v: %v", c.RemoteAddr(), err)
					return
				}
				if err := c.(*stack.Conn).CloseWrite(); err != nil {
					t.Errorf("echo %v: CloseWrite: %v", c.RemoteAddr(), err)
				}
			})
		}
	})
}

// echoThrough writes data on c and half-closes, while reading everything back;
// it returns the SHA-256 of what came back and its length.
func echoThrough(c *net.TCPConn, data []byte) (sum [32]byte, n int64, err error) {
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		if err == nil {
			err = c.CloseWrite()
		}
		werr <- err
	}()
	h := sha256.New()
	n, rerr := io.Copy(h, c)
	if err := <-werr; err != nil {
		return sum, n, fmt.Errorf("write: %w", err)
	}
	if rerr != nil {
		return sum, n, fmt.Errorf("read: %w", rerr)
	}
	copy(sum[:], h.Sum(nil))
	return sum, n, nil
}

// randomBytes returns n deterministic pseudo-random bytes.
func randomBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8(seedBytes(seed))
	r.Read(b)
	return b
}

func seedBytes(seed uint64) [32]byte {
	var s [32]byte
	for i := range 8 {
		s[i] = byte(seed >> (8 * i))
	}
	copy(s[8:], "tcpwheel integration tests")
	return s
}

// segInfo is what the tests look at in a packet.
type segInfo struct {
	TCP      bool // an IPv4 packet with a whole TCP header
	Flags    header.TCPFlags
	Seq, Ack uint32
	Window   uint16
	Payload  int
	Src, Dst netip.AddrPort
}

func (s segInfo) has(f header.TCPFlags) bool { return s.Flags&f == f }

// pureACK: ACK only (PSH aside), no payload.
func (s segInfo) pureACK() bool {
	return s.TCP && s.Payload == 0 && s.Flags&^header.TCPFlagPsh == header.TCPFlagAck
}

func parseSeg(pkt []byte) segInfo {
	ip := header.IPv4(pkt)
	if !ip.IsValid(len(pkt)) || ip.Protocol() != uint8(header.TCPProtocolNumber) || ip.FragmentOffset() != 0 {
		return segInfo{}
	}
	hl, tl := int(ip.HeaderLength()), int(ip.TotalLength())
	seg := header.TCP(pkt[hl:tl])
	if len(seg) < header.TCPMinimumSize || int(seg.DataOffset()) < header.TCPMinimumSize || int(seg.DataOffset()) > len(seg) {
		return segInfo{}
	}
	src := netip.AddrFrom4(ip.SourceAddress().As4())
	dst := netip.AddrFrom4(ip.DestinationAddress().As4())
	return segInfo{
		TCP:     true,
		Flags:   seg.Flags(),
		Seq:     seg.SequenceNumber(),
		Ack:     seg.AckNumber(),
		Window:  seg.WindowSize(),
		Payload: len(seg) - int(seg.DataOffset()),
		Src:     netip.AddrPortFrom(src, seg.SourcePort()),
		Dst:     netip.AddrPortFrom(dst, seg.DestinationPort()),
	}
}

// tap records the packets of one direction that match, with the instant they
// crossed impair (egress: when the stack wrote them; ingress: when the stack's
// reader got them, before the stack handled them) and whether impair dropped
// them.
type tap struct {
	match   func(segInfo) bool
	mu      sync.Mutex
	recs    []tapRecord
	pending int // index of the record of the packet being decided, or -1
}

type tapRecord struct {
	At      time.Time
	Seg     segInfo
	Dropped bool
}

// watch starts recording the packets of direction dir that match.
func (e *env) watch(dir impair.Direction, match func(segInfo) bool) *tap {
	tp := &tap{match: match, pending: -1}
	e.mu.Lock()
	e.taps[dir] = append(e.taps[dir], tp)
	e.mu.Unlock()
	return tp
}

// records returns a copy of what the tap saw so far.
func (tp *tap) records() []tapRecord {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]tapRecord(nil), tp.recs...)
}

// waitFor waits until the tap holds n records, or until timeout, and returns
// what it holds.
func (tp *tap) waitFor(n int, timeout time.Duration) []tapRecord {
	deadline := time.Now().Add(timeout)
	for {
		r := tp.records()
		if len(r) >= n || time.Now().After(deadline) {
			return r
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// blackholeIngress makes impair drop every packet to the stack (on) or stop
// doing so.
func (e *env) blackholeIngress(on bool) { e.blackhole[impair.Ingress].Store(on) }

// hook is impair's DropEgress/DropIngress: it records and, for a blackholed
// direction, drops. Each direction's packets come from one goroutine at a
// time (the stack's loop writes, its reader reads), and impair calls OnDrop
// for a packet before it shows the hook the next one, which is what lets
// onDrop mark the pending record.
func (e *env) hook(dir impair.Direction, pkt []byte) bool {
	now := time.Now()
	e.mu.Lock()
	taps := e.taps[dir]
	e.mu.Unlock()
	var s segInfo
	if len(taps) > 0 {
		s = parseSeg(pkt)
	}
	if s.TCP || len(taps) == 0 {
		if !s.TCP {
			s = parseSeg(pkt)
		}
		e.closes.see(dir, s)
	}
	for _, tp := range taps {
		tp.mu.Lock()
		tp.pending = -1
		if tp.match(s) {
			tp.recs = append(tp.recs, tapRecord{At: now, Seg: s})
			tp.pending = len(tp.recs) - 1
		}
		tp.mu.Unlock()
	}
	return e.blackhole[dir].Load()
}

func (e *env) onDrop(dir impair.Direction, pkt []byte) {
	e.mu.Lock()
	taps := e.taps[dir]
	e.mu.Unlock()
	for _, tp := range taps {
		tp.mu.Lock()
		if tp.pending >= 0 {
			tp.recs[tp.pending].Dropped = true
		}
		tp.mu.Unlock()
	}
}

// waitUntil polls cond every few milliseconds until it holds or timeout
// passes, and reports whether it held.
func waitUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ms formats a duration in milliseconds with three decimals.
func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }

// mbps is the throughput of n bytes in d, in MB/s.
func mbps(n int64, d time.Duration) float64 { return float64(n) / d.Seconds() / 1e6 }

// closeTracker follows every connection's close on the wire, to tell the RSTs
// the stack sends to a connection that is still open from those it sends
// after both sides have closed: the listener's (or the closed port's) answer
// to a stray segment, such as the duplicate ACK a spurious retransmission
// provokes after the last ACK. Linux answers those with a RST as well.
type closeTracker struct {
	mu       sync.Mutex
	finEnd   map[[2]netip.AddrPort]uint32 // by (stack, kernel): the stack's FIN's sequence number + 1
	finAcked map[[2]netip.AddrPort]bool   // that FIN was acknowledged
	stray    []segInfo                    // RSTs after the FIN was acknowledged
	open     []segInfo                    // RSTs to connections still open
}

func (c *closeTracker) see(dir impair.Direction, s segInfo) {
	if !s.TCP {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finEnd == nil {
		c.finEnd = make(map[[2]netip.AddrPort]uint32)
		c.finAcked = make(map[[2]netip.AddrPort]bool)
	}
	if dir == impair.Egress {
		k := [2]netip.AddrPort{s.Src, s.Dst}
		switch {
		case s.has(header.TCPFlagRst) && c.finAcked[k]:
			c.stray = append(c.stray, s)
		case s.has(header.TCPFlagRst):
			c.open = append(c.open, s)
		case s.has(header.TCPFlagFin):
			c.finEnd[k] = s.Seq + uint32(s.Payload) + 1
		}
		return
	}
	k := [2]netip.AddrPort{s.Dst, s.Src}
	if end, ok := c.finEnd[k]; ok && s.has(header.TCPFlagAck) && int32(s.Ack-end) >= 0 {
		c.finAcked[k] = true
	}
}

// checkNoResets fails the test if the stack received a RST, or sent one to a
// connection that had not closed, or if its counters disagree with the RSTs
// on the wire. RSTs answering stray segments after a close are logged.
func (e *env) checkNoResets(t *testing.T) {
	t.Helper()
	st := e.Stack.Stats()
	e.closes.mu.Lock()
	stray, open := e.closes.stray, e.closes.open
	e.closes.mu.Unlock()
	for _, r := range open {
		t.Errorf("RST from %v to %v (seq %d) while the connection was open", r.Src, r.Dst, r.Seq)
	}
	if len(stray) > 0 {
		t.Logf("%d RSTs answered stray segments of connections that had closed (e.g. to %v)", len(stray), stray[0].Dst)
	}
	sent := uint64(len(stray) + len(open))
	if st.TCP.ResetsReceived != 0 || st.ResetsSent+st.TCP.ResetsSent != sent {
		t.Errorf("resets: stack sent %d for unknown segments, connections and listeners sent %d, received %d; want %d sent in all (as on the wire), 0 received",
			st.ResetsSent, st.TCP.ResetsSent, st.TCP.ResetsReceived, sent)
	}
}
