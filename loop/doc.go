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
//   - [Manual] is the same loop driven by its caller on a timer.ManualClock:
//     Post runs the function at once, [Manual.AdvanceTo] moves time deadline by
//     deadline so that timers fire at their own instants. Tests and pcap replays
//     use it.
//   - [Runner] is what both implement: the wheel, Post, Watch, Unwatch, Close.
//   - [Shared] is a goroutine-safe front of a wheel, run by a Loop of its own:
//     any goroutine may start and stop its timers. The gVisor clock adapter
//     (loop/tcpipclock) is built on it.
//
// # Order of work
//
// Each turn of a Loop does, in this order:
//
//  1. expiry: the wheel is advanced to the clock's now and the due entries run
//     (EXPIRY_PROCESSING);
//  2. posted functions, in the order they were posted, each after a fresh
//     Advance to now, so that a timer one of them starts measures from when it
//     runs;
//  3. the callbacks of the watched descriptors that the last epoll_wait found
//     readable (a device's packets, for package stack's direct path).
//
// Then it sleeps until the wheel's next deadline, a Post, or a readable
// descriptor; if something is due already it only polls the descriptors,
// without blocking, and goes round again. (So a packet that arrived before a
// timer's deadline but is read in the same turn comes after that timer's
// expiry. The order lives in one place, the loop's turn method, so that
// input before expiry is an edit there.)
//
// # Concurrency
//
// The wheel belongs to the loop's goroutine from New until Close returns; other
// goroutines reach it only through Post. Post, Watch, Unwatch, SetSpin, Wakeups
// and Close are safe for concurrent use; so is every method of Shared and of
// Manual.
package loop
