/* Creating, filling, reading and removing one run's cgroups. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "base/cleanup.h"
#include "base/error.h"

#define CPU_PERIOD_US 100000u

static int put(const char *dir, const char *file, const char *value, nsbox_error **err)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return nsbox_err(err, errno, "cgroup", "open '%s'", path);
	ssize_t n = write(fd, value, strlen(value));
	int e = errno;
	close(fd);
	if (n < 0)
		return nsbox_err(err, e, "cgroup", "write '%s' to '%s'", value, path);
	return 0;
}

static bool exists(const char *dir, const char *file)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	return access(path, F_OK) == 0;
}

/* Enable memory, pids and cpu for the children of `dir`. The kernel refuses
 * (EBUSY) while `dir` itself holds processes, unless it is the root: when it
 * is our own cgroup and holds only us, we move into a leaf below it first. */
static int enable_controllers(const char *dir, nsbox_error **err)
{
	char have[512] = "";
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", dir);
	FILE *f = fopen(path, "re");
	if (f) {
		if (!fgets(have, sizeof(have), f))
			have[0] = '\0';
		fclose(f);
	}
	if (strstr(have, "memory") && strstr(have, "pids") && strstr(have, "cpu"))
		return 0;
	nsbox_error *first = NULL;
	int r = put(dir, "cgroup.subtree_control", "+memory +pids +cpu", &first);
	if (r != -EBUSY) {
		if (r < 0 && err) {
			nsbox_error_free(*err);
			*err = first;
		} else {
			nsbox_error_free(first);
		}
		return r;
	}
	nsbox_error_free(first);
	char leaf[PATH_MAX], pid[32];
	snprintf(leaf, sizeof(leaf), "%s/nsbox-supervisor-%d-%llx", dir, (int) getpid(),
	         (unsigned long long) cgroup_own_pidns());
	snprintf(pid, sizeof(pid), "%d", (int) getpid());
	if (mkdir(leaf, 0755) < 0 && errno != EEXIST)
		return nsbox_err(err, errno, "cgroup", "create leaf cgroup '%s'", leaf);
	r = put(leaf, "cgroup.procs", pid, err);
	if (r == 0)
		r = put(dir, "cgroup.subtree_control", "+memory +pids +cpu", err);
	if (r < 0)
		return nsbox_err_prefix(err, r, "enable controllers below '%s' (it holds other processes: give nsbox a delegated cgroup of its own with --cgroup-parent)", dir);
	return 0;
}

