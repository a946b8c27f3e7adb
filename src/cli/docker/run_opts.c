/* docker run's options: one table, each row a Docker option with its help
 * and the nsbox policy key it sets (nsbox_config_set checks the value), or
 * the Docker meaning it is translated from. An option nsbox cannot honour
 * safely is refused with the reason; one that changes nothing for nsbox
 * (it always does what the option asks: --cap-drop ALL, no-new-privileges,
 * --read-only, --init) is accepted, and documented as such. No side
 * effects: unit-tested (tests/unit/test_docker.c). */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "docker/docker.h"
#include "nsbox.h"
#include "opts.h"
#include "docker/run_values.h"

enum {
	R_KEY = 1,   /* the row's key takes the value */
	R_RM, R_DETACH, R_NAME, R_MEMORY, R_MEMORY_SWAP, R_PIDS, R_READ_ONLY, R_TMPFS, R_NETWORK, R_SECOPT,
	R_CAP_DROP, R_VOLUME, R_MOUNT, R_ENV, R_ENV_FILE, R_USER, R_WORKDIR, R_HOSTNAME, R_INTERACTIVE, R_TTY,
	R_STOP_TIMEOUT, R_STOP_SIGNAL, R_ULIMIT, R_INIT, R_ENTRYPOINT, R_LABEL, R_CIDFILE, R_PULL, R_RESTART,
	R_SIG_PROXY, R_NS_PRIVATE, R_NOOP_FLAG, R_PUBLISH, R_PUBLISH_ALL, R_EXPOSE, R_REFUSED, R_HELP,
};

#define HIDDEN NULL

