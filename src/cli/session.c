/* `nsbox session ls | changes NAME | diff NAME | apply NAME [PATH...] | discard NAME`. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "opts.h"

enum { S_ALL = 1, S_JSON, S_POLICY, S_ESCAPE, S_FORCE, S_SKIP, S_KEEP, S_HELP };

static const opt_def session_opts[] = {
	{ "all", 0, NULL, S_ALL, "(ls, root) every root caller's sessions, not only this login's", NULL },
	{ "json", 0, NULL, S_JSON, "(changes) the changes as a JSON array", NULL },
	{ "policy", 0, "FILE", S_POLICY, "the policy whose workspace.deny_changes and workspace.git apply", NULL },
	{ "escape", 0, NULL, S_ESCAPE, "(diff) control characters in the content as \\xNN (the default on a\n"
	  "terminal); without it the diff is a patch that `patch -p1` applies", NULL },
	{ "force", 0, NULL, S_FORCE, "(apply) apply what is refused too (fifos, sockets, devices are left out)", NULL },
	{ "skip-denied", 0, NULL, S_SKIP, "(apply) leave what is refused out, apply the rest, and list what was left",
	  NULL },
	{ "keep", 0, NULL, S_KEEP, "(apply) keep the session afterwards (it is removed by default)", NULL },
	{ "help", 'h', NULL, S_HELP, "this help", NULL },
	{ NULL, 0, NULL, 0, NULL, NULL },
};

static void session_usage(FILE *f)
{
	fputs("Usage: nsbox session ls [--all]\n"
	      "       nsbox session changes [--json] [--policy FILE] NAME\n"
	      "       nsbox session diff [--escape] NAME\n"
	      "       nsbox session apply [--force | --skip-denied] [--keep] [--policy FILE] NAME [PATH...]\n"
	      "       nsbox session discard NAME\n"
	      "Options may come anywhere on the line; '--' ends them.\n", f);
	opt_help(f, session_opts);
}

static int fail(nsbox_error *e)
{
	print_error(e);
	nsbox_error_free(e);
	return EXIT_SETUP;
}

/* The policy, for workspace.deny_changes. */
static nsbox_config *policy_config(const char *policy)
{
	nsbox_config *cfg = NULL;
	nsbox_error *e = NULL;
	if (config_with_policy(policy ? policy : getenv("NSBOX_POLICY"), &cfg, &e) < 0) {
		print_error(e);
		nsbox_error_free(e);
		nsbox_config_free(cfg);
		return NULL;
	}
	return cfg;
}

/* "   mtime 2001-01-01 00:00:00.123456789" (UTC), what apply keeps. */
static void print_mtime(const nsbox_changes *c, size_t i)
{
	int64_t sec;
	long nsec;
	struct tm tm;
	if (nsbox_changes_get_times(c, i, &sec, &nsec, NULL, NULL) < 0 || (!sec && !nsec))
		return;
	time_t t = (time_t) sec;
	if (gmtime_r(&t, &tm))
		printf("   mtime %04d-%02d-%02d %02d:%02d:%02d.%09ld", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
		       tm.tm_hour, tm.tm_min, tm.tm_sec, nsec);
}

static int changes(const char *name, bool json, const char *policy)
{
	nsbox_config *cfg = policy_config(policy);
	nsbox_changes *c = NULL;
	nsbox_error *e = NULL;
	if (!cfg)
		return EXIT_SETUP;
	if (nsbox_session_changes(name, cfg, &c, &e) < 0) {
		nsbox_config_free(cfg);
		return fail(e);
	}
	int rc = 0;
	if (json) {
		/* Through the library's one JSON writer: a path is any bytes
		 * the payload chose. */
		char *text = NULL;
		if (nsbox_changes_json(c, &text) < 0)
			rc = EXIT_SETUP;
		else
			fputs(text, stdout);
		free(text);
	}
	for (size_t i = 0; !json && i < nsbox_changes_count(c); i++) {
		const char *path, *kind, *detail, *target;
		unsigned mode;
		bool denied;
		(void) nsbox_changes_get(c, i, &path, &kind, &detail, &denied);
		(void) nsbox_changes_get_mode(c, i, &mode, &target);
		char *p = nsbox_escape(path), *t = target ? nsbox_escape(target) : NULL;
		printf("%-12s %-9s %s", kind, detail, p ? p : "?");
		if (t)
			printf(" -> %s", t);
		if (mode)
			printf("   mode %04o", mode & 07777);
		print_mtime(c, i);
		const char *rule = nsbox_changes_rule(c, i);
		printf("%s\n", denied ? "   (denied by workspace.deny_changes)"
		              : rule && !strcmp(rule, "git") ? "   (git housekeeping: applied, workspace.git)"
		              : rule && !strcmp(rule, "dropped") ? "   (git housekeeping: dropped, never applied)" : "");
		free(p);
		free(t);
	}
	nsbox_changes_free(c);
	nsbox_config_free(cfg);
	return rc;
}

/* The library's one diff writer, straight to stdout: a patch, or escaped
 * for a terminal (the payload wrote those lines: they must not drive it). */
