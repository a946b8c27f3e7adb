/* The allowlist proxy's pure part: request heads and the allowlist. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "proxy.h"

size_t proxy_head_len(const char *data, size_t len)
{
	for (size_t i = 3; i < len; i++)
		if (data[i] == '\n' && data[i - 1] == '\r' && data[i - 2] == '\n' && data[i - 3] == '\r')
			return i + 1;
	return 0;
}

void proxy_req_clear(proxy_req *r)
{
	free(r->head);
	*r = (proxy_req){ 0 };
}

/* Anything inet_aton takes ("127.1", "2130706433", "0x7f.1") is an
 * address to getaddrinfo too, so it counts as a literal. */
static bool ip_literal(const char *host)
{
	struct in_addr a4;
	struct in6_addr a6;
	return inet_aton(host, &a4) || inet_pton(AF_INET6, host, &a6) == 1;
}

/* host[:port] (or [v6]:port) into r->host and r->port. */
static int parse_authority(const char *s, size_t n, unsigned default_port, proxy_req *r, const char **why)
{
	const char *host = s, *port = NULL;
	size_t hn;
	if (n && s[0] == '[') {
		const char *close = memchr(s, ']', n);
		if (!close)
			return *why = "unterminated IPv6 address", -EINVAL;
		host = s + 1;
		hn = (size_t) (close - host);
		if (close + 1 < s + n) {
			if (close[1] != ':')
				return *why = "bad authority", -EINVAL;
			port = close + 2;
		}
	} else {
		const char *colon = memchr(s, ':', n);
		hn = colon ? (size_t) (colon - s) : n;
		port = colon ? colon + 1 : NULL;
	}
	if (hn == 0 || hn >= sizeof(r->host))
		return *why = "bad host name", -EINVAL;
	for (size_t i = 0; i < hn; i++) {
		unsigned char c = (unsigned char) host[i];
		if (!(isalnum(c) || c == '-' || c == '.' || (s[0] == '[' && c == ':')))
			return *why = "bad host name", -EINVAL;
		r->host[i] = (char) tolower(c);
	}
	r->host[hn] = '\0';
	if (hn > 1 && r->host[hn - 1] == '.')
		r->host[hn - 1] = '\0';
	unsigned long p = default_port;
	if (port) {
		char *end;
		size_t pn = (size_t) (s + n - port);
		char num[8];
		if (pn == 0 || pn >= sizeof(num))
			return *why = "bad port", -EINVAL;
		memcpy(num, port, pn);
		num[pn] = '\0';
		p = strtoul(num, &end, 10);
		if (*end || !isdigit((unsigned char) num[0]))
			return *why = "bad port", -EINVAL;
	}
	if (p == 0 || p > 65535)
		return *why = "bad port", -EINVAL;
	r->port = (unsigned) p;
	r->ip_literal = ip_literal(r->host);
	return 0;
}

static bool hop_header(const char *line, size_t n)
{
	static const char *const hop[] = { "connection:", "keep-alive:", "proxy-connection:",
	                                   "proxy-authorization:", "proxy-authenticate:" };
	for (size_t i = 0; i < sizeof(hop) / sizeof(*hop); i++) {
		size_t l = strlen(hop[i]);
		if (n >= l && !strncasecmp(line, hop[i], l))
			return true;
	}
	return false;
}

/* The headers (from `h` to the blank line): checked, and for plain HTTP
 * copied to the origin's head without the hop-by-hop ones. */
static int headers(const char *h, const char *end, buf *out, bool *has_host, const char **why)
{
	while (h < end) {
		const char *eol = memchr(h, '\r', (size_t) (end - h));
		if (!eol || eol + 1 >= end || eol[1] != '\n')
			return *why = "bad line ending", -EINVAL;
		size_t n = (size_t) (eol - h);
		if (n == 0)
			return 0;   /* the blank line */
		if (h[0] == ' ' || h[0] == '\t' || !memchr(h, ':', n))
			return *why = "bad header line", -EINVAL;
		for (size_t i = 0; i < n; i++)
			if ((unsigned char) h[i] < 0x20 && h[i] != '\t')
				return *why = "control character in a header", -EINVAL;
		if (n >= 5 && !strncasecmp(h, "host:", 5))
			*has_host = true;
		if (out && !hop_header(h, n))
			buf_printf(out, "%.*s\r\n", (int) n, h);
		h = eol + 2;
	}
	return *why = "incomplete head", -EINVAL;
}

