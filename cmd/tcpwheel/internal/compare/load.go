// -load: CPU-bound processes beside each run.

package compare

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// hogs are the CPU-bound processes of one run. Each is the leader of its own
// process group, which stop kills whole; each also gets SIGKILL should the
// thread that started it end (PR_SET_PDEATHSIG), so a comparison that is
// itself killed leaves none behind: that thread is locked to a goroutine that
// lives until stop.
type hogs struct {
	pids  []int
	stopc chan struct{}
	done  chan struct{}
	once  sync.Once
}

// startHogs starts n processes running argv; they are killed by stop, or
// after limit at the latest.
func startHogs(n int, argv []string, limit time.Duration) (*hogs, error) {
	if len(argv) == 0 {
		return nil, errors.New("load: empty hog command")
	}
	h := &hogs{stopc: make(chan struct{}), done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // the hogs' parent thread: it must outlive them
		defer runtime.UnlockOSThread()
		defer close(h.done)
		cmds, err := spawnHogs(n, argv)
		h.pids = make([]int, len(cmds))
		for i, c := range cmds {
			h.pids[i] = c.Process.Pid
		}
		started <- err
		if err == nil {
			t := time.NewTimer(limit)
			select {
			case <-h.stopc:
			case <-t.C:
			}
			t.Stop()
		}
		for _, c := range cmds {
			unix.Kill(-c.Process.Pid, unix.SIGKILL)
			c.Wait()
		}
	}()
	if err := <-started; err != nil {
		<-h.done
		return nil, err
	}
	return h, nil
}

// spawnHogs starts n processes of argv, each in a process group of its own;
// on failure, those it started are returned with the error (for the caller
// to kill).
func spawnHogs(n int, argv []string) ([]*exec.Cmd, error) {
	var cmds []*exec.Cmd
	for range n {
		c := exec.Command(argv[0], argv[1:]...)
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			return cmds, fmt.Errorf("load: starting %q: %w", argv, err)
		}
		cmds = append(cmds, c)
	}
	return cmds, nil
}

// stop kills every hog and waits until they are reaped. It is safe on nil.
func (h *hogs) stop() {
	if h == nil {
		return
	}
	h.once.Do(func() { close(h.stopc) })
	<-h.done
}

// hogCommand is cfg's hog command.
func (c *Config) hogCommand() []string {
	if len(c.Hog) == 0 {
		return DefaultHog()
	}
	return c.Hog
}
