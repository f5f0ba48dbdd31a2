package impair_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"sync"
	"testing"

	"github.com/tcpwheel/tcpwheel/internal/tcpip"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"

	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/impair"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

var (
	srcAddr = tcpip.AddrFrom4([4]byte{198, 18, 0, 2})
	dstAddr = tcpip.AddrFrom4([4]byte{198, 18, 0, 1})
)

// tcpPacket builds a valid IPv4/TCP packet with the given flags and payload
// length; seq is written into the sequence number so packets can be told apart.
func tcpPacket(flags header.TCPFlags, payload int, seq uint32) []byte {
	pkt := make([]byte, header.IPv4MinimumSize+header.TCPMinimumSize+payload)
	ip := header.IPv4(pkt)
	ip.Encode(&header.IPv4Fields{
		TotalLength: uint16(len(pkt)),
		TTL:         64,
		Protocol:    uint8(header.TCPProtocolNumber),
		SrcAddr:     srcAddr,
		DstAddr:     dstAddr,
	})
	ip.SetChecksum(^ip.CalculateChecksum())
	seg := header.TCP(pkt[header.IPv4MinimumSize:])
	for i := range payload {
		seg[header.TCPMinimumSize+i] = byte(i)
	}
	seg.Encode(&header.TCPFields{
		SrcPort:    40000,
		DstPort:    80,
		SeqNum:     seq,
		AckNum:     1,
		DataOffset: header.TCPMinimumSize,
		Flags:      flags,
		WindowSize: 65535,
	})
	xsum := header.PseudoHeaderChecksum(header.TCPProtocolNumber, srcAddr, dstAddr, uint16(len(seg)))
	xsum = checksum.Checksum(seg.Payload(), xsum)
	seg.SetChecksum(^seg.CalculateChecksum(xsum))
	return pkt
}

// seqOf returns the TCP sequence number of a packet built by tcpPacket.
func seqOf(pkt []byte) uint32 {
	return header.TCP(pkt[header.IPv4MinimumSize:]).SequenceNumber()
}

// fakeDev records written packets and serves queued packets to ReadPacket;
// when none are left, ReadPacket fails with net.ErrClosed instead of blocking.
type fakeDev struct {
	mu      sync.Mutex
	written [][]byte
	nWrites int  // packets accepted by WritePacket
	discard bool // count written packets but do not keep them
	toRead  [][]byte
	closed  bool
}

var _ tun.Device = (*fakeDev)(nil)

func (f *fakeDev) ReadPacket(buf []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || len(f.toRead) == 0 {
		return 0, fmt.Errorf("fake: read: %w", net.ErrClosed)
	}
	p := f.toRead[0]
	f.toRead = f.toRead[1:]
	return copy(buf, p), nil
}

func (f *fakeDev) WritePacket(pkt []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return fmt.Errorf("fake: write: %w", net.ErrClosed)
	}
	if len(pkt) == 0 || len(pkt) > f.MTU() {
		return fmt.Errorf("fake: write: %w", tun.ErrPacketSize)
	}
	f.nWrites++
	if !f.discard {
		f.written = append(f.written, slices.Clone(pkt))
	}
	return nil
}

func (f *fakeDev) MTU() int     { return tun.DefaultMTU }
func (f *fakeDev) Name() string { return "fake" }
func (f *fakeDev) Close() error {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	return nil
}

func mustWrap(t testing.TB, dev tun.Device, cfg impair.Config) *impair.Device {
	t.Helper()
	d, err := impair.Wrap(dev, cfg)
	if err != nil {
		t.Fatalf("Wrap: %v", err)
	}
	return d
}

