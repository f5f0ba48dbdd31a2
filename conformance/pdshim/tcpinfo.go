package pdshim

import (
	"encoding/binary"
	"time"

	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/tcpwheel/tcpwheel/tcp"
)

// Linux's struct tcp_info (include/uapi/linux/tcp.h): the offsets of the
// fields the shim fills; the others stay zero. tcpInfoLen is its size up to
// tcpi_rcv_wnd.
const (
	tiState         = 0
	tiCAState       = 1
	tiRetransmits   = 2
	tiProbes        = 3
	tiBackoff       = 4
	tiOptions       = 5
	tiWScale        = 6 // snd in the low nibble, rcv in the high
	tiRTO           = 8
	tiATO           = 12
	tiSndMSS        = 16
	tiRcvMSS        = 20
	tiUnacked       = 24
	tiSacked        = 28
	tiLost          = 32
	tiRetrans       = 36
	tiPMTU          = 60
	tiRTT           = 68
	tiRTTVar        = 72
	tiSndSsthresh   = 76
	tiSndCwnd       = 80
	tiAdvMSS        = 84
	tiReordering    = 88
	tiTotalRetrans  = 100
	tiBytesAcked    = 120
	tiBytesReceived = 128
	tiSegsOut       = 136
	tiSegsIn        = 140
	tiMinRTT        = 148
	tiDataSegsIn    = 152
	tiDataSegsOut   = 156
	tiBytesSent     = 200
	tiBytesRetrans  = 208
	tiSndWnd        = 228
	tiRcvWnd        = 232
	tcpInfoLen      = 236
)

// Linux's TCP states (include/net/tcp_states.h) and congestion-avoidance
// states (TCP_CA_*).
var linuxState = map[tcp.State]uint8{
	tcp.StateEstablished: 1, tcp.StateSynSent: 2, tcp.StateSynReceived: 3,
	tcp.StateFinWait1: 4, tcp.StateFinWait2: 5, tcp.StateTimeWait: 6,
	tcp.StateClosed: 7, tcp.StateCloseWait: 8, tcp.StateLastAck: 9,
	tcp.StateListen: 10, tcp.StateClosing: 11,
}

const (
	caOpen     = 0
	caDisorder = 1
	caRecovery = 3
	caLoss     = 4
)

// infinite is Linux's TCP_INFINITE_SSTHRESH, reported before any loss.
const infinite = 0x7fffffff

func usec(d time.Duration) uint32 { return uint32(d / time.Microsecond) }

// segs is n bytes in segments of mss, rounded up, as Linux counts cwnd.
func segs(n, mss int) uint32 {
	if mss <= 0 {
		return 0
	}
	return uint32((n + mss - 1) / mss)
}

// tcpInfo encodes the connection's state as Linux's struct tcp_info into b
// (as much as fits; the rest of b zeroed) and returns len(b). advmss is the MSS the
// socket announces.
func tcpInfo(b []byte, c *stack.Conn, advmss int) int {
	var ti [tcpInfoLen]byte
	i := c.Info()
	lost, retrans := c.LossCounts()
	put := func(off int, v uint32) { binary.NativeEndian.PutUint32(ti[off:], v) }
	put64 := func(off int, v uint64) { binary.NativeEndian.PutUint64(ti[off:], v) }

	ti[tiState] = linuxState[i.State]
	switch {
	case i.Backoff > 0 || i.Retransmits > 0:
		ti[tiCAState] = caLoss
	case i.InRecovery:
		ti[tiCAState] = caRecovery
	case i.Sacked > 0:
		ti[tiCAState] = caDisorder
	default:
		ti[tiCAState] = caOpen
	}
	ti[tiRetransmits] = uint8(min(i.Retransmits, 255))
	ti[tiBackoff] = uint8(min(i.Backoff, 255))
	ti[tiProbes] = uint8(min(i.Probes, 255))
	var opts uint8
	if i.Timestamps {
		opts |= 1
	}
	if i.SACK {
		opts |= 2
	}
	if i.SndWScale >= 0 {
		opts |= 4
		ti[tiWScale] = uint8(i.SndWScale&0xf) | uint8(i.RcvWScale&0xf)<<4
	}
	ti[tiOptions] = opts
	put(tiRTO, usec(i.RTO))
	put(tiATO, usec(tcp.DefaultDelayedACK))
	put(tiSndMSS, uint32(i.SndMSS))
	put(tiRcvMSS, uint32(max(i.RcvMSS, 536)))
	put(tiUnacked, uint32(i.Unacked))
	put(tiSacked, segs(i.Sacked, i.SndMSS))
	put(tiLost, uint32(lost))
	put(tiRetrans, uint32(retrans))
	put(tiPMTU, 1500)
	put(tiRTT, usec(i.SRTT))
	put(tiRTTVar, usec(i.RTTVar))
	if i.Ssthresh >= 1<<30 {
		put(tiSndSsthresh, infinite)
	} else {
		put(tiSndSsthresh, segs(i.Ssthresh, i.SndMSS))
	}
	put(tiSndCwnd, uint32(i.Cwnd/max(i.SndMSS, 1)))
	put(tiAdvMSS, uint32(advmss))
	put(tiReordering, uint32(i.Reordering))
	put(tiTotalRetrans, uint32(i.SegsRetransmitted))
	put64(tiBytesAcked, i.BytesAcked)
	put64(tiBytesReceived, i.BytesReceived)
	put(tiSegsOut, uint32(i.SegsOut))
	put(tiSegsIn, uint32(i.SegsIn))
	put(tiMinRTT, usec(i.MinRTT))
	put(tiDataSegsIn, uint32(i.DataSegsIn))
	put(tiDataSegsOut, uint32(i.DataSegsOut))
	put64(tiBytesSent, i.BytesSent)
	put64(tiBytesRetrans, i.BytesRetrans)
	put(tiSndWnd, uint32(i.SndWnd))
	put(tiRcvWnd, uint32(i.RcvWnd))
	clear(b) // the fields after tcpi_rcv_wnd, as much as the caller's struct has
	copy(b, ti[:])
	return len(b)
}
