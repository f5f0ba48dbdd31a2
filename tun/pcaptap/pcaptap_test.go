package pcaptap_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/tcpwheel/tcpwheel/internal/tcpip"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"

	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/pcaptap"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

var (
	stackAddr = tcpip.AddrFrom4([4]byte{198, 18, 0, 2})
	peerAddr  = tcpip.AddrFrom4([4]byte{198, 18, 0, 1})
)

// tcpPacket builds a valid IPv4/TCP packet from src to dst with the given
// flags, sequence number and payload length.
func tcpPacket(src, dst tcpip.Address, flags header.TCPFlags, seq uint32, payload int) []byte {
	pkt := make([]byte, header.IPv4MinimumSize+header.TCPMinimumSize+payload)
	ip := header.IPv4(pkt)
	ip.Encode(&header.IPv4Fields{
		TotalLength: uint16(len(pkt)),
		TTL:         64,
		Protocol:    uint8(header.TCPProtocolNumber),
		SrcAddr:     src,
		DstAddr:     dst,
	})
	ip.SetChecksum(^ip.CalculateChecksum())
	seg := header.TCP(pkt[header.IPv4MinimumSize:])
	for i := range payload {
		seg[header.TCPMinimumSize+i] = byte('a' + i%26)
	}
	sport, dport := uint16(40000), uint16(80)
	if src == peerAddr {
		sport, dport = dport, sport
	}
	seg.Encode(&header.TCPFields{
		SrcPort:    sport,
		DstPort:    dport,
		SeqNum:     seq,
		AckNum:     7,
		DataOffset: header.TCPMinimumSize,
		Flags:      flags,
		WindowSize: 65535,
	})
	xsum := header.PseudoHeaderChecksum(header.TCPProtocolNumber, src, dst, uint16(len(seg)))
	xsum = checksum.Checksum(seg.Payload(), xsum)
	seg.SetChecksum(^seg.CalculateChecksum(xsum))
	return pkt
}

// manualClock returns a Now that starts at a fixed instant and advances by
// step on every call, and the list of instants it returned.
func manualClock(step time.Duration) (now func() time.Time, returned func() []time.Time) {
	var mu sync.Mutex
	t := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
	var out []time.Time
	now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(step)
		out = append(out, t)
		return t
	}
	return now, func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), out...)
	}
}

func mustWrap(t testing.TB, dev tun.Device, w io.Writer, cfg pcaptap.Config) *pcaptap.Tap {
	t.Helper()
	tap, err := pcaptap.Wrap(dev, w, cfg)
	if err != nil {
		t.Fatalf("Wrap: %v", err)
	}
	return tap
}

type record struct {
	ci   gopacket.CaptureInfo
	data []byte
}

func readCapture(t *testing.T, r io.Reader) (*pcapgo.Reader, []record) {
	t.Helper()
	pr, err := pcapgo.NewReader(r)
	if err != nil {
		t.Fatalf("pcapgo.NewReader: %v", err)
	}
	var recs []record
	for {
		data, ci, err := pr.ReadPacketData()
		if err == io.EOF {
			return pr, recs
		}
		if err != nil {
			t.Fatalf("ReadPacketData after %d records: %v", len(recs), err)
		}
		recs = append(recs, record{ci, data})
	}
}

// exchange passes a small TCP conversation through tap (on the stack's side
// of a pipe) and returns the packets in the order the tap saw them.
func exchange(t *testing.T, tap tun.Device, wire tun.Device) [][]byte {
	t.Helper()
	steps := []struct {
		egress bool
		pkt    []byte
	}{
		{true, tcpPacket(stackAddr, peerAddr, header.TCPFlagSyn, 100, 0)},
		{false, tcpPacket(peerAddr, stackAddr, header.TCPFlagSyn|header.TCPFlagAck, 500, 0)},
		{true, tcpPacket(stackAddr, peerAddr, header.TCPFlagAck, 101, 0)},
		{true, tcpPacket(stackAddr, peerAddr, header.TCPFlagAck|header.TCPFlagPsh, 101, 1400)},
		{false, tcpPacket(peerAddr, stackAddr, header.TCPFlagAck, 501, 0)},
		{true, tcpPacket(stackAddr, peerAddr, header.TCPFlagFin|header.TCPFlagAck, 1501, 0)},
	}
	buf := make([]byte, tun.DefaultMTU)
	var seen [][]byte
	for i, s := range steps {
		from, to := tap, wire
		if !s.egress {
			from, to = wire, tap
		}
		if err := from.WritePacket(s.pkt); err != nil {
			t.Fatalf("step %d: WritePacket: %v", i, err)
		}
		n, err := to.ReadPacket(buf)
		if err != nil {
			t.Fatalf("step %d: ReadPacket: %v", i, err)
		}
		if !bytes.Equal(buf[:n], s.pkt) {
			t.Fatalf("step %d: packet changed in transit", i)
		}
		seen = append(seen, s.pkt)
	}
	return seen
}

