package stack

import (
	"errors"
	"io"
	"os"
	"syscall"

	"github.com/tcpwheel/tcpwheel/internal/ring"
)

// Copies between a Conn and another descriptor (io.Copy): a relay between a
// TUN's client and a kernel socket (tcpwheel forward, a tun2socks-style
// proxy), a file served over a Conn (net/http's ReadFrom), a Conn drained
// into a writer. io.Copy moves each byte twice through a buffer of its own,
// once into it and once out of it; ReadFrom and WriteTo move it once:
//
//   - ReadFrom reads a descriptor (a syscall.Conn: a kernel socket, a file, a
//     pipe) straight into the send buffer's free room (ring.Span.Pieces),
//     without mu, as Write's large copies go (copyUnlocked), and counts what
//     the read filled (ring.Span.Cut). io.Copy(conn, tcpConn) comes here too:
//     *net.TCPConn's WriteTo hands its io.Copy a reader that is still a
//     syscall.Conn. Any other reader goes through io.Copy's buffer, as before.
//   - WriteTo hands the writer the payload of a lent frame (rxframes.go) as
//     it lies in the frame, and gives the frame back once the writer has
//     taken it; bytes of the receive ring are copied out as Read copies them
//     (the ring's storage may go to another Conn at Close, the frame is the
//     caller's alone once taken).
//
// Flow control is Write's and Read's: ReadFrom takes no more than the send
// buffer's room and waits for room as Write does (the write deadline);
// WriteTo releases what it took as Read does, and waits for data as Read
// does (the read deadline). Neither holds a lock while it waits, on the Conn
// or on the other descriptor.

// readFromMin is what ReadFrom reserves when the storage's free room is
// less than a quarter of it (256 bytes): a ring's smallest storage, which a
// new Conn takes from the stack's spares. Otherwise it reads into the free
// room there is, so that the storage grows, doubling as Write's does, only
// when it is nearly full: a relayed flow of small exchanges keeps its 1 KB
// ring (with io.Copy's 32 KB reserved each time, each of ab's connections
// through the forwarder grew a 64 KB ring that no spare could take: 0.91x
// the connections/s), and a bulk flow's reads grow with its ring, up to
// the send buffer.
const readFromMin = ring.MinCap

// writeToCopy is the buffer WriteTo copies the ring's bytes into, from the
// stack's pool (Stack.copyBufs): a connection whose data arrived in lent
// frames never takes one.
const writeToCopy = 32 << 10

// ReadFrom implements io.ReaderFrom: it writes what r holds, to its end, and
// returns the count written. From a descriptor (a syscall.Conn) it reads
// straight into the send buffer. It returns nil at r's EOF; a write error as
// Write does (a closed Conn, the peer's reset, the write deadline); a read
// error of r as r's.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	if sc, ok := r.(syscall.Conn); ok && rawReads {
		if rc, err := sc.SyscallConn(); err == nil {
			return c.readFromRaw(rc)
		}
	}
	return io.Copy(connWriter{c}, r)
}

// connWriter is a Conn as a plain io.Writer: io.Copy, given the Conn, would
// call its ReadFrom again.
type connWriter struct{ c *Conn }

func (w connWriter) Write(p []byte) (int, error) { return w.c.Write(p) }

// readFromRaw is ReadFrom's loop over a descriptor: a read into the send
// buffer each time the descriptor is readable (rc.Read waits for it in Go's
// netpoller) and the buffer has room.
func (c *Conn) readFromRaw(rc syscall.RawConn) (int64, error) {
	var total int64
	for {
		if err := c.usable("write", &c.wd); err != nil {
			return total, err
		}
		var (
			n          int
			ch         chan struct{}
			eof        bool
			werr, rerr error
		)
		err := rc.Read(func(fd uintptr) bool {
			n, ch, eof, werr, rerr = c.readFd(fd)
			return !errors.Is(rerr, syscall.EAGAIN) // else wait until fd is readable
		})
		total += int64(n)
		switch {
		case werr != nil:
			return total, werr
		case err != nil: // the descriptor's: closed, its read deadline
			return total, err
		case rerr != nil: // the read's: ECONNRESET from a socket, EIO from a file
			return total, os.NewSyscallError("read", rerr)
		case eof:
			return total, nil
		case ch != nil:
			c.block(ch, &c.wd)
		}
	}
}

