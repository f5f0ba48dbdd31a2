//go:build linux

package integration

// Issue 12's goal "100 of 100 fresh recordings replay exactly": the stack,
// recording (stack.Config.Record), talks to the Linux kernel over a real TUN
// in a fresh namespace, and the flight recording is then replayed on the
// manual loop (replay.Replay), which must send every connection's segments
// byte for byte and at the recorded nanosecond (Report.Err() == nil).
//
//	go test ./integration -run TestRecordingReplaysExactly            # each scenario once
//	TCPWHEEL_RECORDINGS=100 TCPWHEEL_RECORDINGS_TABLE=results/replay-100-DATE.txt \
//	    go test ./integration -run TestRecordingReplaysExactly -timeout 30m
//
// Recordings that do not replay exactly are kept under the system's
// temporary directory (the test logs where), for `tcpwheel replay FILE`.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/tcpwheel/tcpwheel/stack/record"
	"github.com/tcpwheel/tcpwheel/stack/replay"
	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tun/impair"
)

const (
	recSubnet  = 50
	recPort    = 80
	recPeer    = 9000             // the kernel's listener, for the stack's Dial
	recTimeout = 45 * time.Second // bounds every step of a scenario
	recSize    = 300 << 10        // curl's download and upload
	recSettle  = 200 * time.Millisecond
)

// recScenario is one kind of traffic to record.
type recScenario struct {
	name  string
	conns int // the recording holds at least this many connections
	// needs is the kernel-side program the scenario runs, if any.
	needs string
	ipv6  bool // over IPv6 (envOptions.Over6)
	tcp   tcp.Config
	// run drives the traffic and checks that it completed; seed varies
	// the data.
	run func(t *testing.T, e *env, seed uint64) error
}

// recLosses are the random loss rates, each way, every scenario runs at
// (recKeepalive at the first only).
var recLosses = []float64{0, 0.02}

var recScenarios = []recScenario{
	{name: "http-ab", conns: 40, needs: "ab", run: recHTTPAB},
	{name: "curl-download", conns: 1, needs: "curl", run: recCurlDownload},
	{name: "curl-upload", conns: 1, needs: "curl", run: recCurlUpload},
	{name: "echo", conns: 3, run: recEcho},
	{name: "dial", conns: 1, run: recDial},
	{name: "echo-ipv6", conns: 3, ipv6: true, run: recEcho},
	{name: "dial-ipv6", conns: 1, ipv6: true, run: recDial},
	{name: "tail-loss", conns: 1, run: recTailLoss},
}

// recKeepalive idles a connection through keepalive probes, which the
// kernel answers.
var recKeepalive = recScenario{name: "keepalive", conns: 1, run: recKeepaliveRun}

// recVariant is a scenario at a loss rate.
type recVariant struct {
	sc   *recScenario
	loss float64
}

func (v recVariant) String() string { return fmt.Sprintf("%s/loss=%g%%", v.sc.name, v.loss*100) }

func recVariants() []recVariant {
	var vs []recVariant
	for i := range recScenarios {
		for _, l := range recLosses {
			vs = append(vs, recVariant{&recScenarios[i], l})
		}
	}
	return append(vs, recVariant{&recKeepalive, 0})
}

// recCounts are the counts of one recording and its replay (runs 1), or
// summed over several.
type recCounts struct {
	runs, exact, packets, conns int
	// The stack's counters: segments retransmitted, RTO expiries (SYN
	// retransmissions included), tail-loss probes, fast (RACK included)
	// retransmissions, keepalive probes.
	rtx, rtos, tlps, fast, keepalives uint64
}

func (c *recCounts) add(o recCounts) {
	c.runs += o.runs
	c.exact += o.exact
	c.packets += o.packets
	c.conns += o.conns
	c.rtx += o.rtx
	c.rtos += o.rtos
	c.tlps += o.tlps
	c.fast += o.fast
	c.keepalives += o.keepalives
}

// row is c as the table's cells after the scenario and loss.
func (c recCounts) row() string {
	return fmt.Sprintf("%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t", c.runs, c.exact, c.packets, c.conns,
		c.rtx, c.rtos, c.tlps, c.fast, c.keepalives)
}

