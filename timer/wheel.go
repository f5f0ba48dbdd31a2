package timer

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"time"
	"unsafe"
)

// Defaults, chosen by the benchmarks (see README.md): with a 10µs tick the event
// loop (loop.Loop) fires timers 6.5µs late at the median and 55µs at p99 on this
// project's 2-core VM (100µs tick: 57µs and 125µs; 1ms: 531µs and 1042µs), so a
// TCP retransmission leaves within a tenth of a millisecond of its RTO. A finer tick
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
// An Entry takes 48 bytes on 64-bit platforms.
type Entry struct {
	next  *Entry
	pprev **Entry // the pointer that points at this entry (a list head or the previous entry's next); nil when idle
	w     *Wheel  // the wheel the entry was last armed on: while pprev is set, the one it is pending on
	fn    Handler
	when  uint64 // deadline, in ticks since the wheel's origin
}

// Handler is what an entry runs when it expires: InitHandler's form of Init,
// for an owner that embeds many entries (a connection's segments) and would
// otherwise bind a method value, an allocation, per entry. A pointer-shaped
// Handler (a pointer to the owner, or to a named type of the owner's for each
// of several entries) is stored without allocating.
type Handler interface{ Expire() }

// HandlerFunc is a func as a Handler (Init's form): a func value is
// pointer-shaped, so the conversion does not allocate.
type HandlerFunc func()

// Expire calls f.
func (f HandlerFunc) Expire() { f() }

// Init sets the function run when the entry expires. It does not arm the entry.
// Init on a pending entry only replaces the function.
func (e *Entry) Init(fn func()) {
	if fn == nil {
		e.fn = nil
		return
	}
	e.fn = HandlerFunc(fn)
}

// InitHandler is Init with h's Expire as the function (a nil h clears it).
func (e *Entry) InitHandler(h Handler) { e.fn = h }

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
	occ     []uint64      // occupancy bitmap of the slot lists, bit i for lists[i]
	spare   **Entry       // written instead of a missing neighbour's pprev, so that a list's stores need no branch
	dueLoc  int32         // the due list that newly due entries join
	// The pending count is adopted - stopped - fired - dropped: Start and Stop
	// each bump a counter of their own, so that a Start and a Stop in a row do not
	// wait on each other's store.
	adopted uint64 // entries taken from idle to pending
	stopped uint64 // Stop calls that disarmed a pending entry
	capped  bool   // MaxPending is set or the wheel is closed: Start checks the count
	limit   uint64 // MaxPending
	bits    uint   // log2(slots)
	smask   uint64 // slots-1
	words   uint   // bitmap words per level
	tickNs  uint64
	tickM1  uint64 // tickNs-1
	magic   uint64 // ceil(2^(63+l)/tickNs), l = ceil(log2 tickNs): division by multiplication
	mshift  uint   // l-1
	// By the highest bit in which a deadline differs from elapsed: the level's
	// shift (tick to slot number) and the index of its first list.
	levelShift [64]uint8
	levelBase  [64]uint32

	nslots    int32 // levels*slots: where the due lists start
	levels    int
	origin    time.Duration
	clock     Clock
	closed    bool
	advancing bool
	target    time.Duration // inside Advance: the instant it moves to (Target)
	collect   *[]func()     // when set, fire appends due entries' functions instead of running them

	fired, cascaded, dropped uint64 // dropped: pending when closed
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
		occ:     make([]uint64, (levels*cfg.Slots+63)/64),
		limit:   uint64(cfg.MaxPending),
		capped:  cfg.MaxPending > 0,
		bits:    b,
		smask:   uint64(cfg.Slots - 1),
		words:   words,
		tickNs:  uint64(cfg.Tick),
		tickM1:  uint64(cfg.Tick) - 1,
		mshift:  uint(bits.Len64(uint64(cfg.Tick)-1)) - 1,
		nslots:  int32(levels * cfg.Slots),
		levels:  levels,
		clock:   cfg.Clock,
		origin:  cfg.Clock.Now(),
		nextExp: math.MaxUint64,
	}
	w.dueLoc = w.nslots
	// 2^(63+l) - 1 is 2^(l-1) - 1 in the high word and all ones in the low one.
	q, _ := bits.Div64(1<<w.mshift-1, math.MaxUint64, w.tickNs)
	w.magic = q + 1
	for i := range w.levelShift {
		// Ticks are below 2^63, so bit 63 never differs; its entry is the top
		// level's all the same, so that no index can leave the slot lists.
		lvl := min(uint(i)/b, uint(levels-1))
		w.levelShift[i], w.levelBase[i] = uint8(lvl*b), uint32(lvl<<b)
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

// Target returns, inside an expiry callback, the instant the running Advance
// moves the wheel to (its now, or Now if that was earlier): Target - Now is how
// late the callback runs. Outside an Advance it returns Now.
func (w *Wheel) Target() time.Duration {
	if w.advancing {
		return w.origin + w.target
	}
	return w.Now()
}

// Len returns the number of pending entries.
func (w *Wheel) Len() int { return int(w.pending()) }

func (w *Wheel) pending() uint64 { return w.adopted - w.stopped - w.fired - w.dropped }

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
	x := base + d // base >= 0
	if x < base {
		x = base // d < 0
		if d > 0 {
			x = math.MaxInt64 // wrapped: beyond the clock's range
		}
	}
	when := w.ceilTicks(uint64(x))
	switch {
	case e.pprev == nil && e.w == w && e.fn != nil && !w.capped: // idle, known here
		w.adopted++
	case e.pprev != nil && e.w == w: // pending here: re-arm (and cascade)
		w.unlink(e)
	default:
		if err := w.adopt(e); err != nil {
			return err
		}
	}
	e.when = when
	loc := uint32(w.dueLoc)
	if when > w.elapsed {
		hb := uint(63-bits.LeadingZeros64((when^w.elapsed)|w.smask)) & 63
		sh := uint(w.levelShift[hb]) & 63 // (the masks spare tests for shifts past 63)
		loc = w.levelBase[hb] + uint32(when>>sh&w.smask)
		if occ, bit := w.occWord(loc), uint64(1)<<(loc&63); *occ&bit == 0 {
			*occ |= bit // only on change: no store, no dependency, in the common case
		}
		if start := when >> sh << sh; start < w.nextExp {
			w.nextExp = start // only on change, like the bit
		}
	}
	head := w.head(loc)
	h := *head
	hp := &w.spare
	if h != nil {
		hp = &h.pprev
	}
	e.next, e.pprev, *hp, *head = h, head, &e.next, e
	return nil
}