func TestConfigErrors(t *testing.T) {
	bad := []impair.Config{
		{EgressLoss: -0.01},
		{EgressLoss: 1.01},
		{IngressLoss: math.NaN()},
		{IngressLoss: math.Inf(1)},
		{EgressLoss: math.Inf(-1)},
		{Rules: []impair.Rule{{Dir: 0, Match: impair.MatchFIN, Count: 1}}},
		{Rules: []impair.Rule{{Dir: 3, Match: impair.MatchFIN, Count: 1}}},
		{Rules: []impair.Rule{{Dir: impair.Egress, Match: 0, Count: 1}}},
		{Rules: []impair.Rule{{Dir: impair.Egress, Match: 99, Count: 1}}},
		{Rules: []impair.Rule{{Dir: impair.Egress, Match: impair.MatchFIN, Count: 0}}},
		{Rules: []impair.Rule{{Dir: impair.Egress, Match: impair.MatchFIN, Skip: -1, Count: 1}}},
	}
	for i, cfg := range bad {
		if _, err := impair.Wrap(&fakeDev{}, cfg); !errors.Is(err, impair.ErrConfig) {
			t.Errorf("case %d: Wrap(%+v) error = %v, want ErrConfig", i, cfg, err)
		}
	}
	if _, err := impair.Wrap(nil, impair.Config{}); !errors.Is(err, impair.ErrConfig) {
		t.Errorf("Wrap(nil) error = %v, want ErrConfig", err)
	}
	for _, p := range []float64{0, 0.5, 1} {
		if _, err := impair.Wrap(&fakeDev{}, impair.Config{EgressLoss: p, IngressLoss: p}); err != nil {
			t.Errorf("Wrap with loss %v: %v", p, err)
		}
	}

	d := mustWrap(t, &fakeDev{}, impair.Config{})
	if err := d.SetLoss(impair.Egress, math.NaN()); !errors.Is(err, impair.ErrConfig) {
		t.Errorf("SetLoss(NaN) error = %v, want ErrConfig", err)
	}
	if err := d.SetLoss(0, 0.5); !errors.Is(err, impair.ErrConfig) {
		t.Errorf("SetLoss(dir 0) error = %v, want ErrConfig", err)
	}
	if _, err := d.DropNext(impair.Egress, impair.MatchFIN, 0); !errors.Is(err, impair.ErrConfig) {
		t.Errorf("DropNext(n=0) error = %v, want ErrConfig", err)
	}
	if _, err := d.AddRule(impair.Rule{Dir: impair.Ingress, Match: impair.Match(200), Count: 1}); !errors.Is(err, impair.ErrConfig) {
		t.Errorf("AddRule(bad match) error = %v, want ErrConfig", err)
	}
	if n := len(d.Stats().ByRule); n != 0 {
		t.Errorf("rejected rules were armed: %d rules", n)
	}
}

// egressPattern writes n packets and returns which of them (by index) were
// dropped. If interleave, an ingress packet is read between egress writes.
func egressPattern(t *testing.T, seed uint64, loss float64, n int, interleave bool) []int {
	t.Helper()
	dev := &fakeDev{}
	for i := range n {
		dev.toRead = append(dev.toRead, tcpPacket(header.TCPFlagAck, 0, uint32(i)))
	}
	var dropped []int
	d := mustWrap(t, dev, impair.Config{
		Seed:        seed,
		EgressLoss:  loss,
		IngressLoss: 0.5,
		OnDrop: func(dir impair.Direction, pkt []byte) {
			if dir == impair.Egress {
				dropped = append(dropped, int(seqOf(pkt)))
			}
		},
	})
	buf := make([]byte, tun.DefaultMTU)
	for i := range n {
		if err := d.WritePacket(tcpPacket(header.TCPFlagAck, 10, uint32(i))); err != nil {
			t.Fatalf("WritePacket: %v", err)
		}
		if interleave {
			if _, err := d.ReadPacket(buf); err != nil && !errors.Is(err, net.ErrClosed) {
				t.Fatalf("ReadPacket: %v", err)
			}
		}
	}
	return dropped
}

func TestDeterminism(t *testing.T) {
	const n = 2000
	a := egressPattern(t, 42, 0.2, n, false)
	b := egressPattern(t, 42, 0.2, n, false)
	if !slices.Equal(a, b) {
		t.Fatalf("same seed, different drops:\n%v\n%v", a, b)
	}
	if len(a) == 0 || len(a) == n {
		t.Fatalf("dropped %d of %d at loss 0.2", len(a), n)
	}
	if c := egressPattern(t, 43, 0.2, n, false); slices.Equal(a, c) {
		t.Errorf("seeds 42 and 43 dropped the same packets")
	}
	// The other direction's traffic does not disturb this direction's pattern.
	if c := egressPattern(t, 42, 0.2, n, true); !slices.Equal(a, c) {
		t.Errorf("ingress traffic changed the egress drop pattern")
	}
	// One seed: a lower rate drops a subset of a higher rate's drops.
	low := egressPattern(t, 42, 0.05, n, false)
	for _, i := range low {
		if _, ok := slices.BinarySearch(a, i); !ok {
			t.Fatalf("packet %d dropped at loss 0.05 but not at 0.2", i)
		}
	}
}