// TestRecordingReplaysExactly records each scenario live and replays the
// recording, which must match exactly, every connection. With
// TCPWHEEL_RECORDINGS=N it makes N fresh recordings in all (fresh namespace
// and impairment seed each), cycling through the scenarios, and with
// TCPWHEEL_RECORDINGS_TABLE=FILE writes the counts there.
func TestRecordingReplaysExactly(t *testing.T) {
	vs := recVariants()
	total := len(vs)
	if v := os.Getenv("TCPWHEEL_RECORDINGS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			t.Fatalf("TCPWHEEL_RECORDINGS=%q: want a count from 1 to 10000", v)
		}
		total = n
	}
	rows := make([]recCounts, len(vs))
	base := uint64(time.Now().UnixNano())
	for i := range total {
		k := i % len(vs)
		v := vs[k]
		seed := base + uint64(i)
		t.Run(fmt.Sprintf("%s/%d", v, i/len(vs)+1), func(t *testing.T) {
			o := recCounts{runs: 1}
			defer func() { // also after a Fatal: the run counts, not exact
				if !t.Skipped() {
					rows[k].add(o)
				}
			}()
			recordAndReplay(t, v, seed, &o)
		})
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tloss\truns\texact\tpackets\tconnections\tretransmitted\tRTOs\tTLPs\tfast rtx\tkeepalives\t")
	var sum recCounts
	for k, v := range vs {
		if r := rows[k]; r.runs > 0 {
			fmt.Fprintf(tw, "%s\t%g%%\t%s\n", v.sc.name, v.loss*100, r.row())
			sum.add(r)
		}
	}
	fmt.Fprintf(tw, "all\t\t%s\n", sum.row())
	tw.Flush()
	t.Logf("fresh recordings that replayed exactly (packets and connections summed over the runs):\n%s", b.String())
	if path := os.Getenv("TCPWHEEL_RECORDINGS_TABLE"); path != "" {
		head := fmt.Sprintf("# TestRecordingReplaysExactly, TCPWHEEL_RECORDINGS=%d, %s\n"+
			"# each run: a fresh namespace and impairment seed, the stack recording (stack.Config.Record)\n"+
			"# against the kernel; exact = replay.Replay's Report.Err() == nil (every connection, every\n"+
			"# segment byte for byte and to the nanosecond). packets: handled + sent; the counts are summed\n"+
			"# over the runs; retransmitted, RTOs (SYNs included), TLPs, fast rtx (RACK included) and\n"+
			"# keepalives are the stack's tcp.Counters.\n",
			total, time.Now().UTC().Format(time.RFC3339))
		if err := os.WriteFile(path, []byte(head+b.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
	if sum.exact != sum.runs {
		t.Errorf("%d of %d fresh recordings replayed exactly", sum.exact, sum.runs)
	}
}

// recordAndReplay records one run of v and replays it. A scenario that does
// not complete fails the test; so does a recording that does not replay
// exactly, which is kept for `tcpwheel replay`.
func recordAndReplay(t *testing.T, v recVariant, seed uint64, o *recCounts) {
	if v.sc.needs != "" {
		if _, err := exec.LookPath(v.sc.needs); err != nil {
			t.Skipf("%s is not installed (scripts/deps.sh installs it)", v.sc.needs)
		}
	}
	cfg := v.sc.tcp
	if cfg.TimeWait == 0 {
		cfg.TimeWait = recSettle // every connection is gone before the stack closes
	}
	var buf bytes.Buffer
	e := newEnv(t, envOptions{Subnet: recSubnet, IPv6: v.sc.ipv6, Over6: v.sc.ipv6, TCP: cfg, Backlog: 64, Record: &buf,
		Seed: seed, EgressLoss: v.loss, IngressLoss: v.loss})
	// keep saves the recording for `tcpwheel replay`, once the stack is closed.
	keep := func() string {
		dir, err := os.MkdirTemp("", "tcpwheel-recording-")
		if err != nil {
			return err.Error()
		}
		path := filepath.Join(dir, strings.ReplaceAll(v.String(), "/", "_")+".pcapng")
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			return err.Error()
		}
		return path
	}
	if err := v.sc.run(t, e, seed); err != nil {
		e.Stack.Close()
		t.Fatalf("%v (seed %d): %v (recording kept as %s)", v, seed, err, keep())
	}
	if !waitUntil(recTimeout, func() bool { return e.Stack.Stats().Connections == 0 }) {
		t.Errorf("%v: connections still open after %v: %d", v, recTimeout, e.Stack.Stats().Connections)
	}
	st := e.Stack.Stats().TCP
	o.rtx, o.rtos, o.tlps = st.SegsRetransmitted, st.RTOEvents+st.SYNRetransmits, st.TLPProbes
	o.fast, o.keepalives = st.FastRetransmits, st.KeepaliveProbes
	e.Stack.Close()
	if err := e.Stack.RecordErr(); err != nil {
		t.Fatalf("recording: %v", err)
	}
	rec, err := record.Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("reading the recording back: %v (kept as %s)", err, keep())
	}
	for i := range rec.Events {
		if k := rec.Events[i].Kind; k == record.In || k == record.Out {
			o.packets++
		}
	}
	o.conns = len(replay.Conns(rec))
	if o.conns < v.sc.conns {
		t.Errorf("%v: the recording holds %d connections, want at least %d (kept as %s)", v, o.conns, v.sc.conns, keep())
	}
	rep, err := replay.Replay(rec, replay.ReplayOptions{})
	if err != nil {
		t.Fatalf("replay: %v (kept as %s)", err, keep())
	}
	if err := rep.Err(); err != nil {
		t.Errorf("%v (seed %d): %d packets; %v\nkept as %s", v, seed, o.packets, err, keep())
		return
	}
	if !t.Failed() {
		o.exact = 1
	}
	recCheckSensitive(t, rec, keep)
}

// recCheckSensitive replays rec with one clock reading moved by a
// nanosecond (the last send time a packet was stamped with), and wants the
// replay to see it: the comparison is exact, not lenient. (Not every
// reading is a packet's: a segment the stack then does not send leaves
// one without.)
func recCheckSensitive(t *testing.T, rec *record.Recording, keep func() string) {
	evs := append([]record.Event(nil), rec.Events...)
	for i := len(evs) - 2; i >= 0; i-- {
		if evs[i].Kind == record.SendTime && evs[i+1].Kind == record.Out && evs[i+1].T == evs[i].T {
			evs[i].T++
			rep, err := replay.Replay(&record.Recording{Header: rec.Header, Events: evs}, replay.ReplayOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Err() == nil {
				t.Errorf("a send time moved by 1 ns (event #%d) replayed as exact (kept as %s)", evs[i].Index, keep())
			}
			return
		}
	}
	t.Error("no packet of the recording was stamped with a send time")
}

// recServeHTTP serves, on the stack's port 80: GET /bytes/{n} (n bytes of
// the seed's stream) and POST /upload (reads the body, answers its length
// and SHA-256 in hex).
func recServeHTTP(t *testing.T, e *env, seed uint64) {
	ln := e.listen(t, recPort)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /bytes/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.PathValue("n"))
		if err != nil || n < 0 || n > 1<<24 {
			http.Error(w, "bad size", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.Write(randomBytes(seed, n))
	})
	mux.HandleFunc("POST /upload", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%d %x", n, h.Sum(nil))
	})
	srv := &http.Server{Handler: mux, ReadTimeout: recTimeout, WriteTimeout: recTimeout}
	var wg sync.WaitGroup
	wg.Go(func() { srv.Serve(ln) })
	t.Cleanup(func() { srv.Close(); wg.Wait() })
}

