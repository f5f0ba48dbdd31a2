//go:build linux

package testbed

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tcpwheel/tcpwheel/tun/netns"
)

// MoveKernelAddr makes link, a link the caller created inside the bed's
// namespace (a TUN opened there with other flags than the bed's), the
// kernel's side instead of the bed's TUN: the kernel's address (with its
// prefix) leaves the bed's TUN, which goes down, and is added to link,
// which gets mtu, the bed's txqueuelen and comes up. Everything happens in
// the namespace; Close removes it with the rest.
func (b *Bed) MoveKernelAddr(link string, mtu int) error {
	peer := b.Att.Config().PeerAddr
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: peer.Addr().AsSlice(), Mask: net.CIDRMask(peer.Bits(), 32)}}
	return b.Do(func() error {
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return fmt.Errorf("netlink: %w", err)
		}
		defer h.Close()
		old, err := h.LinkByName(b.Link())
		if err != nil {
			return fmt.Errorf("netlink: find %q: %w", b.Link(), err)
		}
		if err := h.AddrDel(old, addr); err != nil {
			return fmt.Errorf("netlink: remove %v from %q: %w", peer, b.Link(), err)
		}
		if err := h.LinkSetDown(old); err != nil {
			return fmt.Errorf("netlink: set %q down: %w", b.Link(), err)
		}
		l, err := h.LinkByName(link)
		if err != nil {
			return fmt.Errorf("netlink: find %q: %w", link, err)
		}
		txq := b.Att.Config().TxQueueLen
		if txq == 0 {
			txq = netns.DefaultTxQueueLen
		}
		for _, step := range []struct {
			what string
			do   func() error
		}{
			{fmt.Sprintf("set MTU %d", mtu), func() error { return h.LinkSetMTU(l, mtu) }},
			{fmt.Sprintf("set txqueuelen %d", txq), func() error { return h.LinkSetTxQLen(l, txq) }},
			{fmt.Sprintf("add %v", peer), func() error { return h.AddrAdd(l, addr) }},
			{"set up", func() error { return h.LinkSetUp(l) }},
		} {
			if err := step.do(); err != nil {
				return fmt.Errorf("netlink: %s on %q: %w", step.what, link, err)
			}
		}
		return nil
	})
}
