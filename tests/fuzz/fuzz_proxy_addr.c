/* Which resolved addresses the proxy may connect to. The input: a family
 * byte, 16 address bytes, then allowlist entries one per line. An IPv4
 * address dressed as IPv6 (mapped, NAT64, 6to4) is judged as the IPv4
 * address it reaches; only the exact address listed makes an inside one
 * reachable. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "fuzz.h"
#include "nsbox.h"
#include "net/proxy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 17 || size > 4096)
		return 0;
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	struct sockaddr_in *v4 = (struct sockaddr_in *) &ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *) &ss;
	bool is6 = data[0] & 1;
	if (is6) {
		v6->sin6_family = AF_INET6;
		memcpy(&v6->sin6_addr, data + 1, 16);
	} else {
		v4->sin_family = AF_INET;
		memcpy(&v4->sin_addr, data + 1, 4);
	}
	const char *cls = proxy_addr_class((struct sockaddr *) &ss);
	char text[INET6_ADDRSTRLEN + 8];
	proxy_addr_str((struct sockaddr *) &ss, text, sizeof(text));
	FUZZ_CHECK(strlen(text) < sizeof(text));
	if (!is6) {
		/* The same address, mapped: the same verdict. */
		struct sockaddr_in6 m = { .sin6_family = AF_INET6 };
		m.sin6_addr.s6_addr[10] = m.sin6_addr.s6_addr[11] = 0xff;
		memcpy(m.sin6_addr.s6_addr + 12, data + 1, 4);
		const char *mc = proxy_addr_class((struct sockaddr *) &m);
		FUZZ_CHECK((cls == NULL) == (mc == NULL));
		/* and through NAT64's well-known prefix */
		struct sockaddr_in6 n = { .sin6_family = AF_INET6 };
		n.sin6_addr.s6_addr[1] = 0x64;
		n.sin6_addr.s6_addr[2] = 0xff;
		n.sin6_addr.s6_addr[3] = 0x9b;
		memcpy(n.sin6_addr.s6_addr + 12, data + 1, 4);
		FUZZ_CHECK((cls == NULL) == (proxy_addr_class((struct sockaddr *) &n) == NULL));
	}
	nsbox_config *cfg = NULL;
	FUZZ_CHECK(nsbox_config_new(&cfg, NULL) == 0);
	char *rest = fuzz_cstr(data + 17, size - 17);
	strv allow = { 0 };
	for (char *save = NULL, *e = strtok_r(rest, "\n", &save); e; e = strtok_r(NULL, "\n", &save)) {
		const char *h;
		size_t hl;
		unsigned port;
		(void) proxy_entry_split(e, &h, &hl, &port);
		if (nsbox_config_set(cfg, "network.allow", e, NULL, NULL) == 0)
			FUZZ_CHECK(strv_push(&allow, e) == 0);
	}
	for (unsigned port = 79; port <= 81; port++) {
		if (!proxy_addr_listed(&allow, (struct sockaddr *) &ss, port))
			continue;
		/* Listed: some entry spells this very address. */
		bool found = false;
		for (size_t i = 0; i < allow.n && !found; i++) {
			const char *h;
			size_t hl;
			unsigned ep;
			char lit[64];
			if (!proxy_entry_split(allow.v[i], &h, &hl, &ep) || hl >= sizeof(lit) || !proxy_entry_port(ep, port))
				continue;
			memcpy(lit, h, hl);
			lit[hl] = '\0';
			uint8_t a[16];
			if (is6)
				found = inet_pton(AF_INET6, lit, a) == 1 && !memcmp(a, &v6->sin6_addr, 16);
			else
				found = inet_pton(AF_INET, lit, a) == 1 && !memcmp(a, &v4->sin_addr, 4);
		}
		FUZZ_CHECK(found);
	}
	strv_clear(&allow);
	free(rest);
	nsbox_config_free(cfg);
	return 0;
}
