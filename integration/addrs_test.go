package integration

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestMoreAddrsWithKernel: a stack with a second IPv4 and a second IPv6
// address (stack.Config.MoreAddrs) answers the kernel on each: pings, a
// TCP echo on ":7" that takes connections to every address (the kernel
// sees its peer at the address it dialled), and UDP echo on sockets bound
// to the second addresses (on two ports: one socket per port), whose replies the kernel's connected sockets
// take only because they come from the address dialled.
func TestMoreAddrsWithKernel(t *testing.T) {
	const subnet = 67
	more4 := netip.AddrFrom4([4]byte{198, 18, subnet, 3})
	more6 := netip.MustParseAddr("2001:db8:0:43::3") // 0x43 = 67, in the bed's /64
	e := newEnv(t, envOptions{Subnet: subnet, IPv6: true, MoreAddrs: []netip.Addr{more4, more6}})
	if !netip.PrefixFrom(e.StackAddr6, 64).Masked().Contains(more6) {
		t.Fatalf("%v is not in the bed's IPv6 prefix (the stack is %v)", more6, e.StackAddr6)
	}
	ln, err := e.Stack.Listen("tcp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	echoServer(t, ln)
	// One socket per port, bound or not (as one listener per port).
	udpAt := map[netip.Addr]netip.AddrPort{more4: netip.AddrPortFrom(more4, 7), more6: netip.AddrPortFrom(more6, 8)}
	for _, ap := range udpAt {
		e.udpEchoAt(t, ap.String())
	}

	for _, a := range []netip.Addr{e.StackAddr, more4, e.StackAddr6, more6} {
		ap := netip.AddrPortFrom(a, 7)
		var c net.Conn
		if err := e.Do(func() (err error) { c, err = net.DialTimeout("tcp", ap.String(), 10*time.Second); return err }); err != nil {
			t.Fatalf("kernel -> %v: %v", ap, err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		if got := c.RemoteAddr().(*net.TCPAddr).AddrPort(); got != ap {
			t.Errorf("kernel's connection to %v has peer %v", ap, got)
		}
		msg := bytes.Repeat([]byte(a.String()), 2000)
		go c.Write(msg)
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("TCP echo from %v: %v", ap, err)
		}
		c.Close()
	}
	for _, a := range []netip.Addr{more4, more6} {
		ap := udpAt[a]
		var c net.Conn
		if err := e.Do(func() (err error) { c, err = net.Dial("udp", ap.String()); return err }); err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		msg := []byte("udp to " + a.String())
		c.Write(msg)
		buf := make([]byte, 100)
		if n, err := c.Read(buf); err != nil || !bytes.Equal(buf[:n], msg) {
			t.Fatalf("UDP echo from %v: %q, %v", ap, buf[:n], err)
		}
		c.Close()
	}

	if _, err := exec.LookPath("ping"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("ping is not installed (iputils-ping; scripts/deps.sh installs it)")
		}
		t.Skip("ping is not installed (iputils-ping)")
	}
	before := e.Stack.Stats().EchoReplies
	for _, a := range []netip.Addr{more4, more6} {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		out, err := e.command(ctx, "ping", "-c", "2", "-W", "5", "-i", "0.2", a.String()).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("ping %v: %v\n%s", a, err, out)
		}
	}
	if n := e.Stack.Stats().EchoReplies - before; n != 4 {
		t.Errorf("stack sent %d echo replies, want 4", n)
	}
}