static const opt_def run_opts[] = {
	{ "rm", 0, OPT_BOOL, R_RM, "remove the container when it exits (a run in the\nforeground without --name leaves nothing)", NULL },
	{ "detach", 'd', OPT_BOOL, R_DETACH, "run in the background: a long-lived sandbox (nsbox start)\nand the command in it; print its id", NULL },
	{ "name", 0, "NAME", R_NAME, "the container's name (with -d or -p: the sandbox's)", NULL },
	{ "memory", 'm', "SIZE", R_MEMORY, "memory limit (limits.memory), no swap beyond it", "limits.memory" },
	{ "memory-swap", 0, "SIZE", R_MEMORY_SWAP, "only equal to --memory (nsbox allows no swap)", NULL },
	{ "cpus", 0, "N", R_KEY, "CPU quota in cores (limits.cpus)", "limits.cpus" },
	{ "pids-limit", 0, "N", R_PIDS, "process/thread limit (limits.pids; at least 1)", "limits.pids" },
	{ "read-only", 0, OPT_BOOL, R_READ_ONLY, "accepted: nsbox's root filesystem is always read-only", NULL },
	{ "tmpfs", 0, "/tmp[:OPTS]", R_TMPFS, "/tmp's size (limits.tmpfs): size=SIZE, mode=1777,\nrw, exec, nosuid, nodev",
	  "limits.tmpfs" },
	{ "network", 0, "MODE", R_NETWORK, "none, host, or bridge (user-mode NAT: network.mode user)", "network.mode" },
	{ "publish", 'p', "[IP:][HOSTPORT:]PORT", R_PUBLISH, "forward HOSTPORT (none: any free one) on IP (default\n"
	  "127.0.0.1, this host only) to PORT inside; ranges A-B;\ntcp only; the network stays as it is (none)", NULL },
	{ "publish-all", 'P', OPT_BOOL, R_PUBLISH_ALL, "publish each --expose port on a free port of 127.0.0.1", NULL },
	{ "expose", 0, "PORT[-PORT]", R_EXPOSE, "declare a port (docker ps, inspect; -P publishes it)", NULL },
	{ "net", 0, "MODE", R_NETWORK, HIDDEN, "network.mode" },
	{ "security-opt", 0, "OPT", R_SECOPT, "no-new-privileges (always set), seccomp=FILE (a Docker\nprofile), "
	  "seccomp=unconfined", "security.seccomp" },
	{ "cap-drop", 0, "CAP", R_CAP_DROP, "accepted: every capability is always dropped", NULL },
	{ "volume", 'v', "SRC:DST[:ro|rw]", R_VOLUME, "bind a host path (filesystem.mounts)", "filesystem.mounts" },
	{ "mount", 0, "SPEC", R_MOUNT, "type=bind,source=S,target=T[,readonly] or\ntype=tmpfs,target=/tmp[,tmpfs-size=N]",
	  "filesystem.mounts" },
	{ "env", 'e', "NAME[=VALUE]", R_ENV, "set a variable; NAME alone passes this one's", "environment.set" },
	{ "env-file", 0, "FILE", R_ENV_FILE, "variables from FILE, one NAME[=VALUE] a line", "environment.set" },
	{ "workdir", 'w', "DIR", R_WORKDIR, "working directory inside (workdir)", "workdir" },
	{ "user", 'u', "UID[:GID]", R_USER, "identity inside (security.user; root is 0)", "security.user" },
	{ "hostname", 'h', "NAME", R_HOSTNAME, "hostname inside (hostname)", "hostname" },
	{ "interactive", 'i', OPT_BOOL, R_INTERACTIVE, "pass stdin through", NULL },
	{ "tty", 't', OPT_BOOL, R_TTY, "give the command a pseudo-terminal", NULL },
	{ "stop-timeout", 0, "SECONDS", R_STOP_TIMEOUT, "how long docker stop waits before it kills (10)", NULL },
	{ "stop-signal", 0, "SIGNAL", R_STOP_SIGNAL, "what docker stop sends first: SIGTERM (default),\nSIGINT, "
	  "SIGHUP, SIGQUIT or SIGKILL", NULL },
	{ "ulimit", 0, "NAME=N[:N]", R_ULIMIT, "nofile=N or fsize=N (limits.nofile, limits.fsize)", NULL },
	{ "init", 0, OPT_BOOL, R_INIT, "accepted: nsbox's pid 1 is always an init that reaps", NULL },
	{ "entrypoint", 0, "CMD", R_ENTRYPOINT, "the command's first word (images have no entrypoint)", NULL },
	{ "label", 'l', "KEY[=VALUE]", R_LABEL, "a label, shown by docker inspect", NULL },
	{ "cidfile", 0, "FILE", R_CIDFILE, "write the container's id to FILE (a new file)", NULL },
	{ "pull", 0, "WHEN", R_PULL, "missing or never (docker run does not pull)", NULL },
	{ "restart", 0, "POLICY", R_RESTART, "no (nsbox restarts nothing)", NULL },
	{ "sig-proxy", 0, OPT_BOOL, R_SIG_PROXY, "accepted: signals always go to the command", NULL },
	{ "ipc", 0, "MODE", R_NS_PRIVATE, "private or shareable (an IPC namespace of its own)", NULL },
	{ "cgroupns", 0, "MODE", R_NS_PRIVATE, "private (a cgroup namespace of its own)", NULL },
	{ "quiet", 'q', OPT_BOOL, R_NOOP_FLAG, "accepted: docker run pulls nothing to be quiet about", NULL },
	{ "disable-content-trust", 0, OPT_BOOL, R_NOOP_FLAG, "accepted: nothing is pulled, so nothing to verify", NULL },
	{ "help", 0, NULL, R_HELP, "print this help", NULL },
	/* Refused: each with its reason (docker_refusal). */
	{ "privileged", 0, OPT_BOOL, R_REFUSED, HIDDEN, NULL },
	{ "cap-add", 0, "CAP", R_REFUSED, HIDDEN, NULL },
	{ "device", 0, "DEV", R_REFUSED, HIDDEN, NULL },
	{ "device-cgroup-rule", 0, "RULE", R_REFUSED, HIDDEN, NULL },
	{ "gpus", 0, "GPUS", R_REFUSED, HIDDEN, NULL },
	{ "pid", 0, "MODE", R_REFUSED, HIDDEN, NULL },
	{ "uts", 0, "MODE", R_REFUSED, HIDDEN, NULL },
	{ "userns", 0, "MODE", R_REFUSED, HIDDEN, NULL },
	{ "sysctl", 0, "K=V", R_REFUSED, HIDDEN, NULL },
	{ "volumes-from", 0, "C", R_REFUSED, HIDDEN, NULL },
	{ "volume-driver", 0, "D", R_REFUSED, HIDDEN, NULL },
	{ "add-host", 0, "H", R_REFUSED, HIDDEN, NULL },
	{ "dns", 0, "IP", R_REFUSED, HIDDEN, NULL },
	{ "dns-search", 0, "D", R_REFUSED, HIDDEN, NULL },
	{ "dns-option", 0, "O", R_REFUSED, HIDDEN, NULL },
	{ "dns-opt", 0, "O", R_REFUSED, HIDDEN, NULL },
	{ "network-alias", 0, "A", R_REFUSED, HIDDEN, NULL },
	{ "ip", 0, "IP", R_REFUSED, HIDDEN, NULL },
	{ "ip6", 0, "IP", R_REFUSED, HIDDEN, NULL },
	{ "mac-address", 0, "MAC", R_REFUSED, HIDDEN, NULL },
	{ "link", 0, "C", R_REFUSED, HIDDEN, NULL },
	{ "link-local-ip", 0, "IP", R_REFUSED, HIDDEN, NULL },
	{ "runtime", 0, "R", R_REFUSED, HIDDEN, NULL },
	{ "isolation", 0, "I", R_REFUSED, HIDDEN, NULL },
	{ "oom-kill-disable", 0, OPT_BOOL, R_REFUSED, HIDDEN, NULL },
	{ "oom-score-adj", 0, "N", R_REFUSED, HIDDEN, NULL },
	{ "memory-reservation", 0, "SIZE", R_REFUSED, HIDDEN, NULL },
	{ "memory-swappiness", 0, "N", R_REFUSED, HIDDEN, NULL },
	{ "kernel-memory", 0, "SIZE", R_REFUSED, HIDDEN, NULL },
	{ "cpu-shares", 'c', "N", R_REFUSED, HIDDEN, NULL },
	{ "cpu-period", 0, "N", R_REFUSED, HIDDEN, NULL },
	{ "cpu-quota", 0, "N", R_REFUSED, HIDDEN, NULL },
	{ "cpu-rt-period", 0, "N", R_REFUSED, HIDDEN, NULL },
	{ "cpu-rt-runtime", 0, "N", R_REFUSED, HIDDEN, NULL },
	{ "cpuset-cpus", 0, "CPUS", R_REFUSED, HIDDEN, NULL },
	{ "cpuset-mems", 0, "MEMS", R_REFUSED, HIDDEN, NULL },
	{ "blkio-weight", 0, "N", R_REFUSED, HIDDEN, NULL },
	{ "blkio-weight-device", 0, "W", R_REFUSED, HIDDEN, NULL },
	{ "device-read-bps", 0, "R", R_REFUSED, HIDDEN, NULL },
	{ "device-write-bps", 0, "R", R_REFUSED, HIDDEN, NULL },
	{ "device-read-iops", 0, "R", R_REFUSED, HIDDEN, NULL },
	{ "device-write-iops", 0, "R", R_REFUSED, HIDDEN, NULL },
	{ "group-add", 0, "G", R_REFUSED, HIDDEN, NULL },
	{ "log-driver", 0, "D", R_REFUSED, HIDDEN, NULL },
	{ "log-opt", 0, "O", R_REFUSED, HIDDEN, NULL },
	{ "health-cmd", 0, "CMD", R_REFUSED, HIDDEN, NULL },
	{ "health-interval", 0, "D", R_REFUSED, HIDDEN, NULL },
	{ "health-retries", 0, "N", R_REFUSED, HIDDEN, NULL },
	{ "health-timeout", 0, "D", R_REFUSED, HIDDEN, NULL },
	{ "health-start-period", 0, "D", R_REFUSED, HIDDEN, NULL },
	{ "health-start-interval", 0, "D", R_REFUSED, HIDDEN, NULL },
	{ "no-healthcheck", 0, OPT_BOOL, R_REFUSED, HIDDEN, NULL },
	{ "shm-size", 0, "SIZE", R_REFUSED, HIDDEN, NULL },
	{ "attach", 'a', "STREAM", R_REFUSED, HIDDEN, NULL },
	{ "detach-keys", 0, "KEYS", R_REFUSED, HIDDEN, NULL },
	{ "platform", 0, "P", R_REFUSED, HIDDEN, NULL },
	{ "storage-opt", 0, "O", R_REFUSED, HIDDEN, NULL },
	{ "cgroup-parent", 0, "P", R_REFUSED, HIDDEN, NULL },
	{ "domainname", 0, "D", R_REFUSED, HIDDEN, NULL },
	{ "annotation", 0, "A", R_REFUSED, HIDDEN, NULL },
	{ "label-file", 0, "F", R_REFUSED, HIDDEN, NULL },
	{ "use-api-socket", 0, OPT_BOOL, R_REFUSED, HIDDEN, NULL },
	{ 0 },
};

