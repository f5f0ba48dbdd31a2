// The real-client scenarios: http-down, http-up, wrk, ab.

package compare

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tcpwheel/tcpwheel/internal/bytesrv"
)

// Every stack serves the same HTTP server (package bytesrv, the one `tcpwheel
// run` serves) on its own listener, and the clients are real programs run
// inside the run's namespace, on the kernel's side: curl, wrk, ApacheBench.
// The kernel stack serves it on kernel sockets, and its clients connect over
// the namespace's loopback: the ceiling.

// httpPort is the HTTP server's port on every stack.
const httpPort = 8080

// clientTool is a client program and the Debian package that has it.
type clientTool struct{ name, pkg string }

var (
	toolCurl = clientTool{"curl", "curl"}
	toolWrk  = clientTool{"wrk", "wrk"}
	toolAB   = clientTool{"ab", "apache2-utils"}
)

// ClientTools lists the client programs of the real-client scenarios, each
// with its Debian package ("curl curl", "ab apache2-utils").
func ClientTools() [][2]string {
	var out [][2]string
	for _, t := range []clientTool{toolCurl, toolWrk, toolAB} {
		out = append(out, [2]string{t.name, t.pkg})
	}
	return out
}

// errNoClient is wrapped by a scenario's error when its client program is
// not installed.
var errNoClient = errors.New("client program not installed")

// clientAddresser is a stack whose clients reach it at an address of its own
// (the kernel stack: the namespace's loopback); others are at the bed's
// StackAddr.
type clientAddresser interface{ ClientAddr() netip.Addr }

// httpServer starts the HTTP server on the stack's port (a server child
// serves already: see server_child.go) and returns its URL, as the clients
// reach it, and a function that reads the bytes its /upload read in full.
func (e *runEnv) httpServer() (string, func() (int64, error), error) {
	if c, ok := e.stack.(*childStack); ok {
		return c.url, func() (int64, error) {
			st, err := c.stats()
			return st.Uploaded, err
		}, nil
	}
	ln, err := e.stack.Listen(httpPort)
	if err != nil {
		return "", nil, fmt.Errorf("listen: %w", err)
	}
	ctr := &bytesrv.Counters{}
	srv := newHTTPServer(ctr)
	go srv.Serve(ln)
	e.onClose(func() { srv.Close() })
	host := e.bed.StackAddr
	if ca, ok := e.stack.(clientAddresser); ok {
		host = ca.ClientAddr()
	}
	return "http://" + addrPort(host, httpPort), func() (int64, error) { return ctr.Uploaded.Load(), nil }, nil
}

// newHTTPServer is every stack's HTTP server, counting into ctr.
func newHTTPServer(ctr *bytesrv.Counters) *http.Server {
	return &http.Server{
		Handler:           bytesrv.Handler(ctr),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0), // ab's resets, wrk's closes at its end
	}
}

// clientRun is what a client program printed and the CPU it used.
type clientRun struct {
	out string
	cpu time.Duration // user + system, of the client process
}

// maxClientOutput bounds what is kept of a client's output.
const maxClientOutput = 1 << 20

// client runs tool with args inside the run's namespace, bounded by the run's
// context; a missing program is an error wrapping errNoClient that says
// which package has it.
func (e *runEnv) client(tool clientTool, args ...string) (clientRun, error) {
	if _, err := exec.LookPath(tool.name); err != nil {
		return clientRun{}, fmt.Errorf("%w: %s (install the Debian package %s; scripts/deps.sh does)", errNoClient, tool.name, tool.pkg)
	}
	cmd := e.bed.Command(e.ctx, tool.name, args...)
	var out, errOut limitedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	var r clientRun
	if cmd.ProcessState != nil {
		r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	r.out = out.String()
	if err != nil {
		return r, fmt.Errorf("%s: %w: %s", tool.name, err, strings.TrimSpace(lastLines(errOut.String()+out.String(), 3)))
	}
	return r, nil
}

// limitedBuffer keeps the first maxClientOutput bytes written to it. It
// may be read while a process writes to it (a server child's standard
// error, in an error about it).
type limitedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := maxClientOutput - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// String is what was kept.
func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lastLines returns s's last n lines.
func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(ls[max(len(ls)-n, 0):], " | ")
}

