/* The server name of a tunnel's TLS ClientHello (the sandbox's bytes), and
 * the sniffing that tells HTTP inside a tunnel. */
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "net/proxy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char sni[256];
	memset(sni, 'x', sizeof(sni));
	int r = proxy_tls_sni(data, size, sni, sizeof(sni));
	FUZZ_CHECK(r == 1 || r == 0 || r == -EAGAIN || r == -EPROTO || r == -EINVAL || r == -EPERM);
	if (r == 1) {
		size_t n = strnlen(sni, sizeof(sni));
		FUZZ_CHECK(n > 0 && n < sizeof(sni));
		for (size_t i = 0; i < n; i++)
			FUZZ_CHECK(islower((unsigned char) sni[i]) || isdigit((unsigned char) sni[i]) ||
			           strchr("-._", sni[i]));
	}
	/* More bytes never make a complete answer incomplete again. */
	if (r != -EAGAIN && size) {
		uint8_t *more = malloc(size + 16);
		FUZZ_CHECK(more);
		memcpy(more, data, size);
		memset(more + size, 0, 16);
		char sni2[256];
		int r2 = proxy_tls_sni(more, size + 16, sni2, sizeof(sni2));
		FUZZ_CHECK(r2 == r || (r2 != -EAGAIN && r != 1 && r != 0));
		if (r == 1 && r2 == 1)
			FUZZ_CHECK(!strcmp(sni, sni2));
		free(more);
	}
	int h = proxy_sniff_http((const char *) data, size);
	FUZZ_CHECK(h == 1 || h == 0 || h == -EAGAIN);
	size_t hl = proxy_head_len((const char *) data, size);
	FUZZ_CHECK(hl == 0 || (hl >= 4 && hl <= size && !memcmp(data + hl - 4, "\r\n\r\n", 4)));
	return 0;
}
