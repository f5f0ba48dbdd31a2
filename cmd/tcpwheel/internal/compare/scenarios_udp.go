package compare

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"
)

// udpEchoer is a stack that serves UDP: tcpwheel's (Stack.ListenPacket) and
// gVisor's (its UDP endpoint through gonet).
type udpEchoer interface {
	// ListenUDP opens an unconnected UDP socket on the stack's port, of the
	// kernel's IP version.
	ListenUDP(port int) (net.PacketConn, error)
}

func (t *tcpwheelStack) ListenUDP(port int) (net.PacketConn, error) {
	return t.s.ListenPacket(udpNet(t.kernel), ":"+strconv.Itoa(port))
}

func (g *gvisorStack) ListenUDP(port int) (net.PacketConn, error) {
	c, err := g.s.ListenUDP(udpNet(g.kernel), ":"+strconv.Itoa(port))
	if err != nil {
		return nil, err
	}
	return c, nil
}

// udpNet is the network of the kernel's family: "udp4" or "udp6".
func udpNet(kernel netip.Addr) string {
	if kernel.Is6() {
		return "udp6"
	}
	return "udp4"
}

// udp-echo's parameters. The datagram fits in IPv6's minimum MTU, so that
// neither family fragments.
const (
	udpSize       = 1000                  // payload bytes per datagram
	udpWindow     = 64                    // burst: datagrams in flight at most
	udpLossAfter  = 50 * time.Millisecond // a datagram unanswered this long is lost
	udpMaxRate    = 500000                // burst: datagrams per second at most (a bound, not a pace)
	udpPingsShare = 10                    // the latency phase sends Config.UDPDatagrams / this, one at a time
)

// MaxUDPDatagrams is the largest Config.UDPDatagrams.
const MaxUDPDatagrams = 1000000

// scenarioUDPEcho: the stack echoes UDP datagrams on its address; the kernel
// side (a socket in the namespace) first sends Config.UDPDatagrams/10 of them
// one at a time (round-trip latency), then Config.UDPDatagrams in a burst with
// at most udpWindow in flight (datagrams/s, MB/s each way). A datagram not
// echoed within udpLossAfter counts as lost.
func scenarioUDPEcho(e *runEnv) error {
	u, ok := e.stack.(udpEchoer)
	if !ok {
		return fmt.Errorf("stack %T does not serve UDP", e.stack)
	}
	pc, err := u.ListenUDP(cmpPort)
	if err != nil {
		return fmt.Errorf("stack listen udp: %w", err)
	}
	e.onClose(func() { pc.Close() })
	go udpEcho(pc)

	kernel, stackAddr := e.bed.KernelAddr, e.bed.StackAddr
	if e.c.v6 {
		kernel, stackAddr = e.bed.KernelAddr6, e.bed.StackAddr6
	}
	var kc *net.UDPConn
	if err := e.bed.Do(func() (err error) {
		kc, err = net.DialUDP(udpNet(kernel), net.UDPAddrFromAddrPort(netip.AddrPortFrom(kernel, 0)),
			net.UDPAddrFromAddrPort(netip.AddrPortFrom(stackAddr, cmpPort)))
		return err
	}); err != nil {
		return fmt.Errorf("kernel udp socket: %w", err)
	}
	e.onClose(func() { kc.Close() })

	pings := max(e.cfg.UDPDatagrams/udpPingsShare, 1)
	return e.measure(func() error {
		rtts, lostPings, err := e.udpPings(kc, pings)
		if err != nil {
			return err
		}
		if len(rtts) == 0 {
			return fmt.Errorf("udp: none of %d pings answered", pings)
		}
		slices.Sort(rtts)
		m := e.res.Metrics
		m["udp_rtt_p50_us"] = quantile(rtts, 0.5)
		m["udp_rtt_p99_us"] = quantile(rtts, 0.99)
		b, err := e.udpBurst(kc, e.cfg.UDPDatagrams)
		if err != nil {
			return err
		}
		secs := b.took.Seconds()
		m["udp_dgrams_per_s"] = float64(b.echoed) / secs
		m["udp_mbytes_per_s"] = float64(b.echoed) * udpSize / secs / 1e6
		m["udp_lost"] = float64(lostPings + b.sent - b.echoed)
		return nil
	})
}

// udpEcho sends every datagram back to where it came from, until pc closes.
func udpEcho(pc net.PacketConn) {
	buf := make([]byte, 64<<10)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if _, err := pc.WriteTo(buf[:n], from); err != nil && errors.Is(err, net.ErrClosed) {
			return
		}
	}
}

