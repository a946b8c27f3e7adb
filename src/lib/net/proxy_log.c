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
	if (!l->slots) {
		l->slots = calloc(SLOTS, sizeof(*l->slots));
		l->v = calloc(PROXY_LOG_MAX, sizeof(*l->v));
		if (!l->slots || !l->v) {
			free(l->slots);
			free(l->v);
			l->slots = NULL;
			l->v = NULL;
			l->other++;
			return;
		}
	}
	size_t i = hash(name);
	for (; l->slots[i]; i = (i + 1) % SLOTS) {
		proxy_dest *d = &l->v[l->slots[i] - 1];
		if (!strcmp(d->name, name)) {
			d->count++;
			return;
		}
	}
	if (l->n == PROXY_LOG_MAX) {
		l->other++;
		return;
	}
	char *n = strdup(name), *r = reason ? strdup(reason) : NULL;
	if (!n || (reason && !r)) {
		free(n);
		free(r);
		l->other++;
		return;
	}
	l->v[l->n] = (proxy_dest){ .name = n, .reason = r, .count = 1 };
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
