package stack

import (
	"reflect"
	"testing"

	"github.com/tcpwheel/tcpwheel/tcp"
)

// TestAddTCPCounters: tcp.Counters is uint64 fields alone, packed (so that
// addTCPCounters may add it as an array), and addTCPCounters adds every
// field as addCounters does.
func TestAddTCPCounters(t *testing.T) {
	typ := reflect.TypeFor[tcp.Counters]()
	for i := range typ.NumField() {
		if f := typ.Field(i); f.Type.Kind() != reflect.Uint64 || f.Offset != uintptr(8*i) {
			t.Fatalf("tcp.Counters.%s: %v at offset %d: addTCPCounters takes uint64s alone, packed", f.Name, f.Type, f.Offset)
		}
	}
	if typ.Size() != uintptr(8*typ.NumField()) {
		t.Fatalf("tcp.Counters is %d bytes for %d fields", typ.Size(), typ.NumField())
	}
	var a, b tcp.Counters
	av, bv := reflect.ValueOf(&a).Elem(), reflect.ValueOf(&b).Elem()
	for i := range typ.NumField() {
		av.Field(i).SetUint(uint64(1000 * (i + 1)))
		bv.Field(i).SetUint(uint64(i + 1))
	}
	want := a
	addCounters(&want, b)
	addTCPCounters(&a, &b)
	if a != want {
		t.Fatalf("addTCPCounters:\n%+v, want\n%+v", a, want)
	}
}
