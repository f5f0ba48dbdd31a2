// The idle-connection scenarios: keepalive, zero-window, many-conns.

package compare

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tcpwheel/tcpwheel/cmd/tcpwheel/internal/compare/segwatch"
)

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