func TestRates(t *testing.T) {
	const n = 100_000
	for _, tc := range []struct{ egress, ingress float64 }{
		{0, 0}, {0.01, 0.1}, {0.25, 0.5}, {1, 1},
	} {
		t.Run(fmt.Sprintf("%v/%v", tc.egress, tc.ingress), func(t *testing.T) {
			dev := &fakeDev{discard: true}
			pkt := tcpPacket(header.TCPFlagAck, 0, 0)
			dev.toRead = make([][]byte, n)
			for i := range dev.toRead {
				dev.toRead[i] = pkt
			}
			d := mustWrap(t, dev, impair.Config{Seed: 7, EgressLoss: tc.egress, IngressLoss: tc.ingress})
			for range n {
				if err := d.WritePacket(pkt); err != nil {
					t.Fatal(err)
				}
			}
			buf := make([]byte, tun.DefaultMTU)
			for {
				if _, err := d.ReadPacket(buf); err != nil {
					if !errors.Is(err, net.ErrClosed) {
						t.Fatal(err)
					}
					break
				}
			}
			st := d.Stats()
			check := func(name string, dropped, passed uint64, p float64) {
				t.Helper()
				if dropped+passed != n {
					t.Errorf("%s: dropped %d + passed %d != %d", name, dropped, passed, n)
				}
				got := float64(dropped) / n
				// Loose: 1 percentage point is over 7 standard deviations at n = 100k.
				if math.Abs(got-p) > 0.01 {
					t.Errorf("%s: loss rate %.4f, want %.2f ± 0.01", name, got, p)
				}
				if (p == 0) != (dropped == 0) || (p == 1) != (passed == 0) {
					t.Errorf("%s: loss %v: dropped %d, passed %d", name, p, dropped, passed)
				}
			}
			check("egress", st.EgressDropped, st.EgressPassed, tc.egress)
			check("ingress", st.IngressDropped, st.IngressPassed, tc.ingress)
			if st.EgressLost != st.EgressDropped || st.IngressLost != st.IngressDropped {
				t.Errorf("Lost counters %d/%d, want %d/%d", st.EgressLost, st.IngressLost, st.EgressDropped, st.IngressDropped)
			}
			if got := uint64(dev.nWrites); got != st.EgressPassed {
				t.Errorf("device got %d packets, EgressPassed %d", got, st.EgressPassed)
			}
		})
	}
}

// Packet kinds for rule tests.
var (
	syn    = tcpPacket(header.TCPFlagSyn, 0, 0)
	synack = tcpPacket(header.TCPFlagSyn|header.TCPFlagAck, 0, 0)
	ack    = tcpPacket(header.TCPFlagAck, 0, 0)
	data   = tcpPacket(header.TCPFlagAck|header.TCPFlagPsh, 100, 0)
	fin    = tcpPacket(header.TCPFlagFin|header.TCPFlagAck, 0, 0)
	finDat = tcpPacket(header.TCPFlagFin|header.TCPFlagAck|header.TCPFlagPsh, 5, 0)
	rst    = tcpPacket(header.TCPFlagRst, 0, 0)
)

// numbered returns a copy of pkt with sequence number i (checksum not fixed:
// the rules do not look at it).
func numbered(pkt []byte, i int) []byte {
	p := slices.Clone(pkt)
	binary.BigEndian.PutUint32(p[header.IPv4MinimumSize+4:], uint32(i))
	return p
}

