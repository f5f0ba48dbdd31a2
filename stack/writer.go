package stack

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/tcpwheel/tcpwheel/tun"
)

// The device writer (Config.WriteQueue). Without it the loop writes each
// packet, and each GSO frame, to the device itself (writePacket, flushFrame),
// and a TUN's write runs the kernel's receive path for the packet on the
// loop's thread: about half of the loop's time under a burst of
// connections. With it the loop copies each packet (and each frame of one
// segment: on a TUN with offloads every TCP segment is a frame) into the
// next slot of a ring of WriteQueue buffers and goes on; one writer
// goroutine writes the slots to the device in order, under Stack.wmu as
// every other write, so that the kernel handles one batch on the writer's
// thread while the loop computes the next.
//
//   - Handing over costs a wakeup of the writer's thread (on the project's
//     VM an idle vCPU takes 30-150 µs to wake), and moves the packet's bytes
//     to another core, as the kernel's work on them: a loss where a turn
//     sends little, and for GSO frames of many segments. So the loop hands
//     over packets by holdBack (4), the rest at the end of its turn, and
//     writes itself (inline) what a turn sends while the writer has nothing
//     to write: the packets it still holds at the turn's end (a keep-alive
//     exchange, a download's ACKs), and a frame of several segments (a
//     bulk sender's: queued only behind packets the writer still has).
//   - Order: one producer (the loop), one consumer (the writer), slots in
//     sequence; the loop writes inline only when the writer has written
//     everything it was handed: the device sees the packets in the order the
//     loop sent them.
//   - Back-pressure: when every slot waits, the loop waits for the writer
//     to free one (it cannot write the packet itself: that would overtake
//     the queued ones). Counted: WriterStats.Waits and WaitTime.
//   - Counting: the loop counts a packet sent (PacketsOut, the frame
//     counters of OffloadStats) when it queues it, as the direct UDP path
//     counts before its write; the writer counts the device's failures
//     (devWriter.fail), which Stats takes back out of those and adds to
//     DeviceErrors and Drops.DeviceWrite.
//   - Close: the loop's part (closeLoop) queues the connections' RSTs, then
//     stops the writer, which writes all that is queued and returns, before
//     the device is closed; a packet sent after that is written inline.
//   - A stack on a manual loop (NewManual, a Playback, the packetdrill shim)
//     has no writer: it writes inline, synchronously, as before. The flight
//     recorder records each packet on the loop when it is sent (recordOut),
//     before it is queued: a recording is the same with a writer or not.
//
// Buffers: a slot's buffer is allocated the first time it is used, of the
// MTU (and the virtio-net header); a frame of several segments is not
// copied but swapped for the slot's buffer, which becomes one of
// tun.MaxFrame. From then on nothing is allocated per packet; WriteQueue
// slots hold at most WriteQueue frames of 64 KiB.

// MaxWriteQueue bounds Config.WriteQueue.
const MaxWriteQueue = 1 << 16

// WriterStats reports the device writer (Config.WriteQueue).
type WriterStats struct {
	Queue  int    // its slots: Config.WriteQueue; 0: the loop writes inline
	Queued uint64 // packets and frames handed to the writer
	// Inline counts the packets the loop wrote itself at the end of a turn
	// that sent fewer than 4 while the writer had nothing to write.
	Inline uint64
	// Waits counts the times the loop found every slot taken and waited
	// for the writer, and WaitTime the time it waited in all.
	Waits    uint64
	WaitTime time.Duration
	MaxDepth int // the most slots taken at once, as the loop saw when queueing
}