static const struct {
	const char *name, *why;
} refusals[] = {
	{ "privileged", "a sandbox never has privileges: no capabilities, no host devices, a seccomp filter" },
	{ "cap-add", "every capability is dropped and none can be added back" },
	{ "device", "nsbox passes no host device into a sandbox" },
	{ "device-cgroup-rule", "nsbox passes no host device into a sandbox" },
	{ "gpus", "nsbox passes no host device into a sandbox" },
	{ "pid", "the sandbox always has a pid namespace of its own" },
	{ "uts", "the sandbox always has a UTS namespace of its own (--hostname names it)" },
	{ "userns", "the sandbox always has a user namespace of its own" },
	{ "ipc", "the sandbox always has an IPC namespace of its own (private)" },
	{ "cgroupns", "the sandbox always has a cgroup namespace of its own (private)" },
	{ "sysctl", "a sandbox changes no kernel setting" },
	{ "volumes-from", "nsbox has no volumes of other containers: give the host paths with -v" },
	{ "volume-driver", "nsbox has no volume drivers: give the host paths with -v" },
	{ "add-host", "nsbox's networks have no entries of their own (none, host, or user-mode NAT)" },
	{ "dns", "nsbox's networks have no entries of their own (none, host, or user-mode NAT)" },
	{ "dns-search", "nsbox's networks have no entries of their own (none, host, or user-mode NAT)" },
	{ "dns-option", "nsbox's networks have no entries of their own (none, host, or user-mode NAT)" },
	{ "dns-opt", "nsbox's networks have no entries of their own (none, host, or user-mode NAT)" },
	{ "network-alias", "nsbox has no container networks (none, host, or user-mode NAT)" },
	{ "ip", "nsbox has no container networks (none, host, or user-mode NAT)" },
	{ "ip6", "nsbox has no container networks (none, host, or user-mode NAT)" },
	{ "mac-address", "nsbox has no container networks (none, host, or user-mode NAT)" },
	{ "link", "nsbox has no container networks (none, host, or user-mode NAT)" },
	{ "link-local-ip", "nsbox has no container networks (none, host, or user-mode NAT)" },
	{ "runtime", "nsbox is the runtime" },
	{ "isolation", "nsbox's isolation is fixed: namespaces, cgroup limits, seccomp, no capabilities" },
	{ "oom-kill-disable", "a sandbox at its memory limit is always killed" },
	{ "oom-score-adj", "a sandbox cannot make itself less likely to be killed" },
	{ "memory-reservation", "nsbox limits memory with --memory only" },
	{ "memory-swappiness", "nsbox allows no swap" },
	{ "kernel-memory", "nsbox limits memory with --memory only" },
	{ "cpu-shares", "nsbox limits CPU with a quota, --cpus" },
	{ "cpu-period", "nsbox limits CPU with a quota, --cpus" },
	{ "cpu-quota", "nsbox limits CPU with a quota, --cpus" },
	{ "cpu-rt-period", "a sandbox gets no real-time scheduling" },
	{ "cpu-rt-runtime", "a sandbox gets no real-time scheduling" },
	{ "cpuset-cpus", "nsbox limits CPU with a quota, --cpus" },
	{ "cpuset-mems", "nsbox limits memory with --memory only" },
	{ "blkio-weight", "nsbox sets no block I/O limits" },
	{ "blkio-weight-device", "nsbox sets no block I/O limits" },
	{ "device-read-bps", "nsbox sets no block I/O limits" },
	{ "device-write-bps", "nsbox sets no block I/O limits" },
	{ "device-read-iops", "nsbox sets no block I/O limits" },
	{ "device-write-iops", "nsbox sets no block I/O limits" },
	{ "group-add", "the command runs with its one group (-u UID:GID), no supplementary groups" },
	{ "log-driver", "a detached container's output is kept in its own log (docker logs)" },
	{ "log-opt", "a detached container's output is kept in its own log (docker logs)" },
	{ "health-cmd", "nsbox runs no health checks" },
	{ "health-interval", "nsbox runs no health checks" },
	{ "health-retries", "nsbox runs no health checks" },
	{ "health-timeout", "nsbox runs no health checks" },
	{ "health-start-period", "nsbox runs no health checks" },
	{ "health-start-interval", "nsbox runs no health checks" },
	{ "no-healthcheck", "nsbox runs no health checks" },
	{ "shm-size", "/dev/shm has /tmp's size: --tmpfs /tmp:size=SIZE" },
	{ "attach", "the command's streams are always attached in the foreground, logged with -d" },
	{ "detach-keys", "nsbox has no attach" },
	{ "platform", "nsbox runs images of this machine's platform only" },
	{ "storage-opt", "the root filesystem is the image, read-only" },
	{ "cgroup-parent", "give nsbox's limits.cgroup_parent in a policy (NSBOX_POLICY)" },
	{ "domainname", "the sandbox has a host name only (--hostname)" },
	{ "annotation", "nsbox has no OCI annotations" },
	{ "label-file", "give each label with --label" },
	{ "use-api-socket", "a sandbox never reaches a container engine's socket" },
};