static int create_v2(cgroup *cg, const char *parent, const char *name, const cg_limits *l,
                     nsbox_error **err)
{
	int r = enable_controllers(parent, err);
	if (r < 0)
		return r;
	if (asprintf(&cg->path[0], "%s/%s", parent, name) < 0)
		return nsbox_err(err, ENOMEM, "cgroup", "create cgroup");
	if (mkdir(cg->path[0], 0755) < 0)
		return nsbox_err(err, errno, "cgroup", "create cgroup '%s'", cg->path[0]);
	char v[64];
	snprintf(v, sizeof(v), "%llu", (unsigned long long) l->memory);
	r = put(cg->path[0], "memory.max", v, err);
	/* No swap beyond the limit: memory.swap.max exists only with swap
	 * accounting; without it no swap can be charged to us at all. */
	if (r == 0 && exists(cg->path[0], "memory.swap.max"))
		r = put(cg->path[0], "memory.swap.max", "0", err);
	snprintf(v, sizeof(v), "%llu %u", (unsigned long long) (l->cpus * CPU_PERIOD_US + 0.5), CPU_PERIOD_US);
	r = r ?: put(cg->path[0], "cpu.max", v, err);
	snprintf(v, sizeof(v), "%llu", (unsigned long long) l->pids);
	r = r ?: put(cg->path[0], "pids.max", v, err);
	if (r < 0)
		return r;
	cg->dirfd = open(cg->path[0], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return cg->dirfd < 0 ? nsbox_err(err, errno, "cgroup", "open cgroup '%s'", cg->path[0]) : 0;
}

static int create_v1(cgroup *cg, const cg_host *h, const char *name, const cg_limits *l,
                     nsbox_error **err)
{
	/* The memory directory first (CG_MEMORY is 0) and removed last: while
	 * any directory of a run exists, its memory one does, and the
	 * collector of stale cgroups reads that hierarchy alone. */
	for (int i = 0; i < CG_N; i++) {
		if (!h->parent[i] || (i == CG_FREEZER && !l->freezer))
			continue;   /* cpuacct and freezer are optional (see cgroup_create) */
		/* cpu and cpuacct are often mounted together: one directory. */
		for (int j = 0; j < i && !cg->path[i]; j++)
			if (h->parent[j] && !strcmp(h->parent[i], h->parent[j]))
				cg->path[i] = strdup(cg->path[j]);
		if (cg->path[i])
			continue;
		if (asprintf(&cg->path[i], "%s/%s", h->parent[i], name) < 0)
			return nsbox_err(err, ENOMEM, "cgroup", "create cgroup");
		if (mkdir(cg->path[i], 0755) < 0)
			return nsbox_err(err, errno, "cgroup", "create cgroup '%s'", cg->path[i]);
	}
	char v[64];
	snprintf(v, sizeof(v), "%llu", (unsigned long long) l->memory);
	int r = put(cg->path[CG_MEMORY], "memory.limit_in_bytes", v, err);
	/* memory+swap at the same value: no swap beyond the limit. */
	if (r == 0 && exists(cg->path[CG_MEMORY], "memory.memsw.limit_in_bytes"))
		r = put(cg->path[CG_MEMORY], "memory.memsw.limit_in_bytes", v, err);
	snprintf(v, sizeof(v), "%llu", (unsigned long long) l->pids);
	r = r ?: put(cg->path[CG_PIDS], "pids.max", v, err);
	snprintf(v, sizeof(v), "%u", CPU_PERIOD_US);
	r = r ?: put(cg->path[CG_CPU], "cpu.cfs_period_us", v, err);
	snprintf(v, sizeof(v), "%llu", (unsigned long long) (l->cpus * CPU_PERIOD_US + 0.5));
	r = r ?: put(cg->path[CG_CPU], "cpu.cfs_quota_us", v, err);
	return r;
}

int cgroup_create(const cg_host *h, const char *name, const cg_limits *l, cgroup **out,
                  nsbox_error **err)
{
	cgroup *cg = calloc(1, sizeof(*cg));
	if (!cg)
		return nsbox_err(err, ENOMEM, "cgroup", "create cgroup");
	cg->driver = h->driver;
	cg->dirfd = -1;
	int r = h->driver == CG_V2 ? create_v2(cg, h->parent[0], name, l, err)
	      : h->driver == CG_V1 ? create_v1(cg, h, name, l, err)
	      : nsbox_err(err, ENOTSUP, "cgroup", "create cgroup: no cgroup driver");
	if (r < 0) {
		(void) cgroup_destroy(cg);
		return r;
	}
	*out = cg;
	return 0;
}

int cgroup_attach(const cgroup *cg, pid_t pid, nsbox_error **err)
{
	char v[32];
	snprintf(v, sizeof(v), "%d", (int) pid);
	for (int i = 0; i < CG_N; i++) {
		if (!cg->path[i] || (i > 0 && cg->path[i - 1] && !strcmp(cg->path[i], cg->path[i - 1])))
			continue;
		int r = put(cg->path[i], "cgroup.procs", v, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* The counters (all = false) or everything. Each file is read once: an
 * exec reads them before and after, and every read is on its path. */
static void stats(const cgroup *cg, cg_stats *st, bool all)
{
	*st = (cg_stats){ 0 };
	uint64_t v, u, s;
	if (cg->driver == CG_V2) {
		const char *d = cg->path[0];
		if (all && cg_read_u64(d, "memory.peak", &st->peak_memory) == 0)
			st->have_memory = true;
		(void) cg_read_key(d, "memory.events", "oom_kill", &st->oom_kills);
		(void) cg_read_key(d, "pids.events", "max", &st->pids_max_events);
		st->have_pids_peak = all && cg_read_u64(d, "pids.peak", &st->pids_peak) == 0;
		if (cg_read_keys2(d, "cpu.stat", "user_usec", &u, "system_usec", &s) == 0) {
			st->cpu_user_ms = (double) u / 1e3;
			st->cpu_system_ms = (double) s / 1e3;
			st->have_cpu = true;
		}
	} else if (cg->driver == CG_V1) {
		if (all)
			st->have_memory = cg_read_u64(cg->path[CG_MEMORY], "memory.max_usage_in_bytes", &st->peak_memory) == 0;
		(void) cg_read_key(cg->path[CG_MEMORY], "memory.oom_control", "oom_kill", &st->oom_kills);
		(void) cg_read_key(cg->path[CG_PIDS], "pids.events", "max", &st->pids_max_events);
		/* cpuacct.usage is exact (ns); cpuacct.stat's user/system are
		 * tick samples, good only for the split (as cgroup v2 does). */
		const char *d = cg->path[CG_CPUACCT];
		if (d && cg_read_u64(d, "cpuacct.usage", &v) == 0 &&
		    cg_read_keys2(d, "cpuacct.stat", "user", &u, "system", &s) == 0) {
			cg_cpu_split(v, u, s, &st->cpu_user_ms, &st->cpu_system_ms);
			st->have_cpu = true;
		}
	}
}

void cgroup_stats(const cgroup *cg, cg_stats *st)
{
	stats(cg, st, true);
}

void cgroup_counters(const cgroup *cg, cg_stats *st)
{
	stats(cg, st, false);
}

void cg_cpu_split(uint64_t total_ns, uint64_t user_ticks, uint64_t sys_ticks, double *user_ms,
                  double *sys_ms)
{
	double total = (double) total_ns / 1e6;
	/* No sample at all (a run shorter than a tick): call it user time,
	 * as the kernel's cputime_adjust() does. */
	double share = user_ticks + sys_ticks ? (double) user_ticks / (double) (user_ticks + sys_ticks) : 1.0;
	*user_ms = total * share;
	*sys_ms = total - *user_ms;
}

void cgroup_sample(const cgroup *cg, cg_sample *s)
{
	*s = (cg_sample){ 0 };
	uint64_t v = 0;
	if (cg->driver == CG_V2) {
		(void) cg_read_u64(cg->path[0], "memory.current", &s->memory);
		(void) cg_read_u64(cg->path[0], "pids.current", &s->pids);
		if (cg_read_key(cg->path[0], "cpu.stat", "usage_usec", &v) == 0) {
			s->cpu_ms = (double) v / 1e3;
			s->have_cpu = true;
		}
	} else if (cg->driver == CG_V1) {
		(void) cg_read_u64(cg->path[CG_MEMORY], "memory.usage_in_bytes", &s->memory);
		(void) cg_read_u64(cg->path[CG_PIDS], "pids.current", &s->pids);
		if (cg->path[CG_CPUACCT] && cg_read_u64(cg->path[CG_CPUACCT], "cpuacct.usage", &v) == 0) {
			s->cpu_ms = (double) v / 1e6;
			s->have_cpu = true;
		}
	}
}

/* The value of `key` in a flat file (cgroup.events) or the first line. */
static bool file_says(const char *dir, const char *file, const char *want)
{
	char path[PATH_MAX], buf[512];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return strstr(buf, want) != NULL;
}

int cgroup_freeze(const cgroup *cg, bool frozen, nsbox_error **err)
{
	const char *dir, *file, *value, *done;
	if (cg->driver == CG_V2) {
		dir = cg->path[0];
		file = "cgroup.freeze";
		value = frozen ? "1" : "0";
		done = frozen ? "frozen 1" : "frozen 0";
	} else {
		dir = cg->path[CG_FREEZER];
		file = "freezer.state";
		value = frozen ? "FROZEN" : "THAWED";
		done = value;
	}
	if (!dir)
		return nsbox_err_hint(err, ENOTSUP, "cgroup", "mount the cgroup v1 freezer hierarchy, or use cgroup v2",
		                      "%s the sandbox: no cgroup freezer here", frozen ? "pause" : "resume");
	int r = put(dir, file, value, err);
	if (r < 0)
		return r;
	/* The kernel freezes asynchronously: until it says so, a task may
	 * still run. v1 says FREEZING meanwhile, v2 'frozen 0'. */
	for (int i = 0; i < 2000; i++) {
		if (file_says(dir, cg->driver == CG_V2 ? "cgroup.events" : "freezer.state", done))
			return 0;
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	return nsbox_err(err, ETIMEDOUT, "cgroup", "%s the sandbox: the kernel did not finish in 2 s",
	                 frozen ? "pause" : "resume");
}

/* rmdir, retrying briefly: the last exiting tasks may still be leaving. */
static int remove_dir(const char *path)
{
	for (int i = 0; i < 200; i++) {
		if (rmdir(path) == 0 || errno == ENOENT)
			return 0;
		if (errno != EBUSY)
			return -errno;
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	return -EBUSY;
}

int cgroup_destroy(cgroup *cg)
{
	if (!cg)
		return 0;
	int r = 0;
	if (cg->dirfd >= 0)
		close(cg->dirfd);
	if (cg->driver == CG_V2 && cg->path[0] && access(cg->path[0], F_OK) == 0) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/cgroup.kill", cg->path[0]);
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			(void) !write(fd, "1", 1);
			close(fd);
		}
	}
	/* A paused sandbox's tasks cannot die while frozen (v1). */
	if (cg->driver == CG_V1 && cg->path[CG_FREEZER])
		(void) put(cg->path[CG_FREEZER], "freezer.state", "THAWED", NULL);
	for (int i = CG_N - 1; i >= 0; i--) {
		if (!cg->path[i])
			continue;
		/* v1: a directory that would not go keeps the memory one, the
		 * mark by which the janitor or a later run's collector finds it. */
		int e = i == CG_MEMORY && cg->driver == CG_V1 && r < 0 ? 0 : remove_dir(cg->path[i]);
		r = r ?: e;
		free(cg->path[i]);
	}
	free(cg);
	return r;
}

/* Our pid namespace's inode (0 if it cannot be read). */
uint64_t cgroup_own_pidns(void)
{
	struct stat st;
	return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t) st.st_ino : 0;
}

bool cgroup_name_owner(const char *name, pid_t *pid, uint64_t *pidns)
{
	const char *p = NULL;
	*pid = 0;
	*pidns = 0;
	if (!strncmp(name, "nsbox-supervisor-", 17))
		p = name + 17;
	else if (!strncmp(name, "nsbox-", 6))
		p = name + 6;
	if (!p || *p < '1' || *p > '9')
		return false;
	char *e;
	errno = 0;
	long n = strtol(p, &e, 10);
	if (errno || n <= 0 || n > INT_MAX || (*e != '-' && *e != '\0'))
		return false;
	*pid = (pid_t) n;
	/* Then, in a run's name, 8 hex digits of its own; then the pid
	 * namespace (older names have none). A supervisor's leaf: the
	 * namespace follows the pid. */
	if (*e == '-' && p == name + 6) {
		e++;
		for (int i = 0; i < 8; i++, e++)
			if (!isxdigit((unsigned char) *e))
				return false;
		if (*e != '-' && *e != '\0')
			return false;
	}
	if (*e == '-') {
		const char *ns = e + 1;
		if (!isxdigit((unsigned char) *ns))
			return false;
		errno = 0;
		unsigned long long v = strtoull(ns, &e, 16);
		if (errno || *e != '\0' || v == 0)
			return false;
		*pidns = v;
	}
	return true;
}

/* A stale run's directories below every parent, the memory one last (v1)
 * and only once the others are gone: it stays the mark until then. */
static void remove_stale(const cg_host *h, const char *name)
{
	bool left = false;
	for (int i = CG_N - 1; i >= 0; i--) {
		if (!h->parent[i])
			continue;
		if (i == CG_MEMORY && h->driver == CG_V1 && left)
			break;
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/%s", h->parent[i], name);
		if (rmdir(path) < 0 && errno != ENOENT)
			left = true;
	}
}

void cgroup_collect_stale(const cg_host *h)
{
	/* One directory to read, whatever the driver: v2's parent, or v1's
	 * memory hierarchy, where every run's set of directories is made
	 * first and removed last (create_v1, cgroup_destroy, the janitor). */
	const char *where = h->driver == CG_V1 ? h->parent[CG_MEMORY] : h->parent[0];
	if (!where)
		return;
	DIR *d = opendir(where);
	if (!d)
		return;
	uint64_t own_ns = cgroup_own_pidns();
	struct dirent *e;
	while ((e = readdir(d))) {
		pid_t pid;
		uint64_t ns;
		/* Judged only by a collector in the owner's pid namespace
		 * (elsewhere the pid names another process, or none), and
		 * only when that process is gone. An empty directory is
		 * all rmdir will ever remove. */
		if (!cgroup_name_owner(e->d_name, &pid, &ns) || (ns && ns != own_ns) ||
		    pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		remove_stale(h, e->d_name);
	}
	closedir(d);
}
