// The attack scenario: synflood.

package compare

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/tcpwheel/tcpwheel/internal/testbed"
)

// Flood parameters.
const (
	// legitWithin is the bound on a legitimate connection during a
	// flood: connect and a short exchange.
	legitWithin = time.Second
	// legitLimit is how long a legitimate connect may take before it counts
	// as failed: room for two of the kernel's SYN retransmissions (1 s, 3 s).
	legitLimit = 5 * time.Second
	legitMsg   = "legit 0000" // the exchange: the stack echoes it
)

// scenarioSYNFlood: -flood-syns spoofed SYNs at -flood-rate per second reach
// the stack's listener through the TUN (testbed.SYNFlood: a raw socket of the
// namespace's kernel), while -flood-conns kernel clients, started evenly over
// the flood, connect to the same port and exchange a few bytes. Reports the
// fraction of legitimate connections done within 1 s, their connect latency,
// the process's heap growth over the flood, and the SYN-ACKs and SYN cookies
// the stack sent.
//
// The SYNs come from the kernel's side, not from a device-chain injector in
// user space: that way they cross the real TUN and its queue, as an
// attacker's would, and share that queue with the legitimate SYNs (when the
// stack falls behind, the kernel drops at the queue, flood and legitimate
// alike: "kernel packets dropped at the TUN queue"); and the stack reads
// them on its usual path (tcpwheel's loop reads the TUN directly, which an
// injector above the TUN could only feed by hiding the descriptor and
// forcing the reader goroutine). The cost: the sender's sendto calls, and
// the kernel's work for each SYN, run in this process, beside the stack.
func scenarioSYNFlood(e *runEnv) error {
	ln, err := e.stack.Listen(cmpPort)
	if err != nil {
		return err
	}
	e.onClose(func() { ln.Close() })
	go e.echoServer(ln)
	sa := e.countSYNACKs(e.cfg.FloodSYNs)
	floodTime := time.Duration(e.cfg.FloodSYNs) * time.Second / time.Duration(e.cfg.FloodRate)

	l0 := e.stack.ListenCounts()
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	type floodResult struct {
		r   testbed.SYNFloodResult
		err error
	}
	flooded := make(chan floodResult, 1)
	go func() {
		r, err := e.bed.SYNFlood(e.ctx, testbed.SYNFloodConfig{
			Count: e.cfg.FloodSYNs, Rate: e.cfg.FloodRate, Port: cmpPort, Seed: e.cfg.Seed + uint64(e.run),
		})
		flooded <- floodResult{r, err}
	}()
	legit := e.startLegit(e.cfg.FloodConns, floodTime)
	var fr floodResult
	select {
	case fr = <-flooded:
	case <-e.ctx.Done():
		return e.ctx.Err()
	}
	if fr.err != nil {
		return fr.err
	}
	// What the flood left behind: the half-open state the stack still holds.
	runtime.GC()
	runtime.ReadMemStats(&m1)
	rs := legit.wait()
	l1 := e.stack.ListenCounts()
	if err := e.ctx.Err(); err != nil {
		return err
	}

	m := e.res.Metrics
	m["flood_syns_sent"] = float64(fr.r.Sent)
	m["flood_send_errors"] = float64(fr.r.Errors)
	if fr.r.Elapsed > 0 {
		m["flood_rate_per_s"] = float64(fr.r.Sent) / fr.r.Elapsed.Seconds()
	}
	m["mem_growth_mb"] = (float64(m1.HeapInuse+m1.StackInuse) - float64(m0.HeapInuse+m0.StackInuse)) / 1e6
	within, failed := 0, 0
	var firstErr error
	for _, r := range rs {
		switch {
		case r.err != nil:
			failed++
			if firstErr == nil {
				firstErr = r.err
			}
		case r.total <= legitWithin:
			within++
		}
		if r.err == nil {
			e.res.addSample("legit_connect_ms", ms(r.connect))
		}
	}
	m["legit_within_1s_pct"] = 100 * float64(within) / float64(len(rs))
	m["legit_failed"] = float64(failed)
	sa.record(m)
	m["syn_cookies_sent"] = float64(l1.CookiesSent - l0.CookiesSent)
	m["syn_cookies_valid"] = float64(l1.CookiesValid - l0.CookiesValid)
	m["listen_backlog_drops"] = float64(l1.BacklogDrops - l0.BacklogDrops)
	if failed == len(rs) {
		return fmt.Errorf("no legitimate connection completed: %w", firstErr)
	}
	return nil
}

