/* The nsbox command: subcommands and shared output helpers. */
#ifndef NSBOX_CLI_H
#define NSBOX_CLI_H

#include "nsbox.h"

#define EXIT_SETUP 125

int cmd_run(int argc, char **argv);
int cmd_policy(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cli_main(int argc, char **argv);

/* "nsbox: <message>" on stderr. */
void print_error(const nsbox_error *e);
void print_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Defaults, then the policy (FILE, or none), as the run and policy commands
 * build them. */
int config_with_policy(const char *policy, nsbox_config **out, nsbox_error **err);

#endif