func TestRoundTrip(t *testing.T) {
	stackEnd, wireEnd := tuntest.Pipe(0)
	now, stamps := manualClock(1500*time.Microsecond + 7*time.Nanosecond)
	var capture bytes.Buffer
	tap := mustWrap(t, stackEnd, &capture, pcaptap.Config{Now: now})
	sent := exchange(t, tap, wireEnd)
	if err := tap.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := tap.Err(); err != nil {
		t.Fatalf("Err: %v", err)
	}

	raw := capture.Bytes()
	if got := binary.LittleEndian.Uint32(raw[0:4]); got != 0xa1b23c4d {
		t.Errorf("magic %#x, want 0xa1b23c4d (nanosecond pcap)", got)
	}
	if got := binary.LittleEndian.Uint32(raw[20:24]); got != 101 {
		t.Errorf("link type %d in file header, want 101 (LINKTYPE_RAW)", got)
	}

	pr, recs := readCapture(t, bytes.NewReader(raw))
	if pr.LinkType() != layers.LinkTypeRaw {
		t.Errorf("LinkType %v, want %v", pr.LinkType(), layers.LinkTypeRaw)
	}
	if pr.Snaplen() != pcaptap.DefaultSnapLen {
		t.Errorf("Snaplen %d, want %d", pr.Snaplen(), pcaptap.DefaultSnapLen)
	}
	// Not pr.Resolution(): gopacket v1.1.19 has it backwards (it reports
	// microseconds for a nanosecond file). The magic number and exact
	// timestamps show the resolution.
	ts := stamps()
	if len(recs) != len(sent) || len(ts) != len(sent) {
		t.Fatalf("%d records, %d timestamps taken, want %d", len(recs), len(ts), len(sent))
	}
	var bytesSent uint64
	for i, r := range recs {
		if !bytes.Equal(r.data, sent[i]) {
			t.Errorf("record %d: bytes differ", i)
		}
		if r.ci.CaptureLength != len(sent[i]) || r.ci.Length != len(sent[i]) {
			t.Errorf("record %d: lengths %d/%d, want %d", i, r.ci.CaptureLength, r.ci.Length, len(sent[i]))
		}
		if !r.ci.Timestamp.Equal(ts[i]) {
			t.Errorf("record %d: timestamp %v, want %v", i, r.ci.Timestamp, ts[i])
		}
		bytesSent += uint64(len(sent[i]))
	}
	if st := tap.Stats(); st != (pcaptap.Stats{Packets: uint64(len(sent)), Bytes: bytesSent}) {
		t.Errorf("Stats %+v, want %d packets, %d bytes", st, len(sent), bytesSent)
	}
}

