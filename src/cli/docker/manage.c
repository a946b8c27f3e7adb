/* docker stop, kill, wait, rm and inspect, over the containers' store
 * (store.c). A container's owner (the door of a foreground run, a detached
 * one's runner) is reached by signals, checked against the pid and start
 * time it recorded; killing it ends its sandbox. */
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
#include "opts.h"

/* ---- shared ------------------------------------------------------------------ */

bool container_detached(const container *c)
{
	return json_is_true(json_object_get(json_object_get(c->info, "nsbox"), "Detached"));
}

/* Parse a command's options; the operands (containers) from *first. */
int docker_parse_opts(const char *cmd, const opt_def *defs, int argc, char **argv, void (*take)(int, const char *, void *),
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

static void kill_now(int base, container *c)
{
	/* The owner (a foreground run's door, a detached one's runner) is
	 * killed: its sandbox dies with it (the runner's monitor stops when
	 * its parent dies), whatever the command was doing, even being
	 * started; the end is recorded here. A detached one whose runner is
	 * gone has its sandbox stopped as nsbox stop does. */
	if (owner_signal(c, SIGKILL) < 0 && container_detached(c)) {
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
	if (docker_parse_opts(cmd, defs, argc, argv, many_take, &o, &first) < 0)
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
	else if (owner_signal(c, sig) < 0) {
		/* Gone between the look and the signal (or its recorded pid is
		 * not the process that wrote it: never signalled): as Docker,
		 * an error, and the name is not printed as if it was killed. */
		print_msg("docker kill: container '%s' ended meanwhile", c->name);
		return -1;
	}
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
		      "Image,\nConfig, HostConfig, NetworkSettings.Ports; and nsbox's own.\n\n", stdout);
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
	json_t *st = store_effective_state(c);
	json_object_set_new(doc, "NetworkSettings",
	                    json_pack("{s:o}", "Ports", ports_effective(c, json_is_true(json_object_get(st, "Running")))));
	json_object_set_new(doc, "State", st);
	return doc;
}

int docker_cmd_inspect(int argc, char **argv)
{
	inspect_opts o = { 0 };
	int first;
	if (docker_parse_opts("inspect", inspect_defs, argc, argv, inspect_take, &o, &first) < 0)
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
