#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy.h"
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

int main(void)
{
	TCase *tc = tcase_create("proxy");
	tcase_add_test(tc, test_head_len);
	tcase_add_test(tc, test_connect);
	tcase_add_test(tc, test_plain_rewrite);
	tcase_add_test(tc, test_garbage);
	tcase_add_test(tc, test_allowed);
	tcase_add_test(tc, test_literal_forms);
	return unit_run("proxy", tc);
}
