/* Deciding how the run's limits are enforced - a cgroup when one can be
 * had, else rlimits and CPU pinning - and refusing a limit that nothing can
 * enforce. The rlimits that always apply (open files, file size) are here
 * too. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "base/error.h"
#include "plan/plan.h"

static const char cgroup_remedy[] =
	"run as root, or delegate a cgroup v2 subtree to this user (systemd: Delegate=yes) and pass it with --cgroup-parent";

static void add_rlimit_soft(nsbox_plan *p, int resource, uint64_t value, bool soft)
{
	if (p->n_rlimits < sizeof(p->rlimits) / sizeof(p->rlimits[0])) {
		p->rlimits[p->n_rlimits].resource = resource;
		p->rlimits[p->n_rlimits].value = value;
		p->rlimits[p->n_rlimits].soft = soft;
		p->n_rlimits++;
	}
}

static void add_rlimit(nsbox_plan *p, int resource, uint64_t value)
{
	add_rlimit_soft(p, resource, value, false);
}

int limits_pick_cpus(const cpu_set_t *allowed, int here, int want, cpu_set_t *out)
{
	CPU_ZERO(out);
	int n = 0;
	if (here < 0 || here >= CPU_SETSIZE)
		here = 0;
	for (int k = 0; k < CPU_SETSIZE && n < want; k++) {
		int c = (here + k) % CPU_SETSIZE;
		if (CPU_ISSET(c, allowed)) {
			CPU_SET(c, out);
			n++;
		}
	}
	return n;
}

/* No cgroup: rlimits for memory (per process: RLIMIT_DATA, which counts
 * what a process has written to rather than address space it reserved -
 * RLIMIT_AS would stop Node.js and Java, which reserve gigabytes up front),
 * processes (RLIMIT_NPROC, counted per user namespace, so per sandbox),
 * and CPU by pinning to whole CPUs. */
static int plan_rlimit_mode(nsbox_plan *p, const nsbox_config *cfg, nsbox_error **err)
{
	cpu_set_t allowed;
	CPU_ZERO(&allowed);
	if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0)
		return nsbox_err(err, errno, "limits", "read the CPUs we may use");
	int ncpu = CPU_COUNT(&allowed);
	if (cfg->cpus < ncpu) {
		/* (No libm, one library less to load at every launch: the
		 * values here are non-negative and far below 2^64.) */
		if (cfg->cpus != (double) (uint64_t) cfg->cpus)
			return nsbox_err_hint(err, ENOTSUP, "limits", cgroup_remedy,
			                      "enforce --cpus %g: without a cgroup only whole CPUs can be enforced (%s)",
			                      cfg->cpus, p->cg_host.reason);
		/* From the CPU we run on: no migration for the payload, and
		 * sandboxes started from different CPUs do not all share the
		 * first one (as many parallel runs would). */
		p->cpu_count = limits_pick_cpus(&allowed, sched_getcpu(), (int) cfg->cpus, &p->cpu_mask);
		p->pin_cpus = true;
	}
	add_rlimit(p, RLIMIT_DATA, cfg->memory);
	add_rlimit(p, RLIMIT_NPROC, cfg->pids);
	if (cfg->timeout_ms) {
		/* A backstop only: the supervisor's timer ends the run first. So
		 * the soft limit alone: a program may still raise its own CPU
		 * limit, as on the host (CPython's test_resource does). */
		double cores = cfg->cpus < 1 ? 1 : cfg->cpus;
		double s = (double) cfg->timeout_ms / 1000.0 * cores;
		uint64_t whole = (uint64_t) s;
		add_rlimit_soft(p, RLIMIT_CPU, whole + ((double) whole < s) + 1, true);   /* ceil, + 1 */
	}
	p->enforced_by = "rlimit";
	/* One short line naming the remedy; `nsbox check` has the whole story.
	 * A policy that says `fallback: rlimit` has read this already, and
	 * NSBOX_QUIET (set, not "0") asks for silence. */
	const char *quiet = getenv("NSBOX_QUIET");
	if (cfg->fallback == FALLBACK_WARN && !(quiet && *quiet && strcmp(quiet, "0") != 0))
		p->warning = strdup("no usable cgroup: limits are rlimits, per process (remedy: run as root, or give a "
		                    "delegated cgroup v2 with --cgroup-parent; details: nsbox check; silence: "
		                    "limits.fallback: rlimit or NSBOX_QUIET=1)");
	return 0;
}

static void add_user_max(nsbox_plan *p, const char *name, uint64_t value)
{
	if (p->n_user_max < sizeof(p->user_max) / sizeof(p->user_max[0])) {
		p->user_max[p->n_user_max].name = name;
		snprintf(p->user_max[p->n_user_max].value, sizeof(p->user_max[0].value), "%llu\n",
		         (unsigned long long) value);
		p->n_user_max++;
	}
}

