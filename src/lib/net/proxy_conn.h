/* The allowlist proxy's connections (proxy.c), shared with proxy_relay.c,
 * which moves their bytes once the destination is connected. */
#ifndef NSBOX_NET_PROXY_CONN_H
#define NSBOX_NET_PROXY_CONN_H

#include <netdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/proxy.h"

#define RELAY_BUF 65536

enum cstate { C_HEAD, C_RESOLVE, C_CONNECT, C_SNIFF, C_RELAY, C_LINGER };

typedef struct pbuf {
	char *data;
	size_t off, len;
	bool eof, shut;
	bool bounded;    /* only `left` more bytes go through; the rest is dropped */
	uint64_t left;
} pbuf;

typedef struct lookup {
	pthread_mutex_t mu;
	bool abandoned, done;
	int rc, efd;
	struct addrinfo *res;
	char host[256], port[8];
} lookup;

typedef struct conn conn;
typedef struct watch {
	conn *c;
	int which;   /* 0 client, 1 server, 2 lookup */
} watch;

struct conn {
	proxy *px;
	int cfd, sfd;
	enum cstate st;
	uint64_t since;
	char head[PROXY_HEAD_MAX];
	size_t hlen;
	proxy_req req;
	lookup *lk;
	struct addrinfo *ai, *next_ai;
	bool tried;            /* an address passed the check and was tried */
	char refused[160];     /* why an address was not, for the record */
	pbuf up, down;   /* client -> server, server -> client */
	watch w[3];
	conn *prev, *next;
};

struct proxy {
	int ep, lfd, tfd;
	strv allow;
	conn *conns;
	size_t n_conns;
	proxy_log allowed, denied;
};

/* proxy.c: count a destination as allowed or denied (reason: why); stop
 * the connection; watch `which` (0 client, 1 server, 2 lookup) of it on
 * fd for events (0: none). */
void proxy_count(proxy_log *l, const proxy_req *r, const char *reason);
void proxy_conn_close(conn *c);
void proxy_set_watch(conn *c, int which, int fd, uint32_t events);

/* proxy_relay.c: a relay buffer's memory (false: out of memory); n bytes
 * queued in it; a relaying connection's next step; a tunnel's, while its
 * first bytes are held (it goes on to relay once they pass). */
bool proxy_pbuf_alloc(pbuf *b);
void proxy_queue(pbuf *b, const char *data, size_t n);
void proxy_relay(conn *c);
void proxy_sniff(conn *c);

#endif
