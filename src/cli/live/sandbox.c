/* Long-lived sandboxes from the command line: `nsbox start`, `exec`, `ps`,
 * `stop`. No daemon: each started sandbox has a monitor process of its own
 * (monitor.c), which these commands reach on NAME.sock (ctl.h). NAME.lock
 * is flock'ed for the monitor's whole life: a live name cannot be taken
 * twice, and `ps` and `stop` tell a live sandbox from a dead one's
 * leftovers by it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "opts.h"
#include "live/context.h"
#include "live/ctl.h"
#include "live/monitor.h"

extern char **environ;

static int parse_ms(const char *what, const char *v, uint64_t *ms)
{
	if (!v)
		return 0;
	if (nsbox_parse_duration_ms(v, ms) < 0) {
		print_msg("%s: invalid duration '%s' (such as 30s, 10m, 2h; 0: none)", what, v);
		return -1;
	}
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
		printf("Usage: nsbox start [--name NAME] [--idle-timeout D] [--lifetime D] [RUN OPTIONS]\n"
		       "Start a long-lived sandbox and print its name; run commands in it with\n"
		       "nsbox exec NAME -- COMMAND, end it with nsbox stop NAME. The run options\n"
		       "are nsbox run's ('nsbox run --help'); --timeout is each exec's default.\n");
		run_args_free(&a);
		return 0;
	}
	char name[64];
	int rc = live_start(&a, 0, name, sizeof(name), NULL);
	if (rc == 0)
		printf("%s\n", name);
	run_args_free(&a);
	return rc;
}

int live_start(const run_args *args, unsigned flags, char *name, size_t name_len, pid_t *monitor_pid)
{
	run_args a = *args;
	monitor m = { .dirfd = -1, .lock_fd = -1, .listen_fd = -1, .sig_fd = -1, .timer_fd = -1, .ready_fd = -1,
	              .wake = { -1, -1 } };
	char gen[16];
	int rc = EXIT_SETUP;
	nsbox_config *cfg = NULL;
	nsbox_error *e = NULL;
	if (!a.name) {
		unsigned char rnd[4] = { 0 };
		int ur = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
		if (ur >= 0) {
			(void) !read(ur, rnd, sizeof(rnd));
			close(ur);
		}
		snprintf(gen, sizeof(gen), "sb-%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3]);
		a.name = gen;
	}
	snprintf(name, name_len, "%s", a.name);
	m.name = a.name;
	if (ctl_check_name(a.name) < 0 || parse_ms("--idle-timeout", a.idle_timeout, &m.idle_ms) < 0 ||
	    parse_ms("--lifetime", a.lifetime, &m.lifetime_ms) < 0)
		goto out;
	int r = config_with_policy(a.policy, &cfg, &e);
	for (size_t i = 0; r == 0 && i < a.n_settings; i++)
		r = nsbox_config_set(cfg, a.settings[i].key, a.settings[i].value, a.settings[i].origin, &e);
	static const char *const placeholder[] = { "true", NULL };
	if (r == 0)
		r = nsbox_config_set_command(cfg, 1, placeholder, &e);
	if (r < 0) {
		print_error(e);
		nsbox_error_free(e);
		goto out;
	}
	/* Every exec and cell is governed by this configuration (nsbox_run):
	 * check now what would refuse them all (the rules joining keys, an
	 * audit log that cannot be opened), not at the first exec. */
	nsbox_governor *gov = NULL;
	r = nsbox_config_validate(cfg, &e);
	if (r == 0 && (r = nsbox_governor_begin(cfg, NULL, NULL, 0, &gov, NULL, &e)) == 0)
		nsbox_governor_free(gov);
	if (r < 0) {
		print_error(e);
		nsbox_error_free(e);
		goto out;
	}
	if (a.json || a.result_file || a.stats_interval || a.interactive) {
		print_msg("start: --json, --result-file, --stats-interval and -i are options of nsbox exec");
		goto out;
	}
	m.dirfd = ctl_open_dir(m.dir, sizeof(m.dir), true);
	if (m.dirfd < 0)
		goto out;
	char lockname[80];
	snprintf(lockname, sizeof(lockname), "%s.lock", a.name);
	m.lock_fd = openat(m.dirfd, lockname, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (m.lock_fd < 0 || flock(m.lock_fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EWOULDBLOCK)
			print_msg("a sandbox named '%s' is running (nsbox stop %s)", a.name, a.name);
		else
			print_msg("lock '%s/%s': %s", m.dir, lockname, strerror(errno));
		rc = errno == EWOULDBLOCK ? 2 : EXIT_SETUP;
		goto out;
	}
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		print_msg("start: %s", strerror(errno));
		goto out;
	}
	fflush(NULL);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		print_msg("start: fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		close(pfd[0]);
		/* The starter's child (a door that owns the sandbox): the
		 * monitor stops when its parent dies. */
		if ((flags & LIVE_DIE_WITH_PARENT) &&
		    (prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) < 0 || getppid() != parent))
			_exit(EXIT_SETUP);
		monitor_run(&m, pfd[1], &a, cfg);
	}
	close(pfd[1]);
	char msg[1024];
	ssize_t n = read(pfd[0], msg, sizeof(msg) - 1);
	close(pfd[0]);
	msg[n > 0 ? n : 0] = '\0';
	if (n > 0 && msg[0] == 'O') {
		if (msg[1])
			print_msg("warning: %s", msg + 1);
		if (monitor_pid)
			*monitor_pid = pid;
		rc = 0;
	} else {
		print_msg("start: %s", n > 1 ? msg + 1 : "the monitor failed");
		(void) waitpid(pid, NULL, 0);
	}
