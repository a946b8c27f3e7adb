#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"

static bool reserve(buf *b, size_t extra)
{
	if (b->oom)
		return false;
	if (b->len + extra + 1 <= b->cap)
		return true;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + extra + 1)
		cap *= 2;
	char *d = realloc(b->data, cap);
	if (!d) {
		b->oom = true;
		return false;
	}
	b->data = d;
	b->cap = cap;
	return true;
}

void buf_append(buf *b, const void *data, size_t len)
{
	if (!reserve(b, len))
		return;
	memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
}

void buf_puts(buf *b, const char *s) { buf_append(b, s, strlen(s)); }

void buf_printf(buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !reserve(b, (size_t) n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t) n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t) n;
}

char *buf_steal(buf *b)
{
	if (b->oom) {
		buf_free(b);
		return NULL;
	}
	if (!b->data)
		reserve(b, 0);
	if (b->data)
		b->data[b->len] = '\0';
	char *d = b->data;
	*b = (buf){ 0 };
	return d;
}

void buf_free(buf *b)
{
	free(b->data);
	*b = (buf){ 0 };
}
