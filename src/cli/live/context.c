/* The named code contexts of a long-lived sandbox (`nsbox exec NAME
 * --context C --lang L`): the monitor keeps one library context per name;
 * the interpreter, the protocol and the cells' records are the library's
 * (src/lib/code/context.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "live/context.h"

struct context {
	char name[64];
	pthread_mutex_t start;  /* one starter per context */
	nsbox_context *ctx;     /* NULL until its interpreter started */
	context *next;
};

nsbox_context *context_find(context **list, pthread_mutex_t *lock, nsbox_sandbox *sb, const char *name,
                            const char *lang, bool *fresh, nsbox_error **err)
{
	*fresh = false;
	pthread_mutex_lock(lock);
	context *c = *list;
	while (c && strcmp(c->name, name))
		c = c->next;
	if (!c && (c = calloc(1, sizeof(*c)))) {
		snprintf(c->name, sizeof(c->name), "%s", name);
		pthread_mutex_init(&c->start, NULL);
		c->next = *list;
		*list = c;
	}
	pthread_mutex_unlock(lock);
	if (!c)
		return NULL;
	pthread_mutex_lock(&c->start);
	if (!c->ctx && nsbox_context_new(sb, lang, name, &c->ctx, err) == 0)
		*fresh = true;
	nsbox_context *ctx = c->ctx;
	pthread_mutex_unlock(&c->start);
	return ctx;
}

void contexts_free(context **list)
{
	for (context *c = *list, *n; c; c = n) {
		n = c->next;
		nsbox_context_free(c->ctx);
		pthread_mutex_destroy(&c->start);
		free(c);
	}
	*list = NULL;
}
