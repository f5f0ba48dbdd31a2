package ring

import (
	"bytes"
	"math/rand/v2"
	"sync"
	"testing"
)

// pattern returns n bytes of the stream that starts at position t.
func pattern(t, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte((t+i)*7 + (t+i)/509)
	}
	return p
}

// TestSharedModel drives a Shared with random writes, syncs, takes,
// consumes and drops, on one goroutine, against a model: every At returns
// the stream's bytes, Held and Pending are exact, and views an At returned
// keep their bytes until those are consumed and a Sync has passed, through
// the producer's writes (Write, or Reserve, Fill and Commit with the
// consumer's calls between) and the storage's growth; a span reserved
// before a Drop is not committed. The ring's counts start
// near 2^32, so that they wrap around (modulo 2^32) early on.
func TestSharedModel(t *testing.T) {
	const origin = 1<<32 - 3000
	var r Shared
	r.wr, r.freed, r.cwr, r.head, r.taken = origin, origin, origin, origin, origin
	rng := rand.New(rand.NewPCG(3, 4))
	var (
		wr, taken, head, freed int // the model: positions in the stream
		grew, wrapped          int
	)
	type view struct {
		at  int // stream position
		got []byte
	}
	var views []view // views into storage, checked until freed passes them
	// The consumer syncs, and takes some of what is pending.
	syncTake := func(i int) {
		if got := r.Sync(); got != wr-taken {
			t.Fatalf("step %d: Sync: %d pending, want %d", i, got, wr-taken)
		}
		freed = head
		k := rng.IntN(wr - taken + 1)
		r.Take(k)
		taken += k
	}
	reserved := 0
	for i := range 50000 {
		switch rng.IntN(7) {
		case 0, 1: // the producer writes, within a limit of 64 KB held
			n := min(rng.IntN(3000), 64<<10-(wr-freed))
			before := r.b
			r.Write(pattern(wr, n))
			if len(r.b) != len(before) {
				grew++
			}
			wr += n
		case 2:
			syncTake(i)
		case 3: // the consumer reads a span of what it holds
			if taken == head {
				continue
			}
			off := rng.IntN(taken - head)
			k := 1 + rng.IntN(min(taken-head-off, 9000))
			got := r.At(off, k)
			if !bytes.Equal(got, pattern(head+off, k)) {
				t.Fatalf("step %d: At(%d, %d) is not the stream's bytes at %d", i, off, k, head+off)
			}
			wraps := int(uint32(origin+head+off))&(len(r.cb)-1)+k > len(r.cb)
			if r.Stable(off, k) == wraps {
				t.Fatalf("step %d: Stable(%d, %d) %v for a span that wraps: %v", i, off, k, r.Stable(off, k), wraps)
			}
			if aliases := cap(got) > 0 && cap(r.scratch) > 0 && &got[:1][0] == &r.scratch[:1][0]; aliases == !wraps {
				t.Fatalf("step %d: At(%d, %d) returned the scratch copy %v for a span that wraps %v", i, off, k, aliases, wraps)
			}
			if wraps {
				wrapped++ // a copy, not a view of the storage
			} else {
				views = append(views, view{head + off, got})
			}
		case 4: // the consumer consumes
			k := rng.IntN(taken - head + 1)
			r.Consume(k)
			head += k
		case 5:
			if rng.IntN(20) == 0 { // the consumer drops what it has not taken
				r.Drop()
				wr, freed = taken, head
			}
		case 6: // the producer reserves room, the consumer syncs, reads or
			// drops meanwhile, and the producer fills the room and commits
			n := min(rng.IntN(3000), 64<<10-(wr-freed))
			before := r.b
			span := r.Reserve(n)
			if len(r.b) != len(before) {
				grew++
			}
			if r.Held() != wr-freed || r.Pending() != wr-taken {
				t.Fatalf("step %d: reserved room counts before its Commit: Held %d, Pending %d; want %d, %d", i, r.Held(), r.Pending(), wr-freed, wr-taken)
			}
			dropped := false
			switch rng.IntN(4) {
			case 0:
				syncTake(i)
			case 1:
				r.Drop()
				wr, freed = taken, head
				dropped = true
			}
			if rng.IntN(2) == 0 {
				span.Fill(pattern(wr, n))
			} else { // filled in place, in part (a read into the ring)
				n = rng.IntN(n + 1)
				a, b := span.Pieces()
				if len(a)+len(b) != span.size || len(b) > 0 && len(a) == 0 {
					t.Fatalf("step %d: Pieces of a %d-byte span: %d and %d bytes", i, span.size, len(a), len(b))
				}
				p := pattern(wr, n)
				copy(b, p[copy(a, p):])
				span = span.Cut(n)
			}
			if ok := r.Commit(span); ok == dropped {
				t.Fatalf("step %d: Commit %v after a Drop %v", i, ok, dropped)
			}
			if !dropped {
				wr += n
				reserved++
			}
		}
		if r.Held() != wr-freed || r.Len() != taken-head || r.Pending() != wr-taken {
			t.Fatalf("step %d: Held %d, Len %d, Pending %d; want %d, %d, %d", i, r.Held(), r.Len(), r.Pending(), wr-freed, taken-head, wr-taken)
		}
		kept := views[:0]
		for _, v := range views {
			if v.at+len(v.got) <= freed {
				continue // consumed and given back: the producer may reuse it
			}
			// What is given back of it (below freed) may be reused.
			if d := max(0, freed-v.at); !bytes.Equal(v.got[d:], pattern(v.at+d, len(v.got)-d)) {
				t.Fatalf("step %d: a view of %d bytes at %d was overwritten before its bytes were given back", i, len(v.got), v.at)
			}
			kept = append(kept, v)
		}
		views = kept
	}
	if grew < 3 || wrapped == 0 || reserved == 0 {
		t.Fatalf("the storage grew %d times, At copied a wrapped span %d times, %d spans were committed: the test did not reach them", grew, wrapped, reserved)
	}
}

