package tcp

// Spares keeps closed endpoints for new connections to reuse
// (ListenerConfig.Spares, Spares.Dial). An Endpoint is 2,304 bytes, allocated for every
// connection: for a server of short connections it was two fifths of what
// its process allocated per connection (net/http the rest), and so of how
// often the garbage collector ran (integration/results/tw-slab-*). A
// stack puts an endpoint back once the connection is over and nothing will
// use the endpoint again: the application closed it, and it reached CLOSED
// or a TimeWait record holds what TIME-WAIT needs. A Spares keeps at most
// MaxSpares; the zero value is ready to use. It is not safe for concurrent
// use: it belongs to one loop, as its endpoints do.
type Spares struct {
	eps []*Endpoint
}

// MaxSpares bounds a Spares: 256 endpoints, 576 KiB.
const MaxSpares = 256

// Put keeps e for reuse and reports whether it did. e must be CLOSED and
// out of every call (none of its methods under way), and its owner must
// never use it again: the next connection gets it. Put refuses, and
// changes nothing, when e is not CLOSED or has a timer pending, or when
// p is full. It forgets e's state at once (its buffers go to the
// collector).
func (p *Spares) Put(e *Endpoint) bool {
	if e == nil || e.state != StateClosed || e.inNote || len(p.eps) >= MaxSpares || e.anyTimerPending() {
		return false
	}
	*e = Endpoint{}
	p.eps = append(p.eps, e)
	return true
}

// Dial is the package's Dial with one of p's endpoints, if it keeps one.
func (p *Spares) Dial(w Timers, out Output, id ID, cfg Config) (*Endpoint, error) {
	return dial(w, out, id, cfg, p)
}

// Len returns the number of endpoints kept.
func (p *Spares) Len() int { return len(p.eps) }

// get returns a kept endpoint, zeroed, or a new one.
func (p *Spares) get() *Endpoint {
	if p == nil || len(p.eps) == 0 {
		return new(Endpoint)
	}
	n := len(p.eps) - 1
	e := p.eps[n]
	p.eps[n] = nil
	p.eps = p.eps[:n]
	return e
}

// anyTimerPending reports whether any of e's wheel entries is pending.
func (e *Endpoint) anyTimerPending() bool {
	for i := range e.timers {
		if e.timers[i].Pending() {
			return true
		}
	}
	if e.seg0.entry.Pending() {
		return true
	}
	for _, s := range e.snd.rtxq {
		if s.entry.Pending() {
			return true
		}
	}
	for _, s := range e.snd.freeSegs {
		if s.entry.Pending() {
			return true
		}
	}
	return false
}
