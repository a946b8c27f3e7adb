/* docker ps, stop, kill, wait, rm, logs, inspect: over the containers'
 * store (store.c). A container's owner (the door of a foreground run, a
 * detached one's runner) is reached by signals, checked against the pid
 * and start time it recorded; a detached container's sandbox is stopped as
 * `nsbox stop` stops it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "docker/docker.h"
#include "live/ctl.h"
#include "opts.h"

/* ---- shared ------------------------------------------------------------------ */

static bool detached(const container *c)
{
	return json_is_true(json_object_get(json_object_get(c->info, "nsbox"), "Detached"));
}

/* Parse a command's options; the operands (containers) from *first. */
static int parse(const char *cmd, const opt_def *defs, int argc, char **argv, void (*take)(int, const char *, void *),
                 void *ctx, int *first)
{
	opt_state st;
	opt_init(&st, defs, argc, argv, true);
	const char *v;
	const opt_def *d;
	char err[256];
	int id;
	while ((id = opt_next(&st, &v, &d, err, sizeof(err))) != OPT_DONE) {
		if (id == OPT_ERROR) {
			print_msg("docker %s: %s (see 'nsbox docker %s --help')", cmd, err, cmd);
			return -1;
		}
		if (d && d->value == OPT_BOOL && opt_bool(v) < 0) {
			print_msg("docker %s: --%s: invalid boolean '%s'", cmd, d->name, v);
			return -1;
		}
		take(id, d && !opt_has_value(d) ? (opt_bool(v) ? "1" : NULL) : v, ctx);
	}
	*first = st.i;
	return 0;
}

static int64_t parse_time(const char *s)
{
	struct tm tm = { 0 };
	if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))
		return 0;
	return (int64_t) timegm(&tm);
}

/* Docker's human durations (go-units HumanDuration). */
static void human(int64_t secs, char *buf, size_t len)
{
	if (secs < 1)
		snprintf(buf, len, "Less than a second");
	else if (secs == 1)
		snprintf(buf, len, "1 second");
	else if (secs < 60)
		snprintf(buf, len, "%lld seconds", (long long) secs);
	else if (secs < 120)
		snprintf(buf, len, "About a minute");
	else if (secs < 3600)
		snprintf(buf, len, "%lld minutes", (long long) secs / 60);
	else if (secs < 7200)
		snprintf(buf, len, "About an hour");
	else if (secs < 48 * 3600)
		snprintf(buf, len, "%lld hours", (long long) secs / 3600);
	else if (secs < 14 * 86400)
		snprintf(buf, len, "%lld days", (long long) secs / 86400);
	else if (secs < 90 * 86400)
		snprintf(buf, len, "%lld weeks", (long long) secs / (7 * 86400));
	else if (secs < 730 * 86400)
		snprintf(buf, len, "%lld months", (long long) secs / (30 * 86400));
	else
		snprintf(buf, len, "%lld years", (long long) secs / (365 * 86400));
}

static void ago(const char *when, char *buf, size_t len)
{
	char h[64];
	human((int64_t) time(NULL) - parse_time(when), h, sizeof(h));
	snprintf(buf, len, "%s ago", h);
}

/* Kill a running container now: a detached one's sandbox is stopped (its
 * runner records the end), a foreground run's door is killed (its sandbox
 * dies with it) and the end recorded here. Waits until it has ended. */
static void kill_now(int base, container *c)
{
	if (detached(c)) {
		char *argv[] = { "stop", c->name, NULL };
		int err = dup(2), null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		/* (Its monitor may be gone already: nothing to say then.) */
		if (null >= 0)
			(void) dup2(null, 2);
		(void) cmd_stop(2, argv);
		if (err >= 0) {
			(void) dup2(err, 2);
			close(err);
		}
		if (null >= 0)
			close(null);
	} else {
		(void) owner_signal(c, SIGKILL);
	}
	(void) store_wait_unlocked(c->dirfd, 0);
	container now;
	if (store_find(base, c->name, &now, true) < 0)
		return;   /* removed (--rm) */
	const char *st = json_string_value(json_object_get(now.state, "Status"));
	if (st && !strcmp(st, "running")) {
		json_t *auto_rm = json_object_get(json_object_get(now.info, "HostConfig"), "AutoRemove");
		if (json_is_true(auto_rm))
			(void) store_remove(base, now.name);
		else
			(void) store_end(base, now.dirfd, now.name, 128 + SIGKILL, false, NULL);
	}
	container_free(&now);
}

