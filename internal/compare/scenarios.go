package compare

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/seqnum"

	"github.com/tcpwheel/tcpwheel/internal/compare/segwatch"
)

// scenario describes one scenario of the comparison.
type scenario struct {
	name string
	help string // one line of `tcpwheel compare -h`
	// run runs one case on a runEnv and fills its result's metrics.
	run func(*runEnv) error
	// unwatched: the device chain carries no packet watcher (many-conns
	// measures memory and CPU, which the watcher would add to).
	unwatched bool
	// cases expands the scenario into the cases it reports; nil means one
	// case named after the scenario.
	cases func(cfg Config) []compareCase
}

// scenarios is every scenario, in the order they run. It is never written.
var scenarios = [...]scenario{
	{name: "tail-loss", help: "the last data segment and the FIN are dropped once", run: scenarioTailLoss},
	{name: "backoff", help: "one segment dropped twice: two retransmissions", run: scenarioBackoff},
	{name: "synack-loss", help: "the stack's SYN-ACK dropped once", run: scenarioSYNACKLoss},
	{name: "mid-loss", help: "mid-stream drops in a 2 MB transfer: fast retransmit / RACK", run: scenarioMidLoss},
	{name: "bulk", help: "-bulk-size up and down at each -bulk-loss rate", run: scenarioBulk, cases: bulkCases},
	{name: "keepalive", help: "probe timing, idle 200ms, interval 100ms, count 3", run: scenarioKeepalive},
	{name: "zero-window", help: "zero-window probe timing against a receiver that stops reading", run: scenarioZeroWindow},
	{name: "many-conns", help: "-conns idle connections with keepalive: CPU and memory per connection", run: scenarioManyConns, unwatched: true},
}

// Scenarios returns the names of the scenarios, in the order they run.
func Scenarios() []string {
	names := make([]string, len(scenarios))
	for i := range scenarios {
		names[i] = scenarios[i].name
	}
	return names
}

// ScenarioHelp returns a line per scenario, its name and what it does, as
// `tcpwheel compare -h` lists them.
func ScenarioHelp() string {
	var b strings.Builder
	for i := range scenarios {
		fmt.Fprintf(&b, "  %-12s %s\n", scenarios[i].name, scenarios[i].help)
	}
	return b.String()
}

// scenarioNamed returns the scenario called name.
func scenarioNamed(name string) (*scenario, bool) {
	for i := range scenarios {
		if scenarios[i].name == name {
			return &scenarios[i], true
		}
	}
	return nil, false
}

// compareCase is one row group of the report: a scenario with its parameters
// (bulk expands to one case per direction and loss rate).
type compareCase struct {
	name     string // e.g. "tail-loss", "bulk-up-1%"
	scenario string
	loss     float64 // random loss, both directions
	up       bool    // bulk: stack -> kernel
}

// expandCases lists the cases of cfg's scenarios, in the order they run.
func expandCases(cfg Config) []compareCase {
	var cs []compareCase
	for _, name := range cfg.Scenarios {
		sc, ok := scenarioNamed(name)
		switch {
		case !ok:
			continue
		case sc.cases != nil:
			cs = append(cs, sc.cases(cfg)...)
		default:
			cs = append(cs, compareCase{name: name, scenario: name})
		}
	}
	return cs
}

// bulkCases: bulk up, then down, at each loss rate.
func bulkCases(cfg Config) []compareCase {
	var cs []compareCase
	for _, up := range []bool{true, false} {
		dir := "down"
		if up {
			dir = "up"
		}
		for _, p := range cfg.BulkLoss {
			cs = append(cs, compareCase{name: fmt.Sprintf("bulk-%s-%g%%", dir, p*100), scenario: "bulk", loss: p, up: up})
		}
	}
	return cs
}

// The ports of the scenarios: the kernel's (or the stack's, when it listens).
const cmpPort = 5001

// Scenario parameters.
const (
	tailBytes       = 10000 // fits in the initial window: one burst, then the tail
	backoffWarm     = 4000
	backoffBytes    = 1000
	midLossBytes    = 2 << 20
	keepIdle        = 200 * time.Millisecond
	keepInterval    = 100 * time.Millisecond
	keepCount       = 3
	zwpRcvBuf       = 4096 // the kernel doubles it
	zwpBytes        = 2 << 20
	zwpProbes       = 3 // probes observed before the receiver reads again
	manyKeepIdle    = time.Second
	manyKeepIntvl   = time.Second
	manyDialWorkers = 32
)

