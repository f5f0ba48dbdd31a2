// burst's child processes: the clients, and the kernel stack's echo server.

package compare

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A burst's connections are spread over child processes, since one process
// may hold no more descriptors than its RLIMIT_NOFILE, and raising its hard
// limit takes CAP_SYS_RESOURCE, which a container may lack. The child is
// this same executable (the tcpwheel binary, or a test binary of a package
// that links this one), started inside the run's namespace with
// burstChildEnv set: this package's init runs it in that role, and it never
// returns to main. Each speaks a line protocol on its standard input and
// output.
//
// A client (burstClient ADDR:PORT FIRST COUNT) makes COUNT non-blocking
// sockets, says "ready", waits for "go", then connects them all at once,
// each sending its message and reading the echo (burstConn); it prints a
// line per connection ("r INDEX CONNECT_NS ISSUED_UNIX_NS END_UNIX_NS KIND
// MESSAGE", KIND
// ok, timeout or error) and "done", keeps every connection open until its
// input ends, then closes them and exits.
//
// A server (burstServer ADDR:PORT BACKLOG) listens there with SO_REUSEPORT
// and that backlog, says "ready", and echoes every connection it accepts
// until its input ends.
const (
	burstChildEnv = "TCPWHEEL_COMPARE_BURST_CHILD"
	burstClient   = "client"
	burstServer   = "server"
)

// burstPerChild is the most connections one child holds, one descriptor
// each (a variable for the smoke test).
var burstPerChild = 10000

// errBurstTimeout is wrapped by the error of a connection that took more
// than burstLimit to connect, or then to echo.
var errBurstTimeout = errors.New("timed out")

func init() {
	switch os.Getenv(burstChildEnv) {
	case "":
		return
	case burstClient:
		os.Exit(runBurstClient(os.Args[1:], os.Stdin, os.Stdout))
	case burstServer:
		os.Exit(runBurstServer(os.Args[1:], os.Stdin, os.Stdout))
	case serveChild:
		os.Exit(runServeChild(os.Args[1:], os.Stdin, os.Stdout))
	default:
		fmt.Fprintf(os.Stderr, "%s=%q: want %s, %s or %s\n", burstChildEnv, os.Getenv(burstChildEnv), burstClient, burstServer, serveChild)
		os.Exit(2)
	}
}

// burstChild is a child process, started and ready.
type burstChild struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *limitedBuffer
	once   sync.Once
	err    error
}

// startBurstChild starts this executable as a child of the given role, in
// the run's namespace, and waits for its "ready". The run's end kills it.
func (e *runEnv) startBurstChild(role string, args ...string) (*burstChild, error) {
	c, err := e.startChild(role, nil, args...)
	if err != nil {
		return nil, err
	}
	line, err := c.stdout.ReadString('\n')
	if err != nil || line != "ready\n" {
		return nil, fmt.Errorf("burst %s: said %q, want ready: %v %s", role, line, err, c.failure())
	}
	return c, nil
}

// startChild starts this executable as a child of the given role, in the
// run's namespace, with files as its descriptors 3, 4, ... The run's end
// kills it.
func (e *runEnv) startChild(role string, files []*os.File, args ...string) (*burstChild, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("burst %s: %w", role, err)
	}
	cmd := e.bed.Command(e.ctx, exe, args...)
	cmd.Env = append(os.Environ(), burstChildEnv+"="+role)
	c := &burstChild{cmd: cmd, stderr: &limitedBuffer{}}
	cmd.Stderr = c.stderr
	cmd.ExtraFiles = files
	cmd.WaitDelay = time.Second
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c.stdout = bufio.NewReader(out)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("burst %s: %w", role, err)
	}
	e.onClose(func() {
		c.stdin.Close()
		cmd.Process.Kill()
		c.wait()
	})
	return c, nil
}

// failure is what the child wrote to its standard error, for an error.
func (c *burstChild) failure() string {
	return strings.TrimSpace(lastLines(c.stderr.String(), 3))
}

