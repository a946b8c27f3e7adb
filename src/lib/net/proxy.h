/* The allowlist proxy (--allow-host, network.allow): the supervisor accepts
 * connections on a listening socket that the sandbox's setup created in the
 * sandbox's own network namespace (127.0.0.1:3128 inside) and passed out,
 * so the sandbox reaches it without any route to the outside. It serves
 * HTTP CONNECT and plain HTTP to allowed names only, resolving them itself.
 *
 * The pure parts: proxy_http.c (request heads, the allowlist), proxy_addr.c
 * (which resolved addresses may be reached), proxy_tls.c (a tunnel's TLS
 * server name), proxy_log.c (the record's bounded lists); proxy.c holds
 * the connections. */
#ifndef NSBOX_PROXY_H
#define NSBOX_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/strv.h"

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
	uint64_t body_len;     /* plain HTTP: the body that follows (Content-Length) */
} proxy_req;

/* Parse a complete request head (through the blank line). 0, or -EINVAL
 * with *why saying what is wrong (for the 400 answer), or -EACCES when the
 * Host header names another destination than the request (for a 403).
 * A Host header must agree with the target; HTTP/1.1 needs one (HTTP/1.0
 * gets the target's); Transfer-Encoding and a second Host or
 * Content-Length are refused, so that the proxy and the origin agree on
 * where the request goes and where it ends. */
int proxy_parse(const char *head, size_t len, proxy_req *r, const char **why);
void proxy_req_clear(proxy_req *r);

/* Whether host:port is allowed: an entry is a name (exact, or "*.suffix"
 * for names below suffix), an IPv4 address or a bracketed IPv6 one, with
 * an optional ":port"; without a port it allows 80 and 443. An IP literal
 * must be listed as such (an IPv6 one in any spelling). */
bool proxy_allowed(const strv *allow, const char *host, unsigned port);

/* An allowlist entry: host (brackets stripped from an IPv6 address) and
 * port (0: none given, meaning 80 and 443). false if malformed. */
bool proxy_entry_split(const char *entry, const char **host, size_t *host_len, unsigned *port);
bool proxy_entry_port(unsigned entry_port, unsigned port);

struct sockaddr;
/* NULL for an address the proxy may connect to for an allowed name, else
 * what it is ("loopback", "private", "link-local", ...): an address on
 * the supervisor's side, refused unless listed itself (proxy_addr_listed). */
const char *proxy_addr_class(const struct sockaddr *sa);
bool proxy_addr_listed(const strv *allow, const struct sockaddr *sa, unsigned port);
/* NULL when the kernel routes the address off this host (a unicast route
 * in the caller's network namespace), else why not ("this host's own":
 * the host's public addresses too). A failed lookup is not NULL. */
const char *proxy_addr_route(const struct sockaddr *sa);
void proxy_addr_str(const struct sockaddr *sa, char *out, size_t size);

/* The first TLS record of a tunnel, if it is a ClientHello: 1 with the
 * server name (lowercased, NUL-terminated) in sni, 0 when it names none,
 * -EAGAIN when more bytes are needed, -EPROTO when it is not a TLS
 * handshake at all, -EINVAL when it is a malformed or fragmented one, and
 * -EPERM when it offers Encrypted Client Hello (whose inner name is
 * hidden). Bounds-checked throughout: the bytes are the payload's. */
int proxy_tls_sni(const uint8_t *data, size_t len, char *sni, size_t sni_size);

/* Whether a tunnel's first bytes start an HTTP request: 1 yes, 0 no,
 * -EAGAIN when too few to tell. */
int proxy_sniff_http(const char *data, size_t len);

/* The length of the head in buf (through "\r\n\r\n"), or 0 if incomplete. */
size_t proxy_head_len(const char *data, size_t len);

typedef struct proxy_dest {
	char *name;            /* "host:port" */
	char *reason;          /* why it was refused (the first time), or NULL */
	uint64_t count;
} proxy_dest;

/* Destinations with counts: at most PROXY_LOG_MAX distinct ones, and how
 * many requests went to others (the payload chooses them: bounded). */
#define PROXY_LOG_MAX 256
typedef struct proxy_log {
	proxy_dest *v;
	size_t n;
	uint64_t other;
	uint16_t *slots;       /* hash index into v, 1-based */
} proxy_log;

void proxy_log_count(proxy_log *l, const char *name, const char *reason);
/* The same, count times over. */
void proxy_log_add(proxy_log *l, const char *name, const char *reason, uint64_t count);
void proxy_log_free(proxy_log *l);
/* A copy of src (as bounded as src). */
void proxy_log_copy(const proxy_log *src, proxy_log *dst);
/* What was counted in now since before (a copy of an earlier now): each
 * destination whose count grew, with the difference. */
void proxy_log_since(const proxy_log *now, const proxy_log *before, proxy_log *out);

typedef struct proxy proxy;

/* Take the listening socket; allow is copied. NULL on allocation failure. */
proxy *proxy_new(int listen_fd, const strv *allow);
/* The fd to watch for readiness (an epoll set of the proxy's own). */
int proxy_fd(const proxy *px);
/* Serve whatever is ready, without blocking. */
void proxy_dispatch(proxy *px);
/* Copies of what was allowed and denied so far. */
void proxy_logs(const proxy *px, proxy_log *allowed, proxy_log *denied);
/* Close every connection and hand over what was allowed and denied. */
void proxy_finish(proxy *px, proxy_log *allowed, proxy_log *denied);

#endif
