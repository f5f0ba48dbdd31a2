//go:build linux

package netns

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/tcpwheel/tcpwheel/tun"
)

// netnsDir is where named network namespaces are bind-mounted, as by
// `ip netns add` and github.com/vishvananda/netns.
const netnsDir = "/run/netns"

// ownerPrefix starts the alias Attach gives the loopback interface of a
// namespace it creates. The marker lives and dies with the namespace itself,
// so no state is kept anywhere else. The rest of the alias is the owning
// process's pid and a random token naming the one Attachment that currently
// owns the namespace: "tcpwheel/tun:pid=1234/0123456789abcdef". (The prefix
// keeps the name of the package this code was born in, so that leftovers of
// older binaries are still recognised.)
const ownerPrefix = "tcpwheel/tun:"

// ownerToken is a fresh marker for an Attachment of the process pid.
func ownerToken(pid int) string {
	return ownerPrefix + "pid=" + strconv.Itoa(pid) + "/" + randomToken()
}

// ownerPID is the pid an owner marker names, if it names one (markers of
// older versions do not).
func ownerPID(alias string) (int, bool) {
	rest, ok := strings.CutPrefix(alias, ownerPrefix+"pid=")
	if !ok {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest, "/")
	pid, err := strconv.Atoi(digits)
	if !ok || err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// ErrNamespaceExists is wrapped by Attach when the named network namespace
// already exists and may not be reused (see Attach).
var ErrNamespaceExists = errors.New("netns: network namespace already exists")

// legacyLeftoverAge is how old a namespace whose marker names no owner pid
// must be before RemoveLeftovers takes it for a leftover.
const legacyLeftoverAge = 10 * time.Minute

// RemoveLeftovers deletes the namespaces Attach created for processes that
// died without Close (killed, or a test binary that hit its timeout), and
// returns their names. A namespace is a leftover, whatever its name (a
// custom `tcpwheel run -netns NAME` too), when its loopback carries Attach's
// marker, it holds no link but the loopback (the TUN link
// of a live Attachment lives in it; a dead process's went with its
// descriptor), and the process the marker names no longer runs (for a
// marker that names none, the namespace is over ten minutes old). Any other
// namespace is left as it was.
//
// Attach does not call it: whoever makes namespaces calls it once at its
// start (the tcpwheel command, the test bed, a test binary's TestMain), so
// that a process killed at a timeout, which cannot clean up after itself,
// is cleaned up after by the next one.
func RemoveLeftovers() ([]string, error) {
	entries, err := os.ReadDir(netnsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("netns: leftovers: %w", err)
	}
	var removed []string
	var errs []error
	for _, de := range entries {
		name := de.Name()
		gone, err := removeIfLeftover(name)
		if err != nil {
			errs = append(errs, err)
		}
		if gone {
			removed = append(removed, name)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return removed, fmt.Errorf("netns: leftovers: %w", err)
	}
	return removed, nil
}

// removeIfLeftover deletes the namespace name if it is a leftover (see
// RemoveLeftovers).
func removeIfLeftover(name string) (bool, error) {
	path := filepath.Join(netnsDir, name)
	var st unix.Stat_t
	var sfs unix.Statfs_t
	if unix.Stat(path, &st) != nil || unix.Statfs(path, &sfs) != nil || sfs.Type != unix.NSFS_MAGIC {
		return false, nil // gone meanwhile, or not (yet) a namespace's mount
	}
	ns, err := vnetns.GetFromPath(path)
	if err != nil {
		return false, nil // gone meanwhile
	}
	defer ns.Close()
	alias, others, err := inspectNamespace(ns)
	switch {
	case err != nil:
		return false, err
	case !strings.HasPrefix(alias, ownerPrefix):
		return false, nil // not Attach's
	case len(others) > 0:
		return false, nil // in use
	}
	if pid, ok := ownerPID(alias); ok {
		if processRuns(pid) {
			return false, nil
		}
	} else if time.Since(time.Unix(st.Mtim.Unix())) < legacyLeftoverAge {
		return false, nil
	}
	if err := deleteNamespace(name, ns); err != nil {
		return false, err
	}
	return true, nil
}

// processRuns reports whether a process with that pid exists.
func processRuns(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// benchNet is the only address range Attach configures: 198.18.0.0/15, set
// aside for benchmarking network devices (RFC 2544, RFC 6890).
var benchNet = netip.MustParsePrefix("198.18.0.0/15")

// docNet6 is the only IPv6 range Attach configures: 2001:db8::/32, the
// documentation prefix (RFC 3849).
var docNet6 = netip.MustParsePrefix("2001:db8::/32")

// NamespaceConfig describes the kernel side of a TUN device living in a
// private network namespace. See Attach.
type NamespaceConfig struct {
	// Namespace names the network namespace, as in `ip netns`: it is
	// bind-mounted at /run/netns/<Namespace>.
	Namespace string

	// Link names the TUN interface: 1 to 15 bytes, and no link of that
	// name may exist in the calling thread's namespace.
	Link string

	// PeerAddr is the kernel side's address with its prefix length, e.g.
	// 198.18.0.1/24. It must lie within 198.18.0.0/15 and the prefix
	// length must be 15 to 31, so that the prefix has room for the
	// userspace side's address (e.g. 198.18.0.2).
	PeerAddr netip.Prefix

	// PeerAddr6, if valid, is the kernel side's IPv6 address with its
	// prefix length (e.g. 2001:db8::1/64), within 2001:db8::/32, the prefix
	// length 32 to 127. IPv6 is then on for the link (for it alone), the
	// address is added without duplicate address detection (IFA_F_NODAD:
	// usable at once) and the kernel routes the prefix to the link. Without
	// it the namespace has no IPv6 at all.
	PeerAddr6 netip.Prefix

	// MTU is the link's MTU; 0 means tun.DefaultMTU.
	MTU int

	// TxQueueLen is the link's transmit queue length (txqueuelen): how many
	// packets the kernel holds for the userspace side before it drops. 0
	// means DefaultTxQueueLen; at most MaxTxQueueLen.
	TxQueueLen int

	// Offload opens the TUN with tun.OpenOffload (virtio-net headers, TSO
	// and checksum offload) instead of tun.Open; a kernel that refuses
	// gives the plain device (its Offloads say why).
	Offload bool

	// Queues, if more than 1, makes the TUN a multi-queue device
	// (tun.OpenQueues) with that many queues: Dev is the first,
	// Attachment.Queues all of them. At most tun.MaxQueues.
	Queues int
}

// DefaultTxQueueLen is a link's txqueuelen unless NamespaceConfig says
// otherwise: twenty times a TUN's default of 500, so that a burst of
// thousands of SYNs or ACKs waits in the kernel while the stack's loop is
// busy (it reads at most 64 packets per turn) instead of being dropped.
// The link is ours, in a namespace of ours: the host's links are untouched.
const DefaultTxQueueLen = 10000

// MaxTxQueueLen bounds NamespaceConfig.TxQueueLen.
const MaxTxQueueLen = 1 << 20

// normalize fills in defaults and checks c.
func (c *NamespaceConfig) normalize() error {
	if c.MTU == 0 {
		c.MTU = tun.DefaultMTU
	}
	if c.MTU < tun.MinMTU || c.MTU > tun.MaxMTU {
		return fmt.Errorf("MTU %d not in [%d, %d]: %w", c.MTU, tun.MinMTU, tun.MaxMTU, tun.ErrInvalidConfig)
	}
	if c.TxQueueLen == 0 {
		c.TxQueueLen = DefaultTxQueueLen
	}
	if c.Queues < 0 || c.Queues > tun.MaxQueues {
		return fmt.Errorf("%d queues not in [0, %d]: %w", c.Queues, tun.MaxQueues, tun.ErrInvalidConfig)
	}
	if c.TxQueueLen < 1 || c.TxQueueLen > MaxTxQueueLen {
		return fmt.Errorf("txqueuelen %d not in [1, %d]: %w", c.TxQueueLen, MaxTxQueueLen, tun.ErrInvalidConfig)
	}
	if c.Namespace == "" || c.Namespace == "." || c.Namespace == ".." ||
		len(c.Namespace) > 255 || strings.ContainsAny(c.Namespace, "/\x00") {
		return fmt.Errorf("namespace name %q: %w", c.Namespace, tun.ErrInvalidConfig)
	}
	if err := tun.CheckLinkName(c.Link); err != nil {
		return err
	}
	p := c.PeerAddr
	if !p.IsValid() || !p.Addr().Is4() || p.Bits() < benchNet.Bits() || p.Bits() > 31 || !benchNet.Contains(p.Addr()) {
		return fmt.Errorf("peer address %v: want an IPv4 prefix of length %d to 31 within %v: %w",
			p, benchNet.Bits(), benchNet, tun.ErrInvalidConfig)
	}
	if p6 := c.PeerAddr6; p6.IsValid() {
		if !p6.Addr().Is6() || p6.Addr().Is4In6() || p6.Bits() < docNet6.Bits() || p6.Bits() > 127 || !docNet6.Contains(p6.Addr()) {
			return fmt.Errorf("peer address %v: want an IPv6 prefix of length %d to 127 within %v: %w",
				p6, docNet6.Bits(), docNet6, tun.ErrInvalidConfig)
		}
		if c.MTU < 1280 {
			return fmt.Errorf("MTU %d is below IPv6's 1280: %w", c.MTU, tun.ErrInvalidConfig)
		}
	}
	return nil
}

// Attachment is a TUN device whose kernel side lives in a private network
// namespace. Create it with Attach; release it with Close.
type Attachment struct {
	// Dev is the userspace side: what it reads, the kernel in the
	// namespace sent towards PeerAddr's prefix; what it writes, the kernel
	// receives on the link.
	Dev *tun.TUN
	// Queues are the device's queues with NamespaceConfig.Queues, Dev
	// first; else just Dev. Close closes them all.
	Queues []*tun.TUN

	cfg   NamespaceConfig // as given to Attach, with defaults filled in
	token string          // the loopback alias marking the namespace as ours

	mu sync.RWMutex    // guards ns: Do reads it, Close closes it
	ns vnetns.NsHandle // an open handle on the namespace, or vnetns.None()

	closeOnce sync.Once
	closeErr  error
}

// Attach sets up a TUN device whose kernel side lives in the network
// namespace cfg.Namespace, in this order:
//
//  1. Creates the namespace, brings its loopback up and disables IPv6 in
//     it (net.ipv6.conf.{all,default}.disable_ipv6=1) so that the link
//     carries no IPv6 chatter.
//  2. Creates the TUN device cfg.Link in the calling thread's (the host's)
//     namespace, without configuring it there.
//  3. Moves the link into the namespace. (Moving flushes addresses and
//     takes the link down, which is why configuration comes last.)
//  4. Inside the namespace: sets the MTU and the txqueuelen, adds
//     cfg.PeerAddr (and cfg.PeerAddr6, turning IPv6 on for the link
//     alone), brings the link up.
//
// The host's interfaces, addresses, routes and sysctls are never modified.
//
// Reuse rule: if cfg.Namespace already exists, Attach reuses it only if it
// was created by Attach (its loopback carries Attach's marker) and it holds
// no link besides the loopback, i.e. it is the leftover of a process that
// died before calling Close. Any other existing namespace, including one
// that is in use by a live Attachment, makes Attach fail with an error
// wrapping ErrNamespaceExists, and is left untouched. Two processes must
// not Attach with the same namespace name at the same time; tun.UniqueName
// avoids that.
//
// If any step fails, everything done so far is undone: no link and no
// namespace is left behind (a reused leftover is deleted as well), and a
// namespace that Attach refused to reuse is left exactly as it was.
//
// Attach removes no leftovers under other names: that is RemoveLeftovers,
// called explicitly.
func Attach(cfg NamespaceConfig) (*Attachment, error) {
	return attach(cfg, nil)
}

// attach is Attach with a hook for tests: fail, if not nil, is called after
// each step with the step's name, and an error it returns aborts Attach as
// if the step had failed.
func attach(cfg NamespaceConfig, fail func(step string) error) (_ *Attachment, err error) {
	if err := cfg.normalize(); err != nil {
		return nil, fmt.Errorf("netns: attach: %w", err)
	}
	a := &Attachment{cfg: cfg, token: ownerToken(os.Getpid()), ns: vnetns.None()}
	defer func() {
		if err != nil {
			if cerr := a.Close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("netns: undoing attach: %w", cerr))
			}
			err = fmt.Errorf("netns: attach %s/%s: %w", cfg.Namespace, cfg.Link, err)
		}
	}()
	step := func(name string) error {
		if fail == nil {
			return nil
		}
		return fail(name)
	}

	// The host-side steps must all see the same namespace: the one this
	// thread is in.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	host, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	defer host.Close()
	// Checked before the namespace is made, to spare the work; tun.Open
	// checks again.
	if exists, err := tun.LinkExists(cfg.Link); err != nil {
		return nil, err
	} else if exists {
		return nil, fmt.Errorf("link %q: %w", cfg.Link, tun.ErrLinkExists)
	}

	ns, err := openNamespace(cfg.Namespace, a.token)
	if err != nil {
		return nil, err
	}
	a.ns = ns
	if err := step("namespace"); err != nil {
		return nil, err
	}

	if a.Queues, err = tun.OpenQueues(cfg.Link, cfg.MTU, max(cfg.Queues, 1), cfg.Offload); err != nil {
		return nil, err
	}
	a.Dev = a.Queues[0]
	if err := step("open"); err != nil {
		return nil, err
	}

	link, err := host.LinkByName(a.Dev.Name())
	if err != nil {
		return nil, fmt.Errorf("netlink: find link %q: %w", a.Dev.Name(), err)
	}
	if link.Type() != "tuntap" {
		return nil, fmt.Errorf("link %q is a %q device, not the TUN just created: %w", a.Dev.Name(), link.Type(), tun.ErrLinkExists)
	}
	if err := host.LinkSetNsFd(link, int(a.ns)); err != nil {
		return nil, fmt.Errorf("netlink: move link %q into namespace %q: %w", a.Dev.Name(), cfg.Namespace, err)
	}
	if err := step("move"); err != nil {
		return nil, err
	}

	if err := onThreadIn(a.ns, a.configureLink); err != nil {
		return nil, err
	}
	if err := step("configure"); err != nil {
		return nil, err
	}
	return a, nil
}

// configureLink runs inside the namespace: MTU, txqueuelen, address, up.
func (a *Attachment) configureLink() error {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	name := a.cfg.Link
	link, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("netlink: find link %q in namespace: %w", name, err)
	}
	// Already 1 through conf/default, which the link inherited when it
	// arrived; written again so that it holds whatever the defaults were,
	// or 0 for a link with an IPv6 address.
	disable := "1"
	if a.cfg.PeerAddr6.IsValid() {
		disable = "0"
	}
	if err := writeSysctl("net/ipv6/conf/"+name+"/disable_ipv6", disable); err != nil {
		return err
	}
	if err := h.LinkSetMTU(link, a.cfg.MTU); err != nil {
		return fmt.Errorf("netlink: set MTU %d on %q: %w", a.cfg.MTU, name, err)
	}
	if err := h.LinkSetTxQLen(link, a.cfg.TxQueueLen); err != nil {
		return fmt.Errorf("netlink: set txqueuelen %d on %q: %w", a.cfg.TxQueueLen, name, err)
	}
	p := a.cfg.PeerAddr
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)}}
	if err := h.AddrAdd(link, addr); err != nil {
		return fmt.Errorf("netlink: add address %v to %q: %w", p, name, err)
	}
	if p6 := a.cfg.PeerAddr6; p6.IsValid() {
		// The prefix's route comes with the address (the kernel adds it on
		// the link once it is up).
		addr6 := &netlink.Addr{IPNet: &net.IPNet{IP: p6.Addr().AsSlice(), Mask: net.CIDRMask(p6.Bits(), 128)}, Flags: unix.IFA_F_NODAD}
		if err := h.AddrAdd(link, addr6); err != nil {
			return fmt.Errorf("netlink: add address %v to %q: %w", p6, name, err)
		}
	}
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("netlink: set %q up: %w", name, err)
	}
	if p6 := a.cfg.PeerAddr6; p6.IsValid() {
		return waitLocalRoute(h, p6.Addr())
	}
	return nil
}