/* stop: the stop signal, then SIGKILL once the timeout has passed. */
static int stop_one(int base, container *c, int sig, int timeout)
{
	if (!c->running)
		return 0;
	if (sig != SIGKILL && timeout != 0) {
		if (owner_signal(c, sig) == 0 && store_wait_unlocked(c->dirfd, timeout < 0 ? 0 : (unsigned) timeout * 1000))
			return 0;
	}
	kill_now(base, c);
	return 0;
}

/* ---- ps ------------------------------------------------------------------------- */

typedef struct ps_opts {
	bool all, quiet, no_trunc;
	const char *format;
	const char *filters[16];
	int n_filters;
	bool bad;
} ps_opts;

enum { P_ALL = 1, P_QUIET, P_NO_TRUNC, P_FILTER, P_FORMAT, P_HELP, P_SIZE };
static const opt_def ps_defs[] = {
	{ "all", 'a', OPT_BOOL, P_ALL, "show every container (default: the running ones)", NULL },
	{ "quiet", 'q', OPT_BOOL, P_QUIET, "only the ids", NULL },
	{ "no-trunc", 0, OPT_BOOL, P_NO_TRUNC, "whole ids and commands", NULL },
	{ "filter", 'f', "K=V", P_FILTER, "name=, id=, status=, label=K[=V] (repeatable)", NULL },
	{ "format", 0, "TEMPLATE", P_FORMAT, "a Go template: {{.ID}} {{.Names}} {{.Image}} {{.Status}}\n{{.State}} "
	  "{{.Command}} {{.CreatedAt}} {{.RunningFor}} {{.Labels}}", NULL },
	{ "help", 0, NULL, P_HELP, "print this help", NULL },
	{ 0 },
};

static void ps_take(int id, const char *v, void *ctx)
{
	ps_opts *o = ctx;
	switch (id) {
	case P_ALL: o->all = v; break;
	case P_QUIET: o->quiet = v; break;
	case P_NO_TRUNC: o->no_trunc = v; break;
	case P_FORMAT: o->format = v; break;
	case P_FILTER:
		if (o->n_filters < 16)
			o->filters[o->n_filters++] = v;
		break;
	case P_HELP:
		fputs("Usage: nsbox docker ps [OPTIONS]\nList the containers of nsbox docker run.\n\n", stdout);
		opt_help(stdout, ps_defs);
		o->bad = true;
		break;
	}
}

/* One row as docker ps --format sees it. */
static json_t *ps_row(const container *c, bool no_trunc)
{
	json_t *st = store_effective_state(c);
	const char *status = json_string_value(json_object_get(st, "Status"));
	char when[96] = "", run_for[96];
	const char *created = json_string_value(json_object_get(c->info, "Created"));
	human((int64_t) time(NULL) - parse_time(created), run_for, sizeof(run_for));
	if (status && !strcmp(status, "running")) {
		char h[64];
		human((int64_t) time(NULL) - parse_time(json_string_value(json_object_get(st, "StartedAt"))), h, sizeof(h));
		snprintf(when, sizeof(when), "Up %s", h);
	} else if (status && !strcmp(status, "exited")) {
		char a[80];
		ago(json_string_value(json_object_get(st, "FinishedAt")), a, sizeof(a));
		snprintf(when, sizeof(when), "Exited (%lld) %s", (long long) json_integer_value(json_object_get(st, "ExitCode")),
		         a);
	} else {
		snprintf(when, sizeof(when), "Created");
	}
	/* The command, quoted, as Docker shows it (20 characters unless
	 * --no-trunc). */
	char cmd[512] = "";
	size_t n = 0;
	const char *path = json_string_value(json_object_get(c->info, "Path"));
	n += (size_t) snprintf(cmd, sizeof(cmd), "%s", path ? path : "");
	size_t i;
	json_t *arg;
	json_array_foreach(json_object_get(c->info, "Args"), i, arg)
		if (n < sizeof(cmd))
			n += (size_t) snprintf(cmd + n, sizeof(cmd) - n, " %s", json_string_value(arg));
	char quoted[600];
	if (!no_trunc && strlen(cmd) > 20)
		snprintf(quoted, sizeof(quoted), "\"%.19s…\"", cmd);
	else
		snprintf(quoted, sizeof(quoted), "\"%s\"", cmd);
	char labels[1024] = "";
	const char *k;
	json_t *lv;
	size_t ln = 0;
	json_object_foreach(json_object_get(json_object_get(c->info, "Config"), "Labels"), k, lv)
		if (ln < sizeof(labels))
			ln += (size_t) snprintf(labels + ln, sizeof(labels) - ln, "%s%s=%s", ln ? "," : "", k,
			                        json_string_value(lv));
	char created_at[64] = "";
	time_t t = (time_t) parse_time(created);
	struct tm tm;
	if (gmtime_r(&t, &tm))
		strftime(created_at, sizeof(created_at), "%Y-%m-%d %H:%M:%S +0000 UTC", &tm);
	char run_for_ago[128];
	snprintf(run_for_ago, sizeof(run_for_ago), "%s ago", run_for);
	json_t *row = json_pack("{s:s%,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "ID", c->id, no_trunc ? (size_t) 64 : 12,
	                        "Image", json_string_value(json_object_get(c->info, "Image")), "Command", quoted, "CreatedAt",
	                        created_at, "RunningFor", run_for_ago, "Status", when, "State", status ? status : "created",
	                        "Names", c->name, "Labels", labels, "Ports", "", "Mounts", "");
	json_decref(st);
	return row;
}

