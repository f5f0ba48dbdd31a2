//go:build linux

package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/impair"
	"github.com/tcpwheel/tcpwheel/tun/netns"
	"github.com/tcpwheel/tcpwheel/tun/pcaptap"
)

// Config describes a Bed. The zero Config is a bed on 198.18.0.0/24 with
// fresh "tw..." names, a 1500-byte MTU, and an impairment layer that drops
// nothing.
type Config struct {
	// Prefix starts the fresh names (tun.UniqueName) of the namespace and
	// the link; empty means "tw". Every name this project uses starts with
	// "tw", which is what netns.RemoveLeftovers looks at.
	Prefix string

	// Namespace and Link, when set, are taken as they are instead of fresh
	// names (tcpwheel run's -netns and -tun).
	Namespace, Link string

	// Subnet is N in 198.18.N.0/24: the kernel is 198.18.N.1/24 and the
	// stack 198.18.N.2.
	Subnet byte

	// Peer and Stack, when valid, replace Subnet's addresses: the kernel
	// side's address with its prefix (within 198.18.0.0/15), and the
	// stack's address inside that prefix (tcpwheel run's -peer and -addr).
	Peer  netip.Prefix
	Stack netip.Addr

	// IPv6 gives the kernel side an IPv6 address too: 2001:db8:0:N::1/64
	// (N the Subnet), usable at once (no DAD), the stack's 2001:db8:0:N::2
	// (Bed.KernelAddr6, Bed.StackAddr6).
	IPv6 bool

	// MTU of the link; 0 means tun.DefaultMTU.
	MTU int

	// TxQueueLen is the link's txqueuelen, the kernel's queue of packets
	// for the stack (netns.NamespaceConfig.TxQueueLen); 0 means
	// netns.DefaultTxQueueLen.
	TxQueueLen int

	// Impair configures the impairment layer on the TUN device.
	Impair impair.Config

	// PcapPath, when set, puts a pcap tap on the stack's side of the
	// impairment, writing to a file created at that path: it shows what
	// the stack sent, including the packets the impairment then dropped.
	PcapPath string

	// Offload opens the TUN with offloads (netns.NamespaceConfig.Offload):
	// the wrappers pass its frames on (tun.Offloader), taking them apart
	// packet by packet for their work. A bed with offloads and nothing for
	// the impairment layer to do (no loss, no drop hooks, no rules) leaves
	// that layer out, with Imp nil, which spares a copy of every frame.
	Offload bool

	// Queues, if more than 1, makes the TUN a multi-queue device with that
	// many queues (netns.NamespaceConfig.Queues), for a stack with as many
	// loops (stack.Config.Loops): Bed.Devs holds a chain per queue, each
	// with an impairment layer of its own (Impair's hooks are called from
	// every queue's; its seeded loss draws apart per queue) and Watch's
	// wrapper. Such a bed has no pcap tap: New fails with PcapPath.
	Queues int

	// Watch, when set, wraps the top of the chain (the comparison's packet
	// watcher). The device it returns should forward tun.Pollable.
	Watch func(tun.Device) tun.Device
}

// Bed is a fresh network namespace whose kernel is the peer, a TUN device
// whose kernel side lives in it, and the device chain on the userspace side:
//
//	stack ── Watch ── pcap tap ── impair ── TUN ── kernel (namespace)
//
// Every layer forwards the TUN's tun.Pollable, so a stack on Dev reads the
// TUN directly, as on the bare device. Create it with New; release it with
// Close.
type Bed struct {
	// Dev is the top of the chain: give it to the stack under test, which
	// then owns it (Close closes it again, harmlessly).
	Dev tun.Device
	// Devs are the tops of the chains of a multi-queue bed's queues
	// (Config.Queues), Dev first (stack.Config.Queues takes the others);
	// else just Dev.
	Devs []tun.Device
	// Att is the namespace and the TUN device.
	Att *netns.Attachment
	// Imp is the impairment layer, for rules and counters (a multi-queue
	// bed's first queue's).
	Imp *impair.Device
	// Tap is the pcap tap, or nil without Config.PcapPath.
	Tap *pcaptap.Tap

	// KernelAddr is the kernel's address in the namespace, and StackAddr
	// the stack's.
	KernelAddr, StackAddr netip.Addr
	// KernelAddr6 and StackAddr6 are the IPv6 addresses with Config.IPv6,
	// else the zero Addr.
	KernelAddr6, StackAddr6 netip.Addr

	closeOnce sync.Once
	closeErr  error
}

