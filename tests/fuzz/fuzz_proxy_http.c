/* The allowlist proxy's request heads (a sandbox's bytes) and allowlist
 * matching. The input is a request head, then, after the blank line that
 * ends it, allowlist entries one per line (those nsbox_config_set accepts
 * for network.allow, as a policy would give them).
 *
 * What a parsed plain-HTTP request is relayed as must be unambiguous to
 * the origin: one Host header, naming what the proxy checked; no
 * Transfer-Encoding, at most one Content-Length (the body the proxy
 * counted); no hop-by-hop or routing fields; lines without stray CR/LF. */
#include <ctype.h>
#include <errno.h>
#include <strings.h>
#include <string.h>

#include "fuzz.h"
#include "nsbox.h"
#include "net/proxy.h"

static bool has_prefix_ci(const char *line, size_t n, const char *name)
{
	size_t l = strlen(name);
	return n >= l && !strncasecmp(line, name, l);
}

/* A field name as servers that read '_' as '-' see it (CGI, PHP, WSGI). */
static bool is_field(const char *line, size_t n, const char *name)
{
	size_t l = strlen(name);
	if (n < l)
		return false;
	for (size_t i = 0; i < l; i++) {
		char c = (char) tolower((unsigned char) line[i]);
		if (c != name[i] && !(c == '_' && name[i] == '-'))
			return false;
	}
	return true;
}

/* The relayed head, line by line. */
static void check_relayed(const proxy_req *r)
{
	FUZZ_CHECK(r->head && strlen(r->head) == r->head_len);
	FUZZ_CHECK(r->head_len >= 4 && !memcmp(r->head + r->head_len - 4, "\r\n\r\n", 4));
	unsigned hosts = 0, lengths = 0;
	const char *p = r->head, *end = r->head + r->head_len;
	bool first = true;
	while (p < end) {
		const char *eol = strstr(p, "\r\n");
		FUZZ_CHECK(eol);
		size_t n = (size_t) (eol - p);
		FUZZ_CHECK(!memchr(p, '\r', n) && !memchr(p, '\n', n));
		if (n == 0) {
			FUZZ_CHECK(eol + 2 == end);   /* nothing after the head */
			break;
		}
		if (first) {
			FUZZ_CHECK(p[0] != ' ' && memchr(p, ' ', n));
			first = false;
		} else if (has_prefix_ci(p, n, "host:")) {
			hosts++;
			/* The origin reads this Host: it must be what was checked. */
			const char *v = p + 5, *ve = p + n;
			while (v < ve && (*v == ' ' || *v == '\t'))
				v++;
			while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
				ve--;
			char req[PROXY_HEAD_MAX + 64];
			int rl = snprintf(req, sizeof(req), "GET http://%.*s/ HTTP/1.0\r\n\r\n", (int) (ve - v), v);
			proxy_req h;
			const char *why;
			FUZZ_CHECK(rl > 0 && (size_t) rl < sizeof(req));
			FUZZ_CHECK(proxy_parse(req, (size_t) rl, &h, &why) == 0);
			FUZZ_CHECK(!strcmp(h.host, r->host) && h.port == r->port);
			proxy_req_clear(&h);
		} else if (has_prefix_ci(p, n, "content-length:")) {
			lengths++;
			const char *v = p + 15;
			while (*v == ' ' || *v == '\t')
				v++;
			FUZZ_CHECK(strtoull(v, NULL, 10) == r->body_len);
		} else {
			static const char *const banned[] = {
				"transfer-encoding:", "keep-alive:", "upgrade:", "te:", "trailer:", "proxy-connection:",
				"proxy-authorization:", "proxy-authenticate:", "forwarded:", "x-forwarded-host:",
				"x-forwarded-server:", "x-host:", "x-original-host:" };
			for (size_t i = 0; i < sizeof(banned) / sizeof(*banned); i++)
				if (is_field(p, n, banned[i])) {
					fprintf(stderr, "relayed: '%.*s'\n", (int) n, p);
					abort();
				}
			if (has_prefix_ci(p, n, "connection:"))
				FUZZ_CHECK(n == 17 && !memcmp(p, "Connection: close", 17) && eol + 4 == end);
		}
		p = eol + 2;
	}
	FUZZ_CHECK(hosts == 1 && lengths <= 1);
	FUZZ_CHECK(lengths == 1 || r->body_len == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > PROXY_HEAD_MAX * 2)
		return 0;
	const char *text = (const char *) data;
	size_t head = proxy_head_len(text, size);
	(void) proxy_sniff_http(text, size);
	if (!head || head > PROXY_HEAD_MAX)
		return 0;
	proxy_req r;
	const char *why = NULL;
	int rc = proxy_parse(text, head, &r, &why);
	if (rc < 0) {
		FUZZ_CHECK((rc == -EINVAL || rc == -EACCES || rc == -ENOMEM) && why && *why);
		proxy_req_clear(&r);
		return 0;
	}
	FUZZ_CHECK(r.host[0] && r.port >= 1 && r.port <= 65535);
	for (const char *c = r.host; *c; c++)
		FUZZ_CHECK(!isupper((unsigned char) *c));
	if (r.connect)
		FUZZ_CHECK(!r.head);
	else
		check_relayed(&r);
	/* The allowlist after the head. */
	nsbox_config *cfg = NULL;
	FUZZ_CHECK(nsbox_config_new(&cfg, NULL) == 0);
	char *rest = fuzz_cstr(data + head, size - head);
	strv allow = { 0 };
	for (char *save = NULL, *e = strtok_r(rest, "\n", &save); e; e = strtok_r(NULL, "\n", &save))
		if (nsbox_config_set(cfg, "network.allow", e, NULL, NULL) == 0)
			FUZZ_CHECK(strv_push(&allow, e) == 0);
	bool ok = proxy_allowed(&allow, r.host, r.port);
	/* Listing the very name (not an address) with the port allows it. */
	char exact[300];
	snprintf(exact, sizeof(exact), "%s:%u", r.host, r.port);
	if (!ok && !r.ip_literal && nsbox_config_set(cfg, "network.allow", exact, NULL, NULL) == 0) {
		FUZZ_CHECK(strv_push(&allow, exact) == 0);
		FUZZ_CHECK(proxy_allowed(&allow, r.host, r.port));
	}
	strv_clear(&allow);
	free(rest);
	nsbox_config_free(cfg);
	proxy_req_clear(&r);
	return 0;
}
