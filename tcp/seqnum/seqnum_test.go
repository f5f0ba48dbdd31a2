package seqnum

import "testing"

func TestCompareWraps(t *testing.T) {
	for _, c := range []struct {
		v, w   Value
		less   bool
		lessEq bool
	}{
		{1, 2, true, true},
		{2, 1, false, false},
		{5, 5, false, true},
		{0xffffffff, 0, true, true},   // wraps
		{0, 0xffffffff, false, false}, // wraps
		{0x7fffffff, 0x80000000, true, true},
		{0, 0x80000001, false, false}, // more than half the space ahead: behind
		{0xfffffff0, 0x10, true, true},
	} {
		if got := c.v.LessThan(c.w); got != c.less {
			t.Errorf("%#x.LessThan(%#x) = %v, want %v", c.v, c.w, got, c.less)
		}
		if got := c.v.LessThanEq(c.w); got != c.lessEq {
			t.Errorf("%#x.LessThanEq(%#x) = %v, want %v", c.v, c.w, got, c.lessEq)
		}
	}
}

func TestRangeAndWindow(t *testing.T) {
	for _, c := range []struct {
		v, a, b Value
		in      bool
	}{
		{5, 5, 10, true},
		{9, 5, 10, true},
		{10, 5, 10, false},
		{4, 5, 10, false},
		{0, 0xfffffffe, 2, true}, // across the wrap
		{0xffffffff, 0xfffffffe, 2, true},
		{2, 0xfffffffe, 2, false},
		{7, 7, 7, false}, // empty range
	} {
		if got := c.v.InRange(c.a, c.b); got != c.in {
			t.Errorf("%#x.InRange(%#x, %#x) = %v, want %v", c.v, c.a, c.b, got, c.in)
		}
		if got := c.v.InWindow(c.a, c.a.Size(c.b)); got != c.in {
			t.Errorf("%#x.InWindow(%#x, %d) = %v, want %v", c.v, c.a, c.a.Size(c.b), got, c.in)
		}
	}
}

func TestAddSizeUpdate(t *testing.T) {
	v := Value(0xfffffff0)
	if got := v.Add(0x20); got != 0x10 {
		t.Errorf("Add across the wrap = %#x, want 0x10", got)
	}
	if got := v.Size(0x10); got != 0x20 {
		t.Errorf("Size across the wrap = %#x, want 0x20", got)
	}
	v.UpdateForward(0x11)
	if v != 1 {
		t.Errorf("UpdateForward = %#x, want 1", v)
	}
}

// FuzzSeqnum checks the identities that tcp relies on for any pair.
func FuzzSeqnum(f *testing.F) {
	f.Add(uint32(0), uint32(1))
	f.Add(uint32(0xffffffff), uint32(0x80000000))
	f.Fuzz(func(t *testing.T, a, b uint32) {
		v, w := Value(a), Value(b)
		if v.Add(v.Size(w)) != w {
			t.Fatalf("%#x + Size(%#x) != %#x", v, w, w)
		}
		if v != w && v-w != 0x80000000 && v.LessThan(w) == w.LessThan(v) {
			t.Fatalf("LessThan not antisymmetric for %#x, %#x", v, w)
		}
		if v.LessThan(w) && !v.LessThanEq(w) {
			t.Fatalf("LessThan without LessThanEq for %#x, %#x", v, w)
		}
		if !v.InWindow(v, 1) || v.InWindow(v, 0) {
			t.Fatalf("window of one/zero at %#x", v)
		}
	})
}
