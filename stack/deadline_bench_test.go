package stack

import (
	"testing"
	"time"
)

// BenchmarkDeadlineHTTP is what net/http's server does with a connection's
// read deadline on every request (conn.readRequest, the background read
// and its abortPendingRead): the header timeout set and cleared while
// nobody waits, then a reader blocked with no deadline and woken by one
// set in the past, and the deadline cleared. (One deadline for every
// round, as a Conn's are in the Conn: the figures are the deadline's own.)
func BenchmarkDeadlineHTTP(b *testing.B) {
	b.ReportAllocs()
	d := newDeadline()
	for b.Loop() {
		d.set(time.Now().Add(10 * time.Second)) // ReadHeaderTimeout
		_ = d.passed()                          // Read of the request (usable)
		d.set(time.Time{})                      // after the headers
		_ = d.passed()                          // the background Read
		w := d.wait()                           // it blocks
		d.set(time.Unix(1, 0))                  // abortPendingRead: aLongTimeAgo
		<-w
		d.set(time.Time{})
	}
}

// BenchmarkDeadlineKeepAlive is the same on a keep-alive connection (wrk's),
// where the next request's Read waits under the header timeout: a timer is
// needed then, lazily armed or not.
func BenchmarkDeadlineKeepAlive(b *testing.B) {
	b.ReportAllocs()
	d := newDeadline()
	for b.Loop() {
		d.set(time.Now().Add(10 * time.Second)) // ReadHeaderTimeout
		_ = d.passed()                          // the next request's Read (usable)
		_ = d.wait()                            // it waits for the request
		_ = d.passed()                          // woken by it
		d.set(time.Time{})                      // after the headers
		_ = d.passed()                          // the background Read
		w := d.wait()                           // it blocks
		d.set(time.Unix(1, 0))                  // abortPendingRead
		<-w
		d.set(time.Time{})
	}
}