// TestSharedRoomAfterSync: what the consumer consumes goes back to the
// producer (Held) only at its next Sync, so a view of it stays valid until
// then; Drop discards only what the consumer has not taken.
func TestSharedRoomAfterSync(t *testing.T) {
	var r Shared
	r.Write(pattern(0, 1000))
	if k := r.Sync(); k != 1000 {
		t.Fatalf("Sync: %d pending, want 1000", k)
	}
	r.Take(800)
	v := r.At(0, 600)
	r.Consume(600)
	r.Write(pattern(1000, 600)) // fits in the 1 KB storage only over the consumed bytes
	if r.Held() != 1600 {
		t.Fatalf("Held after a Consume without a Sync: %d, want 1600", r.Held())
	}
	if !bytes.Equal(v, pattern(0, 600)) {
		t.Fatal("a consumed view was overwritten before the Sync")
	}
	// Drop: the 200 taken and not consumed stay, the 200 not taken and
	// the 600 written after go; the 600 consumed go back.
	r.Drop()
	if r.Held() != 200 || r.Pending() != 0 || r.Len() != 200 {
		t.Fatalf("after Drop: Held %d, Pending %d, Len %d; want 200, 0, 200", r.Held(), r.Pending(), r.Len())
	}
	r.Write(pattern(5000, 100))
	r.Sync()
	r.Take(100)
	if got := r.At(0, 200); !bytes.Equal(got, pattern(600, 200)) {
		t.Fatal("Drop lost bytes the consumer had taken")
	}
	if got := r.At(200, 100); !bytes.Equal(got, pattern(5000, 100)) {
		t.Fatal("the bytes written after a Drop are not the next the consumer reads")
	}
}

