package gvisor

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/testbed"
	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// gsoBed is gVisor on a VnetTUN inside a fresh namespace whose kernel is
// the peer.
func gsoBed(t *testing.T) (*Stack, *testbed.Bed) {
	t.Helper()
	testbed.RequireRoot(t)
	bed, err := testbed.New(testbed.Config{Prefix: "twg"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bed.Close() })
	vt, err := OpenVnetTUNOn(bed, "twg", tun.DefaultMTU)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{VnetTUN: vt, Addr: bed.StackAddr, Tuned: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, bed
}

// TestVnetTUNBulk moves 8 MB each way between the kernel and gVisor on a
// VnetTUN and checks that the data arrive intact, that gVisor handed the
// kernel segments to split (host GSO) and took the kernel's TSO segments
// whole.
func TestVnetTUNBulk(t *testing.T) {
	s, bed := gsoBed(t)
	ln, err := s.Listen("tcp", ":5001")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const n = 8 << 20
	data := bytes.Repeat([]byte("tcpwheel"), n/8)
	echo(t, ln) // gVisor echoes what the kernel sends
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kc, err := bed.KernelDial(ctx, 5001, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	kc.SetDeadline(time.Now().Add(30 * time.Second))
	werr := make(chan error, 1)
	go func() {
		_, err := kc.Write(data)
		werr <- err
	}()
	got := make([]byte, n)
	if _, err := io.ReadFull(kc, got); err != nil {
		t.Fatalf("read back: %v", err)
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("echoed data differ")
	}
	st := s.Stats()
	t.Logf("GSO segments out %d, large segments in %d, read errors %d, not IPv4 %d",
		st.LinkGSOOut, st.LinkLargeIn, st.LinkReadErrors, st.LinkNotIPv4)
	if st.LinkGSOOut == 0 {
		t.Error("gVisor handed the kernel no segment to split: host GSO is off")
	}
	if st.LinkLargeIn == 0 {
		t.Error("no segment larger than the MTU came in: the kernel's TSO is off")
	}
	if st.LinkReadErrors+st.LinkWriteErrors+st.LinkNotIPv4 != 0 {
		t.Errorf("link errors: %+v", st)
	}
}

// TestVnetTUNConfig: a VnetTUN and a Device together, or neither, is refused.
func TestVnetTUNConfig(t *testing.T) {
	a, _ := tuntest.Pipe(1500)
	defer a.Close()
	for _, cfg := range []Config{{Addr: addrG}, {Addr: addrG, Device: a, VnetTUN: &VnetTUN{mtu: 1500}}} {
		if _, err := New(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("New(device %v, VnetTUN %v) = %v, want ErrConfig", cfg.Device != nil, cfg.VnetTUN != nil, err)
		}
	}
}

func TestVnetPayload(t *testing.T) {
	ip := make([]byte, 40)
	ip[0] = 0x45
	for _, tc := range []struct {
		name string
		hdr  [vnetHdrLen]byte
		pkt  []byte
		ok   bool
	}{
		{"plain", [vnetHdrLen]byte{}, ip, true},
		{"TSO4 with partial checksum", [vnetHdrLen]byte{vnetFNeedsCsum, vnetGSOTCPv4, 40, 0, 0xb4, 5, 20, 0, 16, 0}, ip, true},
		{"TSO4 with ECN", [vnetHdrLen]byte{0, vnetGSOTCPv4 | vnetGSOECN}, ip, true},
		{"UDP GSO", [vnetHdrLen]byte{0, 3}, ip, false},
		{"TSO6", [vnetHdrLen]byte{0, 4}, ip, false},
		{"IPv6", [vnetHdrLen]byte{}, append([]byte{0x60}, ip[1:]...), false},
		{"short", [vnetHdrLen]byte{}, ip[:19], false},
	} {
		p, ok := vnetPayload(append(tc.hdr[:], tc.pkt...))
		if ok != tc.ok || (ok && len(p) != len(tc.pkt)) {
			t.Errorf("%s: got %d bytes, %v; want %v", tc.name, len(p), ok, tc.ok)
		}
	}
	if _, ok := vnetPayload(nil); ok {
		t.Error("an empty read passed")
	}
}

// FuzzVnetPayload: whatever the TUN returns, the parser neither panics nor
// hands on anything but an IPv4 packet behind the header.
func FuzzVnetPayload(f *testing.F) {
	f.Add(append(make([]byte, vnetHdrLen), 0x45, 0, 0, 20, 0, 0, 0, 0, 64, 6, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2))
	f.Add([]byte{1, 1, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, ok := vnetPayload(b)
		if ok && (len(p) != len(b)-vnetHdrLen || len(p) < 20 || p[0]>>4 != 4) {
			t.Fatalf("passed %d bytes of %d: %x", len(p), len(b), b)
		}
	})
}