// recCommand runs a program in the namespace and returns its standard
// output; standard error goes into the error.
func recCommand(t *testing.T, e *env, stdin io.Reader, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(t.Context(), recTimeout)
	defer cancel()
	cmd := e.command(ctx, name, args...)
	var out, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &stderr
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%s %s: %v; stderr: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out.Bytes(), nil
}

var (
	abComplete = regexp.MustCompile(`Complete requests:\s+(\d+)`)
	abFailed   = regexp.MustCompile(`Failed requests:\s+(\d+)`)
)

// recHTTPAB: ab -n 40 -c 10 fetches 4 KB pages.
func recHTTPAB(t *testing.T, e *env, seed uint64) error {
	recServeHTTP(t, e, seed)
	out, err := recCommand(t, e, nil, "ab", "-q", "-n", "40", "-c", "10", "-s", "30",
		fmt.Sprintf("http://%s/bytes/4096", e.stackAddr(recPort)))
	if err != nil {
		return err
	}
	c, f := abComplete.FindSubmatch(out), abFailed.FindSubmatch(out)
	if c == nil || f == nil || string(c[1]) != "40" || string(f[1]) != "0" {
		return fmt.Errorf("ab: want 40 complete requests and 0 failed:\n%s", out)
	}
	return nil
}

// recCurlDownload: curl fetches recSize bytes, which must be the stream's.
func recCurlDownload(t *testing.T, e *env, seed uint64) error {
	recServeHTTP(t, e, seed)
	out, err := recCommand(t, e, nil, "curl", "-sS", "--fail", "--max-time", "40", "-o", "-",
		fmt.Sprintf("http://%s/bytes/%d", e.stackAddr(recPort), recSize))
	if err != nil {
		return err
	}
	if !bytes.Equal(out, randomBytes(seed, recSize)) {
		return fmt.Errorf("curl downloaded %d bytes, not the %d sent", len(out), recSize)
	}
	return nil
}

