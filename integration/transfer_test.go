package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"

	"github.com/tcpwheel/tcpwheel/loop"
	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tun/impair"
	"github.com/tcpwheel/tcpwheel/tun/netns"
)

// Sizes of the transfers. Under -race the stack is several times slower; the
// lossy transfer, whose time goes mostly into waiting for RTOs (about 4 s a
// MB at 3% loss), moves less data then, to keep the package within its
// time budget.
func sizes() (curl, echo, lossEcho, perConn int) {
	if raceEnabled {
		return 50 << 20, 20 << 20, 5 << 20, 64 << 10
	}
	return 50 << 20, 20 << 20, 20 << 20, 64 << 10
}

// byteStream is the body of /bytes/N: N bytes of ChaCha8 output from a fixed
// seed, so that the test knows their hash without keeping them.
func byteStream(n int64) io.Reader {
	return io.LimitReader(rand.NewChaCha8(seedBytes(42)), n)
}

// TestHTTPCurl: the stack serves net/http, the kernel's curl fetches a large
// body, and its SHA-256 matches.
func TestHTTPCurl(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed (scripts/deps.sh installs it)")
	}
	e := newEnv(t, envOptions{Subnet: 1})
	ln := e.listen(t, 80)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /bytes/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.PathValue("n"), 10, 64)
		if err != nil || n < 0 {
			http.Error(w, "bad size", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		io.Copy(w, byteStream(n))
	})
	srv := &http.Server{Handler: mux}
	var wg sync.WaitGroup
	wg.Go(func() { srv.Serve(ln) })
	t.Cleanup(func() { srv.Close(); wg.Wait() })

	size, _, _, _ := sizes()
	want := sha256.New()
	io.Copy(want, byteStream(int64(size)))

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	url := fmt.Sprintf("http://%s/bytes/%d", e.stackAddr(80), size)
	cmd := e.command(ctx, "curl", "-sS", "--fail", "--max-time", "110", "-o", "-", url)
	got := sha256.New()
	var n countWriter
	var stderr bytes.Buffer
	cmd.Stdout = io.MultiWriter(got, &n)
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("curl %s: %v; stderr: %s", url, err, stderr.String())
	}
	if int(n) != size {
		t.Fatalf("curl got %d bytes, want %d", n, size)
	}
	if !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		t.Fatalf("curl's body has SHA-256 %x, want %x", got.Sum(nil), want.Sum(nil))
	}
	st := e.Stack.Stats()
	t.Logf("curl fetched %d MB in %v: %.1f MB/s; stack: %d segments out, %d retransmitted",
		size>>20, elapsed.Round(time.Millisecond), mbps(int64(size), elapsed), st.SegmentsOut, st.TCP.SegsRetransmitted)
	e.checkNoResets(t)
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

// TestEchoFromKernel: a kernel client sends random data through an echo
// server on the stack and gets it back intact.
func TestEchoFromKernel(t *testing.T) {
	e := newEnv(t, envOptions{Subnet: 2})
	echoServer(t, e.listen(t, 7))
	_, size, _, _ := sizes()
	data := randomBytes(2, size)
	c, err := e.kernelDial(7, 5*time.Second)
	if err != nil {
		t.Fatalf("kernel dial: %v", err)
	}
	elapsed := echoIntact(t, c, data)
	st := e.Stack.Stats()
	t.Logf("echoed %d MB in %v (%.1f MB/s each way); %d segments retransmitted", size>>20, elapsed.Round(time.Millisecond),
		mbps(int64(size), elapsed), st.TCP.SegsRetransmitted)
	e.checkNoResets(t)
}