func TestRules(t *testing.T) {
	E, I := impair.Egress, impair.Ingress
	for _, tc := range []struct {
		name  string
		rules []impair.Rule
		pkts  [][]byte
		drops []int // indexes of pkts dropped
	}{
		{
			name:  "first two SYN-ACKs",
			rules: []impair.Rule{{Dir: E, Match: impair.MatchSYNACK, Count: 2}},
			pkts:  [][]byte{syn, synack, ack, synack, synack, synack},
			drops: []int{1, 3},
		},
		{
			name:  "first FIN",
			rules: []impair.Rule{{Dir: E, Match: impair.MatchFIN, Count: 1}},
			pkts:  [][]byte{ack, data, fin, fin, finDat},
			drops: []int{2},
		},
		{
			name:  "FIN with data is a FIN",
			rules: []impair.Rule{{Dir: E, Match: impair.MatchFIN, Count: 1}},
			pkts:  [][]byte{data, finDat, fin},
			drops: []int{1},
		},
		{
			name:  "3rd data segment",
			rules: []impair.Rule{{Dir: E, Match: impair.MatchData, Skip: 2, Count: 1}},
			pkts:  [][]byte{syn, ack, data, ack, data, fin, data, data},
			drops: []int{6},
		},
		{
			name:  "data counts FIN with data, not bare FIN",
			rules: []impair.Rule{{Dir: E, Match: impair.MatchData, Skip: 1, Count: 1}},
			pkts:  [][]byte{data, fin, finDat, data},
			drops: []int{2},
		},
		{
			name: "3rd and 5th data: rules count independently",
			rules: []impair.Rule{
				{Dir: E, Match: impair.MatchData, Skip: 2, Count: 1},
				{Dir: E, Match: impair.MatchData, Skip: 4, Count: 1},
			},
			pkts:  [][]byte{data, data, data, data, data, data},
			drops: []int{2, 4},
		},
		{
			name:  "SYN is not SYN-ACK",
			rules: []impair.Rule{{Dir: E, Match: impair.MatchSYN, Count: 5}},
			pkts:  [][]byte{synack, syn, ack, syn},
			drops: []int{1, 3},
		},
		{
			name:  "RST",
			rules: []impair.Rule{{Dir: E, Match: impair.MatchRST, Count: 1}},
			pkts:  [][]byte{ack, rst, rst},
			drops: []int{1},
		},
		{
			name:  "any, after skipping",
			rules: []impair.Rule{{Dir: E, Match: impair.MatchAny, Skip: 3, Count: 2}},
			pkts:  [][]byte{syn, ack, {0x45}, data, {0x60, 0}, fin},
			drops: []int{3, 4},
		},
		{
			name:  "ingress rule leaves egress alone",
			rules: []impair.Rule{{Dir: I, Match: impair.MatchAny, Count: 10}},
			pkts:  [][]byte{syn, synack, data, fin},
			drops: nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := &fakeDev{}
			d := mustWrap(t, dev, impair.Config{Rules: tc.rules})
			for i, p := range tc.pkts {
				if len(p) >= header.IPv4MinimumSize+header.TCPMinimumSize {
					p = numbered(p, i)
				}
				if err := d.WritePacket(p); err != nil {
					t.Fatalf("WritePacket %d: %v", i, err)
				}
			}
			var passed []int
			for _, p := range dev.written {
				if len(p) >= header.IPv4MinimumSize+header.TCPMinimumSize {
					passed = append(passed, int(seqOf(p)))
				} else {
					passed = append(passed, -1) // malformed: not numbered
				}
			}
			var want []int
			for i, p := range tc.pkts {
				if !slices.Contains(tc.drops, i) {
					if len(p) >= header.IPv4MinimumSize+header.TCPMinimumSize {
						want = append(want, i)
					} else {
						want = append(want, -1)
					}
				}
			}
			if !slices.Equal(passed, want) {
				t.Errorf("passed %v, want %v", passed, want)
			}
			st := d.Stats()
			if got := st.EgressDropped; got != uint64(len(tc.drops)) {
				t.Errorf("EgressDropped %d, want %d", got, len(tc.drops))
			}
			var ruleDrops uint64
			for _, rs := range st.ByRule {
				ruleDrops += rs.Dropped
			}
			if ruleDrops != uint64(len(tc.drops)) {
				t.Errorf("rules dropped %d, want %d", ruleDrops, len(tc.drops))
			}

			// The same rules on the ingress side.
			for i := range tc.rules {
				tc.rules[i].Dir = 3 - tc.rules[i].Dir // swap Egress and Ingress
			}
			dev = &fakeDev{toRead: tc.pkts}
			d = mustWrap(t, dev, impair.Config{Rules: tc.rules})
			buf := make([]byte, tun.DefaultMTU)
			var got []int
			for {
				n, err := d.ReadPacket(buf)
				if err != nil {
					break
				}
				got = append(got, n)
			}
			var wantLens []int
			for i, p := range tc.pkts {
				if !slices.Contains(tc.drops, i) {
					wantLens = append(wantLens, len(p))
				}
			}
			if st := d.Stats(); st.IngressDropped != uint64(len(tc.drops)) || !slices.Equal(got, wantLens) {
				t.Errorf("ingress: dropped %d, read lengths %v; want %d, %v", st.IngressDropped, got, len(tc.drops), wantLens)
			}
		})
	}
}

