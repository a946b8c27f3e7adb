/* `make coverage` (--enable-coverage): gcov writes its counts when a process
 * exits normally. Host-side helpers that end with _exit (the janitor, the
 * network keeper) dump them first, so that their code is counted too. The
 * sandbox's pid 1 ends with _exit after pivot_root, where the build tree is
 * out of sight: coverage.c gives it a directory fd opened before the clone
 * (docs/coverage.md). Normal builds compile none of this. */
#ifndef NSBOX_COVERAGE_H
#define NSBOX_COVERAGE_H

#include <stdbool.h>

#ifdef NSBOX_COVERAGE
#include <fcntl.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>
void __gcov_dump(void);
static inline void coverage_dump(void) { __gcov_dump(); }
/* Whether a child cloned now may dump its counts: only when this process
 * has one thread. Otherwise another thread may hold a lock at the clone
 * (malloc's arena, which gcov's dump takes) that the child then waits on
 * for ever: the SDK's pool hung on its janitors so. Asked before the clone. */
static inline bool coverage_clone_may_dump(void)
{
	char b[2048];
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, b, sizeof(b) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return false;
	b[n] = '\0';
	return strstr(b, "\nThreads:\t1\n") != NULL;
}
/* gcc wraps exec* in coverage builds to dump the counts first: under a lock
 * that another thread of an embedding program may hold across our raw
 * clone (a child hung on it in the SDK's tests), and into files a sandboxed
 * payload cannot reach. Children that exec call the system call itself. */
#include <sys/syscall.h>
#include <unistd.h>
extern char **environ;
static inline int coverage_execve(const char *path, char *const argv[], char *const envp[])
{
	return (int) syscall(SYS_execve, path, argv, envp);
}
#define execve coverage_execve
#define execv(p, a) coverage_execve((p), (a), environ)

/* The sandbox's processes (coverage.c). Supervisor: prepare before the
 * clone, end after it. pid 1: start first thing, dump before _exit (a
 * no-op elsewhere, e.g. in the payload, whose counts are pid 1's: it shares
 * pid 1's memory until its exec), close_range sparing the directory fd. */
struct nsbox_plan;
void coverage_sandbox_prepare(const struct nsbox_plan *p);
void coverage_sandbox_end(void);
void coverage_sandbox_start(void);
void coverage_sandbox_dump(void);
/* A files API operation (child/fileop.c) never execs: its process, a copy
 * of pid 1, starts its counts afresh and dumps them itself at its end. */
void coverage_fileop_start(void);
void coverage_fileop_dump(void);
int coverage_close_range(unsigned first, unsigned last, unsigned flags);
#else
static inline void coverage_dump(void) {}
#define coverage_sandbox_prepare(p) ((void) 0)
#define coverage_sandbox_end() ((void) 0)
#define coverage_sandbox_start() ((void) 0)
#define coverage_sandbox_dump() ((void) 0)
#define coverage_fileop_start() ((void) 0)
#define coverage_fileop_dump() ((void) 0)
#define coverage_close_range sys_close_range
static inline bool coverage_clone_may_dump(void) { return false; }
#endif

#endif
