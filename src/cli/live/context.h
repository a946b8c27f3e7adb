/* The named code contexts of a long-lived sandbox, kept by its monitor
 * (context.c): a registry over the library's contexts (nsbox_context). */
#ifndef NSBOX_CLI_CONTEXT_H
#define NSBOX_CLI_CONTEXT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "nsbox.h"

typedef struct context context;

/* The context NAME in sb; a new one is of language LANG ("python" or
 * "node"), its interpreter started now (*fresh then). NULL when it cannot
 * start (*err says why, or out of memory). A cell names its language too:
 * the library refuses one of another language. */
nsbox_context *context_find(context **list, pthread_mutex_t *lock, nsbox_sandbox *sb, const char *name,
                            const char *lang, bool *fresh, nsbox_error **err);
void contexts_free(context **list);

#endif
