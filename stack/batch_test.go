package stack

import (
	"math/bits"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// burst holds s's loop busy while send queues n packets for it (junk, which
// the stack counts as BadIPHeader drops), then lets the loop go and waits
// until it has handled them all. ready, if not nil, reports whether the
// packets have reached the stack's side (the reader path's queue).
func burst(t *testing.T, s *Stack, n int, send func(pkt []byte) error, ready func() bool) Stats {
	t.Helper()
	unblock := blockLoop(t, s)
	junk := make([]byte, 20) // version 0: not IPv4
	for i := range n {
		if err := send(junk); err != nil {
			unblock()
			t.Fatalf("sending packet %d: %v", i, err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ready != nil && !ready(); {
		if time.Now().After(deadline) {
			t.Fatal("the packets never reached the stack")
		}
		time.Sleep(time.Millisecond)
	}
	unblock()
	for deadline := time.Now().Add(10 * time.Second); ; {
		st := s.Stats()
		if st.PacketsIn >= uint64(n) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("handled %d packets of %d", st.PacketsIn, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// checkBatches: n packets that waited together are handled in batches of at
// most maxReadBatch, one per turn, all of them counted.
func checkBatches(t *testing.T, st Stats, n int) {
	t.Helper()
	in := st.Input
	full := uint64(n / maxReadBatch)
	if in.Packets != uint64(n) || in.Max != maxReadBatch || in.Full != full || in.Batches != full+1 {
		t.Errorf("input %+v: want %d packets in %d full batches of %d and one of %d",
			in, n, full, maxReadBatch, n%maxReadBatch)
	}
	if in.Sizes[inputSizeBuckets-1] != full {
		t.Errorf("Sizes %v: want %d batches in the last bucket", in.Sizes, full)
	}
	if st.Drops.NotIPv4 != uint64(n) {
		t.Errorf("NotIPv4 drops %d, want %d", st.Drops.NotIPv4, n)
	}
}

func TestInputBatchesReaderPath(t *testing.T) {
	da, db := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500, QueueLen: 4096})
	s, err := New(Config{Device: da, Addr: addrA})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 2*maxReadBatch + 10
	st := burst(t, s, n, db.WritePacket, func() bool {
		s.inMu.Lock()
		defer s.inMu.Unlock()
		return len(s.inq) == n
	})
	if st.InputPath != inputReader {
		t.Fatalf("input path %q, want %q", st.InputPath, inputReader)
	}
	checkBatches(t, st, n)
}

// TestInputSizeBuckets: one bucket per power of two up to maxReadBatch, so
// that the largest batch lands in the last bucket.
func TestInputSizeBuckets(t *testing.T) {
	if want := bits.Len(uint(maxReadBatch)); inputSizeBuckets != want {
		t.Errorf("inputSizeBuckets = %d, want bits.Len(maxReadBatch) = %d", inputSizeBuckets, want)
	}
}
