#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "nsbox.h"

const char run_usage[] =
	"Usage: nsbox run [OPTIONS] [--] COMMAND [ARG...]\n"
	"Run COMMAND in a new sandbox (user, pid, mount, net, ipc, uts and cgroup namespaces).\n"
	"\n"
	"  --image NAME            root filesystem from the image store (default: default)\n"
	"  --rootfs DIR            root filesystem from a directory\n"
	"  --policy FILE           YAML policy; options below override it\n"
	"      --trust LEVEL       untrusted, standard or trusted: a shipped policy\n"
	"  -m, --memory SIZE       memory limit, no swap beyond it (512m)\n"
	"      --cpus N            CPU quota in cores (1)\n"
	"      --pids-limit N      process/thread limit (64)\n"
	"      --timeout DURATION  wall-clock limit; then the whole sandbox is killed (60s, 0: none)\n"
	"      --tmpfs-size SIZE   size of /tmp and /dev/shm (100m)\n"
	"      --max-output SIZE   bytes kept per stream, head and tail (10k with --json)\n"
	"      --network MODE      none (loopback only), user (NAT through pasta or\n"
	"                          slirp4netns) or host (none)\n"
	"      --allow-host-loopback  with --network user: reach the host's loopback\n"
	"                          services at the gateway address 10.0.2.2\n"
	"      --allow-host HOST[:PORT]  allow egress to HOST (or *.SUFFIX) through a filtering\n"
	"                          proxy (repeatable; no port: 80 and 443)\n"
	"  -v, --volume SRC:DST[:ro|rw]  bind a host path, checked against the policy\n"
	"      --sysfs             mount /sys read-only\n"
	"      --workspace DIR     DIR at /workspace, copy-on-write: changes are captured, not written\n"
	"      --session NAME      keep the workspace changes for review (nsbox session ...)\n"
	"      --workspace-mode M  overlay (default), ro, or rw (writes through, captures nothing)\n"
	"      --workspace-max-size SIZE  bound the captured changes (default 1g)\n"
	"      --workspace-max-files N  bound their number of files (default 500000)\n"
	"  -w, --workdir DIR       working directory inside (/)\n"
	"  -e, --env NAME=VALUE    set a variable (the environment is otherwise cleared)\n"
	"      --env-pass NAME     copy a variable from this environment\n"
	"  -u, --user UID[:GID]    identity inside (1000:1000)\n"
	"      --hostname NAME     hostname inside (nsbox)\n"
	"      --seccomp PROFILE   default, strict, a profile file, or unconfined (default)\n"
	"      --seccomp-log       record the system calls the filter denied, in the record\n"
	"      --ulimit NAME=VALUE nofile=N or fsize=SIZE (1024, 1g)\n"
	"      --require-cgroup    refuse to run when limits cannot be enforced by a cgroup\n"
	"      --cgroup-parent DIR a delegated cgroup v2 directory to create run cgroups in\n"
	"      --stats-interval DURATION  sample memory, CPU and processes while running\n"
	"      --stats-file FILE   where the samples go, as JSON lines (default: stderr)\n"
	"      --json              capture output and print the result record as JSON\n"
	"      --result-file FILE  also write the result record to FILE\n"
	"      --import-gate MODE  run-code python: off, warn or block imports of\n"
	"                          the blocked modules (found by ast, in a sandbox)\n"
	"      --block-import MOD  block MOD and its submodules (repeatable; implies\n"
	"                          --import-gate block; default list: os, subprocess,\n"
	"                          shutil, socket, pathlib)\n"
	"      --artifacts DIR     keep result.json, policy.yaml and the code of each\n"
	"                          run in DIR/<UTC time>-<digest> (0700, files 0600)\n"
	"      --store-code WHEN   always (default), on_error or never\n"
	"      --artifacts-keep N  keep only the N newest run directories\n"
	"      --artifacts-max-age D  remove run directories older than D (7d, 12h)\n"
	"      --audit-log FILE    append one JSON line per run (no code, no output)\n"
	"      --audit-on-error M  fail (default: no audit, no run) or warn\n"
	"  -i, --interactive       pass stdin through (default: /dev/null)\n"
	"  -h, --help              show this help\n"
	"\n"
	"Exit status: the command's own; 128+N if killed by signal N; 124 timeout;\n"
	"125 nsbox failed (nothing ran); 126 cannot execute; 127 not found.\n";