// New makes the namespace, the link and the device chain. If any step
// fails, everything made so far is undone (no namespace, no link is left)
// and the step's error is returned as it is.
func New(cfg Config) (_ *Bed, err error) {
	peer, stackAddr, err := cfg.Addrs()
	if err != nil {
		return nil, err
	}
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = "tw"
	}
	ns, link := cfg.Namespace, cfg.Link
	if ns == "" {
		ns = tun.UniqueName(prefix)
	}
	if link == "" {
		link = tun.UniqueName(prefix)
	}
	b := &Bed{KernelAddr: peer.Addr(), StackAddr: stackAddr}
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	var peer6 netip.Prefix
	if cfg.IPv6 {
		peer6, b.StackAddr6 = cfg.Addrs6()
		b.KernelAddr6 = peer6.Addr()
	}
	im := cfg.Impair
	impaired := !cfg.Offload || im.EgressLoss != 0 || im.IngressLoss != 0 || im.DropEgress != nil || im.DropIngress != nil || len(im.Rules) != 0
	if cfg.Queues > 1 && cfg.PcapPath != "" {
		return nil, fmt.Errorf("testbed: %d queues: a multi-queue bed has no pcap tap: %w", cfg.Queues, tun.ErrInvalidConfig)
	}
	if b.Att, err = netns.Attach(netns.NamespaceConfig{Namespace: ns, Link: link, PeerAddr: peer, PeerAddr6: peer6, MTU: cfg.MTU, TxQueueLen: cfg.TxQueueLen, Offload: cfg.Offload, Queues: cfg.Queues}); err != nil {
		return nil, err
	}
	b.Dev = b.Att.Dev
	if cfg.Queues > 1 {
		for _, q := range b.Att.Queues {
			var d tun.Device = q
			if impaired {
				imp, err := impair.Wrap(q, cfg.Impair)
				if err != nil {
					return nil, err
				}
				if b.Imp == nil {
					b.Imp = imp // the first queue's
				}
				d = imp
			}
			if cfg.Watch != nil {
				d = cfg.Watch(d)
			}
			b.Devs = append(b.Devs, d)
		}
		b.Dev = b.Devs[0]
		return b, nil
	}
	if impaired {
		if b.Imp, err = impair.Wrap(b.Att.Dev, cfg.Impair); err != nil {
			return nil, err
		}
		b.Dev = b.Imp
	}
	if cfg.PcapPath != "" {
		if b.Tap, err = pcaptap.Create(cfg.PcapPath, b.Dev, pcaptap.Config{}); err != nil {
			return nil, err
		}
		b.Dev = b.Tap
	}
	if cfg.Watch != nil {
		b.Dev = cfg.Watch(b.Dev)
	}
	b.Devs = []tun.Device{b.Dev}
	return b, nil
}

// Addrs returns the addresses of a bed made from cfg: the kernel side's
// with its prefix, and the stack's; an error wrapping tun.ErrInvalidConfig
// if the stack's is not another address inside the kernel side's prefix.
func (cfg *Config) Addrs() (netip.Prefix, netip.Addr, error) {
	peer := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, cfg.Subnet, 1}), 24)
	stackAddr := netip.AddrFrom4([4]byte{198, 18, cfg.Subnet, 2})
	if cfg.Peer.IsValid() {
		peer = cfg.Peer
	}
	if cfg.Stack.IsValid() {
		stackAddr = cfg.Stack
	}
	if !peer.Contains(stackAddr) || peer.Addr() == stackAddr {
		return netip.Prefix{}, netip.Addr{}, fmt.Errorf("testbed: stack address %v must be another address inside %v: %w", stackAddr, peer, tun.ErrInvalidConfig)
	}
	return peer, stackAddr, nil
}

// Addrs6 returns the IPv6 addresses of a bed made from cfg with IPv6: the
// kernel side's, 2001:db8:0:N::1/64, and the stack's, 2001:db8:0:N::2.
func (cfg *Config) Addrs6() (netip.Prefix, netip.Addr) {
	a := [16]byte{0x20, 0x01, 0x0d, 0xb8, 6: 0, 7: cfg.Subnet, 15: 1}
	peer := netip.PrefixFrom(netip.AddrFrom16(a), 64)
	a[15] = 2
	return peer, netip.AddrFrom16(a)
}

