#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/proxy.h"
#include "unit.h"

static int parse(const char *head, proxy_req *r, const char **why)
{
	*why = NULL;
	return proxy_parse(head, strlen(head), r, why);
}

START_TEST(test_head_len)
{
	ck_assert_uint_eq(proxy_head_len("GET / HTTP/1.1\r\n\r\nbody", 22), 18);
	ck_assert_uint_eq(proxy_head_len("GET / HTTP/1.1\r\nHost: a\r\n", 25), 0);
	ck_assert_uint_eq(proxy_head_len("\n\n\n\n", 4), 0);
}
END_TEST

START_TEST(test_connect)
{
	proxy_req r;
	const char *why;
	ck_assert_int_eq(parse("CONNECT PyPI.org.:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n", &r, &why), 0);
	ck_assert(r.connect);
	ck_assert_str_eq(r.host, "pypi.org");   /* lowercased, trailing dot gone */
	ck_assert_uint_eq(r.port, 443);
	ck_assert(!r.ip_literal);
	ck_assert_ptr_null(r.head);
	proxy_req_clear(&r);
	ck_assert_int_eq(parse("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n", &r, &why), 0);
	ck_assert_str_eq(r.host, "::1");
	ck_assert(r.ip_literal);
	proxy_req_clear(&r);
	/* A port is required, and must be one. */
	ck_assert_int_eq(parse("CONNECT pypi.org HTTP/1.1\r\n\r\n", &r, &why), -EINVAL);
	ck_assert_int_eq(parse("CONNECT pypi.org:0 HTTP/1.1\r\n\r\n", &r, &why), -EINVAL);
	ck_assert_int_eq(parse("CONNECT pypi.org:65536 HTTP/1.1\r\n\r\n", &r, &why), -EINVAL);
	ck_assert_int_eq(parse("CONNECT pypi.org:44x HTTP/1.1\r\n\r\n", &r, &why), -EINVAL);
	ck_assert_str_eq(why, "bad port");
}
END_TEST

START_TEST(test_plain_rewrite)
{
	proxy_req r;
	const char *why;
	ck_assert_int_eq(parse("GET http://Registry.test:8080/simple/pkg/?x=1 HTTP/1.1\r\nHost: registry.test:8080\r\n"
	                       "Proxy-Connection: keep-alive\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n",
	                       &r, &why), 0);
	ck_assert(!r.connect);
	ck_assert_str_eq(r.host, "registry.test");
	ck_assert_uint_eq(r.port, 8080);
	ck_assert_str_eq(r.head, "GET /simple/pkg/?x=1 HTTP/1.1\r\nHost: registry.test:8080\r\nAccept: */*\r\n"
	                         "Connection: close\r\n\r\n");
	ck_assert_uint_eq(r.head_len, strlen(r.head));
	proxy_req_clear(&r);
	/* No path, no Host header: both supplied; the default port is 80. */
	ck_assert_int_eq(parse("HEAD http://example.com HTTP/1.0\r\n\r\n", &r, &why), 0);
	ck_assert_uint_eq(r.port, 80);
	ck_assert_str_eq(r.head, "HEAD / HTTP/1.0\r\nHost: example.com\r\nConnection: close\r\n\r\n");
	proxy_req_clear(&r);
}
END_TEST

