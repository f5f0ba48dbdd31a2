package record_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/tcpwheel/tcpwheel/stack/flighttest"
	"github.com/tcpwheel/tcpwheel/stack/record"
)

var le = binary.LittleEndian

// linkRaw is LINKTYPE_RAW, the recordings' link type (Event.Port of their
// packets).
const linkRaw = 101

// block is one block of a file, as the tests walk them.
type block struct {
	off, len int
	typ      uint32
}

// blocks walks a well-formed little-endian pcapng file.
func blocks(t *testing.T, b []byte) []block {
	t.Helper()
	var bs []block
	for off := 0; off < len(b); {
		if len(b)-off < 12 {
			t.Fatalf("trailing %d bytes at %d", len(b)-off, off)
		}
		n := int(le.Uint32(b[off+4:]))
		bs = append(bs, block{off, n, le.Uint32(b[off:])})
		off += n
	}
	return bs
}

// custom frames payload as a custom block of pen, padded.
func custom(pen uint32, payload []byte) []byte {
	pad := (4 - len(payload)%4) % 4
	total := 12 + len(payload) + pad + 4
	b := le.AppendUint32(nil, 0x00000BAD)
	b = le.AppendUint32(b, uint32(total))
	b = le.AppendUint32(b, pen)
	b = append(b, payload...)
	b = append(b, make([]byte, pad)...)
	return le.AppendUint32(b, uint32(total))
}

// writtenEvents is what writerRecording wrote, as Parse should return it.
func writtenEvents() []record.Event {
	var want []record.Event
	blk := 4 // SHB, IDB, header, then the first events
	for i, e := range allKinds() {
		e.Block = blk
		want = append(want, e)
		if n, ok := packetAfter[i]; ok {
			blk++
			want = append(want, record.Event{Kind: dirOf(n), T: packetT(n), Data: packet(40 + n), Port: linkRaw, Block: blk})
			blk++
		}
	}
	for i := range want {
		want[i].Index = i + 1
	}
	return want
}

// packetAfter says after which events of allKinds writerRecording writes
// its packets, and which (n: 40+n bytes, every padding).
var packetAfter = map[int]int{2: 0, 6: 1, 10: 2, 13: 3}

func dirOf(n int) record.Kind {
	if n%2 == 0 {
		return record.In
	}
	return record.Out
}

func packetT(n int) time.Duration {
	return origin + time.Duration(n)*time.Millisecond + 7 // odd nanoseconds
}

func TestRoundTrip(t *testing.T) {
	b := writerRecording(t)
	rec, err := record.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	h := header()
	h.Recorder, h.Format = record.RecorderName, record.Format
	if !reflect.DeepEqual(*rec.Header, h) {
		t.Errorf("header: got %+v\nwant %+v", *rec.Header, h)
	}
	want := writtenEvents()
	if len(rec.Events) != len(want) {
		t.Fatalf("got %d events, want %d", len(rec.Events), len(want))
	}
	for i := range want {
		if g, w := rec.Events[i], want[i]; !reflect.DeepEqual(g, w) {
			t.Errorf("event %d:\n got %+v\nwant %+v", i+1, g, w)
		}
	}
	if got := len(rec.Packets()); got != len(packetAfter) {
		t.Errorf("Packets: %d, want %d", got, len(packetAfter))
	}
	// SHB, IDB, header, 5 event blocks, 4 packets.
	if got := len(blocks(t, b)); got != 12 {
		t.Errorf("%d blocks, want 12", got)
	}
}