// secondsLeft is the run's time left, in whole seconds, at least 1: the
// clients' own time limits.
func (e *runEnv) secondsLeft() string {
	return strconv.Itoa(max(int(time.Until(e.deadline())/time.Second), 1))
}

// curlFields parses curl's -w "%{size_...} %{time_total} %{http_code}".
func curlFields(out string) (size int64, secs float64, code int, err error) {
	f := strings.Fields(out)
	if len(f) != 3 {
		return 0, 0, 0, fmt.Errorf("curl printed %q, want size, time and status", out)
	}
	sz, err1 := strconv.ParseFloat(f[0], 64)
	secs, err2 := strconv.ParseFloat(f[1], 64)
	code, err3 := strconv.Atoi(f[2])
	if err := errors.Join(err1, err2, err3); err != nil {
		return 0, 0, 0, fmt.Errorf("curl printed %q: %w", out, err)
	}
	return int64(sz), secs, code, nil
}

// bulkClientMetrics records a transfer of n bytes in secs: its rate, and
// the CPU time per GB of the server's process (the stack, the HTTP server
// and the kernel work done in their system calls: serverCPU) and of the
// client.
func (e *runEnv) bulkClientMetrics(n int64, secs float64, cpu time.Duration, r clientRun) {
	m := e.res.Metrics
	gb := float64(n) / 1e9
	m["transfer_ms"] = secs * 1e3
	if secs > 0 {
		m["mbytes_per_s"] = float64(n) / 1e6 / secs
		m["throughput_mbps"] = float64(n) * 8 / 1e6 / secs
	}
	m["cpu_ms"] = ms(cpu)
	m["cpu_s_per_gb"] = cpu.Seconds() / gb
	m["client_cpu_s_per_gb"] = r.cpu.Seconds() / gb
}

// scenarioHTTPDown: curl downloads -http-size bytes from GET /bytes/N.
func scenarioHTTPDown(e *runEnv) error {
	n := e.cfg.HTTPSize
	return e.curlTransfer(n, "size_download", func(url string) []string {
		return []string{url + "/bytes/" + strconv.FormatInt(n, 10)}
	}, nil)
}

// scenarioHTTPUp: curl uploads -http-size bytes with PUT /upload, from the
// invocation's upload file (Run makes it once, with data: see
// makeUploadFile), without waiting for a 100 Continue.
func scenarioHTTPUp(e *runEnv) error {
	n := e.cfg.HTTPSize
	name := e.cfg.uploadFile
	if name == "" { // a run outside Run (tests)
		up, err := makeUploadFile(n)
		if err != nil {
			return err
		}
		defer up.Close()
		name = up.Name()
	}
	return e.curlTransfer(n, "size_upload", func(url string) []string {
		return []string{"-H", "Expect:", "-T", name, url + "/upload"}
	}, func(uploaded func() (int64, error)) error {
		got, err := uploaded()
		if err != nil {
			return err
		}
		if got != n {
			return fmt.Errorf("%w: the server read %d bytes, want %d", errShort, got, n)
		}
		return nil
	})
}

// uploadDataMax is the largest upload file makeUploadFile fills with data;
// a larger one is sparse (its holes read as zeros), so that a huge
// -http-size does not take as much memory.
const uploadDataMax = 1 << 30

// uploadFile is what http-up's curl reads: a file in memory (memfd), named
// by its descriptor's path in /proc, which curl opens.
type uploadFile struct{ f *os.File }

// Name is the path curl opens: /proc/PID/fd/FD of this process, valid
// until Close.
func (u uploadFile) Name() string {
	return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), u.f.Fd())
}

