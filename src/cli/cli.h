/* The nsbox command: subcommands and shared output helpers. */
#ifndef NSBOX_CLI_H
#define NSBOX_CLI_H

#include "nsbox.h"

#define EXIT_SETUP 125

int cmd_run(int argc, char **argv);
int cmd_policy(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_run_code(int argc, char **argv);
int cmd_image(int argc, char **argv);
int cmd_session(int argc, char **argv);
int cmd_mcp(int argc, char **argv);
int cmd_start(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_ps(int argc, char **argv);
int cmd_stop(int argc, char **argv);
int cmd_docker(int argc, char **argv);

/* What run-code adds to a run: the code and its language (the library
 * places and runs it). */
typedef struct run_extra {
	const char *data;
	size_t len;
	const char *lang;
} run_extra;

/* The run command, or with extras run-code's (argv[0] is "run"). */
int run_with(int argc, char **argv, const run_extra *extra);
int cli_main(int argc, char **argv);

/* "nsbox: <message>" on stderr. */
void print_error(const nsbox_error *e);
void print_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A library warning on stderr ("nsbox: warning: ..."): an on_warning. */
void cli_print_warning(void *userdata, const char *message);
struct run_args;
/* The configuration of parsed run options, as nsbox run builds it. */
int cli_build_config(const struct run_args *a, nsbox_config **out, nsbox_error **e);
/* SIGINT, SIGTERM, SIGHUP and SIGQUIT blocked and read from the signalfd
 * returned (the run forwards them); old: the mask to restore. */
#include <signal.h>
int cli_signals_to_fd(sigset_t *old, bool winch);

/* Defaults, then the policy (FILE, or none), as the run and policy commands
 * build them. */
int config_with_policy(const char *policy, nsbox_config **out, nsbox_error **err);

#endif
