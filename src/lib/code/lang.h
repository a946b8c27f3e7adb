/* The languages of code runs, once for every door: where `run-code` puts
 * the code, what runs it, the interpreter's variables, and the in-sandbox
 * agents (code contexts, warm pools) embedded from code/agents/. */
#ifndef NSBOX_CODE_LANG_H
#define NSBOX_CODE_LANG_H

#include <stdbool.h>
#include <stddef.h>

#include "nsbox.h"

typedef struct code_lang {
	const char *name;          /* "python", "node", "bash" */
	const char *file;          /* where a run puts the code: "/tmp/main.py" */
	const char *interp;        /* what runs it, looked up in PATH inside */
	const char *const *env;    /* NAME=VALUE the interpreter gets (NULL-terminated) */
	const char *inline_flag;   /* code on the command line (an exec): "-c", "-e" */
	const char *context_agent; /* the code-context agent (code_agent_text), or NULL */
	const char *warm_agent;    /* the warm pool's hook, or NULL */
} code_lang;

/* The language called `name`, or NULL. */
const code_lang *code_lang_find(const char *name);
/* "python, node, bash": for error messages. */
const char *code_lang_names(void);

/* An agent's text by its name in code/agents/ without the extension
 * ("context_python"), or NULL. Generated from the files (agents_builtin.c). */
const char *code_agent_text(const char *name);

/* A copy of `base` set up to run `code` as `nsbox run-code` does: the code
 * written to the language's file during setup, the interpreter's
 * variables, the working directory /tmp unless the configuration names
 * one, and [interp, file] as the command. */
int code_config(const nsbox_config *base, const code_lang *l, const void *code, size_t len,
                nsbox_config **out, nsbox_error **err);

#endif