out:
	if (m.lock_fd >= 0)
		close(m.lock_fd);
	if (m.dirfd >= 0)
		close(m.dirfd);
	nsbox_config_free(cfg);
	return rc;
}

static int round_trip(const char *name, ctl_req *h, char *body, bool with_stdin);
static int exec_cell(const char *name, const char *ctx_name, const char *lang, const char *code, const char *file,
                     int nargs, bool restart, bool json, uint64_t tmo, bool bad_opts);

enum { X_JSON = 1, X_TIMEOUT, X_INTERACTIVE, X_WORKDIR, X_ENV, X_ENV_PASS, X_CONTEXT, X_LANG, X_CODE, X_RESTART,
       X_HELP };

static const opt_def exec_opts[] = {
	{ "json", 0, NULL, X_JSON, "capture the output and print the result record as JSON", NULL },
	{ "timeout", 0, "DURATION", X_TIMEOUT, "kill the command (and all it started) after DURATION", NULL },
	{ "interactive", 'i', NULL, X_INTERACTIVE, "pass stdin through (default: /dev/null)", NULL },
	{ "workdir", 'w', "DIR", X_WORKDIR, "working directory inside (default: the sandbox's)", NULL },
	{ "env", 'e', "NAME=VALUE", X_ENV, "set a variable for this command (the sandbox's others stay)", NULL },
	{ "env-pass", 0, "NAME", X_ENV_PASS, "the same, with NAME's value here (if it is set)", NULL },
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
	      "or a cell of code in its persistent interpreter C (made at its first use):\n"
	      "variables persist from one cell to the next; a timeout interrupts the cell and\n"
	      "keeps the interpreter.\n\n", f);
	opt_help(f, exec_opts);
}

/* The cell's code: -c, a file, or stdin ("-"); malloc'ed. */
static char *read_code(const char *inline_code, const char *file)
{
	if (inline_code)
		return strdup(inline_code);
	if (!file)
		return NULL;
	int fd = strcmp(file, "-") ? open(file, O_RDONLY | O_CLOEXEC) : 0;
	if (fd < 0) {
		print_msg("exec: open '%s': %s", file, strerror(errno));
		return NULL;
	}
	size_t cap = 65536, len = 0;
	char *buf = malloc(cap);
	ssize_t n;
	while (buf && (n = read(fd, buf + len, cap - len - 1)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || len + (size_t) n > CTL_MAX - 256) {
			print_msg("exec: read the code: %s", n < 0 ? strerror(errno) : "longer than 256 KiB");
			free(buf);
			buf = NULL;
			break;
		}
		len += (size_t) n;
		if (len + 1 == cap) {
			char *nb = realloc(buf, cap *= 2);
			if (!nb)
				free(buf);
			buf = nb;
		}
	}
	if (fd > 0)
		close(fd);
	if (buf)
		buf[len] = '\0';
	if (buf && strlen(buf) != len) {
		print_msg("exec: the code holds a NUL byte");
		free(buf);
		return NULL;
	}
	return buf;
}