static bool ps_match(const container *c, json_t *row, const ps_opts *o)
{
	for (int i = 0; i < o->n_filters; i++) {
		const char *f = o->filters[i], *eq = strchr(f, '=');
		const char *v = eq ? eq + 1 : "";
		size_t kl = eq ? (size_t) (eq - f) : strlen(f);
		if (kl == 4 && !strncmp(f, "name", 4)) {
			if (!strstr(c->name, v))
				return false;
		} else if (kl == 2 && !strncmp(f, "id", 2)) {
			if (strncmp(c->id, v, strlen(v)))
				return false;
		} else if (kl == 6 && !strncmp(f, "status", 6)) {
			if (strcmp(json_string_value(json_object_get(row, "State")), v))
				return false;
		} else if (kl == 5 && !strncmp(f, "label", 5)) {
			const char *leq = strchr(v, '=');
			char key[256];
			snprintf(key, sizeof(key), "%.*s", (int) (leq ? (size_t) (leq - v) : strlen(v)), v);
			json_t *lab = json_object_get(json_object_get(json_object_get(c->info, "Config"), "Labels"), key);
			if (!lab || (leq && strcmp(json_string_value(lab), leq + 1)))
				return false;
		}
	}
	return true;
}

static int by_created(const void *a, const void *b)
{
	const char *x = json_string_value(json_object_get(*(json_t *const *) a, "CreatedAt"));
	const char *y = json_string_value(json_object_get(*(json_t *const *) b, "CreatedAt"));
	return strcmp(y ? y : "", x ? x : "");
}

