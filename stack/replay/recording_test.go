package replay

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/tcpwheel/tcpwheel/stack/flighttest"
	"github.com/tcpwheel/tcpwheel/stack/record"
	"github.com/tcpwheel/tcpwheel/tcp"
)

// echoRecording is the dialer's recording of two echo connections, which
// replays exactly.
func echoRecording(t *testing.T) *record.Recording {
	t.Helper()
	dialer, _ := flighttest.Echo(t, 2, 3000)
	rec, err := record.Parse(bytes.NewReader(dialer))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Replay(rec, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Err(); err != nil {
		t.Fatalf("the untouched recording: %v", err)
	}
	if len(r.Conns) != 2 {
		t.Fatalf("%d connections, want 2", len(r.Conns))
	}
	return rec
}

// TestReplayIPv6: recordings of echo connections over IPv6, both sides,
// replay exactly, and Replay finds their connections by IPv6 4-tuple.
func TestReplayIPv6(t *testing.T) {
	dialer, listener := flighttest.EchoIPv6(t, 2, 50000)
	for name, b := range map[string][]byte{"dialer": dialer, "listener": listener} {
		rec, err := record.Parse(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if !rec.Header.Addr6.IsValid() {
			t.Fatalf("%s: the header has no IPv6 address", name)
		}
		r, err := Replay(rec, ReplayOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Err(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(r.Conns) != 2 {
			t.Fatalf("%s: %d connections, want 2", name, len(r.Conns))
		}
		for _, c := range r.Conns {
			if !c.Local.Addr().Is6() || !c.Remote.Addr().Is6() {
				t.Errorf("%s: connection %v-%v is not IPv6", name, c.Local, c.Remote)
			}
		}
	}
}

// edited is a copy of rec whose events edit may change.
func edited(rec *record.Recording, edit func(evs []record.Event) []record.Event) *record.Recording {
	evs := slices.Clone(rec.Events)
	for i := range evs {
		evs[i].Data = slices.Clone(evs[i].Data)
	}
	return &record.Recording{Header: rec.Header, Events: edit(evs)}
}

// nth returns the position in evs of the n-th (from 1) event of kind k on
// conn (a packet's or a call's), or -1.
func nth(evs []record.Event, k record.Kind, c Conn, n int) int {
	for i := range evs {
		e := &evs[i]
		if e.Kind != k {
			continue
		}
		var id tcp.ID
		if k == record.In || k == record.Out {
			id, _, _ = connOf(e)
		} else {
			id = tcp.ID{Local: e.Local, Remote: e.Remote}
		}
		if id.Local == c.Local && id.Remote == c.Remote {
			if n--; n == 0 {
				return i
			}
		}
	}
	return -1
}

// checkFirstDiff wants err to name connection c, its first differing packet
// (the recording's event #index, the stack's packet #k) with the fields
// (the first of them),
// both sides (each containing want and got), and the recording's events
// around it with the packet marked.
func checkFirstDiff(t *testing.T, err error, c Conn, index, k int, fields, want, got string) {
	t.Helper()
	if err == nil {
		t.Fatal("the edited recording replays without a difference")
	}
	msg := err.Error()
	head := fmt.Sprintf("\n%v: %d packets recorded, ", c, c.Sent)
	first := fmt.Sprintf(" differ; first:\npacket %d (the stack's #%d): %s", index, k, fields)
	i, j := strings.Index(msg, head), strings.Index(msg, first)
	if i < 0 || j < i {
		t.Fatalf("the error does not name %v and its packet %d (#%d, %s...):\n%s", c, index, k, fields, msg)
	}
	lines := strings.Split(msg[j+len(first):], "\n")[1:]
	if len(lines) < 4 || !strings.Contains(lines[0], want) || !strings.HasPrefix(lines[1], "  got  ") || !strings.Contains(lines[1], got) {
		t.Fatalf("want a line with %q and a got line with %q:\n%s", want, got, msg)
	}
	if lines[2] != "  events around it in the recording:" {
		t.Fatalf("no events around the difference:\n%s", msg)
	}
	ctx := lines[3:]
	for n, l := range ctx {
		if !strings.HasPrefix(l, "    #") {
			ctx = ctx[:n]
			break
		}
	}
	mark := fmt.Sprintf("    #%d out ", index)
	found := false
	for n, l := range ctx {
		if strings.HasPrefix(l, mark) {
			found = strings.HasSuffix(l, "<== the first difference") && n == min(index-1, contextEvents)
		}
	}
	if !found || len(ctx) < contextEvents+1 {
		t.Errorf("the events around it do not show #%d marked in their middle:\n%s", index, strings.Join(ctx, "\n"))
	}
}

// A recording replayed by a stack that changed behaviour fails with a
// readable diff: here the recording is what changed, packet or event, and
// the replay names the connection, the first differing packet with both
// sides, and the events around it.
func TestReplayEditedRecording(t *testing.T) {
	rec := echoRecording(t)
	cs := Conns(rec)
	c1, c2 := cs[0], cs[1]
	const tcpOff = 20 // the recordings' IPv4 headers have no options

	t.Run("window", func(t *testing.T) {
		var index int
		var win uint16
		r := edited(rec, func(evs []record.Event) []record.Event {
			i := nth(evs, record.Out, c2, 3) // the first data segment (after SYN, ACK)
			d := evs[i].Data[tcpOff:]
			win = binary.BigEndian.Uint16(d[14:])
			binary.BigEndian.PutUint16(d[14:], win+1)
			index = evs[i].Index
			return evs
		})
		rep, err := Replay(r, ReplayOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Divergences) != 0 || len(rep.Conns[0].Diffs) != 0 || len(rep.Conns[1].Diffs) != 1 {
			t.Errorf("divergences %v, diffs %d and %d, want only one on connection 2", rep.Divergences, len(rep.Conns[0].Diffs), len(rep.Conns[1].Diffs))
		}
		checkFirstDiff(t, rep.Err(), c2, index, 3, "win differ", fmt.Sprintf("] seq=1 ack=1 win=%d len=1448 tsval=+", win+1), fmt.Sprintf("] seq=1 ack=1 win=%d len=1448 tsval=+", win))
	})

	t.Run("tsval", func(t *testing.T) {
		var index int
		var tsGap uint32 // from the SYN's TSval
		r := edited(rec, func(evs []record.Event) []record.Event {
			i := nth(evs, record.Out, c1, 3)
			_, seg, _ := connOf(&evs[i])
			if !seg.Options.TS {
				t.Fatal("no timestamps")
			}
			// the timestamp option's value: after the fixed header, find it
			d := evs[i].Data[tcpOff:]
			k := bytes.Index(d[20:], binary.BigEndian.AppendUint32([]byte{8, 10}, seg.Options.TSVal))
			binary.BigEndian.PutUint32(d[20+k+2:], seg.Options.TSVal+5)
			_, syn, _ := connOf(&evs[nth(evs, record.Out, c1, 1)])
			tsGap = seg.Options.TSVal - syn.Options.TSVal
			index = evs[i].Index
			return evs
		})
		rep, err := Replay(r, ReplayOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkFirstDiff(t, rep.Err(), c1, index, 3, "tsval differ", fmt.Sprintf("tsval=+%d ", tsGap+5), fmt.Sprintf("tsval=+%d ", tsGap))
	})

	// plus1000 replays rec with c1's first event of kind k 1000 more,
	// and returns the report and the index of c1's first packet.
	plus1000 := func(t *testing.T, k record.Kind) (*Report, int) {
		t.Helper()
		var index int
		r := edited(rec, func(evs []record.Event) []record.Event {
			evs[nth(evs, k, c1, 1)].N += 1000
			index = evs[nth(evs, record.Out, c1, 1)].Index
			return evs
		})
		rep, err := Replay(r, ReplayOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return rep, index
	}

	t.Run("an ISN", func(t *testing.T) {
		rep, index := plus1000(t, record.ISN)
		// Relative to the edited ISN, the recorded SYN is 1000 before it.
		// (The TSvals' offset is recorded apart: the same.)
		checkFirstDiff(t, rep.Err(), c1, index, 1, "seq differ", "[SYN] seq=4294966296 win=65535 len=0 mss=1460 ws=5 sackOK tsval=+0 tsecr=0", "[SYN] seq=0 win=65535 len=0 mss=1460 ws=5 sackOK tsval=+0 tsecr=0")
		if got := len(rep.Conns[0].Diffs); got < c1.Sent {
			t.Errorf("%d packets differ, want all %d (or more: the replay may send more)", got, c1.Sent)
		}
	})

	t.Run("a timestamp offset", func(t *testing.T) {
		rep, index := plus1000(t, record.TSOffset)
		// The replay takes the recorded offset: its TSvals are 1000 ahead
		// of the recording's from the SYN on.
		checkFirstDiff(t, rep.Err(), c1, index, 1, "tsval differ", "[SYN] seq=0 win=65535 len=0 mss=1460 ws=5 sackOK tsval=+0 tsecr=0", "[SYN] seq=0 win=65535 len=0 mss=1460 ws=5 sackOK tsval=+1000 tsecr=0")
	})

	t.Run("an In dropped", func(t *testing.T) {
		var index int
		r := edited(rec, func(evs []record.Event) []record.Event {
			i := nth(evs, record.In, c2, 1) // the SYN-ACK
			index = evs[nth(evs, record.Out, c2, 2)].Index
			return slices.Delete(evs, i, i+1)
		})
		rep, err := Replay(r, ReplayOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Without the SYN-ACK the handshake's ACK is never sent, nor the
		// data: the connection's application calls find no connection.
		checkFirstDiff(t, rep.Err(), c2, index, 2, "flags, seq, ack", "[ACK] seq=1 ack=", "[RST]")
		if len(rep.Divergences) == 0 {
			t.Error("no divergence")
		}
	})

	t.Run("a write on no connection", func(t *testing.T) {
		var index int
		var bad netip.AddrPort
		r := edited(rec, func(evs []record.Event) []record.Event {
			i := nth(evs, record.Write, c1, 1)
			bad = netip.AddrPortFrom(evs[i].Local.Addr(), evs[i].Local.Port()+1)
			evs[i].Local = bad
			index = evs[i].Index
			return evs
		})
		rep, err := Replay(r, ReplayOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("event #%d: write on %v -> %v, a connection the replayed stack does not have", index, bad, c1.Remote)
		// and the data not written: the stack does not read the clock to send it
		if len(rep.Divergences) == 0 || rep.Divergences[0].String() != want {
			t.Fatalf("divergences %v, want %s first", rep.Divergences, want)
		}
		err = rep.Err()
		if err == nil || !strings.Contains(err.Error(), "\ndivergence: "+want) || !strings.Contains(err.Error(), c1.String()+":") {
			t.Errorf("the error does not name the divergence and %v: %v", c1, err)
		}
		if len(rep.Conns[1].Diffs) != 0 {
			t.Errorf("connection 2 differs: %v", rep.Conns[1].Diffs[0])
		}
	})

	for _, tc := range []struct {
		name string
		kind record.Kind
		n    int64
		want string
	}{
		{"a read of -1 bytes", record.Read, -1, "a read of -1 bytes"},
		{"a write of -5 bytes", record.Write, -5, "a write of -5 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var index int
			r := edited(rec, func(evs []record.Event) []record.Event {
				i := nth(evs, tc.kind, c2, 1)
				evs[i].N, index = tc.n, evs[i].Index
				return evs
			})
			rep, err := Replay(r, ReplayOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("event #%d: %s", index, tc.want)
			if len(rep.Divergences) == 0 || rep.Divergences[0].String() != want {
				t.Errorf("divergences %v, want %s first", rep.Divergences, want)
			}
		})
	}
}

func TestOpenRecording(t *testing.T) {
	dir := t.TempDir()
	dialer, _ := flighttest.Echo(t, 2, 3000)
	good := filepath.Join(dir, "echo.pcapng")
	if err := os.WriteFile(good, dialer, 0o644); err != nil {
		t.Fatal(err)
	}
	rec, err := OpenRecording(good)
	if err != nil {
		t.Fatal(err)
	}
	cs := Conns(rec)
	if len(cs) != 2 {
		t.Fatalf("%d connections, want 2", len(cs))
	}
	for _, c := range cs {
		sent, handled := 0, 0
		for i := range rec.Events {
			e := &rec.Events[i]
			if id, _, ok := connOf(e); ok && id.Local == c.Local && id.Remote == c.Remote {
				if e.Kind == record.Out {
					sent++
				} else {
					handled++
				}
			}
		}
		if c.Local.Addr() != flighttest.DialerAddr || c.Remote != netip.AddrPortFrom(flighttest.ListenerAddr, flighttest.Port) || c.Sent != sent || c.Handled != handled {
			t.Errorf("%v: %d sent, %d handled; want %d, %d", c, c.Sent, c.Handled, sent, handled)
		}
	}

	// A stack that only listened: a recording, without a connection.
	empty := filepath.Join(dir, "listen.pcapng")
	if err := os.WriteFile(empty, flighttest.ListenOnly(t), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = OpenRecording(empty)
	if want := empty + ": no TCP connection in the recording"; err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrCapture) {
		t.Errorf("got %v, want an ErrCapture containing %q", err, want)
	}

	// A corrupt recording: the reader's error, with the file's name.
	bad := filepath.Join(dir, "bad.pcapng")
	if err := os.WriteFile(bad, dialer[:len(dialer)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = OpenRecording(bad)
	if err == nil || !strings.HasPrefix(err.Error(), bad+": record: bad file: block ") || !errors.Is(err, record.ErrFormat) {
		t.Errorf("got %v, want a record.ErrFormat naming the file and block", err)
	}
}

// A pcapng file that no recorder wrote is a capture: OpenRecording refuses
// it, ParseCapture reads the same packets as from the pcap, and the
// capture's replay (derived script or JSON) runs on it as on the pcap.
func TestPlainPcapngIsACapture(t *testing.T) {
	const name = "rto"
	src := "../../integration/testdata/" + name
	raw, err := os.ReadFile(src + ".pcap")
	if err != nil {
		t.Fatal(err)
	}
	pkts, err := ParseCapture(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := pcapgo.NewNgWriter(&buf, layers.LinkTypeRaw)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkts {
		ci := gopacket.CaptureInfo{Timestamp: p.Time, CaptureLength: len(p.Raw), Length: len(p.Raw)}
		if err := w.WritePacket(ci, p.Raw); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, name+".pcapng")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(src + ".json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), script, 0o644); err != nil { // ScriptPath's
		t.Fatal(err)
	}

	if isRec, err := IsRecording(path); !isRec || err != nil {
		t.Errorf("IsRecording: %v, %v; want true (a pcapng file)", isRec, err)
	}
	_, err = OpenRecording(path)
	if want := "a pcapng file without a tcpwheel recording in it"; err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrCapture) {
		t.Errorf("OpenRecording: %v, want an ErrCapture containing %q", err, want)
	}

	got, err := ParseCapture(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(pkts) {
		t.Fatalf("%d packets, want %d", len(got), len(pkts))
	}
	for i := range pkts {
		g, w := got[i], pkts[i]
		if g.N != w.N || !g.Time.Equal(w.Time) || !bytes.Equal(g.Raw, w.Raw) || g.Src != w.Src || g.Dst != w.Dst || g.Seg.Seq != w.Seg.Seq {
			t.Errorf("packet %d: got %v at %v, want %v at %v", i+1, &g, g.Time, &w, w.Time)
		}
	}

	sess, sc, err := Open(path, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	if sc == nil {
		t.Fatal("the script beside the pcapng file was not loaded")
	}
	res, err := Run(sess, Options{Script: sc})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Errorf("the pcapng capture does not replay as its pcap: %v", err)
	}
	if res.Expected == 0 {
		t.Error("no packets from the stack")
	}
}

// TestReplayRecordingWithoutOffsets: a recording from before the timestamp
// offsets were recorded (a golden one: no ts_offsets in its header, no
// TSOffset events) replays exactly, each connection's offset its ISS, and
// its re-recording stays one of those, event for event.
func TestReplayRecordingWithoutOffsets(t *testing.T) {
	rec, err := OpenRecording("../../integration/testdata/time_wait.pcapng")
	if err != nil {
		t.Fatal(err)
	}
	kinds := func(r *record.Recording) []record.Kind {
		var k []record.Kind
		for i := range r.Events {
			k = append(k, r.Events[i].Kind)
		}
		return k
	}
	if rec.Header.TSOffsets || slices.Contains(kinds(rec), record.TSOffset) {
		t.Fatal("the golden recording has timestamp offsets")
	}
	var re bytes.Buffer
	rep, err := Replay(rec, ReplayOptions{Rerecord: &re})
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	again, err := record.Parse(&re)
	if err != nil {
		t.Fatal(err)
	}
	if again.Header.TSOffsets || !slices.Equal(kinds(again), kinds(rec)) {
		t.Fatalf("the re-recording: ts_offsets %v, events %v; want false, %v", again.Header.TSOffsets, kinds(again), kinds(rec))
	}
}
