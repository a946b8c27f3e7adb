/* The options of nsbox run (and run-code and start, which take them too):
 * one table, each row an option with its help and the policy key it sets. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "nsbox.h"
#include "opts.h"

enum {
	OPT_KEY = 256,   /* a plain setting: the row's key takes the value */
	OPT_POLICY, OPT_TRUST, OPT_JSON, OPT_RESULT_FILE, OPT_INTERACTIVE, OPT_SYSFS, OPT_SECCOMP_LOG,
	OPT_ALLOW_HOST_LOOPBACK, OPT_REQUIRE_CGROUP, OPT_ULIMIT, OPT_STATS_INTERVAL, OPT_STATS_FILE,
	OPT_MAX_OUTPUT, OPT_HELP, OPT_NAME, OPT_IDLE_TIMEOUT, OPT_LIFETIME, OPT_PUBLISH, OPT_PAUSE_IDLE, OPT_FROM,
	OPT_TTY,
};

static const opt_def run_opts[] = {
	{ "image", 0, "NAME", OPT_KEY, "root filesystem from the image store (default: default)", "image" },
	{ "rootfs", 0, "DIR", OPT_KEY, "root filesystem from a directory", "rootfs" },
	{ "policy", 0, "FILE", OPT_POLICY, "YAML policy; options below override it", NULL },
	{ "trust", 0, "LEVEL", OPT_TRUST, "untrusted, standard or trusted: a shipped policy", NULL },
	{ "memory", 'm', "SIZE", OPT_KEY, "memory limit, no swap beyond it (512m)", "limits.memory" },
	{ "cpus", 0, "N", OPT_KEY, "CPU quota in cores (1)", "limits.cpus" },
	{ "pids-limit", 0, "N", OPT_KEY, "process/thread limit (64)", "limits.pids" },
	{ "timeout", 0, "DURATION", OPT_KEY, "wall-clock limit; then the whole sandbox is killed (60s, 0: none)",
	  "limits.timeout" },
	{ "tmpfs-size", 0, "SIZE", OPT_KEY, "size of /tmp and /dev/shm (100m)", "limits.tmpfs" },
	{ "max-output", 0, "SIZE", OPT_MAX_OUTPUT, "bytes kept per stream, head and tail (10k with --json)",
	  "limits.output" },
	{ "network", 0, "MODE", OPT_KEY, "none (loopback only), user (NAT through pasta or\nslirp4netns) or host (none)",
	  "network.mode" },
	{ "allow-host-loopback", 0, NULL, OPT_ALLOW_HOST_LOOPBACK,
	  "with --network user: reach the host's loopback\nservices at the gateway address 10.0.2.2", NULL },
	{ "allow-host", 0, "HOST[:PORT]", OPT_KEY,
	  "allow egress to HOST (or *.SUFFIX) through a filtering\nproxy (repeatable; no port: 80 and 443)",
	  "network.allow" },
	{ "volume", 'v', "SRC:DST[:ro|rw]", OPT_KEY, "bind a host path, checked against the policy", "filesystem.mounts" },
	{ "sysfs", 0, NULL, OPT_SYSFS, "mount /sys read-only", NULL },
	{ "workspace", 0, "DIR[:PATH]", OPT_KEY,
	  "DIR at PATH (/workspace; DIR:DIR: its host path), copy-on-write: changes are captured, not written",
	  "workspace.path" },
	{ "session", 0, "NAME", OPT_KEY, "keep the workspace changes for review (nsbox session ...)",
	  "workspace.session" },
	{ "workspace-mode", 0, "M", OPT_KEY, "overlay (default), ro, or rw (writes through, captures nothing)",
	  "workspace.mode" },
	{ "workspace-max-size", 0, "SIZE", OPT_KEY, "bound the captured changes (default 1g)", "workspace.max_size" },
	{ "workspace-max-files", 0, "N", OPT_KEY, "bound their number of files (default 500000)",
	  "workspace.max_files" },
	{ "workdir", 'w', "DIR", OPT_KEY, "working directory inside (the workspace's PATH, else /)", "workdir" },
	{ "env", 'e', "NAME=VALUE", OPT_KEY, "set a variable (the environment is otherwise cleared)", "environment.set" },
	{ "env-pass", 0, "NAME", OPT_KEY, "copy a variable from this environment", "environment.pass" },
	{ "user", 'u', "UID[:GID]", OPT_KEY, "identity inside (1000:1000)", "security.user" },
	{ "hostname", 0, "NAME", OPT_KEY, "hostname inside (nsbox)", "hostname" },
	{ "seccomp", 0, "PROFILE", OPT_KEY, "default, strict, a profile file, or unconfined (default)",
	  "security.seccomp" },
	{ "seccomp-log", 0, NULL, OPT_SECCOMP_LOG, "record the system calls the filter denied, in the record", NULL },
	{ "ulimit", 0, "NAME=VALUE", OPT_ULIMIT, "nofile=N|host or fsize=SIZE|unlimited (host, unlimited)", NULL },
	{ "require-cgroup", 0, NULL, OPT_REQUIRE_CGROUP, "refuse to run when limits cannot be enforced by a cgroup",
	  NULL },
	{ "cgroup-parent", 0, "DIR", OPT_KEY, "a delegated cgroup v2 directory to create run cgroups in",
	  "limits.cgroup_parent" },
	{ "stats-interval", 0, "DURATION", OPT_STATS_INTERVAL, "sample memory, CPU and processes while running",
	  NULL },
	{ "stats-file", 0, "FILE", OPT_STATS_FILE, "where the samples go, as JSON lines (default: stderr)", NULL },
	{ "json", 0, NULL, OPT_JSON, "capture output and print the result record as JSON", NULL },
	{ "result-file", 0, "FILE", OPT_RESULT_FILE, "also write the result record to FILE", NULL },
	{ "import-gate", 0, "MODE", OPT_KEY, "run-code python: off, warn or block imports of\nthe blocked modules "
	  "(found by ast, in a sandbox)", "code.import_gate" },
	{ "block-import", 0, "MOD", OPT_KEY, "block MOD and its submodules (repeatable; implies\n--import-gate block; "
	  "default list: os, subprocess,\nshutil, socket, pathlib)", "code.blocked_imports" },
	{ "artifacts", 0, "DIR", OPT_KEY, "keep result.json, policy.yaml and the code of each\nrun in "
	  "DIR/<UTC time>-<digest> (0700, files 0600)", "audit.artifacts" },
	{ "store-code", 0, "WHEN", OPT_KEY, "always (default), on_error or never", "audit.store_code" },
	{ "artifacts-keep", 0, "N", OPT_KEY, "keep only the N newest run directories", "audit.keep" },
	{ "artifacts-max-age", 0, "D", OPT_KEY, "remove run directories older than D (7d, 12h)", "audit.max_age" },
	{ "audit-log", 0, "FILE", OPT_KEY, "append one JSON line per run (no code, no output)", "audit.log" },
	{ "audit-on-error", 0, "M", OPT_KEY, "fail (default: no audit, no run) or warn", "audit.on_error" },
	{ "interactive", 'i', NULL, OPT_INTERACTIVE, "relay stdin to the command (default: /dev/null)", NULL },
	{ "tty", 't', NULL, OPT_TTY, "give the command a terminal of its own, relayed to\nthis one (with -i: "
	  "interactive; window size follows)", NULL },
	{ "help", 'h', NULL, OPT_HELP, "show this help", NULL },
	/* nsbox start only */
	{ "name", 0, "NAME", OPT_NAME, "(start) the sandbox's name (default: sb-RANDOM)", NULL },
	{ "idle-timeout", 0, "DURATION", OPT_IDLE_TIMEOUT, "(start) end it after this long without an exec", NULL },
	{ "lifetime", 0, "DURATION", OPT_LIFETIME, "(start) end it this long after it started", NULL },
	{ "publish", 'p', "[ADDR:]HOSTPORT:PORT", OPT_PUBLISH, "(start) forward a host port (loopback by default;\n"
	  "HOSTPORT 0: any free one) to PORT inside, whatever\nthe network (repeatable)", NULL },
	{ "from", 0, "SNAPSHOT", OPT_FROM, "(start) start with a snapshot's files and configuration\n(nsbox "
	  "snapshot); the options given here apply over it", NULL },
	{ "pause-when-idle", 0, NULL, OPT_PAUSE_IDLE, "(start) pause it when idle instead of ending it; the\nnext "
	  "request resumes it", NULL },
	{ 0 },
};