// echoServer accepts on ln until it is closed; each connection's first
// len(legitMsg) bytes are echoed, then it is closed.
func (e *runEnv) echoServer(ln net.Listener) {
	e.serveConns(ln, func(c net.Conn) { io.CopyN(c, c, int64(len(legitMsg))) })
}

// serveConns accepts on ln until it is closed and runs handle on each
// connection, under the run's deadline, closing it after (and at the run's
// end, if handle is still at it).
func (e *runEnv) serveConns(ln net.Listener, handle func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		e.onClose(func() { c.Close() })
		go func() {
			defer c.Close()
			c.SetDeadline(e.deadline())
			handle(c)
		}()
	}
}

// synackCount counts the SYN-ACKs the stack sends, at the device: to the
// kernel's own clients, and to each spoofed source (by its flood index).
type synackCount struct {
	total, legit atomic.Uint64
	spoofed      []atomic.Uint32
}

// countSYNACKs installs an egress hook that counts SYN-ACKs (dropping
// nothing), for a flood of n SYNs.
func (e *runEnv) countSYNACKs(n int) *synackCount {
	sa := &synackCount{spoofed: make([]atomic.Uint32, n)}
	e.setDrop(func(pkt []byte) bool {
		t, ok := parseTCPPacket(pkt)
		if !ok || t.src.Port() != cmpPort || !t.has(header.TCPFlagSyn|header.TCPFlagAck) {
			return false
		}
		sa.total.Add(1)
		if t.dst.Addr() == e.bed.KernelAddr {
			sa.legit.Add(1)
		} else if i, ok := e.bed.SpoofedIndex(t.dst); ok && i < n {
			sa.spoofed[i].Add(1)
		}
		return false
	}, nil)
	return sa
}

// record puts the counts into m: every SYN-ACK, and those that were
// retransmissions to a spoofed source.
func (sa *synackCount) record(m map[string]float64) {
	var to, distinct uint64
	for i := range sa.spoofed {
		if k := sa.spoofed[i].Load(); k > 0 {
			to += uint64(k)
			distinct++
		}
	}
	m["synacks_sent"] = float64(sa.total.Load())
	m["synacks_spoofed_retx"] = float64(to - distinct)
	m["synacks_legit"] = float64(sa.legit.Load())
}

// legitResult is one legitimate connection during a flood.
type legitResult struct {
	connect, total time.Duration // from the connect call to connected, and to the echo read
	err            error
}

// legitRun is the legitimate connections of a flood, started in the
// background.
type legitRun struct {
	wg sync.WaitGroup
	rs []legitResult
}

// startLegit starts n kernel connections to the stack's port, the i-th at
// i*over/n from now; each connects and exchanges legitMsg within legitLimit.
func (e *runEnv) startLegit(n int, over time.Duration) *legitRun {
	l := &legitRun{rs: make([]legitResult, n)}
	start := time.Now()
	for i := range n {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			at := start.Add(over * time.Duration(i) / time.Duration(n))
			if e.sleep(time.Until(at)) != nil {
				l.rs[i].err = e.ctx.Err()
				return
			}
			l.rs[i] = e.legitConnect(i)
		}()
	}
	return l
}

// wait waits for every connection and returns their results.
func (l *legitRun) wait() []legitResult {
	l.wg.Wait()
	return l.rs
}

// legitConnect is one kernel client: connect, send legitMsg, read it back.
func (e *runEnv) legitConnect(i int) legitResult {
	ctx, cancel := context.WithTimeout(e.ctx, legitLimit)
	defer cancel()
	var t0 time.Time
	c, err := e.bed.KernelDial(ctx, cmpPort, func(uintptr) { t0 = time.Now() })
	if err != nil {
		return legitResult{err: err}
	}
	defer c.Close()
	r := legitResult{connect: time.Since(t0)}
	c.SetDeadline(t0.Add(legitLimit))
	msg := fmt.Appendf(nil, "legit %04d", i%10000)
	if _, err := c.Write(msg); err != nil {
		return legitResult{err: fmt.Errorf("legitimate connection %d: write: %w", i, err)}
	}
	back := make([]byte, len(msg))
	if _, err := io.ReadFull(c, back); err != nil {
		return legitResult{err: fmt.Errorf("legitimate connection %d: read: %w", i, err)}
	}
	if !bytes.Equal(back, msg) {
		return legitResult{err: errors.New("legitimate connection: the echo differs")}
	}
	r.total = time.Since(t0)
	return r
}
