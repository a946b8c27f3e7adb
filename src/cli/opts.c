/* The option parser of every subcommand (opts.h). */
#include <stdio.h>
#include <string.h>

#include "opts.h"

const char opt_boolean[] = "";

void opt_init(opt_state *st, const opt_def *defs, int argc, char **argv, bool stop)
{
	*st = (opt_state){ .defs = defs, .argc = argc, .argv = argv, .i = 1, .stop = stop };
}

const opt_def *opt_find_long(const opt_def *defs, const char *name, size_t len)
{
	for (const opt_def *d = defs; d->name; d++)
		if (strlen(d->name) == len && !strncmp(d->name, name, len))
			return d;
	return NULL;
}

static const opt_def *find_short(const opt_def *defs, char c)
{
	for (const opt_def *d = defs; d->name; d++)
		if (d->short_name && d->short_name == c)
			return d;
	return NULL;
}

/* "unknown option '--x'", "option '-x' needs a value" ...: `what` is
 * the message around the option as written (dashes and n bytes of a). */
enum fail_kind { UNKNOWN, NEEDS_VALUE, NO_VALUE };

static int fail(char *err, size_t errlen, enum fail_kind k, const char *dashes, const char *a, int n)
{
	if (k == UNKNOWN)
		snprintf(err, errlen, "unknown option '%s%.*s'", dashes, n, a);
	else if (k == NEEDS_VALUE)
		snprintf(err, errlen, "option '%s%.*s' needs a value", dashes, n, a);
	else
		snprintf(err, errlen, "option '%s%.*s' takes no value", dashes, n, a);
	return OPT_ERROR;
}

/* A short option from the bundle at st->bundle. */
static int next_short(opt_state *st, const char **value, const opt_def **def, char *err, size_t errlen)
{
	char c = *st->bundle++;
	const opt_def *d = find_short(st->defs, c);
	if (!d) {
		char s[2] = { c, 0 };
		st->bundle = NULL;
		return fail(err, errlen, UNKNOWN, "-", s, 1);
	}
	*def = d;
	*value = NULL;
	if (opt_has_value(d)) {
		if (*st->bundle) {        /* -m512m */
			*value = st->bundle;
		} else if (st->i < st->argc) {
			*value = st->argv[st->i++];
		} else {
			st->bundle = NULL;
			char s[2] = { c, 0 };
			return fail(err, errlen, NEEDS_VALUE, "-", s, 1);
		}
		st->bundle = NULL;
	} else if (!*st->bundle) {
		st->bundle = NULL;
	}
	return d->id;
}

int opt_next(opt_state *st, const char **value, const opt_def **def, char *err, size_t errlen)
{
	*value = NULL;
	*def = NULL;
	if (st->bundle)
		return next_short(st, value, def, err, errlen);
	for (;;) {
		if (st->done || st->i >= st->argc)
			return OPT_DONE;
		const char *a = st->argv[st->i];
		if (!strcmp(a, "--")) {
			st->i++;
			st->done = true;
			return OPT_DONE;
		}
		if (a[0] != '-' || a[1] == '\0') {   /* an operand ("-" is one: stdin) */
			if (st->stop) {
				st->done = true;
				return OPT_DONE;
			}
			st->i++;
			*value = a;
			return OPT_OPERAND;
		}
		st->i++;
		if (a[1] != '-') {
			st->bundle = a + 1;
			return next_short(st, value, def, err, errlen);
		}
		const char *name = a + 2, *eq = strchr(name, '=');
		size_t len = eq ? (size_t) (eq - name) : strlen(name);
		const opt_def *d = opt_find_long(st->defs, name, len);
		if (!d)
			return fail(err, errlen, UNKNOWN, "--", name, (int) len);
		*def = d;
		if (!opt_has_value(d)) {
			if (eq && d->value != opt_boolean)
				return fail(err, errlen, NO_VALUE, "--", name, (int) len);
			*value = eq ? eq + 1 : NULL;
			return d->id;
		}
		if (eq) {
			*value = eq + 1;
		} else if (st->i < st->argc) {
			*value = st->argv[st->i++];
		} else {
			return fail(err, errlen, NEEDS_VALUE, "--", name, (int) len);
		}
		return d->id;
	}
}

void opt_help(FILE *f, const opt_def *defs)
{
	for (const opt_def *d = defs; d->name; d++) {
		if (!d->help)
			continue;   /* a hidden row (an alias) */
		char head[64];
		if (d->short_name)
			snprintf(head, sizeof(head), "  -%c, --%s%s%s", d->short_name, d->name, opt_has_value(d) ? " " : "",
			         opt_has_value(d) ? d->value : "");
		else
			snprintf(head, sizeof(head), "      --%s%s%s", d->name, opt_has_value(d) ? " " : "",
			         opt_has_value(d) ? d->value : "");
		const char *h = d->help;
		size_t n = strcspn(h, "\n");
		if (strlen(head) < 26)
			fprintf(f, "%-26s%.*s\n", head, (int) n, h);
		else
			fprintf(f, "%s\n%26s%.*s\n", head, "", (int) n, h);
		for (h += n; *h == '\n'; h += n) {
			h++;
			n = strcspn(h, "\n");
			fprintf(f, "%26s%.*s\n", "", (int) n, h);
		}
	}
}

int opt_bool(const char *v)
{
	static const char *const yes[] = { "1", "t", "T", "true", "TRUE", "True" };
	static const char *const no[] = { "0", "f", "F", "false", "FALSE", "False" };
	if (!v)
		return 1;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!strcmp(v, yes[i]))
			return 1;
		if (!strcmp(v, no[i]))
			return 0;
	}
	return -1;
}

bool opt_takes_value(const opt_def *defs, const char *arg)
{
	if (arg[0] != '-' || !arg[1])
		return false;
	if (arg[1] != '-') {   /* -x: the last short option of a bundle takes the next argument */
		const opt_def *d = NULL;
		for (const char *c = arg + 1; *c; c++) {
			d = find_short(defs, *c);
			if (!d || opt_has_value(d))
				return d && !c[1];
		}
		return false;
	}
	if (strchr(arg, '='))
		return false;
	const opt_def *d = opt_find_long(defs, arg + 2, strlen(arg + 2));
	return d && opt_has_value(d);
}
