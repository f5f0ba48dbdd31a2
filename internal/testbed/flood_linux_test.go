//go:build linux

package testbed

import (
	"context"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"
)

// TestSpoofedSources: every source of a large flood is inside the kernel
// side's /24 and 198.18.0.0/15, is neither real address, and maps back to
// its index; no two SYNs share one.
func TestSpoofedSources(t *testing.T) {
	b := &Bed{KernelAddr: netip.MustParseAddr("198.18.3.1"), StackAddr: netip.MustParseAddr("198.18.3.2")}
	peer := netip.MustParsePrefix("198.18.3.0/24")
	seen := map[netip.AddrPort]bool{}
	for i := range 50000 {
		src := b.SpoofedSource(i)
		if !peer.Contains(src.Addr()) || !benchNet().Contains(src.Addr()) || src.Addr() == b.KernelAddr || src.Addr() == b.StackAddr {
			t.Fatalf("SYN %d from %v", i, src)
		}
		if seen[src] {
			t.Fatalf("SYN %d repeats the source %v", i, src)
		}
		seen[src] = true
		if j, ok := b.SpoofedIndex(src); !ok || j != i {
			t.Fatalf("SpoofedIndex(%v) = %d, %v; want %d", src, j, ok, i)
		}
	}
	for _, s := range []string{"198.18.3.1:5000", "198.18.3.2:5000", "198.18.4.10:5000", "198.18.3.10:80"} {
		if _, ok := b.SpoofedIndex(netip.MustParseAddrPort(s)); ok {
			t.Errorf("SpoofedIndex(%s) claims a flood source", s)
		}
	}
}

// TestSYNFlood: a small flood crosses the TUN: every SYN reaches the device,
// from the sources SpoofedSource names, with good checksums, to the port; and
// the namespace's counters count them on the link.
func TestSYNFlood(t *testing.T) {
	RequireRoot(t)
	b, err := New(Config{Prefix: "twt", Subnet: 9})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { forceRemove(t, b.Namespace()) })
	defer b.Close()
	const n = 300
	got := make(chan map[int]bool, 1)
	go func() {
		idx := map[int]bool{}
		buf := make([]byte, 2048)
		for len(idx) < n {
			k, err := b.Dev.ReadPacket(buf)
			if err != nil {
				break
			}
			p := buf[:k]
			if k != synPacketLen || p[9] != 6 || p[33] != 0x02 || binary.BigEndian.Uint16(p[22:]) != 7777 {
				continue // the kernel's own packets (none expected), or not a SYN
			}
			var s, d [4]byte
			copy(s[:], p[12:16])
			copy(d[:], p[16:20])
			if tcpChecksum(s, d, p[20:]) != 0 || netip.AddrFrom4(d) != b.StackAddr {
				continue
			}
			if i, ok := b.SpoofedIndex(netip.AddrPortFrom(netip.AddrFrom4(s), binary.BigEndian.Uint16(p[20:]))); ok {
				idx[i] = true
			}
		}
		got <- idx
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := b.SYNFlood(ctx, SYNFloodConfig{Count: n, Rate: 3000, Port: 7777, Seed: 1})
	if err != nil || res.Sent+res.Errors != n {
		t.Fatalf("SYNFlood = %+v, %v; want %d sent", res, err, n)
	}
	var idx map[int]bool
	select {
	case idx = <-got:
	case <-time.After(5 * time.Second):
		b.Close()
		idx = <-got
	}
	if len(idx) != res.Sent {
		t.Errorf("%d distinct good SYNs reached the device, %d sent", len(idx), res.Sent)
	}
	c, err := b.KernelCounters()
	if err != nil {
		t.Fatal(err)
	}
	if c["link.tx_packets"] < uint64(res.Sent) {
		t.Errorf("kernel counters: link.tx_packets %d; want at least %d", c["link.tx_packets"], res.Sent)
	}
	if _, ok := c["TcpExt.TCPSynRetrans"]; !ok {
		t.Errorf("kernel counters lack TcpExt.TCPSynRetrans: %v", c)
	}
	if v, ok := c["Tcp.ActiveOpens"]; !ok || v != 0 {
		t.Errorf("Tcp.ActiveOpens = %d, %v; want 0 in a fresh namespace where nothing connected", v, ok)
	}
	if _, err := b.SYNFlood(ctx, SYNFloodConfig{Count: MaxFloodSYNs + 1, Rate: 1, Port: 1}); err == nil {
		t.Error("a flood over MaxFloodSYNs was accepted")
	}
}