START_TEST(test_garbage)
{
	proxy_req r;
	const char *why;
	static const char *const bad[] = {
		"\r\n\r\n",
		"GET\r\n\r\n",
		"GET /local HTTP/1.1\r\n\r\n",                       /* not a proxy request */
		"GET https://a.test/ HTTP/1.1\r\n\r\n",               /* TLS goes through CONNECT */
		"GET ftp://a.test/ HTTP/1.1\r\n\r\n",
		"GET http://user@a.test/ HTTP/1.1\r\n\r\n",           /* userinfo hides the host */
		"GET http://a_b.test/ HTTP/1.1\r\n\r\n",
		"GET http://a.test/ HTTP/2.0\r\n\r\n",
		"GET http://a.test/ HTTP/1.1 x\r\n\r\n",
		"GET http://a.test/ HTTP/1.1\r\nNoColon\r\n\r\n",
		"GET http://a.test/ HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
		"GET http://a.test/ HTTP/1.1\r\nA: b\x01\r\n\r\n",
		"GET http://a.test/ HTTP/1.1\nA: b\r\n\r\n",
		"CONNECT [::1:443 HTTP/1.1\r\n\r\n",
		"CONNECT :443 HTTP/1.1\r\n\r\n",
		/* Empty labels (found by tests/fuzz): "a.test.." was checked as
		 * "a.test." and relayed as a Host that reads "a.test". */
		"GET http://a.test../ HTTP/1.0\r\n\r\n",
		"GET http://a..test/ HTTP/1.0\r\n\r\n",
		"CONNECT .a.test:443 HTTP/1.1\r\n\r\n",
		"CONNECT .:443 HTTP/1.1\r\n\r\n",
		"GET http://a.test/ HTTP/1.1\r\nHost: a.test..\r\n\r\n",
		/* Brackets hold an IPv6 address and nothing else (tests/fuzz):
		 * "[a.test]" was checked as the name a.test. */
		"GET http://[a.test]/ HTTP/1.0\r\n\r\n",
		"CONNECT [a.test]:443 HTTP/1.1\r\n\r\n",
		"GET http://[.A1]?6160/ HTTP/1.0\r\n\r\n",
		"GET http://[::1]/ HTTP/1.1\r\nHost: [localhost]\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		ck_assert_msg(parse(bad[i], &r, &why) < 0, "accepted: %s", bad[i]);
		ck_assert_ptr_nonnull(why);
		proxy_req_clear(&r);
	}
}
END_TEST

START_TEST(test_allowed)
{
	strv allow = { 0 };
	ck_assert_int_eq(strv_push(&allow, "pypi.org"), 0);
	ck_assert_int_eq(strv_push(&allow, "*.pythonhosted.org"), 0);
	ck_assert_int_eq(strv_push(&allow, "registry.test:8080"), 0);
	ck_assert_int_eq(strv_push(&allow, "*.0.0.1"), 0);
	ck_assert_int_eq(strv_push(&allow, "10.1.2.3:80"), 0);
	ck_assert(proxy_allowed(&allow, "pypi.org", 443));
	ck_assert(proxy_allowed(&allow, "pypi.org", 80));
	ck_assert(!proxy_allowed(&allow, "pypi.org", 22));            /* no port: 80 and 443 only */
	ck_assert(!proxy_allowed(&allow, "evilpypi.org", 443));
	ck_assert(!proxy_allowed(&allow, "pypi.org.evil.test", 443));
	ck_assert(proxy_allowed(&allow, "files.pythonhosted.org", 443));
	ck_assert(proxy_allowed(&allow, "a.b.pythonhosted.org", 443));
	ck_assert(!proxy_allowed(&allow, "pythonhosted.org", 443));   /* the suffix itself is not below it */
	ck_assert(!proxy_allowed(&allow, "xpythonhosted.org", 443));
	ck_assert(proxy_allowed(&allow, "registry.test", 8080));
	ck_assert(!proxy_allowed(&allow, "registry.test", 443));
	/* Addresses: only as listed; a wildcard never matches one, nor does
	 * another spelling of a listed one. */
	ck_assert(!proxy_allowed(&allow, "127.0.0.1", 443));
	ck_assert(proxy_allowed(&allow, "10.1.2.3", 80));
	ck_assert(!proxy_allowed(&allow, "10.1.2.3", 443));
	ck_assert(!proxy_allowed(&allow, "10.66051", 80));
	strv_clear(&allow);
	ck_assert(!proxy_allowed(&allow, "pypi.org", 443));   /* empty: nothing */
}
END_TEST

START_TEST(test_literal_forms)
{
	proxy_req r;
	const char *why;
	static const char *const lit[] = { "2130706433", "0x7f.1", "127.1", "017700000001" };
	for (size_t i = 0; i < sizeof(lit) / sizeof(*lit); i++) {
		char head[128];
		snprintf(head, sizeof(head), "CONNECT %s:443 HTTP/1.1\r\n\r\n", lit[i]);
		ck_assert_int_eq(parse(head, &r, &why), 0);
		ck_assert_msg(r.ip_literal, "%s is an address to getaddrinfo", lit[i]);
		proxy_req_clear(&r);
	}
}
END_TEST

