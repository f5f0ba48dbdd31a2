package stack

import (
	"testing"
	"time"
)

// BenchmarkDeadlineRequest: the deadline sets of one request of net/http's
// server with ReadHeaderTimeout (a future time, none, a past time to stop its
// background read, none), nobody waiting on the deadline between them.
func BenchmarkDeadlineRequest(b *testing.B) {
	var d deadline
	for b.Loop() {
		d.set(time.Now().Add(10 * time.Second))
		_ = d.passed()
		d.set(time.Time{})
		d.set(time.Now().Add(-time.Second))
		d.set(time.Time{})
	}
}
