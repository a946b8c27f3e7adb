/* Coverage builds only: the sandbox's pid 1 writes its gcov counts (its own
 * setup in child.c and mounts.c, init.c, and the payload's steps before its
 * exec, which run in pid 1's memory). After pivot_root the build tree is
 * gone, so the supervisor opens the coverage directory (O_PATH) before the
 * clone and pid 1 dumps through /proc/self/fd/N (libgcov reads GCOV_PREFIX
 * at each dump). The files are created with pid 1's host uid, so each uid
 * gets its own tree, sandbox-UID, under the 1777 directory `make coverage`
 * merges. libgcov allocates, uses stdio and takes its own lock: safe in a
 * raw clone only if no other thread could hold those locks, so a clone
 * from a threaded process is not counted (a hang would be worse than a
 * missed count). */
#include "base/coverage.h"

#ifdef NSBOX_COVERAGE
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan/plan.h"
#include "base/syscalls.h"

void __gcov_reset(void);

#define COV_MAPS 8

static struct {
	bool on;
	int dirfd;
	unsigned nmaps;
	struct { unsigned ns, host, count; } map[COV_MAPS];
	uid_t caller;        /* the supervisor's euid: pid 1's until the maps are written */
	bool caller_mapped;
	uid_t overflow;      /* what an unmapped id reads as in the namespace */
	char prefix[96];     /* GCOV_PREFIX=/proc/self/fd/N/sandbox-UID */
	char *env[3];
} cov = { .dirfd = -1 };

static unsigned threads(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[128];
	unsigned n = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Threads: %u", &n) == 1)
			break;
	if (f)
		fclose(f);
	return n;
}

static bool parse_map(const char *m)
{
	cov.nmaps = 0;
	for (int used; m && *m; m += used) {
		if (cov.nmaps == COV_MAPS)
			return false;
		unsigned ns, host, count;
		used = 0;
		if (sscanf(m, "%u %u %u\n%n", &ns, &host, &count, &used) != 3)
			return false;
		cov.map[cov.nmaps].ns = ns;
		cov.map[cov.nmaps].host = host;
		cov.map[cov.nmaps].count = count;
		if (used <= 0)
			return false;
		cov.nmaps++;
	}
	return cov.nmaps > 0;
}

void coverage_sandbox_prepare(const struct nsbox_plan *p)
{
	/* cov.on is false here: set only between this and _end, in a
	 * single-threaded process; a threaded one only reads cov. */
	const char *dir = getenv("NSBOX_COVERAGE_PREFIX");
	if (!dir || dir[0] != '/' || threads() != 1 || !parse_map(p->uid_map))
		return;
	int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0 && fd < 3) {
		/* pid 1 dup3s the payload's stdio over 0-2. */
		int d = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		close(fd);
		fd = d;
	}
	if (fd < 0)
		return;
	cov.dirfd = fd;
	cov.caller = geteuid();
	cov.overflow = 65534;
	FILE *f = fopen("/proc/sys/kernel/overflowuid", "re");
	if (f) {
		if (fscanf(f, "%u", &cov.overflow) != 1)
			cov.overflow = 65534;
		fclose(f);
	}
	cov.caller_mapped = false;
	for (unsigned i = 0; i < cov.nmaps; i++)
		if (cov.caller >= cov.map[i].host && cov.caller - cov.map[i].host < cov.map[i].count)
			cov.caller_mapped = true;
	cov.on = true;
}

void coverage_sandbox_end(void)
{
	if (cov.dirfd < 0)
		return;
	close(cov.dirfd);
	cov.dirfd = -1;
	cov.on = false;
}

void coverage_sandbox_start(void)
{
	/* The clone copied the supervisor's counts: dump only ours. */
	if (cov.on)
		__gcov_reset();
}

int coverage_close_range(unsigned first, unsigned last, unsigned flags)
{
	unsigned keep = (unsigned) cov.dirfd;
	if (!cov.on || keep < first || keep > last)
		return sys_close_range(first, last, flags);
	int r = keep > first ? sys_close_range(first, keep - 1, flags) : 0;
	return r == 0 && keep < last ? sys_close_range(keep + 1, last, flags) : r;
}

/* The host uid files we create get: maps are written before pid 1 changes
 * ids, and until then it has the caller's. An id that reads as the
 * overflow id is ambiguous when the caller is unmapped and the overflow
 * id mapped (root's subordinate range): no dump rather than files in
 * another uid's tree. */
static bool host_uid(uid_t *out)
{
	char c;
	int fd = open("/proc/self/uid_map", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, &c, 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n < 0)
		return false;
	if (n == 0) {
		*out = cov.caller;
		return true;
	}
	uid_t u = geteuid();
	bool mapped = false;
	for (unsigned i = 0; i < cov.nmaps && !mapped; i++)
		if (u >= cov.map[i].ns && u - cov.map[i].ns < cov.map[i].count) {
			*out = cov.map[i].host + (u - cov.map[i].ns);
			mapped = true;
		}
	if (!cov.caller_mapped && u == cov.overflow) {
		*out = cov.caller;
		return !mapped;
	}
	return mapped;
}

static char *put_uint(char *p, unsigned v)
{
	char d[16];
	int n = 0;
	do
		d[n++] = (char) ('0' + v % 10);
	while ((v /= 10) != 0);
	while (n)
		*p++ = d[--n];
	return p;
}

extern char **environ;
void __gcov_dump(void);

static void dump_beneath(void)
{
	uid_t uid;
	if (!host_uid(&uid))
		return;
	static const char head[] = "GCOV_PREFIX=/proc/self/fd/";
	char *p = cov.prefix;
	memcpy(p, head, sizeof(head) - 1);
	p = put_uint(p + sizeof(head) - 1, (unsigned) cov.dirfd);
	memcpy(p, "/sandbox-", 9);
	*put_uint(p + 9, uid) = '\0';
	/* No /proc in this sandbox, or no /dev/null for libgcov's messages
	 * (which would otherwise reach the payload's stderr): no dump. */
	const char *dir = cov.prefix + strlen("GCOV_PREFIX=");
	char *slash = strrchr(cov.prefix, '/');
	*slash = '\0';
	bool ok = access(dir, X_OK) == 0 && access("/dev/null", W_OK) == 0;
	*slash = '/';
	if (!ok)
		return;
	cov.env[0] = cov.prefix;
	cov.env[1] = (char *) "GCOV_ERROR_FILE=/dev/null";
	cov.env[2] = NULL;
	environ = cov.env;
	__gcov_dump();
}

void coverage_sandbox_dump(void)
{
	if (cov.on && getpid() == 1)
		dump_beneath();
}

void coverage_fileop_start(void)
{
	if (cov.on)
		__gcov_reset();
}

void coverage_fileop_dump(void)
{
	if (cov.on)
		dump_beneath();
}
#else
typedef int coverage_unused;
#endif
