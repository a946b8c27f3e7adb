/* The allowlist proxy's connections once their destination is connected
 * (proxy.c sets them up): the bytes relayed both ways, each direction
 * half-closed once it is drained after EOF, a plain HTTP request cut at
 * its end; and a tunnel's first bytes held until they show what it
 * carries (its TLS server name, proxy_tls.c). Apart from proxy.c because
 * this is the data path, where the checks are on the bytes themselves. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "net/proxy.h"
#include "net/proxy_conn.h"

bool proxy_pbuf_alloc(pbuf *b)
{
	if (!b->data)
		b->data = malloc(RELAY_BUF);
	return b->data != NULL;
}

void proxy_queue(pbuf *b, const char *data, size_t n)
{
	size_t room = RELAY_BUF - b->len;
	n = n < room ? n : room;   /* at most a head's worth: always fits */
	memcpy(b->data + b->len, data, n);
	b->len += n;
}

/* Move what can move, in both directions; half-close a side once its
 * direction is drained after EOF; done when both are. */
static bool flow(int from, int to, pbuf *b)
{
	if (!b->eof && b->len < RELAY_BUF) {
		ssize_t n = recv(from, b->data + b->len, RELAY_BUF - b->len, 0);
		if (n > 0 && b->bounded) {
			size_t keep = (uint64_t) n < b->left ? (size_t) n : (size_t) b->left;
			b->left -= keep;
			b->len += keep;
			/* Past the request: dropped, and taken as the end of what
			 * this client says here, so the origin finishes and closes
			 * and the client opens a new connection for its next. */
			if (keep < (size_t) n)
				b->eof = true;
		} else if (n > 0)
			b->len += (size_t) n;
		else if (n == 0)
			b->eof = true;
		else if (errno != EAGAIN && errno != EINTR)
			return false;
	}
	while (b->off < b->len) {
		ssize_t n = send(to, b->data + b->off, b->len - b->off, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0)
			return false;
		b->off += (size_t) n;
	}
	if (b->off == b->len)
		b->off = b->len = 0;
	if (b->eof && b->len == 0 && !b->shut) {
		(void) shutdown(to, SHUT_WR);
		b->shut = true;
	}
	return true;
}

void proxy_relay(conn *c)
{
	if (!flow(c->cfd, c->sfd, &c->up) || !flow(c->sfd, c->cfd, &c->down) || (c->up.shut && c->down.shut)) {
		proxy_conn_close(c);
		return;
	}
	proxy_set_watch(c, 0, c->cfd, (!c->up.eof && c->up.len < RELAY_BUF ? EPOLLIN : 0) | (c->down.len ? EPOLLOUT : 0));
	proxy_set_watch(c, 1, c->sfd, (!c->down.eof && c->down.len < RELAY_BUF ? EPOLLIN : 0) | (c->up.len ? EPOLLOUT : 0));
}

/* A tunnel's first bytes are held here until they show what the tunnel
 * carries: a TLS ClientHello must name the tunnel's own host, if it names
 * any (else an allowed name of a shared server, a CDN's, would front for
 * any other tenant of it); plain HTTP is refused, as its Host, and that
 * of every request after it, would go unchecked; anything else passes
 * (it reaches the allowed address, and only it). Meanwhile the server's
 * side flows, for protocols where the server speaks first. */
void proxy_sniff(conn *c)
{
	if (!flow(c->sfd, c->cfd, &c->down)) {
		proxy_conn_close(c);
		return;
	}
	pbuf *b = &c->up;
	if (!b->eof && b->len < RELAY_BUF) {
		ssize_t n = recv(c->cfd, b->data + b->len, RELAY_BUF - b->len, 0);
		if (n > 0)
			b->len += (size_t) n;
		else if (n == 0)
			b->eof = true;
		else if (errno != EAGAIN && errno != EINTR) {
			proxy_conn_close(c);
			return;
		}
	}
	char sni[256], why[400];
	const char *deny = NULL;
	int r = b->len ? proxy_tls_sni((const uint8_t *) b->data, b->len, sni, sizeof(sni)) : (b->eof ? 0 : -EAGAIN);
	if (r == -EPROTO) {
		int h = proxy_sniff_http(b->data, b->len);
		r = h == 1 ? -EPROTO : h == -EAGAIN && !b->eof ? -EAGAIN : 0;
	}
	if (r == -EAGAIN && !b->eof && b->len < RELAY_BUF) {
		if (c->down.shut) {
			proxy_conn_close(c);
			return;
		}
		proxy_set_watch(c, 0, c->cfd, EPOLLIN | (c->down.len ? EPOLLOUT : 0));
		proxy_set_watch(c, 1, c->sfd, !c->down.eof && c->down.len < RELAY_BUF ? EPOLLIN : 0);
		return;
	}
	if (r == -EPROTO)
		deny = "plain HTTP in a tunnel (ask the proxy for http:// URLs directly)";
	else if (r == -EAGAIN || r == -EINVAL)
		deny = "a malformed, incomplete or fragmented TLS ClientHello in the tunnel";
	else if (r == -EPERM)
		deny = "TLS Encrypted Client Hello in the tunnel (it hides the server name)";
	else if (r == 1 && strcmp(sni, c->req.host)) {
		snprintf(why, sizeof(why), "TLS server name '%s' in the tunnel is not its host", sni);
		deny = why;
	}
	if (deny) {
		proxy_count(&c->px->denied, &c->req, deny);
		proxy_conn_close(c);   /* the tunnel was answered: nothing to say but closing it */
		return;
	}
	c->st = C_RELAY;
	proxy_relay(c);
}