int docker_cmd_ps(int argc, char **argv)
{
	ps_opts o = { 0 };
	int first;
	if (parse("ps", ps_defs, argc, argv, ps_take, &o, &first) < 0)
		return DOCKER_EXIT_CMD;
	if (o.bad)
		return 0;
	if (first < argc) {
		print_msg("docker ps: unexpected argument '%s'", argv[first]);
		return DOCKER_EXIT_CMD;
	}
	for (int i = 0; i < o.n_filters; i++) {
		const char *f = o.filters[i];
		if (strncmp(f, "name=", 5) && strncmp(f, "id=", 3) && strncmp(f, "status=", 7) && strncmp(f, "label=", 6)) {
			print_msg("docker ps: --filter '%s': nsbox filters by name=, id=, status= and label=", f);
			return DOCKER_EXIT_CMD;
		}
	}
	int base = store_open(false);
	json_t *rows = json_array();
	DIR *d = base >= 0 ? fdopendir(base) : NULL;
	if (!d && base >= 0)
		close(base);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		container c;
		if (de->d_name[0] == '.' || store_find(dirfd(d), de->d_name, &c, true) < 0)
			continue;
		json_t *row = ps_row(&c, o.no_trunc);
		const char *state = json_string_value(json_object_get(row, "State"));
		if (row && (o.all || !strcmp(state, "running")) && ps_match(&c, row, &o)) {
			json_object_set_new(row, "CreatedAt", json_string(json_string_value(json_object_get(c.info, "Created"))));
			json_array_append(rows, row);
		}
		json_decref(row);
		container_free(&c);
	}
	if (d)
		closedir(d);
	size_t n = json_array_size(rows);
	json_t **v = calloc(n + 1, sizeof(*v));
	for (size_t i = 0; v && i < n; i++)
		v[i] = json_array_get(rows, i);
	if (v)
		qsort(v, n, sizeof(*v), by_created);
	int rc = 0;
	if (!o.quiet && !o.format)
		printf("%-12s   %-15s %-22s %-15s %-24s %-6s %s\n", "CONTAINER ID", "IMAGE", "COMMAND", "CREATED", "STATUS",
		       "PORTS", "NAMES");
	for (size_t i = 0; v && i < n && rc == 0; i++) {
		json_t *r = v[i];
		if (o.quiet) {
			printf("%s\n", json_string_value(json_object_get(r, "ID")));
		} else if (o.format) {
			char *out = NULL, err[256];
			if (go_template(o.format, r, &out, err, sizeof(err)) < 0) {
				print_msg("docker ps: --format: %s", out ? "out of memory" : err);
				rc = DOCKER_EXIT_CMD;
			} else {
				printf("%s\n", out);
			}
			free(out);
		} else {
			printf("%-12s   %-15s %-22s %-15s %-24s %-6s %s\n", json_string_value(json_object_get(r, "ID")),
			       json_string_value(json_object_get(r, "Image")), json_string_value(json_object_get(r, "Command")),
			       json_string_value(json_object_get(r, "RunningFor")), json_string_value(json_object_get(r, "Status")),
			       "", json_string_value(json_object_get(r, "Names")));
		}
	}
	free(v);
	json_decref(rows);
	return rc;
}

/* ---- stop, kill, wait, rm ------------------------------------------------------------ */

typedef struct many_opts {
	const char *time, *signal;
	bool force, help;
	const char *cmd;
	const opt_def *defs;
} many_opts;

enum { M_TIME = 1, M_SIGNAL, M_FORCE, M_VOLUMES, M_LINK, M_HELP };
static const opt_def stop_defs[] = {
	{ "time", 't', "SECONDS", M_TIME, "wait this long after the stop signal, then kill\n(default: docker run's "
	  "--stop-timeout, 10)", NULL },
	{ "timeout", 0, "SECONDS", M_TIME, NULL, NULL },
	{ "signal", 's', "SIGNAL", M_SIGNAL, "the stop signal (default: docker run's --stop-signal)", NULL },
	{ "help", 0, NULL, M_HELP, "print this help", NULL },
	{ 0 },
};
static const opt_def kill_defs[] = {
	{ "signal", 's', "SIGNAL", M_SIGNAL, "SIGKILL (default), or SIGTERM, SIGINT, SIGHUP, SIGQUIT", NULL },
	{ "help", 0, NULL, M_HELP, "print this help", NULL },
	{ 0 },
};
static const opt_def rm_defs[] = {
	{ "force", 'f', OPT_BOOL, M_FORCE, "kill a running container first", NULL },
	{ "volumes", 'v', OPT_BOOL, M_VOLUMES, "accepted: nsbox makes no volumes to remove", NULL },
	{ "link", 'l', OPT_BOOL, M_LINK, NULL, NULL },
	{ "help", 0, NULL, M_HELP, "print this help", NULL },
	{ 0 },
};
static const opt_def wait_defs[] = {
	{ "help", 0, NULL, M_HELP, "print this help", NULL },
	{ 0 },
};

static void many_take(int id, const char *v, void *ctx)
{
	many_opts *o = ctx;
	switch (id) {
	case M_TIME: o->time = v; break;
	case M_SIGNAL: o->signal = v; break;
	case M_FORCE: o->force = v; break;
	case M_LINK:
		if (v)
			o->signal = "link";
		break;
	case M_HELP:
		printf("Usage: nsbox docker %s [OPTIONS] CONTAINER...\n\n", o->cmd);
		opt_help(stdout, o->defs);
		o->help = true;
		break;
	}
}

