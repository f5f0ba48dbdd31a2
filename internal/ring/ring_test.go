package ring

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// check compares the ring's contents, through Peek and At, with want.
func check(t *testing.T, r *Buffer, want []byte) {
	t.Helper()
	if r.Len() != len(want) {
		t.Fatalf("Len %d, want %d", r.Len(), len(want))
	}
	a, b := r.Peek()
	if got := append(append([]byte(nil), a...), b...); !bytes.Equal(got, want) {
		t.Fatalf("Peek: %d bytes differ from the %d expected", len(got), len(want))
	}
	if len(want) > 0 {
		i := len(want) / 3
		got := r.At(i, len(want)-i)
		if !bytes.Equal(got, want[i:]) {
			t.Fatalf("At(%d, %d) differs", i, len(want)-i)
		}
		// Stable: At returned a slice of the storage (one of Peek's
		// pieces), not the scratch copy.
		view := false
		for _, s := range [][]byte{a, b} {
			off := cap(s) - cap(got)
			view = view || (len(s) > 0 && off >= 0 && off+len(got) <= len(s) && &s[:off+1][off] == &got[0])
		}
		k := len(want) - i
		if oneSpan := i+k <= len(a) || i >= len(a); view != oneSpan {
			t.Fatalf("At(%d, %d): a view of the storage %v, within one of Peek's pieces %v", i, k, view, oneSpan)
		}
		if r.Stable(i, len(want)-i) != view {
			t.Fatalf("Stable(%d, %d) %v, At's a view of the storage %v", i, len(want)-i, r.Stable(i, len(want)-i), view)
		}
	}
}

// TestWraps writes and consumes so that the contents wrap around the end of
// the storage, again and again, and checks every byte against a plain slice.
func TestWraps(t *testing.T) {
	var r Buffer
	var model []byte
	rng := rand.New(rand.NewPCG(1, 2))
	next := byte(0)
	wrapped := 0
	for i := range 20000 {
		switch rng.IntN(4) {
		case 0, 1: // write, mostly within the 4 KB storage
			p := make([]byte, rng.IntN(1500))
			for j := range p {
				p[j] = next
				next++
			}
			if r.Len()+len(p) > 4096 && i < 15000 {
				continue // stay in one storage size for most of the run
			}
			r.Write(p)
			model = append(model, p...)
		case 2: // read
			p := make([]byte, rng.IntN(2000))
			n := r.Read(p)
			if want := min(len(p), len(model)); n != want || !bytes.Equal(p[:n], model[:n]) {
				t.Fatalf("step %d: Read %d bytes, want %d, or the bytes differ", i, n, want)
			}
			model = model[n:]
		case 3: // consume from the front
			k := rng.IntN(len(model) + 1)
			r.Consume(k)
			model = model[k:]
		}
		if a, b := r.Peek(); len(b) > 0 && len(a) > 0 {
			wrapped++
		}
		check(t, &r, model)
	}
	if wrapped < 1000 {
		t.Fatalf("the contents wrapped in only %d steps: the test does not test wrapping", wrapped)
	}
	if r.Cap() <= 4096 {
		t.Fatalf("storage %d: the last steps should have grown it", r.Cap())
	}
}

// TestGrowUnwraps grows a wrapped ring: the contents stay in order.
func TestGrowUnwraps(t *testing.T) {
	var r Buffer
	r.Write(bytes.Repeat([]byte{1}, 3000))
	r.Consume(3000)
	r.Write(bytes.Repeat([]byte{2}, 2000)) // starts at 0 again: emptied
	r.Consume(1000)
	r.Write(bytes.Repeat([]byte{3}, 3000)) // wraps: 1000..4096, then 0..904
	if a, b := r.Peek(); len(b) == 0 {
		t.Fatalf("not wrapped: %d + %d", len(a), len(b))
	}
	want := append(bytes.Repeat([]byte{2}, 1000), bytes.Repeat([]byte{3}, 3000)...)
	check(t, &r, want)
	r.Write(bytes.Repeat([]byte{4}, 5000))
	want = append(want, bytes.Repeat([]byte{4}, 5000)...)
	if r.Cap() != 16384 {
		t.Fatalf("Cap %d, want 16384", r.Cap())
	}
	check(t, &r, want)
}

// TestFreeCommit fills the free space directly, across the wrap.
func TestFreeCommit(t *testing.T) {
	var r Buffer
	r.Grow(100)
	if r.Cap() != minCap {
		t.Fatalf("Cap %d, want %d", r.Cap(), minCap)
	}
	r.Write(make([]byte, 4000))
	r.Consume(3000) // head 3000, 1000 held, free: 4000..4096 then 0..3000
	a, b := r.Free()
	if len(a) != 96 || len(b) != 3000 {
		t.Fatalf("Free: %d + %d, want 96 + 3000", len(a), len(b))
	}
	for i := range a {
		a[i] = 7
	}
	for i := range b[:100] {
		b[i] = 8
	}
	r.Commit(196)
	got := r.At(1000, 196)
	want := append(bytes.Repeat([]byte{7}, 96), bytes.Repeat([]byte{8}, 100)...)
	if !bytes.Equal(got, want) {
		t.Fatal("committed bytes differ")
	}
	r.Write(make([]byte, 2900)) // exactly full
	if a, b := r.Free(); len(a)+len(b) != 0 || r.Len() != 4096 {
		t.Fatalf("full ring: free %d, Len %d", len(a)+len(b), r.Len())
	}
	r.Reset()
	if r.Len() != 0 || r.Cap() != 0 {
		t.Fatal("Reset kept the storage")
	}
}

// BenchmarkSlide is the send buffer's pattern: acknowledged data consumed
// from the front while writes of 64 KB come at the back, 256 KB held.
func BenchmarkSlide(b *testing.B) {
	var r Buffer
	p := make([]byte, 64<<10)
	r.Write(make([]byte, 192<<10))
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		r.Write(p)
		r.Consume(len(p))
	}
}

// TestReleaseAdopt: a ring's storage, released, serves another ring as its
// own, without an allocation; Adopt refuses storage of another size and a
// ring that has storage or contents.
func TestReleaseAdopt(t *testing.T) {
	var r Buffer
	r.Write(bytes.Repeat([]byte("x"), 100))
	b := r.Release()
	if len(b) != MinCap || r.Len() != 0 || r.Cap() != 0 {
		t.Fatalf("Release: %d bytes, ring left with Len %d Cap %d; want %d, 0, 0", len(b), r.Len(), r.Cap(), MinCap)
	}
	var n Buffer
	if n.Adopt(make([]byte, 2*MinCap)) || n.Cap() != 0 {
		t.Fatal("Adopt took storage of another size")
	}
	if !n.Adopt(b) || n.Cap() != MinCap {
		t.Fatal("Adopt refused a released ring's storage")
	}
	if n.Adopt(make([]byte, MinCap)) {
		t.Fatal("Adopt replaced the storage of a ring that has some")
	}
	want := []byte("0123456789")
	if allocs := testing.AllocsPerRun(10, func() { n.Write(want); n.Consume(len(want)) }); allocs != 0 {
		t.Fatalf("writes into adopted storage: %.1f allocations, want none", allocs)
	}
	n.Write(want)
	check(t, &n, want)
	var e Buffer
	e.Write([]byte("y"))
	e.Release()
	e.Write([]byte("z"))
	check(t, &e, []byte("z"))
}