// devWriter is the writer goroutine and its ring of slots.
type devWriter struct {
	s     *Stack
	slots []wslot
	// head is the next slot the writer writes (written by the writer),
	// tail the next slot the loop fills (written by the loop).
	head, tail atomic.Uint64
	// sleeping: the writer waits on wake; waiting: the loop waits on
	// space. Each side stores its flag, then looks at the other's index;
	// the other stores its index, then looks at the flag (so one of them
	// sees the other), and a token left over in a channel only makes a
	// wait look again.
	sleeping, waiting atomic.Bool
	wake, space       chan struct{}
	stop              atomic.Bool
	done              chan struct{} // closed when the writer returns

	// Loop only.
	t       uint64 // the next slot to fill; tail lags it by the slots held back
	pub     uint64 // tail's value: the slots handed to the writer
	hold    uint64 // holdBack (tests: 1, every packet to the writer)
	stopped bool   // stopWriter ran: the loop writes inline
	stats   WriterStats
	// waits is stats.Waits, readable off the loop (tests).
	waits atomic.Uint64

	// The device's failures, counted by the writer.
	mu   sync.Mutex
	fail writeFailures
}

// wslot is one packet or frame queued.
type wslot struct {
	buf   []byte
	n     int
	frame bool // a frame (devWriteFrame), with segs segments, over IPv6 if v6
	v6    bool
	segs  uint64
}

// writeFailures are what failed writes had been counted as when queued.
type writeFailures struct {
	errs, packets                       uint64 // failed writes; the packets (segments) in them
	frames, frames6, gso, gso6, gsoSegs uint64
}

// startWriter starts the device writer with n slots (New, Config.WriteQueue).
func (s *Stack) startWriter(n int) {
	w := &devWriter{
		s:     s,
		slots: make([]wslot, n),
		wake:  make(chan struct{}, 1),
		space: make(chan struct{}, 1),
		done:  make(chan struct{}),
	}
	w.stats.Queue, w.hold = n, holdBack
	s.wr = w
	go w.run()
}

// endTurn is the loop's turn hook: the frame being built is written, and
// the packets the writer has not been handed yet are.
func (s *Stack) endTurn() {
	s.flushFrame()
	s.wakeReaders()
	if s.writing() {
		s.wr.endTurn()
	}
}

// writing reports whether the loop hands its writes to the writer.
func (s *Stack) writing() bool { return s.wr != nil && !s.wr.stopped }

// stopWriter stops the writer once it has written what is queued, and waits
// for it. It runs on the loop (closeLoop); later writes are inline.
func (s *Stack) stopWriter() {
	w := s.wr
	if w == nil || w.stopped {
		return
	}
	w.endTurn()
	w.stopped = true
	w.stop.Store(true)
	select {
	case w.wake <- struct{}{}:
	default:
	}
	<-w.done
}

// run is the writer goroutine: it writes the slots in order, and sleeps
// when there are none.
func (w *devWriter) run() {
	defer close(w.done)
	n := uint64(len(w.slots))
	h := w.head.Load()
	for {
		if h == w.tail.Load() {
			if w.stop.Load() {
				if h == w.tail.Load() { // nothing queued before stop
					return
				}
				continue
			}
			w.sleeping.Store(true)
			if h != w.tail.Load() || w.stop.Load() {
				w.sleeping.Store(false)
				continue
			}
			<-w.wake
			w.sleeping.Store(false)
			continue
		}
		w.write(&w.slots[h%n])
		h++
		w.head.Store(h)
		if w.waiting.Load() {
			select {
			case w.space <- struct{}{}:
			default:
			}
		}
	}
}

// write writes one slot to the device and counts a failure.
func (w *devWriter) write(sl *wslot) {
	var err error
	if sl.frame {
		err = w.s.devWriteFrame(sl.buf[:sl.n])
	} else {
		err = w.s.devWrite(sl.buf[:sl.n])
	}
	if err == nil {
		return
	}
	w.mu.Lock()
	f := &w.fail
	f.errs++
	f.packets += sl.segs
	if sl.frame {
		f.frames++
		if sl.v6 {
			f.frames6++
		}
		if sl.segs > 1 {
			f.gso++
			f.gsoSegs += sl.segs
			if sl.v6 {
				f.gso6++
			}
		}
	}
	w.mu.Unlock()
}