enum {
	OPT_IMAGE = 256, OPT_ROOTFS, OPT_POLICY, OPT_CPUS, OPT_PIDS, OPT_TIMEOUT, OPT_TMPFS,
	OPT_MAX_OUTPUT, OPT_NETWORK, OPT_ALLOW_HOST, OPT_SYSFS, OPT_ENV_PASS, OPT_HOSTNAME,
	OPT_SECCOMP, OPT_JSON, OPT_RESULT_FILE, OPT_ULIMIT, OPT_REQUIRE_CGROUP, OPT_CGROUP_PARENT,
	OPT_STATS_INTERVAL, OPT_STATS_FILE, OPT_SECCOMP_LOG, OPT_WORKSPACE, OPT_SESSION, OPT_WS_MODE, OPT_WS_MAX_SIZE, OPT_WS_MAX_FILES,
	OPT_ALLOW_HOST_LOOPBACK, OPT_AUDIT_LOG, OPT_AUDIT_ON_ERROR, OPT_TRUST, OPT_IMPORT_GATE, OPT_BLOCK_IMPORT, OPT_ARTIFACTS, OPT_STORE_CODE, OPT_ARTIFACTS_KEEP, OPT_ARTIFACTS_MAX_AGE,
	OPT_NAME, OPT_IDLE_TIMEOUT, OPT_LIFETIME,
};

static const struct option long_opts[] = {
	{ "image", required_argument, NULL, OPT_IMAGE },
	{ "rootfs", required_argument, NULL, OPT_ROOTFS },
	{ "policy", required_argument, NULL, OPT_POLICY },
	{ "memory", required_argument, NULL, 'm' },
	{ "cpus", required_argument, NULL, OPT_CPUS },
	{ "pids-limit", required_argument, NULL, OPT_PIDS },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "tmpfs-size", required_argument, NULL, OPT_TMPFS },
	{ "max-output", required_argument, NULL, OPT_MAX_OUTPUT },
	{ "network", required_argument, NULL, OPT_NETWORK },
	{ "allow-host", required_argument, NULL, OPT_ALLOW_HOST },
	{ "allow-host-loopback", no_argument, NULL, OPT_ALLOW_HOST_LOOPBACK },
	{ "volume", required_argument, NULL, 'v' },
	{ "sysfs", no_argument, NULL, OPT_SYSFS },
	{ "workdir", required_argument, NULL, 'w' },
	{ "env", required_argument, NULL, 'e' },
	{ "env-pass", required_argument, NULL, OPT_ENV_PASS },
	{ "user", required_argument, NULL, 'u' },
	{ "hostname", required_argument, NULL, OPT_HOSTNAME },
	{ "seccomp", required_argument, NULL, OPT_SECCOMP },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "result-file", required_argument, NULL, OPT_RESULT_FILE },
	{ "interactive", no_argument, NULL, 'i' },
	{ "ulimit", required_argument, NULL, OPT_ULIMIT },
	{ "seccomp-log", no_argument, NULL, OPT_SECCOMP_LOG },
	{ "workspace", required_argument, NULL, OPT_WORKSPACE },
	{ "session", required_argument, NULL, OPT_SESSION },
	{ "workspace-mode", required_argument, NULL, OPT_WS_MODE },
	{ "workspace-max-size", required_argument, NULL, OPT_WS_MAX_SIZE },
	{ "workspace-max-files", required_argument, NULL, OPT_WS_MAX_FILES },
	{ "require-cgroup", no_argument, NULL, OPT_REQUIRE_CGROUP },
	{ "cgroup-parent", required_argument, NULL, OPT_CGROUP_PARENT },
	{ "stats-interval", required_argument, NULL, OPT_STATS_INTERVAL },
	{ "stats-file", required_argument, NULL, OPT_STATS_FILE },
	{ "import-gate", required_argument, NULL, OPT_IMPORT_GATE },
	{ "block-import", required_argument, NULL, OPT_BLOCK_IMPORT },
	{ "artifacts", required_argument, NULL, OPT_ARTIFACTS },
	{ "store-code", required_argument, NULL, OPT_STORE_CODE },
	{ "artifacts-keep", required_argument, NULL, OPT_ARTIFACTS_KEEP },
	{ "artifacts-max-age", required_argument, NULL, OPT_ARTIFACTS_MAX_AGE },
	{ "trust", required_argument, NULL, OPT_TRUST },
	{ "audit-log", required_argument, NULL, OPT_AUDIT_LOG },
	{ "audit-on-error", required_argument, NULL, OPT_AUDIT_ON_ERROR },
	{ "help", no_argument, NULL, 'h' },
	/* nsbox start only */
	{ "name", required_argument, NULL, OPT_NAME },
	{ "idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT },
	{ "lifetime", required_argument, NULL, OPT_LIFETIME },
	{ 0 },
};