START_TEST(test_host_header)
{
	proxy_req r;
	const char *why;
	static const char *const ok[] = {
		"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n",
		"GET http://a.test/ HTTP/1.1\r\nHost: A.Test.:80\r\n\r\n",   /* case, trailing dot, default port */
		"GET http://a.test:8080/ HTTP/1.1\r\nhost:a.test:8080 \r\n\r\n",
		"GET http://[::1]:8080/ HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n",
		"GET http://a.test/ HTTP/1.0\r\n\r\n",                       /* HTTP/1.0: may omit it */
		"CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n",
		"CONNECT a.test:443 HTTP/1.1\r\nHost: a.test\r\n\r\n",       /* CONNECT: the name suffices */
		"CONNECT a.test:443 HTTP/1.1\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(*ok); i++) {
		ck_assert_msg(parse(ok[i], &r, &why) == 0, "refused: %s (%s)", ok[i], why);
		proxy_req_clear(&r);
	}
	static const struct {
		const char *head;
		int rc;
	} bad[] = {
		{ "GET http://a.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n", -EACCES },
		{ "GET http://a.test/ HTTP/1.1\r\nHost: a.test:8080\r\n\r\n", -EACCES },
		{ "GET http://a.test:8080/ HTTP/1.1\r\nHost: a.test\r\n\r\n", -EACCES },
		{ "GET http://a.test/ HTTP/1.1\r\nHost: a.test.b.test\r\n\r\n", -EACCES },
		{ "CONNECT a.test:443 HTTP/1.1\r\nHost: b.test:443\r\n\r\n", -EACCES },
		{ "CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:444\r\n\r\n", -EACCES },
		{ "GET http://a.test/ HTTP/1.1\r\n\r\n", -EINVAL },                          /* 1.1 needs one */
		{ "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n", -EINVAL },
		{ "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nhost: a.test\r\n\r\n", -EINVAL },
		{ "GET http://a.test/ HTTP/1.1\r\nHost:\r\n\r\n", -EINVAL },
		{ "GET http://a.test/ HTTP/1.1\r\nHost: a.test/x\r\n\r\n", -EINVAL },
		{ "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nHost : b.test\r\n\r\n", -EINVAL },   /* blank before ':' */
		{ "GET http://a.test/ HTTP/1.1\r\nHost: a.test\rX: b.test\r\n\r\n", -EINVAL },         /* bare CR */
		{ "GET http://a.test/ HTTP/1.1\r\nHost: a.test\nHost: b.test\r\n\r\n", -EINVAL },       /* bare LF */
		{ "GET http://a.test/\x7f HTTP/1.1\r\nHost: a.test\r\n\r\n", -EINVAL },
		{ "GET http://a.test/ HTTP/1.1\r\nHost: a.test\x7f\r\n\r\n", -EINVAL },
		{ "G(T http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", -EINVAL },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		ck_assert_msg(parse(bad[i].head, &r, &why) == bad[i].rc, "not refused as expected: %s", bad[i].head);
		ck_assert_ptr_nonnull(why);
		proxy_req_clear(&r);
	}
	/* HTTP/1.0 without Host gets the target's, port and all. */
	ck_assert_int_eq(parse("GET http://a.test:8080/x HTTP/1.0\r\n\r\n", &r, &why), 0);
	ck_assert_str_eq(r.head, "GET /x HTTP/1.0\r\nHost: a.test:8080\r\nConnection: close\r\n\r\n");
	proxy_req_clear(&r);
	ck_assert_int_eq(parse("GET http://[::1]:8080/x HTTP/1.0\r\n\r\n", &r, &why), 0);
	ck_assert_str_eq(r.head, "GET /x HTTP/1.0\r\nHost: [::1]:8080\r\nConnection: close\r\n\r\n");
	proxy_req_clear(&r);
}
END_TEST