static void usage(FILE *f, const char *head)
{
	fputs(head, f);
	opt_help(f, run_opts);
	fputs("\nExit status: the command's own; 128+N if killed by signal N; 124 timeout;\n"
	      "125 nsbox failed (nothing ran); 126 cannot execute; 127 not found.\n", f);
}

void run_help(FILE *f)
{
	usage(f, "Usage: nsbox run [OPTIONS] [--] COMMAND [ARG...]\n"
	         "Run COMMAND in a new sandbox (user, pid, mount, net, ipc, uts and cgroup namespaces).\n\n");
}

void run_code_help(FILE *f)
{
	usage(f, "Usage: nsbox run-code --lang python|node|bash (-c CODE | FILE | -) [RUN OPTIONS]\n"
	         "Run a code snippet in a fresh sandbox (image 'default' unless --image/--rootfs).\n"
	         "The code is placed in the sandbox's /tmp and run there; with --json the record's\n"
	         "error explains a failure (timeout, syntax error, last line of stderr).\n\n"
	         "      --lang LANG         python, node or bash\n"
	         "  -c CODE                 the code (else FILE, or - for stdin)\n");
}

static const char *env_get(char **env, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; env && env[i]; i++)
		if (!strncmp(env[i], name, n) && env[i][n] == '=')
			return env[i] + n + 1;
	return NULL;
}