const char *docker_refusal(const char *name)
{
	for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++)
		if (!strcmp(refusals[i].name, name))
			return refusals[i].why;
	return NULL;
}

const opt_def *docker_run_table(void)
{
	return run_opts;
}

void docker_run_help(FILE *f)
{
	fputs("Usage: nsbox docker run [OPTIONS] IMAGE [COMMAND] [ARG...]\n"
	      "Run COMMAND in a fresh sandbox on nsbox image IMAGE, taking Docker's options:\n"
	      "each one is translated to nsbox's configuration (the policy, NSBOX_POLICY, and\n"
	      "the NSBOX_* variables give the rest). Options that nsbox cannot honour safely\n"
	      "(--privileged, --cap-add, --device, --pid host ...) are refused, naming the\n"
	      "reason.\n\n"
	      "Ports (-p, -P) are published on 127.0.0.1 unless -p names an address: Docker\n"
	      "binds every interface, nsbox only this host's loopback, so that a server the\n"
	      "sandboxed code starts is not on the network unless you say so (-p\n"
	      "0.0.0.0:8080:80). The container's network stays none: its sandbox's monitor\n"
	      "accepts on the host and connects to PORT on the sandbox's own loopback.\n\n", f);
	opt_help(f, run_opts);
	fputs("\nExit status: the command's own; 125 nothing ran (a refused or invalid option,\n"
	      "no such image); 126 cannot execute; 127 not found; 137 killed (out of memory,\n"
	      "docker stop); 128+N killed by signal N; 124 nsbox's timeout (limits.timeout).\n", f);
}