// adopt is arm's slow path, out of line to keep the common ones short: e is new
// to the wheel, on another one, has no function, or the pending count is capped.
func (w *Wheel) adopt(e *Entry) error {
	switch {
	case e.pprev != nil: // pending on another wheel
		return ErrOtherWheel
	case e.fn == nil:
		return ErrNoFunc
	case w.closed:
		return ErrClosed
	case w.capped && w.pending() >= w.limit:
		return ErrTooManyTimers
	}
	w.adopted++
	e.w = w // kept when the entry goes idle: re-arming writes nothing here
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
	w.stopped++
	return true
}

// Deadline returns the instant e fires at (its deadline rounded up to the
// wheel's tick) and true while e is pending on w; else 0 and false.
func (w *Wheel) Deadline(e *Entry) (time.Duration, bool) {
	if e.pprev == nil || e.w != w {
		return 0, false
	}
	return w.instant(e.when), true
}

// Replace puts e in the place of old, an entry pending on w: e becomes
// pending with old's deadline, at old's place among the entries of its tick,
// and old idle, without a Stop or a Start (the counts of Stats are as they
// were: one pending entry for another). It is O(1). e must be idle and have
// a function; Replace reports false, and changes nothing, when it is not, or
// when old is not pending on w. An owner that hands its work over to a
// smaller one (a connection to its TIME-WAIT record) moves its timer so.
func (w *Wheel) Replace(old, e *Entry) bool {
	if old.pprev == nil || old.w != w || e.pprev != nil || e.fn == nil {
		return false // (old == e is pending and so not idle)
	}
	n, pp := old.next, old.pprev
	np := &w.spare
	if n != nil {
		np = &n.pprev
	}
	e.next, e.pprev, e.when, e.w = n, pp, old.when, w
	*pp, *np = e, &e.next
	old.next, old.pprev = nil, nil
	return true
}

