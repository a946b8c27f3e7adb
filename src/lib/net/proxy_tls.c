/* The server name a tunnel's TLS ClientHello asks for (SNI), so that a
 * CONNECT to an allowed name cannot carry a handshake for another tenant
 * of the same server (domain fronting). The bytes are the payload's:
 * every length is checked against what contains it before it is used. */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "net/proxy.h"

#define TLS_HANDSHAKE 22
#define TLS_CLIENT_HELLO 1
#define TLS_RECORD_MAX 16384   /* plaintext; a ClientHello is sent in the clear */
#define EXT_SERVER_NAME 0
#define EXT_ECH 0xfe0d

/* A cursor over a bounded span: reads fail once it would pass the end. */
typedef struct span {
	const uint8_t *p;
	size_t n;
} span;

static bool take(span *s, size_t n, span *out)
{
	if (n > s->n)
		return false;
	if (out)
		*out = (span){ s->p, n };
	s->p += n;
	s->n -= n;
	return true;
}

static bool u8(span *s, size_t *v)
{
	if (s->n < 1)
		return false;
	*v = s->p[0];
	return take(s, 1, NULL);
}

static bool u16(span *s, size_t *v)
{
	if (s->n < 2)
		return false;
	*v = (size_t) s->p[0] << 8 | s->p[1];
	return take(s, 2, NULL);
}

/* A length-prefixed vector (prefix of 1 or 2 bytes). */
static bool vec(span *s, int prefix, span *out)
{
	size_t n;
	return (prefix == 1 ? u8(s, &n) : u16(s, &n)) && take(s, n, out);
}

/* The server_name extension: a list holding one host_name. */
static int server_name(span ext, char *sni, size_t size)
{
	span list, name;
	size_t type;
	if (!vec(&ext, 2, &list) || ext.n || !u8(&list, &type) || type != 0 || !vec(&list, 2, &name) || list.n)
		return -EINVAL;   /* one host_name, nothing else, nothing after */
	if (name.n == 0 || name.n >= size)
		return -EINVAL;
	for (size_t i = 0; i < name.n; i++) {
		unsigned char c = name.p[i];
		if (!(isalnum(c) || c == '-' || c == '.' || c == '_'))
			return -EINVAL;
		sni[i] = (char) tolower(c);
	}
	sni[name.n] = '\0';
	if (name.n > 1 && sni[name.n - 1] == '.')
		sni[name.n - 1] = '\0';
	return 1;
}

int proxy_tls_sni(const uint8_t *data, size_t len, char *sni, size_t sni_size)
{
	if (len >= 1 && data[0] != TLS_HANDSHAKE)
		return -EPROTO;
	if (len >= 2 && data[1] != 3)
		return -EINVAL;
	if (len < 5)
		return -EAGAIN;
	size_t rec = (size_t) data[3] << 8 | data[4];
	if (rec == 0 || rec > TLS_RECORD_MAX)
		return -EINVAL;
	if (len < 5 + rec)
		return -EAGAIN;
	span r = { data + 5, rec }, hello, ign, exts;
	size_t type, l1, l2, l3;
	if (!u8(&r, &type) || type != TLS_CLIENT_HELLO || !u8(&r, &l1) || !u8(&r, &l2) || !u8(&r, &l3))
		return -EINVAL;
	/* The whole ClientHello in this record: one split over records would
	 * leave its SNI to a record not looked at. */
	if (!take(&r, l1 << 16 | l2 << 8 | l3, &hello) || r.n)
		return -EINVAL;
	if (!take(&hello, 2 + 32, NULL) ||   /* legacy version, random */
	    !vec(&hello, 1, &ign) || ign.n > 32 ||   /* session id */
	    !vec(&hello, 2, &ign) || ign.n < 2 || ign.n % 2 ||   /* cipher suites */
	    !vec(&hello, 1, &ign) || ign.n < 1)   /* compression methods */
		return -EINVAL;
	if (hello.n == 0)
		return 0;   /* no extensions, so no name */
	if (!vec(&hello, 2, &exts) || hello.n)
		return -EINVAL;
	int found = 0;
	while (exts.n) {
		size_t et;
		span ext;
		if (!u16(&exts, &et) || !vec(&exts, 2, &ext))
			return -EINVAL;
		if (et == EXT_ECH)
			return -EPERM;
		if (et != EXT_SERVER_NAME)
			continue;
		if (found)
			return -EINVAL;   /* two names: which would the server take? */
		found = server_name(ext, sni, sni_size);
		if (found < 0)
			return found;
	}
	return found;
}
