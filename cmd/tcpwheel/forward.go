package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tcpwheel/tcpwheel/cmd/tcpwheel/internal/baseline/gvisor"
	"github.com/tcpwheel/tcpwheel/internal/testbed"
	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/tcpwheel/tcpwheel/tun"
)

// `tcpwheel forward`: every TCP connection and UDP flow the client
// namespace sends into the TUN, to any address, is taken by the stack's
// forwarder (stack.Stack.Forward) and relayed to a real kernel socket made
// in a second, server namespace: a tun2socks without the SOCKS. Both
// namespaces are ours; nothing touches the host's interfaces.
//
//	client namespace                     this process                     server namespace
//	default routes ─► TUN ─► stack (198.18.0.2, forwarding) ─► relay ─► sockets ─► servers on
//	                                                                              198.19.1.0/24 (lo),
//	                                                                              2001:db8:1::/64 (lo)
//
// The server namespace's own link is a second TUN (198.19.0.1/24,
// 2001:db8:0:1::1/64) whose other addresses nobody answers: what the
// relay dials there is black-holed (the process reads and counts it).

// The forward command's fixed addresses, all in our namespaces.
var (
	fwdClientPeer = netip.MustParsePrefix("198.18.0.1/24") // the client namespace's kernel
	fwdStackAddr  = netip.MustParseAddr("198.18.0.2")      // the stack
	fwdServerPeer = netip.MustParsePrefix("198.19.0.1/24") // the server namespace's link; the rest of the /24 is black-holed
	fwdServerTUN  = netip.MustParseAddr("198.19.0.2")      // its TUN's other side (nobody)
	fwdServers    = netip.MustParsePrefix("198.19.1.1/24") // on the server namespace's loopback: every address of the /24 is local
	fwdServers6   = netip.MustParsePrefix("2001:db8:1::/64")
)

// forwardConfig is what `tcpwheel forward` is told by its flags.
type forwardConfig struct {
	netns, serverNetns string
	link, serverLink   string
	mtu                int
	dialTimeout        time.Duration
	handshakeFirst     bool
	maxPending         int
	maxPerSource       int
	maxUDPFlows        int
	udpIdle            time.Duration
	duration           time.Duration
	stats              time.Duration
	plain              bool
	thread             stack.LoopThread
	stack              string // fwdStacks
}

// The forwarding stacks of -stack: tcpwheel's, and gVisor's netstack with
// its own forwarders for comparison (fwdgvisor.go), on the plain TUN or in
// its best configuration (gvisor-gso: a TUN of its own with virtio-net
// headers, host GSO and the kernel's large segments; IPv4 only).
const (
	fwdTCPWheel  = "tcpwheel"
	fwdGVisor    = "gvisor"
	fwdGVisorGSO = "gvisor-gso"
)

