/* Classifying failed code runs (code_error.c), for one-shot runs and
 * contexts' cells alike. */
#ifndef NSBOX_CODE_ERROR_H
#define NSBOX_CODE_ERROR_H

#include "sandbox/sandbox.h"

/* Set r's error as a code run's: kind ("timeout", "oom", "runtime_error"
 * ...) and message. A runtime error of a run that hit the process limit
 * says so (kind "pids_limit"). -ENOMEM when it could not. */
int code_error_set(nsbox_result *r, const char *kind, const char *message);

#endif