// Namespace is the name of the bed's network namespace (`ip netns`).
func (b *Bed) Namespace() string { return b.Att.Config().Namespace }

// Link is the name of the TUN link, which lives in the namespace.
func (b *Bed) Link() string { return b.Att.Config().Link }

var _ io.Closer = (*Bed)(nil)

// Close closes the device chain and the attachment: the link and the
// namespace are gone when it returns. It is idempotent: later calls return
// the first call's result.
func (b *Bed) Close() error {
	b.closeOnce.Do(func() {
		var errs []error
		if b.Dev != nil { // the chain down to the TUN
			errs = append(errs, b.Dev.Close())
		}
		for _, d := range b.Devs[min(1, len(b.Devs)):] { // the other queues' chains
			errs = append(errs, d.Close())
		}
		if b.Att != nil {
			errs = append(errs, b.Att.Close())
		}
		b.closeErr = errors.Join(errs...)
	})
	return b.closeErr
}

// Do runs fn in the namespace (see netns.Attachment.Do): sockets it creates
// stay there, and may be used from any goroutine afterwards.
func (b *Bed) Do(fn func() error) error { return b.Att.Do(fn) }

// KernelAddrPort returns "198.18.N.1:port", the kernel's side.
func (b *Bed) KernelAddrPort(port int) string {
	return net.JoinHostPort(b.KernelAddr.String(), strconv.Itoa(port))
}

// StackAddrPort returns "198.18.N.2:port", the stack's side.
func (b *Bed) StackAddrPort(port int) string {
	return net.JoinHostPort(b.StackAddr.String(), strconv.Itoa(port))
}

// KernelListen listens in the namespace on the kernel's address and port
// (0: any). With rcvbuf > 0, SO_RCVBUF is set on the listening socket
// before listen, so that accepted connections inherit it (and their window
// scale follows it).
func (b *Bed) KernelListen(ctx context.Context, port, rcvbuf int) (*net.TCPListener, error) {
	return b.kernelListen(ctx, "tcp4", b.KernelAddrPort(port), rcvbuf)
}

// KernelListen6 is KernelListen on the kernel's IPv6 address (Config.IPv6).
func (b *Bed) KernelListen6(ctx context.Context, port, rcvbuf int) (*net.TCPListener, error) {
	return b.kernelListen(ctx, "tcp6", net.JoinHostPort(b.KernelAddr6.String(), strconv.Itoa(port)), rcvbuf)
}

func (b *Bed) kernelListen(ctx context.Context, network, address string, rcvbuf int) (*net.TCPListener, error) {
	lc := net.ListenConfig{}
	if rcvbuf > 0 {
		lc.Control = func(network, address string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf)
			}); err != nil {
				return err
			}
			return serr
		}
	}
	var ln net.Listener
	err := b.Do(func() (err error) {
		ln, err = lc.Listen(ctx, network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("kernel listen: %w", err)
	}
	return ln.(*net.TCPListener), nil
}

// KernelDial connects from the namespace's kernel to the stack's port;
// control, if not nil, runs on the socket before connect. ctx bounds the
// connect only.
func (b *Bed) KernelDial(ctx context.Context, port int, control func(fd uintptr)) (*net.TCPConn, error) {
	return b.kernelDial(ctx, "tcp4", b.StackAddrPort(port), control)
}

// KernelDial6 is KernelDial to the stack's IPv6 address (Config.IPv6).
func (b *Bed) KernelDial6(ctx context.Context, port int, control func(fd uintptr)) (*net.TCPConn, error) {
	return b.kernelDial(ctx, "tcp6", net.JoinHostPort(b.StackAddr6.String(), strconv.Itoa(port)), control)
}

func (b *Bed) kernelDial(ctx context.Context, network, address string, control func(fd uintptr)) (*net.TCPConn, error) {
	var c net.Conn
	err := b.Do(func() (err error) {
		d := net.Dialer{}
		if control != nil {
			d.Control = func(_, _ string, rc syscall.RawConn) error { return rc.Control(control) }
		}
		c, err = d.DialContext(ctx, network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("kernel dial: %w", err)
	}
	return c.(*net.TCPConn), nil
}

// Command returns `ip netns exec NAMESPACE name args...`: a program run
// inside the namespace.
func (b *Bed) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", b.Namespace(), name}, args...)...)
}
