package stack

import (
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tcpwheel/tcpwheel/timer"
)

// flowKey is a UDP flow's 5-tuple (the protocol is UDP's).
type flowKey struct{ src, dst netip.AddrPort }

// UDPFlow is a forwarded UDP flow: the datagrams one client address and
// port sent to one destination that is not the stack's (ForwardConfig.UDP).
// It implements net.Conn: Read returns the client's datagrams, one per
// call, and Write sends one to the client from the original destination
// (LocalAddr). It ends when the application closes it, when it carried no
// datagram either way for UDPIdleTimeout (Read then returns io.EOF, Write
// net.ErrClosed), or when the stack closes. A datagram of the same 5-tuple
// after its end is a new flow.
type UDPFlow struct {
	f          *forwarder
	key        flowKey
	laddr      *net.UDPAddr // the original destination
	raddr      *net.UDPAddr // the client
	rd, wd     *deadline
	entry      timer.Entry   // the idle timer; loop only
	last       time.Duration // loop only: when it last carried a datagram
	gone       bool          // loop only: out of the table
	ended      atomic.Bool   // gone, for Write's direct path
	lastOut    atomic.Int64  // when Write's direct path last sent, on the wheel's clock
	ipID       atomic.Uint32 // the IPv4 ID of the direct path's datagrams
	quote      []byte        // loop only: the IP header and start of the client's last datagram
	hdrLen     int           // loop only: the IP header's length in quote
	mu         sync.Mutex
	q          [][]byte // guarded by mu: the client's datagrams, oldest first
	endErr     error    // guarded by mu: why it ended, once it did
	readable   chan struct{}
	closeOnce  sync.Once
	closedByUs chan struct{}
}

var _ net.Conn = (*UDPFlow)(nil)

// datagram takes a UDP datagram to an address that is not the stack's: to
// its flow, or a new flow's first.
func (f *forwarder) datagram(src, dst netip.AddrPort, ipHdr, udp []byte) {
	p := udp[udpHeaderLen:]
	if f.cfg.UDP == nil {
		f.s.counters.Drops.UDPNoPort++
		return
	}
	k := flowKey{src, dst}
	fl := f.flows[k]
	if fl == nil {
		if len(f.flows) >= f.cfg.MaxUDPFlows {
			f.stats.DropsUDPFlows++
			return
		}
		fl = &UDPFlow{f: f, key: k, laddr: net.UDPAddrFromAddrPort(dst), raddr: net.UDPAddrFromAddrPort(src),
			rd: newDeadline(), wd: newDeadline(), readable: make(chan struct{}, 1), closedByUs: make(chan struct{})}
		fl.entry.Init(fl.idle)
		f.s.wheel.Start(&fl.entry, f.cfg.UDPIdleTimeout)
		f.flows[k] = fl
		f.stats.UDPFlows++
		go f.cfg.UDP(fl)
	}
	fl.last = f.s.wheel.Now()
	fl.quote = append(append(fl.quote[:0], ipHdr...), udp[:min(len(udp), udpQuoteLen)]...)
	fl.hdrLen = len(ipHdr)
	fl.mu.Lock()
	if len(fl.q) >= udpQueueLen {
		fl.mu.Unlock()
		f.stats.DropsUDPQueue++
		return
	}
	fl.q = append(fl.q, append([]byte(nil), p...))
	fl.mu.Unlock()
	wake(fl.readable)
	f.s.parkForWoken() // loop.Loop.ParkForWoken: the flow's goroutine relays it at once
	f.stats.UDPIn++
}

// udpQuoteLen is how much of a client's last datagram a flow keeps for
// Unreachable's quote: its UDP header and the start of its payload (RFC
// 792 asks for 8 bytes; RFC 4443's "as much as fits" is not needed by a
// host to find its socket).
const udpQuoteLen = 64

// Unreachable sends the client an ICMP port unreachable (ICMPv6: port
// unreachable) from the original destination, quoting its last datagram,
// as the destination's host would for a closed port: a relay calls it when
// its own socket to the destination was refused, so that the client's
// connected socket gets ECONNREFUSED. The flow goes on. It is rate-limited
// as the stack's own port unreachables are.
func (fl *UDPFlow) Unreachable() error {
	s := fl.f.s
	if s.do(func() {
		if len(fl.quote) > 0 {
			s.sendPortUnreachable(fl.key.src.Addr(), fl.key.dst.Addr(), fl.quote[:fl.hdrLen], fl.quote[fl.hdrLen:])
		}
	}) != nil {
		return net.ErrClosed
	}
	return nil
}

// idle is the flow's idle timer: it ends the flow if nothing went either
// way since the timer was armed, else re-arms it for the rest of the
// timeout from the last datagram (so that a datagram costs no timer
// operation).
func (fl *UDPFlow) idle() {
	f := fl.f
	last := max(fl.last, time.Duration(fl.lastOut.Load()))
	if due := last + f.cfg.UDPIdleTimeout; due > f.s.wheel.Now() {
		f.s.wheel.StartAt(&fl.entry, due)
		return
	}
	f.stats.UDPExpired++
	fl.end(io.EOF)
}

// end takes the flow out of the table: reads return err once the queue is
// empty. It runs on the loop.
func (fl *UDPFlow) end(err error) {
	if fl.gone {
		return
	}
	fl.gone = true
	fl.ended.Store(true)
	fl.entry.Stop()
	if fl.f.flows[fl.key] == fl {
		delete(fl.f.flows, fl.key)
	}
	fl.mu.Lock()
	fl.endErr = err
	fl.mu.Unlock()
	wake(fl.readable)
}