func parseForwardFlags(args []string, stderr io.Writer) (forwardConfig, error) {
	fs := flag.NewFlagSet("tcpwheel forward", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg forwardConfig
	fs.StringVar(&cfg.netns, "netns", "tcpwheel-client", "network namespace to create for the clients (its default routes go into the TUN)")
	fs.StringVar(&cfg.serverNetns, "server-netns", "tcpwheel-server", "network namespace to create for the servers (the relay's sockets are made in it)")
	fs.StringVar(&cfg.link, "tun", "tcpwf0", "name of the clients' TUN device")
	fs.StringVar(&cfg.serverLink, "server-tun", "tcpwf1", "name of the server namespace's TUN device (its black hole)")
	fs.IntVar(&cfg.mtu, "mtu", 1500, "MTU of the TUN links")
	fs.DurationVar(&cfg.dialTimeout, "dial-timeout", 10*time.Second, "give up on a destination that does not answer after this long; the client then gets an ICMP host unreachable")
	fs.BoolVar(&cfg.handshakeFirst, "handshake-first", false, "complete the client's handshake before dialling the destination (default: dial first, and refuse the client as the destination refused the relay)")
	fs.IntVar(&cfg.maxPending, "max-pending", stack.DefaultMaxPending, "TCP flows not yet established, at most")
	fs.IntVar(&cfg.maxPerSource, "max-pending-per-source", stack.DefaultMaxPendingPerSource, "TCP flows not yet established per client address, at most")
	fs.IntVar(&cfg.maxUDPFlows, "max-udp-flows", stack.DefaultMaxUDPFlows, "UDP flows at most")
	fs.DurationVar(&cfg.udpIdle, "udp-idle", stack.DefaultUDPIdleTimeout, "end a UDP flow idle this long")
	fs.DurationVar(&cfg.duration, "duration", 0, "run this long, then exit (0: until SIGINT or SIGTERM)")
	fs.DurationVar(&cfg.stats, "stats", 0, "print a one-line counters summary at this interval (0: never)")
	fs.BoolVar(&cfg.plain, "no-offload", false, "open the clients' TUN without offloads")
	fs.TextVar(&cfg.thread, "loop-thread", stack.LoopAuto, "how the stack's loop holds its thread (stack.Config.LoopThread): auto, locked, parked or unlocked, as for run")
	fs.StringVar(&cfg.stack, "stack", fwdTCPWheel, "the forwarding stack: tcpwheel, or for comparison gVisor's netstack with its own TCP and UDP forwarders, as gVisor-based tun2socks proxies run it: gvisor (on the plain TUN) or gvisor-gso (on a TUN of its own with virtio-net headers and GSO; IPv4 only)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: tcpwheel forward [flags]

Relays every TCP connection and UDP flow that a client namespace sends, to
any address, through the stack's forwarder to real kernel sockets made in a
server namespace (a tun2socks without the SOCKS). Servers in the server
namespace may listen on any address of `+fwdServers.Masked().String()+` and `+fwdServers6.String()+`;
the rest of `+fwdServerPeer.Masked().String()+` is a black hole.

flags:`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, err
		}
		return cfg, fmt.Errorf("%w: %v", errUsage, err)
	}
	if err := cfg.check(fs); err != nil {
		return cfg, fmt.Errorf("%w: forward: %v", errUsage, err)
	}
	return cfg, nil
}

func (cfg *forwardConfig) check(fs *flag.FlagSet) error {
	badNS := func(n string) bool { return n == "" || strings.ContainsAny(n, "/\x00") || n == "." || n == ".." }
	badLink := func(n string) bool { return n == "" || len(n) > 15 || strings.ContainsAny(n, "/ \x00:") }
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case badNS(cfg.netns) || badNS(cfg.serverNetns) || cfg.netns == cfg.serverNetns:
		return fmt.Errorf("-netns %q and -server-netns %q must be two valid namespace names", cfg.netns, cfg.serverNetns)
	case badLink(cfg.link) || badLink(cfg.serverLink) || cfg.link == cfg.serverLink:
		return fmt.Errorf("-tun %q and -server-tun %q must be two valid interface names (1-15 characters, no '/', ':' or spaces)", cfg.link, cfg.serverLink)
	case cfg.mtu < 1280 || cfg.mtu > tun.MaxMTU:
		return fmt.Errorf("-mtu %d is outside [1280, %d] (IPv6 needs 1280)", cfg.mtu, tun.MaxMTU)
	case cfg.dialTimeout <= 0 || cfg.udpIdle <= 0:
		return fmt.Errorf("-dial-timeout %v and -udp-idle %v must be positive", cfg.dialTimeout, cfg.udpIdle)
	case cfg.maxPending < 1 || cfg.maxPerSource < 1 || cfg.maxUDPFlows < 1:
		return fmt.Errorf("-max-pending %d, -max-pending-per-source %d and -max-udp-flows %d must be positive", cfg.maxPending, cfg.maxPerSource, cfg.maxUDPFlows)
	case cfg.duration < 0 || cfg.stats < 0:
		return fmt.Errorf("-duration %v and -stats %v must not be negative", cfg.duration, cfg.stats)
	case cfg.stack != fwdTCPWheel && cfg.stack != fwdGVisor && cfg.stack != fwdGVisorGSO:
		return fmt.Errorf("-stack %q: want %s, %s or %s", cfg.stack, fwdTCPWheel, fwdGVisor, fwdGVisorGSO)
	case cfg.stack != fwdTCPWheel && cfg.handshakeFirst:
		return fmt.Errorf("-handshake-first is tcpwheel's (-stack %s dials first, as gVisor-based proxies do)", cfg.stack)
	}
	return nil
}

func cmdForward(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseForwardFlags(args, stderr)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("forward: needs root (TUN devices and network namespaces)")
	}
	ctx, stop := namespaceCommand(cfg.duration)
	defer stop()
	fw, err := startForward(cfg)
	if err != nil {
		return err
	}
	defer fw.close()
	fmt.Fprintf(stdout, "tcpwheel forward ready: clients in network namespace %q (%s, %s; default routes into %s), servers in %q (on %s and %s), black hole %s\n",
		cfg.netns, fwdClientPeer.Addr(), fw.client.KernelAddr6, cfg.link, cfg.serverNetns, fwdServers.Masked(), fwdServers6, fwdServerPeer.Masked())
	sudo := ""
	if os.Getenv("SUDO_USER") != "" {
		sudo = "sudo "
	}
	fmt.Fprintf(stdout, "  try: %sip netns exec %s python3 -m http.server --bind 198.19.1.80 80 &\n", sudo, cfg.serverNetns)
	fmt.Fprintf(stdout, "       %sip netns exec %s curl http://198.19.1.80/\n", sudo, cfg.netns)
	fmt.Fprintf(stdout, "       %sip netns exec %s curl -m 3 http://198.19.0.9/    (a black hole: ICMP host unreachable after -dial-timeout)\n", sudo, cfg.netns)
	var tick <-chan time.Time
	if cfg.stats > 0 {
		t := time.NewTicker(cfg.stats)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintf(stdout, "tcpwheel forward stopping: %s\n", fw.statsLine())
			return nil
		case <-tick:
			fmt.Fprintln(stdout, fw.statsLine())
		}
	}
}

// forwarder is a running `tcpwheel forward`: the two namespaces, the stack,
// and the relay.
type forwarder struct {
	cfg            forwardConfig
	client, server *testbed.Bed
	s              *stack.Stack  // -stack tcpwheel
	gv             *gvisor.Stack // -stack gvisor, gvisor-gso (fwdgvisor.go)
	dial           nsDialer
	st             relayStats
	ctx            context.Context // the relays' dials; cancelled by close
	cancel         context.CancelFunc

	mu      sync.Mutex
	closing bool           // guarded by mu: no relay starts any more
	wg      sync.WaitGroup // the relays and the black hole's reader; Add under mu
}

// enter registers a relay about to start, unless fw is closing.
func (fw *forwarder) enter() bool {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.closing {
		return false
	}
	fw.wg.Add(1)
	return true
}

// relayStats counts the relay's work.
type relayStats struct {
	tcpRelayed, tcpRefused, tcpUnreachable, tcpFailed atomic.Uint64
	udpRelayed, udpFailed, udpUnreachable             atomic.Uint64
	blackHoled                                        atomic.Uint64 // packets sent to the black hole
	bytesUp, bytesDown                                atomic.Uint64
}

// startForward brings everything up; on failure it takes down what it
// made.
func startForward(cfg forwardConfig) (_ *forwarder, err error) {
	fw := &forwarder{cfg: cfg}
	fw.ctx, fw.cancel = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			fw.close()
			err = fmt.Errorf("forward: %w", err)
		}
	}()
	offload := !cfg.plain && cfg.stack == fwdTCPWheel // gVisor's links read plain packets, or open their own TUN
	if fw.client, err = testbed.New(testbed.Config{Namespace: cfg.netns, Link: cfg.link, Peer: fwdClientPeer, Stack: fwdStackAddr, MTU: cfg.mtu, IPv6: true, Offload: offload}); err != nil {
		return nil, err
	}
	var vt *gvisor.VnetTUN
	if cfg.stack == fwdGVisorGSO {
		if vt, err = gvisor.OpenVnetTUNOn(fw.client, "twf", cfg.mtu); err != nil {
			return nil, err
		}
		err = fw.client.Do(func() error { return defaultRoutes(vt.Name(), false) })
	} else {
		err = fw.client.Do(func() error { return defaultRoutes(cfg.link, true) })
	}
	if err != nil {
		if vt != nil {
			vt.Close()
		}
		return nil, err
	}
	if fw.server, err = testbed.New(testbed.Config{Namespace: cfg.serverNetns, Link: cfg.serverLink, Peer: fwdServerPeer, Stack: fwdServerTUN, Subnet: 1, MTU: cfg.mtu, IPv6: true}); err != nil {
		return nil, err
	}
	if err = fw.server.Do(serverLoopback); err != nil {
		return nil, err
	}
	fw.dial = nsDialer{do: fw.server.Do}
	fw.enter()
	go fw.blackHole()
	if cfg.stack != fwdTCPWheel {
		return fw, fw.startGVisor(vt) // fwdgvisor.go
	}
	if fw.s, err = stack.New(stack.Config{Device: fw.client.Dev, Addr: fwdStackAddr, Addr6: fw.client.StackAddr6, Prefix: fwdClientPeer.Masked(), Backlog: defaultRunBacklog, LoopThread: cfg.thread}); err != nil {
		return nil, err
	}
	err = fw.s.Forward(stack.ForwardConfig{
		TCP: fw.relayTCP, UDP: fw.relayUDP, HandshakeFirst: cfg.handshakeFirst,
		MaxPending: cfg.maxPending, MaxPendingPerSource: cfg.maxPerSource, MaxUDPFlows: cfg.maxUDPFlows, UDPIdleTimeout: cfg.udpIdle,
		PendingTimeout: cfg.dialTimeout + 5*time.Second, // the relay decides first; this is the backstop
	})
	if err != nil {
		return nil, err
	}
	return fw, nil
}

// close takes everything down: the stack (which ends the relays' flows),
// the relays, the namespaces.
func (fw *forwarder) close() {
	fw.mu.Lock()
	fw.closing = true
	fw.mu.Unlock()
	fw.cancel()
	if fw.s != nil {
		fw.s.Close()
	}
	if fw.gv != nil {
		fw.gv.Close()
	}
	if fw.server != nil {
		fw.server.Close() // ends the black hole's reader, and fails the relays' dials
	}
	fw.wg.Wait()
	if fw.client != nil {
		fw.client.Close()
	}
}

// defaultRoutes sends everything the client namespace sends to anything
// into the TUN link, for IPv4 and, with v6, IPv6. It runs in the client
// namespace.
func defaultRoutes(link string, v6 bool) error {
	l, err := netlink.LinkByName(link)
	if err != nil {
		return err
	}
	dsts := []string{"0.0.0.0/0", "::/0"}
	if !v6 {
		dsts = dsts[:1]
	}
	for _, dst := range dsts {
		_, n, _ := net.ParseCIDR(dst)
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: n, Scope: netlink.SCOPE_LINK}); err != nil {
			return fmt.Errorf("route %s dev %s: %w", dst, link, err)
		}
	}
	return nil
}

// serverLoopback makes every address of fwdServers and fwdServers6 local
// to the server namespace: the first as the loopback's address with its
// prefix (a loopback's prefix route is local), the second as a local route
// on the loopback, whose IPv6 is turned on (netns.Attach turned IPv6 off
// but for its link). It runs in the server namespace.
func serverLoopback() error {
	// IPv6 on the loopback, and binding to any address of the local
	// route (IPv4 binds to a local route's addresses by itself).
	for _, key := range []string{"net/ipv6/conf/lo/disable_ipv6", "net/ipv6/ip_nonlocal_bind"} {
		v := "0\n"
		if strings.HasSuffix(key, "bind") {
			v = "1\n"
		}
		if err := os.WriteFile("/proc/sys/"+key, []byte(v), 0); err != nil {
			return err
		}
	}
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	p := fwdServers
	if err := netlink.AddrAdd(lo, &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)}}); err != nil {
		return fmt.Errorf("address %v on lo: %w", p, err)
	}
	p6 := fwdServers6
	r := &netlink.Route{LinkIndex: lo.Attrs().Index, Dst: &net.IPNet{IP: p6.Addr().AsSlice(), Mask: net.CIDRMask(p6.Bits(), 128)}, Type: unix.RTN_LOCAL, Table: unix.RT_TABLE_LOCAL, Scope: netlink.SCOPE_HOST}
	if err := netlink.RouteAdd(r); err != nil {
		return fmt.Errorf("local route %v on lo: %w", p6, err)
	}
	return nil
}

// blackHole reads and counts what the server namespace sends to its TUN:
// the black-holed destinations' SYNs and datagrams. It ends when the
// server bed closes.
func (fw *forwarder) blackHole() {
	defer fw.wg.Done()
	buf := make([]byte, tun.MaxFrame)
	for {
		if _, err := fw.server.Dev.ReadPacket(buf); err != nil {
			if errors.Is(err, io.ErrShortBuffer) {
				continue
			}
			return // closed
		}
		fw.st.blackHoled.Add(1)
	}
}

// relayTCP is the forwarder's TCP handler: it dials the original
// destination in the server namespace and then accepts the client (or,
// with -handshake-first, the other way round), and copies both ways with
// half-closes.
func (fw *forwarder) relayTCP(r *stack.TCPRequest) {
	if !fw.enter() {
		r.Reject(stack.RejectReset)
		return
	}
	defer fw.wg.Done()
	var c *stack.Conn
	var err error
	if fw.cfg.handshakeFirst {
		if c, err = r.Accept(); err != nil {
			fw.st.tcpFailed.Add(1)
			return
		}
	}
	up, refused, err := fw.dialUp(r.Destination())
	if err != nil {
		how := stack.RejectUnreachable
		if refused {
			how = stack.RejectReset
		}
		if c != nil {
			c.Abort()
			return
		}
		r.Reject(how)
		return
	}
	defer up.Close()
	if c == nil {
		if c, err = r.Accept(); err != nil {
			fw.st.tcpFailed.Add(1)
			return
		}
	}
	defer c.Close()
	fw.st.tcpRelayed.Add(1)
	fw.pipe(c, up)
}

// dialUp connects to a relayed flow's destination in the server
// namespace, within -dial-timeout, and counts a failure as refused (the
// destination reset the connect) or unreachable.
func (fw *forwarder) dialUp(dst netip.AddrPort) (up *net.TCPConn, refused bool, err error) {
	ctx, cancel := context.WithTimeout(fw.ctx, fw.cfg.dialTimeout)
	defer cancel()
	if up, err = fw.dial.dialTCP(ctx, dst); err == nil {
		return up, false, nil
	}
	if refused = errors.Is(err, syscall.ECONNREFUSED); refused {
		fw.st.tcpRefused.Add(1)
	} else {
		fw.st.tcpUnreachable.Add(1)
	}
	return nil, refused, err
}

// relayed is the client's side of a relayed TCP flow: a stack.Conn, or
// gVisor's (fwdgvisor.go).
type relayed interface {
	io.ReadWriter
	CloseWrite() error
	Abort() error
}

// pipe copies c's bytes to up and up's to c until both directions end,
// passing half-closes on, and a reset as a reset.
func (fw *forwarder) pipe(c relayed, up *net.TCPConn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		n, err := io.Copy(up, c)
		fw.st.bytesUp.Add(uint64(n))
		if err != nil { // the client reset: so does the relay
			up.SetLinger(0)
			up.Close()
			return
		}
		up.CloseWrite()
	}()
	n, err := io.Copy(c, up)
	fw.st.bytesDown.Add(uint64(n))
	if err != nil {
		c.Abort()
	} else {
		c.CloseWrite()
	}
	<-done
}

// relayUDP is the forwarder's UDP handler: a connected UDP socket in the
// server namespace per flow, datagrams copied both ways until the flow
// ends (its idle timeout on the stack's wheel).
func (fw *forwarder) relayUDP(f *stack.UDPFlow) {
	defer f.Close()
	if !fw.enter() {
		return
	}
	defer fw.wg.Done()
	up, err := fw.dial.dialUDP(netip.MustParseAddrPort(f.LocalAddr().String()))
	if err != nil {
		fw.st.udpFailed.Add(1)
		return
	}
	fw.st.udpRelayed.Add(1)
	go fw.udpDown(up, f, func() { f.Unreachable() })
	buf := make([]byte, 64<<10)
	for {
		n, err := f.Read(buf)
		if err != nil {
			break
		}
		up.Write(buf[:n])
	}
	up.Close()
}

// udpDown copies a UDP flow's datagrams from the destination (up) to the
// client (to) until up is closed or to fails; a port unreachable from the
// destination is counted and passed on by unreachable, if not nil.
func (fw *forwarder) udpDown(up *net.UDPConn, to io.Writer, unreachable func()) {
	buf := make([]byte, 64<<10)
	for {
		n, err := up.Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if errors.Is(err, syscall.ECONNREFUSED) {
				// The destination's port unreachable: passed on to the
				// client, whose connected socket then fails too.
				fw.st.udpUnreachable.Add(1)
				if unreachable != nil {
					unreachable()
				}
			}
			continue // the flow goes on (the kernel's ICMP errors are per datagram)
		}
		if _, err := to.Write(buf[:n]); err != nil {
			return
		}
	}
}

// statsLine is forward's one-line summary: the forwarder's counters, then
// how the stack's loop sleeps (loopSummary, as run's stats line ends).
func (fw *forwarder) statsLine() string {
	if fw.gv != nil {
		return fw.gvisorStatsLine() // fwdgvisor.go
	}
	st := fw.s.Stats()
	f := st.Forward
	return fmt.Sprintf("tcp requests %d accepted %d pending %d refused %d unreachable %d failed %d | timeouts %d drops pending %d per-source %d | udp flows %d active %d expired %d in %d out %d drops %d refused %d | bytes up %d down %d | black-holed packets %d | conns %d | %s",
		f.TCPRequests, f.TCPAccepted, f.Pending, fw.st.tcpRefused.Load(), fw.st.tcpUnreachable.Load(), fw.st.tcpFailed.Load(),
		f.TCPTimeouts, f.DropsPending, f.DropsPerSource,
		f.UDPFlows, f.UDPActive, f.UDPExpired, f.UDPIn, f.UDPOut, f.DropsUDPFlows+f.DropsUDPQueue, fw.st.udpUnreachable.Load(),
		fw.st.bytesUp.Load(), fw.st.bytesDown.Load(), fw.st.blackHoled.Load(), st.Connections,
		loopSummary(st))
}

// nsDialer makes sockets in a network namespace and connects them: each
// socket is made on a thread that entered the namespace (do: a
// netns.Attachment's Do), where it stays; the connect needs no such thread,
// so that a thousand dials in flight hold no thread each.
type nsDialer struct{ do func(func() error) error }

// socket makes a non-blocking socket in the namespace, as an *os.File on
// Go's poller.
func (d nsDialer) socket(dst netip.AddrPort, typ int) (*os.File, unix.Sockaddr, error) {
	family := unix.AF_INET6
	var sa unix.Sockaddr = &unix.SockaddrInet6{Port: int(dst.Port()), Addr: dst.Addr().As16()}
	if dst.Addr().Is4() {
		family = unix.AF_INET
		sa = &unix.SockaddrInet4{Port: int(dst.Port()), Addr: dst.Addr().As4()}
	}
	fd := -1
	err := d.do(func() (err error) {
		fd, err = unix.Socket(family, typ|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return os.NewFile(uintptr(fd), "socket"), sa, nil
}

// dialTCP connects to dst from the namespace, within ctx.
func (d nsDialer) dialTCP(ctx context.Context, dst netip.AddrPort) (*net.TCPConn, error) {
	c, err := d.dial(ctx, dst, unix.SOCK_STREAM)
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// dialUDP opens a UDP socket in the namespace connected to dst.
func (d nsDialer) dialUDP(dst netip.AddrPort) (*net.UDPConn, error) {
	c, err := d.dial(context.Background(), dst, unix.SOCK_DGRAM)
	if err != nil {
		return nil, err
	}
	return c.(*net.UDPConn), nil
}

// dial makes a socket of type typ in the namespace and connects it to dst,
// waiting on Go's poller for a connect in progress (TCP's) within ctx.
func (d nsDialer) dial(ctx context.Context, dst netip.AddrPort, typ int) (net.Conn, error) {
	f, sa, err := d.socket(dst, typ)
	if err != nil {
		return nil, err
	}
	defer f.Close() // FileConn makes a copy
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cerr error
	if err := rc.Control(func(fd uintptr) { cerr = unix.Connect(int(fd), sa) }); err != nil {
		return nil, err
	}
	if errors.Is(cerr, unix.EINPROGRESS) {
		if dl, ok := ctx.Deadline(); ok {
			f.SetWriteDeadline(dl)
		}
		stop := context.AfterFunc(ctx, func() { f.SetWriteDeadline(time.Unix(1, 0)) })
		defer stop()
		cerr = nil
		werr := rc.Write(func(fd uintptr) bool {
			n, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
			switch {
			case err != nil:
				cerr = err
			case n != 0:
				cerr = syscall.Errno(n)
			default:
				_, err := unix.Getpeername(int(fd))
				return err == nil // ENOTCONN: still connecting, wait for writability again
			}
			return true
		})
		if werr != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, werr
		}
	}
	if cerr != nil {
		return nil, cerr
	}
	return net.FileConn(f)
}