// localRouteWait bounds waitLocalRoute.
const localRouteWait = 5 * time.Second

// waitLocalRoute waits until the kernel routes a packet to a (an address of
// ours) as local. Even without DAD, the kernel adds an IPv6 address's local
// route when the link comes up, from its addrconf work queue: until then it
// sends from the address (the kernel's SYN goes out) but drops what comes
// back to it (the SYN-ACK), and the connection waits a second for the
// SYN-ACK's retransmission.
func waitLocalRoute(h *netlink.Handle, a netip.Addr) error {
	deadline := time.Now().Add(localRouteWait)
	for {
		routes, err := h.RouteGet(a.AsSlice())
		if err == nil && len(routes) > 0 && routes[0].Type == unix.RTN_LOCAL {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("netlink: no local route to %v after %v (last: %v, %v)", a, localRouteWait, routes, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// Config returns the configuration given to Attach, with defaults filled
// in.
func (a *Attachment) Config() NamespaceConfig { return a.cfg }

// Close closes the TUN device (which deletes the link), deletes the link
// by name if it survived, and deletes the namespace. It is idempotent:
// later calls return the first call's result.
//
// Close deletes only what this Attachment still owns: if the namespace has
// meanwhile been reused by another Attachment (see Attach) or replaced by
// another namespace of the same name, Close leaves it alone.
func (a *Attachment) Close() error {
	a.closeOnce.Do(func() { a.closeErr = a.close() })
	return a.closeErr
}

func (a *Attachment) close() error {
	var errs []error
	qs := a.Queues
	if len(qs) == 0 && a.Dev != nil {
		qs = []*tun.TUN{a.Dev}
	}
	for _, q := range qs {
		errs = append(errs, q.Close())
	}
	a.mu.Lock()
	ns := a.ns
	a.ns = vnetns.None()
	a.mu.Unlock()
	if !ns.IsOpen() {
		return errors.Join(errs...)
	}
	defer ns.Close()

	ours := false
	err := onThreadIn(ns, func() error {
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return fmt.Errorf("netlink: %w", err)
		}
		defer h.Close()
		lo, err := h.LinkByName("lo")
		if err != nil {
			return fmt.Errorf("netlink: find loopback: %w", err)
		}
		if ours = lo.Attrs().Alias == a.token; !ours {
			return nil
		}
		// Normally gone with the descriptor.
		link, err := h.LinkByName(a.cfg.Link)
		var notFound netlink.LinkNotFoundError
		switch {
		case errors.As(err, &notFound):
			return nil
		case err != nil:
			return fmt.Errorf("netlink: find link %q: %w", a.cfg.Link, err)
		}
		if err := h.LinkDel(link); err != nil {
			return fmt.Errorf("netlink: delete link %q: %w", a.cfg.Link, err)
		}
		return nil
	})
	errs = append(errs, err)
	if ours {
		errs = append(errs, deleteNamespace(a.cfg.Namespace, ns))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("netns: close %s/%s: %w", a.cfg.Namespace, a.cfg.Link, err)
	}
	return nil
}

// Do runs fn on the calling goroutine, locked to its OS thread and switched
// into the namespace, then switches the thread back and unlocks it. Use it
// to dial or listen from the kernel side: sockets created by fn stay in the
// namespace after Do returns. Goroutines started by fn do not run in the
// namespace.
//
// Do returns fn's error, or an error wrapping net.ErrClosed after Close. If
// the thread cannot be switched back (which should never happen), Do
// leaves it locked, so that no other goroutine is ever scheduled on it and
// it is discarded when the calling goroutine exits, and reports the error.
func (a *Attachment) Do(fn func() error) (err error) {
	runtime.LockOSThread()
	unlock := true
	defer func() {
		if unlock {
			runtime.UnlockOSThread()
		}
	}()
	orig, err := vnetns.Get()
	if err != nil {
		return fmt.Errorf("netns: do: current namespace: %w", err)
	}
	defer orig.Close()

	a.mu.RLock()
	if !a.ns.IsOpen() {
		a.mu.RUnlock()
		return fmt.Errorf("netns: do in %s: %w", a.cfg.Namespace, net.ErrClosed)
	}
	err = vnetns.Set(a.ns)
	a.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("netns: do: enter namespace %s: %w", a.cfg.Namespace, err)
	}
	defer func() {
		if rerr := vnetns.Set(orig); rerr != nil {
			unlock = false
			err = errors.Join(err, fmt.Errorf("netns: do: restore namespace: %w", rerr))
		}
	}()
	return fn()
}

// openNamespace creates the named namespace, or reuses it under the rule
// documented on Attach, marks it with token and prepares it. It returns an
// open handle on it. On failure it leaves everything as it found it.
func openNamespace(name, token string) (vnetns.NsHandle, error) {
	if err := os.MkdirAll(netnsDir, 0o755); err != nil {
		return vnetns.None(), err
	}
	path := filepath.Join(netnsDir, name)
	// The mount point, created exclusively: whoever creates it owns the name.
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if errors.Is(err, fs.ErrExist) {
		return reuseNamespace(name, path, token)
	}
	if err != nil {
		return vnetns.None(), fmt.Errorf("namespace %q: %w", name, err)
	}
	f.Close()

	ns := vnetns.None()
	mounted := false
	err = onThreadInNew(func() error {
		if err := unix.Mount("/proc/thread-self/ns/net", path, "none", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mount namespace at %s: %w", path, err)
		}
		mounted = true
		var err error
		if ns, err = vnetns.GetFromPath("/proc/thread-self/ns/net"); err != nil {
			return fmt.Errorf("namespace handle: %w", err)
		}
		return prepareNamespace(token)
	})
	if err != nil {
		if ns.IsOpen() {
			ns.Close()
		}
		if mounted {
			err = errors.Join(err, unix.Unmount(path, unix.MNT_DETACH))
		}
		err = errors.Join(err, os.Remove(path))
		return vnetns.None(), fmt.Errorf("create namespace %q: %w", name, err)
	}
	return ns, nil
}

// reuseNamespace opens the existing namespace at path and takes it over if
// Attach's reuse rule allows.
func reuseNamespace(name, path, token string) (vnetns.NsHandle, error) {
	ns, err := vnetns.GetFromPath(path)
	if err != nil {
		return vnetns.None(), fmt.Errorf("namespace %q: %w (and cannot be opened: %w)", name, ErrNamespaceExists, err)
	}
	alias, others, err := inspectNamespace(ns)
	switch {
	case err != nil:
	case !strings.HasPrefix(alias, ownerPrefix):
		err = fmt.Errorf("%w and was not created by netns.Attach", ErrNamespaceExists)
	case len(others) > 0:
		err = fmt.Errorf("%w and is in use (links %s)", ErrNamespaceExists, strings.Join(others, ", "))
	default:
		err = onThreadIn(ns, func() error { return prepareNamespace(token) })
	}
	if err != nil {
		ns.Close()
		return vnetns.None(), fmt.Errorf("namespace %q: %w", name, err)
	}
	return ns, nil
}

// inspectNamespace returns the alias of ns's loopback (Attach's marker, if
// Attach made it) and the names of its other links.
func inspectNamespace(ns vnetns.NsHandle) (alias string, others []string, err error) {
	err = onThreadIn(ns, func() error {
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return fmt.Errorf("netlink: %w", err)
		}
		defer h.Close()
		lo, err := h.LinkByName("lo")
		if err != nil {
			return fmt.Errorf("netlink: find loopback: %w", err)
		}
		alias = lo.Attrs().Alias
		links, err := listLinks(h)
		if err != nil {
			return err
		}
		for _, l := range links {
			if l.Attrs().Name != "lo" {
				others = append(others, l.Attrs().Name)
			}
		}
		return nil
	})
	return alias, others, err
}

// listLinks dumps the links, retrying a dump that a concurrent change
// interrupted.
func listLinks(h *netlink.Handle) ([]netlink.Link, error) {
	for range 3 {
		links, err := h.LinkList()
		if errors.Is(err, netlink.ErrDumpInterrupted) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("netlink: list links: %w", err)
		}
		return links, nil
	}
	return nil, fmt.Errorf("netlink: list links: %w", netlink.ErrDumpInterrupted)
}

