/* The allowlist proxy (--allow-host, network.allow): the supervisor accepts
 * connections on a listening socket that the sandbox's setup created in the
 * sandbox's own network namespace (127.0.0.1:3128 inside) and passed out,
 * so the sandbox reaches it without any route to the outside. It serves
 * HTTP CONNECT and plain HTTP to allowed names only, resolving them itself.
 *
 * proxy_http.c holds the pure part (request parsing, allowlist matching),
 * proxy.c the connections. */
#ifndef NSBOX_PROXY_H
#define NSBOX_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strv.h"

#define PROXY_PORT 3128
#define PROXY_URL "http://127.0.0.1:3128"
#define PROXY_HEAD_MAX 16384   /* a request head larger than this is refused */

typedef struct proxy_req {
	bool connect;          /* CONNECT host:port, else plain HTTP */
	bool ip_literal;
	char host[256];        /* lowercased, no brackets, no trailing dot */
	unsigned port;
	char *head;            /* plain HTTP: the head to send to the origin */
	size_t head_len;
} proxy_req;

/* Parse a complete request head (through the blank line). 0, or -EINVAL
 * with *why saying what is wrong (for the 400 answer). */
int proxy_parse(const char *head, size_t len, proxy_req *r, const char **why);
void proxy_req_clear(proxy_req *r);

/* Whether host:port is allowed: an entry is a name (exact, or "*.suffix"
 * for names below suffix) with an optional ":port"; without a port it
 * allows 80 and 443. An IP literal must be listed as such. */
bool proxy_allowed(const strv *allow, const char *host, unsigned port);

/* The length of the head in buf (through "\r\n\r\n"), or 0 if incomplete. */
size_t proxy_head_len(const char *data, size_t len);

typedef struct proxy_dest {
	char *name;            /* "host:port" */
	uint64_t count;
} proxy_dest;

typedef struct proxy proxy;

/* Take the listening socket; allow is copied. NULL on allocation failure. */
proxy *proxy_new(int listen_fd, const strv *allow);
/* The fd to watch for readiness (an epoll set of the proxy's own). */
int proxy_fd(const proxy *px);
/* Serve whatever is ready, without blocking. */
void proxy_dispatch(proxy *px);
/* Close every connection and hand over what was allowed and denied. */
void proxy_finish(proxy *px, proxy_dest **allowed, size_t *n_allowed, proxy_dest **denied, size_t *n_denied);
void proxy_dests_free(proxy_dest *v, size_t n);

#endif
