package stack

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/stack/record"
	"github.com/tcpwheel/tcpwheel/tcp"
)

// TestRecordTCPMirrorsConfig: every field of tcp.Config but its functions
// has a field of the same name and kind in record.TCP, and nothing else does;
// so a recording cannot leave a setting out, and a Playback builds the same
// tcp.Config.
func TestRecordTCPMirrorsConfig(t *testing.T) {
	ct, rt := reflect.TypeFor[tcp.Config](), reflect.TypeFor[record.TCP]()
	for i := range ct.NumField() {
		f := ct.Field(i)
		if f.Type.Kind() == reflect.Func {
			if _, ok := rt.FieldByName(f.Name); ok {
				t.Errorf("record.TCP has %s, a function in tcp.Config", f.Name)
			}
			continue
		}
		r, ok := rt.FieldByName(f.Name)
		if !ok {
			t.Errorf("record.TCP has no %s (tcp.Config.%s %s): recordings would not carry it", f.Name, f.Name, f.Type)
			continue
		}
		if r.Type.Kind() != f.Type.Kind() {
			t.Errorf("record.TCP.%s is a %s, tcp.Config's a %s", f.Name, r.Type, f.Type)
		}
	}
	for i := range rt.NumField() {
		if _, ok := ct.FieldByName(rt.Field(i).Name); !ok {
			t.Errorf("record.TCP.%s is in no tcp.Config field", rt.Field(i).Name)
		}
	}
}

// TestRecordTCPRoundTrip: a tcp.Config whose every field is set comes back
// whole from a recording's header, through its JSON.
func TestRecordTCPRoundTrip(t *testing.T) {
	var c tcp.Config
	v := reflect.ValueOf(&c).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Uint8:
			f.SetUint(uint64(i + 1))
		case reflect.Func:
		default:
			t.Fatalf("tcp.Config.%s: a %s, which this test does not fill", v.Type().Field(i).Name, f.Type())
		}
	}
	h := record.Header{TCP: tcpRecord(c), Wall: time.Unix(0, 0).UTC()}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var back record.Header
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&back); err != nil {
		t.Fatal(err)
	}
	got := configFromHeader(&back).TCP
	if !reflect.DeepEqual(got, c) {
		t.Errorf("round trip:\n got  %+v\n want %+v", got, c)
	}
}

// TestRecordRecvBuffer: a recording's header carries the receive buffer its
// endpoints use, the default when the config left it unset, so that a replay
// runs with it whatever the default is then; a header without one (recorded
// before 2026-11-24, when the default was 256 KB) replays with 256 KB.
func TestRecordRecvBuffer(t *testing.T) {
	if got := tcpRecord(tcp.Config{}).RecvBuffer; got != tcp.DefaultRecvBuffer {
		t.Errorf("header of the default config: RecvBuffer %d, want %d", got, tcp.DefaultRecvBuffer)
	}
	if got := tcpFromRecord(tcpRecord(tcp.Config{})).RecvBuffer; got != tcp.DefaultRecvBuffer {
		t.Errorf("the default config through a header: RecvBuffer %d, want %d", got, tcp.DefaultRecvBuffer)
	}
	if got := tcpFromRecord(tcpRecord(tcp.Config{RecvBuffer: 64 << 10})).RecvBuffer; got != 64<<10 {
		t.Errorf("a set RecvBuffer through a header: %d, want %d", got, 64<<10)
	}
	if got := tcpFromRecord(record.TCP{}).RecvBuffer; got != 256<<10 {
		t.Errorf("a header without RecvBuffer: %d, want 256 KB", got)
	}
}

// TestRecordSendBufferMax: a recording's header carries what its send
// buffers may grow to (tcp.Config.SendBufferMax as the defaults make it),
// so that a replay grows them where the recording did; a header without it
// (recorded before the growth, 2026-11-24) replays with buffers that keep
// their size.
func TestRecordSendBufferMax(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    tcp.Config
		want int
	}{
		{"default", tcp.Config{}, tcp.DefaultSendBufferMax},
		{"a set SendBuffer", tcp.Config{SendBuffer: 64 << 10}, 64 << 10},
		{"a set SendBufferMax", tcp.Config{SendBufferMax: 8 << 20}, 8 << 20},
	} {
		if got := tcpRecord(tc.c).SendBufferMax; got != tc.want {
			t.Errorf("%s: header's SendBufferMax %d, want %d", tc.name, got, tc.want)
		}
		if got := tcpFromRecord(tcpRecord(tc.c)).SendBufferMax; got != tc.want {
			t.Errorf("%s: through a header, SendBufferMax %d, want %d", tc.name, got, tc.want)
		}
	}
	if got := tcpFromRecord(record.TCP{}).SendBufferMax; got != tcp.DefaultSendBuffer {
		t.Errorf("a header without SendBufferMax nor SendBuffer: %d, want the default buffer, %d", got, tcp.DefaultSendBuffer)
	}
	if got := tcpFromRecord(record.TCP{}).GSOMax; got != -1 {
		t.Errorf("a header without GSOMax: %d, want -1 (one MSS per segment, not the stack's default)", got)
	}
	if got := tcpFromRecord(record.TCP{GSOMax: 65000}).GSOMax; got != 65000 {
		t.Errorf("a header's GSOMax 65000 read as %d", got)
	}
	if got := tcpFromRecord(record.TCP{SendBuffer: 100 << 10}).SendBufferMax; got != 100<<10 {
		t.Errorf("a header without SendBufferMax: %d, want its SendBuffer, %d", got, 100<<10)
	}
}
