package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"

	"github.com/tcpwheel/tcpwheel/cmd/tcpwheel/internal/baseline/gvisor"
)

// `tcpwheel forward -stack gvisor|gvisor-gso`: the same namespaces, dials
// and relay, with gVisor's netstack and its own TCP and UDP forwarders in
// place of tcpwheel's stack (gvisor.Config.Forward), as the tun2socks-style
// proxies built on gVisor run it: a baseline to measure tcpwheel's
// forwarder against, side by side. What differs from tcpwheel's forwarder
// is gVisor's: it dials first (no -handshake-first), a destination that
// does not answer leaves the client's SYN unanswered (tcpwheel's sends an
// ICMP host unreachable), a UDP flow ends after -udp-idle without a
// datagram either way (the relay's read deadline: gVisor's UDP endpoint
// has no timer of its own), and the pending limits are gVisor's one bound
// on undecided handshakes (-max-pending).

// startGVisor starts gVisor's stack, on vt if not nil (gvisor-gso, which
// it owns) or on the bed's plain TUN, with the TCP tuning of its
// throughput users, and its forwarders on fw's relays.
func (fw *forwarder) startGVisor(vt *gvisor.VnetTUN) error {
	cfg := gvisor.Config{Addr: fwdStackAddr, Tuned: true,
		Forward: &gvisor.ForwardConfig{TCP: fw.relayGVisorTCP, UDP: fw.relayGVisorUDP, MaxInFlight: fw.cfg.maxPending}}
	if vt != nil {
		cfg.VnetTUN = vt
	} else {
		cfg.Device, cfg.Addr6 = fw.client.Dev, fw.client.StackAddr6
	}
	s, err := gvisor.New(cfg)
	if err != nil {
		if vt != nil {
			vt.Close()
		}
		return err
	}
	fw.gv = s
	return nil
}

// relayGVisorTCP is relayTCP for a gVisor forwarder's flow: it dials the
// destination in the server namespace, then completes the client's
// handshake (or resets it, if the destination refused; or leaves it
// unanswered), and copies both ways.
func (fw *forwarder) relayGVisorTCP(r *gvisor.TCPRequest) {
	if !fw.enter() {
		r.Refuse(true)
		return
	}
	defer fw.wg.Done()
	up, refused, err := fw.dialUp(r.Destination())
	if err != nil {
		r.Refuse(refused)
		return
	}
	defer up.Close()
	c, err := r.Accept()
	if err != nil {
		fw.st.tcpFailed.Add(1)
		return
	}
	defer c.Close()
	fw.st.tcpRelayed.Add(1)
	fw.pipe(c, up)
}

// relayGVisorUDP is relayUDP for a gVisor forwarder's flow: a connected
// UDP socket in the server namespace, datagrams copied both ways until
// none has gone either way for -udp-idle.
func (fw *forwarder) relayGVisorUDP(c *gonet.UDPConn, dst netip.AddrPort) {
	defer c.Close()
	if !fw.enter() {
		return
	}
	defer fw.wg.Done()
	up, err := fw.dial.dialUDP(dst)
	if err != nil {
		fw.st.udpFailed.Add(1)
		return
	}
	defer up.Close()
	fw.st.udpRelayed.Add(1)
	idle := fw.cfg.udpIdle
	var last atomicTime
	last.touch()
	go fw.udpDown(up, writerFunc(func(b []byte) (int, error) { // gVisor's flow passes no unreachable on
		last.touch()
		return c.Write(b)
	}), nil)
	buf := make([]byte, 64<<10)
	for {
		c.SetReadDeadline(last.get().Add(idle))
		n, err := c.Read(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && time.Since(last.get()) < idle {
				continue // the other direction kept the flow alive
			}
			return
		}
		last.touch()
		up.Write(buf[:n])
	}
}

// gvisorStatsLine is statsLine with gVisor forwarding.
func (fw *forwarder) gvisorStatsLine() string {
	st := fw.gv.Stats()
	return fmt.Sprintf("stack %s | tcp relayed %d refused %d unreachable %d failed %d | handshakes dropped (max in flight) %d | udp flows %d failed %d refused %d | bytes up %d down %d | black-holed packets %d | retransmits %d timeouts %d",
		fw.cfg.stack, fw.st.tcpRelayed.Load(), fw.st.tcpRefused.Load(), fw.st.tcpUnreachable.Load(), fw.st.tcpFailed.Load(),
		fw.gv.ForwardStats().MaxInFlightDrops,
		fw.st.udpRelayed.Load(), fw.st.udpFailed.Load(), fw.st.udpUnreachable.Load(),
		fw.st.bytesUp.Load(), fw.st.bytesDown.Load(), fw.st.blackHoled.Load(), st.Retransmits, st.Timeouts)
}

// atomicTime is an instant that goroutines set and read.
type atomicTime struct{ ns atomic.Int64 }

func (t *atomicTime) touch()         { t.ns.Store(time.Now().UnixNano()) }
func (t *atomicTime) get() time.Time { return time.Unix(0, t.ns.Load()) }

// writerFunc is a function as an io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
