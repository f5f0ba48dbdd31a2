// Package tun is the link layer of tcpwheel: it moves whole IPv4 packets
// between the userspace stack and the Linux kernel.
//
// [Device] is the boundary every stack is written against. [TUN] implements
// it on a Linux TUN device (github.com/songgao/water, IFF_TUN|IFF_NO_PI), and
// package tuntest provides an in-memory pipe for unit tests.
//
// [Attach] puts the kernel side of a TUN device into a private, named network
// namespace, so that the kernel's own TCP can be the peer of the userspace
// stack without the host's interfaces, addresses or routes ever being
// touched:
//
//	a, err := tun.Attach(tun.NamespaceConfig{
//		Namespace: tun.UniqueName("tw"),
//		Link:      tun.UniqueName("tw"),
//		PeerAddr:  netip.MustParsePrefix("198.18.0.1/24"),
//	})
//	if err != nil { ... }
//	defer a.Close()
//	// a.Dev reads what the kernel in the namespace sends to 198.18.0.0/24;
//	// a.Do runs code (a dialer, a listener) inside the namespace.
//
// Everything here needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and
// /dev/net/tun, except [Device], [UniqueName] and package tuntest.
package tun