static const char *env_get(char **env, const char *name, size_t n)
{
	for (size_t i = 0; env && env[i]; i++)
		if (!strncmp(env[i], name, n) && env[i][n] == '=')
			return env[i] + n + 1;
	return NULL;
}

/* A flag (Docker's booleans take =false too): what nsbox always does is
 * accepted, its opposite refused. */
static int take_flag(docker_run *d, const opt_def *o, bool on, char *err, size_t errlen)
{
	switch (o->id) {
	case R_RM: d->rm = on; return 0;
	case R_PUBLISH_ALL: d->publish_all = on; return 0;
	case R_DETACH: d->detach = on; return 0;
	case R_INTERACTIVE: d->a.interactive = on; return 0;
	case R_TTY: d->tty = on; return 0;
	case R_HELP: d->help = true; return 0;
	case R_NOOP_FLAG: return 0;
	case R_READ_ONLY:
		return on ? 0 : dr_fail(err, errlen, "--read-only=false: nsbox's root filesystem is always read-only (write to "
		                        "/tmp or a volume)");
	case R_INIT: return on ? 0 : dr_fail(err, errlen, "--init=false: nsbox's pid 1 is always an init");
	case R_SIG_PROXY:
		return on ? 0 : dr_fail(err, errlen, "--sig-proxy=false: nsbox always passes signals to the command");
	case R_REFUSED:
		/* --privileged=false asks for what nsbox does. */
		return on ? dr_fail(err, errlen, "--%s: refused: %s", o->name, docker_refusal(o->name)) : 0;
	}
	return 0;
}

