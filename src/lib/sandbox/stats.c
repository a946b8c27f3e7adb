/* Live resource samples (--stats-interval): from the run's cgroup, or, in
 * rlimit mode, by adding up the sandbox's processes found in /proc (those
 * whose pid namespace is the sandbox's). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/sandbox.h"
#include "sandbox/stats.h"

static bool read_small(const char *path, char *out, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, out, len - 1);
	close(fd);
	if (n <= 0)
		return false;
	out[n] = '\0';
	return true;
}

static void sample_proc(const nsbox_sandbox *sb, cg_sample *s)
{
	char path[PATH_MAX];
	if (!sb->pidns_ino)
		return;
	DIR *d = opendir("/proc");
	if (!d)
		return;
	long page = sysconf(_SC_PAGESIZE), hz = sysconf(_SC_CLK_TCK);
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		struct stat st;
		snprintf(path, sizeof(path), "/proc/%s/ns/pid", e->d_name);
		if (stat(path, &st) < 0 || st.st_ino != sb->pidns_ino || st.st_dev != sb->pidns_dev)
			continue;
		s->pids++;
		char text[1024];
		snprintf(path, sizeof(path), "/proc/%s/statm", e->d_name);
		unsigned long size, resident;
		if (read_small(path, text, sizeof(text)) && sscanf(text, "%lu %lu", &size, &resident) == 2)
			s->memory += (uint64_t) resident * (uint64_t) page;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		char *p;
		unsigned long ut, stime;
		/* utime and stime are fields 14 and 15; skip past "(comm)". */
		if (read_small(path, text, sizeof(text)) && (p = strrchr(text, ')')) &&
		    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &stime) == 2)
			s->cpu_ms += (double) (ut + stime) * 1000.0 / (double) hz;
	}
	closedir(d);
}

void stats_sample(nsbox_sandbox *sb, cg_sample *s)
{
	*s = (cg_sample){ 0 };
	if (sb->cg)
		cgroup_sample(sb->cg, s);
	if (!sb->cg) {
		sample_proc(sb, s);
	} else if (!s->have_cpu) {
		/* cgroup v1 without cpuacct: CPU from /proc, not a silent 0. */
		cg_sample p = { 0 };
		sample_proc(sb, &p);
		s->cpu_ms = p.cpu_ms;
	}
	if (s->pids > sb->pids_seen)
		sb->pids_seen = s->pids;
}

void stats_write(nsbox_sandbox *sb)
{
	cg_sample s;
	stats_sample(sb, &s);
	/* rlimit mode counts the live processes: with none left the sandbox is
	 * ending (pid 1 a zombie), and a row of zeros would read as a run that
	 * used nothing. Its end is the record's. */
	if (!sb->cg && !s.pids)
		return;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	double elapsed = (double) (now.tv_sec - sb->start.tv_sec) * 1e3 +
	                 (double) (now.tv_nsec - sb->start.tv_nsec) / 1e6;
	char line[256];
	int n = snprintf(line, sizeof(line),
	                 "{\"elapsed_ms\":%.1f,\"memory_bytes\":%llu,\"cpu_ms\":%.1f,\"pids\":%llu}\n",
	                 elapsed, (unsigned long long) s.memory, s.cpu_ms, (unsigned long long) s.pids);
	if (n > 0)
		(void) !write(sb->stats_fd, line, (size_t) n);
}