START_TEST(test_framing)
{
	proxy_req r;
	const char *why;
	ck_assert_int_eq(parse("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 12\r\n\r\n", &r, &why), 0);
	ck_assert_uint_eq(r.body_len, 12);
	proxy_req_clear(&r);
	ck_assert_int_eq(parse("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", &r, &why), 0);
	ck_assert_uint_eq(r.body_len, 0);
	proxy_req_clear(&r);
	static const char *const bad[] = {
		"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding : chunked\r\n\r\n",
		"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\n",
		"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\n",
		"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: -1\r\n\r\n",
		"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 0x10\r\n\r\n",
		"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 1 2\r\n\r\n",
		"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length:\r\n\r\n",
		"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 99999999999999999999\r\n\r\n",
		/* framing and Host in the spelling some servers read as theirs */
		"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nTransfer_Encoding: chunked\r\n\r\n",
		"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent_Length: 5\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		ck_assert_msg(parse(bad[i], &r, &why) == -EINVAL, "accepted: %s", bad[i]);
		proxy_req_clear(&r);
	}
	/* Hop-by-hop fields stay with the proxy: no upgrade to another
	 * protocol past the one request. */
	ck_assert_int_eq(parse("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
	                       "TE: trailers\r\nX-Forwarded-Host: b.test\r\nForwarded: host=b.test\r\n"
	                       "X-Host: b.test\r\nX-Original-Host: b.test\r\nX-Forwarded-Server: b.test\r\n\r\n", &r, &why), 0);
	ck_assert_str_eq(r.head, "GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n");
	proxy_req_clear(&r);
	/* ...in the spelling with "_" that CGI-style servers read as "-" */
	ck_assert_int_eq(parse("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX_Forwarded_Host: b.test\r\n"
	                       "x_original_host: b.test\r\nX-Forwarded_Server: b.test\r\nX_Host: b.test\r\n\r\n", &r, &why), 0);
	ck_assert_str_eq(r.head, "GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n");
	proxy_req_clear(&r);
}
END_TEST

START_TEST(test_sniff_http)
{
	ck_assert_int_eq(proxy_sniff_http("GET / HTTP/1.1\r\n", 16), 1);
	ck_assert_int_eq(proxy_sniff_http("get\t/", 5), 1);
	ck_assert_int_eq(proxy_sniff_http("GE", 2), -EAGAIN);
	/* the review's bypass: empty lines first, as lenient servers skip them */
	ck_assert_int_eq(proxy_sniff_http("\r\n\r\nGET /a HTTP/1.1\r\n", 21), 1);
	ck_assert_int_eq(proxy_sniff_http("\n\nGET /a", 8), 1);
	ck_assert_int_eq(proxy_sniff_http("\r\n", 2), -EAGAIN);
	{
		/* ...any number of them (the review's second bypass: 33 CRLFs) */
		char many[200];
		for (int n = 32; n <= 80; n += 16) {
			int k = 0;
			for (int i = 0; i < n; i++)
				many[k++] = '\r', many[k++] = '\n';
			memcpy(many + k, "GET / HTTP/1.1\r\n", 16);
			ck_assert_int_eq(proxy_sniff_http(many, (size_t) k + 16), 1);
		}
	}
	ck_assert_int_eq(proxy_sniff_http("SSH-2.0-x\r\n", 11), 0);
	ck_assert_int_eq(proxy_sniff_http("\x16\x03\x01", 3), 0);
	ck_assert_int_eq(proxy_sniff_http(" GET", 4), -EAGAIN);
	ck_assert_int_eq(proxy_sniff_http(" GET / HTTP/1.1", 15), 1);
	ck_assert_int_eq(proxy_sniff_http("AAAAAAAAAAAAAAAAAAAAAAAA", 24), 0);
}
END_TEST

/* A ClientHello, built field by field so that each can be broken. */
typedef struct hello {
	uint8_t b[1024];
	size_t n;
} hello;

static void put(hello *h, const void *p, size_t n)
{
	ck_assert_uint_le(h->n + n, sizeof(h->b));
	memcpy(h->b + h->n, p, n);
	h->n += n;
}

static void put16(hello *h, size_t v)
{
	uint8_t b[2] = { (uint8_t) (v >> 8), (uint8_t) v };
	put(h, b, 2);
}

static void sni_ext(hello *h, const char *name)
{
	size_t n = strlen(name);
	put16(h, 0);
	put16(h, n + 5);
	put16(h, n + 3);
	put(h, "\0", 1);
	put16(h, n);
	put(h, name, n);
}

/* exts: the extensions block as given (already encoded). */
static hello make_hello(const uint8_t *exts, size_t exts_len, bool with_exts)
{
	hello body = { .n = 0 }, h = { .n = 0 };
	put(&body, "\x03\x03", 2);
	uint8_t random[32] = { 0 };
	put(&body, random, 32);
	put(&body, "\x00", 1);                   /* session id */
	put(&body, "\x00\x02\x13\x01", 4);       /* one cipher suite */
	put(&body, "\x01\x00", 2);               /* null compression */
	if (with_exts) {
		put16(&body, exts_len);
		put(&body, exts, exts_len);
	}
	put(&h, "\x16\x03\x01", 3);
	put16(&h, body.n + 4);
	uint8_t hs[4] = { 1, 0, (uint8_t) (body.n >> 8), (uint8_t) body.n };
	put(&h, hs, 4);
	put(&h, body.b, body.n);
	return h;
}

