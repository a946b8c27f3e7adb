/* Started sandboxes from the command line: `nsbox start`, `exec`, `ps`,
 * `stop`, `pause`, `resume`. The sandbox is the library's (nsbox_live_*):
 * a monitor process of its own holds it, and these commands reach it by
 * name, as the SDK and every other door do. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "opts.h"
#include "live/live_cli.h"

extern char **environ;

int live_cli_ms(const char *what, const char *v, uint64_t *ms)
{
	if (!v)
		return 0;
	if (nsbox_parse_duration_ms(v, ms) < 0) {
		print_msg("%s: invalid duration '%s' (such as 30s, 10m, 2h; 0: none)", what, v);
		return -1;
	}
	return 0;
}

nsbox_sandbox *live_cli_connect(const char *name)
{
	nsbox_sandbox *sb = NULL;
	nsbox_error *e = NULL;
	if (nsbox_live_connect(name, &sb, &e) < 0) {
		print_error(e);
		nsbox_error_free(e);
		return NULL;
	}
	return sb;
}

int live_cli_start(const run_args *a, uint32_t flags, char *name, size_t name_len, nsbox_sandbox **out)
{
	nsbox_live_options o = { .version = NSBOX_LIVE_OPTIONS_VERSION,
		                 .flags = flags | (a->pause_when_idle ? NSBOX_LIVE_PAUSE_WHEN_IDLE : 0),
		                 .name = a->name,
		                 .publish = a->publish };
	if (out)
		*out = NULL;
	if (live_cli_ms("--idle-timeout", a->idle_timeout, &o.idle_timeout_ms) < 0 ||
	    live_cli_ms("--lifetime", a->lifetime, &o.lifetime_ms) < 0)
		return EXIT_SETUP;
	if (a->json || a->result_file || a->stats_interval || a->interactive || a->argc) {
		print_msg("start: --json, --result-file, --stats-interval and -i are options of nsbox exec");
		return EXIT_SETUP;
	}
	nsbox_config *cfg = NULL;
	nsbox_error *e = NULL;
	nsbox_sandbox *sb = NULL;
	/* --from: the snapshot's configuration is the policy, the options and
	 * NSBOX_* variables apply over it, as over any policy. */
	char snap_policy[4096];
	run_args with = *a;
	if (a->from) {
		if (a->policy_given || a->trust) {
			print_msg("start: --from takes the snapshot's configuration as the policy: not with --policy or "
			          "--trust");
			return EXIT_SETUP;
		}
		if (nsbox_snapshot_policy(a->from, snap_policy, sizeof(snap_policy), &e) < 0) {
			print_error(e);
			nsbox_error_free(e);
			return EXIT_SETUP;
		}
		with.policy = snap_policy;
		o.from = a->from;
	}
	int r = cli_build_config(&with, &cfg, &e);
	o.config = cfg;
	if (r == 0)
		r = nsbox_live_start(&o, &sb, &e);
	nsbox_config_free(cfg);
	if (r < 0) {
		print_error(e);
		nsbox_error_free(e);
		return r == -EEXIST ? 2 : EXIT_SETUP;
	}
	const char *w = nsbox_sandbox_warning(sb);
	if (w)
		print_msg("warning: %s", w);
	snprintf(name, name_len, "%s", nsbox_live_name(sb));
	if (out)
		*out = sb;
	else
		nsbox_sandbox_free(sb);
	return 0;
}

int cmd_start(int argc, char **argv)
{
	run_args a;
	char err[512];
	if (parse_start_args(argc, argv, environ, &a, err, sizeof(err)) < 0) {
		print_msg("%s", err);
		run_args_free(&a);
		return EXIT_SETUP;
	}
	if (a.help) {
		printf("Usage: nsbox start [--name NAME] [--idle-timeout D] [--lifetime D] [-p [ADDR:]HOSTPORT:PORT]...\n"
		       "                   [--pause-when-idle] [RUN OPTIONS]\n"
		       "Start a long-lived sandbox and print its name; run commands in it with\n"
		       "nsbox exec NAME -- COMMAND, copy files with nsbox cp, end it with nsbox stop NAME.\n"
		       "The run options are nsbox run's ('nsbox run --help'); --timeout is each exec's\n"
		       "default. It outlives this command (a monitor process holds it).\n");
		run_args_free(&a);
		return 0;
	}
	char name[64];
	int rc = live_cli_start(&a, NSBOX_LIVE_DETACHED, name, sizeof(name), NULL);
	if (rc == 0)
		printf("%s\n", name);
	run_args_free(&a);
	return rc;
}