// Every padding of packets and event blocks: a Listen key and a packet of
// each length 0 to 7 bytes longer.
func TestRoundTripPadding(t *testing.T) {
	var buf bytes.Buffer
	w, err := record.NewWriter(&buf, header())
	if err != nil {
		t.Fatal(err)
	}
	var want []record.Event
	for k := range 8 {
		e := record.Event{Kind: record.Listen, T: time.Duration(k), Port: 80, Data: bytes.Repeat([]byte{byte(k + 1)}, k)}
		w.Event(&e)
		w.Packet(k%2 == 1, time.Duration(k), packet(40+k))
		e.Block, e.Index = 4+2*k, 1+2*k
		want = append(want, e, record.Event{Kind: record.In + record.Kind(k%2^1), T: time.Duration(k), Data: packet(40 + k), Port: linkRaw, Block: 5 + 2*k, Index: 2 + 2*k})
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Packets != 8 || st.Events != 8 || st.Blocks != 9 || st.Errors != 0 || st.Bytes != uint64(buf.Len()) {
		t.Errorf("stats %+v; file %d bytes", st, buf.Len())
	}
	pads := map[int]bool{}
	for _, bl := range blocks(t, buf.Bytes()) {
		if bl.typ == 0xBAD {
			// the payload's length less its padding, from the JSON or events' end
			p := buf.Bytes()[bl.off+12 : bl.off+bl.len-4]
			pads[len(bytes.TrimRight(p, "\x00"))%4] = true
		}
	}
	if len(pads) != 4 {
		t.Errorf("event blocks' lengths modulo 4: %v, want all four", pads)
	}
	rec, err := record.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for i := range max(len(want), len(rec.Events)) {
		if i >= len(want) || i >= len(rec.Events) {
			t.Fatalf("got %d events, want %d", len(rec.Events), len(want))
		}
		g, w := rec.Events[i], want[i]
		if len(w.Data) == 0 {
			w.Data = g.Data // an empty key reads back empty, not nil
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("event %d:\n got %+v\nwant %+v", i+1, g, w)
		}
	}
}

// gopacket's reader sees our packets, at their instants, and skips our
// custom blocks.
func TestGopacketReadsRecording(t *testing.T) {
	r, err := pcapgo.NewNgReader(bytes.NewReader(writerRecording(t)), pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	if r.LinkType() != layers.LinkTypeRaw {
		t.Errorf("link type %v", r.LinkType())
	}
	for n := range len(packetAfter) {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			t.Fatalf("packet %d: %v", n+1, err)
		}
		if !bytes.Equal(data, packet(40+n)) || ci.CaptureLength != 40+n || ci.Length != 40+n {
			t.Errorf("packet %d: %d bytes (capture info %d, %d), want %d", n+1, len(data), ci.CaptureLength, ci.Length, 40+n)
		}
		if want := wall.Add(packetT(n) - origin); !ci.Timestamp.Equal(want) {
			t.Errorf("packet %d: at %v, want %v", n+1, ci.Timestamp, want)
		}
	}
	if _, _, err := r.ReadPacketData(); err != io.EOF {
		t.Errorf("after the packets: %v, want EOF", err)
	}
}

// tcpdump reads a live recording: one line per packet, at its instant to the
// nanosecond, between the recorded addresses.
func TestTcpdumpReadsRecording(t *testing.T) {
	if _, err := exec.LookPath("tcpdump"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("tcpdump is not installed (scripts/deps.sh installs it)")
		}
		t.Skip("tcpdump is not installed")
	}
	dialer, _ := flighttest.Echo(t, 1, 3000)
	path := filepath.Join(t.TempDir(), "dialer.pcapng")
	if err := os.WriteFile(path, dialer, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("tcpdump", "-tt", "--time-stamp-precision=nano", "-nr", path).Output()
	if err != nil {
		t.Fatalf("tcpdump: %v", err)
	}
	rec, err := record.Parse(bytes.NewReader(dialer))
	if err != nil {
		t.Fatal(err)
	}
	pkts := rec.Packets()
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(pkts) || len(pkts) < 8 {
		t.Fatalf("tcpdump printed %d lines for %d packets:\n%s", len(lines), len(pkts), out)
	}
	h := rec.Header
	for i, p := range pkts {
		ts := h.Wall.Add(p.T - time.Duration(h.Origin))
		src, dst := "198.18.0.2.7", "198.18.0.1."
		if p.Kind == record.Out {
			src, dst = "198.18.0.1.", "198.18.0.2.7:"
		}
		prefix := fmt.Sprintf("%d.%09d IP %s", ts.Unix(), ts.Nanosecond(), src)
		if !strings.HasPrefix(lines[i], prefix) || !strings.Contains(lines[i], " > "+dst) {
			t.Errorf("packet %d (%v): tcpdump printed %q, want %q... > %s", i+1, p.Kind, lines[i], prefix, dst)
		}
	}
}

// The error of each corrupt file names the block (and so its offset) and
// wraps ErrFormat.
func TestParseBadFiles(t *testing.T) {
	good := writerRecording(t)
	bs := blocks(t, good)
	// bs: 0 SHB, 1 IDB, 2 header, 3 events, 4 packet, 5 events, ...
	if bs[0].typ != 0x0A0D0D0A || bs[1].typ != 1 || bs[2].typ != 0xBAD || bs[3].typ != 0xBAD || bs[4].typ != 6 {
		t.Fatalf("unexpected layout %v", bs)
	}
	upTo := func(i int) []byte { return bytes.Clone(good[:bs[i].off]) } // blocks before i
	patch := func(off int, v ...byte) []byte {
		b := bytes.Clone(good)
		copy(b[off:], v)
		return b
	}
	hdrJSON := bytes.TrimRight(good[bs[2].off+13:bs[2].off+bs[2].len-4], "\x00")
	withHeader := func(old, new string) []byte {
		js := bytes.Replace(hdrJSON, []byte(old), []byte(new), 1)
		if bytes.Equal(js, hdrJSON) {
			t.Fatalf("%q not in the header %s", old, hdrJSON)
		}
		return append(append(upTo(2), custom(record.PEN, append([]byte{'H'}, js...))...), good[bs[3].off:]...)
	}
	blockAt := func(n, off int) string { return fmt.Sprintf("block %d (offset %d): ", n, off) }
	at := func(i int) string { return blockAt(i+1, bs[i].off) } // a block of good
	evOff := bs[3].off + 12 + 2                                 // the first event of the first events block
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "record: bad file: empty file"},
		{"not pcapng", []byte("GET / HTTP/1.1\r\n\r\n"), at(0) + "not a pcapng file"},
		{"truncated block header", good[:5], at(0) + "truncated block header"},
		{"truncated in the section header", good[:20], at(0) + "truncated section header"},
		{"bad byte order", patch(8, 1, 2, 3, 4), at(0) + "bad byte-order magic"},
		{"pcapng 2.0", patch(12, 2), at(0) + "pcapng version 2.0 is not supported"},
		{"truncated in a packet", good[:bs[4].off+30], at(4) + "truncated block (84 bytes announced)"},
		{"truncated in a custom block", good[:bs[3].off+14], at(3) + "truncated block"},
		{"no trailing length", good[:bs[4].off+bs[4].len-2], at(4) + "truncated block (no trailing length)"},
		{"bad trailing length", patch(bs[4].off+bs[4].len-4, 64), at(4) + "trailing length 64 differs from 84"},
		{"bad block length", patch(bs[4].off+4, 85), at(4) + "bad block length 85"},
		{"huge block length", patch(bs[4].off+4, 0, 0, 0, 0x10), at(4) + "bad block length 268435456"},
		{"unknown event kind", patch(evOff, 99), at(3) + "event 1: unknown event kind 99"},
		{"packet kind in a custom block", patch(evOff, byte(record.In)), at(3) + "event 1: unknown event kind 1"},
		{"event cut short", append(upTo(3), custom(record.PEN, []byte{'E', 1, byte(record.Write), 0x80})...),
			at(3) + "event 1: write event: event cut short"},
		{"address cut short", append(upTo(3), custom(record.PEN, []byte{'E', 1, byte(record.Dial), 2, 4, 198, 18})...),
			at(3) + "event 1: dial event: event cut short"},
		{"address of 5 bytes", append(upTo(3), custom(record.PEN, []byte{'E', 1, byte(record.Dial), 2, 5, 1, 2, 3, 4, 5})...),
			at(3) + "event 1: dial event: address of 5 bytes"},
		{"too many args", append(upTo(3), custom(record.PEN, []byte{'E', 1, byte(record.KeepAlive), 2, 4, 1, 2, 3, 4, 1, 4, 1, 2, 3, 4, 1, 2, 17})...),
			at(3) + "event 1: keepalive event: value 17 above 16"},
		{"events of version 2", append(upTo(3), custom(record.PEN, []byte{'E', 2, byte(record.Batch), 0})...),
			at(3) + "events of an unknown version"},
		{"unknown tcpwheel block", append(upTo(3), custom(record.PEN, []byte{'Z'})...), at(3) + `unknown tcpwheel block type 'Z'`},
		{"empty tcpwheel block", append(upTo(3), custom(record.PEN, nil)...), at(3) + "empty tcpwheel block"},
		{"packet on a missing interface", patch(bs[4].off+8, 1), at(4) + "packet on interface 1; the section has 1"},
		{"packet before any interface", append(upTo(1), good[bs[4].off:]...), blockAt(2, bs[1].off) + "packet on interface 0; the section has 0"},
		{"captured length beyond the block", patch(bs[4].off+20, 200), at(4) + "captured length 200 beyond the block"},
		{"snapped packet longer than any IP packet", patch(bs[4].off+24, 0x70, 0x11, 0x01, 0x00), at(4) + "packet cut short by the snap length (40 of 70000 bytes)"},
		{"packet without direction", patch(bs[4].off+28+40, 0xff), at(4) + "a packet without its direction"},
		{"simple packet block in a recording", append(upTo(3), 3, 0, 0, 0, 20, 0, 0, 0, 4, 0, 0, 0, 1, 2, 3, 4, 20, 0, 0, 0),
			at(3) + "a packet without its direction (a simple packet block) in a recording"},
		{"option beyond the block", patch(bs[4].off+28+40+2, 200), at(4) + "option 2 (200 bytes) beyond the block"},
		{"another recorder", withHeader(`"recorder":"tcpwheel"`, `"recorder":"gvisor"`), at(2) + `a recording of "gvisor", not of tcpwheel`},
		{"newer format", withHeader(`"format":1`, `"format":2`), at(2) + "recording format 2; this version reads 1"},
		{"header without MTU", withHeader(`"mtu":1500`, `"mtu":0`), at(2) + "recording header without address, MTU or tick"},
		{"header not JSON", withHeader(`{`, `[`), at(2) + "recording header: "},
		{"second header", append(upTo(3), good[bs[2].off:]...), at(3) + "a second recording header"},
		{"events before the header", append(upTo(2), good[bs[3].off:]...), at(2) + "tcpwheel events before the recording header"},
		{"header after packets", append(append(upTo(2), good[bs[4].off:bs[4].off+bs[4].len]...), good[bs[2].off:]...),
			blockAt(4, bs[2].off+bs[4].len) + "the recording header after packets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := record.Parse(bytes.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if !errors.Is(err, record.ErrFormat) {
				t.Errorf("%v does not wrap ErrFormat", err)
			}
		})
	}
}