/* -e NAME=VALUE and --env-pass NAME, in order: NULL-terminated, malloc'ed. */
typedef struct env_list {
	char **v;
	size_t n;
} env_list;

static void env_list_free(env_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
}

static int env_list_add(env_list *l, int opt, const char *arg)
{
	const char *eq = strchr(arg, '=');
	if (opt == 'e' ? !eq || eq == arg : !*arg || eq) {
		print_msg("exec: %s '%s': expected %s", opt == 'e' ? "--env" : "--env-pass", arg,
		          opt == 'e' ? "NAME=VALUE" : "a NAME");
		return -1;
	}
	const char *v = opt == 'e' ? NULL : getenv(arg);
	if (opt != 'e' && !v)
		return 0;   /* not set here: not set there, as with run's --env-pass */
	char *kv = NULL;
	if (opt == 'e' ? !(kv = strdup(arg)) : asprintf(&kv, "%s=%s", arg, v) < 0)
		return -1;
	l->v[l->n++] = kv;
	return 0;
}

int cmd_exec(int argc, char **argv)
{
	bool json = false, interactive = false, restart = false;
	const char *workdir = NULL, *timeout = NULL, *ctx_name = NULL, *lang = NULL, *code = NULL;
	/* NAME first, then the options. */
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		exec_help(stdout);
		return 0;
	}
	if (argc < 3) {
		print_msg("exec: usage: nsbox exec NAME [OPTIONS] [--] COMMAND [ARG...]");
		return EXIT_SETUP;
	}
	const char *name = argv[1];
	argc--;
	argv++;
	env_list env = { calloc((size_t) argc + 1, sizeof(char *)), 0 };
	if (!env.v)
		return EXIT_SETUP;
	int c, rc = EXIT_SETUP;
	opt_state st;
	opt_init(&st, exec_opts, argc, argv, true);
	const char *v;
	const opt_def *d;
	char err[256];
	while ((c = opt_next(&st, &v, &d, err, sizeof(err))) != OPT_DONE)
		switch (c) {
		case X_CONTEXT: ctx_name = v; break;
		case X_LANG: lang = v; break;
		case X_RESTART: restart = true; break;
		case X_CODE: code = v; break;
		case X_JSON: json = true; break;
		case X_TIMEOUT: timeout = v; break;
		case X_INTERACTIVE: interactive = true; break;
		case X_WORKDIR: workdir = v; break;
		case X_ENV:
		case X_ENV_PASS:
			if (env_list_add(&env, c == X_ENV ? 'e' : 'P', v) < 0)
				goto out;
			break;
		case X_HELP: exec_help(stdout); rc = 0; goto out;
		default: print_msg("exec: %s (see nsbox exec --help)", err); goto out;
		}
	int first = st.i;   /* the command, or the cell's FILE */
	uint64_t tmo = 0;
	if (ctl_check_name(name) < 0 || parse_ms("--timeout", timeout, &tmo) < 0)
		goto out;
	if (ctx_name || lang || code || restart) {
		rc = exec_cell(name, ctx_name, lang ? lang : "python", code, first < argc ? argv[first] : NULL,
		               argc - first, restart, json, tmo, interactive || workdir || env.n);
		goto out;
	}
	if (first >= argc) {
		print_msg("exec: no command given");
		goto out;
	}
	if (workdir && workdir[0] != '/') {
		print_msg("exec: --workdir must be an absolute path inside the sandbox");
		goto out;
	}
	ctl_req h = { .magic = CTL_MAGIC, .op = CTL_EXEC, .timeout_ms = tmo,
	              .flags = (json ? CTL_JSON : 0) | (interactive ? CTL_STDIN : 0) | (workdir ? CTL_WORKDIR : 0) |
	                       (env.n ? CTL_ENV : 0) };
	size_t len = workdir ? strlen(workdir) + 1 : 0;
	for (int i = first; i < argc; i++, h.argc++)
		len += strlen(argv[i]) + 1;
	for (size_t i = 0; i < env.n; i++)
		len += strlen(env.v[i]) + 1;
	if (len > CTL_MAX) {
		print_msg("exec: the command line and environment are longer than %d bytes", CTL_MAX);
		goto out;
	}
	h.len = (uint32_t) len;
	char *body = malloc(len + 1), *pos = body;
	if (!body)
		goto out;
	if (workdir)
		pos = stpcpy(pos, workdir) + 1;
	for (int i = first; i < argc; i++)
		pos = stpcpy(pos, argv[i]) + 1;
	for (size_t i = 0; i < env.n; i++)
		pos = stpcpy(pos, env.v[i]) + 1;
	rc = round_trip(name, &h, body, interactive);