static int push(run_args *a, const char *key, const char *value, const char *origin)
{
	setting *s = realloc(a->settings, (a->n_settings + 1) * sizeof(*s));
	if (!s)
		return -ENOMEM;
	a->settings = s;
	s[a->n_settings++] = (setting){ key, value, origin };
	return 0;
}

enum args_mode { ARGS_RUN, ARGS_START, ARGS_CODE };

/* The origin of a value in error messages: the option as written. */
static const char *origin_of(const opt_def *d)
{
	static char names[sizeof(run_opts) / sizeof(run_opts[0])][40];
	size_t i = (size_t) (d - run_opts);
	if (i >= sizeof(names) / sizeof(names[0]))
		return "option";
	if (!names[i][0])
		snprintf(names[i], sizeof(names[i]), "--%s", d->name);
	return names[i];
}

/* One option: what it sets or changes in a. 0, -1 with errbuf, or -ENOMEM. */
static int take(run_args *a, int id, const opt_def *d, const char *v, bool start, char *errbuf, size_t errlen)
{
	switch (id) {
	case OPT_POLICY: a->policy = v; a->policy_given = true; return 0;
	case OPT_JSON: a->json = true; return 0;
	case OPT_RESULT_FILE: a->result_file = v; return 0;
	case OPT_TRUST:
		if (strcmp(v, "untrusted") && strcmp(v, "standard") && strcmp(v, "trusted")) {
			snprintf(errbuf, errlen, "--trust: invalid level '%s' (expected untrusted, standard or trusted)", v);
			return -1;
		}
		a->trust = v;
		return 0;
	case OPT_SYSFS: return push(a, "filesystem.sysfs", "true", "--sysfs");
	case OPT_INTERACTIVE: a->interactive = true; return 0;
	case OPT_TTY: a->tty = true; return 0;
	case OPT_NAME: case OPT_IDLE_TIMEOUT: case OPT_LIFETIME: case OPT_PUBLISH: case OPT_PAUSE_IDLE: case OPT_FROM:
		if (!start) {
			snprintf(errbuf, errlen, "option '--%s' is for nsbox start", d->name);
			return -1;
		}
		if (id == OPT_FROM) {
			a->from = v;
			return 0;
		}
		if (id == OPT_PAUSE_IDLE) {
			a->pause_when_idle = true;
			return 0;
		}
		if (id == OPT_PUBLISH) {
			const char **p = realloc(a->publish, (a->n_publish + 2) * sizeof(*p));
			if (!p)
				return -ENOMEM;
			a->publish = p;
			p[a->n_publish++] = v;
			p[a->n_publish] = NULL;
			return 0;
		}
		*(id == OPT_NAME ? &a->name : id == OPT_LIFETIME ? &a->lifetime : &a->idle_timeout) = v;
		return 0;
	case OPT_STATS_INTERVAL: a->stats_interval = v; return 0;
	case OPT_STATS_FILE: a->stats_file = v; return 0;
	case OPT_SECCOMP_LOG: return push(a, "security.seccomp_log", "true", "--seccomp-log");
	case OPT_ALLOW_HOST_LOOPBACK: return push(a, "network.allow_host_loopback", "true", "--allow-host-loopback");
	case OPT_REQUIRE_CGROUP: return push(a, "limits.fallback", "refuse", "--require-cgroup");
	case OPT_ULIMIT:
		if (!strncmp(v, "nofile=", 7))
			return push(a, "limits.nofile", v + 7, "--ulimit nofile");
		if (!strncmp(v, "fsize=", 6))
			return push(a, "limits.fsize", v + 6, "--ulimit fsize");
		snprintf(errbuf, errlen, "--ulimit: '%s' is not nofile=N or fsize=SIZE", v);
		return -1;
	case OPT_HELP: a->help = true; return 0;
	case OPT_MAX_OUTPUT: a->max_output = true; return push(a, d->key, v, origin_of(d));
	case OPT_KEY: return push(a, d->key, v, origin_of(d));
	}
	return 0;
}