// malformed returns packets no TCP rule may match.
func malformed() map[string][]byte {
	mod := func(f func(p []byte) []byte) []byte { return f(slices.Clone(fin)) }
	return map[string][]byte{
		"nil":              nil,
		"one byte":         {0x45},
		"19 bytes":         fin[:19],
		"IP header only":   fin[:20],
		"truncated TCP":    mod(func(p []byte) []byte { return p[:30] }),
		"IPv6":             mod(func(p []byte) []byte { p[0] = 0x65; return p }),
		"IHL 4":            mod(func(p []byte) []byte { p[0] = 0x44; return p }),
		"IHL beyond total": mod(func(p []byte) []byte { p[0] = 0x4f; p[2], p[3] = 0, 40; return p }),
		"total > len":      mod(func(p []byte) []byte { p[2], p[3] = 0x05, 0xdc; return p }),
		"total < IHL":      mod(func(p []byte) []byte { p[2], p[3] = 0, 10; return p }),
		"total cuts TCP":   mod(func(p []byte) []byte { p[2], p[3] = 0, 30; return p }),
		"UDP":              mod(func(p []byte) []byte { p[9] = 17; return p }),
		"later fragment":   mod(func(p []byte) []byte { p[7] = 1; return p }),
		"data offset 4":    mod(func(p []byte) []byte { p[32] = 4 << 4; return p }),
		"data offset 15":   mod(func(p []byte) []byte { p[32] = 15 << 4; return p }),
		"all ones":         mod(func(p []byte) []byte { return slices.Repeat([]byte{0xff}, 60) }),
	}
}

func TestMatches(t *testing.T) {
	all := []impair.Match{impair.MatchAny, impair.MatchData, impair.MatchSYN, impair.MatchSYNACK, impair.MatchFIN, impair.MatchRST}
	for _, tc := range []struct {
		name string
		pkt  []byte
		want []impair.Match
	}{
		{"SYN", syn, []impair.Match{impair.MatchAny, impair.MatchSYN}},
		{"SYN-ACK", synack, []impair.Match{impair.MatchAny, impair.MatchSYNACK}},
		{"ACK", ack, []impair.Match{impair.MatchAny}},
		{"data", data, []impair.Match{impair.MatchAny, impair.MatchData}},
		{"FIN", fin, []impair.Match{impair.MatchAny, impair.MatchFIN}},
		{"FIN+data", finDat, []impair.Match{impair.MatchAny, impair.MatchData, impair.MatchFIN}},
		{"RST", rst, []impair.Match{impair.MatchAny, impair.MatchRST}},
		// Bytes past the IPv4 total length are not payload.
		{"padded ACK", append(slices.Clone(ack), 0, 0, 0, 0), []impair.Match{impair.MatchAny}},
	} {
		for _, m := range all {
			if got, want := m.Matches(tc.pkt), slices.Contains(tc.want, m); got != want {
				t.Errorf("%v.Matches(%s) = %v, want %v", m, tc.name, got, want)
			}
		}
	}
	for name, p := range malformed() {
		for _, m := range all {
			if got, want := m.Matches(p), m == impair.MatchAny; got != want {
				t.Errorf("%v.Matches(%s) = %v, want %v", m, name, got, want)
			}
		}
	}
	if s := impair.Match(0).String(); s != "Match(0)" {
		t.Errorf("Match(0).String() = %q", s)
	}
	if s := impair.MatchSYNACK.String(); s != "SYN-ACK" {
		t.Errorf("MatchSYNACK.String() = %q", s)
	}
}

