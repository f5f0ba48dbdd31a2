package stack

import (
	"cmp"
	"reflect"

	"github.com/tcpwheel/tcpwheel/stack/record"
	"github.com/tcpwheel/tcpwheel/tcp"
)

// The recording's header carries the TCP configuration as record.TCP: the
// fields of tcp.Config but its functions, under the same names, with
// time.Duration written as record.Duration. They are copied by name, so that
// a field added to tcp.Config cannot be left out of recordings by mistake:
// TestRecordTCPMirrorsConfig fails until record.TCP has it too.

// legacyRecvBuffer is the receive buffer of a recording whose header has
// none: tcp.DefaultRecvBuffer until 2026-11-24, when it became 1 MB. The
// recorder wrote the configuration as given, defaults unset; it now writes
// the receive buffer always (tcpRecord), so 0 means an older recording.
const legacyRecvBuffer = 256 << 10

// tcpRecord is c as a recording's header has it, with the receive buffer
// its endpoints use (the default, when c leaves it unset), and the size
// their send buffers may grow to.
func tcpRecord(c tcp.Config) record.TCP {
	var t record.TCP
	copyByName(reflect.ValueOf(&t).Elem(), reflect.ValueOf(c))
	if t.RecvBuffer == 0 {
		t.RecvBuffer = tcp.DefaultRecvBuffer
	}
	t.SendBufferMax = c.SendBufferLimit() // what tcp.Config's defaults make of it
	return t
}

// tcpFromRecord is the tcp.Config a recording's header describes (less its
// functions).
func tcpFromRecord(t record.TCP) tcp.Config {
	var c tcp.Config
	copyByName(reflect.ValueOf(&c).Elem(), reflect.ValueOf(t))
	if c.RecvBuffer == 0 {
		c.RecvBuffer = legacyRecvBuffer
	}
	if c.SendBufferMax == 0 {
		// A recording from before the send buffer grew (2026-11-24,
		// tcp.Config.SendBufferMax): it stayed at its size.
		c.SendBufferMax = cmp.Or(c.SendBuffer, tcp.DefaultSendBuffer)
	}
	if c.GSOMax == 0 {
		// A recording from before TSO segments (2026-11-24,
		// tcp.Config.GSOMax), or of a stack without GSO: one MSS per
		// segment, whatever the replaying stack's device (New).
		c.GSOMax = -1
	}
	return c
}

// copyByName sets each field of dst from src's field of the same name, where
// src has one whose kind matches (time.Duration and record.Duration are both
// int64s).
func copyByName(dst, src reflect.Value) {
	for i := range dst.NumField() {
		f := dst.Type().Field(i)
		v := src.FieldByName(f.Name)
		if !v.IsValid() || v.Kind() != f.Type.Kind() {
			continue
		}
		dst.Field(i).Set(v.Convert(f.Type))
	}
}