// TestDialKernel: the stack dials a kernel listener, data flows both ways at
// once, then both sides close.
func TestDialKernel(t *testing.T) {
	e := newEnv(t, envOptions{Subnet: 3, TCP: tcp.Config{TimeWait: 200 * time.Millisecond}})
	ln := e.kernelListen(t, 8080, 0)
	accepted := acceptOne(ln)
	c := e.dial(t, 8080)
	k := waitAccept(t, accepted, 5*time.Second).(*net.TCPConn)
	if got, want := k.RemoteAddr().String(), c.LocalAddr().String(); got != want {
		t.Errorf("kernel sees the peer as %s, the stack's conn is %s", got, want)
	}

	up := randomBytes(3, 2<<20)   // stack to kernel
	down := randomBytes(4, 3<<20) // kernel to stack
	type result struct {
		sum [32]byte
		n   int64
		err error
	}
	kernelDone := make(chan result, 1)
	go func() { // the kernel: read everything while sending its part, then close
		werr := make(chan error, 1)
		go func() {
			_, err := k.Write(down)
			if err == nil {
				err = k.CloseWrite()
			}
			werr <- err
		}()
		h := sha256.New()
		n, err := io.Copy(h, k)
		if e := <-werr; err == nil {
			err = e
		}
		var r result
		copy(r.sum[:], h.Sum(nil))
		r.n, r.err = n, err
		k.Close()
		kernelDone <- r
	}()

	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(up)
		if err == nil {
			err = c.CloseWrite()
		}
		werr <- err
	}()
	h := sha256.New()
	n, err := io.Copy(h, c) // io.Copy stops at io.EOF: the kernel's FIN
	if err != nil {
		t.Fatalf("stack read: %v after %d bytes", err, n)
	}
	if err := <-werr; err != nil {
		t.Fatalf("stack write: %v", err)
	}
	if sum := [32]byte(h.Sum(nil)); n != int64(len(down)) || sum != sha256.Sum256(down) {
		t.Errorf("stack received %d bytes (SHA-256 %x), want %d (%x)", n, sum, len(down), sha256.Sum256(down))
	}
	r := <-kernelDone
	if r.err != nil {
		t.Fatalf("kernel side: %v after %d bytes", r.err, r.n)
	}
	if r.n != int64(len(up)) || r.sum != sha256.Sum256(up) {
		t.Errorf("kernel received %d bytes (SHA-256 %x), want %d (%x)", r.n, r.sum, len(up), sha256.Sum256(up))
	}
	if err := c.Close(); err != nil {
		t.Errorf("stack close: %v", err)
	}
	// Both FINs are acknowledged; whichever side's FIN went first waits in
	// TIME-WAIT (200 ms here), then the stack's table is empty.
	if !waitUntil(5*time.Second, func() bool { return e.Stack.Stats().Connections == 0 }) {
		t.Errorf("after both closes the stack still has %d connections (state %v)", e.Stack.Stats().Connections, c.Info().State)
	}
	e.checkNoResets(t)
}