// midLossDrops are the original data segments (counted from 1) that mid-loss
// drops once.
var midLossDrops = map[int]bool{100: true, 300: true, 301: true, 600: true}

// pattern fills b with a repeating pattern.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

// writeN writes n bytes to c in chunks.
func writeN(c net.Conn, n int64) error {
	buf := pattern(64 << 10)
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := c.Write(buf[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// readResult is what a reader got, and when its stream ended.
type readResult struct {
	n   int64
	at  time.Duration
	err error
}

// readToEOF reads c until EOF in a goroutine.
func (e *runEnv) readToEOF(c net.Conn) <-chan readResult {
	ch := make(chan readResult, 1)
	go func() {
		n, err := io.Copy(io.Discard, c)
		ch <- readResult{n: n, at: e.now(), err: err}
	}()
	return ch
}

// acceptAndReadToEOF accepts one connection on ln and reads it to EOF.
func (e *runEnv) acceptAndReadToEOF(ln net.Listener) <-chan readResult {
	ch := make(chan readResult, 1)
	go func() {
		c, err := e.accept(ln)
		if err != nil {
			ch <- readResult{err: err}
			return
		}
		ch <- <-e.readToEOF(c)
	}()
	return ch
}

// wait waits for a reader's result, within the run's time.
func (e *runEnv) wait(ch <-chan readResult, want int64) (readResult, error) {
	select {
	case r := <-ch:
		if r.err != nil {
			return r, fmt.Errorf("reader: %w after %d bytes", r.err, r.n)
		}
		if r.n != want {
			return r, fmt.Errorf("%w: %d bytes, want %d", errShort, r.n, want)
		}
		return r, nil
	case <-e.ctx.Done():
		return readResult{}, e.ctx.Err()
	}
}

// sleep sleeps for d or until the run ends.
func (e *runEnv) sleep(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-e.ctx.Done():
		return e.ctx.Err()
	}
}

// waitFor polls cond every millisecond for up to d.
func (e *runEnv) waitFor(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) || e.ctx.Err() != nil {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// issWatch learns the stack's initial sequence number of each flow from its SYN,
// inside a drop decision.
type issWatch struct {
	mu  sync.Mutex
	iss map[string]seqnum.Value // by the stack's address:port
}

func (w *issWatch) see(t tcpInfo) (seqnum.Value, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.iss == nil {
		w.iss = map[string]seqnum.Value{}
	}
	k := t.src.String()
	if t.has(header.TCPFlagSyn) {
		w.iss[k] = seqnum.Value(t.seq)
	}
	v, ok := w.iss[k]
	return v, ok
}

// contains reports whether the segment carries the byte at sequence number v.
func (t tcpInfo) contains(v seqnum.Value) bool {
	s := seqnum.Value(t.seq)
	return t.payload > 0 && s.LessThanEq(v) && v.LessThan(s.Add(seqnum.Size(t.payload)))
}

// scenarioTailLoss: the stack sends 10 kB and its FIN; the segment with the
// last byte and the FIN are dropped once each. Recovery is from the dropped
// segment's first send to the kernel reading EOF.
func scenarioTailLoss(e *runEnv) error {
	ln, err := e.kernelListen(cmpPort, 0)
	if err != nil {
		return err
	}
	got := e.acceptAndReadToEOF(ln)
	var iss issWatch
	var droppedData, droppedFIN atomic.Bool
	var dropAt atomic.Int64
	e.setDrop(func(pkt []byte) bool {
		t, ok := parseTCPPacket(pkt)
		if !ok || t.dst.Port() != cmpPort {
			return false
		}
		base, ok := iss.see(t)
		if !ok {
			return false
		}
		drop := false
		if t.contains(base.Add(tailBytes)) && !droppedData.Swap(true) { // the last byte: ISS+1+(n-1)
			dropAt.Store(int64(e.now()))
			drop = true
		}
		if t.has(header.TCPFlagFin) && !droppedFIN.Swap(true) {
			drop = true
		}
		return drop
	}, nil)
	c, err := e.stackDial(cmpPort)
	if err != nil {
		return err
	}
	e.track(c)
	var r readResult
	err = e.measure(func() error {
		t0 := e.now()
		if _, err := c.Write(pattern(tailBytes)); err != nil {
			return err
		}
		if err := closeWrite(c); err != nil {
			return err
		}
		var err error
		if r, err = e.wait(got, tailBytes); err != nil {
			return err
		}
		e.res.Metrics["transfer_ms"] = ms(r.at - t0)
		return nil
	})
	if err != nil {
		return err
	}
	if !droppedData.Load() || !droppedFIN.Load() {
		return errors.New("the last data segment or the FIN was never dropped")
	}
	e.res.Metrics["recovery_ms"] = ms(r.at - time.Duration(dropAt.Load()))
	return nil
}

func closeWrite(c net.Conn) error {
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok {
		return fmt.Errorf("%T has no CloseWrite", c)
	}
	return cw.CloseWrite()
}

// scenarioBackoff: after a warm-up, one segment is dropped twice. Recovery is
// from its first send to the kernel reading it.
func scenarioBackoff(e *runEnv) error {
	ln, err := e.kernelListen(cmpPort, 0)
	if err != nil {
		return err
	}
	type step struct {
		at  time.Duration
		err error
	}
	steps := make(chan step, 2)
	go func() {
		kc, err := e.accept(ln)
		if err != nil {
			steps <- step{err: err}
			return
		}
		buf := make([]byte, backoffWarm+backoffBytes)
		for _, n := range []int{backoffWarm, backoffBytes} {
			_, err := io.ReadFull(kc, buf[:n])
			steps <- step{at: e.now(), err: err}
			if err != nil {
				return
			}
		}
	}()
	next := func() (time.Duration, error) {
		select {
		case s := <-steps:
			return s.at, s.err
		case <-e.ctx.Done():
			return 0, e.ctx.Err()
		}
	}
	var iss issWatch
	var armed atomic.Bool
	var drops atomic.Int32
	var dropAt atomic.Int64
	e.setDrop(func(pkt []byte) bool {
		t, ok := parseTCPPacket(pkt)
		if !ok || t.dst.Port() != cmpPort {
			return false
		}
		base, ok := iss.see(t) // learns the ISS from the SYN
		if !ok || !armed.Load() || !t.contains(base.Add(1+backoffWarm)) {
			return false
		}
		if n := drops.Add(1); n <= 2 {
			if n == 1 {
				dropAt.Store(int64(e.now()))
			}
			return true
		}
		return false
	}, nil)
	c, err := e.stackDial(cmpPort)
	if err != nil {
		return err
	}
	e.track(c)
	if _, err := c.Write(pattern(backoffWarm)); err != nil {
		return err
	}
	if _, err := next(); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if err := e.sleep(50 * time.Millisecond); err != nil { // every ACK in, the RTO settled
		return err
	}
	armed.Store(true)
	return e.measure(func() error {
		if _, err := c.Write(pattern(backoffBytes)); err != nil {
			return err
		}
		at, err := next()
		if err != nil {
			return err
		}
		if drops.Load() < 2 {
			return fmt.Errorf("the segment was dropped %d times, want 2", drops.Load())
		}
		e.res.Metrics["recovery_ms"] = ms(at - time.Duration(dropAt.Load()))
		return nil
	})
}

// scenarioSYNACKLoss: the kernel connects to the stack; the stack's first
// SYN-ACK is dropped, and so are the kernel's SYN retransmissions (so that the
// stack's own SYN-ACK timer, not the kernel's SYN, completes the handshake).
func scenarioSYNACKLoss(e *runEnv) error {
	ln, err := e.stack.Listen(cmpPort)
	if err != nil {
		return err
	}
	e.onClose(func() { ln.Close() })
	var droppedSYNACK atomic.Bool
	var synsMu sync.Mutex
	syns := map[string]uint32{}
	var synDrops atomic.Int32
	e.setDrop(func(pkt []byte) bool {
		t, ok := parseTCPPacket(pkt)
		if !ok || t.src.Port() != cmpPort || !t.has(header.TCPFlagSyn|header.TCPFlagAck) {
			return false
		}
		return !droppedSYNACK.Swap(true)
	}, func(pkt []byte) bool {
		t, ok := parseTCPPacket(pkt)
		if !ok || t.dst.Port() != cmpPort || t.flags&(header.TCPFlagSyn|header.TCPFlagAck) != header.TCPFlagSyn {
			return false
		}
		synsMu.Lock()
		defer synsMu.Unlock()
		k := t.src.String()
		if seq, ok := syns[k]; ok && seq == t.seq && synDrops.Add(1) <= 5 {
			return true // a retransmitted SYN
		}
		syns[k] = t.seq
		return false
	})
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := e.accept(ln)
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	return e.measure(func() error {
		t0 := e.now()
		kc, err := e.kernelDial(cmpPort)
		if err != nil {
			return err
		}
		e.res.Metrics["handshake_ms"] = ms(e.now() - t0)
		var sc net.Conn
		select {
		case sc = <-accepted:
		case <-e.ctx.Done():
			return e.ctx.Err()
		}
		if sc == nil {
			return errors.New("the stack accepted nothing")
		}
		if _, err := kc.Write([]byte("x")); err != nil {
			return err
		}
		if _, err := io.ReadFull(sc, make([]byte, 1)); err != nil {
			return fmt.Errorf("stack read: %w", err)
		}
		if !droppedSYNACK.Load() {
			return errors.New("no SYN-ACK was dropped")
		}
		return nil
	})
}

// scenarioMidLoss: a 2 MB transfer from the stack, with four original data
// segments dropped once each (two of them back to back).
func scenarioMidLoss(e *runEnv) error {
	ln, err := e.kernelListen(cmpPort, 0)
	if err != nil {
		return err
	}
	got := e.acceptAndReadToEOF(ln)
	var mu sync.Mutex
	var high seqnum.Value
	started, originals := false, 0
	var dropped atomic.Int32
	e.setDrop(func(pkt []byte) bool {
		t, ok := parseTCPPacket(pkt)
		if !ok || t.dst.Port() != cmpPort || t.payload == 0 {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		end := seqnum.Value(t.seq).Add(seqnum.Size(t.payload))
		if started && !high.LessThan(end) {
			return false // a retransmission
		}
		started, high = true, end
		originals++
		if midLossDrops[originals] {
			dropped.Add(1)
			return true
		}
		return false
	}, nil)
	return e.bulkUp(got, midLossBytes)
}

// bulkUp sends n bytes from the stack to the kernel's reader got.
func (e *runEnv) bulkUp(got <-chan readResult, n int64) error {
	c, err := e.stackDial(cmpPort)
	if err != nil {
		return err
	}
	e.track(c)
	return e.measure(func() error { return e.sendAndTime(c, "stack", got, n, e.now()) })
}

// sendAndTime writes n bytes on c, half-closes it, waits for the reader got to
// see them all, and records the transfer time and throughput from t0.
func (e *runEnv) sendAndTime(c net.Conn, who string, got <-chan readResult, n int64, t0 time.Duration) error {
	if err := writeN(c, n); err != nil {
		return fmt.Errorf("%s write: %w", who, err)
	}
	if err := closeWrite(c); err != nil {
		return err
	}
	r, err := e.wait(got, n)
	if err != nil {
		return err
	}
	e.res.Metrics["transfer_ms"] = ms(r.at - t0)
	e.res.Metrics["throughput_mbps"] = float64(n) * 8 / (r.at - t0).Seconds() / 1e6
	return nil
}

// scenarioBulk: -bulk-size up (stack to kernel) or down, with random loss in both
// directions.
func scenarioBulk(e *runEnv) error {
	n := e.cfg.BulkSize
	if e.c.up {
		ln, err := e.kernelListen(cmpPort, 0)
		if err != nil {
			return err
		}
		return e.bulkUp(e.acceptAndReadToEOF(ln), n)
	}
	ln, err := e.stack.Listen(cmpPort)
	if err != nil {
		return err
	}
	e.onClose(func() { ln.Close() })
	got := make(chan readResult, 1)
	go func() {
		c, err := e.accept(ln)
		if err != nil {
			got <- readResult{err: err}
			return
		}
		e.track(c)
		got <- <-e.readToEOF(c)
	}()
	return e.measure(func() error {
		t0 := e.now()
		kc, err := e.kernelDial(cmpPort)
		if err != nil {
			return err
		}
		return e.sendAndTime(kc, "kernel", got, n, t0)
	})
}

// probes returns the probe events of the run, in order.
func (e *runEnv) probes() []segwatch.Event {
	var ps []segwatch.Event
	for _, ev := range e.w.Events() {
		if ev.Kind == segwatch.KindProbe {
			ps = append(ps, ev)
		}
	}
	return ps
}

// scenarioKeepalive: keepalive with idle 200ms, interval 100ms, count 3. Two
// probes are answered (each due idle after the last packet); then the kernel's
// packets are dropped, so the next probe comes idle after the last answer and
// the following ones every interval, until the stack gives up.
func scenarioKeepalive(e *runEnv) error {
	ln, err := e.kernelListen(cmpPort, 0)
	if err != nil {
		return err
	}
	go func() {
		kc, err := e.accept(ln)
		if err == nil {
			io.Copy(io.Discard, kc)
		}
	}()
	c, err := e.stackDial(cmpPort)
	if err != nil {
		return err
	}
	e.track(c)
	aborted := make(chan time.Duration, 1)
	go func() {
		c.Read(make([]byte, 1))
		aborted <- e.now()
	}()
	return e.measure(func() error {
		if err := e.stack.SetKeepAlive(c, net.KeepAliveConfig{Enable: true, Idle: keepIdle, Interval: keepInterval, Count: keepCount}); err != nil {
			return err
		}
		if !e.waitFor(10*keepIdle, func() bool { return len(e.probes()) >= 2 }) {
			return fmt.Errorf("%d keepalive probes within %v, want 2", len(e.probes()), 10*keepIdle)
		}
		port := flowOf(c).Local.Port()
		bhAt := e.now()
		e.setDrop(nil, func(pkt []byte) bool {
			t, ok := parseTCPPacket(pkt)
			return ok && t.dst.Port() == port
		})
		var abortAt time.Duration
		select {
		case abortAt = <-aborted:
		case <-time.After(keepIdle + (keepCount+5)*keepInterval + 2*time.Second):
			return errors.New("the stack did not abort the connection after unanswered probes")
		case <-e.ctx.Done():
			return e.ctx.Err()
		}
		ps := e.probes()
		var last time.Duration
		for i, p := range ps {
			want, key := keepIdle, "keepalive_idle_slack_ms"
			if p.At > bhAt && i > 0 && ps[i-1].At > bhAt {
				want, key = keepInterval, "keepalive_interval_slack_ms"
			}
			e.res.addSample(key, ms(p.Gap-want))
			last = p.At
		}
		e.res.Metrics["keepalive_probes"] = float64(len(ps))
		e.res.Metrics["keepalive_abort_after_last_probe_ms"] = ms(abortAt - last)
		return nil
	})
}

// scenarioZeroWindow: the kernel's receiver (a small SO_RCVBUF) stops reading;
// once the stack has sent three zero-window probes, it reads everything.
func scenarioZeroWindow(e *runEnv) error {
	ln, err := e.kernelListen(cmpPort, zwpRcvBuf)
	if err != nil {
		return err
	}
	kconn := make(chan net.Conn, 1)
	go func() {
		kc, err := e.accept(ln)
		if err != nil {
			kconn <- nil
			return
		}
		kconn <- kc
	}()
	c, err := e.stackDial(cmpPort)
	if err != nil {
		return err
	}
	e.track(c)
	var kc net.Conn
	select {
	case kc = <-kconn:
	case <-e.ctx.Done():
		return e.ctx.Err()
	}
	if kc == nil {
		return errors.New("kernel accepted nothing")
	}
	writeErr := make(chan error, 1)
	go func() {
		err := writeN(c, zwpBytes)
		if err == nil {
			err = closeWrite(c)
		}
		writeErr <- err
	}()
	return e.measure(func() error {
		limit := 30 * time.Second
		if !e.waitFor(limit, func() bool { return len(e.probes()) >= zwpProbes }) {
			return fmt.Errorf("%d zero-window probes within %v, want %d", len(e.probes()), limit, zwpProbes)
		}
		t0 := e.now()
		r := <-e.readToEOF(kc)
		if r.err != nil || r.n != zwpBytes {
			return fmt.Errorf("kernel read %d bytes, want %d: %v", r.n, zwpBytes, r.err)
		}
		if err := <-writeErr; err != nil {
			return fmt.Errorf("stack write: %w", err)
		}
		e.res.Metrics["zwp_drain_ms"] = ms(r.at - t0)
		for i, p := range e.probes() {
			e.res.addSample("zwp_gap_ms", ms(p.Gap))
			if i < 3 {
				e.res.Metrics["zwp_gap"+strconv.Itoa(i+1)+"_ms"] = ms(p.Gap)
			}
		}
		return nil
	})
}

// scenarioManyConns: -conns connections from the stack to a kernel listener that
// never accepts them (they wait, established, in its accept queue: no kernel
// socket or goroutine of ours per connection), each with keepalive every second;
// then -hold of idleness. Reports the setup, the heap and goroutines per
// connection, and the CPU time and timers per connection-second while idle.
func scenarioManyConns(e *runEnv) error {
	n := e.cfg.Conns
	var lfd int
	err := e.bed.Do(func() error {
		// somaxconn is per namespace; the backlog must hold every connection.
		if err := os.WriteFile("/proc/sys/net/core/somaxconn", []byte(strconv.Itoa(n+1024)), 0); err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		lfd = fd
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrInet4{Port: cmpPort, Addr: e.bed.KernelAddr.As4()}); err != nil {
			return err
		}
		return unix.Listen(fd, n+1024)
	})
	if lfd > 0 {
		e.onClose(func() { unix.Close(lfd) })
	}
	if err != nil {
		return fmt.Errorf("kernel listen: %w", err)
	}

	conns := make([]net.Conn, n)
	e.onClose(func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	})
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	g0 := runtime.NumGoroutine()
	t0, c0 := e.now(), cpuTime()
	ka := net.KeepAliveConfig{Enable: true, Idle: manyKeepIdle, Interval: manyKeepIntvl, Count: 5}
	var next atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	for range manyDialWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || e.ctx.Err() != nil {
					return
				}
				ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
				c, err := e.stack.Dial(ctx, cmpPort)
				cancel()
				if err == nil {
					err = e.stack.SetKeepAlive(c, ka)
				}
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("connection %d: %w", i, err) })
					next.Store(int64(n))
					if c != nil {
						c.Close()
					}
					return
				}
				conns[i] = c
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if err := e.ctx.Err(); err != nil {
		return err
	}
	e.res.Metrics["setup_ms"] = ms(e.now() - t0)
	e.res.Metrics["setup_cpu_ms"] = ms(cpuTime() - c0)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	heap := float64(m1.HeapInuse+m1.StackInuse) - float64(m0.HeapInuse+m0.StackInuse)
	e.res.Metrics["mem_per_conn_bytes"] = heap / float64(n)
	e.res.Metrics["goroutines_per_conn"] = float64(runtime.NumGoroutine()-g0) / float64(n)

	p0 := e.egressPackets.Load()
	tm0, hasTimers := e.stack.Timers()
	c1 := cpuTime()
	if err := e.sleep(e.cfg.Hold); err != nil {
		return err
	}
	connSec := float64(n) * e.cfg.Hold.Seconds()
	cpu := cpuTime() - c1
	e.res.Metrics["cpu_ms"] = ms(cpu)
	if connSec > 0 {
		e.res.Metrics["idle_cpu_us_per_conn_s"] = float64(cpu.Microseconds()) / connSec
		e.res.Metrics["idle_pkts_out_per_conn_s"] = float64(e.egressPackets.Load()-p0) / connSec
		if tm1, ok := e.stack.Timers(); ok && hasTimers {
			e.res.Metrics["idle_timers_fired_per_conn_s"] = float64(tm1.Fired-tm0.Fired) / connSec
		}
	}
	return nil
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
