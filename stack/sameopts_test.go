package stack

import (
	"reflect"
	"testing"

	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// TestSameSegComparesEveryField: sameOptions, written out field by field,
// tells apart two tcp.Options that differ in any one field, every SACK
// block's edges included, as the compiler's == does: a field added to
// tcp.Options and left out of sameOptions fails here.
func TestSameSegComparesEveryField(t *testing.T) {
	base := tcp.Options{MSS: 1460, HasMSS: true, WindowScale: 7, HasWS: true, SACKPermitted: true, TS: true, TSVal: 9, TSEcr: 10, NSACK: 2}
	for i := range base.SACK {
		base.SACK[i] = tcp.SACKBlock{Start: seqnum.Value(100 * (i + 1)), End: seqnum.Value(100*(i+1) + 50)}
	}
	if o := base; !sameOptions(&base, &o) {
		t.Fatal("sameOptions: a copy differs")
	}
	n, cur := 0, base
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				walk(path+"."+v.Type().Field(i).Name, v.Field(i))
			}
			return
		case reflect.Array:
			for i := range v.Len() {
				walk(path+"["+string(rune('0'+i))+"]", v.Index(i))
			}
			return
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			v.SetInt(v.Int() + 1)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			v.SetUint(v.Uint() + 1)
		default:
			t.Fatalf("%s: a field of kind %v: teach this test to change it", path, v.Kind())
		}
		n++
		changed := cur
		cur = base
		if changed == base {
			t.Fatalf("%s: changing it changed nothing", path)
		}
		if sameOptions(&base, &changed) {
			t.Errorf("%s differs, sameOptions says the same", path)
		}
		a, b := tcp.Segment{Options: base}, tcp.Segment{Options: changed}
		if sameSeg(&a, &b) {
			t.Errorf("%s differs, sameSeg says the same", path)
		}
	}
	walk("Options", reflect.ValueOf(&cur).Elem())
	if want := 9 + 2*len(base.SACK); n < want {
		t.Fatalf("%d fields changed, want at least %d", n, want)
	}
}
