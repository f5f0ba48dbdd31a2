// Package timer is a hierarchical hashed timing wheel (Varghese & Lauck, scheme 7)
// with the four operations of the paper:
//
//   - START_TIMER: [Wheel.Start] arms an [Entry] to fire after a duration. O(1), no
//     allocation: the Entry is embedded in its owner (a TCP segment, a connection).
//     Starting a pending entry re-arms it.
//   - STOP_TIMER: [Wheel.Stop] disarms an entry in O(1) and reports whether it was
//     pending. It is safe inside an expiry callback, for any entry.
//   - PER_TICK_BOOKKEEPING: [Wheel.Advance] moves the wheel to now. It visits only
//     the slots whose ticks have passed and that hold entries (an occupancy bitmap
//     per level, and a cached lower bound of the next non-empty slot), so its cost
//     grows neither with idle ticks nor with timers that are not due.
//   - EXPIRY_PROCESSING: inside Advance, each due entry's function runs. Functions
//     may start or stop any entry, themselves included.
//
// # Layout
//
// The wheel has Levels levels of Slots slots each (Slots a power of two, 2^b).
// A slot of level k spans Slots^k ticks; level k covers Slots^(k+1) ticks. With the
// defaults (b = 6, Tick = 10µs) the levels are
//
//	level 0:  64 slots × 10µs     = 640 µs
//	level 1:  64 slots × 640µs    = 41 ms
//	level 2:  64 slots × 41 ms    = 2.6 s
//	level 3:  64 slots × 2.6 s    = 2.8 min
//	level 4:  64 slots × 2.8 min  = 3 h
//	level 5:  64 slots × 3 h      = 8 days
//	...       up to level 10, which covers every int64 tick.
//
// An entry is placed at the level of the highest bit in which its deadline tick
// differs from the current tick (the Linux/tokio scheme); when its slot comes up it
// fires or cascades to a lower level. Deadlines of any length are accepted; a
// duration too large for the int64 nanosecond clock is clamped to the end of time.
//
// # Timing
//
// A deadline is rounded up to a tick boundary, so an entry never fires early and,
// when Advance is called at every instant of interest (as on a [ManualClock]), fires
// at most one tick late. On the real clock the event loop that runs the wheel
// (package loop) adds its wake-up latency, most of which it hides by spinning for
// the last stretch before a deadline.
//
// Start measures durations from [Wheel.Now]: the instant of the last Advance or,
// inside an expiry callback, the tick being processed. An event loop therefore calls
// Advance(clock.Now()) when it wakes, before it starts timers. This keeps Start free
// of clock reads, and makes one Advance over a long interval behave exactly like many
// short ones. [Wheel.MoveNow] moves Now without running anything, for a loop that
// handles its input before it expires timers (package loop): a due entry that the
// input stops never runs, and the entries it starts measure from the input's time.
// Now never goes back: callbacks run after a MoveNow past their tick see that Now.
//
// # Concurrency
//
// A [Wheel] is not safe for concurrent use: it belongs to one goroutine (the event
// loop that owns it), and its fast path takes no locks. The package has no
// goroutines and does no I/O: package loop runs a Wheel on the real clock (its
// Loop) or on a [ManualClock] at the caller's pace (its Manual), and its Shared
// is the goroutine-safe front, built on [Wheel.AdvanceCollect]. The [ManualClock]
// and [MonotonicClock] are safe for concurrent use.
package timer