// Custom blocks of another PEN, and blocks of types the reader does not
// know, are skipped; the blocks after them keep their numbers.
func TestParseSkipsOtherBlocks(t *testing.T) {
	good := writerRecording(t)
	bs := blocks(t, good)
	other := custom(12345, []byte("E\x01another tool's block"))
	isb := le.AppendUint32(nil, 5) // an Interface Statistics Block
	isb = le.AppendUint32(isb, 24)
	isb = append(isb, make([]byte, 12)...)
	isb = le.AppendUint32(isb, 24)
	b := append(bytes.Clone(good[:bs[3].off]), other...)
	b = append(b, isb...)
	b = append(b, good[bs[3].off:]...)
	rec, err := record.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	want := writtenEvents()
	if len(rec.Events) != len(want) {
		t.Fatalf("got %d events, want %d", len(rec.Events), len(want))
	}
	for i := range want {
		want[i].Block += 2
		if !reflect.DeepEqual(rec.Events[i], want[i]) {
			t.Errorf("event %d:\n got %+v\nwant %+v", i+1, rec.Events[i], want[i])
		}
	}
}

// A length the file cannot hold costs no more than the file: the reader
// does not allocate what a corrupt length announces.
func TestParseAllocationBounded(t *testing.T) {
	good := writerRecording(t)
	bs := blocks(t, good)
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"section header", append(le.AppendUint32(le.AppendUint32(nil, 0x0A0D0D0A), 16<<20-4), make([]byte, 100)...)},
		{"block", append(le.AppendUint32(le.AppendUint32(bytes.Clone(good[:bs[3].off]), 6), 16<<20-4), make([]byte, 100)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "section header" {
				tc.in = le.AppendUint32(tc.in[:8], 0x1A2B3C4D)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := record.Parse(bytes.NewReader(tc.in))
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), "truncated") {
				t.Fatalf("got %v, want a truncated block", err)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
				t.Errorf("allocated %d bytes for a %d-byte file", n, len(tc.in))
			}
		})
	}
}

