/* The allowlist proxy's connections, served from the supervisor's event
 * loop: accept, read the request head, check the destination against the
 * allowlist, resolve it (in a thread: getaddrinfo blocks), check the
 * addresses (proxy_addr.c), connect to one that passed, then relay both
 * ways until each side is done. A plain HTTP connection carries the one
 * request and its body to the origin, nothing after; a tunnel's first
 * bytes are held until its TLS ClientHello, if it is one, names the
 * tunnel's host. Every destination asked for is counted as allowed or
 * denied (with why) for the result record. The relaying and the tunnel's
 * held bytes are in proxy_relay.c. */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "net/proxy.h"
#include "net/proxy_conn.h"

#define MAX_CONNS 256
#define SETUP_TIMEOUT_MS 30000   /* head, lookup and connect, each */
#define LINGER_MS 2000           /* reading what a refused client still sends */

static uint64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t) t.tv_sec * 1000 + (uint64_t) t.tv_nsec / 1000000;
}

void proxy_count(proxy_log *l, const proxy_req *r, const char *reason)
{
	char name[300];
	bool v6 = strchr(r->host, ':') != NULL;
	snprintf(name, sizeof(name), "%s%s%s:%u", v6 ? "[" : "", r->host, v6 ? "]" : "", r->port);
	proxy_log_count(l, name, reason);
}

void proxy_set_watch(conn *c, int which, int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = &c->w[which] };
	if (epoll_ctl(c->px->ep, EPOLL_CTL_MOD, fd, &ev) < 0 && errno == ENOENT)
		(void) epoll_ctl(c->px->ep, EPOLL_CTL_ADD, fd, &ev);
}

static void lookup_release(lookup *lk, bool abandon)
{
	pthread_mutex_lock(&lk->mu);
	bool mine = lk->done || !abandon;
	lk->abandoned = true;
	pthread_mutex_unlock(&lk->mu);
	if (!mine)
		return;   /* the thread frees it when it is done */
	if (lk->res)
		freeaddrinfo(lk->res);
	close(lk->efd);
	pthread_mutex_destroy(&lk->mu);
	free(lk);
}

void proxy_conn_close(conn *c)
{
	proxy *px = c->px;
	if (c->lk) {
		(void) epoll_ctl(px->ep, EPOLL_CTL_DEL, c->lk->efd, NULL);
		lookup_release(c->lk, true);
	}
	if (c->cfd >= 0)
		close(c->cfd);
	if (c->sfd >= 0)
		close(c->sfd);
	if (c->ai)
		freeaddrinfo(c->ai);
	proxy_req_clear(&c->req);
	free(c->up.data);
	free(c->down.data);
	if (c->prev)
		c->prev->next = c->next;
	else
		px->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	px->n_conns--;
	free(c);
}

/* Answer with an error and let the client read it: shut our side, then
 * drain what it still sends for a moment (closing with unread input would
 * reset the connection and lose the answer). */
static void refuse(conn *c, int code, const char *reason, const char *detail)
{
	char msg[1024];
	int body = (int) strlen(detail) + 8;
	int n = snprintf(msg, sizeof(msg),
	                 "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
	                 "Connection: close\r\n\r\nnsbox: %s\n", code, reason, body, detail);
	if (n > 0)
		(void) send(c->cfd, msg, (size_t) n < sizeof(msg) ? (size_t) n : sizeof(msg) - 1, MSG_NOSIGNAL);
	(void) shutdown(c->cfd, SHUT_WR);
	if (c->lk) {   /* a lookup that took too long: its answer is not wanted */
		(void) epoll_ctl(c->px->ep, EPOLL_CTL_DEL, c->lk->efd, NULL);
		lookup_release(c->lk, true);
		c->lk = NULL;
	}
	if (c->sfd >= 0) {
		close(c->sfd);
		c->sfd = -1;
	}
	c->st = C_LINGER;
	c->since = now_ms();
	proxy_set_watch(c, 0, c->cfd, EPOLLIN);
}