// recCurlUpload: curl posts recSize bytes, which the handler must have read
// whole.
func recCurlUpload(t *testing.T, e *env, seed uint64) error {
	recServeHTTP(t, e, seed)
	body := randomBytes(seed^0x5a5a, recSize)
	out, err := recCommand(t, e, bytes.NewReader(body), "curl", "-sS", "--fail", "--max-time", "40",
		"-H", "Expect:", "--data-binary", "@-", fmt.Sprintf("http://%s/upload", e.stackAddr(recPort)))
	if err != nil {
		return err
	}
	if want := fmt.Sprintf("%d %x", recSize, sha256.Sum256(body)); string(out) != want {
		return fmt.Errorf("upload: the handler read %q, want %q", out, want)
	}
	return nil
}

// recEcho: three kernel sockets in the namespace each send 64 KB to the
// stack's echo server at once and read it back.
func recEcho(t *testing.T, e *env, seed uint64) error {
	echoServer(t, e.listen(t, recPort))
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := range 3 {
		wg.Go(func() {
			c, err := e.kernelDial(recPort, recTimeout)
			if err != nil {
				errs <- err
				return
			}
			c.SetDeadline(time.Now().Add(recTimeout))
			data := randomBytes(seed+uint64(i), 64<<10)
			sum, n, err := echoThrough(c, data)
			switch {
			case err != nil:
				errs <- fmt.Errorf("echo %d: %w", i, err)
			case n != int64(len(data)) || sum != sha256.Sum256(data):
				errs <- fmt.Errorf("echo %d: %d bytes came back, not the %d sent", i, n, len(data))
			}
			c.Close()
		})
	}
	wg.Wait()
	close(errs)
	return errors.Join(collect(errs)...)
}

func collect(ch <-chan error) []error {
	var errs []error
	for err := range ch {
		errs = append(errs, err)
	}
	return errs
}

// recDial: the stack dials a kernel server in the namespace, sends it 100 KB
// and half-closes; the server reads to the end, sends 100 KB back and
// closes.
func recDial(t *testing.T, e *env, seed uint64) error {
	ln := e.kernelListen(t, recPeer, 0)
	up, down := randomBytes(seed, 100<<10), randomBytes(seed+1, 100<<10)
	srvErr := make(chan error, 1)
	go func() {
		srvErr <- func() error {
			ln.SetDeadline(time.Now().Add(recTimeout))
			c, err := ln.Accept()
			if err != nil {
				return err
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(recTimeout))
			got, err := io.ReadAll(c)
			if err != nil {
				return fmt.Errorf("kernel server: %w", err)
			}
			if !bytes.Equal(got, up) {
				return fmt.Errorf("kernel server got %d bytes, not the %d sent", len(got), len(up))
			}
			_, err = c.Write(down)
			return err
		}()
	}()
	c := e.dial(t, recPeer)
	c.SetDeadline(time.Now().Add(recTimeout))
	werr := make(chan error, 1)
	go func() { werr <- writeCloseWrite(c, up) }()
	got, err := io.ReadAll(c)
	if err := errors.Join(err, <-werr, <-srvErr); err != nil {
		return err
	}
	if !bytes.Equal(got, down) {
		return fmt.Errorf("the stack got %d bytes, not the %d sent", len(got), len(down))
	}
	return c.Close()
}

