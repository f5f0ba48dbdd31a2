package loop

import "github.com/tcpwheel/tcpwheel/timer"

// Runner is an event loop that owns a timing wheel: the real Loop, or the
// caller-driven Manual. Code that runs on a loop (package stack) uses only this.
type Runner interface {
	// Wheel returns the wheel the loop owns. Only code running on the loop (an
	// expiry callback, a posted function, a Watch callback) may use it.
	Wheel() *timer.Wheel
	// Post runs f on the loop, after the functions posted before it. It fails
	// with timer.ErrClosed after Close, and timer.ErrNoFunc for a nil f.
	Post(f func()) error
	// Watch calls onReadable on the loop whenever fd is readable.
	// onReadable reports whether it left input in fd (it read a bounded
	// batch and stopped with more to read): expiry then waits for the rest
	// (see the package doc, "Order of work").
	Watch(fd int, onReadable func() (more bool)) error
	// Unwatch undoes Watch: onReadable is not called after it returns.
	Unwatch(fd int) error
	// Close stops the loop; afterwards Post fails.
	Close() error
}