func TestMalformedPassUnmatched(t *testing.T) {
	var rules []impair.Rule
	for _, dir := range []impair.Direction{impair.Egress, impair.Ingress} {
		for _, m := range []impair.Match{impair.MatchData, impair.MatchSYN, impair.MatchSYNACK, impair.MatchFIN, impair.MatchRST} {
			rules = append(rules, impair.Rule{Dir: dir, Match: m, Count: 1000})
		}
	}
	dev := &fakeDev{}
	d := mustWrap(t, dev, impair.Config{Rules: rules})
	n := 0
	for name, p := range malformed() {
		err := d.WritePacket(p)
		if len(p) == 0 {
			if !errors.Is(err, tun.ErrPacketSize) {
				t.Errorf("%s: WritePacket error %v, want ErrPacketSize", name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: WritePacket: %v", name, err)
		}
		n++
		dev.toRead = append(dev.toRead, p)
	}
	buf := make([]byte, tun.DefaultMTU)
	for {
		if _, err := d.ReadPacket(buf); err != nil {
			break
		}
	}
	st := d.Stats()
	if st.EgressDropped != 0 || st.EgressPassed != uint64(n) || st.IngressDropped != 0 || st.IngressPassed != uint64(n) {
		t.Errorf("stats %+v, want %d passed each way, none dropped", st, n)
	}
	for _, rs := range st.ByRule {
		if rs.Matched != 0 {
			t.Errorf("rule %+v matched a malformed packet", rs)
		}
	}
}

func FuzzMatches(f *testing.F) {
	for _, p := range malformed() {
		f.Add(p)
	}
	for _, p := range [][]byte{syn, synack, ack, data, fin, finDat, rst} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		for m := impair.Match(0); m < 10; m++ {
			m.Matches(p) // must not panic
		}
	})
}

func TestHooksAndOnDrop(t *testing.T) {
	dev := &fakeDev{toRead: [][]byte{ack, data, rst, fin}}
	type drop struct {
		dir impair.Direction
		seq int
	}
	var drops []drop
	var d *impair.Device
	d = mustWrap(t, dev, impair.Config{
		DropEgress: func(pkt []byte) bool {
			if impair.MatchSYN.Matches(pkt) {
				// Hooks run without locks: they may arm rules.
				if _, err := d.DropNext(impair.Egress, impair.MatchFIN, 1); err != nil {
					t.Error(err)
				}
				return true
			}
			return false
		},
		DropIngress: impair.MatchRST.Matches,
		Rules:       []impair.Rule{{Dir: impair.Egress, Match: impair.MatchData, Count: 1}},
		OnDrop: func(dir impair.Direction, pkt []byte) {
			drops = append(drops, drop{dir, int(seqOf(pkt))})
			_ = d.Stats() // no deadlock
		},
	})
	for i, p := range [][]byte{ack, syn, data, fin, fin} {
		if err := d.WritePacket(numbered(p, i)); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, tun.DefaultMTU)
	var read []int
	for {
		n, err := d.ReadPacket(buf)
		if err != nil {
			break
		}
		read = append(read, n)
	}
	want := []drop{{impair.Egress, 1}, {impair.Egress, 2}, {impair.Egress, 3}, {impair.Ingress, 0}}
	if !slices.Equal(drops, want) {
		t.Errorf("drops %v, want %v", drops, want)
	}
	if want := []int{len(ack), len(data), len(fin)}; !slices.Equal(read, want) {
		t.Errorf("read lengths %v, want %v", read, want)
	}
	st := d.Stats()
	if st.EgressHooked != 1 || st.IngressHooked != 1 || st.EgressDropped != 3 || st.IngressDropped != 1 || st.EgressPassed != 2 || st.IngressPassed != 3 {
		t.Errorf("stats %+v", st)
	}
	if len(st.ByRule) != 2 || st.ByRule[0].ID >= st.ByRule[1].ID ||
		st.ByRule[0].Rule.Match != impair.MatchData || st.ByRule[1].Rule.Match != impair.MatchFIN ||
		!st.ByRule[0].Spent() || !st.ByRule[1].Spent() || st.ByRule[1].Matched != 1 {
		t.Errorf("ByRule %+v", st.ByRule)
	}
	d.ClearRules()
	if st := d.Stats(); len(st.ByRule) != 0 {
		t.Errorf("after ClearRules: %+v", st.ByRule)
	}
}