// Advance moves the wheel to now on its clock (PER_TICK_BOOKKEEPING) and runs the
// function of every entry that is due (EXPIRY_PROCESSING), in deadline order. It
// returns the number of entries fired. A now earlier than Now is taken as Now.
//
// Entries made due by a callback (a zero duration) fire at the next Advance, so a
// callback that re-arms itself with zero cannot loop forever. (After a MoveNow,
// while Now is ahead of the tick being processed, "zero" is Now rounded up to
// a tick, which this Advance may still reach: such an entry can fire once more
// in it, at that tick, and no more.) Advance called from inside a callback, or
// after Close, does nothing.
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
	w.advancing, w.target = true, rel
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
		// Callbacks see the tick being processed as Now, unless MoveNow has
		// moved Now past it: Now never goes back.
		w.elapsed, w.now = k, max(w.now, time.Duration(k*w.tickNs))
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

// MoveNow moves the wheel's Now forward to now on its clock without running
// anything: PER_TICK_BOOKKEEPING stops short of the first slot that holds
// entries, and entries due by now stay pending until the next Advance, which
// runs them in deadline order. Entries started meanwhile measure from the new
// Now, as after an Advance. It is for an event loop that handles its input
// before its expiry (package loop): the input may stop a timer that is due but
// has not run, while the timers the input starts measure from when it runs.
//
// While Now is ahead of a due entry, the callbacks of the next Advance see that
// Now, not their own tick: Now never goes back. A now at or before Now does
// nothing; so does MoveNow inside a callback or after Close.
func (w *Wheel) MoveNow(now time.Duration) {
	if w.closed || w.advancing {
		return
	}
	rel := now - w.origin
	if rel <= w.now {
		return
	}
	// nextExp > elapsed always (arm puts a slot's start after elapsed): the
	// ticks before it hold nothing to process. It may be stale, earlier than
	// the first occupied slot (its entries were stopped, and neither
	// NextDeadline nor an Advance has looked since): then look, so that how
	// far the bookkeeping moves, and with it the levels later entries go to
	// and the order in which entries due in the same tick fire, depends on
	// the pending entries alone, not on when NextDeadline was last called. A
	// flight recording's replay (stack.Playback) does not call it when the
	// recorded loop did, and must fire timers in the recorded order.
	target := w.floorTicks(uint64(rel))
	if target >= w.nextExp {
		w.nextExp, _, _ = w.nextExpiration()
	}
	if target = min(target, w.nextExp-1); target > w.elapsed {
		w.elapsed = target
	}
	w.now = rel
}

// Poll is Advance(w.Clock().Now()).
func (w *Wheel) Poll() int { return w.Advance(w.clock.Now()) }

// NextDeadline returns the instant, on the wheel's clock, at which the wheel next
// has work: the earliest slot holding entries (an expiry, or a cascade of a
// long timer to a lower level). It returns Now when entries are due, and false
// when nothing is pending. An event loop sleeps until then; with nothing pending
// it need not wake at all.
func (w *Wheel) NextDeadline() (time.Duration, bool) {
	if w.closed || w.pending() == 0 {
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
	w.closed, w.capped = true, true
	out := make([]*Entry, 0, w.pending())
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
	w.dropped += w.pending()
	w.nextExp = math.MaxUint64
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
	return Stats{Pending: int(w.pending()), Stopped: w.stopped, Fired: w.fired, Cascaded: w.cascaded, Late: w.late}
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
	w.fired++
	if e.when <= uint64(math.MaxInt64)/w.tickNs {
		w.late.Add(rel - time.Duration(e.when*w.tickNs))
	}
	if w.collect != nil {
		f, ok := e.fn.(HandlerFunc)
		if !ok {
			f = e.fn.Expire // a method value: the locked front's path only
		}
		*w.collect = append(*w.collect, f)
		return
	}
	e.fn.Expire()
}

// AdvanceCollect is Advance (PER_TICK_BOOKKEEPING) with EXPIRY_PROCESSING
// deferred: the functions of the due entries are appended to due, in the order
// Advance would have run them, and returned instead of run. It is for a locked
// front (loop.Shared), which runs them after releasing its lock. The entries are
// idle by then, so a Stop that races with the run returns false, as for
// time.AfterFunc. Counters and the lateness histogram are updated as by Advance.
func (w *Wheel) AdvanceCollect(now time.Duration, due []func()) []func() {
	w.collect = &due
	w.Advance(now)
	w.collect = nil
	return due
}

// head and occWord are &w.lists[loc] and &w.occ[loc>>6] without the bounds
// checks, which cost Start a twentieth of its time: arm's loc is the due list or
// a level's base plus a slot number (masked), and levelBase holds only real
// levels, so it is in range by construction. The race detector's checkptr
// verifies every such pointer in the tests (the model test and the fuzz corpus
// cover all levels).
func (w *Wheel) head(loc uint32) **Entry {
	return (**Entry)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(w.lists)), uintptr(loc)*unsafe.Sizeof(w.spare)))
}

