package timer

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"time"
)

// Defaults, chosen by the benchmarks (see README.md): with a 10µs tick the
// driver fires timers 43µs late at the median and 104µs at p99 on this project's
// 2-core VM (100µs tick: 100µs and 166µs; 1ms: 556µs and 1067µs), so a TCP
// retransmission leaves within a tenth of a millisecond of its RTO. A finer tick
// costs one or two cascades for long timers and nothing while idle. 64 slots per
// level make each level's occupancy one machine word.
const (
	DefaultTick  = 10 * time.Microsecond
	DefaultSlots = 64

	MinTick  = 10 * time.Microsecond
	MaxTick  = time.Second
	MinSlots = 2
	MaxSlots = 4096
)

// Errors returned by the wheel. They can be matched with errors.Is.
var (
	ErrClosed        = errors.New("timer: wheel is closed")
	ErrTooManyTimers = errors.New("timer: too many pending timers")
	ErrOtherWheel    = errors.New("timer: entry is pending on another wheel")
	ErrNoFunc        = errors.New("timer: entry has no function (call Entry.Init)")
	ErrConfig        = errors.New("timer: invalid config")
	ErrPeriod        = errors.New("timer: period must be positive")
)

// Config configures a Wheel. The zero value gives the defaults.
type Config struct {
	// Tick is the wheel's resolution, between MinTick and MaxTick. Deadlines are
	// rounded up to a tick. Zero means DefaultTick.
	Tick time.Duration
	// Slots is the number of slots per level: a power of two between MinSlots and
	// MaxSlots. Zero means DefaultSlots.
	Slots int
	// MaxPending caps the number of pending entries; Start returns
	// ErrTooManyTimers beyond it. Zero means no cap.
	MaxPending int
	// Clock is where the wheel's time comes from. Nil means a new MonotonicClock.
	Clock Clock
}

// Entry is one timer. Embed it in its owner and give it a function with Init; the
// zero value is an idle entry with no function. An Entry belongs to at most one
// wheel at a time, and only while it is pending.
//
// An Entry takes 40 bytes on 64-bit platforms.
type Entry struct {
	next  *Entry
	pprev **Entry // the pointer that points at this entry (a list head or the previous entry's next); nil when idle
	w     *Wheel  // the wheel the entry was last armed on: while pprev is set, the one it is pending on
	fn    func()
	when  uint64 // deadline, in ticks since the wheel's origin
}

// Init sets the function run when the entry expires. It does not arm the entry.
// Init on a pending entry only replaces the function.
func (e *Entry) Init(fn func()) { e.fn = fn }

// Pending reports whether the entry is armed on a wheel.
func (e *Entry) Pending() bool { return e.pprev != nil }

// Stop disarms the entry on whatever wheel it is pending on (STOP_TIMER). It
// reports whether the entry was pending.
func (e *Entry) Stop() bool {
	if e.pprev == nil {
		return false
	}
	return e.w.Stop(e)
}

// Wheel is a hierarchical hashed timing wheel. It is not safe for concurrent use;
// see the package documentation.
type Wheel struct {
	// Hot fields, used by Start and Stop.
	now     time.Duration // time since origin: last Advance, or the tick being processed
	elapsed uint64        // the current tick: every slot before it has been processed
	nextExp uint64        // lower bound of the next tick whose slot holds entries
	lists   []*Entry      // heads: levels*slots slot lists, then the two due lists
	occ     []uint64      // occupancy bitmap, words per level
	dueLoc  int32         // the due list that newly due entries join
	pending int
	limit   uint   // MaxPending, or the largest uint without a cap; 0 once closed
	bits    uint   // log2(slots)
	smask   uint64 // slots-1
	words   uint   // bitmap words per level
	tickNs  uint64
	recip   uint64        // floor((2^64-1)/tickNs), for division by multiplication
	levelOf [64]levelInfo // by the highest bit in which a deadline differs from elapsed

	nslots    int32 // levels*slots: where the due lists start
	levels    int
	origin    time.Duration
	clock     Clock
	closed    bool
	advancing bool
	collect   *[]*Entry // when set, fire appends due entries instead of running them

	stopped, fired, cascaded uint64
	late                     LateHistogram
}

