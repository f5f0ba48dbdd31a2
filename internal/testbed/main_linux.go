//go:build linux

package testbed

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/tcpwheel/tcpwheel/tun/netns"
)

// M is what Main runs: a *testing.M.
type M interface{ Run() int }

// Main is the body of a TestMain for tests that make namespaces:
//
//	func TestMain(m *testing.M) { os.Exit(testbed.Main(m, "twi", "twr")) }
//
// As root, it first removes the leftovers of runs that were killed before
// their cleanups ran (netns.RemoveLeftovers), saying so on standard error.
// Then it runs the tests. Then, if a namespace of this process whose name
// tun.UniqueName made from one of prefixes is still there, even after a test
// that failed, it names it, removes it, and makes the run fail: `ip netns
// list` is as the tests found it.
func Main(m M, prefixes ...string) int {
	if Unavailable() == "" {
		removed, _ := netns.RemoveLeftovers()
		for _, name := range removed {
			fmt.Fprintf(os.Stderr, "testbed: removed namespace %s left by a process that is gone\n", name)
		}
	}
	code := m.Run()
	if left := ownNamespaces(prefixes); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "testbed: namespaces left behind: %s\n", strings.Join(left, " "))
		for _, name := range left {
			ForceRemove(name)
		}
		if code == 0 {
			code = 1
		}
	}
	return code
}

// ownNamespaces lists this process's namespaces still named in /run/netns
// (what `ip netns list` shows) whose names tun.UniqueName made from one of
// prefixes: the prefix, this process's id in base 36, six characters.
func ownNamespaces(prefixes []string) []string {
	ents, err := os.ReadDir(netnsDir)
	if err != nil {
		return nil
	}
	pid := strconv.FormatInt(int64(os.Getpid()), 36)
	var left []string
	for _, e := range ents {
		for _, p := range prefixes {
			own := p + pid
			if strings.HasPrefix(e.Name(), own) && len(e.Name()) == len(own)+6 {
				left = append(left, e.Name())
				break
			}
		}
	}
	return left
}