out:
	env_list_free(&env);
	return rc;
}

/* Send the request with our stdout and stderr (and stdin), pass our
 * signals on, print the record, return the exit status. Frees body. */
static int round_trip(const char *name, ctl_req *h, char *body, bool with_stdin)
{
	int fd = ctl_connect(name);
	if (fd < 0) {
		free(body);
		return EXIT_SETUP;
	}
	int fds[3] = { 0, 1, 2 };
	int sent = with_stdin ? ctl_send_req(fd, h, body, fds, 3) : ctl_send_req(fd, h, body, fds + 1, 2);
	free(body);
	if (sent < 0) {
		print_msg("exec: send the command to '%s': %s", name, strerror(errno));
		close(fd);
		return EXIT_SETUP;
	}
	/* Our signals go to the command, as with nsbox run. */
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	(void) sigprocmask(SIG_BLOCK, &set, &old);
	int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	ctl_reply rep = { .status = EXIT_SETUP };
	bool got = false;
	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
		if (poll(p, sfd >= 0 ? 2 : 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (sfd >= 0 && (p[1].revents & POLLIN)) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) == (ssize_t) sizeof(si)) {
				unsigned char b = (unsigned char) si.ssi_signo;
				(void) ctl_write_all(fd, &b, 1);
			}
		}
		if (p[0].revents) {
			got = ctl_read_all(fd, &rep, sizeof(rep)) == 0;
			break;
		}
	}
	int rc = got ? rep.status : EXIT_SETUP;
	if (!got)
		print_msg("exec: sandbox '%s' ended before the command did", name);
	if (got && rep.len) {
		char *j = rep.len <= (64u << 20) ? malloc(rep.len) : NULL;
		if (j && ctl_read_all(fd, j, rep.len) == 0)
			(void) !write(1, j, rep.len);
		else
			rc = EXIT_SETUP;
		free(j);
	}
	close(fd);
	if (sfd >= 0)
		close(sfd);
	(void) sigprocmask(SIG_SETMASK, &old, NULL);
	return rc;
}

/* nsbox exec NAME --context C ...: one cell. */
static int exec_cell(const char *name, const char *ctx_name, const char *lang, const char *code, const char *file,
                     int nargs, bool restart, bool json, uint64_t tmo, bool bad_opts)
{
	if (!ctx_name) {
		print_msg("exec: --lang, -c and --restart go with --context NAME");
		return EXIT_SETUP;
	}
	if (!ctl_name_ok(ctx_name)) {
		print_msg("exec: invalid context name '%s' (letters, digits, '-', '_', '.')", ctx_name);
		return EXIT_SETUP;
	}
	if (strcmp(lang, "python") && strcmp(lang, "node")) {
		print_msg("exec: --lang: '%s' has no context (python, node)", lang);
		return EXIT_SETUP;
	}
	if (bad_opts || nargs > 1 || (code && nargs) || (!code && !nargs && !restart)) {
		print_msg("exec: a context takes -c CODE, a FILE or - (stdin); not -i, -w or -e");
		return EXIT_SETUP;
	}
	char *text = (code || nargs) ? read_code(code, file) : NULL;
	if ((code || nargs) && !text)
		return EXIT_SETUP;
	size_t len = strlen(ctx_name) + strlen(lang) + 2 + (text ? strlen(text) + 1 : 0);
	if (len > CTL_MAX) {
		print_msg("exec: the code is longer than %d bytes", CTL_MAX);
		free(text);
		return EXIT_SETUP;
	}
	ctl_req h = { .magic = CTL_MAGIC, .op = CTL_EXEC, .timeout_ms = tmo, .argc = text ? 3 : 2, .len = (uint32_t) len,
	              .flags = CTL_CONTEXT | (json ? CTL_JSON : 0) | (restart ? CTL_RESTART : 0) };
	char *body = malloc(len + 1), *pos = body;
	if (!body) {
		free(text);
		return EXIT_SETUP;
	}
	pos = stpcpy(pos, ctx_name) + 1;
	pos = stpcpy(pos, lang) + 1;
	if (text)
		(void) stpcpy(pos, text);
	free(text);
	return round_trip(name, &h, body, false);
}

