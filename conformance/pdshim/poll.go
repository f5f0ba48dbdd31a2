package pdshim

import (
	"fmt"
	"syscall"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
	"golang.org/x/sys/unix"
)

// PollFD is one entry of poll(2)'s array.
type PollFD struct {
	FD              int
	Events, Revents int16
}

// mask returns what poll(2) would report on fd now (POLLIN, POLLOUT,
// POLLERR, POLLHUP, POLLRDHUP), and a signature of the wakeups so far
// (bytes received, state, error) for edge-triggered epoll.
func (s *Shim) mask(fd int) (uint32, [3]uint64) {
	k, ok := s.files[fd].(*sock)
	if !ok {
		return unix.POLLNVAL, [3]uint64{}
	}
	if k.ln != nil {
		if k.ln.Pending() > 0 {
			return unix.POLLIN, [3]uint64{uint64(k.ln.Pending())}
		}
		return 0, [3]uint64{}
	}
	if k.c == nil {
		return unix.POLLOUT | unix.POLLHUP, [3]uint64{}
	}
	settle(k)
	r, err := k.c.Readiness()
	if err != nil {
		return unix.POLLNVAL, [3]uint64{}
	}
	info := k.c.Info()
	sig := [3]uint64{info.BytesReceived, uint64(r.State), 0}
	var m uint32
	finRcvd := r.State == tcp.StateCloseWait || r.State == tcp.StateLastAck ||
		r.State == tcp.StateClosing || r.State == tcp.StateTimeWait
	if r.Err != nil {
		m |= unix.POLLERR
		sig[2] = 1
	}
	if r.Readable > 0 || finRcvd || k.rdShut || r.Err != nil {
		m |= unix.POLLIN
	}
	if finRcvd || k.rdShut {
		m |= unix.POLLRDHUP
	}
	if r.State == tcp.StateClosed || r.State == tcp.StateTimeWait || r.State == tcp.StateLastAck && k.rdShut {
		m |= unix.POLLHUP
	}
	established := r.State != tcp.StateSynSent && r.State != tcp.StateSynReceived
	if established && r.Writable > 0 && (r.State == tcp.StateEstablished || r.State == tcp.StateCloseWait) {
		m |= unix.POLLOUT
	}
	return m, sig
}

// Poll reports readiness; a timeout (ms, negative: none) waits in virtual
// time (see Shim.block).
func (s *Shim) Poll(fds []PollFD, timeout int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return -1, syscall.EBADF
	}
	n := 0
	scan := func() bool {
		n = 0
		for i := range fds {
			m, _ := s.mask(fds[i].FD)
			fds[i].Revents = int16(m & (uint32(uint16(fds[i].Events)) | unix.POLLERR | unix.POLLHUP | unix.POLLNVAL))
			if fds[i].Revents != 0 {
				n++
			}
		}
		return n > 0
	}
	return n, s.wait("poll", timeout, scan)
}

// wait runs scan until it finds something ready or the timeout (ms; negative
// means none, bounded by PollLimit) passes in virtual time.
func (s *Shim) wait(name string, timeout int, scan func() bool) error {
	if timeout == 0 {
		scan()
		return nil
	}
	d := PollLimit
	if timeout > 0 {
		d = time.Duration(timeout) * time.Millisecond
	}
	until := s.clk.Now() + d
	return s.block(name, -1, until, true, func(now time.Duration) bool {
		return scan() || now >= until
	})
}

// epollSet is an epoll instance: the descriptors it watches.
type epollSet struct {
	items map[int]*epItem
	order []int // in the order added, which is the order reported
}

type epItem struct {
	events  uint32
	data    uint64
	pending bool      // edge-triggered: a wakeup not yet reported
	sig     [3]uint64 // the wakeup signature last seen
}

// EpollEvent is one event epoll_wait reports.
type EpollEvent struct {
	Events uint32
	Data   uint64
}

// EpollCreate creates an epoll instance.
func (s *Shim) EpollCreate(size int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if size <= 0 {
		return -1, syscall.EINVAL
	}
	fd, err := s.newFD()
	if err != nil {
		return -1, err
	}
	s.files[fd] = &epollSet{items: make(map[int]*epItem)}
	return fd, nil
}

func (s *Shim) epoll(epfd int) (*epollSet, error) {
	switch f := s.files[epfd].(type) {
	case *epollSet:
		return f, nil
	case nil:
		return nil, syscall.EBADF
	}
	return nil, syscall.EINVAL
}

// EpollCtl adds, modifies or removes a watched socket. Level- and
// edge-triggered (EPOLLET) modes are supported; EPOLLONESHOT is not.
func (s *Shim) EpollCtl(epfd, op, fd int, events uint32, data uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ep, err := s.epoll(epfd)
	if err != nil {
		return err
	}
	if _, err := s.sock(fd); err != nil {
		return err
	}
	if events&(unix.EPOLLONESHOT|unix.EPOLLEXCLUSIVE|unix.EPOLLWAKEUP) != 0 {
		return s.unsupported(fmt.Sprintf("epoll_ctl events %#x", events))
	}
	it := ep.items[fd]
	switch op {
	case unix.EPOLL_CTL_ADD:
		if it != nil {
			return syscall.EEXIST
		}
		m, sig := s.mask(fd)
		ep.items[fd] = &epItem{events: events, data: data, pending: m&events != 0, sig: sig}
		ep.order = append(ep.order, fd)
	case unix.EPOLL_CTL_MOD:
		if it == nil {
			return syscall.ENOENT
		}
		m, sig := s.mask(fd)
		it.events, it.data, it.pending, it.sig = events, data, m&events != 0, sig
	case unix.EPOLL_CTL_DEL:
		if it == nil {
			return syscall.ENOENT
		}
		delete(ep.items, fd)
		for i, f := range ep.order {
			if f == fd {
				ep.order = append(ep.order[:i], ep.order[i+1:]...)
				break
			}
		}
	default:
		return syscall.EINVAL
	}
	return nil
}

// EpollWait reports up to len(evs) ready sockets, waiting up to timeout ms
// in virtual time. An edge-triggered socket is reported once per wakeup (new
// data, a state change, an error), with all the events it has then, as
// Linux does.
func (s *Shim) EpollWait(epfd int, evs []EpollEvent, timeout int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ep, err := s.epoll(epfd)
	if err != nil {
		return -1, err
	}
	n := 0
	scan := func() bool {
		n = 0
		for _, fd := range ep.order {
			it := ep.items[fd]
			if n == len(evs) {
				break
			}
			m, sig := s.mask(fd)
			if sig != it.sig {
				it.sig, it.pending = sig, true
			}
			ready := m & (it.events | unix.EPOLLERR | unix.EPOLLHUP)
			if it.events&unix.EPOLLET != 0 {
				if !it.pending || ready == 0 {
					continue
				}
				it.pending = false
			} else if ready == 0 {
				continue
			}
			evs[n] = EpollEvent{Events: ready, Data: it.data}
			n++
		}
		return n > 0
	}
	return n, s.wait("epoll_wait", timeout, scan)
}
