//go:build linux

package testbed

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/impair"
)

// passthrough is a watcher that forwards Pollable by embedding the whole
// interface, as the comparison's does.
type passthrough struct{ tun.Pollable }

// TestBed: a bed has fresh names, the whole chain, addresses from its
// subnet, stays Pollable through every layer, lets the kernel listen and
// run commands in the namespace, and leaves nothing behind.
func TestBed(t *testing.T) {
	RequireRoot(t)
	pcap := filepath.Join(t.TempDir(), "bed.pcap")
	watched := false
	b, err := New(Config{Prefix: "twt", Subnet: 7, MTU: 1400, PcapPath: pcap, Watch: func(d tun.Device) tun.Device {
		watched = true
		return passthrough{d.(tun.Pollable)}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { forceRemove(t, b.Namespace()) })
	other, err := New(Config{Prefix: "twt"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { forceRemove(t, other.Namespace()) })
	if b.Namespace() == other.Namespace() || b.Link() == other.Link() {
		t.Errorf("two beds share names: %s/%s and %s/%s", b.Namespace(), b.Link(), other.Namespace(), other.Link())
	}
	for _, name := range []string{b.Namespace(), b.Link()} {
		if !strings.HasPrefix(name, "twt") {
			t.Errorf("name %q does not start with the prefix twt", name)
		}
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	checkGone(t, other.Namespace(), other.Link())

	if b.KernelAddr != netip.MustParseAddr("198.18.7.1") || b.StackAddr != netip.MustParseAddr("198.18.7.2") {
		t.Errorf("addresses %v, %v; want 198.18.7.1, 198.18.7.2", b.KernelAddr, b.StackAddr)
	}
	if !watched || b.Tap == nil || b.Imp == nil || b.Dev.MTU() != 1400 {
		t.Errorf("chain: watched %v, tap %v, impair %v, MTU %d; want all, MTU 1400", watched, b.Tap, b.Imp, b.Dev.MTU())
	}
	p, ok := b.Dev.(tun.Pollable)
	if !ok {
		t.Fatal("the top of the chain is not Pollable")
	}
	if fd, err := p.ReadFD(); err != nil || fd < 0 {
		t.Errorf("ReadFD through the chain = %d, %v; want the TUN's descriptor", fd, err)
	}

	ln, err := b.KernelListen(t.Context(), 0, 8192)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var c net.Conn
	if err := b.Do(func() (err error) {
		c, err = net.Dial("tcp4", ln.Addr().String())
		return err
	}); err != nil {
		t.Fatalf("dialing the kernel's listener inside the namespace: %v", err)
	}
	c.Close()
	out, err := b.Command(context.Background(), "ip", "-4", "addr", "show", "dev", b.Link()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "198.18.7.1/24") {
		t.Errorf("ip addr in the namespace: %v\n%s", err, out)
	}

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	checkGone(t, b.Namespace(), b.Link())
	if st, err := os.Stat(pcap); err != nil || st.Size() == 0 {
		t.Errorf("pcap %s: %v, want a capture with at least its header", pcap, err)
	}
}

// TestBedUndo: a bed that fails at any step leaves no namespace and no link.
func TestBedUndo(t *testing.T) {
	RequireRoot(t)
	for name, cfg := range map[string]Config{
		"pcap":          {PcapPath: "/nonexistent-dir/x.pcap"},
		"impair":        {Impair: impair.Config{EgressLoss: 2}},
		"attach":        {MTU: 1},
		"stack address": {Stack: netip.MustParseAddr("198.18.9.2")},
	} {
		t.Run(name, func(t *testing.T) {
			cfg.Namespace, cfg.Link = tun.UniqueName("twt"), tun.UniqueName("twt")
			t.Cleanup(func() { forceRemove(t, cfg.Namespace) })
			b, err := New(cfg)
			if err == nil {
				b.Close()
				t.Fatal("New succeeded, want an error")
			}
			checkGone(t, cfg.Namespace, cfg.Link)
		})
	}
	if _, err := New(Config{PcapPath: "/nonexistent-dir/x.pcap"}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("New with an unwritable pcap = %v, want the step's error (not exist)", err)
	}
}

func TestMain(m *testing.M) { os.Exit(Main(m, "twt")) }

// TestOwnNamespaces: Main's check sees a bed's namespace while it lives, and
// not after Close, nor another prefix's.
func TestOwnNamespaces(t *testing.T) {
	RequireRoot(t)
	b, err := New(Config{Prefix: "twt"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { forceRemove(t, b.Namespace()) })
	if got := ownNamespaces([]string{"twx", "twt"}); !slices.Contains(got, b.Namespace()) {
		t.Errorf("ownNamespaces = %v, want %s among them", got, b.Namespace())
	}
	if got := ownNamespaces([]string{"twx"}); slices.Contains(got, b.Namespace()) {
		t.Errorf("ownNamespaces(twx) = %v, want not %s", got, b.Namespace())
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := ownNamespaces([]string{"twt"}); slices.Contains(got, b.Namespace()) {
		t.Errorf("after Close, ownNamespaces = %v, still %s", got, b.Namespace())
	}
}