// Writer.Event drops what is not an event of a custom block: the packets
// have Packet.
func TestWriterDropsPacketKinds(t *testing.T) {
	var buf bytes.Buffer
	w, err := record.NewWriter(&buf, header())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []record.Kind{0, record.In, record.Out, record.Captured, 200} {
		w.Event(&record.Event{Kind: k, T: 1})
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	rec, err := record.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Events) != 0 || w.Stats().Events != 0 {
		t.Errorf("got %d events (stats %d), want none", len(rec.Events), w.Stats().Events)
	}
}

// pcapngFile is a section of one interface with if_tsresol res (none if
// res is -1) and one packet at ts in its units.
func pcapngFile(res int, ts uint64) []byte {
	b := le.AppendUint32(nil, 0x0A0D0D0A)
	b = le.AppendUint32(b, 28)
	b = le.AppendUint32(b, 0x1A2B3C4D)
	b = le.AppendUint16(b, 1)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint64(b, ^uint64(0))
	b = le.AppendUint32(b, 28)
	idb := le.AppendUint16(nil, linkRaw)
	idb = le.AppendUint16(idb, 0)
	idb = le.AppendUint32(idb, 0)
	if res >= 0 {
		idb = append(le.AppendUint16(le.AppendUint16(idb, 9), 1), byte(res), 0, 0, 0)
		idb = le.AppendUint32(idb, 0) // opt_endofopt
	}
	b = le.AppendUint32(b, 1)
	b = le.AppendUint32(b, uint32(12+len(idb)))
	b = append(b, idb...)
	b = le.AppendUint32(b, uint32(12+len(idb)))
	pkt := packet(40)
	b = le.AppendUint32(b, 6)
	b = le.AppendUint32(b, uint32(32+len(pkt)))
	b = le.AppendUint32(b, 0)
	b = le.AppendUint32(b, uint32(ts>>32))
	b = le.AppendUint32(b, uint32(ts))
	b = le.AppendUint32(b, uint32(len(pkt)))
	b = le.AppendUint32(b, uint32(len(pkt)))
	b = append(b, pkt...)
	return le.AppendUint32(b, uint32(32+len(pkt)))
}

