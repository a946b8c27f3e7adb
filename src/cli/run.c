/* `nsbox run`: build the configuration, start the sandbox, supervise it,
 * print the result. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"

extern char **environ;

static int write_all(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(fd, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		s += w;
		n -= (size_t) w;
	}
	return 0;
}

static int emit_record(const nsbox_result *r, const run_args *a)
{
	if (!a->json && !a->result_file)
		return 0;
	char *json = NULL;
	nsbox_error *e = NULL;
	if (nsbox_result_to_json(r, &json, &e) < 0) {
		print_error(e);
		nsbox_error_free(e);
		return -1;
	}
	int rc = 0;
	if (a->json && write_all(1, json, strlen(json)) < 0)
		rc = -1;
	if (a->result_file) {
		int fd = open(a->result_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0 || write_all(fd, json, strlen(json)) < 0) {
			print_msg("write result file '%s': %s", a->result_file, strerror(errno));
			rc = -1;
		}
		if (fd >= 0)
			close(fd);
	}
	free(json);
	return rc;
}

/* The audit log is opened before anything starts: with the default
 * --audit-on-error fail, a run that could not be audited never begins. */
static int open_audit(const run_args *a, int *fd)
{
	*fd = -1;
	if (!a->audit_log)
		return 0;
	nsbox_error *e = NULL;
	if (nsbox_audit_open(a->audit_log, fd, &e) == 0)
		return 0;
	if (a->audit_warn)
		print_msg("warning: running without an audit line: %s", nsbox_error_message(e));
	else
		print_error(e);
	nsbox_error_free(e);
	return a->audit_warn ? 0 : -1;
}

/* After the run: a line that cannot be written fails the run (125) unless
 * --audit-on-error warn. */
static int audit_run(const run_args *a, int fd, const nsbox_result *r)
{
	if (fd < 0)
		return 0;
	nsbox_error *e = NULL;
	if (nsbox_audit_append(fd, r, &e) == 0)
		return 0;
	if (a->audit_warn)
		print_msg("warning: %s", nsbox_error_message(e));
	else
		print_error(e);
	nsbox_error_free(e);
	return a->audit_warn ? 0 : -1;
}

/* Artifacts are a record for later, not a gate: a failure to keep them is
 * reported and the run's status stands. */
static void keep_artifacts(const run_args *a, const nsbox_result *r)
{
	if (!a->artifacts)
		return;
	nsbox_error *e = NULL;
	if (nsbox_artifacts_store(a->artifacts, r, a->store_code ? a->store_code : "always", a->artifacts_keep,
	                          NULL, &e) < 0) {
		print_msg("warning: %s", nsbox_error_message(e));
		nsbox_error_free(e);
	}
}

static int fail_before_start(const run_args *a, const nsbox_config *cfg, nsbox_error *e, int audit_fd)
{
	print_error(e);
	nsbox_result *r = NULL;
	if (nsbox_result_new_failed(cfg, e, &r, NULL) == 0) {
		(void) emit_record(r, a);
		(void) audit_run(a, audit_fd, r);
		keep_artifacts(a, r);
		nsbox_result_free(r);
	}
	nsbox_error_free(e);
	return EXIT_SETUP;
}

static int build_config(const run_args *a, nsbox_config **out, nsbox_error **e)
{
	nsbox_config *cfg = NULL;
	int r = config_with_policy(a->policy, &cfg, e);
	for (size_t i = 0; r == 0 && i < a->n_settings; i++)
		r = nsbox_config_set(cfg, a->settings[i].key, a->settings[i].value, a->settings[i].origin, e);
	if (r == 0)
		r = nsbox_config_set_command(cfg, a->argc, (const char *const *) a->argv, e);
	*out = cfg;
	return r;
}

