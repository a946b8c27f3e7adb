/* The one option parser of every nsbox subcommand (opts.c): each option is
 * one row of a table, with its help; --help is printed from the same rows.
 * Long options match exactly (no abbreviations: a Docker spelling such as
 * --tmpfs never lands on --tmpfs-size), as --name VALUE or --name=VALUE;
 * short options as -x VALUE, -xVALUE, or bundled flags (-it). No side
 * effects: unit-tested (tests/unit/test_args.c) and fuzzed. */
#ifndef NSBOX_CLI_OPTS_H
#define NSBOX_CLI_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct opt_def {
	const char *name;      /* the long name without "--"; NULL ends the table */
	char short_name;       /* 0: none */
	const char *value;     /* the value's name in --help ("SIZE"); NULL: a flag */
	int id;                /* what opt_next() returns for it */
	const char *help;      /* one line; "\n" starts a continuation line */
	const char *key;       /* a policy key the value sets (nsbox_config_set), or NULL */
} opt_def;

/* As a row's value: a flag that also takes --name=VALUE, as Docker's
 * boolean flags do (--rm=false); opt_next's *value is then VALUE (else
 * NULL), for opt_bool(). */
extern const char opt_boolean[];
#define OPT_BOOL opt_boolean
/* Does the row take a value (not a flag)? */
#define opt_has_value(d) ((d)->value && (d)->value != opt_boolean)

typedef struct opt_state {
	const opt_def *defs;
	int argc;
	char **argv;
	int i;                 /* the next argument to read */
	const char *bundle;    /* the rest of a bundle of short flags (-it) */
	bool stop;             /* stop at the first operand (a command follows) */
	bool done;
} opt_state;

#define OPT_DONE (-1)      /* no more options: the operands start at st->i */
#define OPT_OPERAND (-2)   /* (not stopping) *value is an operand */
#define OPT_ERROR (-3)     /* the message is in err */

/* Parse argv[1..]: with `stop`, options end at the first operand (the
 * command); otherwise operands may come between options. */
void opt_init(opt_state *st, const opt_def *defs, int argc, char **argv, bool stop);
/* The next option's id (*value its value, *def its row), OPT_OPERAND,
 * OPT_DONE, or OPT_ERROR with a message naming the argument. */
int opt_next(opt_state *st, const char **value, const opt_def **def, char *err, size_t errlen);
/* The option lines of a --help, from the table. */
void opt_help(FILE *f, const opt_def *defs);
/* Whether `arg` is an option of the table that takes its value from the
 * next argument (--name, -x; not --name=V or -xV). */
bool opt_takes_value(const opt_def *defs, const char *arg);
const opt_def *opt_find_long(const opt_def *defs, const char *name, size_t len);
/* A boolean flag's value: NULL (given bare), 1/t/true/TRUE/True or
 * 0/f/false/FALSE/False (Go's ParseBool, which Docker's flags use):
 * 1 or 0, or -1 for anything else. */
int opt_bool(const char *value);

#endif
