package record

import (
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// benchWriter returns a Writer on w, its header written.
func benchWriter(b *testing.B, w io.Writer) *Writer {
	b.Helper()
	rw, err := NewWriter(w, Header{Addr: netip.MustParseAddr("198.18.0.2"), MTU: 1500, Wall: time.Unix(0, 0)})
	if err != nil {
		b.Fatal(err)
	}
	return rw
}

// BenchmarkWriterPacket is the recorder's cost per packet: a 1500-byte
// packet, as the stack's loop hands it over, through the Writer's buffer to
// io.Discard (the encoding and copying alone) or to a file (with the
// writes to the file); whole, or its 52 bytes of IPv4 and TCP headers (with
// timestamps) only, as a recording without payloads keeps it.
func BenchmarkWriterPacket(b *testing.B) {
	for _, caplen := range []int{1500, 52} {
		name := "whole"
		if caplen < 1500 {
			name = "headers"
		}
		b.Run(name, func(b *testing.B) { benchPacket(b, caplen) })
	}
}

func benchPacket(b *testing.B, caplen int) {
	pkt := make([]byte, 1500)
	for i := range pkt {
		pkt[i] = byte(i)
	}
	run := func(b *testing.B, w io.Writer) {
		rw := benchWriter(b, w)
		b.SetBytes(int64(len(pkt)))
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			rw.PacketCap(i&1 == 0, time.Duration(i), pkt, caplen)
		}
		if err := rw.Flush(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if got := rw.Stats().Packets; got != uint64(b.N) {
			b.Fatalf("wrote %d packets, want %d", got, b.N)
		}
	}
	b.Run("discard", func(b *testing.B) { run(b, io.Discard) })
	b.Run("file", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "rec.pcapng"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		run(b, f)
	})
}

// BenchmarkWriterEvent is the cost of one event (a send-time reading, the
// commonest), with a packet every 4 events to write them out as a block.
func BenchmarkWriterEvent(b *testing.B) {
	rw := benchWriter(b, io.Discard)
	pkt := make([]byte, 60)
	e := Event{Kind: SendTime}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		e.T = time.Duration(i) * time.Microsecond
		rw.Event(&e)
		if i&3 == 3 {
			rw.Packet(false, e.T, pkt)
		}
	}
	if err := rw.Flush(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if got := rw.Stats().Events; got != uint64(b.N) {
		b.Fatalf("wrote %d events, want %d", got, b.N)
	}
}
