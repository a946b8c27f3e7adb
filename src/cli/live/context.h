/* Code contexts of a long-lived sandbox, kept by its monitor (context.c). */
#ifndef NSBOX_CLI_CONTEXT_H
#define NSBOX_CLI_CONTEXT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nsbox.h"

typedef struct context context;

/* The context NAME of language LANG ("python" or "node"), made (without an
 * interpreter yet) if there is none; NULL with *why on a language mismatch. */
context *context_find(context **list, pthread_mutex_t *lock, const char *name, const char *lang, char *why,
                      size_t whylen);
/* Run one cell (code NULL: only restart, with `restart`): its output goes to
 * out_fd/err_fd, or with -1 into *record (the cell's record, malloc'ed JSON
 * with a newline, always set on success). Returns the exit status nsbox exec
 * gives (0, the cell's code, 124 on a timeout, 137 when the interpreter
 * died), or -1 with *why when the interpreter could not be started. */
int context_cell(context *c, nsbox_sandbox *sb, const char *code, uint64_t timeout_ms, bool restart,
                 int out_fd, int err_fd, char **record, char *why, size_t whylen);
void contexts_free(context **list);
/* Interrupt the running cell, if any (KeyboardInterrupt in Python). */
void context_interrupt(context *c);
/* The record of a cell that could not run (why), malloc'ed JSON. */
char *context_failed_record(const char *why);

#endif