/* The kernel charges what a user namespace's processes hold (inotify and
 * fanotify groups, watches and marks, namespaces) to the namespace's uid in
 * it and to its owner in every namespace above, up to the host: without a
 * bound of the sandbox's own, one payload takes all its owner has (the
 * caller's; root's sandboxes are owned by their range's uid, see
 * sandbox/owner.c). Each value is the namespace's own limit per uid. */
static void plan_user_max(nsbox_plan *p, const nsbox_config *cfg)
{
	static const char *const ns_kinds[] = {
		"max_user_namespaces", "max_mnt_namespaces", "max_pid_namespaces", "max_net_namespaces",
		"max_ipc_namespaces", "max_uts_namespaces", "max_cgroup_namespaces", "max_time_namespaces",
	};
	add_user_max(p, "max_inotify_instances", cfg->inotify_instances);
	add_user_max(p, "max_inotify_watches", cfg->inotify_watches);
	add_user_max(p, "max_fanotify_groups", cfg->fanotify_groups);
	add_user_max(p, "max_fanotify_marks", cfg->fanotify_marks);
	for (size_t i = 0; i < sizeof(ns_kinds) / sizeof(ns_kinds[0]); i++)
		add_user_max(p, ns_kinds[i], cfg->namespaces);
}

int limits_plan(nsbox_plan *p, const nsbox_config *cfg, nsbox_error **err)
{
	p->limits = (cg_limits){ .memory = cfg->memory, .cpus = cfg->cpus, .pids = cfg->pids };
	plan_user_max(p, cfg);
	/* make bench's ablation: the run as it goes where no cgroup can be
	 * had (rlimits, with the warning; a policy that refuses still does). */
	if (getenv("NSBOX_TEST_NO_CGROUP")) {
		p->cg_host = (cg_host){ .driver = CG_NONE };
		snprintf(p->cg_host.reason, sizeof(p->cg_host.reason), "NSBOX_TEST_NO_CGROUP is set");
	} else {
		cgroup_probe(cfg->cgroup_parent, &p->cg_host);
	}
	/* Open files: what was asked, else the caller's own limits, which the
	 * payload inherits (limits.nofile: host). */
	struct rlimit nofile = { 0, 0 };
	if (cfg->nofile)
		add_rlimit(p, RLIMIT_NOFILE, cfg->nofile);
	else
		(void) getrlimit(RLIMIT_NOFILE, &nofile);
	/* A workspace overlay: no one file may pass workspace.max_size, a hard
	 * bound on the fastest fill (one big write or fallocate); the total is
	 * watched by the supervisor. */
	uint64_t fsize = cfg->fsize;
	if (cfg->workspace && cfg->workspace_mode == WS_OVERLAY && cfg->workspace_max_size &&
	    (!fsize || cfg->workspace_max_size < fsize))
		fsize = cfg->workspace_max_size;
	if (fsize)
		add_rlimit(p, RLIMIT_FSIZE, fsize);
	/* The record names the limits that apply, as they apply. */
	if (p->cfg) {
		p->cfg->nofile = cfg->nofile ? cfg->nofile : nofile.rlim_cur == RLIM_INFINITY ? 0 : nofile.rlim_cur;
		p->cfg->fsize = fsize;
	}
	if (p->cg_host.driver == CG_V2) {
		p->enforced_by = "cgroup-v2";
		return 0;
	}
	if (p->cg_host.driver == CG_V1) {
		p->enforced_by = "cgroup-v1";
		return 0;
	}
	if (cfg->fallback == FALLBACK_REFUSE || cfg->cgroup_parent)
		return nsbox_err_hint(err, ENOTSUP, "limits", cgroup_remedy,
		                      "enforce limits with a cgroup: %s", p->cg_host.reason);
	return plan_rlimit_mode(p, cfg, err);
}

int limits_apply(const nsbox_plan *p, enum step *failed)
{
	for (size_t i = 0; i < p->n_rlimits; i++) {
		struct rlimit rl = { p->rlimits[i].value, p->rlimits[i].value };
		if (p->rlimits[i].soft && getrlimit((__rlimit_resource_t) p->rlimits[i].resource, &rl) == 0 &&
		    (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= p->rlimits[i].value))
			rl.rlim_cur = p->rlimits[i].value;
		else
			rl = (struct rlimit){ p->rlimits[i].value, p->rlimits[i].value };
		if (setrlimit((__rlimit_resource_t) p->rlimits[i].resource, &rl) < 0) {
			*failed = STEP_RLIMITS;
			return -errno;
		}
	}
	if (p->pin_cpus && sched_setaffinity(0, sizeof(p->cpu_mask), &p->cpu_mask) < 0) {
		*failed = STEP_AFFINITY;
		return -errno;
	}
	return 0;
}
