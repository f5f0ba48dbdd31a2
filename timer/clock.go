package timer

import (
	"sync/atomic"
	"time"
)

// Clock is a monotonic time source. Now returns the time elapsed since an arbitrary,
// fixed epoch of the clock's own; it never goes backwards.
type Clock interface {
	Now() time.Duration
}

// MonotonicClock reads the system's monotonic clock. The zero value is not usable;
// use NewMonotonicClock.
type MonotonicClock struct {
	base time.Time
}

// NewMonotonicClock returns a clock whose epoch is the moment of the call.
func NewMonotonicClock() *MonotonicClock { return &MonotonicClock{base: time.Now()} }

// Now implements Clock.
func (c *MonotonicClock) Now() time.Duration { return time.Since(c.base) }

// Time converts a reading of this clock to wall-clock time.Time (with a monotonic
// component), so that readings can be compared with time.Now().
func (c *MonotonicClock) Time(d time.Duration) time.Time { return c.base.Add(d) }

// ManualClock is a clock that moves only when told to. Tests use it to check exact
// instants. It is safe for concurrent use.
type ManualClock struct {
	now atomic.Int64
}

// NewManualClock returns a manual clock reading start.
func NewManualClock(start time.Duration) *ManualClock {
	c := &ManualClock{}
	c.now.Store(int64(start))
	return c
}

// Now implements Clock.
func (c *ManualClock) Now() time.Duration { return time.Duration(c.now.Load()) }

// Advance moves the clock forward by d and returns the new reading. A negative d
// is treated as zero: the clock never goes backwards.
func (c *ManualClock) Advance(d time.Duration) time.Duration {
	if d < 0 {
		d = 0
	}
	return time.Duration(c.now.Add(int64(d)))
}

// Set moves the clock to t if t is later than the current reading, and returns the
// reading.
func (c *ManualClock) Set(t time.Duration) time.Duration {
	for {
		cur := c.now.Load()
		if int64(t) <= cur || c.now.CompareAndSwap(cur, int64(t)) {
			return time.Duration(c.now.Load())
		}
	}
}
