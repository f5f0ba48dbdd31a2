package record_test

import (
	"bytes"
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/stack/record"
)

var (
	addrA = netip.MustParseAddr("198.18.0.1")
	local = netip.AddrPortFrom(addrA, 41000)
	peer  = netip.MustParseAddrPort("198.18.0.2:7")
	// wall and origin place the recordings' packets on the wall clock.
	wall   = time.Date(2026, 11, 23, 21, 0, 0, 123456789, time.UTC)
	origin = 5 * time.Second
)

func header() record.Header {
	return record.Header{
		Addr: addrA, Addr6: netip.MustParseAddr("2001:db8::1"), Prefix: netip.MustParsePrefix("198.18.0.0/15"), MTU: 1500,
		Tick: record.Duration(time.Millisecond), TTL: 64, Backlog: 128,
		Origin: record.Duration(origin), Wall: wall, TSOffsets: true,
		TCP: record.TCP{MSS: 1460, MSS6: 1440, SendBuffer: 1 << 20, RecvBuffer: 1 << 20,
			InitialRTO: record.Duration(time.Second), DelayedACK: record.Duration(40 * time.Millisecond)},
	}
}

// allKinds is one event of every kind that travels in custom blocks, each
// field set to a value that takes some bytes to encode.
func allKinds() []record.Event {
	v6 := netip.MustParseAddrPort("[2001:db8::1]:443")
	return []record.Event{
		{Kind: record.Expire, T: origin + 200*time.Millisecond, T2: origin + 199*time.Millisecond + 1},
		{Kind: record.Batch, T: origin + 3},
		{Kind: record.SendTime, T: -7},
		{Kind: record.ISN, Local: local, Remote: peer, N: math.MaxUint32},
		{Kind: record.QueueFull, Port: 65535, N: 1},
		{Kind: record.Accepted, Local: peer, Remote: local, N: 0},
		{Kind: record.Listen, T: origin, Port: 7, Data: []byte("0123456789abcdef")},
		{Kind: record.ListenClose, T: math.MaxInt64, Port: 1},
		{Kind: record.Dial, T: origin + 1, Local: local, Remote: peer},
		{Kind: record.Write, T: origin + 2, Local: local, Remote: peer, N: 1 << 40},
		{Kind: record.Read, T: origin + 4, Local: local, Remote: v6, N: 65536},
		{Kind: record.Close, T: origin + 5, Local: local, Remote: peer, N: 1},
		{Kind: record.CloseWrite, T: origin + 6, Local: local, Remote: peer},
		{Kind: record.Abort, T: origin + 7, Local: local, Remote: peer},
		{Kind: record.KeepAlive, T: origin + 8, Local: local, Remote: peer, N: 1, Args: []int64{int64(15 * time.Second), int64(time.Second), 9}},
		{Kind: record.StackClose, T: math.MinInt64},
		{Kind: record.UDPOpen, T: origin + 9, Port: 53},
		{Kind: record.UDPOpenNet, T: origin + 10, Port: 54, N: 6},
		{Kind: record.UDPDial, T: origin + 11, Local: local, Remote: v6},
		{Kind: record.UDPSend, T: origin + 12, Local: local, Remote: v6, Data: []byte("datagram")},
		{Kind: record.UDPClose, T: origin + 13, Port: 54},
		{Kind: record.TSOffset, Local: local, Remote: v6, N: math.MaxUint32},
	}
}

// writerRecording writes a recording by hand: every event kind, and packets
// both ways, of lengths that take every padding.
func writerRecording(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := record.NewWriter(&buf, header())
	if err != nil {
		t.Fatal(err)
	}
	evs := allKinds()
	for i := range evs {
		w.Event(&evs[i])
		if n, ok := packetAfter[i]; ok {
			w.Packet(dirOf(n) == record.In, packetT(n), packet(40+n))
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// packet is n bytes of an IPv4/TCP-looking packet (its length in the IP
// header), the rest a pattern.
func packet(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + n)
	}
	b[0], b[2], b[3], b[9] = 0x45, byte(n>>8), byte(n), 6
	return b
}
