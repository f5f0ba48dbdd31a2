//go:build linux

package testbed

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// netnsDir is where named network namespaces are bind-mounted (`ip netns`).
const netnsDir = "/run/netns"

// ForceRemove removes the named namespace's bind mount, whoever made it: the
// last resort of a test that finds a namespace its code should have removed.
// Never call it on a namespace that is not a test's own.
func ForceRemove(ns string) {
	path := filepath.Join(netnsDir, ns)
	unix.Unmount(path, unix.MNT_DETACH)
	os.Remove(path)
}