/* ---- exec ------------------------------------------------------------------------ */

enum { X_JSON = 1, X_TIMEOUT, X_INTERACTIVE, X_TTY, X_WORKDIR, X_ENV, X_ENV_PASS, X_CONTEXT, X_LANG, X_CODE,
       X_RESTART, X_DETACH, X_HELP };

static const opt_def exec_opts[] = {
	{ "json", 0, NULL, X_JSON, "capture the output and print the result record as JSON", NULL },
	{ "timeout", 0, "DURATION", X_TIMEOUT, "kill the command (and all it started) after DURATION", NULL },
	{ "interactive", 'i', NULL, X_INTERACTIVE, "relay stdin to the command (default: /dev/null)", NULL },
	{ "tty", 't', NULL, X_TTY, "give the command a terminal of its own, relayed to\nthis one (with -i: "
	  "interactive; window size follows)", NULL },
	{ "workdir", 'w', "DIR", X_WORKDIR, "working directory inside (default: the sandbox's)", NULL },
	{ "env", 'e', "NAME=VALUE", X_ENV, "set a variable for this command (the sandbox's others stay)", NULL },
	{ "env-pass", 0, "NAME", X_ENV_PASS, "the same, with NAME's value here (if it is set)", NULL },
	{ "detach", 'd', NULL, X_DETACH, "run it in the background and print its id (see\nnsbox process)", NULL },
	{ "context", 0, "C", X_CONTEXT, "run a cell in the sandbox's persistent interpreter C", NULL },
	{ "lang", 0, "L", X_LANG, "the context's language: python (default) or node", NULL },
	{ "code", 'c', "CODE", X_CODE, "the cell's code (else from FILE, or stdin with -)", NULL },
	{ "restart", 0, NULL, X_RESTART, "a fresh interpreter before the cell (alone: only that)", NULL },
	{ "help", 'h', NULL, X_HELP, "show this help", NULL },
	{ 0 },
};

static void exec_help(FILE *f)
{
	fputs("Usage: nsbox exec NAME [OPTIONS] [--] COMMAND [ARG...]\n"
	      "   or: nsbox exec NAME --context C [--lang python|node] [--restart] (-c CODE | FILE | -)\n"
	      "Run COMMAND in the running sandbox NAME (nsbox start) and exit with its status;\n"
	      "with --detach, in the background; or a cell of code in its persistent\n"
	      "interpreter C (made at its first use): variables persist from one cell to the\n"
	      "next; a timeout interrupts the cell and keeps the interpreter.\n\n", f);
	opt_help(f, exec_opts);
}