static void *lookup_thread(void *arg)
{
	lookup *lk = arg;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG };
	struct addrinfo *res = NULL;
	int rc = getaddrinfo(lk->host, lk->port, &hints, &res);
	pthread_mutex_lock(&lk->mu);
	if (lk->abandoned) {
		pthread_mutex_unlock(&lk->mu);
		if (res)
			freeaddrinfo(res);
		close(lk->efd);
		pthread_mutex_destroy(&lk->mu);
		free(lk);
		return NULL;
	}
	lk->rc = rc;
	lk->res = rc == 0 ? res : NULL;
	lk->done = true;
	uint64_t one = 1;
	(void) !write(lk->efd, &one, sizeof(one));
	pthread_mutex_unlock(&lk->mu);
	return NULL;
}

static void start_lookup(conn *c)
{
	lookup *lk = calloc(1, sizeof(*lk));
	if (!lk) {
		refuse(c, 502, "Bad Gateway", "out of memory");
		return;
	}
	pthread_mutex_init(&lk->mu, NULL);
	snprintf(lk->host, sizeof(lk->host), "%s", c->req.host);
	snprintf(lk->port, sizeof(lk->port), "%u", c->req.port);
	lk->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (lk->efd < 0 || pthread_create(&t, &attr, lookup_thread, lk) != 0) {
		pthread_attr_destroy(&attr);
		if (lk->efd >= 0)
			close(lk->efd);
		pthread_mutex_destroy(&lk->mu);
		free(lk);
		refuse(c, 502, "Bad Gateway", "cannot start the name lookup");
		return;
	}
	pthread_attr_destroy(&attr);
	c->lk = lk;
	c->st = C_RESOLVE;
	c->since = now_ms();
	(void) epoll_ctl(c->px->ep, EPOLL_CTL_DEL, c->cfd, NULL);   /* nothing to read meanwhile */
	proxy_set_watch(c, 2, lk->efd, EPOLLIN);
}

/* The next address that passes the check, connected to as it is (no
 * second lookup between the check and the connection); a 403 when the
 * name had only refused ones, a 502 once none is left. */
static void try_connect(conn *c)
{
	while (c->next_ai) {
		struct addrinfo *a = c->next_ai;
		c->next_ai = a->ai_next;
		const char *what = proxy_addr_class(a->ai_addr);
		if (!what)
			what = proxy_addr_route(a->ai_addr);
		if (what && !proxy_addr_listed(&c->px->allow, a->ai_addr, c->req.port)) {
			if (!c->refused[0]) {
				char addr[INET6_ADDRSTRLEN];
				proxy_addr_str(a->ai_addr, addr, sizeof(addr));
				snprintf(c->refused, sizeof(c->refused), "address %s is %s", addr, what);
			}
			continue;
		}
		c->tried = true;
		int fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 || errno == EINPROGRESS) {
			if (c->sfd >= 0)
				close(c->sfd);
			c->sfd = fd;
			c->st = C_CONNECT;
			c->since = now_ms();
			proxy_set_watch(c, 1, fd, EPOLLOUT);
			return;
		}
		close(fd);
	}
	char detail[512];
	if (!c->tried && c->refused[0]) {
		proxy_count(&c->px->denied, &c->req, c->refused);
		snprintf(detail, sizeof(detail), "%s:%u: %s (allow that address itself with --allow-host if it is meant)",
		         c->req.host, c->req.port, c->refused);
		refuse(c, 403, "Forbidden", detail);
		return;
	}
	snprintf(detail, sizeof(detail), "cannot connect to %s:%u", c->req.host, c->req.port);
	refuse(c, 502, "Bad Gateway", detail);
}

static void on_lookup(conn *c)
{
	lookup *lk = c->lk;
	(void) epoll_ctl(c->px->ep, EPOLL_CTL_DEL, lk->efd, NULL);
	pthread_mutex_lock(&lk->mu);
	bool done = lk->done;
	int rc = lk->rc;
	c->ai = lk->res;
	lk->res = NULL;
	pthread_mutex_unlock(&lk->mu);
	if (!done)
		return;
	lookup_release(lk, false);
	c->lk = NULL;
	if (rc != 0 || !c->ai) {
		char detail[400];
		snprintf(detail, sizeof(detail), "cannot resolve %s: %s", c->req.host, gai_strerror(rc));
		refuse(c, 502, "Bad Gateway", detail);
		return;
	}
	c->next_ai = c->ai;
	try_connect(c);
}

