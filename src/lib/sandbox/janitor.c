/* The janitor is our child with no exit signal (an embedding program's
 * SIGCHLD handling never sees it; we reap it through its pidfd), lives in
 * its own session, keeps every catchable signal blocked from its first
 * instruction (a terminal's Ctrl-C, or a SIGTERM to our process group,
 * sent before it has its session - it waits in the idle class and may not
 * have run yet - would otherwise end it with us), and keeps only the read
 * end of a pipe. When every write end is closed - the supervisor
 * finished, or was killed - it kills what is left in the cgroups (v2) and
 * removes them, waiting for the last processes to leave. It runs in a raw
 * clone of a possibly threaded program, so it uses no allocation and no
 * stdio: the paths are prepared before the clone. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/coverage.h"
#include "base/error.h"
#include "sandbox/janitor.h"
#include "base/syscalls.h"

#define JANITOR_PATIENCE_MS 30000

typedef struct janitor_plan {
	char dirs[CG_N][PATH_MAX];
	char kill_file[PATH_MAX + 16];   /* v2 cgroup.kill, or "" */
	char thaw_file[PATH_MAX + 16];   /* v1 freezer.state (a paused sandbox's tasks cannot die frozen), or "" */
	int n;
	bool idle;                       /* wait in the idle scheduling class */
	bool mark_last;                  /* v1: dirs[n - 1] is the memory one, removed last */
	bool dump;                       /* coverage builds: dump the counts at the end */
} janitor_plan;

void background_init(const char *name)
{
	(void) setsid();
	(void) prctl(PR_SET_NAME, name, 0, 0, 0);
	struct sigaction ign = { .sa_handler = SIG_IGN };
	(void) sigaction(SIGINT, &ign, NULL);
	(void) sigaction(SIGHUP, &ign, NULL);
	(void) sigaction(SIGPIPE, &ign, NULL);
}

__attribute__((noreturn)) static void janitor_main(const janitor_plan *jp, int wake)
{
	/* Idle class while it waits: its start never takes a CPU from the
	 * sandbox's own setup (measured: about 0.2-0.5 ms of a launch on two
	 * busy CPUs). Only where it can be lifted again (root): janitor_finish
	 * does before waking it, and it does itself if woken by our death. */
	struct sched_param none = { 0 };
	if (jp->idle)
		(void) sched_setscheduler(0, SCHED_IDLE, &none);
	background_init("nsbox-janitor");
	if (wake > 0)
		(void) sys_close_range(0, (unsigned) wake - 1, 0);
	(void) sys_close_range((unsigned) wake + 1, ~0U, 0);
	char c;
	while (read(wake, &c, 1) != 0 && errno == EINTR)
		;
	close(wake);
	if (jp->idle)
		(void) sched_setscheduler(0, SCHED_OTHER, &none);
	if (jp->kill_file[0]) {
		int fd = open(jp->kill_file, O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			(void) !write(fd, "1", 1);
			close(fd);
		}
	}
	if (jp->thaw_file[0]) {
		int fd = open(jp->thaw_file, O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			(void) !write(fd, "THAWED", 6);
			close(fd);
		}
	}
	bool left = false;
	for (int i = 0; i < jp->n; i++) {
		/* v1: the memory directory (last) is the mark by which a later
		 * run's collector finds what would not go: kept while any is. */
		if (jp->mark_last && i == jp->n - 1 && left)
			break;
		int r = -1;
		for (int t = 0; t < JANITOR_PATIENCE_MS / 5; t++) {
			if ((r = rmdir(jp->dirs[i])) == 0 || errno != EBUSY)
				break;
			struct timespec ts = { 0, 5000000 };
			nanosleep(&ts, NULL);
		}
		left |= r < 0 && errno != ENOENT;
	}
	if (jp->dump)
		coverage_dump();
	_exit(0);
}

int janitor_start(const cg_host *h, const char *name, janitor *j, nsbox_error **err)
{
	/* Large: keep it off the stack. The child reads its own copy. */
	_cleanup_free_ janitor_plan *jpp = calloc(1, sizeof(*jpp));
	if (!jpp)
		return nsbox_err(err, ENOMEM, "cgroup", "start the cgroup janitor");
	janitor_plan *const jp = jpp;
	for (int i = CG_N - 1; i >= 0; i--) {
		if (!h->parent[i])
			continue;
		char dir[PATH_MAX];
		snprintf(dir, sizeof(dir), "%s/%s", h->parent[i], name);
		bool dup = false;
		for (int k = 0; k < jp->n; k++)
			dup |= !strcmp(jp->dirs[k], dir);
		if (!dup)
			snprintf(jp->dirs[jp->n++], PATH_MAX, "%s", dir);
	}
	jp->idle = geteuid() == 0;
	jp->mark_last = h->driver == CG_V1 && jp->n > 0 && h->parent[CG_MEMORY] &&
	                !strncmp(jp->dirs[jp->n - 1], h->parent[CG_MEMORY], strlen(h->parent[CG_MEMORY]));
	if (h->driver == CG_V2)
		snprintf(jp->kill_file, sizeof(jp->kill_file), "%s/cgroup.kill", jp->dirs[0]);
	if (h->driver == CG_V1 && h->parent[CG_FREEZER])
		snprintf(jp->thaw_file, sizeof(jp->thaw_file), "%s/%s/freezer.state", h->parent[CG_FREEZER], name);
	jp->dump = coverage_clone_may_dump();
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return nsbox_err(err, errno, "cgroup", "create the janitor's pipe");
	int pidfd = -1;
	struct clone_args ca = { .flags = CLONE_PIDFD, .pidfd = (uint64_t) (uintptr_t) &pidfd };
	sigset_t all, mask;
	sigfillset(&all);
	(void) pthread_sigmask(SIG_SETMASK, &all, &mask);
	pid_t pid = (pid_t) sys_clone3(&ca);
	if (pid == 0) {
		close(p[1]);
		janitor_main(jp, p[0]);   /* the mask stays: no signal but SIGKILL ends it */
	}
	int e = errno;
	(void) pthread_sigmask(SIG_SETMASK, &mask, NULL);
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return nsbox_err(err, e, "cgroup", "start the cgroup janitor");
	}
	close(p[0]);
	*j = (janitor){ .pid = pid, .pidfd = pidfd, .wake = p[1] };
	return 0;
}

static void janitor_wake(janitor *j)
{
	if (j->pid > 0) {
		/* Out of the idle class first: on busy CPUs it could wait long. */
		struct sched_param none = { 0 };
		(void) sched_setscheduler(j->pid, SCHED_OTHER, &none);
	}
	if (j->wake >= 0)
		close(j->wake);
}

void janitor_leave(janitor *j)
{
	janitor_wake(j);
	if (j->pidfd >= 0)
		close(j->pidfd);
	*j = (janitor){ .pid = 0, .pidfd = -1, .wake = -1 };
}

void janitor_finish(janitor *j)
{
	janitor_wake(j);
	if (j->pidfd >= 0) {
		siginfo_t si;
		while (waitid(P_PIDFD, (id_t) j->pidfd, &si, WEXITED | __WALL) < 0 && errno == EINTR)
			;
		close(j->pidfd);
	}
	*j = (janitor){ .pid = 0, .pidfd = -1, .wake = -1 };
}
