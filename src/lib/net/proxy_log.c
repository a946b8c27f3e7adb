/* What the allowlist proxy let through and refused, by destination, for
 * the result record. The destinations are the payload's choice, so the
 * list is bounded: the first PROXY_LOG_MAX distinct ones are kept with
 * their counts (found through a small hash index, not a scan), and
 * requests for any further one are only counted. */
#include <stdlib.h>
#include <string.h>

#include "net/proxy.h"

#define SLOTS (2 * PROXY_LOG_MAX)   /* open addressing, at most half full */

static size_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;   /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char) *s) * 1099511628211ull;
	return (size_t) (h % SLOTS);
}

void proxy_log_count(proxy_log *l, const char *name, const char *reason)
{
	proxy_log_add(l, name, reason, 1);
}

void proxy_log_add(proxy_log *l, const char *name, const char *reason, uint64_t count)
{
	if (!l->slots) {
		l->slots = calloc(SLOTS, sizeof(*l->slots));
		l->v = calloc(PROXY_LOG_MAX, sizeof(*l->v));
		if (!l->slots || !l->v) {
			free(l->slots);
			free(l->v);
			l->slots = NULL;
			l->v = NULL;
			l->other += count;
			return;
		}
	}
	size_t i = hash(name);
	for (; l->slots[i]; i = (i + 1) % SLOTS) {
		proxy_dest *d = &l->v[l->slots[i] - 1];
		if (!strcmp(d->name, name)) {
			d->count += count;
			return;
		}
	}
	if (l->n == PROXY_LOG_MAX) {
		l->other += count;
		return;
	}
	char *n = strdup(name), *r = reason ? strdup(reason) : NULL;
	if (!n || (reason && !r)) {
		free(n);
		free(r);
		l->other += count;
		return;
	}
	l->v[l->n] = (proxy_dest){ .name = n, .reason = r, .count = count };
	l->slots[i] = (uint16_t) ++l->n;
}

void proxy_log_free(proxy_log *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].name);
		free(l->v[i].reason);
	}
	free(l->v);
	free(l->slots);
	*l = (proxy_log){ 0 };
}

static uint64_t count_of(const proxy_log *l, const char *name)
{
	if (!l->slots)
		return 0;
	for (size_t i = hash(name); l->slots[i]; i = (i + 1) % SLOTS)
		if (!strcmp(l->v[l->slots[i] - 1].name, name))
			return l->v[l->slots[i] - 1].count;
	return 0;
}

void proxy_log_copy(const proxy_log *src, proxy_log *dst)
{
	*dst = (proxy_log){ 0 };
	for (size_t i = 0; i < src->n; i++)
		proxy_log_add(dst, src->v[i].name, src->v[i].reason, src->v[i].count);
	dst->other += src->other;
}

void proxy_log_since(const proxy_log *now, const proxy_log *before, proxy_log *out)
{
	*out = (proxy_log){ 0 };
	for (size_t i = 0; i < now->n; i++) {
		uint64_t was = count_of(before, now->v[i].name);
		if (now->v[i].count > was)
			proxy_log_add(out, now->v[i].name, now->v[i].reason, now->v[i].count - was);
	}
	out->other += now->other > before->other ? now->other - before->other : 0;
}
