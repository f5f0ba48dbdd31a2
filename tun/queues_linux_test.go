//go:build linux

package tun

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpenQueues: a multi-queue TUN's queues are one link (IFF_MULTI_QUEUE
// on each descriptor, the same name), with or without offloads; the link
// outlives all but its last queue; a second OpenQueues of the name fails.
func TestOpenQueues(t *testing.T) {
	for _, offload := range []bool{true, false} {
		inFreshNamespace(t, func() {
			qs, err := OpenQueues("twmq0", 1500, 3, offload)
			if err != nil {
				t.Fatalf("offload %v: %v", offload, err)
			}
			if len(qs) != 3 {
				t.Fatalf("offload %v: %d queues, want 3", offload, len(qs))
			}
			for i, q := range qs {
				if q.Name() != "twmq0" {
					t.Errorf("queue %d is %q, want twmq0", i, q.Name())
				}
				if o := q.Offloads(); o.GSO != offload || o.GRO != offload {
					t.Errorf("offload %v: queue %d Offloads %+v", offload, i, o)
				}
				var flags uint16
				if err := q.rc.Control(func(fd uintptr) {
					ifr, _ := unix.NewIfreq("")
					if err := unix.IoctlIfreq(int(fd), unix.TUNGETIFF, ifr); err == nil {
						flags = ifr.Uint16()
					}
				}); err != nil {
					t.Fatal(err)
				}
				if flags&unix.IFF_MULTI_QUEUE == 0 || (flags&unix.IFF_VNET_HDR != 0) != offload {
					t.Errorf("offload %v: queue %d flags %#x, want IFF_MULTI_QUEUE", offload, i, flags)
				}
				if _, err := q.ReadPacketNonblock(make([]byte, 1500)); !errors.Is(err, ErrWouldBlock) {
					t.Errorf("queue %d: ReadPacketNonblock on a quiet device: %v", i, err)
				}
			}
			if _, err := OpenQueues("twmq0", 1500, 2, offload); !errors.Is(err, ErrLinkExists) {
				t.Errorf("a second OpenQueues of twmq0: %v, want ErrLinkExists", err)
			}
			qs[0].Close()
			qs[1].Close()
			if ok, err := LinkExists("twmq0"); !ok || err != nil {
				t.Errorf("with one queue left: LinkExists = %v, %v; want the link", ok, err)
			}
			qs[2].Close()
			if ok, err := LinkExists("twmq0"); ok || err != nil {
				t.Errorf("with every queue closed: LinkExists = %v, %v; want it gone", ok, err)
			}
		})
	}
	for _, n := range []int{0, MaxQueues + 1} {
		if _, err := OpenQueues("twmq1", 1500, n, true); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("OpenQueues of %d queues: %v, want ErrInvalidConfig", n, err)
		}
	}
}
