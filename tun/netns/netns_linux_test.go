//go:build linux

package netns

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/tcpwheel/tcpwheel/tun"
)

var (
	kernelAddr = netip.MustParseAddr("198.18.0.1") // the namespace's side
	userAddr   = netip.MustParseAddr("198.18.0.2") // the TUN reader's side
	peerPrefix = netip.PrefixFrom(kernelAddr, 24)
)

// requireRoot skips the test when it cannot create namespaces and TUN
// devices, except under CI=true, where that is a failure.
func requireRoot(t *testing.T) {
	t.Helper()
	var reason string
	if os.Geteuid() != 0 {
		reason = "needs root"
	} else if _, err := os.Stat("/dev/net/tun"); err != nil {
		reason = fmt.Sprintf("needs /dev/net/tun: %v", err)
	}
	if reason == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: not skipping)", reason)
	}
	t.Skip(reason)
}

// testConfig returns a configuration with fresh names and registers a last
// resort cleanup, run after every other, that removes the namespace should
// the code under test have left it.
func testConfig(t *testing.T) NamespaceConfig {
	t.Helper()
	cfg := NamespaceConfig{
		Namespace: tun.UniqueName("twt"),
		Link:      tun.UniqueName("twt"),
		PeerAddr:  peerPrefix,
		MTU:       1400,
	}
	t.Cleanup(func() { forceDeleteNamespace(t, cfg.Namespace) })
	return cfg
}

func forceDeleteNamespace(t *testing.T, name string) {
	path := filepath.Join(netnsDir, name)
	if _, err := os.Stat(path); err != nil {
		return
	}
	t.Errorf("namespace %s left behind; removing it", name)
	unix.Unmount(path, unix.MNT_DETACH)
	os.Remove(path)
}

