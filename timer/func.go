package timer

import "time"

// Timer is a one-shot timer made by Wheel.AfterFunc: the convenient form of an
// Entry, for callers that do not embed one. Making it allocates; using it does not.
type Timer struct {
	e Entry
	w *Wheel
}

// AfterFunc starts a Timer that runs f on the wheel's goroutine d after Now.
func (w *Wheel) AfterFunc(d time.Duration, f func()) (*Timer, error) {
	if f == nil {
		return nil, ErrNoFunc
	}
	t := &Timer{w: w}
	t.e.Init(f)
	if err := w.Start(&t.e, d); err != nil {
		return nil, err
	}
	return t, nil
}

// Stop disarms the timer and reports whether it was pending.
func (t *Timer) Stop() bool { return t.w.Stop(&t.e) }

// Reset re-arms the timer to fire d after the wheel's Now, whether or not it has
// fired.
func (t *Timer) Reset(d time.Duration) error { return t.w.Start(&t.e, d) }

// Pending reports whether the timer is armed.
func (t *Timer) Pending() bool { return t.e.Pending() }

// Ticker runs a function periodically on a wheel. Each period is measured from the
// previous deadline, not from when the function ran, so late runs do not add up;
// a period that is not a whole number of ticks is rounded up to one.
type Ticker struct {
	e       Entry
	w       *Wheel
	period  time.Duration
	f       func()
	stopped bool
}

// Every starts a Ticker that runs f every period, first at Now+period.
func (w *Wheel) Every(period time.Duration, f func()) (*Ticker, error) {
	if period <= 0 {
		return nil, ErrPeriod
	}
	if f == nil {
		return nil, ErrNoFunc
	}
	t := &Ticker{w: w, period: period, f: f}
	t.e.Init(t.run)
	if err := w.Start(&t.e, period); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Ticker) run() {
	// Re-arm first, from the deadline just processed (not from Now, which
	// MoveNow may have moved past it), so that f may Stop the ticker. The wheel
	// may be closed by now; the ticker then just ends. The deadline fired, so
	// it is within the clock's range.
	if t.w.arm(&t.e, time.Duration(t.e.when*t.w.tickNs), t.period) != nil {
		t.stopped = true
	}
	t.f()
}

// Stop ends the ticker and reports whether it was running.
func (t *Ticker) Stop() bool {
	was := !t.stopped
	t.stopped = true
	t.w.Stop(&t.e)
	return was
}