// A pcapng file of another tool: its packets are Captured, at their
// timestamps in nanoseconds since the epoch, whatever the interface's
// resolution.
func TestParseTimestampResolutions(t *testing.T) {
	const sec = 1_700_000_000
	for _, tc := range []struct {
		name string
		res  int
		ts   uint64
		want int64
	}{
		{"microseconds by default", -1, sec*1e6 + 123456, sec*1e9 + 123456000},
		{"seconds", 0, sec, sec * 1e9},
		{"nanoseconds", 9, sec*1e9 + 123456789, sec*1e9 + 123456789},
		{"picoseconds", 12, 1_700_000*1e12 + 123456789012, 1_700_000*1e9 + 123456789},
		{"1e-19 s", 19, 1e19 + 5e18 + 7e9, 1e9 + 5e8},
		{"2^-30 s", 0x80 | 30, sec<<30 | 1<<29, sec*1e9 + 5e8},
		{"2^-63 s", 0x80 | 63, 1<<63 | 1<<62, 1e9 + 5e8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := record.Parse(bytes.NewReader(pcapngFile(tc.res, tc.ts)))
			if err != nil {
				t.Fatal(err)
			}
			if rec.Header != nil || len(rec.Events) != 1 {
				t.Fatalf("header %v, %d events", rec.Header, len(rec.Events))
			}
			e := rec.Events[0]
			if e.Kind != record.Captured || e.Port != linkRaw || e.Block != 3 || !bytes.Equal(e.Data, packet(40)) {
				t.Errorf("got %+v", e)
			}
			if int64(e.T) != tc.want {
				t.Errorf("at %d ns, want %d", e.T, tc.want)
			}
		})
	}
	_, err := record.Parse(bytes.NewReader(pcapngFile(20, 0)))
	if want := "block 2 (offset 28): bad if_tsresol 0x14"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("if_tsresol 20: got %v, want %q", err, want)
	}
}

// TestWriteSectionAsPcapgo: the section header and interface blocks that
// NewWriter writes itself (not with gopacket, whose layers package would
// put 5 MB of pointerful globals in every program that links the stack)
// are byte for byte those gopacket's pcapgo.NgWriter wrote for them: the
// recording starts with them, then the header's custom block.
func TestWriteSectionAsPcapgo(t *testing.T) {
	var want bytes.Buffer
	ng, err := pcapgo.NewNgWriterInterface(&want, pcapgo.NgInterface{
		Name:                "tcpwheel",
		Description:         "tcpwheel flight recording: packets as the stack handled and sent them",
		LinkType:            layers.LinkTypeRaw,
		SnapLength:          0,
		TimestampResolution: 9,
	}, pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{Application: "tcpwheel"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ng.Flush(); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	w, err := record.NewWriter(&got, record.Header{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	b := got.Bytes()
	if len(b) < want.Len() || !bytes.Equal(b[:want.Len()], want.Bytes()) {
		t.Fatalf("section and interface:\n got % x\nwant % x", b[:min(len(b), want.Len())], want.Bytes())
	}
	if rest := b[want.Len():]; len(rest) < 8 || le.Uint32(rest) != 0x00000BAD {
		t.Errorf("after the interface: % x, want the header's custom block", rest[:min(len(rest), 8)])
	}
}
