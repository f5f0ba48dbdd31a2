package compare

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/testbed"
)

// ourHogs lists the processes whose parent is this process and whose
// command line is DefaultHog's, from the process table (/proc).
func ourHogs(t *testing.T) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	me, hog := os.Getpid(), strings.Join(DefaultHog(), "\x00")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err1 := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		cmd, err2 := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err1 != nil || err2 != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at the last ')'.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(me) && strings.TrimRight(string(cmd), "\x00") == hog {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestHogsStartAndStop: startHogs starts n busy processes, and stop kills
// and reaps every one: none is left in the process table, not even a zombie.
func TestHogsStartAndStop(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if left := ourHogs(t); len(left) > 0 {
		t.Fatalf("hogs before the test: %v", left)
	}
	h, err := startHogs(3, DefaultHog(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer h.stop()
	if got := ourHogs(t); len(got) != 3 || len(h.pids) != 3 {
		t.Errorf("running hogs %v, started %v; want 3", got, h.pids)
	}
	h.stop()
	h.stop() // idempotent
	if left := ourHogs(t); len(left) > 0 {
		t.Errorf("hogs left after stop: %v", left)
	}
	for _, pid := range h.pids {
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err == nil {
			t.Errorf("hog %d still in the process table", pid)
		}
	}
	// The time limit kills them too, without stop.
	h2, err := startHogs(1, DefaultHog(), 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	<-h2.done
	if left := ourHogs(t); len(left) > 0 {
		t.Errorf("hogs left after their time limit: %v", left)
	}
	if _, err := startHogs(1, []string{"/nonexistent/hog"}, time.Second); err == nil {
		t.Error("a hog command that cannot start gave no error")
	}
}

// TestCompareUnderLoad: with Load 2, each run (synack-loss: a second each, for
// the SYN-ACK timer) has two hogs beside it (seen in
// the process table while it runs), none is left when Run returns, and the
// table says the run was under load, with the spurious retransmission figure.
func TestCompareUnderLoad(t *testing.T) {
	testbed.RequireRoot(t)
	cfg := DefaultConfig()
	cfg.Runs, cfg.Scenarios, cfg.Stacks, cfg.Quiet, cfg.RunTimeout = 2, []string{"synack-loss"}, []string{stackTcpwheel}, true, 30*time.Second
	cfg.Load = 2
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[int]bool{}
	most := 0
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			pids := ourHogs(t)
			mu.Lock()
			most = max(most, len(pids))
			for _, p := range pids {
				seen[p] = true
			}
			mu.Unlock()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := Run(ctx, cfg, &out, &out)
	close(stop)
	<-watched
	if err != nil {
		t.Fatalf("compare: %v\n%s", err, out.String())
	}
	if left := ourHogs(t); len(left) > 0 {
		t.Errorf("hogs left after the comparison: %v", left)
	}
	mu.Lock()
	defer mu.Unlock()
	if most != 2 || len(seen) != 4 {
		t.Errorf("at most %d hogs at once and %d in all; want 2 per run, 4 over the 2 runs", most, len(seen))
	}
	for _, s := range []string{"UNDER LOAD: 2 CPU-bound processes", "spurious retransmissions", "duplicate segments the kernel received"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, out.String())
		}
	}
}

// TestHogsDieWithParent: a comparison killed outright (SIGKILL, no cleanup)
// leaves no hog running: each gets SIGKILL when its parent goes.
func TestHogsDieWithParent(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHogsDieWithParentChild$")
	cmd.Env = append(os.Environ(), "COMPARE_HOG_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	var pids []int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "hogs "); ok {
			for _, f := range strings.Fields(rest) {
				pid, _ := strconv.Atoi(f)
				pids = append(pids, pid)
			}
			break
		}
	}
	if len(pids) != 2 {
		t.Fatalf("the child reported hogs %v, want 2", pids)
	}
	cmd.Process.Kill()
	cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("hog %d outlived its killed parent", pid)
		}
	}
}

// alive says whether pid runs (a zombie, which init reaps, does not count).
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// TestHogsDieWithParentChild is the process TestHogsDieWithParent kills.
func TestHogsDieWithParentChild(t *testing.T) {
	if os.Getenv("COMPARE_HOG_CHILD") == "" {
		t.Skip("runs only as TestHogsDieWithParent's child process")
	}
	h, err := startHogs(2, DefaultHog(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("hogs", strings.Trim(fmt.Sprint(h.pids), "[]"))
	time.Sleep(10 * time.Second)
	h.stop()
	t.Fatal("not killed")
}