// readFd reads fd, without waiting, into the send buffer's room, and has the
// loop flush what it read. When the buffer has no room (or the connection
// is not established yet) it reads nothing and returns the channel to wait
// on, as writeSome does. werr is the Conn's error (the bytes read are not
// sent: as a Write that failed); rerr the read's, EAGAIN when fd has nothing
// yet; eof that fd is at its end.
func (c *Conn) readFd(fd uintptr) (n int, ch chan struct{}, eof bool, werr, rerr error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	room, werr := c.txRoom(&ch, true)
	if room <= 0 {
		c.mu.Unlock()
		return 0, ch, false, werr, nil
	}
	k := c.tx.q.Free()
	if k < readFromMin/4 {
		k = readFromMin // nearly full: the storage grows (doubles, as Write's)
	}
	span := c.tx.q.Reserve(min(room, k))
	c.tx.copying = true // recycle leaves the storage alone
	c.mu.Unlock()
	p, _ := span.Pieces() // a span that wraps: its second piece at the next read
	for {
		n, rerr = rawRead(fd, p)
		if rerr != syscall.EINTR {
			break
		}
	}
	if testHookAfterFill != nil {
		testHookAfterFill(c)
	}
	c.mu.Lock()
	c.tx.copying = false
	if rerr != nil || n <= 0 {
		c.mu.Unlock()
		return 0, nil, rerr == nil, nil, rerr
	}
	if werr = c.commitFilled(span.Cut(n)); werr != nil {
		c.mu.Unlock()
		return 0, nil, false, werr, nil
	}
	c.wrote()
	return n, nil, false, nil, nil
}

// WriteTo implements io.WriterTo: it writes what the Conn receives to w until
// the peer's FIN, and returns the count written. A lent frame's payload goes
// to w as it lies in the frame. It returns nil at the FIN; a read error as
// Read does (a closed Conn, a reset, the read deadline); w's error as w's.
func (c *Conn) WriteTo(w io.Writer) (int64, error) {
	var total int64
	var buf *[]byte // from c.s.copyBufs, taken at the first copy
	defer func() {
		if buf != nil {
			c.s.copyBufs.Put(buf)
		}
	}()
	for {
		if err := c.usable("read", &c.rd); err != nil {
			return total, err
		}
		var ch chan struct{}
		p, frame, wait, err := c.takeSome(&buf, &ch)
		if len(p) > 0 {
			k, werr := w.Write(p)
			if frame != nil {
				c.s.frames.put(frame) // w is done with it
			}
			total += int64(k)
			if werr == nil && k < len(p) {
				werr = io.ErrShortWrite
			}
			if werr != nil {
				return total, werr
			}
		}
		switch {
		case err == io.EOF:
			return total, nil
		case err != nil:
			return total, err
		case wait:
			c.block(ch, &c.rd)
		}
	}
}

// takeSome is readSome for WriteTo: the payload of the lent frame that comes
// next, the frame now the caller's to give back, or else what the ring
// holds before the next frame, copied into *buf (taken from the stack's
// pool at the first).
func (c *Conn) takeSome(buf **[]byte, ch *chan struct{}) (p, frame []byte, wait bool, err error) {
	c.mu.Lock()
	if p, frame = c.rx.takeFrame(); frame == nil && c.rx.len() > 0 {
		if *buf == nil {
			*buf = c.s.copyBufs.Get().(*[]byte)
		}
		p = **buf
		p = p[:c.rx.read(p[:min(len(p), c.rx.ahead())], c.s.frames)]
	}
	if len(p) > 0 {
		c.readDone(len(p))
		return p, frame, false, nil
	}
	wait, err = c.readEmpty(ch, true)
	return nil, nil, wait, err
}