// New returns a wheel configured by cfg, whose time starts at cfg.Clock.Now().
func New(cfg Config) (*Wheel, error) {
	if cfg.Tick == 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.Slots == 0 {
		cfg.Slots = DefaultSlots
	}
	if cfg.Tick < MinTick || cfg.Tick > MaxTick {
		return nil, fmt.Errorf("%w: tick %v outside [%v, %v]", ErrConfig, cfg.Tick, MinTick, MaxTick)
	}
	if cfg.Slots < MinSlots || cfg.Slots > MaxSlots || cfg.Slots&(cfg.Slots-1) != 0 {
		return nil, fmt.Errorf("%w: slots %d is not a power of two in [%d, %d]", ErrConfig, cfg.Slots, MinSlots, MaxSlots)
	}
	if cfg.MaxPending < 0 {
		return nil, fmt.Errorf("%w: negative MaxPending %d", ErrConfig, cfg.MaxPending)
	}
	if cfg.Clock == nil {
		cfg.Clock = NewMonotonicClock()
	}
	b := uint(bits.TrailingZeros(uint(cfg.Slots)))
	// Ticks are below 2^63, so the highest differing bit is at most 62.
	levels := int(62/b) + 1
	words := uint(1)
	if cfg.Slots > 64 {
		words = uint(cfg.Slots / 64)
	}
	w := &Wheel{
		lists:   make([]*Entry, levels*cfg.Slots+2),
		occ:     make([]uint64, uint(levels)*words),
		limit:   uint(cfg.MaxPending),
		bits:    b,
		smask:   uint64(cfg.Slots - 1),
		words:   words,
		tickNs:  uint64(cfg.Tick),
		recip:   math.MaxUint64 / uint64(cfg.Tick),
		nslots:  int32(levels * cfg.Slots),
		levels:  levels,
		clock:   cfg.Clock,
		origin:  cfg.Clock.Now(),
		nextExp: math.MaxUint64,
	}
	w.dueLoc = w.nslots
	if cfg.MaxPending == 0 {
		w.limit = math.MaxUint
	}
	for i := range w.levelOf {
		lvl := uint(i) / b
		w.levelOf[i] = levelInfo{shift: uint8(lvl * b), base: int32(lvl << b), occ: int32(lvl * words)}
	}
	return w, nil
}

// Tick returns the wheel's resolution.
func (w *Wheel) Tick() time.Duration { return time.Duration(w.tickNs) }

// Clock returns the wheel's clock.
func (w *Wheel) Clock() Clock { return w.clock }

// Now returns the wheel's current time on its clock: the time of the last Advance,
// or, inside an expiry callback, the tick being processed. Start measures from it.
func (w *Wheel) Now() time.Duration { return w.origin + w.now }

// Len returns the number of pending entries.
func (w *Wheel) Len() int { return w.pending }

// Start arms e to fire d after Now (START_TIMER). A pending e is re-armed. A zero
// or negative d makes e due: it fires at the next Advance. A d beyond the clock's
// range is clamped to the end of time. Start does not allocate.
//
// It fails with ErrOtherWheel if e is pending on another wheel, ErrNoFunc if e has
// no function, ErrClosed after Close, and ErrTooManyTimers past MaxPending.
func (w *Wheel) Start(e *Entry, d time.Duration) error {
	return w.arm(e, w.now, d)
}

// StartAt arms e to fire at the instant t of the wheel's clock. A t at or before
// Now makes e due. Errors are those of Start.
func (w *Wheel) StartAt(e *Entry, t time.Duration) error {
	var rel time.Duration
	switch {
	case w.origin < 0 && t > math.MaxInt64+w.origin: // t - origin overflows
		rel = math.MaxInt64
	case t > w.origin:
		rel = t - w.origin
	}
	return w.arm(e, rel, 0)
}

