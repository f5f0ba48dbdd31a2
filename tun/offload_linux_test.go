//go:build linux

package tun

import (
	"errors"
	"os"
	"runtime"
	"testing"

	vnetns "github.com/vishvananda/netns"
)

// inFreshNamespace runs fn on a thread moved into a new, unnamed network
// namespace of its own (the devices fn opens live and die there), and
// moves the thread back.
func inFreshNamespace(t *testing.T, fn func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root (CI=true: not skipping)")
		}
		t.Skip("needs root")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := vnetns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := vnetns.New() // unshares: this thread is in it now
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	defer func() {
		if err := vnetns.Set(orig); err != nil {
			panic("cannot move the thread back: " + err.Error()) // never let it serve other goroutines
		}
	}()
	fn()
}

func TestOpenOffload(t *testing.T) {
	inFreshNamespace(t, func() {
		dev, err := OpenOffload("twoff0", 1500)
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Close()
		if o := dev.Offloads(); !o.GSO || !o.GRO || o.Err != nil {
			t.Fatalf("Offloads = %+v, want GSO and GRO", o)
		}
		if _, err := dev.ReadFrameNonblock(make([]byte, MaxFrame)); !errors.Is(err, ErrWouldBlock) {
			t.Fatalf("ReadFrameNonblock on a quiet device: %v", err)
		}
		// A plain read turns GRO off for good; GSO stays.
		if _, err := dev.ReadPacketNonblock(make([]byte, 1500)); !errors.Is(err, ErrWouldBlock) {
			t.Fatalf("ReadPacketNonblock on a quiet device: %v", err)
		}
		if o := dev.Offloads(); !o.GSO || o.GRO {
			t.Fatalf("Offloads after a plain read = %+v, want GSO only", o)
		}
		if _, err := dev.ReadFrameNonblock(make([]byte, MaxFrame)); !errors.Is(err, ErrNoOffload) {
			t.Fatalf("ReadFrameNonblock after a plain read: %v, want ErrNoOffload", err)
		}
		if err := dev.WriteFrame(make([]byte, MaxFrame+1)); !errors.Is(err, ErrPacketSize) {
			t.Fatalf("WriteFrame of %d bytes: %v, want ErrPacketSize", MaxFrame+1, err)
		}
	})
}

// TestOpenOffloadFallback: a kernel that refuses TUNSETOFFLOAD (here: flags
// it does not know) gives the plain device, which says why.
func TestOpenOffloadFallback(t *testing.T) {
	saved := offloadFlags
	offloadFlags = []int{1 << 20}
	defer func() { offloadFlags = saved }()
	inFreshNamespace(t, func() {
		dev, err := OpenOffload("twoff1", 1500)
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Close()
		o := dev.Offloads()
		if o.GSO || o.GRO || !errors.Is(o.Err, errOffload) {
			t.Fatalf("Offloads = %+v, want none and why", o)
		}
		t.Logf("fell back: %v", o.Err)
		if dev.vnet {
			t.Fatal("the fallback device has virtio-net headers")
		}
		if err := dev.WriteFrame(make([]byte, 100)); !errors.Is(err, ErrNoOffload) {
			t.Fatalf("WriteFrame on the fallback: %v, want ErrNoOffload", err)
		}
		if _, err := dev.ReadFrame(make([]byte, MaxFrame)); !errors.Is(err, ErrNoOffload) {
			t.Fatalf("ReadFrame on the fallback: %v, want ErrNoOffload", err)
		}
	})
}
