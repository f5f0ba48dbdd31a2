package replay

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
)

// golden is a capture recorded from the kernel by scripts/record-golden.sh.
const golden = "../../integration/testdata/bulk.pcap"

// writePcap writes a nanosecond pcap of raw IPv4 packets.
func writePcap(link uint32, pkts []Packet) []byte {
	var b bytes.Buffer
	h := make([]byte, 24)
	binary.LittleEndian.PutUint32(h[0:], 0xa1b23c4d)
	binary.LittleEndian.PutUint16(h[4:], 2)
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], 65535)
	binary.LittleEndian.PutUint32(h[20:], link)
	b.Write(h)
	for _, p := range pkts {
		r := make([]byte, 16)
		ns := p.Time.UnixNano()
		binary.LittleEndian.PutUint32(r[0:], uint32(ns/1e9))
		binary.LittleEndian.PutUint32(r[4:], uint32(ns%1e9))
		binary.LittleEndian.PutUint32(r[8:], uint32(len(p.Raw)))
		binary.LittleEndian.PutUint32(r[12:], uint32(len(p.Raw)))
		b.Write(r)
		b.Write(p.Raw)
	}
	return b.Bytes()
}

func loadGolden(t *testing.T) ([]byte, []Packet, *Script) {
	t.Helper()
	raw, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	pkts, err := ParseCapture(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := LoadScript(ScriptPath(golden))
	if err != nil || sc == nil {
		t.Fatalf("script: %v", err)
	}
	return raw, pkts, sc
}

func TestReplayMatchesGolden(t *testing.T) {
	_, pkts, sc := loadGolden(t)
	sess, err := NewSession(pkts, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	runExactly(t, sess, sc)
	if err := Validate(sess); err != nil {
		t.Fatal(err)
	}
}

// runExactly replays sess with sc and fails t unless every packet matched.
func runExactly(t *testing.T, sess *Session, sc *Script) *Result {
	t.Helper()
	res, err := Run(sess, Options{Script: sc})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if res.Expected == 0 || len(res.Got) != res.Expected {
		t.Fatalf("got %d packets, want %d", len(res.Got), res.Expected)
	}
	return res
}

// A recorded stack packet changed in one field must be reported, naming the
// packet and the field.
func TestReplayReportsMismatch(t *testing.T) {
	_, pkts, sc := loadGolden(t)
	sess, err := NewSession(pkts, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	var target *Packet
	for i := range sess.Packets {
		if sess.FromStack[i] && len(sess.Packets[i].Seg.Payload) > 0 {
			target = &sess.Packets[i]
			break
		}
	}
	target.Seg.Window++
	target.Time = target.Time.Add(50 * time.Millisecond)
	res, err := Run(sess, Options{Script: sc})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Diffs) != 1 {
		t.Fatalf("got %d diffs, want 1: %v", len(res.Diffs), res.Err())
	}
	d := res.Diffs[0]
	if d.Packet != target.N || strings.Join(d.Fields, ",") != "win,time" {
		t.Errorf("got diff %v, want packet %d, fields win,time", d, target.N)
	}
	if msg := d.String(); !strings.Contains(msg, "want +") || !strings.Contains(msg, "got  +") {
		t.Errorf("diff text lacks want/got lines: %s", msg)
	}
}

func TestDeriveScriptReplays(t *testing.T) {
	_, pkts, _ := loadGolden(t)
	sess, err := NewSession(pkts, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(sess, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Without explicit reads the replayed application reads at once, so
	// window updates may come earlier than recorded; the handshake must match.
	for _, d := range res.Diffs {
		if d.Index == 1 {
			t.Errorf("derived script: %v", d)
		}
	}
}

func TestBadInput(t *testing.T) {
	raw, pkts, _ := loadGolden(t)
	otherFlow := func() []Packet {
		ps := append([]Packet(nil), pkts...)
		p := ps[3]
		p.Raw = append([]byte(nil), p.Raw...)
		binary.BigEndian.PutUint16(p.Raw[20:], 1234) // source port
		ps[3] = p
		return ps
	}
	unknownLink := append([]byte(nil), raw...)
	binary.LittleEndian.PutUint32(unknownLink[20:], 147)
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "not a pcap file"},
		{"not pcap", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), "not a pcap file"},
		{"unknown link type", unknownLink, "link type 147"},
		{"truncated record", raw[:len(raw)-10], "packet " + strconv.Itoa(len(pkts)) + ": truncated record"},
		{"truncated header", raw[:24+8], "packet 1: truncated record header"},
		{"another flow", writePcap(linkRaw, otherFlow()), "packet 4: 198.18.0.1:1234"},
		{"no handshake", writePcap(linkRaw, pkts[2:]), "does not start with a handshake"},
		{"not TCP", writePcap(linkRaw, []Packet{{Raw: udpPacket()}}), "packet 1: IP protocol 17 is not TCP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := parseAndSplit(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if !errors.Is(err, ErrCapture) {
				t.Errorf("%v does not wrap ErrCapture", err)
			}
		})
	}
}