// instant converts a tick to an instant on the wheel's clock, saturating at the
// end of time.
func (w *Wheel) instant(k uint64) time.Duration {
	if k > math.MaxInt64/w.tickNs {
		return math.MaxInt64
	}
	rel := time.Duration(k * w.tickNs)
	if w.origin > 0 && rel > math.MaxInt64-w.origin {
		return math.MaxInt64
	}
	return w.origin + rel
}

// arm is START_TIMER proper: adopt e if it is new to the wheel, take it off its
// list if it is on one, and put it on the list for the tick at or after base+d
// (time since the origin, saturated at the end of time): the due list if
// the tick has passed, else the slot of the level given by the highest bit in
// which when differs from the current tick. Advance re-uses it to cascade an
// entry to a lower level.
func (w *Wheel) arm(e *Entry, base, d time.Duration) error {
	x := base + max(d, 0)
	if x < base { // wrapped: beyond the clock's range
		x = math.MaxInt64
	}
	when := w.ceilTicks(uint64(x))
	if e.pprev == nil { // idle: adopt it
		if e.fn == nil {
			return ErrNoFunc
		}
		if uint(w.pending) >= w.limit { // the cap, or 0 once closed
			if w.closed {
				return ErrClosed
			}
			return ErrTooManyTimers
		}
		w.pending++
		if e.w != w {
			e.w = w // kept when the entry goes idle: re-arming writes nothing here
		}
	} else if e.w == w { // pending here: re-arm (and cascade)
		w.unlink(e)
	} else {
		return ErrOtherWheel
	}
	e.when = when
	loc := w.dueLoc
	if when > w.elapsed {
		li := w.levelOf[63&(63-bits.LeadingZeros64((when^w.elapsed)|w.smask))]
		slot := when >> li.shift & w.smask
		if occ, bit := &w.occ[li.occ+int32(slot>>6)], uint64(1)<<(slot&63); *occ&bit == 0 {
			*occ |= bit // only on change: no store, no dependency, in the common case
		}
		w.nextExp = min(w.nextExp, when>>li.shift<<li.shift)
		loc = li.base + int32(slot)
	}
	head := &w.lists[loc]
	e.next, e.pprev = *head, head
	if e.next != nil {
		e.next.pprev = &e.next
	}
	*head = e
	return nil
}

// Stop disarms e (STOP_TIMER) and reports whether it was pending on this wheel. It
// is safe inside expiry callbacks, for any entry; an entry that has fired, or that
// is pending on another wheel, is left alone and Stop returns false.
func (w *Wheel) Stop(e *Entry) bool {
	if e.pprev == nil || e.w != w {
		return false
	}
	w.unlink(e)
	w.pending--
	w.stopped++
	return true
}

// Advance moves the wheel to now on its clock (PER_TICK_BOOKKEEPING) and runs the
// function of every entry that is due (EXPIRY_PROCESSING), in deadline order. It
// returns the number of entries fired. A now earlier than Now is taken as Now.
//
// Entries made due by a callback (a zero duration) fire at the next Advance, so a
// callback that re-arms itself with zero cannot loop forever. Advance called from
// inside a callback, or after Close, does nothing.
func (w *Wheel) Advance(now time.Duration) int {
	if w.closed || w.advancing {
		return 0
	}
	rel := now - w.origin
	if rel < w.now {
		rel = w.now
	}
	target := w.floorTicks(uint64(rel))
	if w.lists[w.dueLoc] == nil && target < w.nextExp {
		w.elapsed, w.now = target, rel
		return 0
	}
	w.advancing = true
	defer func() { w.advancing = false }()
	fired := 0
	if due := w.dueLoc; w.lists[due] != nil {
		w.dueLoc = 2*w.nslots + 1 - due // callbacks' due entries wait for the next Advance
		for e := w.lists[due]; e != nil && !w.closed; e = w.lists[due] {
			w.unlink(e)
			w.fire(e, rel)
			fired++
		}
	}
	for !w.closed {
		k, loc, ok := w.nextExpiration()
		if !ok || k > target {
			w.nextExp = k // MaxUint64 when nothing is pending in the slots
			break
		}
		w.elapsed, w.now = k, time.Duration(k*w.tickNs)
		for e := w.lists[loc]; e != nil && !w.closed; e = w.lists[loc] {
			if e.when <= k {
				w.unlink(e)
				w.fire(e, rel)
				fired++
			} else {
				w.cascaded++
				// Re-armed at the same tick (which maps back to itself, the end
				// of time included), it moves to a lower level.
				w.arm(e, time.Duration(min(e.when*w.tickNs, math.MaxInt64)), 0)
			}
		}
	}
	if !w.closed {
		w.elapsed, w.now = target, rel
	}
	return fired
}

