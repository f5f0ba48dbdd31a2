package stack

import (
	"sync"
	"sync/atomic"
)

// Lent frames: on the direct path with GRO (offload.go) the loop reads each
// frame into a buffer of the stack's framePool, and a Conn whose sink
// (connSink.Take) is handed a large in-order payload that lies in that
// buffer takes the buffer itself instead of copying the payload into its
// ring: the loop then moves no byte of a bulk upload, and the application's
// Read copies each byte once, out of the frame. The Conn gives the buffer
// back to the pool when Read has taken the last of its payload, or when the
// Conn is closed; the loop reads the next frame into another buffer.
//
// A buffer has one owner at a time: the loop while it reads and handles the
// frame, then the Conn that took it (the loop may still read the rest of the
// frame's headers until the handling ends, but never writes it again), then
// the pool, from which only the loop takes. Flow control is unchanged: the
// endpoint counts what the sink took as held unread until Release, lent or
// copied alike. Only a payload of at least half a buffer is lent
// (framePool.min), so that the buffers a Conn holds are never more than twice
// the bytes it holds: a 1 MB window of small segments is copied as before.

// framePool holds the buffers the direct path reads frames into. get runs on
// the loop; put on any goroutine (a Conn's Read or Close).
type framePool struct {
	size int
	min  int // the smallest payload lent: half a buffer
	mu   sync.Mutex
	free [][]byte // at most maxFreeFrames
	// lent counts the buffers a Conn took (loop only), back the ones
	// returned to the pool: lent - back are held by Conns.
	lent uint64
	back atomic.Uint64
}

// maxFreeFrames bounds the free buffers a pool keeps: what a window's worth
// of lent frames returns, at most; more are left to the collector.
const maxFreeFrames = 32

func newFramePool(size int) *framePool { return &framePool{size: size, min: size / 2} }

// get returns a buffer of the pool's size, a free one if there is one.
func (p *framePool) get() []byte {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return b
	}
	p.mu.Unlock()
	return make([]byte, p.size)
}

// put takes back a buffer that a Conn took (lend).
func (p *framePool) put(b []byte) {
	p.back.Add(1)
	b = b[:cap(b)]
	p.mu.Lock()
	if len(p.free) < maxFreeFrames {
		p.free = append(p.free, b)
	}
	p.mu.Unlock()
}

// counts returns the buffers lent to Conns, and those they hold: lent and
// not given back. It runs on the loop.
func (p *framePool) counts() (lent, held uint64) {
	return p.lent, p.lent - p.back.Load()
}

// lendFrame is the sink's question on the loop: may the Conn take data, a
// payload the endpoint is delivering, with the frame buffer that holds it,
// instead of a copy? It may when the frame being handled was read into the
// current buffer of the pool, that buffer was not lent yet (one Conn per
// buffer: a wrapper's read may hold several frames), data lies in it (not
// in a copy the endpoint made: out-of-order data, its own buffer) and is
// large enough. It returns the buffer, now the Conn's, or nil.
func (s *Stack) lendFrame(data []byte) []byte {
	b := s.lendable
	if b == nil || len(data) < s.frames.min || !within(data, b) {
		return nil
	}
	s.lendable = nil
	s.frames.lent++
	return b
}

// within reports whether p is a slice of b's array: whether both end their
// capacity at the same element (a slice of b keeps b's capacity's end
// unless a full slice expression cut it, which only makes the answer false).
func within(p, b []byte) bool {
	if cap(p) == 0 || cap(b) == 0 || cap(p) > cap(b) {
		return false
	}
	return &p[:cap(p)][cap(p)-1] == &b[:cap(b)][cap(b)-1]
}

// lentFrames are the frames a Conn's rx holds: each payload left to read
// after before more bytes of the ring; tail is the ring's bytes after the
// last, bytes the payloads' bytes.
type lentFrames struct {
	frames      []rxFrame
	tail, bytes int
}

// rxFrame is a lent frame in a Conn's receive queue: the payload left to
// read (a slice of buf), after before more bytes of the ring.
type rxFrame struct {
	before int
	data   []byte
	buf    []byte
}

// len is the bytes rx holds unread: the ring's and the lent frames'.
func (r *rxBuf) len() int {
	if r.lent == nil {
		return r.ring.Len()
	}
	return r.ring.Len() + r.lent.bytes
}

// copyIn appends p to rx, copied into the ring.
func (r *rxBuf) copyIn(p []byte) {
	r.ring.Write(p)
	if r.lent != nil {
		r.lent.tail += len(p)
	}
}

// committed notes k bytes appended to the ring by Free and Commit.
func (r *rxBuf) committed(k int) {
	r.ring.Commit(k)
	if r.lent != nil {
		r.lent.tail += k
	}
}

// lend appends data, a slice of the lent frame buffer buf, to rx.
func (r *rxBuf) lend(data, buf []byte) {
	if r.lent == nil {
		r.lent = new(lentFrames)
	}
	l := r.lent
	before := l.tail
	if len(l.frames) == 0 {
		before = r.ring.Len()
	}
	l.frames = append(l.frames, rxFrame{before: before, data: data, buf: buf})
	l.tail = 0
	l.bytes += len(data)
}

// read copies what rx holds, in order, into p, and gives the frames it
// empties back to pool.
func (r *rxBuf) read(p []byte, pool *framePool) int {
	l := r.lent
	if l == nil || len(l.frames) == 0 {
		return r.ring.Read(p)
	}
	n := 0
	for n < len(p) && len(l.frames) > 0 {
		f := &l.frames[0]
		if f.before > 0 {
			k := r.ring.Read(p[n:min(len(p), n+f.before)])
			if k == 0 {
				break // cannot be: before counts bytes of the ring
			}
			f.before -= k
			n += k
			continue
		}
		k := copy(p[n:], f.data)
		f.data = f.data[k:]
		l.bytes -= k
		n += k
		if len(f.data) == 0 {
			pool.put(f.buf)
			l.pop()
		}
	}
	if len(l.frames) == 0 && n < len(p) {
		n += r.ring.Read(p[n:]) // the ring's bytes after the last frame
	}
	return n
}

// takeFrame removes the lent frame that comes next, if no ring bytes come
// before it, and returns its payload and buffer, now the caller's to give
// back to the pool; else nil, nil.
func (r *rxBuf) takeFrame() (data, buf []byte) {
	l := r.lent
	if l == nil || len(l.frames) == 0 || l.frames[0].before > 0 {
		return nil, nil
	}
	f := l.frames[0]
	l.pop()
	l.bytes -= len(f.data)
	return f.data, f.buf
}

// pop removes the first frame (its buffer the caller's to give back).
func (l *lentFrames) pop() {
	copy(l.frames, l.frames[1:])
	l.frames[len(l.frames)-1] = rxFrame{}
	l.frames = l.frames[:len(l.frames)-1]
}

// ahead is how many of rx's bytes come before its next lent frame: all it
// holds when it holds none.
func (r *rxBuf) ahead() int {
	if l := r.lent; l != nil && len(l.frames) > 0 {
		return l.frames[0].before
	}
	return r.ring.Len()
}

// reset drops what rx holds, giving its frames back to pool.
func (r *rxBuf) reset(pool *framePool) {
	if l := r.lent; l != nil {
		for i := range l.frames {
			pool.put(l.frames[i].buf)
		}
		r.lent = nil
	}
	r.ring.Reset()
}
