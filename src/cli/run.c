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
		/* Not one another user made first (the record holds the
		 * command line and the output). */
		int fd = -1;
		nsbox_error *oe = NULL;
		if (nsbox_output_open(a->result_file, &fd, &oe) < 0) {
			print_error(oe);
			nsbox_error_free(oe);
			rc = -1;
		} else if (write_all(fd, json, strlen(json)) < 0) {
			print_msg("write result file '%s': %s", a->result_file, strerror(errno));
			rc = -1;
		}
		if (fd >= 0)
			close(fd);
	}
	free(json);
	return rc;
}

void cli_print_warning(void *userdata, const char *message)
{
	(void) userdata;
	print_msg("warning: %s", message);
}

int cli_build_config(const run_args *a, nsbox_config **out, nsbox_error **e)
{
	nsbox_config *cfg = NULL;
	int r = config_with_policy(a->policy, &cfg, e);
	for (size_t i = 0; r == 0 && i < a->n_settings; i++)
		r = nsbox_config_set(cfg, a->settings[i].key, a->settings[i].value, a->settings[i].origin, e);
	if (r == 0 && a->argc)
		r = nsbox_config_set_command(cfg, a->argc, (const char *const *) a->argv, e);
	*out = cfg;
	return r;
}

/* SIGINT/SIGTERM/SIGHUP/SIGQUIT go to the supervisor's signalfd, which
 * forwards them to the sandbox; with `winch` (-t), SIGWINCH resizes its
 * terminal. */
int cli_signals_to_fd(sigset_t *old, bool winch)
{
	sigset_t set;
	(void) sigprocmask(SIG_SETMASK, NULL, old);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	if (winch)
		sigaddset(&set, SIGWINCH);
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
		nsbox_error *e = NULL;
		if (nsbox_output_open(a->stats_file, fd, &e) < 0) {
			print_error(e);
			nsbox_error_free(e);
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
	run_args a = { 0 };
	char msg[512];
	if ((extra ? parse_code_args : parse_run_args)(argc, argv, environ, &a, msg, sizeof(msg)) < 0) {
		print_msg("%s", msg);
		run_args_free(&a);
		return EXIT_SETUP;
	}
	if (a.help) {
		(extra ? run_code_help : run_help)(stdout);
		run_args_free(&a);
		return 0;
	}
	if (a.tty && (a.json || a.max_output)) {
		print_msg("-t gives the command a terminal, whose output is not captured: not with --json or --max-output");
		run_args_free(&a);
		return EXIT_SETUP;
	}
	nsbox_config *cfg = NULL;
	nsbox_error *e = NULL;
	int rc = EXIT_SETUP;
	uint64_t stats_ms = 0;
	int stats_fd = -1;
	if (cli_build_config(&a, &cfg, &e) < 0) {
		/* A bad option value is a run that failed before it started. */
		print_error(e);
		nsbox_result *r = NULL;
		if (nsbox_result_new_failed(cfg, e, &r, NULL) == 0)
			(void) emit_record(r, &a);
		nsbox_result_free(r);
		nsbox_error_free(e);
		goto out;
	}
	if (open_stats(&a, &stats_ms, &stats_fd) < 0)
		goto out;
	sigset_t old;
	int sfd = cli_signals_to_fd(&old, a.tty);
	nsbox_run_options o = {
		.version = NSBOX_RUN_OPTIONS_VERSION,
		.flags = ((a.json || a.max_output) ? NSBOX_SPAWN_CAPTURE : 0) | NSBOX_RUN_UNDUMPABLE | NSBOX_RUN_EXITING |
		         (a.tty ? NSBOX_SPAWN_TTY : 0),
		.config = cfg,
		.lang = extra ? extra->lang : NULL,
		.code = extra ? extra->data : NULL,
		.code_len = extra ? extra->len : 0,
		.stdin_fd = a.interactive ? 0 : -1,
		.stdout_fd = -1,
		.stderr_fd = -1,
		.signal_fd = sfd,
		.stats_interval_ms = stats_ms,
		.stats_fd = stats_fd,
		.on_warning = cli_print_warning,
	};
	nsbox_result *res = NULL;
	int ran = nsbox_run(&o, &res, &e);
	if (res) {
		if (!a.json)
			print_captured(res);
		const nsbox_error *why = nsbox_result_error(res);
		if (why)
			print_error(why);
		rc = nsbox_result_exit_status(res);
		if (emit_record(res, &a) < 0 && rc == 0)
			rc = EXIT_SETUP;
	}
	if (ran < 0) {
		/* Not started, or its audit line could not be written. */
		print_error(e);
		rc = EXIT_SETUP;
	}
	nsbox_error_free(e);
	nsbox_result_free(res);
	if (sfd >= 0)
		close(sfd);
	(void) sigprocmask(SIG_SETMASK, &old, NULL);
out:
	if (stats_fd > 2)
		close(stats_fd);
	nsbox_config_free(cfg);
	run_args_free(&a);
	return rc;
}
