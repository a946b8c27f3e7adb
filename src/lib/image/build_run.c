/* One build step in a sandbox: the same engine as every run (namespaces,
 * seccomp, no_new_privs, limits, the allowlist proxy as the only way out),
 * with a root filesystem that is an overlay of the base image and the
 * layers below the step, its upper directory the step's new layer
 * (child/mounts.c). The step's root keeps Docker's default capabilities in
 * its user namespace, which a package manager needs (chown, setuid to
 * _apt, ...); they reach nothing of the host. */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/error.h"
#include "config/conf.h"
#include "image/build_run.h"
#include "sandbox/sandbox.h"

/* Docker's default set (moby's oci/caps/defaults.go), less NET_RAW. */
#define BIT(c) (1ull << (c))
static const uint64_t step_caps = BIT(CAP_CHOWN) | BIT(CAP_DAC_OVERRIDE) | BIT(CAP_FSETID) | BIT(CAP_FOWNER) |
                                  BIT(CAP_MKNOD) | BIT(CAP_SETGID) | BIT(CAP_SETUID) | BIT(CAP_SETFCAP) |
                                  BIT(CAP_SETPCAP) | BIT(CAP_NET_BIND_SERVICE) | BIT(CAP_SYS_CHROOT) |
                                  BIT(CAP_KILL) | BIT(CAP_AUDIT_WRITE);

static int set(nsbox_config *c, const char *key, const char *value, nsbox_error **err)
{
	return nsbox_config_set(c, key, value, "image build", err);
}

static int step_config(const step_run *s, nsbox_config **out, nsbox_error **err)
{
	nsbox_config *c = NULL;
	int r = nsbox_config_new(&c, err);
	if (r < 0)
		return r;
	char user[32], cpus[24];
	snprintf(user, sizeof(user), "%u:%u", (unsigned) s->uid, (unsigned) s->gid);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	snprintf(cpus, sizeof(cpus), "%ld", n > 0 ? n : 1);
	r = set(c, "rootfs", s->rootfs, err);
	r = r ?: set(c, "security.user", user, err);
	/* A package manager's room; the policy's run limits are for payloads. */
	r = r ?: set(c, "limits.memory", "4g", err);
	r = r ?: set(c, "limits.cpus", cpus, err);
	r = r ?: set(c, "limits.pids", "4096", err);
	r = r ?: set(c, "limits.timeout", s->timeout ? s->timeout : "1h", err);
	r = r ?: set(c, "limits.tmpfs", "2g", err);
	r = r ?: set(c, "limits.nofile", "4096", err);
	/* Rootless without a delegated cgroup: rlimits, acknowledged. */
	r = r ?: set(c, "limits.fallback", "rlimit", err);
	r = r ?: set(c, "workdir", s->workdir ? s->workdir : "/", err);
	r = r ?: set(c, "hostname", "nsbox-build", err);
	for (size_t i = 0; r == 0 && i < s->allow.n; i++)
		r = set(c, "network.allow", s->allow.v[i], err);
	for (size_t i = 0; r == 0 && i < s->env.n; i++)
		r = set(c, "environment.set", s->env.v[i], err);
	/* COPY's sources, read-only; exact paths (no SRC:DST parsing). */
	for (size_t i = 0; r == 0 && i + 1 < s->volumes.n; i += 2)
		r = config_add_mount(c, s->volumes.v[i], s->volumes.v[i + 1], true, NULL, "image build", err);
	r = r ?: nsbox_config_set_command(c, (int) s->argv.n, (const char *const *) s->argv.v, err);
	if (r == 0) {
		c->build.overlay = strdup(s->overlay);
		c->build.overlay_dir = strdup(s->overlay_dir);
		c->build.caps = step_caps;
		c->build.single_idmap = true;
		if (!c->build.overlay || !c->build.overlay_dir)
			r = nsbox_err(err, ENOMEM, "image", "plan a build step");
	}
	if (r < 0) {
		nsbox_config_free(c);
		return r;
	}
	*out = c;
	return 0;
}

int step_sandbox(const step_run *s, nsbox_result **out, nsbox_error **err)
{
	*out = NULL;
	nsbox_config *c = NULL;
	int r = step_config(s, &c, err);
	if (r < 0)
		return r;
	_cleanup_close_ int null = s->log_fd < 0 ? open("/dev/null", O_WRONLY | O_CLOEXEC) : -1;
	int log = s->log_fd >= 0 ? s->log_fd : null;
	nsbox_spawn_options o = { .version = NSBOX_SPAWN_OPTIONS_VERSION, .config = c, .stdin_fd = -1,
	                          .stdout_fd = log, .stderr_fd = log, .signal_fd = s->signal_fd, .stats_fd = -1 };
	nsbox_sandbox *sb = NULL;
	r = nsbox_spawn(&o, &sb, err);
	if (r == 0) {
		r = nsbox_sandbox_wait(sb, out, err);
		nsbox_sandbox_free(sb);
	}
	nsbox_config_free(c);
	return r;
}

char *step_denied(const nsbox_result *res)
{
	if (!res || !res->net_denied.n)
		return NULL;
	char *s = NULL;
	const proxy_dest *d = &res->net_denied.v[0];
	if (asprintf(&s, "%s%s%s%s", d->name, d->reason ? " (" : "", d->reason ? d->reason : "", d->reason ? ")" : "") < 0)
		return NULL;
	return s;
}
