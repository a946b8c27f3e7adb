#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/capture.h"

void capture_init(capture *c, uint64_t cap)
{
	*c = (capture){ .cap = cap };
	c->head_cap = cap ? (size_t) (cap - cap / 2) : SIZE_MAX;
	c->tail_cap = cap ? (size_t) (cap / 2) : 0;
}

bool capture_feed(capture *c, const char *data, size_t len)
{
	c->total += len;
	size_t room = c->head_cap - c->head.len;
	size_t n = len < room ? len : room;
	if (n) {
		buf_append(&c->head, data, n);
		if (c->head.oom)
			return false;
		data += n;
		len -= n;
	}
	if (!len || !c->tail_cap)
		return true;
	if (!c->ring) {
		c->ring = malloc(c->tail_cap);
		if (!c->ring)
			return false;
	}
	if (len >= c->tail_cap) {   /* only the last tail_cap bytes matter */
		memcpy(c->ring, data + len - c->tail_cap, c->tail_cap);
		c->ring_pos = 0;
		c->ring_len = c->tail_cap;
		return true;
	}
	size_t first = c->tail_cap - c->ring_pos;
	if (first > len)
		first = len;
	memcpy(c->ring + c->ring_pos, data, first);
	memcpy(c->ring, data + first, len - first);
	c->ring_pos = (c->ring_pos + len) % c->tail_cap;
	c->ring_len = c->ring_len + len > c->tail_cap ? c->tail_cap : c->ring_len + len;
	return true;
}

/* Bytes to drop from the end of s so it does not stop inside a character. */
static size_t partial_tail(const char *s, size_t n)
{
	for (size_t back = 1; back <= 3 && back <= n; back++) {
		unsigned char ch = (unsigned char) s[n - back];
		if ((ch & 0xc0) == 0x80)
			continue;   /* continuation byte: keep looking for the lead */
		size_t need = ch >= 0xf0 ? 4 : ch >= 0xe0 ? 3 : ch >= 0xc0 ? 2 : 1;
		return need > back ? back : 0;
	}
	return 0;
}

char *capture_text(const capture *c, size_t *len, bool *truncated)
{
	size_t head = c->head.len, tail = c->ring_len;
	bool trunc = c->total > (uint64_t) head + tail;
	/* The ring in order: oldest byte at ring_pos once it has wrapped. */
	size_t start = c->ring_len == c->tail_cap ? c->ring_pos : 0;
	size_t skip = 0;
	if (trunc) {
		head -= partial_tail(c->head.data, head);
		while (skip < 3 && skip < tail &&
		       ((unsigned char) c->ring[(start + skip) % c->tail_cap] & 0xc0) == 0x80)
			skip++;
	}
	char marker[96] = "";
	if (trunc)
		snprintf(marker, sizeof(marker), "\n... [nsbox: %llu bytes omitted] ...\n",
		         (unsigned long long) (c->total - head - (tail - skip)));
	size_t mlen = strlen(marker), out_len = head + mlen + tail - skip;
	char *out = malloc(out_len + 1);
	if (!out)
		return NULL;
	if (head)
		memcpy(out, c->head.data, head);
	memcpy(out + head, marker, mlen);
	for (size_t i = skip; i < tail; i++)
		out[head + mlen + i - skip] = c->ring[(start + i) % c->tail_cap];
	out[out_len] = '\0';
	*len = out_len;
	*truncated = trunc;
	return out;
}

void capture_free(capture *c)
{
	buf_free(&c->head);
	free(c->ring);
	c->ring = NULL;
}