/* The destination is allowed and reachable: start relaying, with the
 * origin's head (plain HTTP) or the tunnel's answer (CONNECT) queued. */
static void on_connected(conn *c)
{
	int e = 0;
	socklen_t l = sizeof(e);
	if (getsockopt(c->sfd, SOL_SOCKET, SO_ERROR, &e, &l) < 0 || e) {
		try_connect(c);
		return;
	}
	if (!proxy_pbuf_alloc(&c->up) || !proxy_pbuf_alloc(&c->down)) {
		refuse(c, 502, "Bad Gateway", "out of memory");
		return;
	}
	size_t head = proxy_head_len(c->head, c->hlen), extra = c->hlen - head;
	if (c->req.connect) {
		static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
		proxy_queue(&c->down, ok, sizeof(ok) - 1);
		proxy_queue(&c->up, c->head + head, extra);   /* the tunnel's first bytes, held */
		proxy_count(&c->px->allowed, &c->req, NULL);    /* connected (denied too if proxy_sniff() says so) */
		c->st = C_SNIFF;
		return;
	}
	/* The request and its body, and nothing after it: a second request
	 * on this connection would reach the origin unchecked. */
	proxy_queue(&c->up, c->req.head, c->req.head_len);
	c->up.bounded = true;
	if (extra > c->req.body_len) {
		extra = (size_t) c->req.body_len;
		c->up.eof = true;   /* pipelined: see flow() in proxy_relay.c */
	}
	proxy_queue(&c->up, c->head + head, extra);
	c->up.left = c->req.body_len - extra;
	proxy_count(&c->px->allowed, &c->req, NULL);
	c->st = C_RELAY;
}

static void on_head(conn *c)
{
	for (;;) {
		ssize_t n = recv(c->cfd, c->head + c->hlen, sizeof(c->head) - c->hlen, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			proxy_conn_close(c);
			return;
		}
		c->hlen += (size_t) n;
		if (proxy_head_len(c->head, c->hlen))
			break;
		if (c->hlen == sizeof(c->head)) {
			refuse(c, 431, "Request Header Fields Too Large", "the request head is too large");
			return;
		}
	}
	const char *why = "bad request";
	int r = proxy_parse(c->head, proxy_head_len(c->head, c->hlen), &c->req, &why);
	if (r == -EACCES) {
		proxy_count(&c->px->denied, &c->req, why);
		refuse(c, 403, "Forbidden", why);
		return;
	}
	if (r < 0) {
		refuse(c, 400, "Bad Request", why);
		return;
	}
	if (!proxy_allowed(&c->px->allow, c->req.host, c->req.port)) {
		proxy_count(&c->px->denied, &c->req, "not allowed");
		char detail[400];
		snprintf(detail, sizeof(detail), "%s:%u is not allowed for this run (--allow-host)", c->req.host,
		         c->req.port);
		refuse(c, 403, "Forbidden", detail);
		return;
	}
	start_lookup(c);
}

static void on_linger(conn *c)
{
	char sink[4096];
	ssize_t n;
	while ((n = recv(c->cfd, sink, sizeof(sink), 0)) > 0)
		;
	if (n == 0 || (errno != EAGAIN && errno != EINTR))
		proxy_conn_close(c);
}