// wait waits for the child to exit.
func (c *burstChild) wait() error {
	c.once.Do(func() {
		if err := c.cmd.Wait(); err != nil {
			c.err = fmt.Errorf("burst child: %w %s", err, c.failure())
		}
	})
	return c.err
}

// results reads a client's results into rs, by connection index, until its
// "done".
func (c *burstChild) results(rs []connResult) error {
	for {
		line, err := c.stdout.ReadString('\n')
		if err != nil {
			return fmt.Errorf("burst client: %w %s", err, c.failure())
		}
		if line == "done\n" {
			return nil
		}
		i, r, err := parseBurstResult(line)
		if err != nil || i < 0 || i >= len(rs) {
			return fmt.Errorf("burst client: %q: %v", line, err)
		}
		rs[i] = r
	}
}

// formatBurstResult is a client's line for connection i.
func formatBurstResult(i int, r connResult) string {
	kind, msg := "ok", "-"
	if r.err != nil {
		kind, msg = "error", strconv.Quote(r.err.Error())
		if errors.Is(r.err, os.ErrDeadlineExceeded) || errors.Is(r.err, errBurstTimeout) {
			kind = "timeout"
		}
	}
	var issued, end int64
	if !r.issued.IsZero() {
		issued = r.issued.UnixNano()
	}
	if !r.end.IsZero() {
		end = r.end.UnixNano()
	}
	return fmt.Sprintf("r %d %d %d %d %s %s\n", i, r.connect.Nanoseconds(), issued, end, kind, msg)
}

// parseBurstResult reads formatBurstResult's line.
func parseBurstResult(line string) (int, connResult, error) {
	f := strings.SplitN(strings.TrimSuffix(line, "\n"), " ", 7)
	if len(f) != 7 || f[0] != "r" {
		return 0, connResult{}, errors.New("not a result line")
	}
	i, err1 := strconv.Atoi(f[1])
	c, err2 := strconv.ParseInt(f[2], 10, 64)
	issued, err3 := strconv.ParseInt(f[3], 10, 64)
	end, err4 := strconv.ParseInt(f[4], 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return 0, connResult{}, err
	}
	r := connResult{connect: time.Duration(c)}
	if issued != 0 {
		r.issued = time.Unix(0, issued)
	}
	if end != 0 {
		r.end = time.Unix(0, end)
	}
	switch kind, msg := f[5], f[6]; kind {
	case "ok":
	case "timeout", "error":
		text, err := strconv.Unquote(msg)
		if err != nil {
			return 0, connResult{}, err
		}
		r.err = errors.New(text)
		if kind == "timeout" {
			r.err = fmt.Errorf("%w: %s", errBurstTimeout, text)
		}
	default:
		return 0, connResult{}, fmt.Errorf("unknown kind %q", kind)
	}
	return i, r, nil
}

// runBurstClient is a client child (see burstChildEnv); it returns its exit
// status.
func runBurstClient(args []string, in io.Reader, out io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "burst client:", err)
		return 1
	}
	if len(args) != 3 {
		return fail(fmt.Errorf("args %q: want ADDR:PORT FIRST COUNT", args))
	}
	target, err1 := netip.ParseAddrPort(args[0])
	first, err2 := strconv.Atoi(args[1])
	n, err3 := strconv.Atoi(args[2])
	if err := errors.Join(err1, err2, err3); err != nil || !target.Addr().Is4() || n < 1 || n > MaxBurstConns {
		return fail(fmt.Errorf("args %q: %v", args, err))
	}
	files := make([]*os.File, 0, n)
	defer closeFiles(files)
	for range n {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fail(fmt.Errorf("socket %d of %d: %w", len(files)+1, n, err))
		}
		files = append(files, os.NewFile(uintptr(fd), "burst"))
	}
	r := bufio.NewReader(in)
	fmt.Fprint(out, "ready\n")
	if line, err := r.ReadString('\n'); err != nil || line != "go\n" {
		return fail(fmt.Errorf("read %q, want go: %v", line, err))
	}
	sa := unix.SockaddrInet4{Port: int(target.Port()), Addr: target.Addr().As4()}
	rs := make([]connResult, n)
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs[i] = burstConn(f, sa, first+i)
		}()
	}
	wg.Wait()
	w := bufio.NewWriter(out)
	for i, res := range rs {
		w.WriteString(formatBurstResult(first+i, res))
	}
	w.WriteString("done\n")
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	io.Copy(io.Discard, r) // every connection open until the parent says
	return 0
}

