/* A growable byte buffer for building text (JSON, YAML, messages). */
#ifndef NSBOX_BUF_H
#define NSBOX_BUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct buf {
	char *data;   /* always NUL-terminated when non-NULL */
	size_t len;
	size_t cap;
	bool oom;     /* an append failed; the content is incomplete */
} buf;

void buf_append(buf *b, const void *data, size_t len);
void buf_puts(buf *b, const char *s);
void buf_printf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hand the text over (NULL and freed on earlier allocation failure). */
char *buf_steal(buf *b);
void buf_free(buf *b);

#endif