// Close frees the file's memory.
func (u uploadFile) Close() error { return u.f.Close() }

// makeUploadFile writes n bytes of data (a 1 MiB pseudo-random block,
// repeated) to a new file in memory (memfd_create), which curl reads as it
// would read a file just written from the page cache. In memory, not on the
// disk: until 2026-11-25 it was a file in the temporary directory, and on
// the VM the project measures on, whose balloon driver hands page cache
// back to the host at 2-3 MB/s, a file unread for a few minutes was out of
// the cache again; the run that read it first (tcpwheel's first http-up in
// a full invocation, 3.5 minutes after Run made the file) took 3.4x as
// long, with curl at a full core reading the disk and refaulting the pages.
// A memfd's pages (shmem) stay. (Until 2026-11-24 the file was sparse: each
// run's curl then zeroed 200 MB of new page cache as it read the holes, 43%
// of its CPU, and curl, at one full core, bounded the upload's rate.)
func makeUploadFile(n int64) (uploadFile, error) {
	fd, err := unix.MemfdCreate("tcpwheel-upload", unix.MFD_CLOEXEC)
	if err != nil {
		return uploadFile{}, fmt.Errorf("the upload file: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "tcpwheel-upload")
	if n > uploadDataMax {
		err = f.Truncate(n)
		n = 0
	}
	block := make([]byte, 1<<20)
	rand.NewChaCha8([32]byte{'t', 'c', 'p', 'w', 'h', 'e', 'e', 'l'}).Read(block)
	for left := n; left > 0 && err == nil; left -= int64(len(block)) {
		_, err = f.Write(block[:min(left, int64(len(block)))])
	}
	if err != nil {
		f.Close()
		return uploadFile{}, fmt.Errorf("the upload file: %w", err)
	}
	return uploadFile{f}, nil
}

// curlTransfer starts the HTTP server, runs curl with args(url) and checks
// that it moved n bytes (curl's figure named size, and check's, if not nil)
// with status 200; then records the transfer's metrics.
func (e *runEnv) curlTransfer(n int64, size string, args func(url string) []string, check func(uploaded func() (int64, error)) error) error {
	url, uploaded, err := e.httpServer()
	if err != nil {
		return err
	}
	var r clientRun
	cpu, err := e.serverCPUOver(func() (err error) {
		r, err = e.client(toolCurl, append([]string{"-sS", "-o", "/dev/null", "--max-time", e.secondsLeft(),
			"-w", "%{" + size + "} %{time_total} %{http_code}"}, args(url)...)...)
		return err
	})
	if err != nil {
		return err
	}
	got, secs, code, err := curlFields(r.out)
	switch {
	case err != nil:
		return err
	case code != http.StatusOK:
		return fmt.Errorf("curl: HTTP status %d", code)
	case got != n:
		return fmt.Errorf("%w: curl moved %d bytes, want %d", errShort, got, n)
	}
	if check != nil {
		if err := check(uploaded); err != nil {
			return err
		}
	}
	e.bulkClientMetrics(n, secs, cpu, r)
	return nil
}

// scenarioHTTPPar: one curl downloads -http-size in -http-streams parallel
// transfers of -http-size/-http-streams bytes each (curl -Z), each on its
// own connection: aggregate MB/s over the wall time of the whole (measured
// here, around the curl process) and CPU per GB. Issue 15's "8 parallel
// streams on 2 loops" is this case's rate with two loops over one.
func scenarioHTTPPar(e *runEnv) error {
	url, _, err := e.httpServer()
	if err != nil {
		return err
	}
	k := e.cfg.HTTPStreams
	each := max(e.cfg.HTTPSize/int64(k), 1)
	args := []string{"-sS", "-Z", "--parallel-immediate", "--parallel-max", strconv.Itoa(k), "--max-time", e.secondsLeft(),
		"-w", "%{size_download} %{http_code}\n"}
	for range k {
		args = append(args, "-o", "/dev/null", url+"/bytes/"+strconv.FormatInt(each, 10))
	}
	var r clientRun
	var wall time.Duration
	cpu, err := e.serverCPUOver(func() (err error) {
		t0 := time.Now()
		r, err = e.client(toolCurl, args...)
		wall = time.Since(t0)
		return err
	})
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if len(lines) != k {
		return fmt.Errorf("curl reported %d transfers, want %d: %q", len(lines), k, lastLines(r.out, 3))
	}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 2 || f[0] != strconv.FormatInt(each, 10) || f[1] != "200" {
			return fmt.Errorf("%w: a transfer ended with %q, want %d bytes and status 200", errShort, l, each)
		}
	}
	e.bulkClientMetrics(each*int64(k), wall.Seconds(), cpu, r)
	e.res.Metrics["streams"] = float64(k)
	return nil
}

// wrk's output.
var (
	wrkRate    = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkTotal   = regexp.MustCompile(`(\d+) requests in`)
	wrkLatency = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([0-9.]+)(us|ms|s)\s*$`)
	wrkSocket  = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
	wrkNon2xx  = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
)

// parseWrk reads requests/s, the total, p50 and p99 latency (ms) and the
// errors (socket errors and non-2xx responses) from wrk --latency's output.
func parseWrk(out string) (rate float64, total int64, p50, p99 float64, errs int64, err error) {
	m := wrkRate.FindStringSubmatch(out)
	t := wrkTotal.FindStringSubmatch(out)
	if m == nil || t == nil {
		return 0, 0, 0, 0, 0, fmt.Errorf("wrk printed no rate: %q", lastLines(out, 3))
	}
	rate, _ = strconv.ParseFloat(m[1], 64)
	total, _ = strconv.ParseInt(t[1], 10, 64)
	lat := map[string]float64{}
	for _, l := range wrkLatency.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(l[2], 64)
		lat[l[1]] = v * map[string]float64{"us": 1e-3, "ms": 1, "s": 1e3}[l[3]]
	}
	if len(lat) != 2 {
		return 0, 0, 0, 0, 0, fmt.Errorf("wrk printed no latency distribution: %q", lastLines(out, 3))
	}
	if s := wrkSocket.FindStringSubmatch(out); s != nil {
		for _, f := range s[1:] {
			k, _ := strconv.ParseInt(f, 10, 64)
			errs += k
		}
	}
	if s := wrkNon2xx.FindStringSubmatch(out); s != nil {
		k, _ := strconv.ParseInt(s[1], 10, 64)
		errs += k
	}
	return rate, total, lat["50"], lat["99"], errs, nil
}

// scenarioWrk: wrk keeps -wrk-conns connections busy with GET /small for
// -wrk-time, on as many threads as there are CPUs (at most one per
// connection).
func scenarioWrk(e *runEnv) error {
	url, _, err := e.httpServer()
	if err != nil {
		return err
	}
	conns := e.cfg.WrkConns
	threads := min(conns, runtime.NumCPU())
	secs := max(int(e.cfg.WrkTime.Round(time.Second)/time.Second), 1)
	var r clientRun
	cpu, err := e.serverCPUOver(func() (err error) {
		r, err = e.client(toolWrk, "-t", strconv.Itoa(threads), "-c", strconv.Itoa(conns), "-d", strconv.Itoa(secs)+"s",
			"--timeout", "2s", "--latency", url+"/small")
		return err
	})
	if err != nil {
		return err
	}
	rate, total, p50, p99, errs, err := parseWrk(r.out)
	if err != nil {
		return err
	}
	if total == 0 {
		return errors.New("wrk: no request completed")
	}
	m := e.res.Metrics
	m["requests_per_s"] = rate
	m["latency_p50_ms"] = p50
	m["latency_p99_ms"] = p99
	m["http_errors"] = float64(errs)
	m["cpu_ms"] = ms(cpu)
	m["cpu_us_per_request"] = float64(cpu.Microseconds()) / float64(total)
	m["client_cpu_us_per_request"] = float64(r.cpu.Microseconds()) / float64(total)
	return nil
}

// ab's output.
var (
	abRate     = regexp.MustCompile(`Requests per second:\s+([0-9.]+)`)
	abComplete = regexp.MustCompile(`Complete requests:\s+(\d+)`)
	abFailed   = regexp.MustCompile(`Failed requests:\s+(\d+)`)
	abNon2xx   = regexp.MustCompile(`Non-2xx responses:\s+(\d+)`)
	abP99      = regexp.MustCompile(`(?m)^\s+99%\s+(\d+)`)
)

// parseAB reads requests/s (one connection each), the complete and failed
// requests (non-2xx responses count as failed) and the p99 time (ms) from
// ab's output.
func parseAB(out string) (rate float64, complete, failed int64, p99 float64, err error) {
	m, c, f, p := abRate.FindStringSubmatch(out), abComplete.FindStringSubmatch(out), abFailed.FindStringSubmatch(out), abP99.FindStringSubmatch(out)
	if m == nil || c == nil || f == nil || p == nil {
		return 0, 0, 0, 0, fmt.Errorf("ab printed no results: %q", lastLines(out, 3))
	}
	rate, _ = strconv.ParseFloat(m[1], 64)
	complete, _ = strconv.ParseInt(c[1], 10, 64)
	failed, _ = strconv.ParseInt(f[1], 10, 64)
	if s := abNon2xx.FindStringSubmatch(out); s != nil {
		k, _ := strconv.ParseInt(s[1], 10, 64)
		failed += k
	}
	p99, _ = strconv.ParseFloat(p[1], 64)
	return rate, complete, failed, p99, nil
}

// scenarioAB: ApacheBench makes -ab-requests requests of GET /small,
// -ab-conns at a time, each on a new connection (HTTP/1.0, no keep-alive:
// the server closes each).
func scenarioAB(e *runEnv) error {
	url, _, err := e.httpServer()
	if err != nil {
		return err
	}
	n := e.cfg.ABRequests
	s0 := e.stackCounters()
	// -t before -n: a -t after it would set the count to 50000.
	var r clientRun
	cpu, err := e.serverCPUOver(func() (err error) {
		r, err = e.client(toolAB, "-q", "-r", "-t", e.secondsLeft(), "-n", strconv.Itoa(n), "-c", strconv.Itoa(e.cfg.ABConns),
			"-s", "10", url+"/small")
		return err
	})
	if err != nil {
		return err
	}
	rate, complete, failed, p99, err := parseAB(r.out)
	if err != nil {
		return err
	}
	if complete == 0 {
		return errors.New("ab: no request completed")
	}
	m := e.res.Metrics
	m["conns_per_s"] = rate
	m["ab_failed"] = float64(failed)
	m["ab_complete"] = float64(complete)
	m["latency_p99_ms"] = p99
	m["cpu_ms"] = ms(cpu)
	m["cpu_us_per_request"] = float64(cpu.Microseconds()) / float64(complete)
	m["client_cpu_us_per_request"] = float64(r.cpu.Microseconds()) / float64(complete)
	if s1 := e.stackCounters(); s0.ok && s1.ok {
		recordABRetransmits(m, s0, s1)
	}
	return nil
}

// recordABRetransmits records what the stack resent over an ab run, by
// kind, from its own counters: where the duplicates the kernel reports
// (kernel_dup_segments) come from.
func recordABRetransmits(m map[string]float64, s0, s1 burstSnapshot) {
	m["ab_stack_retx"] = float64(s1.retrans - s0.retrans)
	for _, k := range []string{"stack_tlp_probes", "stack_rto_events", "stack_synack_retx"} {
		if v, ok := s1.more[k]; ok { // tcpwheel's kinds
			m["ab_"+k] = v - s0.more[k]
		}
	}
}