// TestConcurrentConnections: 200 kernel clients are connected to the stack's
// echo server at once; all data comes back intact and no RST is sent or
// received.
func TestConcurrentConnections(t *testing.T) {
	const conns = 200
	// A backlog above the number of clients: the accept queue must not
	// overflow (see TestAcceptQueueOverflow for what happens when it does).
	e := newEnv(t, envOptions{Subnet: 4, Backlog: 2 * conns})
	echoServer(t, e.listen(t, 7))
	_, _, _, per := sizes()
	var connected, wg sync.WaitGroup
	connected.Add(conns)
	allConnected := make(chan struct{})
	errs := make(chan error, conns)
	start := time.Now()
	for i := range conns {
		wg.Go(func() {
			c, err := e.kernelDial(7, 20*time.Second)
			connected.Done()
			if err != nil {
				errs <- fmt.Errorf("conn %d: dial: %w", i, err)
				return
			}
			<-allConnected // all 200 are established before any data moves
			data := randomBytes(uint64(100+i), per)
			sum, n, err := echoThrough(c, data)
			switch {
			case err != nil:
				errs <- fmt.Errorf("conn %d: %w after %d bytes", i, err, n)
			case n != int64(per) || sum != sha256.Sum256(data):
				errs <- fmt.Errorf("conn %d: got %d bytes back, corrupted: %v", i, n, sum != sha256.Sum256(data))
			}
		})
	}
	connected.Wait()
	dialTime := time.Since(start)
	// The kernel's connect returns when it sends the final ACK; the stack
	// counts the connection once its loop has handled that ACK, or, if the
	// burst overflowed the TUN queue and the ACK was lost, once its SYN-ACK
	// retransmission (1 s) draws another. Either way all of them get there.
	if !waitUntil(20*time.Second, func() bool { return e.Stack.Stats().Connections == conns }) {
		t.Errorf("with %d clients connected the stack has %d connections", conns, e.Stack.Stats().Connections)
	}
	close(allConnected)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	elapsed := time.Since(start)
	st := e.Stack.Stats()
	t.Logf("%d connections dialed in %v; %d KB echoed on each, all done in %v",
		conns, dialTime.Round(time.Millisecond), per>>10, elapsed.Round(time.Millisecond))
	t.Logf("stack: %d segments out, %d retransmitted (%d RTO events, %d TLPs, %d fast/RACK); %d device write errors; %d turns held their expiry for input, %d full input batches of %d",
		st.SegmentsOut, st.TCP.SegsRetransmitted, st.TCP.RTOEvents, st.TCP.TLPProbes, st.TCP.FastRetransmits, st.Drops.DeviceWrite, st.Wheel.DeferredExpiries, st.Input.Full, st.Input.Batches)
	if kc, err := e.Bed.KernelCounters(); err == nil {
		t.Logf("kernel: %d segments in, %d out, %d retransmitted; %d duplicates of ours seen (TCPDSACKOldSent); link drops %d in, %d out",
			kc["Tcp.InSegs"], kc["Tcp.OutSegs"], kc["Tcp.RetransSegs"], kc["TcpExt.TCPDSACKOldSent"], kc["link.rx_dropped"], kc["link.tx_dropped"])
	}
	// The link is lossless and the TUN's queue holds the whole burst, so a
	// retransmission is spurious: a timer that fired while the ACK that
	// stops it waited in the queue behind the burst (issue 11). The loop
	// holds expiry back until the queue is drained; what is left is the odd
	// tail-loss probe that races the kernel's delayed ACK.
	// The bound on held expiries must cover a full TUN queue, or a burst
	// that fills it would still see timers fire behind it.
	if covered := st.Input.Max * loop.MaxDeferredTurns; st.Input.Max == 64 && covered < netns.DefaultTxQueueLen {
		t.Errorf("the loop holds expiry for %d batches of %d packets, %d, less than the TUN queue's %d",
			loop.MaxDeferredTurns, st.Input.Max, covered, netns.DefaultTxQueueLen)
	}
	if st.Drops.DeviceWrite != 0 {
		t.Errorf("%d packets the device failed to write", st.Drops.DeviceWrite)
	}
	if st.TCP.SegsRetransmitted*100 >= st.SegmentsOut {
		t.Errorf("%d of %d segments retransmitted on a lossless link, want under 1%%", st.TCP.SegsRetransmitted, st.SegmentsOut)
	}
	e.checkNoResets(t)
	if st.PacketsIn != st.SegmentsIn {
		t.Errorf("stack counted %d packets in but %d segments, with drops %+v", st.PacketsIn, st.SegmentsIn, st.Drops)
	}
}