static void on_accept(proxy *px)
{
	for (;;) {
		int fd = accept4(px->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		conn *c = px->n_conns < MAX_CONNS ? calloc(1, sizeof(*c)) : NULL;
		if (!c) {
			close(fd);   /* too many at once */
			continue;
		}
		*c = (conn){ .px = px, .cfd = fd, .sfd = -1, .st = C_HEAD, .since = now_ms(),
		             .w = { { c, 0 }, { c, 1 }, { c, 2 } }, .next = px->conns };
		if (px->conns)
			px->conns->prev = c;
		px->conns = c;
		px->n_conns++;
		proxy_set_watch(c, 0, fd, EPOLLIN);
	}
}

/* Once a second: clients too slow to send a head, lookups and connects
 * that hang, refused clients that keep sending. */
static void on_tick(proxy *px)
{
	uint64_t tick, now = now_ms();
	(void) !read(px->tfd, &tick, sizeof(tick));
	for (conn *c = px->conns, *next; c; c = next) {
		next = c->next;
		uint64_t age = now - c->since;
		if (c->st == C_LINGER && age > LINGER_MS)
			proxy_conn_close(c);
		else if (c->st == C_HEAD && age > SETUP_TIMEOUT_MS)
			refuse(c, 408, "Request Timeout", "no complete request head in time");
		else if ((c->st == C_RESOLVE || c->st == C_CONNECT) && age > SETUP_TIMEOUT_MS)
			refuse(c, 504, "Gateway Timeout", c->st == C_RESOLVE ? "name lookup timed out" : "connect timed out");
	}
}

void proxy_dispatch(proxy *px)
{
	struct epoll_event evs[64];
	int n = epoll_wait(px->ep, evs, 64, 0);
	for (int i = 0; i < n; i++) {
		watch *w = evs[i].data.ptr;
		if (w == NULL) {
			on_accept(px);
			continue;
		}
		if (w == (watch *) px) {
			on_tick(px);
			continue;
		}
		/* An earlier event of this batch may have closed its connection:
		 * find it among the live ones before touching it. */
		conn *c = NULL;
		for (conn *x = px->conns; x && !c; x = x->next)
			if (w == &x->w[0] || w == &x->w[1] || w == &x->w[2])
				c = x;
		if (!c)
			continue;
		switch (c->st) {
		case C_HEAD:
			on_head(c);
			break;
		case C_RESOLVE:
			on_lookup(c);
			break;
		case C_CONNECT:
			if (w->which == 1)
				on_connected(c);
			if (c->st == C_RELAY)
				proxy_relay(c);
			else if (c->st == C_SNIFF)
				proxy_sniff(c);
			break;
		case C_SNIFF:
			proxy_sniff(c);
			break;
		case C_RELAY:
			proxy_relay(c);
			break;
		case C_LINGER:
			on_linger(c);
			break;
		}
	}
}

proxy *proxy_new(int listen_fd, const strv *allow)
{
	proxy *px = calloc(1, sizeof(*px));
	if (!px) {
		close(listen_fd);
		return NULL;
	}
	px->lfd = listen_fd;
	px->ep = epoll_create1(EPOLL_CLOEXEC);
	px->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	struct itimerspec its = { .it_value = { 1, 0 }, .it_interval = { 1, 0 } };
	struct epoll_event la = { .events = EPOLLIN, .data.ptr = NULL };
	struct epoll_event ta = { .events = EPOLLIN, .data.ptr = px };
	if (px->ep < 0 || px->tfd < 0 || strv_copy(&px->allow, allow) < 0 ||
	    timerfd_settime(px->tfd, 0, &its, NULL) < 0 || epoll_ctl(px->ep, EPOLL_CTL_ADD, listen_fd, &la) < 0 ||
	    epoll_ctl(px->ep, EPOLL_CTL_ADD, px->tfd, &ta) < 0) {
		proxy_finish(px, NULL, NULL);
		return NULL;
	}
	return px;
}

int proxy_fd(const proxy *px)
{
	return px->ep;
}

void proxy_logs(const proxy *px, proxy_log *allowed, proxy_log *denied)
{
	proxy_log_copy(&px->allowed, allowed);
	proxy_log_copy(&px->denied, denied);
}

void proxy_finish(proxy *px, proxy_log *allowed, proxy_log *denied)
{
	while (px->conns)
		proxy_conn_close(px->conns);
	if (px->ep >= 0)
		close(px->ep);
	if (px->tfd >= 0)
		close(px->tfd);
	close(px->lfd);
	strv_clear(&px->allow);
	if (allowed) {
		*allowed = px->allowed;
		*denied = px->denied;
	} else {
		proxy_log_free(&px->allowed);
		proxy_log_free(&px->denied);
	}
	free(px);
}
