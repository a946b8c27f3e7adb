/* The allowlist proxy's pure part: request heads and the allowlist. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "net/proxy.h"

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
	/* A name has no empty label ("a..b", ".a", "a.."): DNS has none, and
	 * after the trailing dot of a fully qualified name goes, what is
	 * checked must be what the origin reads in the Host we send. */
	if (s[0] != '[' && (r->host[0] == '.' || strstr(r->host, "..")))
		return *why = "bad host name", -EINVAL;
	/* Brackets hold an IPv6 address (RFC 3986's IP-literal), never a
	 * name: "[a.test]" is no way to spell a.test. */
	struct in6_addr a6;
	if (s[0] == '[' && inet_pton(AF_INET6, r->host, &a6) != 1)
		return *why = "bad IPv6 address", -EINVAL;
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
	/* Hop-by-hop: this connection's, not the origin's. Upgrade goes too:
	 * the relay ends with the request, so no protocol switch can follow.
	 * And the fields by which proxies tell an origin which host a request
	 * was for: some origins and frameworks route by them, so they would
	 * name another tenant past the Host check. */
	static const char *const hop[] = { "connection:", "keep-alive:", "proxy-connection:", "proxy-authorization:",
	                                   "proxy-authenticate:", "upgrade:", "te:", "trailer:",
	                                   "forwarded:", "x-forwarded-host:", "x-forwarded-server:", "x-host:",
	                                   "x-original-host:" };
	for (size_t i = 0; i < sizeof(hop) / sizeof(*hop); i++) {
		size_t l = strlen(hop[i]);
		if (n < l)
			continue;
		/* Some servers (CGI, PHP, WSGI) read "_" as "-": so do we. */
		size_t k = 0;
		while (k < l && (tolower((unsigned char) line[k]) == hop[i][k] || (line[k] == '_' && hop[i][k] == '-')))
			k++;
		if (k == l)
			return true;
	}
	return false;
}