/* Is NAME's monitor alive? Its lock says. */
static bool alive(int dfd, const char *name)
{
	char f[128];
	snprintf(f, sizeof(f), "%s.lock", name);
	int fd = openat(dfd, f, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool held = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(fd);
	return held;
}

int cmd_ps(int argc, char **argv)
{
	bool json = argc > 1 && !strcmp(argv[1], "--json");
	if (argc > 1 + json) {
		print_msg("ps: usage: nsbox ps [--json]");
		return EXIT_SETUP;
	}
	char dir[PATH_MAX];
	int dfd = ctl_open_dir(dir, sizeof(dir), false);
	if (dfd < 0 && errno != ENOENT)
		return EXIT_SETUP;
	if (!json)
		printf("%-24s %-8s %-20s %s\n", "NAME", "MONITOR", "STARTED", "IMAGE");
	else
		printf("[");
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *de;
	int n = 0;
	while (d && (de = readdir(d))) {
		size_t l = strlen(de->d_name);
		if (l < 6 || strcmp(de->d_name + l - 5, ".json") || de->d_name[0] == '.')
			continue;
		char name[64];
		snprintf(name, sizeof(name), "%.*s", (int) (l - 5), de->d_name);
		if (!ctl_name_ok(name) || !alive(dirfd(d), name))
			continue;
		int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		char buf[4096];
		ssize_t r = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
		if (fd >= 0)
			close(fd);
		if (r <= 0)
			continue;
		buf[r] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		if (json) {
			printf("%s%s", n ? "," : "", buf);
		} else {
			int pid = 0;
			long long started = 0;
			char image[256] = "";
			const char *p = strstr(buf, "\"monitor_pid\":");
			if (p)
				pid = atoi(p + 14);
			p = strstr(buf, "\"started\":");
			if (p)
				started = atoll(p + 10);
			p = strstr(buf, "\"image\":\"");
			if (p)
				snprintf(image, sizeof(image), "%.*s", (int) strcspn(p + 9, "\""), p + 9);
			char when[32] = "";
			time_t t = (time_t) started;
			struct tm tm;
			if (gmtime_r(&t, &tm))
				strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
			printf("%-24s %-8d %-20s %s\n", name, pid, when, image);
		}
		n++;
	}
	if (json)
		printf("]\n");
	if (d)
		closedir(d);
	return 0;
}

int cmd_stop(int argc, char **argv)
{
	if (argc != 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		if (argc == 2)
			printf("Usage: nsbox stop NAME\nEnd sandbox NAME and everything in it.\n");
		else
			print_msg("stop: usage: nsbox stop NAME");
		return argc == 2 ? 0 : EXIT_SETUP;
	}
	const char *name = argv[1];
	if (ctl_check_name(name) < 0)
		return EXIT_SETUP;
	int fd = ctl_connect(name);
	if (fd < 0)
		return EXIT_SETUP;
	ctl_req h = { .magic = CTL_MAGIC, .op = CTL_STOP };
	ctl_reply rep;
	if (ctl_send_req(fd, &h, "", NULL, 0) < 0 || ctl_read_all(fd, &rep, sizeof(rep)) < 0) {
		print_msg("stop: '%s' did not answer", name);
		close(fd);
		return EXIT_SETUP;
	}
	close(fd);
	/* Done when the monitor has let go of its lock: the sandbox, its
	 * cgroup and its files are gone. */
	char dir[PATH_MAX];
	int dfd = ctl_open_dir(dir, sizeof(dir), false);
	char f[128];
	snprintf(f, sizeof(f), "%s.lock", name);
	int lfd = dfd >= 0 ? openat(dfd, f, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
	if (lfd >= 0) {
		(void) flock(lfd, LOCK_SH);
		close(lfd);
	}
	if (dfd >= 0)
		close(dfd);
	return 0;
}