// mustAttach attaches and registers Close as a cleanup.
func mustAttach(t *testing.T, cfg NamespaceConfig) *Attachment {
	t.Helper()
	a, err := Attach(cfg)
	if err != nil {
		t.Fatalf("Attach(%+v): %v", cfg, err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return a
}

// checkGone checks that neither the namespace nor the link exists.
func checkGone(t *testing.T, cfg NamespaceConfig) {
	t.Helper()
	if ns, err := vnetns.GetFromName(cfg.Namespace); err == nil {
		ns.Close()
		t.Errorf("namespace %s still exists", cfg.Namespace)
	}
	if _, err := os.Stat(filepath.Join(netnsDir, cfg.Namespace)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat %s/%s = %v, want not exist", netnsDir, cfg.Namespace, err)
	}
	checkNoHostLink(t, cfg.Link)
}

func checkNoHostLink(t *testing.T, name string) {
	t.Helper()
	runtime.LockOSThread() // the test's namespace, not a Do's
	defer runtime.UnlockOSThread()
	if exists, err := tun.LinkExists(name); err != nil || exists {
		t.Errorf("link %s in the host namespace: exists=%v, err=%v; want absent", name, exists, err)
	}
}

func checkNamespaceExists(t *testing.T, name string) {
	t.Helper()
	ns, err := vnetns.GetFromName(name)
	if err != nil {
		t.Fatalf("namespace %s: %v", name, err)
	}
	ns.Close()
}

// TestAttach runs on a plain TUN and on one with offloads, whose
// descriptor is off Go's network poller (its reads wait in poll(2), which
// the deadline and Close must still end).
func TestAttach(t *testing.T) {
	requireRoot(t)
	for _, offload := range []bool{false, true} {
		t.Run(fmt.Sprintf("offload=%v", offload), func(t *testing.T) { testAttach(t, offload) })
	}
}

func testAttach(t *testing.T, offload bool) {
	hostIPv6 := readSysctl(t, "net/ipv6/conf/all/disable_ipv6")
	cfg := testConfig(t)
	cfg.Offload = offload
	a := mustAttach(t, cfg)

	checkNamespaceExists(t, cfg.Namespace)
	checkNoHostLink(t, cfg.Link) // it was moved, never configured here
	if a.Dev.Name() != cfg.Link || a.Dev.MTU() != cfg.MTU {
		t.Errorf("Dev name, MTU = %s, %d; want %s, %d", a.Dev.Name(), a.Dev.MTU(), cfg.Link, cfg.MTU)
	}

	t.Run("ping", func(t *testing.T) {
		ping(t, a.Dev, 7, []byte("tcpwheel ping"))
	})

	t.Run("namespace", func(t *testing.T) {
		err := a.Do(func() error {
			ifi, err := net.InterfaceByName(cfg.Link)
			if err != nil {
				return err
			}
			if ifi.MTU != cfg.MTU || ifi.Flags&net.FlagUp == 0 {
				t.Errorf("link %s: MTU %d, flags %v; want MTU %d, up", cfg.Link, ifi.MTU, ifi.Flags, cfg.MTU)
			}
			link, err := netlink.LinkByName(cfg.Link)
			if err != nil {
				return err
			}
			if got := link.Attrs().TxQLen; got != DefaultTxQueueLen {
				t.Errorf("link %s: txqueuelen %d, want %d", cfg.Link, got, DefaultTxQueueLen)
			}
			addrs, err := ifi.Addrs()
			if err != nil {
				return err
			}
			if len(addrs) != 1 || addrs[0].String() != cfg.PeerAddr.String() {
				t.Errorf("link %s addresses = %v, want [%v]", cfg.Link, addrs, cfg.PeerAddr)
			}
			lo, err := net.InterfaceByName("lo")
			if err != nil {
				return err
			}
			if lo.Flags&net.FlagUp == 0 {
				t.Errorf("lo is down")
			}
			for _, key := range []string{"all", "default", cfg.Link} {
				if got := readSysctl(t, "net/ipv6/conf/"+key+"/disable_ipv6"); got != "1" {
					t.Errorf("in the namespace, net.ipv6.conf.%s.disable_ipv6 = %q, want 1", key, got)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := readSysctl(t, "net/ipv6/conf/all/disable_ipv6"); got != hostIPv6 {
			t.Errorf("host net.ipv6.conf.all.disable_ipv6 = %q, was %q", got, hostIPv6)
		}
		if _, err := net.InterfaceByName(cfg.Link); err == nil {
			t.Errorf("after Do, link %s is visible: the thread was not switched back", cfg.Link)
		}
	})

	t.Run("kernel sends", func(t *testing.T) {
		// A socket made in Do stays in the namespace.
		var c net.Conn
		err := a.Do(func() (err error) {
			c, err = net.Dial("udp4", netip.AddrPortFrom(userAddr, 9).String())
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		readUntil(t, a.Dev, func(p []byte) bool {
			return len(p) >= 28 && p[9] == unix.IPPROTO_UDP && netip.AddrFrom4([4]byte(p[12:16])) == kernelAddr &&
				binary.BigEndian.Uint16(p[22:24]) == 9 && string(p[28:]) == "hello"
		})
	})

	t.Run("short buffer", func(t *testing.T) {
		payload := bytes.Repeat([]byte{0xab}, 200)
		if err := a.Dev.WritePacket(echoRequest(8, payload)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 40)
		deadline := time.Now().Add(2 * time.Second)
		a.Dev.SetReadDeadline(deadline)
		defer a.Dev.SetReadDeadline(time.Time{})
		for range 100 {
			n, err := a.Dev.ReadPacket(buf)
			if err == nil { // something small; not ours
				continue
			}
			if !errors.Is(err, io.ErrShortBuffer) {
				t.Fatalf("ReadPacket(40-byte buffer) = %d, %v; want io.ErrShortBuffer", n, err)
			}
			if n != len(buf) {
				t.Errorf("ReadPacket(40-byte buffer) = %d, want 40", n)
			}
			if buf[20] == 0 && binary.BigEndian.Uint16(buf[26:28]) == 8 { // our echo reply, truncated
				return
			}
		}
		t.Fatal("no truncated echo reply")
	})

	t.Run("write limits", func(t *testing.T) {
		for _, size := range []int{0, cfg.MTU + 1} {
			if err := a.Dev.WritePacket(make([]byte, size)); !errors.Is(err, tun.ErrPacketSize) {
				t.Errorf("WritePacket(%d bytes) = %v, want tun.ErrPacketSize", size, err)
			}
		}
		if n, err := a.Dev.ReadPacket(nil); n != 0 || !errors.Is(err, io.ErrShortBuffer) {
			t.Errorf("ReadPacket(nil) = %d, %v; want 0, io.ErrShortBuffer", n, err)
		}
	})

	t.Run("deadline set while a read waits", func(t *testing.T) {
		defer a.Dev.SetReadDeadline(time.Time{})
		pendingReadEnds(t, a.Dev, "SetReadDeadline(now)", func() { a.Dev.SetReadDeadline(time.Now()) }, os.ErrDeadlineExceeded)
	})

	t.Run("read deadline", func(t *testing.T) {
		a.Dev.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		defer a.Dev.SetReadDeadline(time.Time{})
		for { // drain whatever is queued, then time out
			if _, err := a.Dev.ReadPacket(make([]byte, 2000)); err != nil {
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Errorf("ReadPacket past the deadline = %v, want os.ErrDeadlineExceeded", err)
				}
				break
			}
		}
	})

	// Close unblocks a pending read and removes everything.
	pendingReadEnds(t, a.Dev, "Close", func() {
		if err := a.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}, net.ErrClosed)
	checkGone(t, cfg)
	if err := a.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	if err := a.Dev.WritePacket(echoRequest(9, nil)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("WritePacket after Close = %v, want net.ErrClosed", err)
	}
	if err := a.Do(func() error { return nil }); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Do after Close = %v, want net.ErrClosed", err)
	}
}

// pendingReadEnds starts a ReadPacket that takes what is queued and then
// waits, calls end, and checks that the waiting read fails with want.
func pendingReadEnds(t *testing.T, dev *tun.TUN, what string, end func(), want error) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		for {
			if _, err := dev.ReadPacket(make([]byte, 2000)); err != nil {
				done <- err
				return
			}
		}
	}()
	time.Sleep(20 * time.Millisecond) // let it block; the test holds without it
	end()
	select {
	case err := <-done:
		if !errors.Is(err, want) {
			t.Errorf("pending ReadPacket after %s = %v, want %v", what, err, want)
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("ReadPacket still blocked 2s after %s", what)
	}
}

// TestAttachIPv6: with PeerAddr6 the link (alone) has IPv6, the address is
// usable at once (not tentative: no DAD), the prefix is routed to the link,
// and the kernel's datagram to another address of the prefix comes out of
// the TUN as an IPv6 packet.
func TestAttachIPv6(t *testing.T) {
	requireRoot(t)
	cfg := testConfig(t)
	cfg.PeerAddr6 = netip.MustParsePrefix("2001:db8:5::1/64")
	a := mustAttach(t, cfg)
	var c net.Conn
	err := a.Do(func() (err error) {
		link, err := netlink.LinkByName(cfg.Link)
		if err != nil {
			return err
		}
		addrs, err := netlink.AddrList(link, netlink.FAMILY_V6)
		if err != nil {
			return err
		}
		found := false
		for _, ad := range addrs {
			if ad.IPNet.String() == cfg.PeerAddr6.String() {
				found = true
				if ad.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) != 0 || ad.Flags&unix.IFA_F_NODAD == 0 {
					t.Errorf("address %v: flags %#x, want NODAD and not tentative", ad.IPNet, ad.Flags)
				}
			}
		}
		if !found {
			t.Errorf("link %s IPv6 addresses = %v, want %v among them", cfg.Link, addrs, cfg.PeerAddr6)
		}
		// Already routed as local: a reply to the kernel's first packet
		// from the address is not dropped (waitLocalRoute).
		if local, err := netlink.RouteGet(cfg.PeerAddr6.Addr().AsSlice()); err != nil || len(local) == 0 || local[0].Type != unix.RTN_LOCAL {
			t.Errorf("route to our own %v: %v, %v; want a local one", cfg.PeerAddr6.Addr(), local, err)
		}
		routes, err := netlink.RouteGet(net.ParseIP("2001:db8:5::2"))
		if err != nil || len(routes) == 0 || routes[0].LinkIndex != link.Attrs().Index {
			t.Errorf("route to 2001:db8:5::2: %v, %v; want via %s", routes, err, cfg.Link)
		}
		for _, key := range []string{"all", "default"} {
			if got := readSysctl(t, "net/ipv6/conf/"+key+"/disable_ipv6"); got != "1" {
				t.Errorf("net.ipv6.conf.%s.disable_ipv6 = %q, want 1", key, got)
			}
		}
		c, err = net.Dial("udp6", "[2001:db8:5::2]:9")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hello6")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, a.Dev, func(p []byte) bool {
		return len(p) >= 48 && p[0]>>4 == 6 && p[6] == unix.IPPROTO_UDP &&
			netip.AddrFrom16([16]byte(p[8:24])) == cfg.PeerAddr6.Addr() &&
			binary.BigEndian.Uint16(p[42:44]) == 9 && string(p[48:]) == "hello6"
	})
}

func TestAttachInvalidConfig(t *testing.T) {
	requireRoot(t)
	for _, tc := range []struct {
		name   string
		modify func(*NamespaceConfig)
	}{
		{"zero prefix", func(c *NamespaceConfig) { c.PeerAddr = netip.Prefix{} }},
		{"outside 198.18/15", func(c *NamespaceConfig) { c.PeerAddr = netip.MustParsePrefix("10.0.0.1/24") }},
		{"too wide", func(c *NamespaceConfig) { c.PeerAddr = netip.MustParsePrefix("198.18.0.1/14") }},
		{"/32", func(c *NamespaceConfig) { c.PeerAddr = netip.MustParsePrefix("198.18.0.1/32") }},
		{"IPv6", func(c *NamespaceConfig) { c.PeerAddr = netip.MustParsePrefix("2001:db8::1/64") }},
		{"IPv4-mapped", func(c *NamespaceConfig) { c.PeerAddr = netip.MustParsePrefix("::ffff:198.18.0.1/120") }},
		{"MTU", func(c *NamespaceConfig) { c.MTU = 67 }},
		{"IPv6 outside 2001:db8::/32", func(c *NamespaceConfig) { c.PeerAddr6 = netip.MustParsePrefix("2001:db9::1/64") }},
		{"IPv6 /128", func(c *NamespaceConfig) { c.PeerAddr6 = netip.MustParsePrefix("2001:db8::1/128") }},
		{"IPv6 as IPv4", func(c *NamespaceConfig) { c.PeerAddr6 = netip.MustParsePrefix("198.18.0.1/24") }},
		{"IPv6 below its MTU", func(c *NamespaceConfig) { c.PeerAddr6, c.MTU = netip.MustParsePrefix("2001:db8::1/64"), 1279 }},
		{"negative txqueuelen", func(c *NamespaceConfig) { c.TxQueueLen = -1 }},
		{"huge txqueuelen", func(c *NamespaceConfig) { c.TxQueueLen = MaxTxQueueLen + 1 }},
		{"long link name", func(c *NamespaceConfig) { c.Link = "sixteen-bytes-xx" }},
		{"link name with slash", func(c *NamespaceConfig) { c.Link = "a/b" }},
		{"no namespace", func(c *NamespaceConfig) { c.Namespace = "" }},
		{"namespace path", func(c *NamespaceConfig) { c.Namespace = "../etc" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			bad := cfg
			tc.modify(&bad)
			a, err := Attach(bad)
			if !errors.Is(err, tun.ErrInvalidConfig) {
				if a != nil {
					a.Close()
				}
				t.Fatalf("Attach(%+v) = %v, want tun.ErrInvalidConfig", bad, err)
			}
			checkGone(t, cfg)
		})
	}
}

func TestAttachForeignNamespace(t *testing.T) {
	requireRoot(t)
	cfg := testConfig(t)
	// Made the way `ip netns add` makes one: no marker.
	err := onThread(func() error { return nil }, func() error {
		ns, err := vnetns.NewNamed(cfg.Namespace)
		if err == nil {
			ns.Close()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vnetns.DeleteNamed(cfg.Namespace) })

	a, err := Attach(cfg)
	if !errors.Is(err, ErrNamespaceExists) {
		if a != nil {
			a.Close()
		}
		t.Fatalf("Attach into a foreign namespace = %v, want ErrNamespaceExists", err)
	}
	t.Log(err)
	checkNamespaceExists(t, cfg.Namespace) // not ours to delete
	checkNoHostLink(t, cfg.Link)
	ns, _ := vnetns.GetFromName(cfg.Namespace)
	defer ns.Close()
	onThreadIn(ns, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			t.Error(err)
		} else if lo.Attrs().Alias != "" || lo.Attrs().Flags&net.FlagUp != 0 {
			t.Errorf("foreign namespace modified: lo alias %q, flags %v", lo.Attrs().Alias, lo.Attrs().Flags)
		}
		return nil
	})
}

func TestAttachInUse(t *testing.T) {
	requireRoot(t)
	cfg := testConfig(t)
	a := mustAttach(t, cfg)
	second := cfg
	second.Link = tun.UniqueName("twt")
	b, err := Attach(second)
	if !errors.Is(err, ErrNamespaceExists) {
		if b != nil {
			b.Close()
		}
		t.Fatalf("Attach into a namespace in use = %v, want ErrNamespaceExists", err)
	}
	t.Log(err)
	checkNoHostLink(t, second.Link)
	ping(t, a.Dev, 1, nil) // the first is unharmed
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	checkGone(t, cfg)
}

func TestAttachReusesLeftover(t *testing.T) {
	requireRoot(t)
	cfg := testConfig(t)
	dead := mustAttach(t, cfg)
	// A process that dies closes its descriptor, which deletes the link,
	// and leaves the namespace.
	dead.Dev.Close()

	second := cfg
	second.Link = tun.UniqueName("twt")
	a := mustAttach(t, second)
	ping(t, a.Dev, 2, nil)

	// The first Attachment no longer owns the namespace: its Close must
	// leave it to the second.
	if err := dead.Close(); err != nil {
		t.Fatal(err)
	}
	checkNamespaceExists(t, cfg.Namespace)
	ping(t, a.Dev, 3, nil)

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	checkGone(t, second)
}

func TestAttachUndo(t *testing.T) {
	requireRoot(t)
	injected := errors.New("injected failure")
	for _, step := range []string{"namespace", "open", "move", "configure"} {
		t.Run(step, func(t *testing.T) {
			cfg := testConfig(t)
			a, err := attach(cfg, func(s string) error {
				if s == step {
					return injected
				}
				return nil
			})
			if !errors.Is(err, injected) {
				if a != nil {
					a.Close()
				}
				t.Fatalf("attach failing after %s = %v, want the injected error", step, err)
			}
			checkGone(t, cfg)
		})
	}
}

func TestAttachLinkExists(t *testing.T) {
	requireRoot(t)
	cfg := testConfig(t)
	// A TUN of our own, unconfigured, as Attach itself makes.
	other, err := tun.Open(cfg.Link, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	if _, err := tun.Open(cfg.Link, 0); !errors.Is(err, tun.ErrLinkExists) {
		t.Errorf("Open of an existing name = %v, want tun.ErrLinkExists", err)
	}
	a, err := Attach(cfg)
	if !errors.Is(err, tun.ErrLinkExists) {
		if a != nil {
			a.Close()
		}
		t.Fatalf("Attach with an existing link name = %v, want tun.ErrLinkExists", err)
	}
	if _, err := os.Stat(filepath.Join(netnsDir, cfg.Namespace)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("namespace left behind: %v", err)
	}
	other.Close()
	checkGone(t, cfg)
}

// ping sends an ICMP echo request from userAddr to kernelAddr through dev
// and waits for the kernel's reply.
func ping(t *testing.T, dev *tun.TUN, seq uint16, data []byte) {
	t.Helper()
	if err := dev.WritePacket(echoRequest(seq, data)); err != nil {
		t.Fatalf("WritePacket(echo request): %v", err)
	}
	p := readUntil(t, dev, func(p []byte) bool {
		return len(p) >= 28 && p[9] == unix.IPPROTO_ICMP && p[20] == 0 && binary.BigEndian.Uint16(p[26:28]) == seq
	})
	if err := checkIPv4(p, kernelAddr, userAddr, unix.IPPROTO_ICMP); err != nil {
		t.Fatalf("echo reply: %v", err)
	}
	icmp := p[20:]
	if icmp[1] != 0 || checksum(icmp) != 0 {
		t.Errorf("echo reply: code %d, checksum over message %#04x; want 0, 0", icmp[1], checksum(icmp))
	}
	if id := binary.BigEndian.Uint16(icmp[4:6]); id != echoID {
		t.Errorf("echo reply id = %#x, want %#x", id, echoID)
	}
	if !bytes.Equal(icmp[8:], data) {
		t.Errorf("echo reply data = %q, want %q", icmp[8:], data)
	}
}

// readUntil reads packets from dev until match accepts one, for at most 2 s
// and 100 packets, and returns it.
func readUntil(t *testing.T, dev *tun.TUN, match func([]byte) bool) []byte {
	t.Helper()
	if err := dev.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	defer dev.SetReadDeadline(time.Time{})
	buf := make([]byte, dev.MTU())
	for i := range 100 {
		n, err := dev.ReadPacket(buf)
		if err != nil {
			t.Fatalf("ReadPacket after %d other packets: %v", i, err)
		}
		if match(buf[:n]) {
			return buf[:n]
		}
		t.Logf("ignoring packet % x", buf[:min(n, 40)])
	}
	t.Fatal("no matching packet in 100")
	return nil
}

const echoID = 0x7477

// echoRequest returns an IPv4 packet from userAddr to kernelAddr carrying
// an ICMP echo request (RFC 792).
func echoRequest(seq uint16, data []byte) []byte {
	icmp := make([]byte, 8+len(data))
	icmp[0] = 8 // echo request; code 0
	binary.BigEndian.PutUint16(icmp[4:], echoID)
	binary.BigEndian.PutUint16(icmp[6:], seq)
	copy(icmp[8:], data)
	binary.BigEndian.PutUint16(icmp[2:], checksum(icmp))
	return ipv4(userAddr, kernelAddr, unix.IPPROTO_ICMP, icmp)
}

// ipv4 prepends a 20-byte IPv4 header (RFC 791) to payload.
func ipv4(src, dst netip.Addr, proto byte, payload []byte) []byte {
	p := make([]byte, 20+len(payload))
	p[0] = 4<<4 | 5 // version, IHL
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	p[6] = 0x40 // DF
	p[8] = 64   // TTL
	p[9] = proto
	copy(p[12:16], src.AsSlice())
	copy(p[16:20], dst.AsSlice())
	binary.BigEndian.PutUint16(p[10:], checksum(p[:20]))
	copy(p[20:], payload)
	return p
}

// checkIPv4 validates p's IPv4 header.
func checkIPv4(p []byte, src, dst netip.Addr, proto byte) error {
	switch {
	case len(p) < 20 || p[0] != 0x45:
		return fmt.Errorf("not an option-less IPv4 header: % x", p[:min(len(p), 20)])
	case int(binary.BigEndian.Uint16(p[2:])) != len(p):
		return fmt.Errorf("total length %d, packet %d bytes", binary.BigEndian.Uint16(p[2:]), len(p))
	case checksum(p[:20]) != 0:
		return fmt.Errorf("bad header checksum")
	case p[9] != proto:
		return fmt.Errorf("protocol %d, want %d", p[9], proto)
	}
	if got := netip.AddrFrom4([4]byte(p[12:16])); got != src {
		return fmt.Errorf("source %v, want %v", got, src)
	}
	if got := netip.AddrFrom4([4]byte(p[16:20])); got != dst {
		return fmt.Errorf("destination %v, want %v", got, dst)
	}
	return nil
}

// checksum is the Internet checksum (RFC 1071) of b. Over data that
// includes a correct checksum, it is 0.
func checksum(b []byte) uint16 {
	var sum uint32
	for ; len(b) >= 2; b = b[2:] {
		sum += uint32(b[0])<<8 | uint32(b[1])
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// readSysctl reads /proc/sys/<key> in the calling thread's namespace.
func readSysctl(t *testing.T, key string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/" + key)
	if err != nil {
		t.Fatalf("sysctl %s: %v", key, err)
	}
	return strings.TrimSpace(string(b))
}

func TestAttachReleasesDescriptors(t *testing.T) {
	requireRoot(t)
	// The process's descriptors, with what each points to. Other goroutines
	// (the runtime, a finalizer, what an earlier test left closing) may hold
	// one for a moment, so the count is the smallest of a few readings after
	// a GC; a leak of one descriptor per Attach shows as +cycles.
	fds := func() (n int, names []string) {
		n = -1
		for range 5 {
			runtime.GC()
			ents, err := os.ReadDir("/proc/self/fd")
			if err != nil {
				t.Fatal(err)
			}
			if n < 0 || len(ents) < n {
				n, names = len(ents), names[:0]
				for _, e := range ents {
					target, _ := os.Readlink("/proc/self/fd/" + e.Name())
					names = append(names, e.Name()+"->"+target)
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		return n, names
	}
	cycle := func() {
		cfg := testConfig(t)
		a := mustAttach(t, cfg)
		if err := a.Do(func() error { return nil }); err != nil {
			t.Fatal(err)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}
	cycle() // warm up whatever the runtime opens once
	before, beforeNames := fds()
	const cycles = 20
	for range cycles {
		cycle()
	}
	// One descriptor of slack for a transient holder; a leak per cycle
	// would leave cycles more.
	if after, afterNames := fds(); after > before+1 {
		t.Errorf("open descriptors: %d before %d Attach/Close cycles, %d after\nbefore: %v\nafter:  %v",
			before, cycles, after, beforeNames, afterNames)
	}
}

// TestRemoveLeftovers: only a namespace Attach made for a process that is gone,
// holding nothing but its loopback, is removed; and only when RemoveLeftovers
// is called, never as a side effect of Attach.
func TestRemoveLeftovers(t *testing.T) {
	requireRoot(t)
	var mkNamed func(name, token string, withLink bool) string
	deadPID := 0
	for range 5 { // the pid of a process that has exited, and not been reused yet
		dead := exec.Command("true")
		if err := dead.Run(); err != nil {
			t.Fatal(err)
		}
		if pid := dead.Process.Pid; !processRuns(pid) {
			deadPID = pid
			break
		}
	}
	if deadPID == 0 {
		t.Fatal("every exited process's pid was reused at once")
	}
	mk := func(token string, withLink bool) string {
		t.Helper()
		return mkNamed(tun.UniqueName("twt"), token, withLink)
	}
	mkNamed = func(name, token string, withLink bool) string {
		t.Helper()
		t.Cleanup(func() {
			path := filepath.Join(netnsDir, name)
			unix.Unmount(path, unix.MNT_DETACH)
			os.Remove(path)
		})
		ns, err := openNamespace(name, token)
		if err != nil {
			t.Fatal(err)
		}
		defer ns.Close()
		if withLink { // a TUN link opened inside, held until the test ends
			err := onThreadIn(ns, func() error {
				dev, err := tun.Open(tun.UniqueName("twt"), 1400)
				if err == nil {
					t.Cleanup(func() { dev.Close() })
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		return name
	}
	leftover := mk(ownerToken(deadPID), false)
	live := mk(ownerToken(os.Getpid()), false)
	inUse := mk(ownerToken(deadPID), true)
	foreign := mk("someone else's", false)
	legacy := mk(ownerPrefix+randomToken(), false) // no pid, and young
	// A name of the user's choosing (tcpwheel run -netns NAME): the marker
	// decides, not the name.
	custom := mkNamed("custom-"+tun.UniqueName("twt"), ownerToken(deadPID), false)
	customForeign := mkNamed("custom-"+tun.UniqueName("twt"), "someone else's", false)

	// Attach leaves leftovers under other names alone: removing them is
	// RemoveLeftovers' job, called explicitly.
	mustAttach(t, testConfig(t)).Close()
	checkNamespaceExists(t, leftover)

	removed, err := RemoveLeftovers()
	if err != nil {
		t.Fatalf("RemoveLeftovers: %v", err)
	}
	for _, gone := range []string{leftover, custom} {
		if !slices.Contains(removed, gone) {
			t.Errorf("removed %v: want %s (dead owner, only lo) among them", removed, gone)
		}
	}
	if _, err := os.Stat(filepath.Join(netnsDir, leftover)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("leftover %s still mounted: %v", leftover, err)
	}
	for _, kept := range []string{live, inUse, foreign, legacy, customForeign} {
		if slices.Contains(removed, kept) {
			t.Errorf("removed %s, which is not a leftover", kept)
		}
		checkNamespaceExists(t, kept)
	}
	if pid, ok := ownerPID(ownerToken(4242)); !ok || pid != 4242 {
		t.Errorf("ownerPID of a fresh token: %d, %v", pid, ok)
	}
	for _, bad := range []string{ownerPrefix + "0123abcd", ownerPrefix + "pid=/x", ownerPrefix + "pid=-3/x", ownerPrefix + "pid=12", "pid=12/x"} {
		if pid, ok := ownerPID(bad); ok {
			t.Errorf("ownerPID(%q) = %d, want none", bad, pid)
		}
	}
}