// prepareNamespace runs inside the namespace: it marks the namespace as
// ours (the loopback's alias), brings the loopback up and disables IPv6.
func prepareNamespace(token string) error {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("netlink: find loopback: %w", err)
	}
	if err := h.LinkSetAlias(lo, token); err != nil {
		return fmt.Errorf("netlink: mark loopback: %w", err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("netlink: set loopback up: %w", err)
	}
	// "all" also switches off every existing link; "default" covers links
	// that arrive later, such as the TUN link.
	for _, key := range []string{"net/ipv6/conf/all/disable_ipv6", "net/ipv6/conf/default/disable_ipv6"} {
		if err := writeSysctl(key, "1"); err != nil {
			return err
		}
	}
	return nil
}

// writeSysctl writes value to /proc/sys/<key>. Network sysctls belong to
// the namespace of the writing thread. A missing IPv6 key means a kernel
// without IPv6, which needs nothing disabled.
func writeSysctl(key, value string) error {
	err := os.WriteFile("/proc/sys/"+key, []byte(value+"\n"), 0)
	if err != nil && !(errors.Is(err, fs.ErrNotExist) && strings.HasPrefix(key, "net/ipv6/")) {
		return fmt.Errorf("sysctl %s=%s: %w", strings.ReplaceAll(key, "/", "."), value, err)
	}
	return nil
}

