package integration

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// inAnonNS runs fn on a thread of the namespace h, a thread that ends with
// fn (it is never handed back to the runtime in another namespace).
func inAnonNS(h netns.NsHandle, fn func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread dies with the goroutine
		if err := netns.Set(h); err != nil {
			ch <- err
			return
		}
		ch <- fn()
	}()
	return <-ch
}

// newAnonNS makes a network namespace with no name (nothing in /run/netns
// to leave behind): it lives while its handle is open and a socket or link
// is in it. It is closed at cleanup.
func newAnonNS(t *testing.T) netns.NsHandle {
	t.Helper()
	type res struct {
		h   netns.NsHandle
		err error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread dies in the new namespace
		h, err := netns.New()
		ch <- res{h, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("new namespace: %v", r.err)
	}
	t.Cleanup(func() { r.h.Close() })
	return r.h
}

// TestPMTUThroughKernelRouter: the test's namespace routes to a second
// namespace (anonymous, made by the test) over a veth pair whose route has
// an MTU of 1280, with forwarding on (only in the test's namespace). The
// stack dials a kernel server behind it with the link's MSS (1460, and
// 1440 over IPv6): the kernel router answers the first full segments with
// "fragmentation needed" (RFC 1191) or "packet too big" (RFC 8201), the
// stack lowers its MSS to the path's and resends, and 1 MB goes through
// intact each way.
func TestPMTUThroughKernelRouter(t *testing.T) {
	e := newEnv(t, envOptions{Subnet: 91, IPv6: true})
	far := newAnonNS(t)
	const farMTU = 1280
	routerAddr, serverAddr := netip.MustParsePrefix("198.18.92.1/24"), netip.MustParsePrefix("198.18.92.2/24")
	router6, server6 := netip.MustParsePrefix("2001:db8:0:92::1/64"), netip.MustParsePrefix("2001:db8:0:92::2/64")
	addr := func(h *netlink.Handle, l netlink.Link, p netip.Prefix) error {
		return h.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}, Flags: 0x02 /* IFA_F_NODAD */})
	}
	// The router: the test's namespace, with a veth into the far one.
	if err := e.Do(func() error {
		h, err := netlink.NewHandle()
		if err != nil {
			return err
		}
		defer h.Close()
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "pmtu0", MTU: 1500}, PeerName: "pmtu1", PeerNamespace: netlink.NsFd(int(far))}
		if err := h.LinkAdd(veth); err != nil {
			return fmt.Errorf("veth: %w", err)
		}
		for key, v := range map[string]string{"net/ipv4/ip_forward": "1", "net/ipv6/conf/all/forwarding": "1", "net/ipv6/conf/pmtu0/disable_ipv6": "0"} {
			if err := os.WriteFile("/proc/sys/"+key, []byte(v), 0); err != nil {
				return err
			}
		}
		l, err := h.LinkByName("pmtu0")
		if err != nil {
			return err
		}
		if err := addr(h, l, routerAddr); err != nil {
			return err
		}
		if err := addr(h, l, router6); err != nil {
			return err
		}
		if err := h.LinkSetUp(l); err != nil {
			return err
		}
		for _, p := range []netip.Prefix{serverAddr.Masked(), server6.Masked()} {
			r := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}, MTU: farMTU}
			if p.Addr().Is6() {
				r.Priority = 256 // the connected route's metric, so that this one replaces it
			}
			if err := h.RouteReplace(r); err != nil {
				return fmt.Errorf("route %v mtu %d: %w", p, farMTU, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The far namespace: the server, its default routes via the router.
	var ln4, ln6 net.Listener
	if err := inAnonNS(far, func() error {
		h, err := netlink.NewHandle()
		if err != nil {
			return err
		}
		defer h.Close()
		for _, name := range []string{"lo", "pmtu1"} {
			l, err := h.LinkByName(name)
			if err != nil {
				return err
			}
			if err := h.LinkSetUp(l); err != nil {
				return err
			}
		}
		l, _ := h.LinkByName("pmtu1")
		if err := addr(h, l, serverAddr); err != nil {
			return err
		}
		if err := addr(h, l, server6); err != nil {
			return err
		}
		for _, gw := range []netip.Addr{routerAddr.Addr(), router6.Addr()} {
			if err := h.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: gw.AsSlice()}); err != nil {
				return fmt.Errorf("default route via %v: %w", gw, err)
			}
		}
		if ln4, err = net.Listen("tcp4", netip.AddrPortFrom(serverAddr.Addr(), 9000).String()); err != nil {
			return err
		}
		ln6, err = net.Listen("tcp6", netip.AddrPortFrom(server6.Addr(), 9000).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln4.Close(); ln6.Close() })
	// The server: reads everything, answers with its hash and 1 MB of its own.
	serve := func(ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				h := sha256.New()
				io.Copy(h, c)
				c.Write(h.Sum(nil))
				c.Write(payload(1 << 20))
			}()
		}
	}
	go serve(ln4)
	go serve(ln6)

	for _, tc := range []struct {
		name   string
		server netip.Addr
		mss    int // the path's MSS less the timestamps
	}{
		{"IPv4", serverAddr.Addr(), farMTU - 40 - 12},
		{"IPv6", server6.Addr(), farMTU - 60 - 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.Stack.Stats()
			// transfer sends 1 MB and checks what comes back.
			transfer := func() (*stack.Conn, time.Time) {
				t.Helper()
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				nc, err := e.Stack.DialContext(ctx, "tcp", netip.AddrPortFrom(tc.server, 9000).String())
				if err != nil {
					t.Fatal(err)
				}
				c := nc.(*stack.Conn)
				dialed := time.Now()
				t.Cleanup(func() { c.Close() })
				c.SetDeadline(time.Now().Add(30 * time.Second))
				data := payload(1 << 20)
				if _, err := c.Write(data); err != nil {
					t.Fatal(err)
				}
				c.CloseWrite()
				got, err := io.ReadAll(c)
				if err != nil {
					t.Fatal(err)
				}
				sum := sha256.Sum256(data)
				if len(got) != 32+1<<20 || string(got[:32]) != string(sum[:]) || string(got[32:]) != string(data) {
					t.Fatalf("got %d bytes back; want the hash of what we sent and 1 MB, intact", len(got))
				}
				return c, dialed
			}
			c, dialed := transfer()
			info := c.Info()
			st := e.Stack.Stats()
			t.Logf("SndMSS %d, PMTU resends %d, segments resent %d (SYNs %d, RTOs %d), ICMP errors taken %d, transfer %v",
				info.SndMSS, info.PMTUResends, info.SegsRetransmitted, info.SYNRetransmits, info.RTOEvents, st.TCPICMPErrors-before.TCPICMPErrors, time.Since(dialed))
			if info.SndMSS != tc.mss || info.PMTUResends < 1 || st.TCPICMPErrors == before.TCPICMPErrors {
				t.Fatalf("SndMSS %d, PMTUResends %d, ICMP errors taken %d; want %d, at least 1, at least 1",
					info.SndMSS, info.PMTUResends, st.TCPICMPErrors-before.TCPICMPErrors, tc.mss)
			}
			// The next connection to the server starts with the path MTU
			// the stack kept (stack/pmtu.go): no resend for it.
			c2, _ := transfer()
			info2, st2 := c2.Info(), e.Stack.Stats()
			if info2.SndMSS != tc.mss || info2.PMTUResends != 0 || st2.PMTUReused == st.PMTUReused {
				t.Fatalf("the second connection: SndMSS %d, PMTUResends %d, PMTUReused +%d; want %d, 0, +1",
					info2.SndMSS, info2.PMTUResends, st2.PMTUReused-st.PMTUReused, tc.mss)
			}
		})
	}
}

// payload is n bytes of a pattern that shows misplaced data.
func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + i>>10)
	}
	return b
}
