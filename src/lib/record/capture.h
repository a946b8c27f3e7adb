/* Bounded capture of an output stream: keeps the head and the tail, counts
 * every byte, and never holds more than the cap however much is written. */
#ifndef NSBOX_CAPTURE_H
#define NSBOX_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

typedef struct capture {
	uint64_t cap;        /* 0: unlimited */
	uint64_t total;      /* bytes seen */
	size_t head_cap;
	buf head;
	char *ring;          /* the last tail_cap bytes after the head filled */
	size_t tail_cap, ring_len, ring_pos;
} capture;

void capture_init(capture *c, uint64_t cap);
/* Returns false when memory ran out (the bytes are still counted). */
bool capture_feed(capture *c, const char *data, size_t len);
/* The captured text: the whole stream, or head + a marker line + tail when
 * it was truncated. Cuts are moved to UTF-8 character boundaries. */
char *capture_text(const capture *c, size_t *len, bool *truncated);
void capture_free(capture *c);

#endif