/* The cell's code: -c, a file, or stdin ("-"); malloc'ed, *len its length. */
static char *read_code(const char *inline_code, const char *file, size_t *len)
{
	if (inline_code) {
		*len = strlen(inline_code);
		return strdup(inline_code);
	}
	int fd = strcmp(file, "-") ? open(file, O_RDONLY | O_CLOEXEC) : 0;
	if (fd < 0) {
		print_msg("exec: open '%s': %s", file, strerror(errno));
		return NULL;
	}
	size_t cap = 65536, n = 0;
	char *buf = malloc(cap);
	ssize_t r;
	while (buf && (r = read(fd, buf + n, cap - n - 1)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		/* (A request to the monitor holds at most 256 KiB.) */
		if (r < 0 || n + (size_t) r > (256u << 10) - 256) {
			print_msg("exec: read the code: %s", r < 0 ? strerror(errno) : "longer than 256 KiB");
			free(buf);
			buf = NULL;
			break;
		}
		n += (size_t) r;
		if (n + 1 == cap) {
			char *nb = realloc(buf, cap *= 2);
			if (!nb)
				free(buf);
			buf = nb;
		}
	}
	if (fd > 0)
		close(fd);
	if (buf)
		buf[n] = '\0';
	*len = n;
	return buf;
}

typedef struct exec_req {
	const char *name, *workdir, *timeout, *ctx_name, *lang, *code;
	bool json, interactive, tty, restart, detach;
	char **env;
	size_t n_env;
	int argc;
	char **argv;
} exec_req;

static int env_add(exec_req *x, bool pass, const char *arg)
{
	const char *eq = strchr(arg, '=');
	if (!pass ? !eq || eq == arg : !*arg || eq) {
		print_msg("exec: %s '%s': expected %s", pass ? "--env-pass" : "--env", arg, pass ? "a NAME" : "NAME=VALUE");
		return -1;
	}
	const char *v = pass ? getenv(arg) : NULL;
	if (pass && !v)
		return 0;   /* not set here: not set there, as with run's --env-pass */
	char *kv = NULL;
	if (!pass ? !(kv = strdup(arg)) : asprintf(&kv, "%s=%s", arg, v) < 0)
		return -1;
	x->env[x->n_env++] = kv;
	return 0;
}

/* The result as nsbox run shows it: the reason it failed, the record with
 * --json; its exit status. */
static int finish(int ran, nsbox_result *res, nsbox_error *e, bool json)
{
	int rc = EXIT_SETUP;
	if (res) {
		const nsbox_error *why = nsbox_result_error(res);
		if (why && !json)
			print_error(why);
		rc = nsbox_result_exit_status(res);
		char *j = NULL;
		if (json && nsbox_result_to_json(res, &j, NULL) == 0) {
			fputs(j, stdout);
			fputc('\n', stdout);
			if (fflush(stdout) != 0 && rc == 0)
				rc = EXIT_SETUP;
		}
		free(j);
	}
	if (ran < 0 && !res) {
		print_error(e);
		rc = EXIT_SETUP;
	}
	nsbox_result_free(res);
	nsbox_error_free(e);
	return rc;
}

static int exec_cell(nsbox_sandbox *sb, const exec_req *x, uint64_t tmo, int first)
{
	if (!x->ctx_name) {
		print_msg("exec: --lang, -c and --restart go with --context NAME");
		return EXIT_SETUP;
	}
	if (x->interactive || x->tty || x->workdir || x->n_env || x->detach || x->argc - first > 1 ||
	    (x->code && x->argc > first) || (!x->code && x->argc == first && !x->restart)) {
		print_msg("exec: a context takes -c CODE, a FILE or - (stdin); not -i, -t, -w, -e or -d");
		return EXIT_SETUP;
	}
	size_t len = 0;
	char *code = NULL;
	if ((x->code || x->argc > first) &&
	    !(code = read_code(x->code, x->argc > first ? x->argv[first] : NULL, &len)))
		return EXIT_SETUP;
	if (code && strlen(code) != len) {
		print_msg("exec: the code holds a NUL byte");
		free(code);
		return EXIT_SETUP;
	}
	nsbox_context *ctx = NULL;
	nsbox_error *e = NULL;
	if (nsbox_context_new(sb, x->lang ? x->lang : "python", x->ctx_name, &ctx, &e) < 0 ||
	    (x->restart && nsbox_context_restart(ctx, &e) < 0)) {
		/* A cell that could not run: with --json, its record says why. */
		nsbox_result *failed = NULL;
		if (x->json && code && nsbox_result_new_failed(NULL, e, &failed, NULL) == 0)
			return free(code), nsbox_context_free(ctx), finish(-1, failed, e, true);
		print_error(e);
		nsbox_error_free(e);
		nsbox_context_free(ctx);
		free(code);
		return EXIT_SETUP;
	}
	int rc = 0;
	if (code) {
		sigset_t old;
		int sfd = cli_signals_to_fd(&old, false);
		nsbox_run_options o = { .version = NSBOX_RUN_OPTIONS_VERSION,
			                .flags = x->json ? NSBOX_SPAWN_CAPTURE : 0,
			                .context = ctx,
			                .lang = x->lang,
			                .code = code,
			                .code_len = len,
			                .timeout_ms = tmo,
			                .stdin_fd = -1,
			                .stdout_fd = -1,
			                .stderr_fd = -1,
			                .signal_fd = sfd,
			                .stats_fd = -1,
			                .on_warning = cli_print_warning };
		nsbox_result *res = NULL;
		int ran = nsbox_run(&o, &res, &e);
		rc = finish(ran, res, e, x->json);
		if (sfd >= 0)
			close(sfd);
		(void) sigprocmask(SIG_SETMASK, &old, NULL);
	}
	free(code);
	nsbox_context_free(ctx);
	return rc;
}

static int exec_detached(nsbox_sandbox *sb, const exec_req *x, uint64_t tmo, int first)
{
	if (x->json || x->interactive || x->tty) {
		print_msg("exec: --detach runs in the background: not with --json, -i or -t (its output is in "
		          "nsbox process logs)");
		return EXIT_SETUP;
	}
	nsbox_process_options o = { .version = NSBOX_PROCESS_OPTIONS_VERSION,
		                    .flags = x->n_env ? NSBOX_EXEC_ENV_ADD : 0,
		                    .argv = (const char *const *) x->argv + first,
		                    .envp = x->n_env ? (const char *const *) x->env : NULL,
		                    .workdir = x->workdir,
		                    .timeout_ms = tmo };
	nsbox_process *p = NULL;
	nsbox_error *e = NULL;
	if (nsbox_process_start(sb, &o, &p, &e) < 0) {
		print_error(e);
		nsbox_error_free(e);
		return EXIT_SETUP;
	}
	printf("%s\n", nsbox_process_id(p));
	nsbox_process_free(p);
	return 0;
}

static int exec_command(nsbox_sandbox *sb, const exec_req *x, uint64_t tmo, int first)
{
	if (x->tty && x->json) {
		print_msg("exec: -t gives the command a terminal, whose output is not captured: not with --json");
		return EXIT_SETUP;
	}
	sigset_t old;
	int sfd = cli_signals_to_fd(&old, x->tty);   /* with -t, SIGWINCH: the terminal's size */
	nsbox_run_options o = {
		.version = NSBOX_RUN_OPTIONS_VERSION,
		.flags = (x->json ? NSBOX_SPAWN_CAPTURE : 0) | (x->n_env ? NSBOX_EXEC_ENV_ADD : 0) |
		         (x->tty ? NSBOX_SPAWN_TTY : 0),
		.sandbox = sb,
		.argv = (const char *const *) x->argv + first,
		.envp = x->n_env ? (const char *const *) x->env : NULL,
		.workdir = x->workdir,
		.timeout_ms = tmo,
		.stdin_fd = x->interactive ? 0 : -1,
		.stdout_fd = -1,
		.stderr_fd = -1,
		.signal_fd = sfd,
		.stats_fd = -1,
		.on_warning = cli_print_warning,
	};
	nsbox_result *res = NULL;
	nsbox_error *e = NULL;
	int ran = nsbox_run(&o, &res, &e);
	int rc = finish(ran, res, e, x->json);
	if (sfd >= 0)
		close(sfd);
	(void) sigprocmask(SIG_SETMASK, &old, NULL);
	return rc;
}

int cmd_exec(int argc, char **argv)
{
	/* NAME first, then the options. */
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		exec_help(stdout);
		return 0;
	}
	if (argc < 3) {
		print_msg("exec: usage: nsbox exec NAME [OPTIONS] [--] COMMAND [ARG...]");
		return EXIT_SETUP;
	}
	exec_req x = { .name = argv[1], .argc = argc - 1, .argv = argv + 1 };
	x.env = calloc((size_t) argc + 1, sizeof(char *));
	if (!x.env)
		return EXIT_SETUP;
	int c, rc = EXIT_SETUP;
	opt_state st;
	opt_init(&st, exec_opts, x.argc, x.argv, true);
	const char *v;
	const opt_def *d;
	char err[256];
	while ((c = opt_next(&st, &v, &d, err, sizeof(err))) != OPT_DONE)
		switch (c) {
		case X_CONTEXT: x.ctx_name = v; break;
		case X_LANG: x.lang = v; break;
		case X_RESTART: x.restart = true; break;
		case X_CODE: x.code = v; break;
		case X_JSON: x.json = true; break;
		case X_TIMEOUT: x.timeout = v; break;
		case X_INTERACTIVE: x.interactive = true; break;
		case X_TTY: x.tty = true; break;
		case X_DETACH: x.detach = true; break;
		case X_WORKDIR: x.workdir = v; break;
		case X_ENV:
		case X_ENV_PASS:
			if (env_add(&x, c == X_ENV_PASS, v) < 0)
				goto out;
			break;
		case X_HELP: exec_help(stdout); rc = 0; goto out;
		default: print_msg("exec: %s (see nsbox exec --help)", err); goto out;
		}
	int first = st.i;   /* the command, or the cell's FILE */
	uint64_t tmo = 0;
	if (live_cli_ms("--timeout", x.timeout, &tmo) < 0)
		goto out;
	if (!x.ctx_name && !x.lang && !x.code && !x.restart && first >= x.argc) {
		print_msg("exec: no command given");
		goto out;
	}
	if (x.workdir && x.workdir[0] != '/') {
		print_msg("exec: --workdir must be an absolute path inside the sandbox");
		goto out;
	}
	nsbox_sandbox *sb = live_cli_connect(x.name);
	if (!sb)
		goto out;
	if (x.ctx_name || x.lang || x.code || x.restart)
		rc = exec_cell(sb, &x, tmo, first);
	else if (x.detach)
		rc = exec_detached(sb, &x, tmo, first);
	else
		rc = exec_command(sb, &x, tmo, first);
	nsbox_sandbox_free(sb);
out:
	for (size_t i = 0; i < x.n_env; i++)
		free(x.env[i]);
	free(x.env);
	return rc;
}

