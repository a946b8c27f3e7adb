/* SCM_RIGHTS, once (fdpass.h). */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/fdpass.h"

ssize_t fd_send(int sock, const void *data, size_t len, const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(FDPASS_MAX * sizeof(int))];
		struct cmsghdr align;
	} u;
	if (nfds < 0 || nfds > FDPASS_MAX || len == 0)
		return -EINVAL;
	struct iovec iov = { (void *) data, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (nfds) {
		memset(u.buf, 0, sizeof(u.buf));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE((size_t) nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		if (!c)
			return -EINVAL;
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN((size_t) nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, (size_t) nfds * sizeof(int));
	}
	ssize_t n;
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t) n == len ? n : -EMSGSIZE;
}

ssize_t fd_recv(int sock, void *data, size_t len, int *fds, int maxfds, int *nfds, int flags)
{
	union {
		char buf[CMSG_SPACE((FDPASS_MAX + 1) * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { data, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
	*nfds = 0;
	ssize_t n;
	do
		n = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	bool bad = (mh.msg_flags & MSG_CTRUNC) != 0;
	int got = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
			bad = true;
			continue;
		}
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (got < maxfds && fds)
				fds[got++] = fd;
			else {
				(void) close(fd);
				bad = true;
			}
		}
	}
	if (bad) {
		for (int i = 0; i < got; i++)
			(void) close(fds[i]);
		return -EBADMSG;
	}
	*nfds = got;
	return n;
}