// recKeepaliveRun: a kernel socket sends the stack 10 bytes, which it echoes;
// the connection then idles with keepalive on (100 ms idle and interval)
// until three probes have gone out and been answered, and is still good for
// another echo.
func recKeepaliveRun(t *testing.T, e *env, seed uint64) error {
	k, s, err := recConnect(t, e)
	if err != nil {
		return err
	}
	if err := s.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: 100 * time.Millisecond,
		Interval: 100 * time.Millisecond, Count: 3}); err != nil {
		return err
	}
	msg := randomBytes(seed, 10)
	echo := func() error {
		if _, err := k.Write(msg); err != nil {
			return err
		}
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(s, buf); err != nil {
			return err
		}
		if _, err := s.Write(buf); err != nil {
			return err
		}
		if _, err := io.ReadFull(k, buf); err != nil {
			return err
		}
		if !bytes.Equal(buf, msg) {
			return errors.New("the echo differs")
		}
		return nil
	}
	if err := echo(); err != nil {
		return fmt.Errorf("first echo: %w", err)
	}
	if !waitUntil(recTimeout, func() bool { return s.Info().KeepaliveProbes >= 3 }) {
		return fmt.Errorf("%d keepalive probes after %v, want 3", s.Info().KeepaliveProbes, recTimeout)
	}
	if err := echo(); err != nil {
		return fmt.Errorf("echo after the probes: %w", err)
	}
	k.CloseWrite()
	if _, err := io.ReadAll(s); err != nil {
		return err
	}
	if err := s.Close(); err != nil {
		return err
	}
	_, err = io.ReadAll(k)
	return err
}

// recTailLoss: the stack sends a kernel socket four segments; the last two
// are lost (impair rules, besides the random loss), so a tail-loss probe
// resends the last and RACK, on its SACK, the other (RFC 8985). The kernel
// then closes, and the stack. (The stack's FIN waits for that: sent at
// once, the kernel's answer to it would show the loss before the probe; and
// with one segment in flight the probe waits for a delayed ACK too, and is
// capped at the RTO.)
func recTailLoss(t *testing.T, e *env, seed uint64) error {
	if _, err := e.Imp.AddRule(impair.Rule{Dir: impair.Egress, Match: impair.MatchData, Skip: 2, Count: 2}); err != nil {
		return err
	}
	k, s, err := recConnect(t, e)
	if err != nil {
		return err
	}
	data := randomBytes(seed, 4*1448) // four full segments at MTU 1500, with timestamps
	kerr := make(chan error, 1)
	go func() {
		kerr <- func() error {
			got := make([]byte, len(data))
			if _, err := io.ReadFull(k, got); err != nil {
				return err
			}
			if !bytes.Equal(got, data) {
				return errors.New("the kernel got other bytes than were sent")
			}
			if err := k.CloseWrite(); err != nil {
				return err
			}
			_, err := io.ReadAll(k)
			return err
		}()
	}()
	if _, err := s.Write(data); err != nil {
		return err
	}
	if _, err := io.ReadAll(s); err != nil {
		return err
	}
	if err := errors.Join(s.Close(), <-kerr); err != nil {
		return err
	}
	// Random loss of other packets may repair the tail another way (a lost
	// first segment: RACK resends all on the kernel's ACKs).
	st, imp := e.Stack.Stats().TCP, e.Imp.Stats()
	if st.TLPProbes == 0 && imp.EgressLost+imp.IngressLost == 0 {
		return fmt.Errorf("no tail-loss probe (%d RTOs, %d fast retransmissions)", st.RTOEvents, st.FastRetransmits)
	}
	return nil
}

// recConnect connects a kernel socket to the stack's port 80 and returns
// both ends, with deadlines recTimeout away.
func recConnect(t *testing.T, e *env) (*net.TCPConn, *stack.Conn, error) {
	acc := acceptOne(e.listen(t, recPort))
	k, err := e.kernelDial(recPort, recTimeout)
	if err != nil {
		return nil, nil, err
	}
	k.SetDeadline(time.Now().Add(recTimeout))
	s := waitAccept(t, acc, recTimeout).(*stack.Conn)
	s.SetDeadline(time.Now().Add(recTimeout))
	return k, s, nil
}

// writeCloseWrite writes data on c and half-closes it.
func writeCloseWrite(c *stack.Conn, data []byte) error {
	if _, err := c.Write(data); err != nil {
		return err
	}
	return c.CloseWrite()
}
