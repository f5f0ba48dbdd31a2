package timer_test

import (
	"fmt"
	"time"

	"github.com/tcpwheel/tcpwheel/timer"
)

// The wheel's four operations on a manual clock, with three timers a TCP
// connection might hold: a segment's retransmission timer, a delayed ACK and a
// keepalive. START_TIMER is Start, STOP_TIMER is Stop, and Advance is both
// PER_TICK_BOOKKEEPING (moving the wheel to now) and EXPIRY_PROCESSING
// (running each due entry's function, in deadline order). The wheel reads no
// clock on its own: the caller hands Advance the time, as an event loop does
// when it wakes.
func Example() {
	clk := timer.NewManualClock(0)
	w, err := timer.New(timer.Config{Tick: time.Millisecond, Clock: clk})
	if err != nil {
		panic(err)
	}

	// An Entry is embedded in its owner and given its function once.
	var rto, delayedACK, keepalive timer.Entry
	rto.Init(func() { fmt.Println("  fired at", w.Now(), "retransmission (RTO)") })
	delayedACK.Init(func() { fmt.Println("  fired at", w.Now(), "delayed ACK") })
	keepalive.Init(func() {
		fmt.Println("  fired at", w.Now(), "keepalive: probe, and start again")
		w.Start(&keepalive, 75*time.Second) // a callback may start any entry, itself too
	})

	// START_TIMER: O(1), no allocation.
	w.Start(&rto, 200*time.Millisecond)
	w.Start(&delayedACK, 40*time.Millisecond)
	w.Start(&keepalive, 2*time.Hour)
	next, _ := w.NextDeadline()
	fmt.Println("started 3; pending:", w.Len(), "next deadline:", next)

	// At 30 ms the ACK for the segment arrives. Advance first (nothing is due),
	// then STOP_TIMER: the segment's retransmission timer is disarmed in O(1).
	fmt.Println("Advance(30ms) fired", w.Advance(clk.Set(30*time.Millisecond)))
	fmt.Println("Stop(rto):", w.Stop(&rto), "pending:", w.Len())

	// PER_TICK_BOOKKEEPING and EXPIRY_PROCESSING: each Advance visits only the
	// slots that hold entries and whose ticks have passed, so skipping two
	// hours costs no more than skipping one tick.
	for _, t := range []time.Duration{
		39 * time.Millisecond, 40 * time.Millisecond, 200 * time.Millisecond,
		2 * time.Hour, 2*time.Hour + 75*time.Second,
	} {
		fmt.Printf("Advance(%v)\n", t)
		fmt.Println("  fired", w.Advance(clk.Set(t)), "pending", w.Len())
	}

	// Output:
	// started 3; pending: 3 next deadline: 40ms
	// Advance(30ms) fired 0
	// Stop(rto): true pending: 2
	// Advance(39ms)
	//   fired 0 pending 2
	// Advance(40ms)
	//   fired at 40ms delayed ACK
	//   fired 1 pending 1
	// Advance(200ms)
	//   fired 0 pending 1
	// Advance(2h0m0s)
	//   fired at 2h0m0s keepalive: probe, and start again
	//   fired 1 pending 1
	// Advance(2h1m15s)
	//   fired at 2h1m15s keepalive: probe, and start again
	//   fired 1 pending 1
}