func TestTwoCausesCountOnce(t *testing.T) {
	dev := &fakeDev{}
	d := mustWrap(t, dev, impair.Config{
		EgressLoss: 1,
		DropEgress: func([]byte) bool { return true },
		Rules:      []impair.Rule{{Dir: impair.Egress, Match: impair.MatchFIN, Count: 1}},
	})
	if err := d.WritePacket(fin); err != nil {
		t.Fatal(err)
	}
	st := d.Stats()
	if st.EgressDropped != 1 || st.EgressLost != 1 || st.EgressHooked != 1 || st.ByRule[0].Dropped != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestRuntimeArming arms "drop the next FIN" from another goroutine in the
// middle of a connection-like exchange over a pipe.
func TestRuntimeArming(t *testing.T) {
	stackEnd, wireEnd := tuntest.Pipe(0)
	d := mustWrap(t, stackEnd, impair.Config{Seed: 1})
	defer d.Close()

	seq := 0
	send := func(p []byte) {
		t.Helper()
		if err := d.WritePacket(numbered(p, seq)); err != nil {
			t.Fatal(err)
		}
		seq++
	}
	send(syn)  // 0
	send(data) // 1
	send(fin)  // 2: passes, nothing armed
	armed := make(chan struct{})
	go func() { // arm from another goroutine, as a test driver would
		defer close(armed)
		if _, err := d.DropNext(impair.Egress, impair.MatchFIN, 1); err != nil {
			t.Error(err)
		}
	}()
	<-armed
	send(data) // 3
	send(fin)  // 4: dropped
	send(fin)  // 5: the retransmission passes
	send(rst)  // 6

	var seqs []int
	buf := make([]byte, tun.DefaultMTU)
	for range 6 {
		n, err := wireEnd.ReadPacket(buf)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, int(seqOf(buf[:n])))
	}
	if want := []int{0, 1, 2, 3, 5, 6}; !slices.Equal(seqs, want) {
		t.Errorf("wire saw %v, want %v", seqs, want)
	}
	if st := d.Stats(); st.EgressPassed != 6 || st.EgressDropped != 1 || len(st.ByRule) != 1 || st.ByRule[0].Dropped != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestConcurrent exercises ReadPacket, WritePacket, rule arming and Stats
// on different goroutines, for the race detector.
func TestConcurrent(t *testing.T) {
	stackEnd, wireEnd := tuntest.Pipe(0)
	d := mustWrap(t, stackEnd, impair.Config{Seed: 9, EgressLoss: 0.1, IngressLoss: 0.1})
	const n = 2000
	var writers, readers sync.WaitGroup
	writers.Go(func() { // the stack writes
		for i := range n {
			if err := d.WritePacket(numbered(data, i)); err != nil {
				t.Error(err)
				return
			}
		}
	})
	writers.Go(func() { // the peer writes
		for i := range n {
			if err := wireEnd.WritePacket(numbered(fin, i)); err != nil {
				t.Error(err)
				return
			}
		}
	})
	writers.Go(func() { // a test driver arms rules and reads stats
		for range 100 {
			d.DropNext(impair.Egress, impair.MatchData, 1)
			d.DropNext(impair.Ingress, impair.MatchFIN, 1)
			d.SetLoss(impair.Egress, 0.2)
			_ = d.Stats()
		}
	})
	drain := func(dev tun.Device) {
		buf := make([]byte, tun.DefaultMTU)
		for {
			if _, err := dev.ReadPacket(buf); err != nil {
				return
			}
		}
	}
	readers.Go(func() { drain(d) })       // the stack reads
	readers.Go(func() { drain(wireEnd) }) // the peer reads
	writers.Wait()
	d.Close() // unblocks the readers
	readers.Wait()

	st := d.Stats()
	if st.EgressPassed+st.EgressDropped != n || st.IngressPassed+st.IngressDropped > n {
		t.Errorf("stats %+v", st)
	}
}

func TestPassThroughErrors(t *testing.T) {
	dev := &fakeDev{}
	d := mustWrap(t, dev, impair.Config{EgressLoss: 1})
	if err := d.WritePacket(nil); !errors.Is(err, tun.ErrPacketSize) {
		t.Errorf("WritePacket(nil) = %v, want ErrPacketSize", err)
	}
	if err := d.WritePacket(make([]byte, tun.DefaultMTU+1)); !errors.Is(err, tun.ErrPacketSize) {
		t.Errorf("WritePacket(MTU+1) = %v, want ErrPacketSize", err)
	}
	if st := d.Stats(); st.EgressDropped != 0 || st.EgressPassed != 0 {
		t.Errorf("size errors counted: %+v", st)
	}
	if d.MTU() != tun.DefaultMTU || d.Name() != "fake" {
		t.Errorf("MTU %d, Name %q", d.MTU(), d.Name())
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.WritePacket(fin); !errors.Is(err, net.ErrClosed) {
		t.Errorf("WritePacket after Close = %v, want net.ErrClosed", err)
	}
	if _, err := d.ReadPacket(make([]byte, 10)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("ReadPacket after Close = %v, want net.ErrClosed", err)
	}

	// A truncated read is returned as it is, unimpaired.
	stackEnd, wireEnd := tuntest.Pipe(0)
	d = mustWrap(t, stackEnd, impair.Config{IngressLoss: 1})
	defer d.Close()
	wireEnd.WritePacket(fin)
	n, err := d.ReadPacket(make([]byte, 10))
	if n != 10 || !errors.Is(err, io.ErrShortBuffer) {
		t.Errorf("short read = %d, %v; want 10, ErrShortBuffer", n, err)
	}
}

// BenchmarkImpair measures the cost of the impairment per egress packet:
// one 1500-byte packet written at one end of a pipe and read at the other,
// without and with a Device (1% loss and two armed rules that never fire).
func BenchmarkImpair(b *testing.B) {
	pkt := tcpPacket(header.TCPFlagAck, tun.DefaultMTU-40, 1)
	for _, wrap := range []bool{false, true} {
		b.Run(fmt.Sprintf("impair=%v", wrap), func(b *testing.B) {
			stackEnd, wireEnd := tuntest.NewPipe(tuntest.PipeConfig{})
			var dev tun.Device = stackEnd
			if wrap {
				dev = mustWrap(b, stackEnd, impair.Config{
					Seed:       1,
					EgressLoss: 0.01,
					Rules: []impair.Rule{
						{Dir: impair.Egress, Match: impair.MatchFIN, Count: 1},
						{Dir: impair.Egress, Match: impair.MatchSYNACK, Count: 1},
					},
				})
			}
			defer dev.Close()
			buf := make([]byte, tun.DefaultMTU)
			b.ReportAllocs()
			for b.Loop() {
				if err := dev.WritePacket(pkt); err != nil {
					b.Fatal(err)
				}
				// 1% of packets are dropped: read only what crossed.
				if stackEnd.Stats().Sent > wireEnd.Stats().Received {
					if _, err := wireEnd.ReadPacket(buf); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// TestNotPollable checks that a wrapper of a device that cannot be polled says
// so, so that the stack keeps its reader goroutine.
func TestNotPollable(t *testing.T) {
	a, b := tuntest.Pipe(1500)
	defer b.Close()
	d, err := impair.Wrap(a, impair.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.ReadFD(); !errors.Is(err, tun.ErrNotPollable) {
		t.Errorf("ReadFD() error = %v, want ErrNotPollable", err)
	}
	if _, err := d.ReadPacketNonblock(make([]byte, 1500)); !errors.Is(err, tun.ErrNotPollable) {
		t.Errorf("ReadPacketNonblock() error = %v, want ErrNotPollable", err)
	}
}