// deleteNamespace removes the bind mount that names ns, if the name still
// refers to ns. The namespace itself goes away with its last reference.
func deleteNamespace(name string, ns vnetns.NsHandle) error {
	path := filepath.Join(netnsDir, name)
	var mine, there unix.Stat_t
	if err := unix.Fstat(int(ns), &mine); err != nil {
		return fmt.Errorf("delete namespace %q: %w", name, err)
	}
	if err := unix.Stat(path, &there); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("delete namespace %q: %w", name, err)
	}
	if mine.Dev != there.Dev || mine.Ino != there.Ino {
		return nil // replaced by someone else's namespace
	}
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("delete namespace %q: unmount: %w", name, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete namespace %q: %w", name, err)
	}
	return nil
}

// onThreadIn runs fn on a goroutine of its own, locked to its OS thread and
// switched into ns, and waits for it. See onThread.
func onThreadIn(ns vnetns.NsHandle, fn func() error) error {
	return onThread(func() error { return vnetns.Set(ns) }, fn)
}

// onThreadInNew is onThreadIn with a brand-new network namespace.
func onThreadInNew(fn func() error) error {
	return onThread(func() error { return unix.Unshare(unix.CLONE_NEWNET) }, fn)
}

// onThread runs fn on a fresh goroutine locked to its OS thread after enter
// has switched the thread's network namespace, then switches the thread
// back. If switching back fails the goroutine exits still locked, so the
// runtime discards the thread: no goroutine ever runs in a namespace by
// accident.
func onThread(enter, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("current namespace: %w", err)
			return
		}
		defer orig.Close()
		if err = enter(); err != nil {
			err = fmt.Errorf("enter namespace: %w", err)
		} else {
			err = fn()
		}
		if rerr := vnetns.Set(orig); rerr != nil {
			errc <- errors.Join(err, fmt.Errorf("restore namespace: %w", rerr))
			return // still locked: the thread dies with the goroutine
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// randomToken returns 16 random hex digits.
func randomToken() string {
	var b [8]byte
	rand.Read(b[:])
	return fmt.Sprintf("%x", b)
}