/* Each container named: what `what` does to it; the names done are
 * printed, as Docker prints them. */
static int each(const char *cmd, const opt_def *defs, int argc, char **argv,
                int (*what)(int base, container *c, const char *ref, const many_opts *o))
{
	many_opts o = { .cmd = cmd, .defs = defs };
	int first;
	if (parse(cmd, defs, argc, argv, many_take, &o, &first) < 0)
		return DOCKER_EXIT_CMD;
	if (o.help)
		return 0;
	if (o.signal && !strcmp(o.signal, "link")) {
		print_msg("docker rm: --link: refused: nsbox has no container links");
		return DOCKER_EXIT_CMD;
	}
	if (first >= argc) {
		print_msg("docker %s: usage: nsbox docker %s [OPTIONS] CONTAINER...", cmd, cmd);
		return DOCKER_EXIT_CMD;
	}
	int base = store_open(false), rc = 0;
	for (int i = first; i < argc; i++) {
		container c;
		if (base < 0 || store_find(base, argv[i], &c, base < 0) < 0) {
			if (base < 0)
				print_msg("no such container: %s", argv[i]);
			rc = DOCKER_EXIT_CMD;
			continue;
		}
		/* (A container being started is acted on once it runs.) */
		if (store_settle(base, &c) == -ENOENT || what(base, &c, argv[i], &o) < 0)
			rc = DOCKER_EXIT_CMD;
		container_free(&c);
	}
	if (base >= 0)
		close(base);
	return rc;
}

static int stop_what(int base, container *c, const char *ref, const many_opts *o)
{
	json_t *cfg = json_object_get(c->info, "Config");
	int sig = docker_signal(o->signal ? o->signal : json_string_value(json_object_get(cfg, "StopSignal")) ?: "TERM");
	int timeout = (int) json_integer_value(json_object_get(cfg, "StopTimeout"));
	if (sig < 0) {
		print_msg("docker stop: --signal '%s': nsbox passes SIGTERM, SIGINT, SIGHUP or SIGQUIT, or kills", o->signal);
		return -1;
	}
	if (o->time) {
		char *e = NULL;
		long t = strtol(o->time, &e, 10);
		if (!*o->time || *e || t < -1) {
			print_msg("docker stop: --time '%s': expected seconds", o->time);
			return -1;
		}
		timeout = (int) t;
	}
	(void) stop_one(base, c, sig, timeout);
	printf("%s\n", ref);
	return 0;
}

static int kill_what(int base, container *c, const char *ref, const many_opts *o)
{
	int sig = o->signal ? docker_signal(o->signal) : SIGKILL;
	if (sig < 0) {
		print_msg("docker kill: --signal '%s': nsbox passes SIGTERM, SIGINT, SIGHUP or SIGQUIT, or kills", o->signal);
		return -1;
	}
	if (!c->running) {
		print_msg("docker kill: container '%s' is not running", c->name);
		return -1;
	}
	if (sig == SIGKILL)
		kill_now(base, c);
	else if (owner_signal(c, sig) < 0)
		print_msg("docker kill: container '%s' ended meanwhile", c->name);
	printf("%s\n", ref);
	return 0;
}

static int wait_what(int base, container *c, const char *ref, const many_opts *o)
{
	(void) o;
	(void) store_wait_unlocked(c->dirfd, 0);
	container now;
	if (store_find(base, c->name, &now, true) < 0) {
		print_msg("docker wait: container '%s' was removed when it ended (--rm)", ref);
		return -1;
	}
	json_t *st = store_effective_state(&now);
	printf("%lld\n", (long long) json_integer_value(json_object_get(st, "ExitCode")));
	json_decref(st);
	container_free(&now);
	return 0;
}

static int rm_what(int base, container *c, const char *ref, const many_opts *o)
{
	if (c->running && !o->force) {
		print_msg("docker rm: container '%s' is running: stop it first, or use --force", c->name);
		return -1;
	}
	if (c->running)
		kill_now(base, c);
	int r = store_remove(base, c->name);
	if (r < 0) {
		print_msg("docker rm: remove container '%s': %s", c->name, strerror(-r));
		return -1;
	}
	printf("%s\n", ref);
	return 0;
}

