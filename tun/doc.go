// Package tun is the link layer of tcpwheel: it moves whole IPv4 packets
// between the userspace stack and the Linux kernel.
//
// [Device] is the boundary every stack is written against. [TUN] implements
// it on a Linux TUN device (github.com/songgao/water, IFF_TUN|IFF_NO_PI), and
// package tuntest provides an in-memory pipe for unit tests. [Pollable] is
// the optional interface of a device an event loop can read without a
// goroutine; every wrapper in this module (impair, pcaptap, tuntest's
// wrappers) forwards it when what it wraps has it.
//
// [OpenOffload] opens a TUN with IFF_VNET_HDR and TSO/checksum offload
// (songgao/water cannot ask for that flag, so it opens /dev/net/tun itself);
// such a device is an [Offloader], which moves frames: a virtio-net header
// ([VnetHdr]) and a packet of up to 64 KiB. [Segment] and [SplitFrame] take a
// frame apart as the kernel's segmentation would. [OpenQueues] opens a
// multi-queue TUN (IFF_MULTI_QUEUE): one descriptor per queue, over which
// the kernel spreads the flows, for a stack with a loop per queue.
//
// Package netns puts the kernel side of a TUN device into a private, named
// network namespace, so that the kernel's own TCP can be the peer of the
// userspace stack without the host's interfaces, addresses or routes ever
// being touched.
//
// [Open] needs root (CAP_NET_ADMIN) and /dev/net/tun; [Device], [UniqueName]
// and package tuntest do not.
package tun
