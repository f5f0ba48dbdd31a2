// Command shim is the packetdrill shared object: built with
//
//	go build -buildmode=c-shared -o build/packetdrill.so ./conformance/shim
//
// (make packetdrill-shim), it is loaded by `packetdrill --so_filename=...`,
// which calls its packetdrill_interface_init (shim.c) and then drives a stack
// on the manual loop through the interface's functions: the exported pd*
// functions below, over package pdshim. C memory is handed to Go only for
// the length of a call; the stack and every socket stay in Go, reached from
// C through a runtime/cgo.Handle in the interface's userdata.
//
// --so_flags takes space-separated key=value pairs: local=IP (the stack's
// address, default 198.18.0.1, inside 198.18.0.0/15) and sysctls=FILE (the
// file of name=value lines the run's stand-in sysctl commands write).
package main

/*
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime/cgo"
	"strings"
	"syscall"
	"unsafe"

	"github.com/tcpwheel/tcpwheel/conformance/pdshim"
	"golang.org/x/sys/unix"
)

func main() {}

// parseFlags reads --so_flags.
func parseFlags(flags string) (pdshim.Options, error) {
	var o pdshim.Options
	for _, f := range strings.Fields(flags) {
		k, v, ok := strings.Cut(f, "=")
		switch {
		case !ok:
			return o, fmt.Errorf("so_flags: %q is not key=value", f)
		case k == "local":
			a, err := netip.ParseAddr(v)
			if err != nil {
				return o, fmt.Errorf("so_flags: local: %w", err)
			}
			o.Local = a
		case k == "sysctls":
			o.Sysctls = v
		default:
			return o, fmt.Errorf("so_flags: unknown key %q (local, sysctls)", k)
		}
	}
	return o, nil
}

//export pdNew
func pdNew(flags *C.char) C.uintptr_t {
	var fs string
	if flags != nil {
		fs = C.GoString(flags)
	}
	o, err := parseFlags(fs)
	if err == nil {
		mainTID := unix.Gettid()
		o.Hooks = pdshim.Hooks{
			Main:        func() bool { return unix.Gettid() == mainTID },
			Done:        func(usecs int64) { C.pd_mark_done(C.longlong(usecs)) },
			Unsupported: func(name string) { unsupported(name) },
		}
		var s *pdshim.Shim
		if s, err = pdshim.New(o); err == nil {
			return C.uintptr_t(cgo.NewHandle(s))
		}
	}
	// packetdrill's init has no way to fail: say why and stop the run.
	fmt.Fprintf(os.Stderr, "pdshim: %v\n", err)
	os.Exit(1)
	return 0
}

func unsupported(name string) {
	cs := C.CString(name)
	C.pd_unsupported(cs)
	C.free(unsafe.Pointer(cs))
}

func shim(h C.uintptr_t) *pdshim.Shim { return cgo.Handle(h).Value().(*pdshim.Shim) }

// res is the C convention of the wrappers: the count, or -errno.
func res(n int, err error) C.longlong {
	if err == nil {
		return C.longlong(n)
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return -C.longlong(e)
	}
	return -C.longlong(syscall.EIO)
}

// bytes views C memory as a slice for the length of a call; nil for NULL.
func bytes(p unsafe.Pointer, n C.size_t) []byte {
	if p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(p), int(n))
}

func addrPort(ip C.uint32_t, port C.int) netip.AddrPort {
	a := netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)})
	return netip.AddrPortFrom(a, uint16(port))
}

func putAddrPort(ap netip.AddrPort, ip *C.uint32_t, port *C.int) {
	b := ap.Addr().As4()
	*ip = C.uint32_t(b[0])<<24 | C.uint32_t(b[1])<<16 | C.uint32_t(b[2])<<8 | C.uint32_t(b[3])
	*port = C.int(ap.Port())
}

//export pdFree
func pdFree(h C.uintptr_t) {
	shim(h).Close()
	cgo.Handle(h).Delete()
}

//export pdSocket
func pdSocket(h C.uintptr_t, domain, typ, proto C.int) C.longlong {
	return res(shim(h).Socket(int(domain), int(typ), int(proto)))
}

//export pdBind
func pdBind(h C.uintptr_t, fd C.int, ip C.uint32_t, port C.int) C.longlong {
	return res(0, shim(h).Bind(int(fd), addrPort(ip, port)))
}

//export pdListen
func pdListen(h C.uintptr_t, fd, backlog C.int) C.longlong {
	return res(0, shim(h).Listen(int(fd), int(backlog)))
}

//export pdAccept
func pdAccept(h C.uintptr_t, fd C.int, ip *C.uint32_t, port *C.int) C.longlong {
	nfd, peer, err := shim(h).Accept(int(fd))
	if err == nil {
		putAddrPort(peer, ip, port)
	}
	return res(nfd, err)
}

//export pdConnect
func pdConnect(h C.uintptr_t, fd C.int, ip C.uint32_t, port C.int) C.longlong {
	return res(0, shim(h).Connect(int(fd), addrPort(ip, port)))
}

//export pdPeer
func pdPeer(h C.uintptr_t, fd C.int, ip *C.uint32_t, port *C.int) C.longlong {
	ap, err := shim(h).Peer(int(fd))
	if err == nil {
		putAddrPort(ap, ip, port)
	}
	return res(0, err)
}

//export pdRecv
func pdRecv(h C.uintptr_t, fd C.int, buf unsafe.Pointer, n C.size_t, flags C.int) C.longlong {
	return res(shim(h).Recv(int(fd), bytes(buf, n), int(n), int(flags)))
}

//export pdSend
func pdSend(h C.uintptr_t, fd C.int, buf unsafe.Pointer, n C.size_t, flags C.int) C.longlong {
	return res(shim(h).Send(int(fd), bytes(buf, n), int(n), int(flags)))
}

//export pdFcntl
func pdFcntl(h C.uintptr_t, fd, cmd C.int, arg C.long) C.longlong {
	return res(shim(h).Fcntl(int(fd), int(cmd), int(arg)))
}

//export pdIoctl
func pdIoctl(h C.uintptr_t, fd C.int, req C.ulong, arg unsafe.Pointer) C.longlong {
	if arg == nil {
		return res(0, syscall.EFAULT)
	}
	v, err := shim(h).Ioctl(int(fd), uint(req))
	if err == nil {
		*(*C.int)(arg) = C.int(v)
	}
	return res(0, err)
}

//export pdClose
func pdClose(h C.uintptr_t, fd C.int) C.longlong { return res(0, shim(h).CloseFD(int(fd))) }

//export pdShutdown
func pdShutdown(h C.uintptr_t, fd, how C.int) C.longlong {
	return res(0, shim(h).Shutdown(int(fd), int(how)))
}

//export pdGetsockopt
func pdGetsockopt(h C.uintptr_t, fd, level, name C.int, val unsafe.Pointer, n *C.socklen_t) C.longlong {
	got, err := shim(h).Getsockopt(int(fd), int(level), int(name), bytes(val, C.size_t(*n)))
	if err == nil {
		*n = C.socklen_t(got)
	}
	return res(0, err)
}

//export pdSetsockopt
func pdSetsockopt(h C.uintptr_t, fd, level, name C.int, val unsafe.Pointer, n C.socklen_t) C.longlong {
	return res(0, shim(h).Setsockopt(int(fd), int(level), int(name), bytes(val, C.size_t(n))))
}

//export pdPoll
func pdPoll(h C.uintptr_t, fds *C.struct_pollfd, n, timeout C.int) C.longlong {
	cs := unsafe.Slice(fds, int(n))
	ps := make([]pdshim.PollFD, len(cs))
	for i, c := range cs {
		ps[i] = pdshim.PollFD{FD: int(c.fd), Events: int16(c.events)}
	}
	r, err := shim(h).Poll(ps, int(timeout))
	for i := range cs {
		cs[i].revents = C.short(ps[i].Revents)
	}
	return res(r, err)
}

//export pdNetdevSend
func pdNetdevSend(h C.uintptr_t, buf unsafe.Pointer, n C.size_t) C.int {
	if err := shim(h).NetdevSend(bytes(buf, n)); err != nil {
		fmt.Fprintf(os.Stderr, "pdshim: netdev_send: %v\n", err)
		return -1
	}
	return 0
}

// pdNetdevReceive hands packetdrill the stack's next packet. When the stack
// sends nothing more it says so and returns an empty packet, which packetdrill
// rejects with an error naming the script line (its so mode has no timeout:
// an error return would make it ask again forever).
//
//export pdNetdevReceive
func pdNetdevReceive(h C.uintptr_t, buf unsafe.Pointer, count *C.size_t, t *C.longlong) C.int {
	n, at, err := shim(h).NetdevReceive(bytes(buf, *count))
	if err != nil {
		fmt.Fprintf(os.Stderr, "pdshim: netdev_receive: %v\n", err)
	}
	*count, *t = C.size_t(n), C.longlong(at)
	return 0
}

//export pdUsleep
func pdUsleep(h C.uintptr_t, usec C.uint) { shim(h).Usleep(int64(usec)) }

//export pdNow
func pdNow(h C.uintptr_t) C.longlong { return C.longlong(shim(h).Now()) }

//export pdEpollCreate
func pdEpollCreate(h C.uintptr_t, size C.int) C.longlong {
	return res(shim(h).EpollCreate(int(size)))
}

//export pdEpollCtl
func pdEpollCtl(h C.uintptr_t, epfd, op, fd C.int, events C.uint32_t, data C.uint64_t) C.longlong {
	return res(0, shim(h).EpollCtl(int(epfd), int(op), int(fd), uint32(events), uint64(data)))
}

//export pdEpollWait
func pdEpollWait(h C.uintptr_t, epfd C.int, events *C.uint32_t, data *C.uint64_t, max, timeout C.int) C.longlong {
	evs := make([]pdshim.EpollEvent, int(max))
	n, err := shim(h).EpollWait(int(epfd), evs, int(timeout))
	if err == nil {
		es, ds := unsafe.Slice(events, int(max)), unsafe.Slice(data, int(max))
		for i := range n {
			es[i], ds[i] = C.uint32_t(evs[i].Events), C.uint64_t(evs[i].Data)
		}
	}
	return res(n, err)
}

//export pdOwns
func pdOwns(h C.uintptr_t, fd C.int) C.int {
	if shim(h).Owns(int(fd)) {
		return 1
	}
	return 0
}