func TestSnapLen(t *testing.T) {
	stackEnd, wireEnd := tuntest.Pipe(0)
	defer wireEnd.Close()
	var capture bytes.Buffer
	tap := mustWrap(t, stackEnd, &capture, pcaptap.Config{SnapLen: 64})
	big := tcpPacket(stackAddr, peerAddr, header.TCPFlagAck, 1, 1460)
	small := tcpPacket(stackAddr, peerAddr, header.TCPFlagAck, 1, 0)
	for _, p := range [][]byte{big, small} {
		if err := tap.WritePacket(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := tap.Flush(); err != nil {
		t.Fatal(err)
	}
	pr, recs := readCapture(t, &capture)
	if pr.Snaplen() != 64 {
		t.Errorf("Snaplen %d, want 64", pr.Snaplen())
	}
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	if r := recs[0]; r.ci.CaptureLength != 64 || r.ci.Length != len(big) || !bytes.Equal(r.data, big[:64]) {
		t.Errorf("big: lengths %d/%d, want 64/%d", r.ci.CaptureLength, r.ci.Length, len(big))
	}
	if r := recs[1]; r.ci.CaptureLength != len(small) || r.ci.Length != len(small) || !bytes.Equal(r.data, small) {
		t.Errorf("small: lengths %d/%d, want %d/%d", r.ci.CaptureLength, r.ci.Length, len(small), len(small))
	}
	if st := tap.Stats(); st.Packets != 2 || st.Bytes != 64+uint64(len(small)) {
		t.Errorf("Stats %+v", st)
	}
}

type failWriter struct {
	okWrites int // Write calls that succeed before all others fail
	calls    int
}

var errDiskFull = errors.New("disk full")

func (w *failWriter) Write(p []byte) (int, error) {
	w.calls++
	if w.calls > w.okWrites {
		return 0, errDiskFull
	}
	return len(p), nil
}

func TestConfigErrors(t *testing.T) {
	dev, _ := tuntest.Pipe(0)
	for _, snap := range []int{-1, pcaptap.MaxSnapLen + 1} {
		if _, err := pcaptap.Wrap(dev, io.Discard, pcaptap.Config{SnapLen: snap}); !errors.Is(err, pcaptap.ErrConfig) {
			t.Errorf("SnapLen %d: error %v, want ErrConfig", snap, err)
		}
	}
	if _, err := pcaptap.Wrap(nil, io.Discard, pcaptap.Config{}); !errors.Is(err, pcaptap.ErrConfig) {
		t.Errorf("nil device: error %v, want ErrConfig", err)
	}
	if _, err := pcaptap.Wrap(dev, nil, pcaptap.Config{}); !errors.Is(err, pcaptap.ErrConfig) {
		t.Errorf("nil writer: error %v, want ErrConfig", err)
	}
	if _, err := pcaptap.Wrap(dev, &failWriter{}, pcaptap.Config{}); !errors.Is(err, errDiskFull) {
		t.Errorf("failing header write: error %v, want %v", err, errDiskFull)
	}
	if _, err := pcaptap.Create(filepath.Join(t.TempDir(), "no", "such", "dir.pcap"), dev, pcaptap.Config{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Create in a missing directory: error %v, want os.ErrNotExist", err)
	}
}

// TestFailingWriter checks that a capture that cannot be written does not
// disturb the packets.
func TestFailingWriter(t *testing.T) {
	stackEnd, wireEnd := tuntest.Pipe(0)
	tap := mustWrap(t, stackEnd, &failWriter{okWrites: 1}, pcaptap.Config{}) // the header gets through
	pkt := tcpPacket(stackAddr, peerAddr, header.TCPFlagAck, 1, 1460)
	const n = 100 // 150 kB: more than the buffer holds
	buf := make([]byte, tun.DefaultMTU)
	for i := range n {
		if err := tap.WritePacket(pkt); err != nil {
			t.Fatalf("WritePacket %d: %v", i, err)
		}
		if m, err := wireEnd.ReadPacket(buf); err != nil || !bytes.Equal(buf[:m], pkt) {
			t.Fatalf("packet %d did not cross: %v", i, err)
		}
	}
	st := tap.Stats()
	if st.WriteErrors == 0 || st.Packets+st.WriteErrors != n {
		t.Errorf("Stats %+v: want some write errors, %d in all", st, n)
	}
	if err := tap.Err(); !errors.Is(err, errDiskFull) {
		t.Errorf("Err() = %v, want %v", err, errDiskFull)
	}
	if err := tap.Flush(); !errors.Is(err, errDiskFull) {
		t.Errorf("Flush() = %v, want %v", err, errDiskFull)
	}
	if err := tap.Close(); !errors.Is(err, errDiskFull) {
		t.Errorf("Close() = %v, want %v", err, errDiskFull)
	}
}

func TestDeviceErrors(t *testing.T) {
	stackEnd, wireEnd := tuntest.Pipe(0)
	var capture bytes.Buffer
	tap := mustWrap(t, stackEnd, &capture, pcaptap.Config{})
	if tap.MTU() != tun.DefaultMTU || tap.Name() != "pipe-a" {
		t.Errorf("MTU %d, Name %q", tap.MTU(), tap.Name())
	}
	// Rejected by the device: not recorded.
	if err := tap.WritePacket(make([]byte, tun.DefaultMTU+1)); !errors.Is(err, tun.ErrPacketSize) {
		t.Errorf("WritePacket(MTU+1) = %v, want ErrPacketSize", err)
	}
	// A truncated read is recorded as read.
	pkt := tcpPacket(peerAddr, stackAddr, header.TCPFlagAck, 1, 100)
	if err := wireEnd.WritePacket(pkt); err != nil {
		t.Fatal(err)
	}
	if n, err := tap.ReadPacket(make([]byte, 50)); n != 50 || !errors.Is(err, io.ErrShortBuffer) {
		t.Errorf("short ReadPacket = %d, %v; want 50, ErrShortBuffer", n, err)
	}
	if err := tap.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tap.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := tap.ReadPacket(make([]byte, 50)); err == nil {
		t.Errorf("ReadPacket after Close succeeded")
	}
	if err := tap.Flush(); err != nil {
		t.Errorf("Flush after Close: %v", err)
	}
	_, recs := readCapture(t, &capture)
	if len(recs) != 1 || recs[0].ci.CaptureLength != 50 || !bytes.Equal(recs[0].data, pkt[:50]) {
		t.Errorf("records %+v, want one of 50 bytes", recs)
	}
}

func TestCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.pcap")
	stackEnd, wireEnd := tuntest.Pipe(0)
	tap, err := pcaptap.Create(path, stackEnd, pcaptap.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sent := exchange(t, tap, wireEnd)
	if err := tap.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, recs := readCapture(t, f)
	if len(recs) != len(sent) {
		t.Errorf("%d records, want %d", len(recs), len(sent))
	}
}

// TestConcurrent records from a reading and a writing goroutine, for the
// race detector.
func TestConcurrent(t *testing.T) {
	stackEnd, wireEnd := tuntest.Pipe(0)
	var capture bytes.Buffer
	tap := mustWrap(t, stackEnd, &capture, pcaptap.Config{})
	const n = 500
	out := tcpPacket(stackAddr, peerAddr, header.TCPFlagAck, 1, 10)
	in := tcpPacket(peerAddr, stackAddr, header.TCPFlagAck, 1, 20)
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, tun.DefaultMTU)
		for range n {
			if err := tap.WritePacket(out); err != nil {
				t.Error(err)
			}
			if _, err := wireEnd.ReadPacket(buf); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Go(func() {
		buf := make([]byte, tun.DefaultMTU)
		for range n {
			if err := wireEnd.WritePacket(in); err != nil {
				t.Error(err)
			}
			if _, err := tap.ReadPacket(buf); err != nil {
				t.Error(err)
			}
			_ = tap.Stats()
		}
	})
	wg.Wait()
	if err := tap.Close(); err != nil {
		t.Fatal(err)
	}
	_, recs := readCapture(t, &capture)
	var nOut, nIn int
	for _, r := range recs {
		switch {
		case bytes.Equal(r.data, out):
			nOut++
		case bytes.Equal(r.data, in):
			nIn++
		default:
			t.Fatalf("unexpected record %x", r.data)
		}
	}
	if nOut != n || nIn != n {
		t.Errorf("recorded %d out, %d in; want %d each", nOut, nIn, n)
	}
}

// TestTcpdump checks that tcpdump reads the capture: one line per packet,
// decoded as TCP.
func TestTcpdump(t *testing.T) {
	tcpdump, err := exec.LookPath("tcpdump")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("tcpdump is required in CI: %v", err)
		}
		t.Skipf("tcpdump not found: %v", err)
	}
	path := filepath.Join(t.TempDir(), "tcpdump.pcap")
	stackEnd, wireEnd := tuntest.Pipe(0)
	tap, err := pcaptap.Create(path, stackEnd, pcaptap.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sent := exchange(t, tap, wireEnd)
	if err := tap.Close(); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(tcpdump, "-nr", path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tcpdump -nr: %v\n%s", err, stderr.String())
	}
	t.Logf("tcpdump:\n%s%s", stderr.String(), stdout.String())
	if !strings.Contains(stderr.String(), "RAW") {
		t.Errorf("tcpdump did not report link type RAW: %q", stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != len(sent) {
		t.Fatalf("tcpdump printed %d lines, want %d", len(lines), len(sent))
	}
	syn := regexp.MustCompile(`IP 198\.18\.0\.2\.40000 > 198\.18\.0\.1\.80: Flags \[S\], seq 100,`)
	if !syn.MatchString(lines[0]) {
		t.Errorf("first line %q: want a decoded SYN from 198.18.0.2.40000", lines[0])
	}
	if !strings.Contains(lines[1], "Flags [S.]") || !strings.Contains(lines[3], "length 1400") || !strings.Contains(lines[5], "Flags [F.]") {
		t.Errorf("tcpdump decoded:\n%s", stdout.String())
	}
}

// BenchmarkTap measures what the tap costs per packet: one 1500-byte packet
// written at one end of a pipe and read at the other, with no tap, a tap
// writing to io.Discard, and a tap writing to a file in b.TempDir() (about
// 1.5 kB per op: a one-second run writes a few GB).
func BenchmarkTap(b *testing.B) {
	pkt := tcpPacket(stackAddr, peerAddr, header.TCPFlagAck, 1, tun.DefaultMTU-40)
	for _, bc := range []struct {
		name string
		wrap func(b *testing.B, dev tun.Device) tun.Device
	}{
		{"none", func(b *testing.B, dev tun.Device) tun.Device { return dev }},
		{"discard", func(b *testing.B, dev tun.Device) tun.Device {
			return mustWrap(b, dev, io.Discard, pcaptap.Config{})
		}},
		{"file", func(b *testing.B, dev tun.Device) tun.Device {
			tap, err := pcaptap.Create(filepath.Join(b.TempDir(), "bench.pcap"), dev, pcaptap.Config{})
			if err != nil {
				b.Fatal(err)
			}
			return tap
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			stackEnd, wireEnd := tuntest.Pipe(0)
			dev := bc.wrap(b, stackEnd)
			defer dev.Close()
			buf := make([]byte, tun.DefaultMTU)
			b.SetBytes(int64(len(pkt)))
			b.ReportAllocs()
			for b.Loop() {
				if err := dev.WritePacket(pkt); err != nil {
					b.Fatal(err)
				}
				if _, err := wireEnd.ReadPacket(buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pkts/s")
			if tap, ok := dev.(*pcaptap.Tap); ok {
				if err := tap.Flush(); err != nil {
					b.Fatal(err)
				}
				if st := tap.Stats(); st.Packets < uint64(b.N) {
					b.Fatalf("recorded %d of %d packets", st.Packets, b.N)
				}
			}
		})
	}
}

// TestSameBytesAsPcapgo: the capture the tap writes itself (not with
// gopacket, whose layers package would put 5 MB of pointerful globals in
// every program that links the tap) is byte for byte what pcapgo's
// nanosecond Writer writes for the same packets, a truncated one included.
func TestSameBytesAsPcapgo(t *testing.T) {
	now, instants := manualClock(1500 * time.Microsecond)
	stackEnd, wireEnd := tuntest.Pipe(0)
	defer wireEnd.Close()
	var got bytes.Buffer
	tap := mustWrap(t, stackEnd, &got, pcaptap.Config{SnapLen: 100, Now: now})
	pkts := [][]byte{
		tcpPacket(stackAddr, peerAddr, header.TCPFlagSyn, 100, 0),
		tcpPacket(stackAddr, peerAddr, header.TCPFlagAck, 101, 1400),
		tcpPacket(stackAddr, peerAddr, header.TCPFlagAck, 1501, 3),
	}
	for _, p := range pkts {
		if err := tap.WritePacket(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := tap.Flush(); err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	pw := pcapgo.NewWriterNanos(&want)
	if err := pw.WriteFileHeader(100, layers.LinkTypeRaw); err != nil {
		t.Fatal(err)
	}
	for i, p := range pkts {
		n := min(len(p), 100)
		ci := gopacket.CaptureInfo{Timestamp: instants()[i], CaptureLength: n, Length: len(p)}
		if err := pw.WritePacket(ci, p[:n]); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("capture:\n got % x\nwant % x", got.Bytes(), want.Bytes())
	}
}
