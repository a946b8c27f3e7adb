/* NSBOX_TRACE=1: a timing trace of one launch, step by step, written to
 * stderr when the sandbox is freed (docs/performance.md reads it). The
 * supervisor, pid 1 and the payload before its exec stamp a page they share
 * (MAP_SHARED survives clone): a stamp is one vDSO clock read and a store,
 * with no allocation, lock or system call, so it is safe in the raw clones;
 * with the variable unset there is no page and a stamp is one test. The only
 * output of the library, and only on this explicit request. */
#ifndef NSBOX_TRACE_H
#define NSBOX_TRACE_H

#include <stdint.h>

enum trace_mark {
	/* supervisor, in nsbox_spawn */
	TR_SPAWN, TR_PLAN, TR_CGROUP, TR_CLONE, TR_IDMAP, TR_GO, TR_JANITOR, TR_SPAWNED,
	/* pid 1 */
	TR_C_START, TR_C_CGROUP, TR_C_GO, TR_C_SOURCES, TR_C_IDS, TR_C_ROOT, TR_C_MOUNTS,
	TR_C_PIVOT, TR_C_NET, TR_C_INIT, TR_C_FORKED,
	/* the payload's process, before its exec */
	TR_P_START, TR_P_CREDS, TR_P_LIMITS, TR_P_EXEC,
	/* pid 1 again, and the supervisor's end */
	TR_C_REAPED, TR_REAPED, TR_STATS, TR_CG_REMOVED, TR_JANITOR_DONE, TR_RESULT, TR_FREED,
	TR_N
};

typedef struct trace_page {
	uint64_t ns[TR_N];   /* CLOCK_MONOTONIC; 0: not reached */
} trace_page;

/* A page when NSBOX_TRACE=1, else NULL; stamps TR_SPAWN. */
trace_page *trace_start(void);
void trace_stamp(trace_page *t, enum trace_mark m);
/* Stamp `m` (t may be NULL). */
static inline void trace_mark(trace_page *t, enum trace_mark m)
{
	if (t)
		trace_stamp(t, m);
}
/* Write the trace to stderr and release the page. */
void trace_finish(trace_page *t);

#endif
