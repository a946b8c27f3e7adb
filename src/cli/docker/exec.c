/* docker exec CONTAINER COMMAND: `nsbox exec` in the container's sandbox,
 * with the options translated (the sandbox's timeout, limits.timeout, is
 * each exec's). With -d, a background process of the sandbox
 * (nsbox_process_start, as nsbox exec --detach starts one): nothing is
 * printed, as Docker prints nothing; its output is kept by the sandbox, not
 * in the container's log (docker logs is the container's command's, as in
 * Docker), for nsbox process ls|logs CONTAINER; it has no timeout, and ends
 * with the container. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "docker/docker.h"
#include "live/live_cli.h"
#include "opts.h"

enum { E_DETACH = 1, E_ENV, E_ENV_FILE, E_INTERACTIVE, E_TTY, E_USER, E_WORKDIR, E_PRIVILEGED, E_DETACH_KEYS, E_HELP };

static const opt_def exec_opts_defs[] = {
	{ "env", 'e', "NAME[=VALUE]", E_ENV, "set a variable for the command; NAME alone passes this one's", NULL },
	{ "env-file", 0, "FILE", E_ENV_FILE, "variables from FILE, one NAME[=VALUE] a line", NULL },
	{ "interactive", 'i', OPT_BOOL, E_INTERACTIVE, "pass stdin through", NULL },
	{ "tty", 't', OPT_BOOL, E_TTY, "give the command a pseudo-terminal", NULL },
	{ "user", 'u', "UID[:GID]", E_USER, "only the container's own user (set by docker run -u)", NULL },
	{ "workdir", 'w', "DIR", E_WORKDIR, "working directory inside", NULL },
	{ "detach", 'd', OPT_BOOL, E_DETACH, "run it in the background (no timeout; it ends with the\ncontainer; "
	  "its output: nsbox process logs CONTAINER ID)", NULL },
	{ "help", 0, NULL, E_HELP, "print this help", NULL },
	{ "privileged", 0, OPT_BOOL, E_PRIVILEGED, NULL, NULL },
	{ "detach-keys", 0, "KEYS", E_DETACH_KEYS, NULL, NULL },
	{ 0 },
};

static void exec_help(FILE *f)
{
	fputs("Usage: nsbox docker exec [OPTIONS] CONTAINER COMMAND [ARG...]\n"
	      "Run COMMAND in a running container (docker run -d): nsbox exec in its sandbox,\n"
	      "with the configuration's timeout (limits.timeout). With -d, in the background:\n"
	      "nothing is printed (as Docker); its output is not in docker logs but kept by\n"
	      "the sandbox (the last 1 MiB a stream): nsbox process ls CONTAINER gives its ID,\n"
	      "nsbox process logs CONTAINER ID its output.\n\n", f);
	opt_help(f, exec_opts_defs);
	fputs("\nExit status: the command's own; 125 nothing ran (no such container, not\n"
	      "running, a refused option); 126 cannot execute; 127 not found.\n", f);
}

/* The argv of nsbox exec, growing. */
typedef struct xargv {
	char **v;
	int n;
	char **owned;
	int n_owned;
} xargv;

static int add(xargv *x, const char *s)
{
	char **v = realloc(x->v, (size_t) (x->n + 2) * sizeof(*v));
	if (!v)
		return -1;
	x->v = v;
	v[x->n++] = (char *) s;
	v[x->n] = NULL;
	return 0;
}

static const char *keep(xargv *x, char *s)
{
	char **v = s ? realloc(x->owned, (size_t) (x->n_owned + 1) * sizeof(*v)) : NULL;
	if (!v) {
		free(s);
		return NULL;
	}
	x->owned = v;
	v[x->n_owned++] = s;
	return s;
}

typedef struct exec_opts {
	bool interactive, tty, help, detach;
	const char *user, *workdir;
	char **env;   /* NAME=VALUE (-e NAME: ours, when set), for -d */
	size_t n_env;
	int first;   /* CONTAINER */
} exec_opts;

/* -e NAME=VALUE sets, -e NAME passes our value: nsbox exec's -e and
 * --env-pass (and the same for a background process). */
static int env_arg(xargv *x, exec_opts *o, const char *v)
{
	if (!*v || v[0] == '=') {
		print_msg("docker exec: --env '%s': expected NAME=VALUE or NAME", v);
		return -1;
	}
	const char *eq = strchr(v, '='), *ours = eq ? NULL : getenv(v);
	if (eq || ours) {
		char *kv = NULL, **nv = realloc(o->env, (o->n_env + 2) * sizeof(*nv));
		if (nv)
			o->env = nv;
		if (!nv || (eq ? !(kv = strdup(v)) : asprintf(&kv, "%s=%s", v, ours) < 0))
			return -1;
		o->env[o->n_env++] = kv;
		o->env[o->n_env] = NULL;
	}
	return add(x, eq ? "-e" : "--env-pass") < 0 || add(x, v) < 0 ? -1 : 0;
}

static int env_file_args(xargv *x, exec_opts *o, const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		print_msg("docker exec: --env-file '%s': %s", path, strerror(errno));
		return -1;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int r = 0;
	while (r == 0 && (n = getline(&line, &cap, f)) >= 0) {
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = '\0';
		const char *s = line + strspn(line, " \t");
		if (!*s || *s == '#')
			continue;
		const char *kv = keep(x, strdup(s));
		r = kv ? env_arg(x, o, kv) : -1;
	}
	free(line);
	fclose(f);
	return r;
}

typedef struct exec_call {
	xargv *x;
} exec_call;

static int call_exec(void *arg)
{
	xargv *x = ((exec_call *) arg)->x;
	return cmd_exec(x->n, x->v);
}