/* Options that are plain settings: option value -> policy key. */
static const struct { int opt; const char *name, *key; } option_keys[] = {
	{ OPT_IMAGE, "--image", "image" }, { OPT_ROOTFS, "--rootfs", "rootfs" },
	{ 'm', "--memory", "limits.memory" }, { OPT_CPUS, "--cpus", "limits.cpus" },
	{ OPT_PIDS, "--pids-limit", "limits.pids" }, { OPT_TIMEOUT, "--timeout", "limits.timeout" },
	{ OPT_TMPFS, "--tmpfs-size", "limits.tmpfs" }, { OPT_MAX_OUTPUT, "--max-output", "limits.output" },
	{ OPT_NETWORK, "--network", "network.mode" }, { OPT_ALLOW_HOST, "--allow-host", "network.allow" },
	{ 'v', "--volume", "filesystem.mounts" }, { 'w', "--workdir", "workdir" },
	{ 'e', "--env", "environment.set" }, { OPT_ENV_PASS, "--env-pass", "environment.pass" },
	{ 'u', "--user", "security.user" }, { OPT_HOSTNAME, "--hostname", "hostname" },
	{ OPT_SECCOMP, "--seccomp", "security.seccomp" },
	{ OPT_CGROUP_PARENT, "--cgroup-parent", "limits.cgroup_parent" },
	{ OPT_WORKSPACE, "--workspace", "workspace.path" }, { OPT_SESSION, "--session", "workspace.session" },
	{ OPT_WS_MODE, "--workspace-mode", "workspace.mode" },
	{ OPT_WS_MAX_SIZE, "--workspace-max-size", "workspace.max_size" },
	{ OPT_WS_MAX_FILES, "--workspace-max-files", "workspace.max_files" },
	{ OPT_AUDIT_LOG, "--audit-log", "audit.log" }, { OPT_AUDIT_ON_ERROR, "--audit-on-error", "audit.on_error" },
	{ OPT_ARTIFACTS, "--artifacts", "audit.artifacts" }, { OPT_STORE_CODE, "--store-code", "audit.store_code" },
	{ OPT_ARTIFACTS_KEEP, "--artifacts-keep", "audit.keep" },
	{ OPT_ARTIFACTS_MAX_AGE, "--artifacts-max-age", "audit.max_age" },
	{ OPT_IMPORT_GATE, "--import-gate", "code.import_gate" },
	{ OPT_BLOCK_IMPORT, "--block-import", "code.blocked_imports" },
};

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
	/* '+': stop at the first non-option, which starts the command. ':' at
	 * the front makes getopt report errors to us instead of printing. */
	opterr = 0;
	optind = 0;
	int c;
	while ((c = getopt_long(argc, argv, "+:m:v:w:e:u:ih", long_opts, NULL)) != -1) {
		switch (c) {
		case OPT_POLICY: a->policy = optarg; a->policy_given = true; continue;
		case OPT_JSON: a->json = true; continue;
		case OPT_RESULT_FILE: a->result_file = optarg; continue;
		case OPT_TRUST:
			if (strcmp(optarg, "untrusted") && strcmp(optarg, "standard") && strcmp(optarg, "trusted")) {
				snprintf(errbuf, errlen, "--trust: invalid level '%s' (expected untrusted, standard or trusted)", optarg);
				return -1;
			}
			a->trust = optarg;
			continue;
		case OPT_SYSFS:
			if (push(a, "filesystem.sysfs", "true", "--sysfs") < 0)
				goto oom;
			continue;
		case 'i': a->interactive = true; continue;
		case OPT_NAME: case OPT_IDLE_TIMEOUT: case OPT_LIFETIME:
			if (!start) {
				snprintf(errbuf, errlen, "option '%s' is for nsbox start", argv[optind - 1]);
				return -1;
			}
			*(c == OPT_NAME ? &a->name : c == OPT_LIFETIME ? &a->lifetime : &a->idle_timeout) = optarg;
			continue;
		case OPT_STATS_INTERVAL: a->stats_interval = optarg; continue;
		case OPT_STATS_FILE: a->stats_file = optarg; continue;
		case OPT_SECCOMP_LOG:
			if (push(a, "security.seccomp_log", "true", "--seccomp-log") < 0)
				goto oom;
			continue;
		case OPT_ALLOW_HOST_LOOPBACK:
			if (push(a, "network.allow_host_loopback", "true", "--allow-host-loopback") < 0)
				goto oom;
			continue;
		case OPT_REQUIRE_CGROUP:
			if (push(a, "limits.fallback", "refuse", "--require-cgroup") < 0)
				goto oom;
			continue;
		case OPT_ULIMIT:
			if (!strncmp(optarg, "nofile=", 7)) {
				if (push(a, "limits.nofile", optarg + 7, "--ulimit nofile") < 0)
					goto oom;
			} else if (!strncmp(optarg, "fsize=", 6)) {
				if (push(a, "limits.fsize", optarg + 6, "--ulimit fsize") < 0)
					goto oom;
			} else {
				snprintf(errbuf, errlen, "--ulimit: '%s' is not nofile=N or fsize=SIZE", optarg);
				return -1;
			}
			continue;
		case 'h': a->help = true; return 0;
		case ':':
			snprintf(errbuf, errlen, "option '%s' needs a value", argv[optind - 1]);
			return -1;
		case '?': {
			/* optopt: a short option's letter; for a long option that
			 * takes no value but was given one ("--json=1"), the
			 * option's own code, which is no character to show. */
			const char *arg = argv[optind - 1];
			if (optopt >= 256)
				snprintf(errbuf, errlen, "option '%.*s' takes no value", (int) strcspn(arg, "="), arg);
			else if (optopt)
				snprintf(errbuf, errlen, "unknown option '-%c'", optopt);
			else
				snprintf(errbuf, errlen, "unknown option '%s'", arg);
			return -1;
		}
		}
		if (c == OPT_MAX_OUTPUT)
			a->max_output = true;
		size_t i = 0;
		while (i < sizeof(option_keys) / sizeof(option_keys[0]) && option_keys[i].opt != c)
			i++;
		if (i == sizeof(option_keys) / sizeof(option_keys[0]) ||
		    push(a, option_keys[i].key, optarg, option_keys[i].name) < 0)
			goto oom;
	}
	if (a->trust && a->policy_given) {
		snprintf(errbuf, errlen, "--trust and --policy both choose the policy: give one");
		return -1;
	}
	if (a->trust)
		a->policy = a->trust;
	if (start && optind < argc) {
		snprintf(errbuf, errlen, "nsbox start takes no command: run commands with nsbox exec NAME -- COMMAND");
		return -1;
	}
	if (mode == ARGS_CODE && optind < argc) {
		snprintf(errbuf, errlen, "run-code: unexpected argument '%s' (the code comes from -c, a FILE, or -)",
		         argv[optind]);
		return -1;
	}
	if (mode != ARGS_RUN)
		return 0;
	if (optind >= argc) {
		snprintf(errbuf, errlen, "no command given (usage: nsbox run [OPTIONS] [--] COMMAND [ARG...])");
		return -1;
	}
	a->argc = argc - optind;
	a->argv = argv + optind;
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
	if (arg[0] != '-')
		return false;
	if (arg[1] != '-')   /* short options: -m -v -w -e -u take one */
		return arg[1] && strchr("mvweu", arg[1]) && arg[2] == '\0';
	if (strchr(arg, '='))
		return false;
	for (const struct option *o = long_opts; o->name; o++)
		if (!strcmp(o->name, arg + 2))
			return o->has_arg == required_argument;
	return false;
}

void run_args_free(run_args *a)
{
	free(a->settings);
	a->settings = NULL;

	a->n_settings = 0;
}