static int parse_args(int argc, char **argv, char **env, run_args *a, char *errbuf, size_t errlen,
                      enum args_mode mode)
{
	bool start = mode == ARGS_START;
	*a = (run_args){ 0 };
	a->policy = nsbox_env_policy((const char *const *) env);
	/* NSBOX_* variables (the library's table), between the policy and the
	 * options in precedence. */
	const char *var, *key;
	for (size_t i = 0; nsbox_env_setting(i, &var, &key) == 0; i++) {
		const char *v = env_get(env, var);
		if (v && push(a, key, v, var) < 0)
			goto oom;
	}
	/* The command starts at the first operand: what follows is its own. */
	opt_state st;
	opt_init(&st, run_opts, argc, argv, true);
	int id;
	const char *v;
	const opt_def *d;
	while ((id = opt_next(&st, &v, &d, errbuf, errlen)) != OPT_DONE) {
		if (id == OPT_ERROR)
			return -1;
		int r = take(a, id, d, v, start, errbuf, errlen);
		if (r == -ENOMEM)
			goto oom;
		if (r < 0)
			return -1;
		if (a->help)
			return 0;
	}
	if (a->trust && a->policy_given) {
		snprintf(errbuf, errlen, "--trust and --policy both choose the policy: give one");
		return -1;
	}
	if (a->trust)
		a->policy = a->trust;
	if (start && st.i < argc) {
		snprintf(errbuf, errlen, "nsbox start takes no command: run commands with nsbox exec NAME -- COMMAND");
		return -1;
	}
	if (mode == ARGS_CODE && st.i < argc) {
		snprintf(errbuf, errlen, "run-code: unexpected argument '%s' (the code comes from -c, a FILE, or -)",
		         argv[st.i]);
		return -1;
	}
	if (mode != ARGS_RUN)
		return 0;
	if (st.i >= argc) {
		snprintf(errbuf, errlen, "no command given (usage: nsbox run [OPTIONS] [--] COMMAND [ARG...])");
		return -1;
	}
	a->argc = argc - st.i;
	a->argv = argv + st.i;
	return 0;
oom:
	snprintf(errbuf, errlen, "out of memory");
	return -1;
}

int parse_run_args(int argc, char **argv, char **env, run_args *a, char *errbuf, size_t errlen)
{
	return parse_args(argc, argv, env, a, errbuf, errlen, ARGS_RUN);
}

int parse_start_args(int argc, char **argv, char **env, run_args *a, char *errbuf, size_t errlen)
{
	return parse_args(argc, argv, env, a, errbuf, errlen, ARGS_START);
}

int parse_code_args(int argc, char **argv, char **env, run_args *a, char *errbuf, size_t errlen)
{
	return parse_args(argc, argv, env, a, errbuf, errlen, ARGS_CODE);
}

bool run_option_takes_value(const char *arg)
{
	return opt_takes_value(run_opts, arg);
}

const opt_def *run_option_table(void)
{
	return run_opts;
}

void run_args_free(run_args *a)
{
	free(a->settings);
	a->settings = NULL;
	a->n_settings = 0;
	free(a->publish);
	a->publish = NULL;
	a->n_publish = 0;
}