/* Options whose value is one of a few words, or a number of seconds. */
static int take_choice(docker_run *d, const opt_def *o, const char *v, char *err, size_t errlen)
{
	switch (o->id) {
	case R_NETWORK:
		d->network = v;
		if (!strcmp(v, "none") || !strcmp(v, "host"))
			return dr_push(d, "network.mode", v, "--network");
		if (!strcmp(v, "bridge") || !strcmp(v, "default"))
			return dr_push(d, "network.mode", "user", "--network bridge");
		return dr_fail(err, errlen, "--network '%s': nsbox has none, host and bridge (user-mode NAT); no container "
		               "networks", v);
	case R_STOP_TIMEOUT: {
		char *e = NULL;
		long n = strtol(v, &e, 10);
		if (!*v || *e || n < -1 || n > 86400)
			return dr_fail(err, errlen, "--stop-timeout '%s': expected seconds (-1: wait as long as it takes)", v);
		d->stop_timeout = (int) n;
		return 0;
	}
	case R_STOP_SIGNAL:
		if ((d->stop_signal = docker_signal(v)) < 0)
			return dr_fail(err, errlen, "--stop-signal '%s': nsbox passes SIGTERM, SIGINT, SIGHUP or SIGQUIT on, "
			               "or ends the container with SIGKILL", v);
		return 0;
	case R_PULL:
		if (strcmp(v, "missing") && strcmp(v, "never"))
			return dr_fail(err, errlen, "--pull '%s': docker run does not pull (nsbox docker pull does): missing or "
			               "never", v);
		return 0;
	case R_RESTART:
		return strcmp(v, "no") ? dr_fail(err, errlen, "--restart '%s': nsbox restarts nothing (no)", v) : 0;
	case R_NS_PRIVATE:
		if (strcmp(v, "private") && !(!strcmp(o->name, "ipc") && !strcmp(v, "shareable")))
			return dr_fail(err, errlen, "--%s '%s': %s", o->name, v, docker_refusal(o->name));
		return 0;
	case R_REFUSED: return dr_fail(err, errlen, "--%s %s: refused: %s", o->name, v, docker_refusal(o->name));
	}
	return 1;   /* not one of these */
}

/* One option: what it sets or records in d. 0, -1 with err, or -ENOMEM. */
static int take(docker_run *d, const opt_def *o, const char *v, char *err, size_t errlen)
{
	if (!opt_has_value(o)) {
		int b = opt_bool(v);
		if (b < 0)
			return dr_fail(err, errlen, "--%s: invalid boolean '%s' (true or false)", o->name, v);
		return take_flag(d, o, b == 1, err, errlen);
	}
	int r = take_choice(d, o, v, err, errlen);
	if (r <= 0)
		return r;
	switch (o->id) {
	case R_KEY: {
		const char *what = dr_own_fmt(d, "--%s", o->name);
		return what ? dr_push(d, o->key, v, what) : -ENOMEM;
	}
	case R_NAME: d->a.name = v; return 0;
	case R_ENTRYPOINT: d->entrypoint = v; return 0;
	case R_CIDFILE: d->cidfile = v; return 0;
	case R_LABEL: return dr_add_list(&d->labels, &d->n_labels, v);
	case R_MEMORY: return dr_push(d, "limits.memory", v, "--memory");
	case R_MEMORY_SWAP: {
		/* Checked against --memory once every option is read. */
		char *s = dr_own_fmt(d, "%s", v);
		return s ? dr_push(d, "docker.memory_swap", s, "--memory-swap") : -ENOMEM;
	}
	case R_PIDS:
		if (v[0] == '-' || !strcmp(v, "0"))
			return dr_fail(err, errlen, "--pids-limit '%s': nsbox always limits processes: give a number from 1", v);
		return dr_push(d, "limits.pids", v, "--pids-limit");
	case R_TMPFS: {
		const char *colon = strchr(v, ':');
		char *path = dr_own(d, strndup(v, colon ? (size_t) (colon - v) : strlen(v)));
		return path ? dr_tmpfs(d, path, colon ? colon + 1 : NULL, "--tmpfs", err, errlen) : -ENOMEM;
	}
	case R_CAP_DROP:
		/* Every capability is dropped already: a real name is enough. */
		return dr_cap_name_ok(v) ? 0 : dr_fail(err, errlen, "--cap-drop '%s': not a capability", v);
	case R_SECOPT: return dr_security_opt(d, v, err, errlen);
	case R_PUBLISH: return dr_publish(d, v, err, errlen);
	case R_EXPOSE: return dr_expose(d, v, err, errlen);
	case R_VOLUME: return dr_volume(d, v, err, errlen);
	case R_MOUNT: return dr_mount_opt(d, v, err, errlen);
	case R_ENV: return dr_env_opt(d, v, "--env", err, errlen);
	case R_ENV_FILE: return dr_env_file(d, v, err, errlen);
	case R_ULIMIT: return dr_ulimit(d, v, err, errlen);
	case R_USER: d->user = v; return dr_user(d, v, err, errlen);
	case R_WORKDIR: d->workdir = v; return dr_push(d, "workdir", v, "--workdir");
	case R_HOSTNAME: d->hostname = v; return dr_push(d, "hostname", v, "--hostname");
	}
	return 0;
}