/* ---- ps, stop, pause, resume ----------------------------------------------------- */

int cmd_ps(int argc, char **argv)
{
	bool json = argc > 1 && !strcmp(argv[1], "--json");
	if (argc > 1 + json) {
		if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
			printf("Usage: nsbox ps [--json]\nList your started sandboxes.\n");
			return 0;
		}
		print_msg("ps: usage: nsbox ps [--json]");
		return EXIT_SETUP;
	}
	char *list = NULL;
	nsbox_error *e = NULL;
	if (nsbox_live_list(&list, &e) < 0) {
		print_error(e);
		nsbox_error_free(e);
		return EXIT_SETUP;
	}
	if (json) {
		printf("%s\n", list);
		free(list);
		return 0;
	}
	json_t *a = json_loads(list, 0, NULL);
	free(list);
	printf("%-24s %-8s %-8s %-20s %-20s %s\n", "NAME", "STATE", "MONITOR", "STARTED", "IMAGE", "PORTS");
	size_t i;
	json_t *s;
	json_array_foreach(a, i, s) {
		char when[32] = "", ports[256] = "";
		time_t t = (time_t) json_integer_value(json_object_get(s, "started"));
		struct tm tm;
		if (gmtime_r(&t, &tm))
			strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		size_t k;
		json_t *p;
		json_array_foreach(json_object_get(s, "published"), k, p) {
			size_t used = strlen(ports);
			snprintf(ports + used, sizeof(ports) - used, "%s%s:%lld->%lld", used ? "," : "",
			         json_string_value(json_object_get(p, "host")),
			         (long long) json_integer_value(json_object_get(p, "host_port")),
			         (long long) json_integer_value(json_object_get(p, "port")));
		}
		char *image = nsbox_escape(json_string_value(json_object_get(s, "image")));
		printf("%-24s %-8s %-8lld %-20s %-20s %s\n", json_string_value(json_object_get(s, "name")),
		       json_is_true(json_object_get(s, "paused")) ? "paused" : "running",
		       (long long) json_integer_value(json_object_get(s, "monitor_pid")), when, image ? image : "", ports);
		free(image);
	}
	json_decref(a);
	return 0;
}