func udpPacket() []byte {
	b := make([]byte, 28)
	b[0], b[3], b[9] = 0x45, 28, 17
	return b
}

func parseAndSplit(b []byte) error {
	pkts, err := ParseCapture(bytes.NewReader(b))
	if err != nil {
		return err
	}
	sess, err := NewSession(pkts, netip.Addr{})
	if err != nil {
		return err
	}
	_ = Validate(sess)
	return nil
}

// FuzzParseCapture feeds arbitrary bytes through the pcap-to-segments path:
// errors are fine, panics and huge allocations are not.
func FuzzParseCapture(f *testing.F) {
	raw, err := os.ReadFile(golden)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw)
	f.Add(raw[:len(raw)/2])
	f.Add(raw[:24])
	f.Add([]byte("not a capture at all"))
	if b, err := os.ReadFile("../../integration/testdata/rst_closed.pcap"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		pkts, err := ParseCapture(bytes.NewReader(b))
		if err != nil {
			return
		}
		for _, p := range pkts {
			if _, err := tcp.ParseSegment(p.Raw[int(p.Raw[0]&0xf)*4:]); err != nil {
				t.Fatalf("packet %d parsed but its segment does not: %v", p.N, err)
			}
		}
		sess, err := NewSession(pkts, netip.Addr{})
		if err != nil {
			return
		}
		_ = Validate(sess)
		_ = DeriveScript(sess)
		_ = stream(sess)
	})
}

// shiftTS adds k to the TSval (stack) or TSecr (peer) of an IPv4/TCP
// packet's timestamp option, mending the TCP checksum (RFC 1624).
func shiftTS(t *testing.T, b []byte, stack bool, k uint32) {
	t.Helper()
	ihl := int(b[0]&0x0f) * 4
	tcpH := b[ihl:]
	opts := tcpH[20 : int(tcpH[12]>>4)*4]
	for i := 0; i < len(opts); {
		switch opts[i] {
		case 0:
			t.Fatal("no timestamp option")
		case 1:
			i++
			continue
		}
		if opts[i] != 8 {
			i += int(opts[i+1])
			continue
		}
		f := opts[i+2:]
		if !stack {
			f = opts[i+6:]
		}
		sum := ^uint32(binary.BigEndian.Uint16(tcpH[16:])) & 0xffff
		for w := 0; w < 4; w += 2 {
			sum += ^uint32(binary.BigEndian.Uint16(f[w:])) & 0xffff
		}
		binary.BigEndian.PutUint32(f, binary.BigEndian.Uint32(f)+k)
		for w := 0; w < 4; w += 2 {
			sum += uint32(binary.BigEndian.Uint16(f[w:]))
		}
		for sum > 0xffff {
			sum = sum&0xffff + sum>>16
		}
		binary.BigEndian.PutUint16(tcpH[16:], ^uint16(sum))
		return
	}
	t.Fatal("no timestamp option")
}

// TestReplayTSOffsetNotTheISN: a capture of a stack whose timestamp offset
// is not its ISN (tcp.Config.TSOffset's default since 2026-11-24: a hash of
// the addresses) replays exactly too, with the recorded TSvals to the
// millisecond: the golden captures (offset: the ISN) as they are, and with
// the stack's TSvals, and the peer's echoes of them, moved by half the
// clock's range.
func TestReplayTSOffsetNotTheISN(t *testing.T) {
	files, err := filepath.Glob("../../integration/testdata/*.pcap")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden captures: %v", err)
	}
	for _, f := range files {
		for _, k := range []uint32{0, 1 << 31} {
			t.Run(fmt.Sprintf("%s+%d", filepath.Base(f), k), func(t *testing.T) {
				sess, sc, err := Open(f, netip.Addr{})
				if err != nil {
					t.Fatal(err)
				}
				pkts := sess.Packets
				var want []uint32 // the stack's TSvals
				for i := range pkts {
					p := &pkts[i]
					if p.Seg.Options.TS && (sess.FromStack[i] || p.Seg.Flags&tcp.FlagACK != 0) {
						shiftTS(t, p.Raw, sess.FromStack[i], k)
					}
					if sess.FromStack[i] {
						want = append(want, p.Seg.Options.TSVal+k)
					}
				}
				if pkts, err = ParseCapture(bytes.NewReader(writePcap(101, pkts))); err != nil {
					t.Fatal(err)
				}
				if sess, err = NewSession(pkts, netip.Addr{}); err != nil {
					t.Fatal(err)
				}
				res := runExactly(t, sess, sc)
				// Each as the recorded one, to within the instants'
				// tolerance (Options.Tolerance), the first exactly.
				slack := int32(DefaultTolerance/time.Millisecond) + 1
				for i, g := range res.Got {
					if d := int32(g.Seg.Options.TSVal - want[i]); g.Seg.Options.TS && (d > slack || d < -slack || i == 0 && d != 0) {
						t.Fatalf("the stack's packet %d: TSval %d, want %d", i+1, g.Seg.Options.TSVal, want[i])
					}
				}
			})
		}
	}
}
