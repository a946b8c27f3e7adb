/* Published ports of a long-lived sandbox (nsbox_forward_*): the host
 * listens (on its loopback unless told otherwise) and relays each
 * connection to a port on the sandbox's own loopback, so that a dev server
 * started by an agent can be previewed while the sandbox keeps network mode
 * none. The inner connection is made inside, as the sandbox's user
 * (child/fileop.c's connect), and handed over as an fd: the host never joins
 * the sandbox's network namespace, which a rootless caller could not. One
 * thread accepts; each connection is relayed by a thread of its own (few,
 * slow connections: a preview, not a load balancer). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/error.h"
#include "live/remote.h"
#include "sandbox/sandbox.h"

#define FORWARD_CONNS_MAX 256

struct nsbox_forward {
	nsbox_sandbox *sb;
	uint16_t port, host_port;
	int listen_fd;
	int wake[2];            /* stop: the accept loop and the relays see it */
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t idle;
	unsigned conns;
	bool stop;
};

typedef struct conn {
	nsbox_forward *f;
	int outer, inner;
} conn;

/* Copy both ways until either side ends (then half-close the other) or
 * the forward stops. */
static void *relay(void *arg)
{
	conn *c = arg;
	nsbox_forward *f = c->f;
	int fds[2] = { c->outer, c->inner };
	bool open[2] = { true, true };
	char chunk[32768];
	while (open[0] || open[1]) {
		struct pollfd p[3] = { { .fd = open[0] ? fds[0] : -1, .events = POLLIN },
		                       { .fd = open[1] ? fds[1] : -1, .events = POLLIN },
		                       { .fd = f->wake[0], .events = POLLIN } };
		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[2].revents)
			break;
		for (int i = 0; i < 2; i++) {
			if (!p[i].revents)
				continue;
			ssize_t n = recv(fds[i], chunk, sizeof(chunk), 0);
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (n <= 0) {
				open[i] = false;
				(void) shutdown(fds[!i], SHUT_WR);
				continue;
			}
			/* A peer that does not read (anyone on the host may
			 * connect) must not hold the relay past a stop: the
			 * send waits in poll(), with the wake pipe. */
			for (char *s = chunk; n > 0;) {
				ssize_t w = send(fds[!i], s, (size_t) n, MSG_NOSIGNAL | MSG_DONTWAIT);
				if (w < 0 && errno == EAGAIN) {
					struct pollfd q[2] = { { .fd = fds[!i], .events = POLLOUT },
					                       { .fd = f->wake[0], .events = POLLIN } };
					if ((poll(q, 2, -1) < 0 && errno != EINTR) || q[1].revents)
						break;
					continue;
				}
				if (w < 0 && errno == EINTR)
					continue;
				if (w <= 0)
					break;
				s += w;
				n -= w;
			}
			if (n > 0)
				open[0] = open[1] = false;
		}
	}
	close(c->outer);
	close(c->inner);
	free(c);
	pthread_mutex_lock(&f->lock);
	if (--f->conns == 0)
		pthread_cond_broadcast(&f->idle);
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

/* One accepted connection: its inner side, then a relay. A port nothing
 * listens on inside closes the outer side at once. */
static void serve(nsbox_forward *f, int outer)
{
	int inner = -1;
	if (sandbox_connect_port(f->sb, f->port, &inner, NULL) < 0) {
		close(outer);
		return;
	}
	conn *c = malloc(sizeof(*c));
	pthread_mutex_lock(&f->lock);
	bool room = c && !f->stop && f->conns < FORWARD_CONNS_MAX;
	if (room)
		f->conns++;
	pthread_mutex_unlock(&f->lock);
	pthread_t t;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (room) {
		*c = (conn){ f, outer, inner };
		if (pthread_create(&t, &at, relay, c) == 0) {
			pthread_attr_destroy(&at);
			return;
		}
		pthread_mutex_lock(&f->lock);
		if (--f->conns == 0)
			pthread_cond_broadcast(&f->idle);
		pthread_mutex_unlock(&f->lock);
	}
	pthread_attr_destroy(&at);
	free(c);
	close(outer);
	close(inner);
}

static void *accept_loop(void *arg)
{
	nsbox_forward *f = arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		struct pollfd p[2] = { { .fd = f->listen_fd, .events = POLLIN }, { .fd = f->wake[0], .events = POLLIN } };
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		int c = accept4(f->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (c >= 0)
			serve(f, c);
	}
	return NULL;
}