static int add_extra(nsbox_config *cfg, const run_extra *x, nsbox_error **e)
{
	int r = nsbox_config_add_file(cfg, x->file, x->data, x->len, 0644, e);
	for (const char *const *v = x->env; r == 0 && v && *v; v++)
		r = nsbox_config_set(cfg, "environment.set", *v, "run-code", e);
	return r;
}

static const char *const default_blocked[] = { "os", "subprocess", "shutil", "socket", "pathlib" };

static void free_names(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* The Python import gate, before the run: block refuses (also when the
 * checker itself fails: fail closed); warn runs and records what it saw.
 * Returns -1 when the run must not start (the record is out). */
static int import_gate(const run_args *a, const nsbox_config *cfg, const run_extra *x, int audit_fd,
                       char ***hits, size_t *n_hits, const char **mode)
{
	*mode = a->import_gate;
	if (!x || strcmp(x->lang, "python") || !strcmp(*mode, "off"))
		return 0;
	const char *const *list = a->n_blocked ? a->blocked : default_blocked;
	size_t n = a->n_blocked ? a->n_blocked : sizeof(default_blocked) / sizeof(*default_blocked);
	nsbox_error *e = NULL;
	int r = nsbox_import_gate_check(cfg, x->data, x->len, list, n, hits, n_hits, &e);
	bool block = !strcmp(*mode, "block");
	if (r == 0)
		return 0;
	if (!block) {
		/* warn: a blocked import, or a checker that failed, is said and
		 * the run goes on. */
		print_msg("warning: %s", nsbox_error_message(e));
		nsbox_error_free(e);
		return 0;
	}
	print_error(e);
	nsbox_result *res = NULL;
	if (nsbox_result_new_failed(cfg, e, &res, NULL) == 0) {
		(void) nsbox_result_set_imports(res, *mode, (const char *const *) *hits, *n_hits, NULL);
		(void) emit_record(res, a);
		(void) audit_run(a, audit_fd, res);
		keep_artifacts(a, res);
		nsbox_result_free(res);
	}
	nsbox_error_free(e);
	return -1;
}

/* SIGINT/SIGTERM/SIGHUP/SIGQUIT go to the supervisor's signalfd, which
 * forwards them to the sandbox. */
static int signals_to_fd(sigset_t *old)
{
	sigset_t set;
	(void) sigprocmask(SIG_SETMASK, NULL, old);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	if (sigprocmask(SIG_BLOCK, &set, old) < 0)
		return -1;
	return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

static void print_captured(const nsbox_result *r)
{
	for (int s = 1; s <= 2; s++) {
		size_t len = 0;
		const char *text = nsbox_result_output(r, s, &len);
		if (text)
			(void) write_all(s, text, len);
	}
}

/* --stats-interval DURATION [--stats-file FILE]: samples go to FILE or stderr. */
static int open_stats(const run_args *a, uint64_t *ms, int *fd)
{
	if (!a->stats_interval) {
		if (a->stats_file)
			print_msg("--stats-file needs --stats-interval");
		return a->stats_file ? -1 : 0;
	}
	if (nsbox_parse_duration_ms(a->stats_interval, ms) < 0 || *ms < 10) {
		print_msg("--stats-interval: invalid value '%s' (expected a duration of at least 10ms such as 1s or 500ms)",
		          a->stats_interval);
		return -1;
	}
	*fd = 2;
	if (a->stats_file) {
		*fd = open(a->stats_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (*fd < 0) {
			print_msg("open stats file '%s': %s", a->stats_file, strerror(errno));
			return -1;
		}
	}
	return 0;
}

int cmd_run(int argc, char **argv)
{
	return run_with(argc, argv, NULL);
}

int run_with(int argc, char **argv, const run_extra *extra)
{
	run_args a;
	char msg[512];
	if (parse_run_args(argc, argv, environ, &a, msg, sizeof(msg)) < 0) {
		print_msg("%s", msg);
		run_args_free(&a);
		return EXIT_SETUP;
	}
	if (a.help) {
		fputs(run_usage, stdout);
		run_args_free(&a);
		return 0;
	}
	nsbox_config *cfg = NULL;
	nsbox_error *e = NULL;
	int rc;
	int audit_fd = -1;
	char **hits = NULL;   /* the import gate's findings */
	size_t n_hits = 0;
	const char *gate_mode = "off";
	if (build_config(&a, &cfg, &e) < 0 || (extra && add_extra(cfg, extra, &e) < 0)) {
		rc = fail_before_start(&a, cfg, e, audit_fd);
		goto out;
	}
	(void) nsbox_config_audit(cfg, &a.audit_log, &a.audit_warn, &a.artifacts, &a.store_code, &a.artifacts_keep);
	(void) nsbox_config_import_gate(cfg, &a.import_gate, &a.blocked, &a.n_blocked);
	/* Before anything starts: a run that could not be audited is refused. */
	if (open_audit(&a, &audit_fd) < 0) {
		rc = EXIT_SETUP;
		goto out;
	}
	if (import_gate(&a, cfg, extra, audit_fd, &hits, &n_hits, &gate_mode) < 0) {
		rc = EXIT_SETUP;
		goto out;
	}
	uint64_t stats_ms = 0;
	int stats_fd = -1;
	if (open_stats(&a, &stats_ms, &stats_fd) < 0) {
		rc = EXIT_SETUP;
		goto out;
	}
	sigset_t old;
	int sfd = signals_to_fd(&old);
	nsbox_spawn_options o = {
		.version = NSBOX_SPAWN_OPTIONS_VERSION,
		.flags = (a.json || a.max_output) ? NSBOX_SPAWN_CAPTURE : 0,
		.config = cfg,
		.stdin_fd = a.interactive ? 0 : -1,
		.stdout_fd = -1,
		.stderr_fd = -1,
		.signal_fd = sfd,
		.stats_interval_ms = stats_ms,
		.stats_fd = stats_fd,
	};
	nsbox_sandbox *sb = NULL;
	nsbox_result *res = NULL;
	if (nsbox_spawn(&o, &sb, &e) < 0) {
		rc = fail_before_start(&a, cfg, e, audit_fd);
		goto restore;
	}
	const char *warning = nsbox_sandbox_warning(sb);
	if (warning)
		print_msg("warning: %s", warning);
	/* The id maps are written: from here the supervisor need not be
	 * ptrace-able or dumpable by anyone. */
	(void) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	int waited = nsbox_sandbox_wait(sb, &res, &e);
	nsbox_sandbox_free(sb);
	/* The sandbox is gone: be an ordinary process again (sanitizers and
	 * debuggers need it). */
	(void) prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
	if (waited < 0) {
		rc = fail_before_start(&a, cfg, e, audit_fd);
		goto restore;
	}
	if (extra && nsbox_result_classify_code(res, extra->lang, &e) < 0) {
		print_error(e);
		nsbox_error_free(e);
		e = NULL;
	}
	if (strcmp(gate_mode, "off"))
		(void) nsbox_result_set_imports(res, gate_mode, (const char *const *) hits, n_hits, NULL);
	if (!a.json)
		print_captured(res);
	const nsbox_error *why = nsbox_result_error(res);
	if (why)
		print_error(why);
	rc = nsbox_result_exit_status(res);
	if (emit_record(res, &a) < 0 && rc == 0)
		rc = EXIT_SETUP;
	if (audit_run(&a, audit_fd, res) < 0)
		rc = EXIT_SETUP;
	keep_artifacts(&a, res);
	nsbox_result_free(res);
restore:
	if (sfd >= 0)
		close(sfd);
	if (stats_fd > 2)
		close(stats_fd);
	(void) sigprocmask(SIG_SETMASK, &old, NULL);
out:
	free_names(hits, n_hits);
	if (audit_fd >= 0)
		close(audit_fd);
	nsbox_config_free(cfg);
	run_args_free(&a);
	return rc;
}