static int diff(const char *name, bool escape)
{
	nsbox_error *e = NULL;
	fflush(stdout);
	unsigned flags = escape || isatty(STDOUT_FILENO) ? NSBOX_DIFF_ESCAPE : 0;
	return nsbox_session_diff(name, flags, STDOUT_FILENO, &e) < 0 ? fail(e) : 0;
}

static int list(bool all)
{
	nsbox_error *e = NULL;
	char **names = NULL;
	size_t n = 0;
	if (nsbox_session_list_with(all ? NSBOX_SESSION_LIST_ALL : 0, &names, &n, &e) < 0)
		return fail(e);
	for (size_t i = 0; i < n; i++) {
		char *ws = NULL, *up = NULL;
		if (nsbox_session_paths(names[i], &ws, &up, NULL) == 0) {
			char *nm = nsbox_escape(names[i]), *w = nsbox_escape(ws);
			printf("%-20s %s\n", nm ? nm : "?", w ? w : "?");
			free(nm);
			free(w);
		}
		free(ws);
		free(up);
		free(names[i]);
	}
	free(names);
	return 0;
}

/* Apply, then say what was left out (on stderr: stdout stays empty). */
static int apply(const char *name, const char *const *paths, size_t n_paths, const char *policy, unsigned flags)
{
	nsbox_config *cfg = policy_config(policy);
	if (!cfg)
		return EXIT_SETUP;
	nsbox_apply_options o = { .version = NSBOX_APPLY_OPTIONS_VERSION, .flags = flags, .config = cfg,
	                          .paths = paths, .n_paths = n_paths };
	nsbox_changes *left = NULL;
	nsbox_error *e = NULL;
	int r = nsbox_session_apply_with(name, &o, &left, &e);
	nsbox_config_free(cfg);
	if (r < 0)
		return fail(e);
	for (size_t i = 0; i < nsbox_changes_count(left); i++) {
		const char *path, *why = nsbox_changes_why(left, i);
		(void) nsbox_changes_get(left, i, &path, NULL, NULL, NULL);
		char *p = nsbox_escape(path);
		fprintf(stderr, "nsbox: left out '%s': it %s\n", p ? p : "?", why ? why : "was refused");
		free(p);
	}
	if (nsbox_changes_count(left))
		fprintf(stderr, "nsbox: applied session '%s' except %zu change%s left out%s\n", name,
		        nsbox_changes_count(left), nsbox_changes_count(left) == 1 ? "" : "s",
		        r == 1 ? "; the session is removed" : "");
	nsbox_changes_free(left);
	return 0;
}

static int session_do(char **rest, int n, bool json, bool force, bool skip, bool keep, bool escape, bool all,
                      const char *policy)
{
	const char *sub = n > 0 ? rest[0] : "";
	nsbox_error *e = NULL;
	if (force && skip) {
		fprintf(stderr, "nsbox: session: --force and --skip-denied ask opposite things; give one\n");
		return EXIT_SETUP;
	}
	if (n == 1 && !strcmp(sub, "ls"))
		return list(all);
	if (n == 2 && !strcmp(sub, "changes"))
		return changes(rest[1], json, policy);
	if (n == 2 && !strcmp(sub, "diff"))
		return diff(rest[1], escape);
	if (n == 2 && !strcmp(sub, "discard"))
		return nsbox_session_discard(rest[1], &e) < 0 ? fail(e) : 0;
	if (n >= 2 && !strcmp(sub, "apply"))
		return apply(rest[1], (const char *const *) rest + 2, (size_t) (n - 2), policy,
		             (force ? NSBOX_APPLY_FORCE : 0) | (skip ? NSBOX_APPLY_SKIP_DENIED : 0) |
		             (keep ? NSBOX_APPLY_KEEP : 0));
	session_usage(stderr);
	return EXIT_SETUP;
}

int cmd_session(int argc, char **argv)
{
	bool json = false, force = false, skip = false, keep = false, escape = false, all = false;
	const char *policy = NULL;
	/* Options anywhere on the line (`apply --force NAME`, `apply NAME
	 * --force`): the operands (the subcommand first) in their order. */
	char **rest = calloc((size_t) argc + 1, sizeof(*rest));
	if (!rest) {
		print_msg("session: %s", strerror(ENOMEM));
		return EXIT_SETUP;
	}
	int n = 0;
	opt_state st;
	opt_init(&st, session_opts, argc, argv, false);
	const char *v;
	const opt_def *d;
	char err[256];
	int id;
	while ((id = opt_next(&st, &v, &d, err, sizeof(err))) != OPT_DONE) {
		switch (id) {
		case OPT_OPERAND: rest[n++] = (char *) v; break;
		case S_JSON: json = true; break;
		case S_FORCE: force = true; break;
		case S_SKIP: skip = true; break;
		case S_KEEP: keep = true; break;
		case S_ESCAPE: escape = true; break;
		case S_ALL: all = true; break;
		case S_POLICY: policy = v; break;
		case S_HELP:
			session_usage(stdout);
			free(rest);
			return 0;
		default:
			fprintf(stderr, "nsbox: session: %s\n", err);
			session_usage(stderr);
			free(rest);
			return EXIT_SETUP;
		}
	}
	for (int i = st.i; i < argc; i++)   /* after '--' */
		rest[n++] = argv[i];
	int rc = session_do(rest, n, json, force, skip, keep, escape, all, policy);
	free(rest);
	return rc;
}
