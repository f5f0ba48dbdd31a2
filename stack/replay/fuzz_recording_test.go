package replay

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/stack/flighttest"
	"github.com/tcpwheel/tcpwheel/stack/record"
)

// FuzzReplayRecording replays corrupt flight recordings: whatever the
// reader accepts, Replay reports on (mismatches, divergences) or refuses
// with an error, and never panics.
func FuzzReplayRecording(f *testing.F) {
	dialer, listener := flighttest.Echo(f, 2, 3000)
	f.Add(dialer)
	f.Add(listener)
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := record.Parse(bytes.NewReader(b))
		if err != nil {
			return
		}
		replayAll(rec)
	})
}

func replayAll(rec *record.Recording) {
	if len(Conns(rec)) > 0 {
		_ = context(rec, rec.Events[len(rec.Events)/2].Index)
	}
	r, err := Replay(rec, ReplayOptions{Rerecord: new(bytes.Buffer)})
	if err != nil {
		return
	}
	_ = r.Err()
}

// FuzzReplayEdits replays recordings edited event by event, as a later
// version of the stack, or a hand, might have them: events dropped,
// repeated, moved in time, their fields changed. ops is a list of edits of
// 11 bytes each: the event (2 bytes), the edit, and a value (8 bytes).
func FuzzReplayEdits(f *testing.F) {
	dialer, listener := flighttest.Echo(f, 2, 3000)
	var recs []*record.Recording
	for _, b := range [][]byte{dialer, listener} {
		rec, err := record.Parse(bytes.NewReader(b))
		if err != nil {
			f.Fatal(err)
		}
		recs = append(recs, rec)
	}
	op := func(ev uint16, what byte, v int64) []byte {
		b := binary.LittleEndian.AppendUint16(nil, ev)
		return binary.LittleEndian.AppendUint64(append(b, what), uint64(v))
	}
	f.Add(false, op(8, 2, -1))               // a read of -1 bytes
	f.Add(true, op(23, 2, 1<<40))            // a write of 1 TiB (costs no TiB)
	f.Add(false, op(4, 6, 0))                // the SYN-ACK dropped
	f.Add(true, op(75, 0, int64(time.Hour))) // the listener closed an hour later
	f.Add(false, op(1, 5, 1))                // the ISN's port changed
	f.Fuzz(func(t *testing.T, listener bool, ops []byte) {
		src := recs[0]
		if listener {
			src = recs[1]
		}
		rec := &record.Recording{Header: src.Header, Events: slices.Clone(src.Events)}
		for ; len(ops) >= 11 && len(rec.Events) > 0; ops = ops[11:] {
			i := int(binary.LittleEndian.Uint16(ops)) % len(rec.Events)
			v := int64(binary.LittleEndian.Uint64(ops[3:]))
			e := &rec.Events[i]
			switch ops[2] % 10 {
			case 0:
				e.T = time.Duration(v)
			case 1:
				e.T2 = time.Duration(v)
			case 2:
				e.N = v
			case 3:
				e.Port = uint16(v)
			case 4:
				e.Kind = record.Kind(uint64(v) % 20)
			case 5:
				e.Local = netipWithPort(e.Local, uint16(v))
			case 6:
				rec.Events = slices.Delete(rec.Events, i, i+1)
			case 7:
				rec.Events = slices.Insert(rec.Events, i, *e)
			case 8:
				if len(e.Data) > 0 {
					d := slices.Clone(e.Data)
					d[uint64(v)%uint64(len(d))] ^= byte(v >> 32)
					e.Data = d
				}
			case 9:
				e.Args = append(slices.Clone(e.Args), v)
			}
		}
		replayAll(rec)
	})
}

func netipWithPort(ap netip.AddrPort, port uint16) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr(), port)
}