int proxy_parse(const char *head, size_t len, proxy_req *r, const char **why)
{
	*r = (proxy_req){ 0 };
	const char *end = head + len, *eol = memchr(head, '\r', len);
	if (!eol || eol + 1 >= end || eol[1] != '\n')
		return *why = "bad request line", -EINVAL;
	const char *sp1 = memchr(head, ' ', (size_t) (eol - head));
	const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t) (eol - sp1 - 1)) : NULL;
	if (!sp1 || !sp2 || sp1 == head || sp2 == sp1 + 1 || (size_t) (eol - sp2 - 1) != 8 ||
	    strncmp(sp2 + 1, "HTTP/1.", 7) || (sp2[8] != '0' && sp2[8] != '1'))
		return *why = "bad request line", -EINVAL;
	for (const char *c = head; c < eol; c++)
		if ((unsigned char) *c <= 0x20 && *c != ' ')
			return *why = "bad request line", -EINVAL;
	size_t mlen = (size_t) (sp1 - head);
	const char *target = sp1 + 1;
	size_t tlen = (size_t) (sp2 - target);
	bool has_host = false;
	if (mlen == 7 && !memcmp(head, "CONNECT", 7)) {
		r->connect = true;
		if (parse_authority(target, tlen, 0, r, why) < 0)
			return -EINVAL;
		return headers(eol + 2, end, NULL, &has_host, why);
	}
	if (tlen < 7 || strncasecmp(target, "http://", 7))
		return *why = strncasecmp(target, "https://", 8) ? "only absolute http:// targets and CONNECT are served"
		                                                  : "use CONNECT for https", -EINVAL;
	const char *auth = target + 7;
	size_t alen = strcspn(auth, "/?# ");
	if (memchr(auth, '@', alen))
		return *why = "user information in the target", -EINVAL;
	if (parse_authority(auth, alen, 80, r, why) < 0)
		return -EINVAL;
	const char *path = auth + alen;
	size_t plen = (size_t) (sp2 - path);
	buf b = { 0 };
	buf_printf(&b, "%.*s %s%.*s HTTP/1.%c\r\n", (int) mlen, head, *path == '/' ? "" : "/", (int) plen, path, sp2[8]);
	if (headers(eol + 2, end, &b, &has_host, why) < 0) {
		buf_free(&b);
		return -EINVAL;
	}
	if (!has_host)
		buf_printf(&b, "Host: %.*s\r\n", (int) alen, auth);
	buf_puts(&b, "Connection: close\r\n\r\n");
	r->head_len = b.len;
	r->head = buf_steal(&b);
	if (!r->head)
		return *why = "out of memory", -ENOMEM;
	return 0;
}

bool proxy_allowed(const strv *allow, const char *host, unsigned port)
{
	bool literal = ip_literal(host);
	size_t hl = strlen(host);
	for (size_t i = 0; i < allow->n; i++) {
		const char *e = allow->v[i], *colon = strrchr(e, ':');
		size_t el = colon ? (size_t) (colon - e) : strlen(e);
		if (colon ? strtoul(colon + 1, NULL, 10) != port : (port != 80 && port != 443))
			continue;
		if (el > 2 && e[0] == '*' && e[1] == '.') {
			/* "*.example.com": names below it, never an address. */
			size_t sl = el - 1;   /* ".example.com" */
			if (!literal && hl > sl && !strncasecmp(host + hl - sl, e + 1, sl))
				return true;
			continue;
		}
		if (el == hl && !strncasecmp(host, e, el))
			return true;
	}
	return false;
}