// Poll is Advance(w.Clock().Now()).
func (w *Wheel) Poll() int { return w.Advance(w.clock.Now()) }

// NextDeadline returns the instant, on the wheel's clock, at which the wheel next
// has work: the earliest slot holding entries (an expiry, or a cascade of a
// long timer to a lower level). It returns Now when entries are due, and false
// when nothing is pending. A driver sleeps until then; with nothing pending it
// need not wake at all.
func (w *Wheel) NextDeadline() (time.Duration, bool) {
	if w.closed || w.pending == 0 {
		return 0, false
	}
	if w.lists[w.dueLoc] != nil {
		return w.origin + w.now, true
	}
	k, _, ok := w.nextExpiration()
	w.nextExp = k
	if !ok {
		return 0, false
	}
	return w.instant(k), true
}

// Close disarms every pending entry and returns them, so their owners can tell
// what never fired. Afterwards Start fails with ErrClosed and Advance does
// nothing. Close inside a callback stops the expiry processing under way.
func (w *Wheel) Close() []*Entry {
	if w.closed {
		return nil
	}
	w.closed, w.limit = true, 0
	out := make([]*Entry, 0, w.pending)
	for loc, e := range w.lists {
		for e != nil {
			next := e.next
			e.next, e.pprev = nil, nil
			out = append(out, e)
			e = next
		}
		w.lists[loc] = nil
	}
	clear(w.occ)
	w.pending, w.nextExp = 0, math.MaxUint64
	return out
}

// Stats is a snapshot of a wheel's counters.
type Stats struct {
	Pending  int
	Stopped  uint64 // Stop calls that disarmed a pending entry
	Fired    uint64
	Cascaded uint64 // moves of an entry from a higher level to a lower one
	// Late counts fired entries by how long after their tick-rounded deadline the
	// Advance that fired them was called.
	Late LateHistogram
}

// Stats returns the wheel's counters.
func (w *Wheel) Stats() Stats {
	return Stats{Pending: w.pending, Stopped: w.stopped, Fired: w.fired, Cascaded: w.cascaded, Late: w.late}
}

// LateHistogram counts durations in power-of-two buckets: bucket 0 counts zero,
// bucket i > 0 counts durations in [2^(i-1), 2^i) nanoseconds.
type LateHistogram [64]uint64

// Add counts d (negative counts as zero).
func (h *LateHistogram) Add(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h[bits.Len64(uint64(d))]++
}

// Count returns the number of durations counted.
func (h *LateHistogram) Count() uint64 {
	var n uint64
	for _, c := range h {
		n += c
	}
	return n
}

// Quantile returns an upper bound of the q-quantile (0 <= q <= 1): the upper edge
// of the bucket that holds it. It returns 0 for an empty histogram.
func (h *LateHistogram) Quantile(q float64) time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	if rank == 0 {
		rank = 1
	}
	var seen uint64
	for i, c := range h {
		seen += c
		if seen >= rank {
			if i == 0 {
				return 0
			}
			if i >= 63 {
				return math.MaxInt64
			}
			return time.Duration(uint64(1)<<uint(i) - 1)
		}
	}
	return math.MaxInt64
}

func (w *Wheel) fire(e *Entry, rel time.Duration) {
	w.pending--
	w.fired++
	if e.when <= uint64(math.MaxInt64)/w.tickNs {
		w.late.Add(rel - time.Duration(e.when*w.tickNs))
	}
	if w.collect != nil {
		*w.collect = append(*w.collect, e)
		return
	}
	e.fn()
}