// udpPings sends n datagrams one at a time and returns their round trips (µs)
// and how many went unanswered within udpLossAfter.
func (e *runEnv) udpPings(kc *net.UDPConn, n int) (rtts []float64, lost int, err error) {
	out, in := pattern(udpSize), make([]byte, 64<<10)
	for seq := uint64(1); seq <= uint64(n); seq++ {
		if err := e.ctx.Err(); err != nil {
			return nil, 0, err
		}
		binary.BigEndian.PutUint64(out, seq)
		t0 := time.Now()
		if _, err := kc.Write(out); err != nil {
			return nil, 0, fmt.Errorf("udp ping %d: %w", seq, err)
		}
		end := t0.Add(udpLossAfter)
		for {
			kc.SetReadDeadline(end)
			k, err := kc.Read(in)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					lost++
					break
				}
				return nil, 0, fmt.Errorf("udp ping %d: %w", seq, err)
			}
			if k == udpSize && binary.BigEndian.Uint64(in) == seq {
				rtts = append(rtts, float64(time.Since(t0))/float64(time.Microsecond))
				break
			}
			// A late echo of an earlier ping: not this one.
		}
	}
	return rtts, lost, nil
}

// burstResult is what a burst sent and got back, and how long it took: from
// the first send to the last echo.
type burstResult struct {
	sent, echoed int
	took         time.Duration
}

// udpBurst sends n datagrams with at most udpWindow in flight (a datagram
// leaves the window when echoed, or udpLossAfter after it was sent) and at
// most udpMaxRate per second, then waits up to udpLossAfter for the last
// echoes.
func (e *runEnv) udpBurst(kc *net.UDPConn, n int) (burstResult, error) {
	sentAt := make([]time.Time, n)
	echoed := make([]bool, n)
	got := make(chan int, udpWindow*2)
	done := make(chan struct{})
	defer close(done)
	go func() {
		defer close(got)
		in := make([]byte, 64<<10)
		for {
			k, err := kc.Read(in)
			if err != nil {
				return
			}
			if k == udpSize {
				if s := binary.BigEndian.Uint64(in) - udpBurstTag; s < uint64(n) {
					select {
					case got <- int(s):
					case <-done:
						return
					}
				}
			}
		}
	}()
	kc.SetReadDeadline(time.Time{})
	defer kc.SetReadDeadline(time.Now()) // stops the reader
	out := pattern(udpSize)
	var r burstResult
	var last time.Time
	oldest := 0 // every datagram before it is echoed or given up
	take := func(s int) {
		if !echoed[s] {
			echoed[s] = true
			r.echoed++
			last = time.Now()
		}
	}
	start := time.Now()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	// wait takes echoes until the window has room (sent < limit), or, with
	// limit < 0, until every datagram is echoed or given up.
	wait := func(limit int) error {
		for {
			for oldest < r.sent && (echoed[oldest] || time.Since(sentAt[oldest]) > udpLossAfter) {
				oldest++
			}
			if limit >= 0 && r.sent-oldest < limit || oldest == r.sent {
				return nil
			}
			timer.Reset(time.Until(sentAt[oldest].Add(udpLossAfter)) + time.Millisecond)
			select {
			case s, ok := <-got:
				if !ok {
					return errors.New("udp burst: the kernel socket failed")
				}
				take(s)
			case <-timer.C:
			case <-e.ctx.Done():
				return e.ctx.Err()
			}
		}
	}
	for s := range n {
		if err := wait(udpWindow); err != nil {
			return r, err
		}
		// The rate bound: ahead of udpMaxRate, sleep it off.
		if ahead := time.Duration(s)*time.Second/udpMaxRate - time.Since(start); ahead > time.Millisecond {
			time.Sleep(ahead)
		}
		binary.BigEndian.PutUint64(out, udpBurstTag+uint64(s))
		sentAt[s] = time.Now()
		if _, err := kc.Write(out); err != nil {
			return r, fmt.Errorf("udp burst %d: %w", s, err)
		}
		r.sent++
		for len(got) > 0 {
			take(<-got)
		}
	}
	if err := wait(-1); err != nil {
		return r, err
	}
	if last.IsZero() {
		return r, fmt.Errorf("udp burst: none of %d datagrams echoed", n)
	}
	r.took = last.Sub(start)
	return r, nil
}

// udpBurstTag is added to a burst's sequence numbers, so that a late echo of
// a ping is not taken for one of the burst's.
const udpBurstTag = 1 << 62
