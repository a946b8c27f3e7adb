/* Code contexts, library side (context.c, context_result.c): a persistent
 * interpreter in a long-lived sandbox, cells through nsbox_run(). */
#ifndef NSBOX_CODE_CONTEXT_H
#define NSBOX_CODE_CONTEXT_H

#include "nsbox.h"

/* For nsbox_run (run/run.c). */
const nsbox_config *context_config(const nsbox_context *c);
const char *context_language(const nsbox_context *c);
const char *context_sandbox_id(const nsbox_context *c);
/* Mark r as this context's (cell 0: a cell that never ran). */
void context_describe(const nsbox_context *c, nsbox_result *r);
/* Interrupt the running cell (KeyboardInterrupt); none: nothing. */
void context_interrupt(nsbox_context *c);
/* The started sandbox whose monitor holds c, or NULL (a context here). */
nsbox_sandbox *context_remote(const nsbox_context *c);
/* Run o->code as the next cell; *out its record. -ECANCELED when the
 * cancel fired before it started. */
int context_cell(nsbox_context *c, const nsbox_run_options *o, nsbox_result **out, nsbox_error **err);
/* run.c: a cell's cancel handle reaches its context while it runs. */
void context_cancel_attach(nsbox_cancel *c, nsbox_context *ctx);
void context_cancel_detach(nsbox_cancel *cancel);

#endif