// next returns the slot to fill, once the writer has written it: the loop
// waits while every slot is taken.
func (w *devWriter) next() *wslot {
	n := uint64(len(w.slots))
	depth := w.t - w.head.Load()
	if depth == n {
		w.publish() // what the loop holds back, or it waits for nothing
		start := time.Now()
		w.stats.Waits++
		w.waits.Add(1)
		for {
			w.waiting.Store(true)
			if w.t-w.head.Load() < n {
				break
			}
			<-w.space
		}
		w.waiting.Store(false)
		w.stats.WaitTime += time.Since(start)
		depth = n - 1 // at least: what the writer left
	}
	w.stats.MaxDepth = max(w.stats.MaxDepth, int(depth)+1)
	return &w.slots[w.t%n]
}

// holdBack is how many packets the loop queues before it hands them to the
// writer (publish); a frame of several segments goes at once. A turn that
// sends fewer writes them itself at its end if the writer has nothing to
// write (endTurn), as a turn of a keep-alive exchange or of a download's
// ACKs does: no wakeup of the writer's thread for them.
const holdBack = 4

// push counts the slot filled; a frame, or holdBack packets, go to the
// writer.
func (w *devWriter) push(frame bool) {
	w.t++
	w.stats.Queued++
	if frame || w.t-w.pub >= w.hold {
		w.publish()
	}
}

// publish hands the slots filled to the writer, waking it if it sleeps.
func (w *devWriter) publish() {
	if w.pub == w.t {
		return
	}
	w.pub = w.t
	w.tail.Store(w.t)
	if w.sleeping.Load() {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// endTurn runs at the end of the loop's turn: the packets held back go to
// the writer if it is still writing what it has (they must follow it),
// else the loop writes them itself (inline).
func (w *devWriter) endTurn() {
	if w.pub != w.t && !w.inline() {
		w.publish()
	}
}

// inline reports whether the writer has written all it was handed: then
// the loop writes the packets it holds back itself, in order, takes their
// slots back, and may write what it sends next itself too.
func (w *devWriter) inline() bool {
	if w.head.Load() != w.pub {
		return false
	}
	n := uint64(len(w.slots))
	for i := w.pub; i < w.t; i++ {
		w.write(&w.slots[i%n])
	}
	w.stats.Queued -= w.t - w.pub
	w.stats.Inline += w.t - w.pub
	w.t = w.pub
	return true
}

// queuePacket queues a copy of pkt.
func (w *devWriter) queuePacket(pkt []byte) {
	sl := w.next()
	if cap(sl.buf) < len(pkt) {
		sl.buf = make([]byte, max(len(pkt), w.s.mtu))
	}
	sl.n = copy(sl.buf[:cap(sl.buf)], pkt)
	sl.frame, sl.v6, sl.segs = false, false, 1
	w.push(false)
}

// queueFrame queues the frame (*buf)[:n], of segs segments. A frame of one
// packet is copied, and counts as a packet (holdBack); a larger one goes at
// once, its buffer taken, leaving in its place a buffer of tun.MaxFrame
// bytes: the slot's.
func (w *devWriter) queueFrame(buf *[]byte, n int, segs uint64, v6 bool) {
	sl := w.next()
	if small := w.s.mtu + tun.VnetHdrLen; n <= small {
		if cap(sl.buf) < n {
			sl.buf = make([]byte, small)
		}
		sl.n = copy(sl.buf[:cap(sl.buf)], (*buf)[:n])
		sl.frame, sl.v6, sl.segs = true, v6, segs
		w.push(false)
		return
	}
	old := sl.buf
	if cap(old) < tun.MaxFrame {
		old = make([]byte, tun.MaxFrame)
	}
	sl.buf, *buf = *buf, old[:tun.MaxFrame]
	sl.n, sl.frame, sl.v6, sl.segs = n, true, v6, segs
	w.push(true)
}

// addTo takes the failed writes back out of the counters the loop counted
// when it queued them, and counts them as the device's errors.
func (w *devWriter) addTo(c *Counters, o *OffloadStats) {
	w.mu.Lock()
	f := w.fail
	w.mu.Unlock()
	c.PacketsOut -= f.packets
	c.DeviceErrors += f.errs
	c.Drops.DeviceWrite += f.packets
	o.FramesOut -= f.frames
	o.FramesOut6 -= f.frames6
	o.GSOFramesOut -= f.gso
	o.GSOFramesOut6 -= f.gso6
	o.GSOSegmentsOut -= f.gsoSegs
}