int docker_cmd_stop(int argc, char **argv)
{
	return each("stop", stop_defs, argc, argv, stop_what);
}

int docker_cmd_kill(int argc, char **argv)
{
	return each("kill", kill_defs, argc, argv, kill_what);
}

int docker_cmd_wait(int argc, char **argv)
{
	return each("wait", wait_defs, argc, argv, wait_what);
}

int docker_cmd_rm(int argc, char **argv)
{
	return each("rm", rm_defs, argc, argv, rm_what);
}

/* ---- logs --------------------------------------------------------------------------- */

typedef struct logs_opts {
	bool follow, help;
	const char *tail, *refused;
} logs_opts;

enum { L_FOLLOW = 1, L_TAIL, L_TIMESTAMPS, L_SINCE, L_UNTIL, L_DETAILS, L_HELP };
static const opt_def logs_defs[] = {
	{ "follow", 'f', OPT_BOOL, L_FOLLOW, "keep printing the output until the container ends", NULL },
	{ "tail", 'n', "N", L_TAIL, "only the last N lines (all: everything)", NULL },
	{ "help", 0, NULL, L_HELP, "print this help", NULL },
	{ "timestamps", 't', OPT_BOOL, L_TIMESTAMPS, NULL, NULL },
	{ "since", 0, "T", L_SINCE, NULL, NULL },
	{ "until", 0, "T", L_UNTIL, NULL, NULL },
	{ "details", 0, OPT_BOOL, L_DETAILS, NULL, NULL },
	{ 0 },
};

static void logs_take(int id, const char *v, void *ctx)
{
	logs_opts *o = ctx;
	switch (id) {
	case L_FOLLOW: o->follow = v; break;
	case L_TAIL: o->tail = v; break;
	case L_TIMESTAMPS: case L_SINCE: case L_UNTIL: case L_DETAILS:
		if (v)
			o->refused = id == L_TIMESTAMPS ? "--timestamps" : id == L_SINCE ? "--since" : id == L_UNTIL ? "--until"
			             : "--details";
		break;
	case L_HELP:
		fputs("Usage: nsbox docker logs [OPTIONS] CONTAINER\nPrint a detached container's output: its stdout on "
		      "stdout, its stderr on stderr.\n\n", stdout);
		opt_help(stdout, logs_defs);
		o->help = true;
		break;
	}
}

typedef struct frame_reader {
	int fd;
	unsigned char head[8];
	size_t have;        /* bytes of the header read */
	uint32_t left;      /* of the frame's data */
	int stream;
} frame_reader;

/* Copy whole frames from the log to our stdout/stderr from where the
 * reader is, up to the end of what is written; skip bytes of data first
 * (--tail). */
static void copy_frames(frame_reader *r, uint64_t *skip)
{
	char buf[65536];
	for (;;) {
		if (r->left == 0) {
			ssize_t n = read(r->fd, r->head + r->have, sizeof(r->head) - r->have);
			if (n <= 0)
				return;
			r->have += (size_t) n;
			if (r->have < sizeof(r->head))
				continue;
			r->have = 0;
			r->stream = r->head[0] == 2 ? 2 : 1;
			r->left = (uint32_t) r->head[4] << 24 | (uint32_t) r->head[5] << 16 | (uint32_t) r->head[6] << 8 |
			          r->head[7];
			continue;
		}
		ssize_t n = read(r->fd, buf, r->left < sizeof(buf) ? r->left : sizeof(buf));
		if (n <= 0)
			return;
		r->left -= (uint32_t) n;
		size_t off = 0;
		if (*skip) {
			off = *skip < (uint64_t) n ? (size_t) *skip : (size_t) n;
			*skip -= off;
		}
		if (off < (size_t) n) {
			fflush(stdout);
			(void) !write(r->stream, buf + off, (size_t) n - off);
		}
	}
}