func (w *Wheel) occWord(loc uint32) *uint64 {
	return (*uint64)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(w.occ)), uintptr(loc>>6)*8))
}

// unlink takes e off its list. A slot's occupancy bit is left set when the slot
// empties; nextExpiration clears such stale bits when it meets them, so Stop
// touches only the list.
func (w *Wheel) unlink(e *Entry) {
	n, pp := e.next, e.pprev
	np := &w.spare
	if n != nil {
		np = &n.pprev
	}
	*pp, *np, e.next, e.pprev = n, pp, nil, nil
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
			w.occ[loc>>6] &^= 1 << (loc & 63)
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

// lowestOccupiedLevel returns the first level with an occupied slot: that of the
// lowest bit set, as levels' lists come in order.
func (w *Wheel) lowestOccupiedLevel() (uint, bool) {
	for i, m := range w.occ {
		if m != 0 {
			return (uint(i)<<6 | uint(bits.TrailingZeros64(m))) >> w.bits, true
		}
	}
	return 0, false
}

// levelWord returns the occupancy of the i-th 64 slots of level lvl (of all its
// slots, when it has fewer than 64).
func (w *Wheel) levelWord(lvl, i uint) uint64 {
	first := lvl<<w.bits + i<<6 // the bit of the word's first slot
	m := w.occ[first>>6]
	if w.bits < 6 { // levels share words
		m = m >> (first & 63) & (1<<(w.smask+1) - 1)
	}
	return m
}

// nextOccupied returns the first occupied slot of level lvl at or after pos, or,
// wrapping around, before it.
func (w *Wheel) nextOccupied(lvl uint, pos uint64) (slot uint64, wrapped bool) {
	wi := uint(pos >> 6)
	if m := w.levelWord(lvl, wi) & (^uint64(0) << (pos & 63)); m != 0 {
		return uint64(wi)<<6 | uint64(bits.TrailingZeros64(m)), false
	}
	for i := wi + 1; i < w.words; i++ {
		if m := w.levelWord(lvl, i); m != 0 {
			return uint64(i)<<6 | uint64(bits.TrailingZeros64(m)), false
		}
	}
	for i := uint(0); i <= wi; i++ {
		if m := w.levelWord(lvl, i); m != 0 {
			return uint64(i)<<6 | uint64(bits.TrailingZeros64(m)), true
		}
	}
	return 0, true // unreachable: the level has an occupied slot
}

// floorTicks and ceilTicks divide by the tick (ns <= MaxInt64) with a
// multiplication by the magic number and a shift (Granlund and Montgomery): with
// k = 63+l, m = ceil(2^k/t) = (2^k+e)/t with e < t, so y*m/2^k = y/t + y*e/(t*2^k),
// whose floor is y/t's as long as y*e < 2^k, true for every y < 2^63*t/(t-1):
// all y up to MaxInt64+t-1.
func (w *Wheel) floorTicks(ns uint64) uint64 {
	hi, _ := bits.Mul64(ns, w.magic)
	return hi >> (w.mshift & 63)
}

func (w *Wheel) ceilTicks(ns uint64) uint64 {
	hi, _ := bits.Mul64(ns+w.tickM1, w.magic)
	return hi >> (w.mshift & 63)
}
