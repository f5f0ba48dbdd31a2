package testbed

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/netns"
)

func TestCloseOnSignal(t *testing.T) {
	RequireRoot(t)
	ns, link := tun.UniqueName("twt"), tun.UniqueName("twt")
	t.Cleanup(func() { forceRemove(t, ns) })
	cmd := exec.Command(os.Args[0], "-test.run=^TestCloseOnSignalChild$")
	cmd.Env = append(os.Environ(), "TESTBED_SIGNAL_CHILD="+ns+","+link)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitOnce sync.Once
	var waitErr error
	wait := func() error { waitOnce.Do(func() { waitErr = cmd.Wait() }); return waitErr }
	t.Cleanup(func() { cmd.Process.Kill(); wait() })
	timer := time.AfterFunc(10*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()

	lines := bufio.NewScanner(out)
	for lines.Scan() && lines.Text() != "ready" {
	}
	if _, err := os.Stat(filepath.Join(netnsDir, ns)); err != nil {
		t.Fatalf("namespace %s: %v", ns, err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, out)
	err = wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child: %v, want death by SIGTERM", err)
	}
	if ws := exit.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("child ended with %v, want death by SIGTERM (the signal raised again)", exit)
	}
	checkGone(t, ns, link)
}

// TestCloseOnSignalChild is the process TestCloseOnSignal kills.
func TestCloseOnSignalChild(t *testing.T) {
	spec := os.Getenv("TESTBED_SIGNAL_CHILD")
	if spec == "" {
		t.Skip("runs only as TestCloseOnSignal's child process")
	}
	ns, link, _ := strings.Cut(spec, ",")
	a, err := netns.Attach(netns.NamespaceConfig{Namespace: ns, Link: link, PeerAddr: netip.MustParsePrefix("198.18.0.1/24")})
	if err != nil {
		t.Fatal(err)
	}
	CloseOnSignal(a)
	fmt.Println("ready")
	time.Sleep(10 * time.Second)
	a.Close()
	t.Fatal("no signal came")
}

// checkGone checks that neither the namespace nor the link (in this
// process's namespace) exists.
func checkGone(t *testing.T, ns, link string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(netnsDir, ns)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat %s/%s = %v, want not exist", netnsDir, ns, err)
	}
	if exists, err := tun.LinkExists(link); err != nil || exists {
		t.Errorf("link %s in the host namespace: exists=%v, err=%v; want absent", link, exists, err)
	}
}

// forceRemove removes the namespace ns should the code under test have left
// it, and says so.
func forceRemove(t *testing.T, ns string) {
	if _, err := os.Stat(filepath.Join(netnsDir, ns)); err != nil {
		return
	}
	t.Errorf("namespace %s left behind; removing it", ns)
	ForceRemove(ns)
}
