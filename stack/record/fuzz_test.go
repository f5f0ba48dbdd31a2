package record_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/tcpwheel/tcpwheel/stack/flighttest"
	"github.com/tcpwheel/tcpwheel/stack/record"
)

// FuzzParse feeds arbitrary bytes to the reader: errors are fine, as long as
// they wrap ErrFormat and name a block; panics and allocations out of
// proportion to the input are not (see TestParseAllocationBounded).
func FuzzParse(f *testing.F) {
	w := writerRecording(f)
	f.Add(w)
	f.Add(w[:len(w)/2])
	f.Add(w[:28])
	dialer, listener := flighttest.Echo(f, 2, 3000)
	f.Add(dialer)
	f.Add(listener)
	f.Add([]byte("not a recording"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := record.Parse(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, record.ErrFormat) {
				t.Fatalf("%v does not wrap ErrFormat", err)
			}
			if !bytes.Contains([]byte(err.Error()), []byte("block ")) && len(b) > 0 {
				t.Fatalf("%v names no block", err)
			}
			return
		}
		for i := range rec.Events {
			e := &rec.Events[i]
			if e.Index != i+1 || e.Block < 1 {
				t.Fatalf("event %d: index %d, block %d", i, e.Index, e.Block)
			}
			_ = e.String()
		}
		_ = rec.Packets()
	})
}