/* --memory-swap: equal to --memory (no swap), or 0 (unset). */
static int check_swap(docker_run *d, char *err, size_t errlen)
{
	const char *swap = NULL, *mem = NULL;
	size_t out = 0;
	for (size_t i = 0; i < d->a.n_settings; i++) {
		setting s = d->a.settings[i];
		if (!strcmp(s.key, "docker.memory_swap"))
			swap = s.value;
		else
			d->a.settings[out++] = s;
		if (!strcmp(s.key, "limits.memory") && !strcmp(s.origin, "--memory"))
			mem = s.value;
	}
	d->a.n_settings = out;
	if (!swap || !strcmp(swap, "0"))
		return 0;
	uint64_t sb, mb;
	if (!strcmp(swap, "-1"))
		return dr_fail(err, errlen, "--memory-swap -1: nsbox allows no swap (give --memory alone)");
	if (nsbox_parse_size(swap, &sb) < 0)
		return dr_fail(err, errlen, "--memory-swap '%s': invalid size", swap);
	if (!mem)
		return dr_fail(err, errlen, "--memory-swap needs --memory (and nsbox allows no swap: give the same size)");
	if (nsbox_parse_size(mem, &mb) < 0)
		return 0;   /* --memory's own error comes from the configuration */
	if (sb != mb)
		return dr_fail(err, errlen, "--memory-swap '%s': nsbox allows no swap: give --memory's size (%s) or leave it "
		            "out", swap, mem);
	return 0;
}

int docker_run_parse(int argc, char **argv, char **env, docker_run *d, char *err, size_t errlen)
{
	*d = (docker_run){ .stop_timeout = 10, .stop_signal = SIGTERM };
	d->a.policy = nsbox_env_policy((const char *const *) env);
	const char *var, *key;
	for (size_t i = 0; nsbox_env_setting(i, &var, &key) == 0; i++) {
		const char *v = env_get(env, var, strlen(var));
		if (v && dr_push(d, key, v, var) < 0)
			goto oom;
	}
	/* IMAGE is the first operand; what follows is the command's. */
	opt_state st;
	opt_init(&st, run_opts, argc, argv, true);
	int id;
	const char *v;
	const opt_def *o;
	while ((id = opt_next(&st, &v, &o, err, errlen)) != OPT_DONE) {
		if (id == OPT_ERROR)
			return -1;
		int r = take(d, o, v, err, errlen);
		if (r == -ENOMEM)
			goto oom;
		if (r < 0)
			return -1;
		if (d->help)
			return 0;
	}
	if (check_swap(d, err, errlen) < 0)
		return -1;
	int pr = dr_ports_finish(d, err, errlen);
	if (pr == -ENOMEM)
		goto oom;
	if (pr < 0)
		return -1;
	if (st.i >= argc)
		return dr_fail(err, errlen, "no image given (usage: nsbox docker run [OPTIONS] IMAGE [COMMAND] [ARG...])");
	d->image = argv[st.i];
	d->argc = argc - st.i - 1;
	d->argv = argv + st.i + 1;
	if (!d->argc && !d->entrypoint)
		return dr_fail(err, errlen, "no command given: nsbox images have no default command (nsbox docker run "
		            "[OPTIONS] IMAGE COMMAND [ARG...])");
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
	return -1;
}

void docker_run_free(docker_run *d)
{
	for (size_t i = 0; i < d->n_owned; i++)
		free(d->owned[i]);
	free(d->owned);
	free(d->labels);
	free(d->env);
	free(d->ports);
	free(d->exposed);
	run_args_free(&d->a);
	d->owned = NULL;
	d->n_owned = 0;
	d->labels = NULL;
	d->env = NULL;
	d->ports = NULL;
	d->exposed = NULL;
	d->n_ports = d->n_exposed = 0;
}
