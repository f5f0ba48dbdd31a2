// Package netns puts the kernel side of a TUN device into a private, named
// network namespace, so that the kernel's own TCP can be the peer of the
// userspace stack without the host's interfaces, addresses or routes ever
// being touched:
//
//	a, err := netns.Attach(netns.NamespaceConfig{
//		Namespace: tun.UniqueName("tw"),
//		Link:      tun.UniqueName("tw"),
//		PeerAddr:  netip.MustParsePrefix("198.18.0.1/24"),
//	})
//	if err != nil { ... }
//	defer a.Close()
//	// a.Dev reads what the kernel in the namespace sends to 198.18.0.0/24;
//	// a.Do runs code (a dialer, a listener) inside the namespace.
//
// The package keeps no state of its own: what marks a namespace as made by
// Attach lives in the namespace itself (its loopback's alias). Removing the
// namespaces of processes that died without Close is an explicit call,
// [RemoveLeftovers], made once by whoever creates namespaces (a command at
// its start, a test binary's TestMain); Attach never does it behind the
// caller's back. Handling signals (closing an Attachment on SIGINT) is the
// program's business, not this package's.
//
// Everything here needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and
// /dev/net/tun.
package netns
