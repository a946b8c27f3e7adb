/* Warm pools of code runs (warm.c). */
#ifndef NSBOX_CODE_WARM_H
#define NSBOX_CODE_WARM_H

#include <stdbool.h>

#include "code/lang.h"

/* A module or package name a pool may preload (letters, digits, _ . - @ /,
 * no "..": nothing that could break out of the hook's literal). */
bool code_module_name_ok(const char *m);

/* run_cfg (a code_config() of the language) with the warm hook added: the
 * interpreter starts, imports `preload` (NULL-terminated, may be NULL),
 * then reads the code from stdin and runs it as the cold run would. */
int code_warm_config(const nsbox_config *run_cfg, const code_lang *l, const char *const *preload,
                     nsbox_config **out, nsbox_error **err);

#endif
