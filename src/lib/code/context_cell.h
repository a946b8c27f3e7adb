/* A context's handle and a cell's end, shared by context.c (the handle,
 * the interpreter, running a cell) and context_result.c (what the cell's
 * end was, and its record). */
#ifndef NSBOX_CODE_CONTEXT_CELL_H
#define NSBOX_CODE_CONTEXT_CELL_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "code/lang.h"
#include "sandbox/sandbox.h"

struct nsbox_context {
	pthread_mutex_t lock;   /* one cell at a time */
	nsbox_sandbox *sb;      /* the long-lived sandbox (the caller's) */
	const code_lang *lang;
	char name[64];
	nsbox_sandbox *ex;      /* the interpreter, or NULL (started at the next cell) */
	int sock, out[2];
	unsigned cells;
	bool restarted;         /* the next cell's record says its interpreter is new */
	bool running;           /* a cell runs (context_interrupt) */
	bool remote;            /* the monitor's context of this name (sb remote) */
	bool owned;             /* ...made for this handle: closed with it */
};

/* What the cell's end was, before the record is made of it. */
typedef struct cell_end {
	nsbox_status status;
	int exit_code, signal;
	bool timed_out, state_lost;
	const char *kind;       /* the error's kind, NULL: no error */
	char message[600];
} cell_end;

/* The reply's rich results, checked, as JSON; malloc'ed, or NULL. */
char *context_cell_results(json_t *reply);
/* The reply of an agent that answered: its status, as a run's end. */
void context_cell_reply(const nsbox_context *c, json_t *reply, bool timed_out, uint64_t timeout_ms, cell_end *e);
/* No answer: the interpreter's own end (`ended`, or NULL) says why. */
void context_cell_lost(const nsbox_context *c, const nsbox_result *ended, bool oom, bool timed_out,
                       uint64_t timeout_ms, uint64_t memory, cell_end *e);
/* The record of c's next cell when its interpreter did not start (status
 * setup_failed; it takes `why`); NULL when out of memory. */
nsbox_result *context_failed_record(const nsbox_context *c, nsbox_error *why);
/* The cell's record; NULL when out of memory. */
nsbox_result *context_cell_record(const nsbox_context *c, unsigned cell, bool restarted, const cell_end *e,
                                  double ms, capture caps[2], bool captured, const cg_stats *base,
                                  uint64_t timeout_ms);

#endif
