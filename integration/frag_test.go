package integration

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/testbed"
	"github.com/tcpwheel/tcpwheel/stack"
)

// TestFragmentsWithKernel: the kernel sends pings of 4000 bytes and UDP
// datagrams of 8000 bytes, over IPv4 and IPv6, larger than the link's MTU
// of 1500: it fragments them, the stack reassembles them (stack/reasm.go),
// and its replies, as large, go back in fragments (stack/frag.go) that
// the kernel reassembles. Every reply comes back whole.
func TestFragmentsWithKernel(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		e := newEnv(t, envOptions{Subnet: 90, IPv6: true})
		fragmentsWith(t, e.Stack, e.Bed)
	})
	t.Run("offload", func(t *testing.T) { // the kernel's frames, with their virtio-net headers
		st, bed := offloadStack(t, 93)
		if !st.Stats().Offload.GSO {
			t.Fatalf("no offloads: %+v", st.Stats().Offload)
		}
		fragmentsWith(t, st, bed)
	})
}

// fragmentsWith runs TestFragmentsWithKernel on the stack st attached to
// bed.
func fragmentsWith(t *testing.T, st *stack.Stack, bed *testbed.Bed) {
	srv, err := st.ListenUDP("udp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	go func() {
		buf := make([]byte, 1<<16)
		for {
			n, from, err := srv.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			srv.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	pings := 0
	if _, err := exec.LookPath("ping"); err == nil {
		for _, a := range []netip.Addr{bed.StackAddr, bed.StackAddr6} {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			out, err := bed.Command(ctx, "ping", "-c", "3", "-W", "5", "-i", "0.2", "-s", "4000", a.String()).CombinedOutput()
			cancel()
			if err != nil {
				t.Fatalf("ping -s 4000 %v: %v\n%s", a, err, out)
			}
			pings += 3
		}
	} else if os.Getenv("CI") == "true" {
		t.Fatal("ping is not installed (iputils-ping), and CI is set")
	}
	for _, a := range []netip.Addr{bed.StackAddr, bed.StackAddr6} {
		var c net.Conn
		if err := bed.Do(func() (err error) { c, err = net.Dial("udp", netip.AddrPortFrom(a, 7).String()); return err }); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(20 * time.Second))
		buf := make([]byte, 1<<16)
		for _, size := range []int{1500, 3000, 8000, 30000} {
			msg := bytes.Repeat([]byte("0123456789abcdef"), size/16)
			if _, err := c.Write(msg); err != nil {
				t.Fatal(err)
			}
			if n, err := c.Read(buf); err != nil || !bytes.Equal(buf[:n], msg) {
				t.Fatalf("UDP echo of %d bytes to %v: got %d, %v", size, a, n, err)
			}
		}
	}
	stats := st.Stats()
	t.Logf("reassembled %d, fragments out %d, echo replies %d, drops %+v", stats.Reassembled, stats.FragmentsOut, stats.EchoReplies, stats.Drops)
	if want := uint64(pings + 8); stats.Reassembled < want || stats.FragmentsOut < 2*want || stats.EchoReplies != uint64(pings) {
		t.Fatalf("Reassembled %d, FragmentsOut %d, EchoReplies %d; want at least %d, %d, and %d", stats.Reassembled, stats.FragmentsOut, stats.EchoReplies, want, 2*want, pings)
	}
}