START_TEST(test_tls_sni)
{
	char sni[256];
	hello e = { .n = 0 };
	put16(&e, 0x000a);   /* supported_groups, before the name */
	put16(&e, 4);
	put(&e, "\x00\x02\x00\x1d", 4);
	sni_ext(&e, "Files.PythonHosted.org");
	hello h = make_hello(e.b, e.n, true);
	ck_assert_int_eq(proxy_tls_sni(h.b, h.n, sni, sizeof(sni)), 1);
	ck_assert_str_eq(sni, "files.pythonhosted.org");
	/* Every prefix asks for more (or is already refused), never reads past it. */
	for (size_t n = 0; n < h.n; n++) {
		uint8_t *copy = malloc(n ? n : 1);
		memcpy(copy, h.b, n);
		int r = proxy_tls_sni(copy, n, sni, sizeof(sni));
		ck_assert_msg(r == -EAGAIN, "prefix %zu: %d", n, r);
		free(copy);
	}
	/* No extensions, or none naming a server: no name. */
	hello none = make_hello(NULL, 0, false);
	ck_assert_int_eq(proxy_tls_sni(none.b, none.n, sni, sizeof(sni)), 0);
	hello grp = make_hello(e.b, 8, true);
	ck_assert_int_eq(proxy_tls_sni(grp.b, grp.n, sni, sizeof(sni)), 0);
	/* Not TLS at all. */
	ck_assert_int_eq(proxy_tls_sni((const uint8_t *) "GET / HTTP/1.1\r\n", 16, sni, sizeof(sni)), -EPROTO);
	/* Every single byte changed: refused or parsed, within bounds (ASan
	 * watches the reads: the copy is exactly as long as the data). */
	for (size_t i = 0; i < h.n; i++)
		for (int v = 0; v < 256; v += 17) {
			uint8_t *copy = malloc(h.n);
			memcpy(copy, h.b, h.n);
			copy[i] = (uint8_t) v;
			int r = proxy_tls_sni(copy, h.n, sni, sizeof(sni));
			ck_assert(r == 1 || r == 0 || r == -EAGAIN || r == -EINVAL || r == -EPROTO || r == -EPERM);
			if (r == 1)
				ck_assert_uint_lt(strlen(sni), sizeof(sni));
			free(copy);
		}
}
END_TEST

START_TEST(test_tls_refused)
{
	char sni[256];
	/* Two names, two server_name extensions, ECH, a name with a NUL or a
	 * blank, a name longer than the buffer. */
	hello e = { .n = 0 };
	sni_ext(&e, "a.test");
	sni_ext(&e, "b.test");
	hello h = make_hello(e.b, e.n, true);
	ck_assert_int_eq(proxy_tls_sni(h.b, h.n, sni, sizeof(sni)), -EINVAL);
	e.n = 0;
	sni_ext(&e, "a.test");
	put16(&e, 0xfe0d);
	put16(&e, 1);
	put(&e, "\0", 1);
	h = make_hello(e.b, e.n, true);
	ck_assert_int_eq(proxy_tls_sni(h.b, h.n, sni, sizeof(sni)), -EPERM);
	static const char *const names[] = { "a.test\x00x.test", "a test", "a.test\r\nHost: b" };
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
		e.n = 0;
		size_t n = i == 0 ? 13 : strlen(names[i]);
		put16(&e, 0);
		put16(&e, n + 5);
		put16(&e, n + 3);
		put(&e, "\0", 1);
		put16(&e, n);
		put(&e, names[i], n);
		h = make_hello(e.b, e.n, true);
		ck_assert_int_eq(proxy_tls_sni(h.b, h.n, sni, sizeof(sni)), -EINVAL);
	}
	e.n = 0;
	sni_ext(&e, "a.test");
	h = make_hello(e.b, e.n, true);
	ck_assert_int_eq(proxy_tls_sni(h.b, h.n, sni, 6), -EINVAL);   /* "a.test" needs 7 */
	ck_assert_int_eq(proxy_tls_sni(h.b, h.n, sni, 7), 1);
	/* A ClientHello longer than its record (continued in the next one). */
	h.b[4] = (uint8_t) (h.b[4] - 1);
	ck_assert_int_eq(proxy_tls_sni(h.b, h.n - 1, sni, sizeof(sni)), -EINVAL);
	/* A record longer than TLS allows. */
	uint8_t big[5] = { 0x16, 3, 1, 0x40, 0x01 };
	ck_assert_int_eq(proxy_tls_sni(big, 5, sni, sizeof(sni)), -EINVAL);
}
END_TEST

