/* The commands of started sandboxes (nsbox start, exec, ps, stop, pause,
 * resume, cp, ls, process): thin doors over libnsbox's nsbox_live_* and
 * the functions every nsbox_sandbox takes. */
#ifndef NSBOX_CLI_LIVE_H
#define NSBOX_CLI_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include "args.h"
#include "nsbox.h"

/* Start a sandbox from parsed run options (a->name or a generated one):
 * the configuration as nsbox run builds it, its --timeout each exec's.
 * flags: NSBOX_LIVE_*. 0 with *out (may be NULL: let go at once) and its
 * name in name; 2 when the name is taken; else EXIT_SETUP. Says why. */
int live_cli_start(const run_args *a, uint32_t flags, char *name, size_t name_len, nsbox_sandbox **out);

/* A handle on NAME (which must be running), or NULL having said why. */
nsbox_sandbox *live_cli_connect(const char *name);

/* Durations as the options take them (30s, 10m; 0: none). */
int live_cli_ms(const char *what, const char *v, uint64_t *ms);

int cmd_pause(int argc, char **argv);
int cmd_resume(int argc, char **argv);
int cmd_cp(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_process(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);

#endif
