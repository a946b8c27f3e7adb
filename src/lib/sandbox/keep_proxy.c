/* A long-lived sandbox's allowlist proxy (--allow-host with nsbox start):
 * the listening socket its setup made inside arrives before the keeper
 * says it is ready; a thread of the supervisor (the monitor) serves it
 * for the sandbox's life, as a one-shot run's supervisor serves it from
 * its event loop. An exec's record names what the proxy let through and
 * refused while the exec ran (by anything in the sandbox: the proxy sees
 * connections, not processes). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "sandbox/sandbox.h"

struct keep_proxy {
	pthread_t thread;
	pthread_mutex_t lock;   /* the proxy, against a copy of its logs */
	proxy *px;
	int stop_fd;            /* eventfd: readable when the thread must end */
};

static void *serve(void *arg)
{
	keep_proxy *k = arg;
	struct pollfd p[2] = { { .fd = proxy_fd(k->px), .events = POLLIN }, { .fd = k->stop_fd, .events = POLLIN } };
	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		if (p[0].revents) {
			pthread_mutex_lock(&k->lock);
			proxy_dispatch(k->px);
			pthread_mutex_unlock(&k->lock);
		}
	}
	return NULL;
}

int keep_proxy_start(nsbox_sandbox *sb, int listen_fd)
{
	keep_proxy *k = calloc(1, sizeof(*k));
	if (!k) {
		close(listen_fd);
		return -ENOMEM;
	}
	k->px = proxy_new(listen_fd, &sb->plan->allow);
	k->stop_fd = eventfd(0, EFD_CLOEXEC);
	int r = !k->px ? -ENOMEM : k->stop_fd < 0 ? -errno : 0;
	if (r == 0) {
		pthread_mutex_init(&k->lock, NULL);
		r = -pthread_create(&k->thread, NULL, serve, k);
		if (r < 0)
			pthread_mutex_destroy(&k->lock);
	}
	if (r < 0) {
		if (k->px)
			proxy_finish(k->px, NULL, NULL);
		if (k->stop_fd >= 0)
			close(k->stop_fd);
		free(k);
		return r;
	}
	sb->keep_proxy = k;
	return 0;
}

void keep_proxy_logs(nsbox_sandbox *sb, proxy_log *allowed, proxy_log *denied)
{
	keep_proxy *k = sb->keep_proxy;
	*allowed = *denied = (proxy_log){ 0 };
	if (!k)
		return;
	pthread_mutex_lock(&k->lock);
	proxy_logs(k->px, allowed, denied);
	pthread_mutex_unlock(&k->lock);
}

void keep_proxy_stop(nsbox_sandbox *sb, proxy_log *allowed, proxy_log *denied)
{
	keep_proxy *k = TAKE_PTR(sb->keep_proxy);
	if (!k)
		return;
	(void) eventfd_write(k->stop_fd, 1);
	pthread_join(k->thread, NULL);
	pthread_mutex_destroy(&k->lock);
	close(k->stop_fd);
	proxy_finish(k->px, allowed, denied);
	free(k);
}
