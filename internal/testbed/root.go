package testbed

import (
	"fmt"
	"os"
)

// Unavailable says why this process cannot make network namespaces and TUN
// devices ("needs root", "needs /dev/net/tun: ..."), or returns "" when it
// can.
func Unavailable() string {
	if os.Geteuid() != 0 {
		return "needs root"
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Sprintf("needs /dev/net/tun: %v", err)
	}
	return ""
}

// TB is the part of testing.TB that RequireRoot uses (this package does not
// import testing, since the tcpwheel command links it).
type TB interface {
	Helper()
	Skip(args ...any)
	Fatalf(format string, args ...any)
}

// RequireRoot skips the test or benchmark when it cannot make namespaces
// and TUN devices, except under CI=true, where that is a failure.
func RequireRoot(t TB) {
	t.Helper()
	reason := Unavailable()
	if reason == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: not skipping)", reason)
	}
	t.Skip(reason)
}