static struct sockaddr_storage addr(const char *s)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *a4 = (struct sockaddr_in *) &ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *) &ss;
	if (inet_pton(AF_INET, s, &a4->sin_addr) == 1)
		a4->sin_family = AF_INET;
	else {
		ck_assert_int_eq(inet_pton(AF_INET6, s, &a6->sin6_addr), 1);
		a6->sin6_family = AF_INET6;
	}
	return ss;
}

START_TEST(test_addr_class)
{
	static const struct {
		const char *addr, *class;
	} table[] = {
		{ "93.184.215.14", NULL },
		{ "198.51.100.7", NULL },
		{ "2606:4700::1111", NULL },
		{ "::ffff:93.184.215.14", NULL },
		{ "127.0.0.1", "loopback" },
		{ "127.255.255.254", "loopback" },
		{ "0.0.0.0", "unspecified" },
		{ "0.1.2.3", "unspecified" },
		{ "10.0.0.1", "private" },
		{ "172.16.0.1", "private" },
		{ "172.31.255.255", "private" },
		{ "172.32.0.1", NULL },
		{ "192.168.1.1", "private" },
		{ "100.64.0.1", "shared (CGNAT)" },
		{ "100.127.255.255", "shared (CGNAT)" },
		{ "100.128.0.1", NULL },
		{ "169.254.169.254", "link-local" },
		{ "224.0.0.1", "multicast" },
		{ "239.255.255.250", "multicast" },
		{ "255.255.255.255", "broadcast" },
		{ "240.0.0.1", "reserved" },
		{ "192.0.0.170", "reserved" },
		{ "::", "unspecified" },
		{ "::1", "loopback" },
		{ "::ffff:127.0.0.1", "loopback" },
		{ "::ffff:169.254.169.254", "link-local" },
		{ "::ffff:10.1.2.3", "private" },
		{ "::127.0.0.1", "reserved (IPv4-compatible)" },
		{ "::8.8.8.8", "reserved (IPv4-compatible)" },
		{ "64:ff9b::7f00:1", "loopback" },
		{ "64:ff9b::a9fe:a9fe", "link-local" },
		{ "64:ff9b::808:808", NULL },
		{ "64:ff9b:1::1", "private (local-use NAT64)" },
		{ "2002:7f00:1::1", "loopback" },
		{ "2002:a9fe:a9fe::1", "link-local" },
		{ "2001:0:4136:e378:8000:63bf:3fff:fdd2", "reserved (Teredo)" },
		{ "fc00::1", "unique-local" },
		{ "fd12:3456::1", "unique-local" },
		{ "fe80::1", "link-local" },
		{ "febf::1", "link-local" },
		{ "fec0::1", "site-local" },
		{ "ff02::1", "multicast" },
	};
	for (size_t i = 0; i < sizeof(table) / sizeof(*table); i++) {
		struct sockaddr_storage ss = addr(table[i].addr);
		const char *c = proxy_addr_class((struct sockaddr *) &ss);
		if (!table[i].class)
			ck_assert_msg(c == NULL, "%s: %s", table[i].addr, c);
		else
			ck_assert_msg(c && !strcmp(c, table[i].class), "%s: %s", table[i].addr, c ? c : "(public)");
	}
}
END_TEST