/* The options: into x (nsbox exec's -e, --env-pass, -w) and o. */
static int parse_exec(int argc, char **argv, xargv *x, exec_opts *o)
{
	opt_state st;
	opt_init(&st, exec_opts_defs, argc, argv, true);
	const char *v;
	const opt_def *d;
	char err[256];
	int id;
	while ((id = opt_next(&st, &v, &d, err, sizeof(err))) != OPT_DONE) {
		int b = id != OPT_ERROR && !opt_has_value(d) ? opt_bool(v) : 1;
		if (b < 0) {
			print_msg("docker exec: --%s: invalid boolean '%s'", d->name, v);
			return -1;
		}
		switch (id) {
		case E_ENV: if (env_arg(x, o, v) < 0) return -1; break;
		case E_ENV_FILE: if (env_file_args(x, o, v) < 0) return -1; break;
		case E_INTERACTIVE: o->interactive = b; break;
		case E_TTY: o->tty = b; break;
		case E_USER: o->user = v; break;
		case E_WORKDIR:
			o->workdir = v;
			if (add(x, "-w") < 0 || add(x, v) < 0)
				return -1;
			break;
		case E_HELP: exec_help(stdout); o->help = true; return 0;
		case E_DETACH: o->detach = b; break;
		case E_PRIVILEGED:
			if (!b)
				break;
			print_msg("docker exec: --privileged: refused: a sandbox never has privileges");
			return -1;
		case E_DETACH_KEYS: print_msg("docker exec: --detach-keys: refused: nsbox has no attach"); return -1;
		default: print_msg("docker exec: %s (see 'nsbox docker exec --help')", err); return -1;
		}
	}
	o->first = st.i;
	if (argc - st.i < 2) {
		print_msg("docker exec: usage: nsbox docker exec [OPTIONS] CONTAINER COMMAND [ARG...]");
		return -1;
	}
	if (o->detach && (o->interactive || o->tty)) {
		print_msg("docker exec: --detach with -i or -t: a background command has no input or terminal (its "
		          "output is kept: nsbox process logs CONTAINER ID)");
		return -1;
	}
	if (o->workdir && o->workdir[0] != '/') {
		print_msg("docker exec: --workdir '%s': an absolute path inside the container", o->workdir);
		return -1;
	}
	return 0;
}

/* -d: a background process of the container's sandbox. */
static int exec_background(const container *c, const exec_opts *o, char **cmd)
{
	nsbox_sandbox *sb = live_cli_connect(c->name);
	if (!sb)
		return DOCKER_EXIT_RUN;
	nsbox_process_options po = {
		.version = NSBOX_PROCESS_OPTIONS_VERSION,
		.flags = o->n_env ? NSBOX_EXEC_ENV_ADD : 0,
		.argv = (const char *const *) cmd,
		.envp = o->n_env ? (const char *const *) o->env : NULL,
		.workdir = o->workdir,
		.timeout_ms = 0,   /* none: it ends with the container */
	};
	nsbox_process *p = NULL;
	nsbox_error *e = NULL;
	int rc = 0;
	if (nsbox_process_start(sb, &po, &p, &e) < 0) {
		print_error(e);
		nsbox_error_free(e);
		rc = DOCKER_EXIT_RUN;
	}
	nsbox_process_free(p);   /* the sandbox's: it runs on */
	nsbox_sandbox_free(sb);
	return rc;
}

/* The container, running and detached; -u only as its own user. */
static int exec_target(int base, const char *ref, const exec_opts *o, container *c)
{
	if (store_find(base, ref, c, false) < 0)
		return -1;
	if (!container_detached(c)) {
		print_msg("docker exec: container '%s' runs in the foreground (docker run without -d): nothing else runs "
		          "in its sandbox", c->name);
		return -1;
	}
	if (!c->running) {
		print_msg("docker exec: container '%s' is not running", c->name);
		return -1;
	}
	const char *own = json_string_value(json_object_get(json_object_get(c->info, "Config"), "User"));
	if (o->user && (!own || strcmp(own, o->user))) {
		print_msg("docker exec: --user '%s': a command runs as the container's user ('%s', set by docker run -u)",
		          o->user, own && *own ? own : "the policy's");
		return -1;
	}
	return 0;
}

int docker_cmd_exec(int argc, char **argv)
{
	xargv x = { 0 };
	exec_opts o = { 0 };
	int rc = DOCKER_EXIT_RUN, base = -1;
	container c = { .dirfd = -1 };
	/* nsbox exec NAME [-e ...] [-w DIR] [-i] -- COMMAND */
	if (add(&x, "exec") < 0 || add(&x, "") < 0 || parse_exec(argc, argv, &x, &o) < 0)
		goto out;
	if (o.help) {
		rc = 0;
		goto out;
	}
	if ((base = store_open(false)) < 0)
		print_msg("no such container: %s", argv[o.first]);
	if (base < 0 || exec_target(base, argv[o.first], &o, &c) < 0)
		goto out;
	x.v[1] = c.name;
	if (o.detach) {
		rc = exec_background(&c, &o, argv + o.first + 1);
		goto out;
	}
	/* -t: the command's own terminal, the library's (nsbox exec -t). */
	if ((o.interactive && add(&x, "-i") < 0) || (o.tty && add(&x, "-t") < 0) || add(&x, "--") < 0)
		goto out;
	for (int i = o.first + 1; i < argc; i++)
		if (add(&x, argv[i]) < 0)
			goto out;
	exec_call call = { &x };
	rc = call_exec(&call);
out:
	container_free(&c);
	if (base >= 0)
		close(base);
	for (int i = 0; i < x.n_owned; i++)
		free(x.owned[i]);
	free(x.owned);
	free(x.v);
	for (size_t i = 0; i < o.n_env; i++)
		free(o.env[i]);
	free(o.env);
	return rc;
}
