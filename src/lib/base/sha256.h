/* SHA-256 (FIPS 180-4) for the digests in audit lines and artifact names;
 * nsbox links no crypto library, and this needs no secret. */
#ifndef NSBOX_SHA256_H
#define NSBOX_SHA256_H

#include <stddef.h>
#include <stdint.h>

/* Write the 64 lowercase hex digits of SHA-256(data) and a NUL into hex. */
void sha256_hex(const void *data, size_t len, char hex[65]);

/* The same, fed in pieces. */
typedef struct sha256_ctx {
	uint32_t h[8];
	unsigned char buf[64];
	size_t n;
	uint64_t total;
} sha256_ctx;
void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t len);
void sha256_final_hex(sha256_ctx *c, char hex[65]);

#endif