/* The bytes of data to skip for --tail N: all but the last N lines. */
static uint64_t tail_skip(int fd, long lines)
{
	uint64_t total = 0, nl_count = 0;
	char last = '\n';
	frame_reader r = { .fd = fd };
	char buf[65536];
	/* Pass 1: the data's length and its newlines. */
	for (;;) {
		if (read(fd, r.head, 8) != 8)
			break;
		uint32_t len = (uint32_t) r.head[4] << 24 | (uint32_t) r.head[5] << 16 | (uint32_t) r.head[6] << 8 | r.head[7];
		while (len) {
			ssize_t n = read(fd, buf, len < sizeof(buf) ? len : sizeof(buf));
			if (n <= 0)
				goto counted;
			for (ssize_t i = 0; i < n; i++)
				nl_count += buf[i] == '\n';
			last = buf[n - 1];
			total += (uint64_t) n;
			len -= (uint32_t) n;
		}
	}
counted:;
	/* A last line without its newline counts as one: skip past the
	 * newline that ends line (count - N). */
	uint64_t count = nl_count + (last != '\n'), seen = 0, pos = 0;
	uint64_t want_after = count > (uint64_t) lines ? count - (uint64_t) lines : 0;
	(void) lseek(fd, 0, SEEK_SET);
	if (want_after == 0)
		return 0;
	for (;;) {
		if (read(fd, r.head, 8) != 8)
			break;
		uint32_t len = (uint32_t) r.head[4] << 24 | (uint32_t) r.head[5] << 16 | (uint32_t) r.head[6] << 8 | r.head[7];
		while (len) {
			ssize_t n = read(fd, buf, len < sizeof(buf) ? len : sizeof(buf));
			if (n <= 0)
				goto done;
			for (ssize_t i = 0; i < n; i++) {
				pos++;
				if (buf[i] == '\n' && ++seen == want_after) {
					(void) lseek(fd, 0, SEEK_SET);
					return pos;
				}
			}
			len -= (uint32_t) n;
		}
	}
done:
	(void) lseek(fd, 0, SEEK_SET);
	return total;
}

int docker_cmd_logs(int argc, char **argv)
{
	logs_opts o = { 0 };
	int first;
	if (parse("logs", logs_defs, argc, argv, logs_take, &o, &first) < 0)
		return DOCKER_EXIT_CMD;
	if (o.help)
		return 0;
	if (o.refused) {
		print_msg("docker logs: %s: refused: nsbox keeps the output alone, without times", o.refused);
		return DOCKER_EXIT_CMD;
	}
	long lines = -1;
	if (o.tail && strcmp(o.tail, "all")) {
		char *e = NULL;
		lines = strtol(o.tail, &e, 10);
		if (!*o.tail || *e || lines < 0) {
			print_msg("docker logs: --tail '%s': expected a number of lines or all", o.tail);
			return DOCKER_EXIT_CMD;
		}
	}
	if (argc - first != 1) {
		print_msg("docker logs: usage: nsbox docker logs [OPTIONS] CONTAINER");
		return DOCKER_EXIT_CMD;
	}
	int base = store_open(false), rc = DOCKER_EXIT_CMD;
	container c = { .dirfd = -1 };
	if (base < 0 || store_find(base, argv[first], &c, false) < 0) {
		if (base < 0)
			print_msg("no such container: %s", argv[first]);
		goto out;
	}
	if (!detached(&c)) {
		print_msg("docker logs: container '%s' ran in the foreground: its output went to the caller, and nsbox kept "
		          "no log of it", c.name);
		goto out;
	}
	frame_reader r = { .fd = openat(c.dirfd, LOG_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) };
	if (r.fd < 0) {
		rc = errno == ENOENT ? 0 : DOCKER_EXIT_CMD;   /* nothing written yet */
		if (rc)
			print_msg("docker logs: open the log of '%s': %s", c.name, strerror(errno));
		goto out;
	}
	uint64_t skip = lines >= 0 ? tail_skip(r.fd, lines) : 0;
	if (lines == 0) {
		struct stat sb;
		skip = fstat(r.fd, &sb) == 0 ? (uint64_t) sb.st_size : 0;   /* (frames' data is less: enough) */
	}
	copy_frames(&r, &skip);
	if (o.follow) {
		/* Until the container has ended and the log is read to its end. */
		int in = inotify_init1(IN_CLOEXEC);
		char p[64];
		snprintf(p, sizeof(p), "/proc/self/fd/%d", r.fd);
		if (in >= 0)
			(void) inotify_add_watch(in, p, IN_MODIFY);
		while (store_locked(c.dirfd)) {
			struct pollfd pf = { .fd = in, .events = POLLIN };
			/* The lock has no event of its own: look at it now and then. */
			if (poll(&pf, in >= 0 ? 1 : 0, 200) > 0) {
				char ev[4096];
				(void) !read(in, ev, sizeof(ev));
			}
			copy_frames(&r, &skip);
		}
		copy_frames(&r, &skip);
		if (in >= 0)
			close(in);
	}
	close(r.fd);
	rc = 0;
out:
	container_free(&c);
	if (base >= 0)
		close(base);
	return rc;
}