/* NAME as the one argument of a command (with --help). -1: not run. */
static int one_name(int argc, char **argv, const char *usage)
{
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("Usage: nsbox %s\n", usage);
		return 0;
	}
	if (argc != 2) {
		print_msg("%s: usage: nsbox %s", argv[0], usage);
		return EXIT_SETUP;
	}
	return -1;
}

int cmd_stop(int argc, char **argv)
{
	int rc = one_name(argc, argv, "stop NAME\nEnd sandbox NAME and everything in it.");
	if (rc >= 0)
		return rc;
	nsbox_error *e = NULL;
	if (nsbox_live_stop(argv[1], &e) < 0) {
		print_error(e);
		nsbox_error_free(e);
		return EXIT_SETUP;
	}
	return 0;
}

static int pause_resume(int argc, char **argv, bool pause)
{
	int rc = one_name(argc, argv, pause ? "pause NAME\nFreeze sandbox NAME: its processes stop using CPU, its "
	                                      "memory stays; nsbox resume NAME goes on."
	                                    : "resume NAME\nThaw sandbox NAME (nsbox pause).");
	if (rc >= 0)
		return rc;
	nsbox_sandbox *sb = live_cli_connect(argv[1]);
	if (!sb)
		return EXIT_SETUP;
	nsbox_error *e = NULL;
	if ((pause ? nsbox_sandbox_pause(sb, &e) : nsbox_sandbox_resume(sb, &e)) < 0) {
		print_error(e);
		nsbox_error_free(e);
		rc = EXIT_SETUP;
	} else {
		rc = 0;
	}
	nsbox_sandbox_free(sb);
	return rc;
}

int cmd_pause(int argc, char **argv) { return pause_resume(argc, argv, true); }
int cmd_resume(int argc, char **argv) { return pause_resume(argc, argv, false); }
