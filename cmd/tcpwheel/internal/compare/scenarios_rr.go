// The request-response scenario: tcp-rr.

package compare

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// tcp-rr's parameters: netperf's TCP_RR, one connection.
const (
	rrSize      = 100  // bytes each way per exchange
	rrExchanges = 5000 // exchanges, one at a time
)

// scenarioTCPRR: the kernel connects to the stack's echo and sends rrSize
// bytes, waits for their echo, and sends again, rrExchanges times on the
// one connection: its round trip p50 and p99 and exchanges per second, the
// latency of a request and its answer (an interactive session's, an RPC's)
// where wrk's 50 connections measure a load.
func scenarioTCPRR(e *runEnv) error {
	ln, err := e.stack.Listen(cmpPort)
	if err != nil {
		return fmt.Errorf("stack listen: %w", err)
	}
	e.onClose(func() { ln.Close() })
	echoErr := make(chan error, 1)
	go func() {
		c, err := e.accept(ln)
		if err == nil {
			_, err = io.Copy(c, c)
		}
		echoErr <- err
	}()
	kc, err := e.kernelDial(cmpPort)
	if err != nil {
		return err
	}
	return e.measure(func() error {
		out, in := pattern(rrSize), make([]byte, rrSize)
		rtts := make([]float64, 0, rrExchanges)
		start := time.Now()
		for i := range rrExchanges {
			t0 := time.Now()
			if _, err := kc.Write(out); err != nil {
				return fmt.Errorf("exchange %d: write: %w", i, err)
			}
			if _, err := io.ReadFull(kc, in); err != nil {
				select {
				case eerr := <-echoErr:
					return fmt.Errorf("exchange %d: read: %w (the stack's echo: %v)", i, err, eerr)
				default:
				}
				return fmt.Errorf("exchange %d: read: %w", i, err)
			}
			rtts = append(rtts, float64(time.Since(t0))/float64(time.Microsecond))
		}
		took := time.Since(start)
		if !bytes.Equal(in, out) {
			return errors.New("the echo differs from what was sent")
		}
		slices.Sort(rtts)
		m := e.res.Metrics
		m["rr_rtt_p50_us"] = quantile(rtts, 0.5)
		m["rr_rtt_p99_us"] = quantile(rtts, 0.99)
		m["rr_per_s"] = rrExchanges / took.Seconds()
		return nil
	})
}