/* host_addr: an IPv4 or IPv6 literal. */
static int listen_on(const char *host_addr, uint16_t host_port, uint16_t *bound, nsbox_error **err)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t len;
	struct sockaddr_in *a4 = (struct sockaddr_in *) &ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *) &ss;
	if (inet_pton(AF_INET, host_addr, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons(host_port);
		len = sizeof(*a4);
	} else if (inet_pton(AF_INET6, host_addr, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(host_port);
		len = sizeof(*a6);
	} else {
		return nsbox_err_invalid(err, "network", "publish: '%s' is not an IP address", host_addr);
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *) &ss, len) < 0 || listen(fd, 64) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return nsbox_err(err, e, "network", "publish: listen on %s%s%s:%u", ss.ss_family == AF_INET6 ? "[" : "",
		                 host_addr, ss.ss_family == AF_INET6 ? "]" : "", (unsigned) host_port);
	}
	union {
		struct sockaddr_storage ss;
		struct sockaddr_in in;
		struct sockaddr_in6 in6;
	} got;
	memset(&got, 0, sizeof(got));
	socklen_t gl = sizeof(got);
	if (getsockname(fd, (struct sockaddr *) &got.ss, &gl) == 0)
		*bound = ntohs(got.ss.ss_family == AF_INET ? got.in.sin_port : got.in6.sin6_port);
	return fd;
}

int nsbox_forward_start(nsbox_sandbox *sb, const char *host_addr, uint16_t host_port, uint16_t port,
                        nsbox_forward **out, uint16_t *bound, nsbox_error **err)
{
	if (!sb || !out || port == 0)
		return nsbox_err(err, EINVAL, "network", "publish: missing argument or port 0");
	if (sb->remote) {
		/* The monitor forwards; the port stays published while the
		 * sandbox runs (this handle only tells which). */
		nsbox_forward *f = calloc(1, sizeof(*f));
		if (!f)
			return nsbox_err(err, ENOMEM, "network", "publish");
		uint16_t b = 0;
		int r = remote_expose(sb, host_addr, host_port, port, &b, err);
		if (r < 0) {
			free(f);
			return r;
		}
		f->sb = sb;
		f->port = port;
		f->host_port = b;
		f->listen_fd = f->wake[0] = f->wake[1] = -1;
		if (bound)
			*bound = b;
		*out = f;
		return 0;
	}
	if (!sandbox_config(sb))
		return nsbox_err_invalid(err, "network", "publish: not a long-lived sandbox (NSBOX_SPAWN_KEEP)");
	nsbox_forward *f = calloc(1, sizeof(*f));
	if (!f)
		return nsbox_err(err, ENOMEM, "network", "publish");
	f->sb = sb;
	f->port = port;
	f->wake[0] = f->wake[1] = -1;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->idle, NULL);
	uint16_t b = host_port;
	f->listen_fd = listen_on(host_addr ? host_addr : "127.0.0.1", host_port, &b, err);
	int r = f->listen_fd < 0 ? f->listen_fd : 0;
	if (r == 0 && pipe2(f->wake, O_CLOEXEC) < 0)
		r = nsbox_err(err, errno, "network", "publish");
	if (r == 0 && (r = -pthread_create(&f->thread, NULL, accept_loop, f)) < 0)
		(void) nsbox_err(err, -r, "network", "publish: start the forwarder");
	f->started = r == 0;
	if (r < 0) {
		nsbox_forward_free(f);
		return r;
	}
	f->host_port = b;
	if (bound)
		*bound = b;
	*out = f;
	return 0;
}

uint16_t nsbox_forward_host_port(const nsbox_forward *f) { return f ? f->host_port : 0; }
uint16_t nsbox_forward_port(const nsbox_forward *f) { return f ? f->port : 0; }

void nsbox_forward_free(nsbox_forward *f)
{
	if (!f)
		return;
	if (f->sb && f->sb->remote) {
		free(f);
		return;
	}
	pthread_mutex_lock(&f->lock);
	f->stop = true;
	pthread_mutex_unlock(&f->lock);
	if (f->wake[1] >= 0)
		(void) !write(f->wake[1], "s", 1);
	if (f->started)
		pthread_join(f->thread, NULL);
	/* Every relay sees the wake pipe too, and ends. */
	pthread_mutex_lock(&f->lock);
	while (f->conns)
		pthread_cond_wait(&f->idle, &f->lock);
	pthread_mutex_unlock(&f->lock);
	if (f->listen_fd >= 0)
		close(f->listen_fd);
	for (int i = 0; i < 2; i++)
		if (f->wake[i] >= 0)
			close(f->wake[i]);
	pthread_cond_destroy(&f->idle);
	pthread_mutex_destroy(&f->lock);
	free(f);
}
