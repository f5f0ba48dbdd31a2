//go:build linux

package tun

import (
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// MaxQueues bounds OpenQueues' n (the kernel's MAX_TAP_QUEUES is 256).
const MaxQueues = 256

// OpenQueues creates the multi-queue TUN device name (IFF_MULTI_QUEUE) in
// the calling thread's network namespace and returns its n queues, each a
// TUN of its own on a descriptor of its own: what the kernel sends into the
// link is spread over the queues by flow, and what is written to a queue
// the kernel receives as from the link. With offload every queue is opened
// as OpenOffload opens its device (virtio-net headers, TSO and checksum
// offload), falling back to plain queues when the kernel refuses; without
// it, as Open's. n = 1 is Open or OpenOffload: a single-queue device.
//
// The kernel picks a packet's queue (tun_automq_select_queue) from a table
// of flows that it learns from the writes: a flow goes out on the queue it
// was last written to, if that was less than about 3 s ago, else on the
// queue its symmetric flow hash picks. A reader of a queue therefore
// usually sees the flows whose packets it writes, but not always (a flow
// idle for long, the first packets of a flow it starts, more than 4096 flows).
//
// Every queue must be opened in the same namespace, which is why they are
// all opened here, before the link moves anywhere. Closing a queue
// detaches it; closing the last deletes the link. If a link called name
// already exists, OpenQueues fails with an error wrapping ErrLinkExists.
func OpenQueues(name string, mtu, n int, offload bool) ([]*TUN, error) {
	if n < 1 || n > MaxQueues {
		return nil, fmt.Errorf("tun: open %q: %d queues not in [1, %d]: %w", name, n, MaxQueues, ErrInvalidConfig)
	}
	if n == 1 {
		open := Open
		if offload {
			open = OpenOffload
		}
		t, err := open(name, mtu)
		if err != nil {
			return nil, err
		}
		return []*TUN{t}, nil
	}
	mtu, err := checkOpen(name, mtu)
	if err != nil {
		return nil, err
	}
	// Every queue attaches by name, in this thread's namespace.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := checkNewLink(name); err != nil {
		return nil, err
	}
	qs, err := openQueues(name, mtu, n, offload)
	if offload && errors.Is(err, errOffload) {
		var perr error
		if qs, perr = openQueues(name, mtu, n, false); perr != nil {
			return nil, perr
		}
		for _, q := range qs {
			q.offloads.Err = err
		}
		return qs, nil
	}
	return qs, err
}

// openQueues opens the n queues, the first with IFF_TUN_EXCL (a new device),
// the others attaching to it by its name; on an error it closes those it
// opened, which deletes the link.
func openQueues(name string, mtu, n int, offload bool) ([]*TUN, error) {
	qs := make([]*TUN, 0, n)
	fail := func(err error) ([]*TUN, error) {
		for _, q := range qs {
			q.Close()
		}
		return nil, err
	}
	for i := range n {
		flags := uint16(unix.IFF_MULTI_QUEUE)
		if i == 0 {
			flags |= unix.IFF_TUN_EXCL
		}
		var q *TUN
		var err error
		if offload {
			q, err = openVnetFlags(name, mtu, flags)
		} else {
			q, err = openPlainFlags(name, mtu, flags)
		}
		if err != nil {
			return fail(err)
		}
		qs = append(qs, q)
		name = q.name // the kernel's choice, if name was empty
	}
	return qs, nil
}

// openPlainFlags opens a device without virtio-net headers, as Open's, with
// further TUNSETIFF flags.
func openPlainFlags(name string, mtu int, flags uint16) (*TUN, error) {
	fd, name, err := openTUNFD(name, flags)
	if err != nil {
		return nil, err
	}
	return newPlain(fd, name, mtu)
}