// Read implements net.Conn: it waits for the client's next datagram and
// copies it into p (what does not fit is lost, as with a kernel socket).
// After the flow's idle timeout it returns io.EOF.
func (fl *UDPFlow) Read(p []byte) (int, error) {
	for {
		select {
		case <-fl.closedByUs:
			return 0, fl.opErr("read", net.ErrClosed)
		default:
		}
		if fl.rd.passed() {
			return 0, fl.opErr("read", os.ErrDeadlineExceeded)
		}
		fl.mu.Lock()
		if len(fl.q) > 0 {
			b := fl.q[0]
			fl.q[0] = nil
			fl.q = fl.q[1:]
			if len(fl.q) > 0 {
				wake(fl.readable)
			}
			fl.mu.Unlock()
			return copy(p, b), nil
		}
		err := fl.endErr
		fl.mu.Unlock()
		if err == io.EOF {
			return 0, io.EOF
		}
		if err != nil {
			return 0, fl.opErr("read", err)
		}
		stopped := false
		select {
		case <-fl.readable:
		case <-fl.rd.wait():
		case <-fl.closedByUs:
		case <-fl.f.s.done:
			fl.mu.Lock()
			stopped = len(fl.q) == 0
			fl.mu.Unlock()
		}
		fl.rd.done()
		if stopped {
			return 0, fl.opErr("read", net.ErrClosed)
		}
	}
}

// Write implements net.Conn: it sends p to the client as one datagram from
// the original destination. It never waits.
func (fl *UDPFlow) Write(p []byte) (int, error) {
	select {
	case <-fl.closedByUs:
		return 0, fl.opErr("write", net.ErrClosed)
	default:
	}
	if fl.wd.passed() {
		return 0, fl.opErr("write", os.ErrDeadlineExceeded)
	}
	s := fl.f.s
	if len(p) > s.maxUDPPayload(fl.key.src.Addr()) {
		return 0, fl.opErr("write", syscall.EMSGSIZE)
	}
	var err error
	if s.udpDirect && s.onePacket(fl.key.src.Addr(), len(p)) {
		// UDP's direct path (udpsend.go): no trip to the loop. The idle
		// timer reads when this was (lastOut) on the clock the wheel
		// follows, and Stats adds the count (outDirect).
		if fl.ended.Load() {
			err = net.ErrClosed
		} else {
			fl.lastOut.Store(int64(s.wheel.Clock().Now()))
			fl.f.outDirect.Add(1)
			err = s.writeUDP(fl.key.dst, fl.key.src, uint16(fl.ipID.Add(1)), p)
		}
	} else if s.do(func() {
		if fl.gone {
			err = net.ErrClosed
			return
		}
		fl.last = s.wheel.Now()
		fl.f.stats.UDPOut++
		s.sendUDPFrom(fl.key.dst, fl.key.src, p)
	}) != nil {
		err = net.ErrClosed
	}
	if err != nil {
		return 0, fl.opErr("write", err)
	}
	return len(p), nil
}

// Close implements net.Conn: the flow ends; a later datagram of its
// 5-tuple is a new flow.
func (fl *UDPFlow) Close() error {
	err := fl.opErr("close", net.ErrClosed)
	fl.closeOnce.Do(func() {
		err = nil
		close(fl.closedByUs)
		fl.f.s.do(func() { fl.end(net.ErrClosed) })
		fl.rd.set(time.Time{})
		fl.wd.set(time.Time{})
		fl.mu.Lock()
		fl.q = nil
		fl.mu.Unlock()
	})
	return err
}

func (fl *UDPFlow) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "udp", Source: fl.laddr, Addr: fl.raddr, Err: err}
}

// LocalAddr implements net.Conn: the original destination, a *net.UDPAddr.
func (fl *UDPFlow) LocalAddr() net.Addr { return fl.laddr }

// RemoteAddr implements net.Conn: the client, a *net.UDPAddr.
func (fl *UDPFlow) RemoteAddr() net.Addr { return fl.raddr }

// SetDeadline implements net.Conn.
func (fl *UDPFlow) SetDeadline(t time.Time) error { fl.rd.set(t); fl.wd.set(t); return nil }

// SetReadDeadline implements net.Conn.
func (fl *UDPFlow) SetReadDeadline(t time.Time) error { fl.rd.set(t); return nil }

// SetWriteDeadline implements net.Conn. Writes never wait, so it only
// fails those made after it has passed.
func (fl *UDPFlow) SetWriteDeadline(t time.Time) error { fl.wd.set(t); return nil }

// sendUDPFrom sends a datagram from src to dst: from one of the stack's
// addresses (sendUDP), or from a forwarded flow's original destination.
// It runs on the loop; the caller checked the size.
func (s *Stack) sendUDPFrom(src, dst netip.AddrPort, p []byte) {
	hl := ipHeaderLen(dst.Addr())
	n := hl + udpHeaderLen + len(p)
	if tooBig(n, dst.Addr()) {
		s.counters.Drops.TooBig++
		return
	}
	b := s.outBuf(n) // fragmented if larger than the MTU (frag.go)
	putUDP(b[hl:], src.Addr(), dst.Addr(), src.Port(), dst.Port(), p)
	s.counters.DatagramsOut++
	s.writeIP(b, src.Addr(), dst.Addr(), protoUDP)
}
