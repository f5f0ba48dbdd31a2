// The C side of the packetdrill shim: packetdrill_interface_init fills in
// packetdrill's interface with the wrappers below, which turn C arguments
// (socket addresses, iovecs, varargs, epoll events) into scalars and C memory
// for the Go side (shim.go), and set errno from its negative results. No stack
// state lives here: userdata is a runtime/cgo.Handle of the Go shim.
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

#include "shim.h"
#include "_cgo_export.h"

#define H(u) ((uintptr_t)(u))

// A call that waited records its completion instant here (pd_mark_done), for
// the same thread's next gettimeofday: packetdrill reads the clock right
// after a blocking call returns.
static __thread long long done_usecs = -1;

void pd_mark_done(long long usecs) { done_usecs = usecs; }

void pd_unsupported(const char *name) { fprintf(stderr, "unsupported: %s\n", name); }

// ret turns the Go side's result (a count, or -errno) into the C convention.
static long long ret(long long r)
{
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

// The run's shim, for getsockopt below: packetdrill loads one shared object
// and makes one interface. Zero when there is none.
static uintptr_t current;

static void shim_free(void *u)
{
	current = 0;
	pdFree(H(u));
}

static int shim_socket(void *u, int domain, int type, int protocol)
{
	return ret(pdSocket(H(u), domain, type, protocol));
}

// sin reads an IPv4 socket address; it fails with EINVAL or EAFNOSUPPORT.
static int getsin(const struct sockaddr *addr, socklen_t len, uint32_t *ip, int *port)
{
	if (addr == NULL)
		return -EFAULT;
	if (len < sizeof(struct sockaddr_in))
		return -EINVAL;
	if (addr->sa_family != AF_INET)
		return -EAFNOSUPPORT;
	const struct sockaddr_in *in = (const struct sockaddr_in *)addr;
	*ip = ntohl(in->sin_addr.s_addr);
	*port = ntohs(in->sin_port);
	return 0;
}

// putsin writes an IPv4 socket address where the caller asked for one.
static void putsin(struct sockaddr *addr, socklen_t *len, uint32_t ip, int port)
{
	struct sockaddr_in in;
	if (addr == NULL || len == NULL)
		return;
	memset(&in, 0, sizeof(in));
	in.sin_family = AF_INET;
	in.sin_addr.s_addr = htonl(ip);
	in.sin_port = htons(port);
	memcpy(addr, &in, *len < sizeof(in) ? *len : sizeof(in));
	*len = sizeof(in);
}

static int shim_bind(void *u, int fd, const struct sockaddr *addr, socklen_t len)
{
	uint32_t ip;
	int port, r = getsin(addr, len, &ip, &port);
	if (r < 0)
		return ret(r);
	return ret(pdBind(H(u), fd, ip, port));
}

static int shim_listen(void *u, int fd, int backlog) { return ret(pdListen(H(u), fd, backlog)); }

static int shim_accept(void *u, int fd, struct sockaddr *addr, socklen_t *len)
{
	uint32_t ip = 0;
	int port = 0;
	long long r = pdAccept(H(u), fd, &ip, &port);
	if (r >= 0)
		putsin(addr, len, ip, port);
	return ret(r);
}

static int shim_connect(void *u, int fd, const struct sockaddr *addr, socklen_t len)
{
	uint32_t ip;
	int port, r = getsin(addr, len, &ip, &port);
	if (r < 0)
		return ret(r);
	return ret(pdConnect(H(u), fd, ip, port));
}

static ssize_t shim_recv(void *u, int fd, void *buf, size_t n, int flags)
{
	return ret(pdRecv(H(u), fd, buf, n, flags));
}

static ssize_t shim_read(void *u, int fd, void *buf, size_t n) { return shim_recv(u, fd, buf, n, 0); }

static ssize_t shim_recvfrom(void *u, int fd, void *buf, size_t n, int flags, struct sockaddr *src,
			     socklen_t *len)
{
	uint32_t ip = 0;
	int port = 0;
	long long r = pdRecv(H(u), fd, buf, n, flags);
	if (r >= 0 && src != NULL && pdPeer(H(u), fd, &ip, &port) == 0)
		putsin(src, len, ip, port);
	return ret(r);
}

static ssize_t shim_send(void *u, int fd, const void *buf, size_t n, int flags)
{
	return ret(pdSend(H(u), fd, (void *)buf, n, flags));
}

static ssize_t shim_write(void *u, int fd, const void *buf, size_t n) { return shim_send(u, fd, buf, n, 0); }

static ssize_t shim_sendto(void *u, int fd, const void *buf, size_t n, int flags,
			   const struct sockaddr *dst, socklen_t len)
{
	(void)dst; // a connected stream socket ignores the address, as Linux does
	(void)len;
	return shim_send(u, fd, buf, n, flags);
}

// iovlen sums an iovec's lengths; -EINVAL for a bad count.
static long long iovlen(const struct iovec *iov, int n)
{
	long long total = 0;
	if (n < 0 || n > 1024)
		return -EINVAL;
	if (n > 0 && iov == NULL)
		return -EFAULT;
	for (int i = 0; i < n; i++) {
		if (iov[i].iov_len > 0 && iov[i].iov_base == NULL)
			return -EFAULT;
		total += iov[i].iov_len;
	}
	return total;
}

// The vector calls gather into (or scatter from) one C buffer, and make one
// call of the Go side.
static ssize_t shim_writev_flags(void *u, int fd, const struct iovec *iov, int n, int flags)
{
	long long total = iovlen(iov, n);
	if (total < 0)
		return ret(total);
	char *buf = malloc(total > 0 ? total : 1);
	if (buf == NULL)
		return ret(-ENOMEM);
	long long off = 0;
	for (int i = 0; i < n; i++) {
		memcpy(buf + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	long long r = pdSend(H(u), fd, buf, total, flags);
	free(buf);
	return ret(r);
}

static ssize_t shim_readv_flags(void *u, int fd, const struct iovec *iov, int n, int flags)
{
	long long total = iovlen(iov, n);
	if (total < 0)
		return ret(total);
	char *buf = malloc(total > 0 ? total : 1);
	if (buf == NULL)
		return ret(-ENOMEM);
	long long r = pdRecv(H(u), fd, buf, total, flags);
	for (long long i = 0, off = 0; r > 0 && i < n && off < r; i++) {
		size_t k = iov[i].iov_len < (size_t)(r - off) ? iov[i].iov_len : (size_t)(r - off);
		memcpy(iov[i].iov_base, buf + off, k);
		off += k;
	}
	free(buf);
	return ret(r);
}

static ssize_t shim_writev(void *u, int fd, const struct iovec *iov, int n)
{
	return shim_writev_flags(u, fd, iov, n, 0);
}

static ssize_t shim_readv(void *u, int fd, const struct iovec *iov, int n)
{
	return shim_readv_flags(u, fd, iov, n, 0);
}

static ssize_t shim_sendmsg(void *u, int fd, const struct msghdr *msg, int flags)
{
	if (msg == NULL)
		return ret(-EFAULT);
	if (msg->msg_controllen > 0) {
		pd_unsupported("sendmsg with control data");
		return ret(-ENOSYS);
	}
	return shim_writev_flags(u, fd, msg->msg_iov, msg->msg_iovlen, flags);
}

static ssize_t shim_recvmsg(void *u, int fd, struct msghdr *msg, int flags)
{
	if (msg == NULL)
		return ret(-EFAULT);
	msg->msg_controllen = 0;
	msg->msg_flags = 0;
	return shim_readv_flags(u, fd, msg->msg_iov, msg->msg_iovlen, flags);
}

static int shim_fcntl(void *u, int fd, int cmd, ...)
{
	va_list ap;
	long arg = 0;
	va_start(ap, cmd);
	if (cmd == F_SETFL || cmd == F_SETFD)
		arg = va_arg(ap, long);
	va_end(ap);
	return ret(pdFcntl(H(u), fd, cmd, arg));
}

static int shim_ioctl(void *u, int fd, unsigned long request, ...)
{
	va_list ap;
	va_start(ap, request);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return ret(pdIoctl(H(u), fd, request, arg));
}

static int shim_close(void *u, int fd) { return ret(pdClose(H(u), fd)); }

static int shim_shutdown(void *u, int fd, int how) { return ret(pdShutdown(H(u), fd, how)); }

static int shim_getsockopt(void *u, int fd, int level, int name, void *val, socklen_t *len)
{
	if (val == NULL || len == NULL)
		return ret(-EFAULT);
	return ret(pdGetsockopt(H(u), fd, level, name, val, len));
}

static int shim_setsockopt(void *u, int fd, int level, int name, const void *val, socklen_t len)
{
	if (val == NULL && len > 0)
		return ret(-EFAULT);
	return ret(pdSetsockopt(H(u), fd, level, name, (void *)val, len));
}

static int shim_poll(void *u, struct pollfd *fds, nfds_t n, int timeout)
{
	if (n > 1024)
		return ret(-EINVAL);
	if (n > 0 && fds == NULL)
		return ret(-EFAULT);
	return ret(pdPoll(H(u), fds, (int)n, timeout));
}

static int shim_netdev_send(void *u, const void *buf, size_t n)
{
	return pdNetdevSend(H(u), (void *)buf, n);
}

static int shim_netdev_receive(void *u, void *buf, size_t *n, long long *t)
{
	return pdNetdevReceive(H(u), buf, n, t);
}

static int shim_usleep(void *u, useconds_t usec)
{
	pdUsleep(H(u), usec);
	return 0;
}

static int shim_gettimeofday(void *u, struct timeval *tv, void *tz)
{
	(void)tz;
	long long now;
	if (done_usecs >= 0) {
		now = done_usecs;
		done_usecs = -1;
	} else {
		now = pdNow(H(u));
	}
	if (tv != NULL) {
		tv->tv_sec = now / 1000000;
		tv->tv_usec = now % 1000000;
	}
	return 0;
}

static int shim_epoll_create(void *u, int size) { return ret(pdEpollCreate(H(u), size)); }

static int shim_epoll_ctl(void *u, int epfd, int op, int fd, struct epoll_event *ev)
{
	uint32_t events = 0;
	uint64_t data = 0;
	if (ev != NULL) {
		events = ev->events;
		data = ev->data.u64;
	} else if (op != EPOLL_CTL_DEL) {
		return ret(-EFAULT);
	}
	return ret(pdEpollCtl(H(u), epfd, op, fd, events, data));
}

static int shim_epoll_wait(void *u, int epfd, struct epoll_event *evs, int max, int timeout)
{
	if (max <= 0 || max > 1024)
		return ret(-EINVAL);
	if (evs == NULL)
		return ret(-EFAULT);
	uint32_t events[max];
	uint64_t data[max];
	long long r = pdEpollWait(H(u), epfd, events, data, max, timeout);
	for (long long i = 0; i < r; i++) {
		evs[i].events = events[i];
		evs[i].data.u64 = data[i];
	}
	return ret(r);
}

static int shim_pipe(void *u, int fds[2])
{
	(void)u;
	(void)fds;
	pd_unsupported("pipe");
	return ret(-ENOSYS);
}

static int shim_splice(void *u, int in, loff_t *inoff, int out, loff_t *outoff, size_t n,
		       unsigned int flags)
{
	(void)u, (void)in, (void)inoff, (void)out, (void)outoff, (void)n, (void)flags;
	pd_unsupported("splice");
	return ret(-ENOSYS);
}

// packetdrill_interface_init is what packetdrill's --so_filename mode looks
// up in the shared object: it starts a stack and fills in the interface.
void packetdrill_interface_init(const char *flags, struct pd_interface *ifc)
{
	memset(ifc, 0, sizeof(*ifc));
	// The runner puts this object in LD_PRELOAD for packetdrill alone (see
	// getsockopt below): the scripts' shell commands and code events must not
	// load it, and with it a Go runtime whose threads and signals (SIGURG
	// preemption) broke their writes now and then ("sysctl: echo: I/O
	// error").
	unsetenv("LD_PRELOAD");
	ifc->userdata = (void *)pdNew((char *)flags);
	current = H(ifc->userdata);
	ifc->free = shim_free;
	ifc->socket = shim_socket;
	ifc->bind = shim_bind;
	ifc->listen = shim_listen;
	ifc->accept = shim_accept;
	ifc->connect = shim_connect;
	ifc->read = shim_read;
	ifc->readv = shim_readv;
	ifc->recv = shim_recv;
	ifc->recvfrom = shim_recvfrom;
	ifc->recvmsg = shim_recvmsg;
	ifc->write = shim_write;
	ifc->writev = shim_writev;
	ifc->send = shim_send;
	ifc->sendto = shim_sendto;
	ifc->sendmsg = shim_sendmsg;
	ifc->fcntl = shim_fcntl;
	ifc->ioctl = shim_ioctl;
	ifc->close = shim_close;
	ifc->shutdown = shim_shutdown;
	ifc->getsockopt = shim_getsockopt;
	ifc->setsockopt = shim_setsockopt;
	ifc->poll = shim_poll;
	ifc->netdev_send = shim_netdev_send;
	ifc->netdev_receive = shim_netdev_receive;
	ifc->usleep = shim_usleep;
	ifc->gettimeofday = shim_gettimeofday;
	ifc->epoll_create = shim_epoll_create;
	ifc->epoll_ctl = shim_epoll_ctl;
	ifc->epoll_wait = shim_epoll_wait;
	ifc->pipe = shim_pipe;
	ifc->splice = shim_splice;
}

// getsockopt interposes on the C library's when the shared object is also in
// LD_PRELOAD (scripts/conformance.sh does that): packetdrill's code events
// (%{ assert tcpi_snd_cwnd == 10 }%) read TCP_INFO with a direct
// getsockopt(2) on the socket's descriptor, not through the interface. Ours
// answer from the shim; any other descriptor goes to the kernel. Loaded by
// dlopen alone (RTLD_LOCAL), this definition is not seen by packetdrill.
int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	if (current != 0 && pdOwns(current, fd))
		return shim_getsockopt((void *)current, fd, level, name, val, len);
	return syscall(SYS_getsockopt, fd, level, name, val, len);
}