START_TEST(test_addr_listed)
{
	strv allow = { 0 };
	ck_assert_int_eq(strv_push(&allow, "10.1.2.3:8080"), 0);
	ck_assert_int_eq(strv_push(&allow, "169.254.169.254"), 0);
	ck_assert_int_eq(strv_push(&allow, "[fd00::7]:8443"), 0);
	ck_assert_int_eq(strv_push(&allow, "*.0.0.1"), 0);
	ck_assert_int_eq(strv_push(&allow, "127.1"), 0);
	struct sockaddr_storage a = addr("10.1.2.3");
	ck_assert(proxy_addr_listed(&allow, (struct sockaddr *) &a, 8080));
	ck_assert(!proxy_addr_listed(&allow, (struct sockaddr *) &a, 80));   /* that port only */
	a = addr("::ffff:10.1.2.3");
	ck_assert(!proxy_addr_listed(&allow, (struct sockaddr *) &a, 8080));   /* another spelling */
	a = addr("169.254.169.254");
	ck_assert(proxy_addr_listed(&allow, (struct sockaddr *) &a, 80));
	ck_assert(proxy_addr_listed(&allow, (struct sockaddr *) &a, 443));
	ck_assert(!proxy_addr_listed(&allow, (struct sockaddr *) &a, 8080));
	a = addr("fd00:0:0::7");
	ck_assert(proxy_addr_listed(&allow, (struct sockaddr *) &a, 8443));
	a = addr("127.0.0.1");   /* not by a wildcard, nor by inet_aton's "127.1" */
	ck_assert(!proxy_addr_listed(&allow, (struct sockaddr *) &a, 80));
	/* The same entries as names: the bracketed address matches however
	 * it is spelled in the request. */
	ck_assert(proxy_allowed(&allow, "fd00::7", 8443));
	ck_assert(proxy_allowed(&allow, "fd00:0::7", 8443));
	ck_assert(!proxy_allowed(&allow, "fd00::7", 443));
	strv_clear(&allow);
}
END_TEST

START_TEST(test_entry_split)
{
	const char *h;
	size_t n;
	unsigned port;
	ck_assert(proxy_entry_split("a.test:8080", &h, &n, &port));
	ck_assert_uint_eq(n, 6);
	ck_assert_uint_eq(port, 8080);
	ck_assert(proxy_entry_split("[::1]", &h, &n, &port));
	ck_assert_uint_eq(n, 3);
	ck_assert_uint_eq(port, 0);
	ck_assert(proxy_entry_split("[::1]:443", &h, &n, &port));
	ck_assert_uint_eq(port, 443);
	static const char *const bad[] = { "::1", "fd00::1:80", "[::1", "[::1]x", "[]:80", "a.test:", "a.test:0",
		                           "a.test:65536", "a.test:+80", "a.test:80x", ":80" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		ck_assert_msg(!proxy_entry_split(bad[i], &h, &n, &port), "accepted: %s", bad[i]);
}
END_TEST

START_TEST(test_log_bounded)
{
	proxy_log l = { 0 };
	char name[32];
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 1000; i++) {
			snprintf(name, sizeof(name), "n%d.test:443", i);
			proxy_log_count(&l, name, i ? NULL : "first");
		}
	ck_assert_uint_eq(l.n, PROXY_LOG_MAX);
	ck_assert_uint_eq(l.other, 2 * (1000 - PROXY_LOG_MAX));
	ck_assert_str_eq(l.v[0].name, "n0.test:443");
	ck_assert_str_eq(l.v[0].reason, "first");
	ck_assert_ptr_null(l.v[1].reason);
	for (size_t i = 0; i < l.n; i++)
		ck_assert_uint_eq(l.v[i].count, 2);   /* the listed ones still counted */
	proxy_log_free(&l);
	ck_assert_uint_eq(l.n, 0);
	proxy_log_free(&l);   /* twice: harmless */
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("proxy");
	tcase_add_test(tc, test_head_len);
	tcase_add_test(tc, test_connect);
	tcase_add_test(tc, test_plain_rewrite);
	tcase_add_test(tc, test_garbage);
	tcase_add_test(tc, test_allowed);
	tcase_add_test(tc, test_literal_forms);
	tcase_add_test(tc, test_host_header);
	tcase_add_test(tc, test_framing);
	tcase_add_test(tc, test_sniff_http);
	tcase_add_test(tc, test_tls_sni);
	tcase_add_test(tc, test_tls_refused);
	tcase_add_test(tc, test_addr_class);
	tcase_add_test(tc, test_addr_listed);
	tcase_add_test(tc, test_entry_split);
	tcase_add_test(tc, test_log_bounded);
	return unit_run("proxy", tc);
}
