// The loss scenarios: tail-loss, backoff, synack-loss, mid-loss, bulk.

package compare

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/seqnum"
)

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
		if err := e.sendAndTime(kc, "kernel", got, n, t0); err != nil {
			return err
		}
		// The stack's pure ACKs, handshake to FIN, per MB it received.
		e.res.Metrics["acks_per_mb"] = float64(e.w.Stats().EgressACKs) / (float64(n) / 1e6)
		return nil
	})
}