// advanceCollect is Advance, except that due entries are appended to buf instead
// of run: a locked front runs them after releasing its lock. The entries are idle
// by then, so a Stop that races with the run returns false, as for time.AfterFunc.
func (w *Wheel) advanceCollect(now time.Duration, buf []*Entry) []*Entry {
	w.collect = &buf
	w.Advance(now)
	w.collect = nil
	return buf
}

// run calls e's function; for fronts that collected it with advanceCollect.
func (e *Entry) run() { e.fn() }

// levelInfo describes the level an entry goes to: the shift that turns a tick
// into the level's slot number, the index of the level's first list in lists,
// and of its first word in occ.
type levelInfo struct {
	shift     uint8
	base, occ int32
}

// unlink takes e off its list. A slot's occupancy bit is left set when the slot
// empties; nextExpiration clears such stale bits when it meets them, so Stop
// touches only the list.
func (w *Wheel) unlink(e *Entry) {
	*e.pprev = e.next
	if e.next != nil {
		e.next.pprev = e.pprev
	}
	e.next, e.pprev = nil, nil
}

// nextExpiration finds the earliest occupied slot: the lowest non-empty level's
// next occupied slot (every entry of a lower level is due before any slot of a
// higher level comes up). It returns the slot's first tick and its list index.
// Occupancy bits of slots that have emptied are cleared on the way.
func (w *Wheel) nextExpiration() (tick uint64, loc int32, ok bool) {
	for {
		lvl, found := w.lowestOccupiedLevel()
		if !found {
			return math.MaxUint64, 0, false
		}
		shift := lvl * w.bits
		slot, wrapped := w.nextOccupied(lvl, (w.elapsed>>shift)&w.smask)
		loc = int32(lvl<<w.bits | uint(slot))
		if w.lists[loc] == nil {
			w.occ[lvl*w.words+uint(slot>>6)] &^= 1 << (slot & 63)
			continue
		}
		span := shift + w.bits // bits covered by the level
		var start uint64
		if span < 64 {
			start = w.elapsed &^ (1<<span - 1)
			if wrapped {
				start += 1 << span
			}
		}
		return start + slot<<shift, loc, true
	}
}

// lowestOccupiedLevel returns the first level with an occupied slot.
func (w *Wheel) lowestOccupiedLevel() (uint, bool) {
	for i, m := range w.occ {
		if m != 0 {
			return uint(i) / w.words, true
		}
	}
	return 0, false
}

// nextOccupied returns the first occupied slot of level lvl at or after pos, or,
// wrapping around, before it.
func (w *Wheel) nextOccupied(lvl uint, pos uint64) (slot uint64, wrapped bool) {
	base := lvl * w.words
	wi := uint(pos >> 6)
	if m := w.occ[base+wi] & (^uint64(0) << (pos & 63)); m != 0 {
		return uint64(wi)<<6 | uint64(bits.TrailingZeros64(m)), false
	}
	for i := wi + 1; i < w.words; i++ {
		if m := w.occ[base+i]; m != 0 {
			return uint64(i)<<6 | uint64(bits.TrailingZeros64(m)), false
		}
	}
	for i := uint(0); i <= wi; i++ {
		if m := w.occ[base+i]; m != 0 {
			return uint64(i)<<6 | uint64(bits.TrailingZeros64(m)), true
		}
	}
	return 0, true // unreachable: the level has an occupied slot
}

// floorTicks and ceilTicks divide by the tick with a multiplication by its
// reciprocal: the estimate is the quotient or one less, and one compare fixes it.
func (w *Wheel) floorTicks(ns uint64) uint64 {
	q, _ := bits.Mul64(ns, w.recip)
	if ns-q*w.tickNs >= w.tickNs {
		q++
	}
	return q
}

func (w *Wheel) ceilTicks(ns uint64) uint64 {
	q, _ := bits.Mul64(ns, w.recip)
	r := ns - q*w.tickNs
	if r >= w.tickNs {
		q++
		r -= w.tickNs
	}
	if r != 0 {
		q++
	}
	return q
}
