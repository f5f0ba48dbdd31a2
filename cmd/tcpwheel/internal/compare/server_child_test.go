package compare

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/testbed"
)

// newServedEnv is a run of http-down on the named stack, whose server runs
// in a child process; the test's end closes it.
func newServedEnv(t *testing.T, cfg Config, stackName string) (*runEnv, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	c := compareCase{name: "http-down", scenario: "http-down"}
	res := &runResult{Stack: stackName, Case: c.name, Metrics: map[string]float64{}}
	e, err := newRunEnv(ctx, cfg, c, stackName, 0, res)
	if err == nil {
		t.Cleanup(func() { e.close() })
	}
	return e, err
}

// get asks the server at url for /small from inside the run's namespace,
// and returns the status line.
func get(t *testing.T, e *runEnv, url string) string {
	t.Helper()
	var status string
	err := e.bed.Do(func() error {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "http://"), 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "GET /small HTTP/1.0\r\n\r\n"); err != nil {
			return err
		}
		status, err = bufio.NewReader(c).ReadString('\n')
		return err
	})
	if err != nil {
		t.Fatalf("GET %s/small: %v", url, err)
	}
	return strings.TrimSpace(status)
}

// TestServerChild: in a served scenario every stack's HTTP server runs in
// a process of its own, which serves, reports its CPU time and stats, and
// exits when the run closes it.
func TestServerChild(t *testing.T) {
	testbed.RequireRoot(t)
	for _, name := range []string{stackTcpwheel, stackGVisor, stackGVisorGSO, stackKernel} {
		t.Run(name, func(t *testing.T) {
			e, err := newServedEnv(t, DefaultConfig(), name)
			if err != nil {
				t.Fatal(err)
			}
			cs, ok := e.stack.(*childStack)
			if !ok {
				t.Fatalf("the stack is a %T, want a *childStack", e.stack)
			}
			if cs.pid == os.Getpid() || cs.pid != cs.ch.cmd.Process.Pid {
				t.Errorf("the server's PID %d: want its child's, %d (this process: %d)", cs.pid, cs.ch.cmd.Process.Pid, os.Getpid())
			}
			url, uploaded, err := e.httpServer()
			if err != nil {
				t.Fatal(err)
			}
			if got := get(t, e, url); !strings.Contains(got, " 200 ") {
				t.Errorf("GET /small: %q, want status 200", got)
			}
			if n, err := uploaded(); n != 0 || err != nil {
				t.Errorf("uploaded = %d, %v; want 0", n, err)
			}
			st, err := cs.stats()
			if err != nil || st.PID != cs.pid {
				t.Errorf("stats = %+v, %v; want PID %d", st, err, cs.pid)
			}
			wantPath := map[string]string{stackTcpwheel: "direct", stackGVisor: "reader", stackGVisorGSO: "reader", stackKernel: "kernel"}[name]
			if got := e.stack.InputPath(); got != wantPath {
				t.Errorf("InputPath = %q, want %q", got, wantPath)
			}
			if s := e.stackCounters(); s.ok != (name != stackKernel) || s.ok && s.sent == 0 {
				t.Errorf("stack counters %+v: want them, with segments sent, from every stack but the kernel", s)
			}
			if cpu, err := e.serverCPU(); err != nil || cpu <= 0 {
				t.Errorf("serverCPU = %v, %v; want > 0", cpu, err)
			}
			if err := e.stack.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if ps := cs.ch.cmd.ProcessState; ps == nil || !ps.Exited() || ps.ExitCode() != 0 {
				t.Errorf("the child after Close: %v, want exited with status 0", ps)
			}
		})
	}
}

// TestServerChildFailure: a server child that exits before it serves, never
// says it is ready, or dies during the run, is an error that says so, and no
// hang: an ended child's error comes from its end, not from the end of
// serverWait (a minute here), and one that never answers is given up after
// serverWait.
func TestServerChildFailure(t *testing.T) {
	testbed.RequireRoot(t)
	defer func(d time.Duration) { serverWait = d }(serverWait)
	serverWait = time.Minute
	cfg := DefaultConfig()

	t0 := time.Now()
	_, err := newServedEnv(t, cfg, "no-such-stack")
	if err == nil || !strings.Contains(err.Error(), "exit status 1") || !strings.Contains(err.Error(), `unknown stack "no-such-stack"`) {
		t.Errorf("a child that exits at once: %v, want its exit status and its error", err)
	}
	t.Logf("a child that exits at once: %v", err)
	if d := time.Since(t0); d > serverWait {
		t.Errorf("a child that exits at once: the error took %v", d)
	}

	hang := cfg
	hang.serverHang = true
	serverWait = 2 * time.Second
	_, err = newServedEnv(t, hang, stackTcpwheel)
	if err == nil || !strings.Contains(err.Error(), "said no ready within 2s") {
		t.Errorf("a child that never says ready: %v", err)
	}
	t.Logf("a child that never says ready: %v", err)
	serverWait = time.Minute

	e, err := newServedEnv(t, cfg, stackTcpwheel)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(e.stack.(*childStack).pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	if _, err := e.serverCPU(); err == nil || !strings.Contains(err.Error(), "signal: killed") {
		t.Errorf("a child killed during the run: serverCPU: %v, want an error that says it was killed", err)
	} else {
		t.Logf("a child killed during the run: %v", err)
	}
	if d := time.Since(t0); d > serverWait {
		t.Errorf("a child killed during the run: the error took %v", d)
	}
	if err := e.stack.Close(); err == nil {
		t.Error("Close of a dead child: no error")
	}
}

// TestInProcess: -in-process serves in this process, as before.
func TestInProcess(t *testing.T) {
	testbed.RequireRoot(t)
	cfg := DefaultConfig()
	cfg.InProcess = true
	e, err := newServedEnv(t, cfg, stackTcpwheel)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.stack.(*tcpwheelStack); !ok {
		t.Fatalf("-in-process: the stack is a %T, want a *tcpwheelStack", e.stack)
	}
	url, _, err := e.httpServer()
	if err != nil {
		t.Fatal(err)
	}
	if got := get(t, e, url); !strings.Contains(got, " 200 ") {
		t.Errorf("GET /small: %q, want status 200", got)
	}
}
