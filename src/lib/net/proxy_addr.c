/* The allowlist proxy's address policy. An allowed name says nothing
 * about where it resolves: DNS is the payload's to influence (rebinding)
 * and a name may simply point inside. So the addresses a name resolves
 * to are checked before connecting, and those of the supervisor's own
 * side (loopback, link-local with the cloud metadata service, private
 * and shared networks, the unspecified address that means "this host",
 * multicast and broadcast, and IPv4 addresses dressed as IPv6) are
 * refused unless the allowlist names that very address. The connection
 * then goes to the address checked, never to a second lookup's. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "net/proxy.h"

bool proxy_entry_split(const char *e, const char **host, size_t *host_len, unsigned *port)
{
	const char *colon = NULL;
	*port = 0;
	if (e[0] == '[') {
		const char *close = strchr(e, ']');
		if (!close || (close[1] && close[1] != ':'))
			return false;
		*host = e + 1;
		*host_len = (size_t) (close - e - 1);
		colon = close[1] ? close + 1 : NULL;
	} else {
		colon = strchr(e, ':');
		if (colon && strchr(colon + 1, ':'))
			return false;   /* a bare IPv6 address: its port would be ambiguous */
		*host = e;
		*host_len = colon ? (size_t) (colon - e) : strlen(e);
	}
	if (colon) {
		char *end;
		unsigned long p = strtoul(colon + 1, &end, 10);
		if (*end || colon[1] < '0' || colon[1] > '9' || p == 0 || p > 65535)
			return false;
		*port = (unsigned) p;
	}
	return *host_len > 0;
}

bool proxy_entry_port(unsigned entry_port, unsigned port)
{
	return entry_port ? entry_port == port : (port == 80 || port == 443);
}

static const char *v4_class(const uint8_t a[4])
{
	if (a[0] == 0)
		return "unspecified";   /* 0.0.0.0/8: connect() takes it for this host */
	if (a[0] == 127)
		return "loopback";
	if (a[0] == 10 || (a[0] == 172 && (a[1] & 0xf0) == 16) || (a[0] == 192 && a[1] == 168))
		return "private";
	if (a[0] == 100 && (a[1] & 0xc0) == 64)
		return "shared (CGNAT)";
	if (a[0] == 169 && a[1] == 254)
		return "link-local";
	if (a[0] == 192 && a[1] == 0 && a[2] == 0)
		return "reserved";
	if ((a[0] & 0xf0) == 224)
		return "multicast";
	if (a[0] == 255 && a[1] == 255 && a[2] == 255 && a[3] == 255)
		return "broadcast";
	if ((a[0] & 0xf0) == 240)
		return "reserved";
	return NULL;
}

static const char *v6_class(const uint8_t a[16])
{
	static const uint8_t zero[12] = { 0 };
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	static const uint8_t nat64[12] = { 0, 0x64, 0xff, 0x9b };
	if (!memcmp(a, mapped, 12) || !memcmp(a, nat64, 12))
		return v4_class(a + 12);   /* the IPv4 address it reaches */
	if (!memcmp(a, zero, 12)) {
		static const uint8_t one[4] = { 0, 0, 0, 1 };
		if (!memcmp(a + 12, zero, 4))
			return "unspecified";
		return memcmp(a + 12, one, 4) ? "reserved (IPv4-compatible)" : "loopback";
	}
	if (a[0] == 0x00 && a[1] == 0x64 && a[2] == 0xff && a[3] == 0x9b && a[4] == 0 && a[5] == 1)
		return "private (local-use NAT64)";   /* 64:ff9b:1::/48 */
	if (a[0] == 0x20 && a[1] == 0x02)
		return v4_class(a + 2);   /* 6to4: 2002:AABB:CCDD::/48 */
	if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0 && a[3] == 0)
		return "reserved (Teredo)";   /* 2001::/32 hides an IPv4 address */
	if ((a[0] & 0xfe) == 0xfc)
		return "unique-local";
	if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
		return "link-local";
	if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0)
		return "site-local";
	if (a[0] == 0xff)
		return "multicast";
	return NULL;
}

const char *proxy_addr_class(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return v4_class((const uint8_t *) &((const struct sockaddr_in *) sa)->sin_addr);
	if (sa->sa_family == AF_INET6)
		return v6_class(((const struct sockaddr_in6 *) sa)->sin6_addr.s6_addr);
	return "not an IP address";
}

/* Whether the allowlist names this address itself, as an IPv4 literal or
 * a bracketed IPv6 one, for this port: the user's explicit consent to
 * reach it. Only the exact address counts: not a wildcard, not a name,
 * not another spelling of it (an IPv4 address is not its mapped form). */
bool proxy_addr_listed(const strv *allow, const struct sockaddr *sa, unsigned port)
{
	for (size_t i = 0; i < allow->n; i++) {
		const char *h;
		size_t hl;
		unsigned ep;
		char lit[64];
		if (!proxy_entry_split(allow->v[i], &h, &hl, &ep) || !proxy_entry_port(ep, port) || hl >= sizeof(lit))
			continue;
		memcpy(lit, h, hl);
		lit[hl] = '\0';
		struct in_addr a4;
		struct in6_addr a6;
		if (sa->sa_family == AF_INET && allow->v[i][0] != '[' && inet_pton(AF_INET, lit, &a4) == 1 &&
		    !memcmp(&a4, &((const struct sockaddr_in *) sa)->sin_addr, sizeof(a4)))
			return true;
		if (sa->sa_family == AF_INET6 && allow->v[i][0] == '[' && inet_pton(AF_INET6, lit, &a6) == 1 &&
		    !memcmp(&a6, &((const struct sockaddr_in6 *) sa)->sin6_addr, sizeof(a6)))
			return true;
	}
	return false;
}

void proxy_addr_str(const struct sockaddr *sa, char *out, size_t size)
{
	const void *a = sa->sa_family == AF_INET6 ? (const void *) &((const struct sockaddr_in6 *) sa)->sin6_addr
	                                          : (const void *) &((const struct sockaddr_in *) sa)->sin_addr;
	if (!inet_ntop(sa->sa_family, a, out, (socklen_t) size))
		snprintf(out, size, "?");
}
