/* The launch trace (trace.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "base/trace.h"

static const char *const names[TR_N] = {
	[TR_SPAWN] = "supervisor: nsbox_spawn entered",
	[TR_PLAN] = "supervisor: plan built (config, rootfs, id maps, limits, seccomp, mounts)",
	[TR_CGROUP] = "supervisor: cgroups created and limits written",
	[TR_CLONE] = "supervisor: cloned into new namespaces",
	[TR_IDMAP] = "supervisor: id maps written",
	[TR_GO] = "supervisor: go-ahead sent (idmapped root included)",
	[TR_JANITOR] = "supervisor: janitor started",
	[TR_SPAWNED] = "supervisor: nsbox_spawn returns",
	[TR_C_START] = "pid 1: running",
	[TR_C_CGROUP] = "pid 1: in its cgroups",
	[TR_C_GO] = "pid 1: go-ahead received",
	[TR_C_SOURCES] = "pid 1: mount sources reopened",
	[TR_C_IDS] = "pid 1: setup ids and hostname set",
	[TR_C_ROOT] = "pid 1: root built",
	[TR_C_MOUNTS] = "pid 1: mounts applied",
	[TR_C_PIVOT] = "pid 1: pivoted",
	[TR_C_NET] = "pid 1: network set up",
	[TR_C_INIT] = "pid 1: fds closed, init starts",
	[TR_C_FORKED] = "pid 1: resumes once the payload has exec'd (vfork)",
	[TR_P_START] = "payload: process running",
	[TR_P_CREDS] = "payload: capabilities and ids dropped",
	[TR_P_LIMITS] = "payload: rlimits set",
	[TR_P_EXEC] = "payload: seccomp loaded, execve",
	[TR_C_REAPED] = "pid 1: payload reaped",
	[TR_REAPED] = "supervisor: pid 1 reaped",
	[TR_STATS] = "supervisor: cgroup statistics read",
	[TR_CG_REMOVED] = "supervisor: cgroups removed",
	[TR_JANITOR_DONE] = "supervisor: janitor reaped (or left: NSBOX_RUN_EXITING)",
	[TR_RESULT] = "supervisor: result built",
	[TR_FREED] = "supervisor: sandbox freed",
};

void trace_stamp(trace_page *t, enum trace_mark m)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	t->ns[m] = (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

trace_page *trace_start(void)
{
	const char *v = getenv("NSBOX_TRACE");
	if (!v || strcmp(v, "1"))
		return NULL;
	trace_page *t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (t == MAP_FAILED)
		return NULL;
	trace_stamp(t, TR_SPAWN);
	return t;
}

void trace_finish(trace_page *t)
{
	if (!t)
		return;
	trace_mark(t, TR_FREED);
	/* In time order: the processes interleave. */
	int order[TR_N] = { 0 }, n = 0;
	for (int m = 0; m < TR_N; m++) {
		if (!t->ns[m])
			continue;
		int k = n++;
		for (; k > 0 && t->ns[order[k - 1]] > t->ns[m]; k--)
			order[k] = order[k - 1];
		order[k] = m;
	}
	fprintf(stderr, "nsbox trace: us since nsbox_spawn, (+us since the previous step)\n");
	uint64_t t0 = t->ns[TR_SPAWN], prev = t0;
	for (int i = 0; i < n; i++) {
		uint64_t ns = t->ns[order[i]];
		fprintf(stderr, "nsbox trace: %7.0f (+%6.0f) %s\n", (double) (ns - t0) / 1e3,
		        (double) (ns - prev) / 1e3, names[order[i]]);
		prev = ns;
	}
	munmap(t, sizeof(*t));
}
