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
)

// TestFragmentsWithKernel: the kernel sends pings of 4000 bytes and UDP
// datagrams of 8000 bytes, over IPv4 and IPv6, larger than the link's MTU
// of 1500: it fragments them, the stack reassembles them (stack/reasm.go),
// and its replies, as large, go back in fragments (stack/frag.go) that
// the kernel reassembles. Every reply comes back whole.
func TestFragmentsWithKernel(t *testing.T) {
	e := newEnv(t, envOptions{Subnet: 90, IPv6: true})
	srv, err := e.Stack.ListenUDP("udp", ":7")
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
		for _, a := range []netip.Addr{e.StackAddr, e.StackAddr6} {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			out, err := e.command(ctx, "ping", "-c", "3", "-W", "5", "-i", "0.2", "-s", "4000", a.String()).CombinedOutput()
			cancel()
			if err != nil {
				t.Fatalf("ping -s 4000 %v: %v\n%s", a, err, out)
			}
			pings += 3
		}
	} else if os.Getenv("CI") == "true" {
		t.Fatal("ping is not installed (iputils-ping), and CI is set")
	}
	for _, a := range []netip.Addr{e.StackAddr, e.StackAddr6} {
		var c net.Conn
		if err := e.Do(func() (err error) { c, err = net.Dial("udp", netip.AddrPortFrom(a, 7).String()); return err }); err != nil {
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
	st := e.Stack.Stats()
	t.Logf("reassembled %d, fragments out %d, echo replies %d, drops %+v", st.Reassembled, st.FragmentsOut, st.EchoReplies, st.Drops)
	if want := uint64(pings + 8); st.Reassembled < want || st.FragmentsOut < 2*want || st.EchoReplies != uint64(pings) {
		t.Fatalf("Reassembled %d, FragmentsOut %d, EchoReplies %d; want at least %d, %d, and %d", st.Reassembled, st.FragmentsOut, st.EchoReplies, want, 2*want, pings)
	}
}
