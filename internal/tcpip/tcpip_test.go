package tcpip

import (
	"bytes"
	"testing"
)

func TestAddress(t *testing.T) {
	v4 := AddrFrom4([4]byte{198, 18, 0, 1})
	if v4.Len() != 4 || !bytes.Equal(v4.AsSlice(), []byte{198, 18, 0, 1}) || v4.String() != "198.18.0.1" {
		t.Errorf("AddrFrom4: %v %x %q", v4.Len(), v4.AsSlice(), v4)
	}
	if v4 != AddrFromSlice([]byte{198, 18, 0, 1}) {
		t.Error("AddrFromSlice(4 bytes) differs from AddrFrom4")
	}
	if v4.As4() != [4]byte{198, 18, 0, 1} {
		t.Errorf("As4 = %v", v4.As4())
	}
	b16 := [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}
	v6 := AddrFrom16(b16)
	if v6.Len() != 16 || v6.As16() != b16 || v6.String() != "2001:db8::1" || v6 != AddrFromSlice(b16[:]) {
		t.Errorf("AddrFrom16: %v %x %q", v6.Len(), v6.AsSlice(), v6)
	}
	for _, n := range []int{0, 1, 5, 15, 17} {
		if a := AddrFromSlice(make([]byte, n)); a.Len() != 0 || len(a.AsSlice()) != 0 || a.String() != "" {
			t.Errorf("AddrFromSlice(%d bytes) = %v, want the empty address", n, a)
		}
	}
	if v4 == AddrFromSlice(b16[:4]) {
		t.Error("different addresses compare equal")
	}
}
