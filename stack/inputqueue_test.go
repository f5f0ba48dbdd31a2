package stack

import (
	"errors"
	"testing"

	"github.com/tcpwheel/tcpwheel/loop"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// TestInputQueue: Config.InputQueue from 0 to loop.MaxDeferredTurnsLimit
// batches makes a stack that works; outside, New fails with ErrConfig.
func TestInputQueue(t *testing.T) {
	for _, q := range []int{-1, loop.MaxDeferredTurnsLimit*maxReadBatch + 1} {
		d, _ := tuntest.Pipe(1500)
		if s, err := New(Config{Device: d, Addr: addrA, InputQueue: q}); !errors.Is(err, ErrConfig) {
			if s != nil {
				s.Close()
			}
			t.Errorf("InputQueue %d: New = %v, want ErrConfig", q, err)
		}
		d.Close()
	}
	a, b := pair(t, Config{InputQueue: 80000})
	c, s := dialPair(t, a, b)
	defer c.Close()
	defer s.Close()
	if _, err := c.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	if _, err := s.Read(buf); err != nil || string(buf) != "hi" {
		t.Fatalf("read %q, %v", buf, err)
	}
}
