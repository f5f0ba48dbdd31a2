package stack

import (
	"testing"
	"time"
)

// FuzzDeadline runs a deadline through a sequence of sets (none, a past
// time, a time an hour on), waits, ends of waits, passed checks and fires
// of its timer, and checks it against a model: passed is whether the last
// set was a past time; a wait's channel is closed exactly then, and the
// channels of calls already waiting are closed at once by a past set; no
// timer is made until a call waits under a future deadline. (A call whose
// channel is closed has returned in truth; the model keeps it until done.)
func FuzzDeadline(f *testing.F) {
	f.Add([]byte{2, 3, 1, 4, 3, 0, 5, 4})
	f.Add([]byte{3, 2, 5, 1, 3, 4, 4, 0, 2, 5})
	f.Add([]byte{1, 5, 3, 1, 3, 4, 4, 2, 6, 5})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var d deadline
		passed := false   // the model: the last set was a past time
		future := false   // the last set was a future time
		waiting := 0      // calls between wait and done
		timerDue := false // a call has waited under a future deadline
		type call struct {
			ch        <-chan struct{}
			sawPassed bool // the deadline passed since the call began to wait
		}
		var held []call
		for i, op := range ops {
			switch op % 7 {
			case 0:
				d.set(time.Time{})
				passed, future = false, false
			case 1:
				d.set(time.Now().Add(-time.Hour))
				passed, future = true, false
			case 2:
				d.set(time.Now().Add(time.Hour))
				passed, future = false, true
				if waiting > 0 {
					timerDue = true
				}
			case 3:
				held = append(held, call{ch: d.wait()})
				waiting++
				if future {
					timerDue = true
				}
			case 4:
				if waiting > 0 {
					d.done()
					waiting--
					held = held[1:]
				}
			case 5:
				if got := d.passed(); got != passed {
					t.Fatalf("op %d: passed %v, want %v (ops %v)", i, got, passed, ops)
				}
			case 6:
				if d.tm != nil && d.tm.t != nil {
					d.fire() // a fire the lock held back: the deadline, an hour on, not reached
				}
			}
			if d.tm != nil && d.tm.t != nil && !timerDue {
				t.Fatalf("op %d: a timer made with no call waiting under a future deadline (ops %v)", i, ops)
			}
			for j := range held {
				c := &held[j]
				c.sawPassed = c.sawPassed || passed
				select {
				case <-c.ch:
					if !c.sawPassed {
						t.Fatalf("op %d: a waiting call's channel closed, the deadline not passed since it began (ops %v)", i, ops)
					}
				default:
					if passed {
						t.Fatalf("op %d: a waiting call's channel open, deadline passed (ops %v)", i, ops)
					}
				}
			}
		}
		if d.tm != nil && d.tm.t != nil {
			d.tm.t.Stop()
		}
	})
}