/* RFC 9110 token characters: what a field name is made of. */
static bool tchar(unsigned char c)
{
	return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

typedef struct head_fields {
	unsigned n_host, n_length, n_te;
	const char *host, *length;   /* values, without surrounding blanks */
	size_t host_len, length_len;
} head_fields;

/* The field name (n bytes) is `name` once "_" is read as "-", as some
 * servers read it, but not spelt so: refused for the fields that decide
 * where a request goes and where it ends. */
static bool underscore_spelling(const char *h, size_t n, const char *name)
{
	if (n != strlen(name) || !memchr(h, '_', n))
		return false;
	for (size_t i = 0; i < n; i++)
		if (tolower((unsigned char) h[i]) != name[i] && !(h[i] == '_' && name[i] == '-'))
			return false;
	return true;
}

static bool field(const char *h, size_t n, const char *name, const char **v, size_t *vl)
{
	size_t l = strlen(name);
	if (n <= l || h[l] != ':' || strncasecmp(h, name, l))
		return false;
	const char *s = h + l + 1, *e = h + n;
	while (s < e && (*s == ' ' || *s == '\t'))
		s++;
	while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	*v = s;
	*vl = (size_t) (e - s);
	return true;
}

/* The headers (from `h` to the blank line): checked, and for plain HTTP
 * copied to the origin's head without the hop-by-hop ones. The fields
 * that decide where a request goes and where it ends are collected:
 * an origin must not see a Host or a framing that the proxy did not. */
static int headers(const char *h, const char *end, buf *out, head_fields *f, const char **why)
{
	while (h < end) {
		const char *eol = memchr(h, '\r', (size_t) (end - h));
		if (!eol || eol + 1 >= end || eol[1] != '\n')
			return *why = "bad line ending", -EINVAL;
		size_t n = (size_t) (eol - h);
		if (n == 0)
			return 0;   /* the blank line */
		size_t name = 0;
		while (name < n && tchar((unsigned char) h[name]))
			name++;
		/* No blank before the colon ("Host : x" is a Host to some servers
		 * and not to others), no folding, no empty name. */
		if (name == 0 || name == n || h[name] != ':')
			return *why = "bad header line", -EINVAL;
		for (size_t i = 0; i < n; i++)
			if (((unsigned char) h[i] < 0x20 && h[i] != '\t') || h[i] == 0x7f)
				return *why = "control character in a header", -EINVAL;
		const char *v;
		size_t vl;
		if (underscore_spelling(h, name, "host") || underscore_spelling(h, name, "content-length") ||
		    underscore_spelling(h, name, "transfer-encoding"))
			return *why = "a Host or framing header spelt with '_'", -EINVAL;
		if (field(h, n, "host", &v, &vl)) {
			f->n_host++;
			f->host = v;
			f->host_len = vl;
		} else if (field(h, n, "content-length", &v, &vl)) {
			f->n_length++;
			f->length = v;
			f->length_len = vl;
		} else if (field(h, n, "transfer-encoding", &v, &vl)) {
			f->n_te++;
		}
		if (out && !hop_header(h, n))
			buf_printf(out, "%.*s\r\n", (int) n, h);
		h = eol + 2;
	}
	return *why = "incomplete head", -EINVAL;
}

/* The Host header against the request's own authority: the same name
 * (case aside) and port. Without a port it means the scheme's default;
 * for CONNECT, which has no scheme, the name alone must agree. */
static int check_host(const head_fields *f, const proxy_req *r, const char **why)
{
	if (f->n_host > 1)
		return *why = "more than one Host header", -EINVAL;
	if (f->n_host == 0)
		return 0;
	proxy_req h = { 0 };
	const char *ignored;
	if (parse_authority(f->host, f->host_len, r->connect ? r->port : 80, &h, &ignored) < 0)
		return *why = "bad Host header", -EINVAL;
	if (strcmp(h.host, r->host) || h.port != r->port)
		return *why = "the Host header names another destination than the request", -EACCES;
	return 0;
}

/* How the request body ends, so that nothing after it reaches the origin
 * (a second, pipelined request would go to the origin unchecked).
 * Transfer-Encoding is refused: with Content-Length beside it, proxy and
 * origin may frame the body differently (request smuggling); alone, its
 * chunks would have to be parsed to find the end. */
static int body_length(const head_fields *f, proxy_req *r, const char **why)
{
	if (f->n_te)
		return *why = "Transfer-Encoding in a request is not relayed (send Content-Length)", -EINVAL;
	if (f->n_length > 1)
		return *why = "more than one Content-Length header", -EINVAL;
	r->body_len = 0;
	if (f->n_length == 0)
		return 0;
	if (f->length_len == 0 || f->length_len > 15)
		return *why = "bad Content-Length", -EINVAL;
	for (size_t i = 0; i < f->length_len; i++) {
		if (!isdigit((unsigned char) f->length[i]))
			return *why = "bad Content-Length", -EINVAL;
		r->body_len = r->body_len * 10 + (uint64_t) (f->length[i] - '0');
	}
	return 0;
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
		if (((unsigned char) *c <= 0x20 && *c != ' ') || *c == 0x7f)
			return *why = "bad request line", -EINVAL;
	for (const char *c = head; c < sp1; c++)
		if (!tchar((unsigned char) *c))
			return *why = "bad request line", -EINVAL;
	size_t mlen = (size_t) (sp1 - head);
	const char *target = sp1 + 1;
	size_t tlen = (size_t) (sp2 - target);
	bool http10 = sp2[8] == '0';
	head_fields f = { 0 };
	if (mlen == 7 && !memcmp(head, "CONNECT", 7)) {
		r->connect = true;
		if (parse_authority(target, tlen, 0, r, why) < 0)
			return -EINVAL;
		int rc = headers(eol + 2, end, NULL, &f, why);
		return rc < 0 ? rc : check_host(&f, r, why);
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
	int rc = headers(eol + 2, end, &b, &f, why);
	if (rc == 0)
		rc = check_host(&f, r, why);
	if (rc == 0)
		rc = body_length(&f, r, why);
	if (rc == 0 && f.n_host == 0 && !http10)
		rc = (*why = "no Host header (HTTP/1.1 requires one)", -EINVAL);
	if (rc < 0) {
		buf_free(&b);
		return rc;
	}
	if (f.n_host == 0) {
		bool v6 = strchr(r->host, ':') != NULL;
		buf_printf(&b, "Host: %s%s%s", v6 ? "[" : "", r->host, v6 ? "]" : "");
		if (r->port != 80)
			buf_printf(&b, ":%u", r->port);
		buf_puts(&b, "\r\n");
	}
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
	struct in6_addr h6, e6;
	bool v6 = inet_pton(AF_INET6, host, &h6) == 1;
	for (size_t i = 0; i < allow->n; i++) {
		const char *e;
		size_t el;
		unsigned ep;
		if (!proxy_entry_split(allow->v[i], &e, &el, &ep) || !proxy_entry_port(ep, port))
			continue;
		if (allow->v[i][0] == '[') {
			/* An IPv6 address, however it is spelled. */
			char lit[64];
			if (!v6 || el >= sizeof(lit))
				continue;
			memcpy(lit, e, el);
			lit[el] = '\0';
			if (inet_pton(AF_INET6, lit, &e6) == 1 && !memcmp(&h6, &e6, sizeof(h6)))
				return true;
			continue;
		}
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

int proxy_sniff_http(const char *data, size_t len)
{
	/* A method (letters), then a blank: enough of a request line for a
	 * lenient server to take it as one. */
	/* Servers skip empty lines before a request line (RFC 9112 2.2):
	 * so do we, and a long run of them is taken as HTTP (refused). */
	size_t at = 0;
	while (at < len && at < 64 && (data[at] == '\r' || data[at] == '\n' || data[at] == ' ' || data[at] == '\t'))
		at++;
	if (at >= 64)
		return 1;   /* whatever follows: servers skip any number of them */
	if (at == len)
		return -EAGAIN;
	for (size_t i = at; i < len && i <= at + 16; i++) {
		unsigned char c = (unsigned char) data[i];
		if (i > at && (c == ' ' || c == '\t'))
			return 1;
		if (!isalpha(c))
			return 0;
	}
	return len > at + 16 ? 0 : -EAGAIN;
}