// closeFiles closes every file of fs.
func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// burstConn is one client: a non-blocking connect to sa, then its message,
// echoed, each within burstLimit. It leaves f open. sa is a copy of its own:
// connect(2) writes its raw form into it.
func burstConn(f *os.File, sa unix.SockaddrInet4, i int) connResult {
	rc, err := f.SyscallConn()
	if err != nil {
		return connResult{err: err}
	}
	t0 := time.Now()
	f.SetDeadline(t0.Add(burstLimit))
	var cerr error
	if err := rc.Control(func(fd uintptr) { cerr = unix.Connect(int(fd), &sa) }); err != nil {
		return connResult{issued: t0, err: err}
	}
	if cerr == unix.EINPROGRESS {
		// As package net does: wait until writable, then SO_ERROR, then
		// getpeername (a wake-up that was not the connection's is ignored).
		cerr = nil
		if err := rc.Write(func(fd uintptr) bool {
			so, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
			switch {
			case err != nil:
				cerr = err
			case so == int(unix.EINPROGRESS) || so == int(unix.EALREADY) || so == int(unix.EINTR):
				return false
			case so != 0:
				cerr = syscall.Errno(so)
			default:
				if _, err := unix.Getpeername(int(fd)); err == unix.ENOTCONN {
					return false
				} else if err != nil {
					cerr = err
				}
			}
			return true
		}); err != nil {
			cerr = err
		}
	}
	if cerr != nil {
		return connResult{issued: t0, err: fmt.Errorf("connection %d: connect: %w", i, cerr)}
	}
	r := connResult{issued: t0, connect: time.Since(t0)}
	f.SetDeadline(time.Now().Add(burstLimit))
	msg := fmt.Appendf(nil, burstMsgFormat, i%100000)
	if _, err := f.Write(msg); err != nil {
		return connResult{err: fmt.Errorf("connection %d: write: %w", i, err)}
	}
	back := make([]byte, len(msg))
	if _, err := io.ReadFull(f, back); err != nil {
		return connResult{err: fmt.Errorf("connection %d: read: %w", i, err)}
	}
	if !bytes.Equal(back, msg) {
		return connResult{err: fmt.Errorf("connection %d: the echo differs: %q", i, back)}
	}
	r.end = time.Now()
	return r
}

// runBurstServer is a server child (see burstChildEnv); it returns its exit
// status.
func runBurstServer(args []string, in io.Reader, out io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "burst server:", err)
		return 1
	}
	if len(args) != 2 {
		return fail(fmt.Errorf("args %q: want ADDR:PORT BACKLOG", args))
	}
	addr, err1 := netip.ParseAddrPort(args[0])
	backlog, err2 := strconv.Atoi(args[1])
	if err := errors.Join(err1, err2); err != nil || !addr.Addr().Is4() || backlog < 1 {
		return fail(fmt.Errorf("args %q: %v", args, err))
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	f := os.NewFile(uintptr(fd), "listener")
	for _, o := range []int{unix.SO_REUSEADDR, unix.SO_REUSEPORT} {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, o, 1); err != nil {
			return fail(err)
		}
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().As4()}); err != nil {
		return fail(fmt.Errorf("bind: %w", err))
	}
	if err := unix.Listen(fd, backlog); err != nil {
		return fail(fmt.Errorf("listen: %w", err))
	}
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return fail(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(2 * burstLimit))
				echo(c)
			}()
		}
	}()
	fmt.Fprint(out, "ready\n")
	io.Copy(io.Discard, in) // until the parent says
	return 0
}
