/* Parsing `nsbox run` arguments into settings (unit-tested: no side effects). */
#ifndef NSBOX_CLI_ARGS_H
#define NSBOX_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct setting {
	const char *key;      /* a policy key for nsbox_config_set */
	const char *value;    /* points into argv or the environment */
	const char *origin;   /* "--memory", "NSBOX_TIMEOUT" ... */
} setting;

typedef struct run_args {
	const char *policy;       /* --policy, else NSBOX_POLICY, else NULL */
	setting *settings;        /* environment first, then options, in order */
	size_t n_settings;
	bool json;
	bool max_output;          /* --max-output given: capture without --json */
	bool interactive;
	bool tty;             /* -t: a terminal of the sandbox's own */
	const char *result_file;
	const char *stats_interval;   /* --stats-interval, validated by the caller */
	const char *stats_file;
	bool policy_given;        /* --policy on the line (not NSBOX_POLICY) */
	const char *trust;        /* --trust LEVEL: a shipped policy by name */
	/* Filled from the configuration (audit.*, code.*; options and
	 * NSBOX_AUDIT_LOG are settings of those keys) by the run command. */
	const char *import_gate;
	const char *const *blocked;
	size_t n_blocked;
	const char *artifacts;
	const char *store_code;
	unsigned artifacts_keep;
	const char *audit_log;
	bool audit_warn;
	const char *name;         /* nsbox start: --name, --idle-timeout, --lifetime */
	const char *idle_timeout;
	const char *lifetime;
	const char **publish;     /* --publish, NULL-terminated (malloc'ed) */
	size_t n_publish;
	bool pause_when_idle;
	const char *from;         /* --from SNAPSHOT */
	int argc;                 /* the command */
	char **argv;
	bool help;
} run_args;

/* Parse argv (argv[0] is "run"). `env` is the environment to read NSBOX_*
 * variables from. On error returns -1 and writes a message into errbuf. */
int parse_run_args(int argc, char **argv, char **env, run_args *out, char *errbuf, size_t errlen);
/* The same for `nsbox start` (argv[0] is "start"): no command; --name,
 * --idle-timeout and --lifetime. */
int parse_start_args(int argc, char **argv, char **env, run_args *out, char *errbuf, size_t errlen);
/* The same for `nsbox run-code` (argv[0] is "run-code", its own -c, --lang
 * and FILE taken out): no command. */
int parse_code_args(int argc, char **argv, char **env, run_args *a, char *errbuf, size_t errlen);
void run_args_free(run_args *a);
/* Does this `nsbox run` option take a value in the next argument? */
bool run_option_takes_value(const char *arg);
/* The run options' table (opts.h), and the --help of run and run-code. */
struct opt_def;
const struct opt_def *run_option_table(void);
void run_help(FILE *f);
void run_code_help(FILE *f);

#endif