// TestSharedConcurrent runs the producer and the consumer on two goroutines,
// as the Conn and its loop do (for -race): every byte arrives, in order, and
// the producer never holds more than its limit.
func TestSharedConcurrent(t *testing.T) {
	const total, limit = 4 << 20, 100 << 10
	var (
		r    Shared
		mu   sync.Mutex
		wg   sync.WaitGroup
		room = make(chan struct{}, 1)
	)
	wg.Add(1)
	go func() { // the producer
		defer wg.Done()
		rng := rand.New(rand.NewPCG(5, 6))
		for wr := 0; wr < total; {
			mu.Lock()
			n := min(1+rng.IntN(20000), limit-r.Held(), total-wr)
			if n > 0 {
				if rng.IntN(2) == 0 {
					r.Write(pattern(wr, n))
				} else { // the copy without the lock, as a large Write's
					span := r.Reserve(n)
					mu.Unlock()
					span.Fill(pattern(wr, n))
					mu.Lock()
					if !r.Commit(span) {
						t.Error("Commit refused a span with no Drop since its Reserve")
					}
				}
				wr += n
			}
			mu.Unlock()
			if n <= 0 {
				<-room
			}
		}
	}()
	rng := rand.New(rand.NewPCG(7, 8))
	for head := 0; head < total; {
		mu.Lock()
		k := r.Sync()
		mu.Unlock()
		select {
		case room <- struct{}{}:
		default:
		}
		r.Take(rng.IntN(k + 1))
		if n := r.Len(); n > 0 {
			k := 1 + rng.IntN(n)
			if got := r.At(0, k); !bytes.Equal(got, pattern(head, k)) {
				t.Fatalf("At(0, %d) at %d is not the stream's bytes", k, head)
			}
			r.Consume(k)
			head += k
		}
	}
	wg.Wait()
}

// TestSharedReleaseAdopt: a Shared ring gives its storage up only once every
// byte written was taken, consumed and given back (a Sync after the last
// Consume): storage still in use is never handed to another ring. Adopted
// storage serves the new ring from its first byte, without an allocation.
func TestSharedReleaseAdopt(t *testing.T) {
	var r Shared
	if r.Release() != nil {
		t.Fatal("Release of a ring without storage returned some")
	}
	r.Write(pattern(0, 300))
	for _, step := range []struct {
		name string
		do   func()
	}{
		{"written, not synced", func() {}},
		{"synced, not taken", func() { r.Sync() }},
		{"taken, not consumed", func() { r.Take(300) }},
		{"consumed, not given back", func() { r.Consume(300) }},
	} {
		step.do()
		if r.Release() != nil {
			t.Fatalf("%s: Release gave the storage up", step.name)
		}
	}
	r.Sync()
	b := r.Release()
	if len(b) != MinCap || r.Held() != 0 || r.Len() != 0 || r.Pending() != 0 {
		t.Fatalf("Release: %d bytes, Held %d Len %d Pending %d; want %d, 0, 0, 0", len(b), r.Held(), r.Len(), r.Pending(), MinCap)
	}
	var n Shared
	if n.Adopt(make([]byte, 4*MinCap)) {
		t.Fatal("Adopt took storage of another size")
	}
	if !n.Adopt(b) {
		t.Fatal("Adopt refused a released ring's storage")
	}
	if n.Adopt(make([]byte, MinCap)) {
		t.Fatal("Adopt replaced the storage of a ring that has some")
	}
	var w Shared
	w.Write(pattern(0, 1))
	if w.Adopt(make([]byte, MinCap)) {
		t.Fatal("Adopt took storage for a ring written to")
	}
	p := pattern(1000, 700)
	if allocs := testing.AllocsPerRun(1, func() {
		n.Write(p)
		n.Sync()
		n.Take(700)
		n.Consume(700)
		n.Sync()
	}); allocs != 0 {
		t.Fatalf("a ring on adopted storage: %.1f allocations, want none", allocs)
	}
	n.Write(p)
	n.Sync()
	n.Take(700)
	if got := n.At(0, 700); !bytes.Equal(got, p) {
		t.Fatal("the bytes read back from adopted storage differ")
	}
}