/* ---- inspect ---------------------------------------------------------------------------- */

enum { I_FORMAT = 1, I_TYPE, I_SIZE, I_HELP };
static const opt_def inspect_defs[] = {
	{ "format", 'f', "TEMPLATE", I_FORMAT, "a Go template per container ({{.State.ExitCode}})", NULL },
	{ "type", 0, "TYPE", I_TYPE, "container (nsbox inspects containers only)", NULL },
	{ "size", 's', OPT_BOOL, I_SIZE, "accepted: sizes are not shown", NULL },
	{ "help", 0, NULL, I_HELP, "print this help", NULL },
	{ 0 },
};

typedef struct inspect_opts {
	const char *format, *type;
	bool help;
} inspect_opts;

static void inspect_take(int id, const char *v, void *ctx)
{
	inspect_opts *o = ctx;
	switch (id) {
	case I_FORMAT: o->format = v; break;
	case I_TYPE: o->type = v; break;
	case I_HELP:
		fputs("Usage: nsbox docker inspect [OPTIONS] CONTAINER...\nA container as JSON, in Docker's fields: Id, Name, "
		      "Created, Path, Args, State\n(Status, Running, ExitCode, OOMKilled, Error, StartedAt, FinishedAt), "
		      "Image,\nConfig, HostConfig; and nsbox's own.\n\n", stdout);
		opt_help(stdout, inspect_defs);
		o->help = true;
		break;
	}
}

static json_t *inspect_doc(const container *c)
{
	json_t *doc = json_deep_copy(c->info);
	if (!doc)
		return NULL;
	char name[80];
	snprintf(name, sizeof(name), "/%s", c->name);
	json_object_set_new(doc, "Name", json_string(name));
	json_object_set_new(doc, "State", store_effective_state(c));
	return doc;
}

int docker_cmd_inspect(int argc, char **argv)
{
	inspect_opts o = { 0 };
	int first;
	if (parse("inspect", inspect_defs, argc, argv, inspect_take, &o, &first) < 0)
		return DOCKER_EXIT_CMD;
	if (o.help)
		return 0;
	if (o.type && strcmp(o.type, "container")) {
		print_msg("docker inspect: --type '%s': nsbox inspects containers (images: nsbox image ls)", o.type);
		return DOCKER_EXIT_CMD;
	}
	if (first >= argc) {
		print_msg("docker inspect: usage: nsbox docker inspect [OPTIONS] CONTAINER...");
		return DOCKER_EXIT_CMD;
	}
	int base = store_open(false), rc = 0;
	json_t *all = json_array();
	char *text = NULL;
	for (int i = first; i < argc; i++) {
		container c;
		if (base < 0 || store_find(base, argv[i], &c, true) < 0) {
			print_msg("no such container: %s", argv[i]);
			rc = DOCKER_EXIT_CMD;
			continue;
		}
		json_t *doc = inspect_doc(&c);
		container_free(&c);
		if (!doc)
			continue;
		if (o.format) {
			char err[256];
			free(text);
			text = NULL;
			if (go_template(o.format, doc, &text, err, sizeof(err)) < 0) {
				print_msg("docker inspect: --format: %s", text ? "out of memory" : err);
				json_decref(doc);
				rc = DOCKER_EXIT_CMD;
				break;
			}
			printf("%s\n", text);
		}
		json_array_append_new(all, doc);
	}
	if (!o.format) {
		char *s = json_dumps(all, JSON_INDENT(4) | JSON_PRESERVE_ORDER);
		if (s)
			printf("%s\n", s);
		free(s);
	}
	free(text);
	json_decref(all);
	if (base >= 0)
		close(base);
	return rc;
}
