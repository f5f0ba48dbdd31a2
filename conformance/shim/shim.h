// The C side of the packetdrill shim: the interface struct packetdrill hands to
// packetdrill_interface_init, declared here by hand after the layout that
// packetdrill's packetdrill.h documents (its field order is the ABI), and the
// helpers the Go side calls.
#ifndef TCPWHEEL_PDSHIM_H
#define TCPWHEEL_PDSHIM_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

struct pd_interface {
	void *userdata;
	void (*free)(void *userdata);
	int (*socket)(void *userdata, int domain, int type, int protocol);
	int (*bind)(void *userdata, int sockfd, const struct sockaddr *addr, socklen_t addrlen);
	int (*listen)(void *userdata, int sockfd, int backlog);
	int (*accept)(void *userdata, int sockfd, struct sockaddr *addr, socklen_t *addrlen);
	int (*connect)(void *userdata, int sockfd, const struct sockaddr *addr, socklen_t addrlen);
	ssize_t (*read)(void *userdata, int fd, void *buf, size_t count);
	ssize_t (*readv)(void *userdata, int fd, const struct iovec *iov, int iovcnt);
	ssize_t (*recv)(void *userdata, int sockfd, void *buf, size_t len, int flags);
	ssize_t (*recvfrom)(void *userdata, int sockfd, void *buf, size_t len, int flags,
			    struct sockaddr *src_addr, socklen_t *addrlen);
	ssize_t (*recvmsg)(void *userdata, int sockfd, struct msghdr *msg, int flags);
	ssize_t (*write)(void *userdata, int fd, const void *buf, size_t count);
	ssize_t (*writev)(void *userdata, int fd, const struct iovec *iov, int iovcnt);
	ssize_t (*send)(void *userdata, int sockfd, const void *buf, size_t len, int flags);
	ssize_t (*sendto)(void *userdata, int sockfd, const void *buf, size_t len, int flags,
			  const struct sockaddr *dest_addr, socklen_t addrlen);
	ssize_t (*sendmsg)(void *userdata, int sockfd, const struct msghdr *msg, int flags);
	int (*fcntl)(void *userdata, int fd, int cmd, ...);
	int (*ioctl)(void *userdata, int fd, unsigned long request, ...);
	int (*close)(void *userdata, int fd);
	int (*shutdown)(void *userdata, int sockfd, int how);
	int (*getsockopt)(void *userdata, int sockfd, int level, int optname, void *optval,
			  socklen_t *optlen);
	int (*setsockopt)(void *userdata, int sockfd, int level, int optname, const void *optval,
			  socklen_t optlen);
	int (*poll)(void *userdata, struct pollfd *fds, nfds_t nfds, int timeout);
	int (*netdev_send)(void *userdata, const void *buf, size_t count);
	int (*netdev_receive)(void *userdata, void *buf, size_t *count, long long *time_usecs);
	int (*usleep)(void *userdata, useconds_t usec);
	int (*gettimeofday)(void *userdata, struct timeval *tv, void *tz);
	int (*epoll_create)(void *userdata, int size);
	int (*epoll_ctl)(void *userdata, int epfd, int op, int fd, struct epoll_event *event);
	int (*epoll_wait)(void *userdata, int epfd, struct epoll_event *events, int maxevents,
			  int timeout);
	int (*pipe)(void *userdata, int pipefd[2]);
	int (*splice)(void *userdata, int fd_in, loff_t *off_in, int fd_out, loff_t *off_out,
		      size_t len, unsigned int flags);
};

// pd_mark_done records, for the calling thread, the virtual time at which a
// call that waited completed: that thread's next gettimeofday returns it, so
// packetdrill times the blocking call's return at its virtual instant.
void pd_mark_done(long long usecs);

// pd_unsupported prints "unsupported: NAME" on stderr.
void pd_unsupported(const char *name);

#endif