// TestAcceptQueueOverflow: handshakes that complete while the accept queue is
// full must not be reset. Linux (tcp_abort_on_overflow=0) drops the final ACK
// and keeps the connection half-open, so the client retransmits until the
// application accepts; clients see no error.
func TestAcceptQueueOverflow(t *testing.T) {
	const backlog, clients = 4, 8
	e := newEnv(t, envOptions{Subnet: 16, Backlog: backlog})
	rsts := e.watch(impair.Egress, func(s segInfo) bool { return s.TCP && s.has(header.TCPFlagRst) })
	ln := e.listen(t, 7)
	var ks []*net.TCPConn
	var dialErrs []error
	for i := range clients { // nobody accepts yet
		k, err := e.kernelDial(7, 10*time.Second)
		if err != nil {
			dialErrs = append(dialErrs, fmt.Errorf("client %d: dial: %w", i, err))
			continue
		}
		ks = append(ks, k)
	}
	time.Sleep(100 * time.Millisecond)
	sent := len(rsts.records())
	st := e.Stack.Stats()
	counted := st.ResetsSent + st.TCP.ResetsSent
	t.Logf("%d clients dialed with a backlog of %d and no Accept: %d dial errors (%v), %d RSTs on the wire, %d counted",
		clients, backlog, len(dialErrs), errors.Join(dialErrs...), sent, counted)
	if sent > 0 {
		t.Errorf("a full accept queue reset completed handshakes: %d RSTs for %d clients with a backlog of %d; want the final ACKs dropped, as Linux does",
			sent, clients, backlog)
	}
	if counted != uint64(sent) {
		t.Errorf("%d RSTs went out but the stack's counters say %d", sent, counted)
	}
	for _, err := range dialErrs {
		t.Error(err)
	}
	echoServer(t, ln)
	for i, k := range ks {
		k.SetDeadline(time.Now().Add(10 * time.Second))
		msg := []byte(fmt.Sprintf("client %d", i))
		if sum, n, err := echoThrough(k, msg); err != nil || sum != sha256.Sum256(msg) {
			t.Errorf("client %d: echo: %v after %d bytes", i, err, n)
		}
	}
}

// TestLoss: 3% random loss in both directions; the echoed data is intact and
// the stack had to retransmit.
func TestLoss(t *testing.T) {
	e := newEnv(t, envOptions{Subnet: 5, Seed: 20260905, EgressLoss: 0.03, IngressLoss: 0.03})
	echoServer(t, e.listen(t, 7))
	_, _, size, _ := sizes()
	data := randomBytes(5, size)
	c, err := e.kernelDial(7, 30*time.Second) // the handshake may lose packets too
	if err != nil {
		t.Fatalf("kernel dial: %v", err)
	}
	elapsed := echoIntact(t, c, data)
	st := e.Stack.Stats()
	is := e.Imp.Stats()
	t.Logf("echoed %d MB through 3%% loss in %v (%.2f MB/s); impair dropped %d/%d egress, %d/%d ingress",
		size>>20, elapsed.Round(time.Millisecond), mbps(int64(size), elapsed),
		is.EgressDropped, is.EgressDropped+is.EgressPassed, is.IngressDropped, is.IngressDropped+is.IngressPassed)
	t.Logf("stack: %d segments retransmitted (%d KB), %d RTO events, %d fast retransmits, %d dup ACKs in, %d out-of-order segments in",
		st.TCP.SegsRetransmitted, st.TCP.BytesRetrans>>10, st.TCP.RTOEvents, st.TCP.FastRetransmits, st.TCP.DupAcksIn, st.TCP.OutOfOrderSegs)
	if is.EgressDropped == 0 || is.IngressDropped == 0 {
		t.Errorf("impair dropped %d egress and %d ingress packets; want some of each", is.EgressDropped, is.IngressDropped)
	}
	if st.TCP.SegsRetransmitted == 0 || st.TCP.RTOEvents+st.TCP.FastRetransmits == 0 {
		t.Errorf("no retransmissions counted (%d segments, %d RTO events, %d fast retransmits) despite %d dropped egress packets",
			st.TCP.SegsRetransmitted, st.TCP.RTOEvents, st.TCP.FastRetransmits, is.EgressDropped)
	}
	e.checkNoResets(t)
}

// echoIntact echoes data through c and fails the test unless all of it comes
// back intact; it returns how long the echo took.
func echoIntact(t *testing.T, c *net.TCPConn, data []byte) time.Duration {
	t.Helper()
	start := time.Now()
	sum, n, err := echoThrough(c, data)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("echo: %v after %d bytes", err, n)
	}
	if n != int64(len(data)) || sum != sha256.Sum256(data) {
		t.Fatalf("echo returned %d bytes with SHA-256 %x; want %d bytes, %x", n, sum, len(data), sha256.Sum256(data))
	}
	return elapsed
}
