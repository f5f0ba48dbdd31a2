// Package loop is tcpwheel's event loop: the one goroutine that owns a timing
// wheel (package timer) and everything that runs on it. The wheel itself does no
// I/O and has no goroutines; this package gives it a clock to follow, a reactor
// to sleep in, and a way for other goroutines to hand it work.
//
//   - [Loop] runs a wheel on the real clock. On Linux: a goroutine locked to its
//     OS thread (timer slack 1 ns) sleeping in epoll_wait on a timerfd (the next
//     deadline, absolute CLOCK_MONOTONIC ns) and an eventfd (Post's wake-up), and
//     on the descriptors given to [Loop.Watch]; it spins for the last
//     [DefaultSpin] before a deadline instead of sleeping through it. Elsewhere
//     it sleeps on a time.Timer. [Loop.Post] runs a function on the loop.
//     [Loop.SetRealTime] puts its thread under SCHED_FIFO, for precision on a
//     busy machine, and fails, saying why, where that is not permitted.
//     [NewParked] makes one whose goroutine keeps no thread and sleeps in Go's
//     netpoller instead, its P free for other goroutines meanwhile: for when
//     the loops would otherwise hold every P (GOMAXPROCS).
//   - [Manual] is the same loop driven by its caller on a timer.ManualClock:
//     Post runs the function at once, [Manual.AdvanceTo] moves time deadline by
//     deadline so that timers fire at their own instants. Tests and pcap replays
//     use it.
//   - [Runner] is what both implement: the wheel, Post, Watch, Unwatch, Close.
//   - [Shared] is a goroutine-safe front of a wheel, run by a Loop of its own:
//     any goroutine may start and stop its timers. The tool's gVisor clock
//     adapter (cmd/tcpwheel/internal/tcpipclock) is built on it.
//
// # Order of work: input before expiry
//
// A timer is only as good as its loop on a busy machine. When the loop wakes
// late (its thread was preempted, or it was busy), the device may already hold
// the packet that makes a due timer moot: the ACK of the segment whose
// retransmission timer is due. The rule is therefore: a wake first takes the
// work that is already waiting, then advances the wheel. A timer whose segment
// was acknowledged by a packet that arrived before the loop got to it does not
// fire. Each turn of a Loop does, in this order:
//
//  1. posted functions, in the order they were posted (application calls, and
//     the reader goroutine's packets on package stack's reader path);
//  2. input: the callbacks of the watched descriptors found readable (a
//     device's packets, for package stack's direct path). If a timer is due,
//     the descriptors are polled again first (epoll_wait with no timeout), so
//     that what arrived since the wake, or while the posted functions ran, is
//     seen before the expiry;
//  3. expiry: the wheel is advanced to the clock's now and the due entries run
//     (EXPIRY_PROCESSING).
//
// Before each posted function and before the input, the wheel's Now is moved
// to the clock without running anything ([timer.Wheel.MoveNow]): a timer the
// work starts measures from when it runs (a delayed ACK, a tail-loss probe,
// the RTO of the segments an ACK lets out), while the timers already due stay
// pending until step 3, where a Stop by the work has taken them off. Moving Now
// is how both hold at once: an Advance before the input would fire what the
// input cancels, and no Advance at all would start the input's timers from a
// stale Now, early by however late the wake was. (A design that expired only up
// to the packet's arrival instant is not open to us: a TUN gives no arrival
// times. The wheel stops short of its first due slot instead.)
//
// The input is bounded so that a flood cannot starve the timers: the loop calls
// each readable descriptor's callback once per turn, and the callback reads a
// bounded batch (package stack reads at most 64 packets; level-triggered
// readiness brings it back next turn for the rest). Posted functions are those
// taken at the turn's start; what they post runs next turn.
//
// A batch does not end the input, though: a burst deeper than one batch (200
// connections' data queued in the TUN at once) would otherwise have its
// timers fire between batches while the ACKs that stop them still wait behind
// it. A callback therefore reports whether it left input behind (it stopped at
// its bound); while one does and timers are due, the turn skips step 3 and the
// next turn, right away, runs the posted functions and the next batch. The
// expiry waits for the input to drain, or for MaxDeferredTurns turns in a row
// (16384 packets for package stack, more than its TUN's default queue holds;
// SetDeferredTurns sets another bound for a deeper queue, as
// stack.Config.InputQueue does), after which it runs whatever is still
// waiting: a flood delays the timers by that many batches at most and cannot
// starve them. On a lossless link, 200
// clients' echo of 64 KB each (integration's TestConcurrentConnections) went
// from 1,436-3,845 spurious retransmissions out of ~18,000 segments to 0-1.
//
// Then the loop sleeps until the wheel's next deadline, a Post, or a readable
// descriptor; if something is due already it goes round again at once. The
// order lives in one place, the loop's turn method.
//
// [Manual.Wake] is such a turn on the manual loop: a late wake at an instant of
// the caller's choosing, with the input that waits for it.
//
// # Concurrency
//
// The wheel belongs to the loop's goroutine from New until Close returns; other
// goroutines reach it only through Post. Post, Watch, Unwatch, SetSpin, Wakeups
// and Close are safe for concurrent use; so is every method of Shared and of
// Manual.
package loop
