/* A file transfer's data between the monitor and a client's fd (xfer.h). */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "live/xfer.h"

#define CHUNK 65536

/* Wait until fd has events, or until the monitor stops (0), or until
 * `gone` (the library's end of our socket) is closed (-EPIPE). 1: ready
 * (or in error, which the next call on it reports). */
static int wait_for(const xfer *r, int fd, short events, int gone)
{
	for (;;) {
		struct pollfd p[3] = { { .fd = fd, .events = events },
			               { .fd = r->stop_fd, .events = POLLIN },
			               { .fd = gone, .events = 0 } };
		int n = poll(p, 3, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (p[1].revents)
			return 0;
		if (p[0].revents & POLLNVAL)
			return -EBADF;
		if (p[0].revents)
			return 1;
		if (p[2].revents & (POLLHUP | POLLERR))
			return -EPIPE;
	}
}

/* One read or write on the client's fd, after poll() said it is ready. A
 * pipe or a socket is asked not to block (RWF_NOWAIT: its other end may
 * be shared, and drained or filled meanwhile); where the kernel cannot,
 * one pipe buffer at a time, which a ready pipe takes whole. A file or a
 * terminal that poll() calls ready does not block for long. */
static ssize_t client_io(xfer *r, bool *nowait, bool pipe_like, char *buf, size_t n, bool out)
{
	struct iovec v = { buf, n };
	if (*nowait) {
		ssize_t k = out ? pwritev2(r->client, &v, 1, -1, RWF_NOWAIT) : preadv2(r->client, &v, 1, -1, RWF_NOWAIT);
		if (k >= 0 || (errno != EOPNOTSUPP && errno != EINVAL))
			return k;
		*nowait = false;
	}
	if (pipe_like && n > PIPE_BUF)
		n = PIPE_BUF;
	return out ? write(r->client, buf, n) : read(r->client, buf, n);
}

/* A read: the library's bytes (from ours) to the client, to their end. */
static int to_client(xfer *r, bool pipe_like, char *buf)
{
	bool nowait = pipe_like;
	for (;;) {
		int w = wait_for(r, r->ours, POLLIN, -1);
		if (w <= 0)
			return w == 0 ? ECANCELED : -w;
		ssize_t n = recv(r->ours, buf, CHUNK, MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return 0;   /* the library is done (it closed its end) */
		for (char *p = buf; n > 0;) {
			w = wait_for(r, r->client, POLLOUT, -1);
			if (w <= 0)
				return w == 0 ? ECANCELED : -w;
			ssize_t k = client_io(r, &nowait, pipe_like, p, (size_t) n, true);
			if (k < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (k <= 0)
				return k < 0 ? errno : EIO;
			p += k;
			n -= k;
		}
	}
}

/* A write: the client's bytes to the library (ours), to their end, which
 * the library sees as the end of the file. *done when the library stopped
 * reading first (its own status says why). */
static int from_client(xfer *r, bool pipe_like, char *buf)
{
	bool nowait = pipe_like;
	for (;;) {
		int w = wait_for(r, r->client, POLLIN, r->ours);
		if (w == -EPIPE)
			return 0;
		if (w <= 0)
			return w == 0 ? ECANCELED : -w;
		ssize_t n = client_io(r, &nowait, pipe_like, buf, CHUNK, false);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return errno;
		if (n == 0) {
			(void) shutdown(r->ours, SHUT_WR);
			return 0;
		}
		for (char *p = buf; n > 0;) {
			w = wait_for(r, r->ours, POLLOUT, -1);
			if (w <= 0)
				return w == 0 ? ECANCELED : -w;
			ssize_t k = send(r->ours, p, (size_t) n, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (k < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (k < 0)
				return 0;   /* the library stopped reading: its status says why */
			p += k;
			n -= k;
		}
	}
}

static void *run(void *arg)
{
	xfer *r = arg;
	char *buf = malloc(CHUNK);
	struct stat st;
	bool pipe_like = fstat(r->client, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
	r->err = !buf ? ENOMEM : r->to_client ? to_client(r, pipe_like, buf) : from_client(r, pipe_like, buf);
	free(buf);
	if (r->err && r->to_client) {
		/* The library's next write fails (EPIPE): it ends the read. */
		(void) shutdown(r->ours, SHUT_RDWR);
	} else if (r->err) {
		/* The library must see an error, not the end of a file made of
		 * part of the data: closing our end while its queue holds the
		 * byte xfer_start put there resets the library's end
		 * (ECONNRESET), which it reads past the data. */
		close(r->ours);
		r->ours = -1;
	}
	return NULL;
}

int xfer_start(xfer *r, int client_fd, bool to_client, int stop_fd, int *lib_fd)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	*r = (xfer){ .client = client_fd, .ours = sv[0], .stop_fd = stop_fd, .to_client = to_client };
	int e = 0;
	if (!to_client && send(sv[1], "", 1, MSG_DONTWAIT | MSG_NOSIGNAL) != 1)
		e = errno ? errno : EIO;
	if (!e)
		e = pthread_create(&r->thread, NULL, run, r);
	if (e) {
		close(sv[0]);
		close(sv[1]);
		return -e;
	}
	*lib_fd = sv[1];
	return 0;
}

int xfer_finish(xfer *r, int lib_fd)
{
	close(lib_fd);
	pthread_join(r->thread, NULL);
	if (r->ours >= 0)
		close(r->ours);
	r->ours = -1;
	return r->err;
}
