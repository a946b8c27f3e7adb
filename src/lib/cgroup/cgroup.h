/* Per-run cgroups: finding a place for them (probe), creating them with the
 * limits, reading what happened, and removing them. Two drivers: cgroup v2
 * (one directory, CLONE_INTO_CGROUP) and cgroup v1 (one directory in each of
 * the memory, pids, cpu and cpuacct hierarchies). */
#ifndef NSBOX_CGROUP_H
#define NSBOX_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "nsbox.h"

enum cg_driver { CG_NONE = 0, CG_V1, CG_V2 };
/* cgroup v1's hierarchies (cpuacct and freezer optional; freezer only for
 * a long-lived sandbox, which can be paused). */
enum { CG_MEMORY, CG_PIDS, CG_CPU, CG_CPUACCT, CG_FREEZER, CG_N };

typedef struct cg_host {
	enum cg_driver driver;
	char *parent[CG_N];     /* v2: parent[0]; v1: one per controller */
	bool v2_mounted;
	char reason[1024];      /* why no cgroup can be used */
} cg_host;

typedef struct cg_limits {
	uint64_t memory;
	double cpus;
	uint64_t pids;
	bool freezer;           /* v1: a freezer cgroup too (pause, resume) */
} cg_limits;

typedef struct cg_stats {
	bool have_memory, have_cpu, have_pids_peak;
	uint64_t peak_memory;
	double cpu_user_ms, cpu_system_ms;
	uint64_t pids_peak;
	uint64_t oom_kills;
	uint64_t pids_max_events;
} cg_stats;

typedef struct cg_sample {
	uint64_t memory;
	double cpu_ms;
	bool have_cpu;          /* false: v1 without cpuacct */
	uint64_t pids;
} cg_sample;

typedef struct cgroup {
	enum cg_driver driver;
	char *path[CG_N];       /* v2: path[0] */
	int dirfd;              /* v2: for CLONE_INTO_CGROUP */
} cgroup;

/* Find where this process may create sandbox cgroups. `parent` overrides
 * the place (a cgroup v2 directory). Never fails: driver CG_NONE and a
 * reason when nothing is usable. */
void cgroup_probe(const char *parent, cg_host *out);
void cgroup_host_free(cg_host *h);
/* The same, reading the given files instead of /proc/self/{mountinfo,cgroup}
 * (for tests). */
void cgroup_probe_files(const char *mountinfo, const char *cgroup_file, const char *parent,
                        cg_host *h);

/* cgroup v1: a NULL h->parent[CG_CPUACCT] (not mounted, or not writable)
 * leaves cpuacct out; the record's CPU times then come from the kernel's
 * rusage of the sandbox, and it says so. */
int cgroup_create(const cg_host *h, const char *name, const cg_limits *l, cgroup **out,
                  nsbox_error **err);
/* Put `pid` into the cgroup (v1, or v2 without CLONE_INTO_CGROUP). */
int cgroup_attach(const cgroup *cg, pid_t pid, nsbox_error **err);
/* What the cgroup counted, read after every process of the run is dead and
 * before the cgroup is removed. CPU time comes from the cgroup on both
 * drivers (v1: cpuacct; have_cpu false without it). */
void cgroup_stats(const cgroup *cg, cg_stats *st);
/* Only the counters a run's share is taken from (CPU time, OOM kills, pids
 * events): the base an exec or a pooled run subtracts. */
void cgroup_counters(const cgroup *cg, cg_stats *st);
/* cgroup v1's exact total (cpuacct.usage, ns) split in the proportion of
 * the tick samples of cpuacct.stat. */
void cg_cpu_split(uint64_t total_ns, uint64_t user_ticks, uint64_t sys_ticks, double *user_ms,
                  double *sys_ms);
void cgroup_sample(const cgroup *cg, cg_sample *s);
/* Freeze (true) or thaw every process of the cgroup, and wait until the
 * kernel says it is done. -ENOTSUP without a freezer (v1 without one). */
int cgroup_freeze(const cgroup *cg, bool frozen, nsbox_error **err);
/* Kill what is left, remove the directories, free. Returns -errno when a
 * directory could not be removed. */
int cgroup_destroy(cgroup *cg);

/* Remove empty cgroups left below the host's parents by supervisors that
 * no longer exist ("nsbox-PID-..." and "nsbox-supervisor-PID"). */
void cgroup_collect_stale(const cg_host *h);
/* Names: "nsbox-PID-RAND8-PIDNS" for a run, "nsbox-supervisor-PID-PIDNS"
 * for a supervisor's own leaf (v2), PIDNS the inode of the creator's pid
 * namespace in hex (absent in names made by older versions). True when
 * `name` is one of ours; *pidns is 0 when it names none. */
bool cgroup_name_owner(const char *name, pid_t *pid, uint64_t *pidns);
uint64_t cgroup_own_pidns(void);

/* Helpers shared with `nsbox check` and the tests. */
int cg_read_u64(const char *dir, const char *file, uint64_t *out);
/* The value after `key ` in a flat-keyed file such as memory.events. */
int cg_read_key(const char *dir, const char *file, const char *key, uint64_t *out);
/* Two keys of one such file, read once; 0 when both are there. */
int cg_read_keys2(const char *dir, const char *file, const char *k1, uint64_t *v1, const char *k2, uint64_t *v2);

#endif
