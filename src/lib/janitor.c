/* The janitor is started with a double fork so that it is nobody's child
 * for long (the intermediate exits at once and we reap it), lives in its own
 * session (a terminal's Ctrl-C does not reach it), and keeps only the read
 * end of a pipe. When every write end is closed - the supervisor finished,
 * or was killed - it kills what is left in the cgroups (v2) and removes
 * them, waiting for the last processes to leave. It runs in a raw clone of
 * a possibly threaded program, so it uses no allocation and no stdio: the
 * paths are prepared before the fork. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "error.h"
#include "janitor.h"
#include "syscalls.h"

#define JANITOR_PATIENCE_MS 30000

typedef struct janitor_plan {
	char dirs[CG_N][PATH_MAX];
	char kill_file[PATH_MAX];   /* v2 cgroup.kill, or "" */
	int n;
} janitor_plan;

__attribute__((noreturn)) static void janitor_main(const janitor_plan *jp, int wake)
{
	(void) setsid();
	(void) prctl(PR_SET_NAME, "nsbox-janitor", 0, 0, 0);
	struct sigaction ign = { .sa_handler = SIG_IGN };
	(void) sigaction(SIGINT, &ign, NULL);
	(void) sigaction(SIGHUP, &ign, NULL);
	(void) sigaction(SIGPIPE, &ign, NULL);
	if (wake > 0)
		(void) sys_close_range(0, (unsigned) wake - 1, 0);
	(void) sys_close_range((unsigned) wake + 1, ~0U, 0);
	char c;
	while (read(wake, &c, 1) != 0 && errno == EINTR)
		;
	close(wake);
	if (jp->kill_file[0]) {
		int fd = open(jp->kill_file, O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			(void) !write(fd, "1", 1);
			close(fd);
		}
	}
	for (int i = 0; i < jp->n; i++)
		for (int t = 0; t < JANITOR_PATIENCE_MS / 5; t++) {
			if (rmdir(jp->dirs[i]) == 0 || errno != EBUSY)
				break;
			struct timespec ts = { 0, 5000000 };
			nanosleep(&ts, NULL);
		}
	_exit(0);
}

int janitor_start(const cgroup *cg, int *wake, nsbox_error **err)
{
	janitor_plan jp;
	memset(&jp, 0, sizeof(jp));
	for (int i = CG_N - 1; i >= 0; i--)
		if (cg->path[i])
			snprintf(jp.dirs[jp.n++], PATH_MAX, "%s", cg->path[i]);
	if (cg->driver == CG_V2)
		snprintf(jp.kill_file, sizeof(jp.kill_file), "%s/cgroup.kill", cg->path[0]);
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return nsbox_err(err, errno, "cgroup", "create the janitor's pipe");
	int pidfd = -1;
	struct clone_args ca = { .flags = CLONE_PIDFD, .pidfd = (uint64_t) (uintptr_t) &pidfd };
	pid_t mid = (pid_t) sys_clone3(&ca);
	if (mid < 0) {
		int e = errno;
		close(p[0]);
		close(p[1]);
		return nsbox_err(err, e, "cgroup", "start the cgroup janitor");
	}
	if (mid == 0) {
		struct clone_args fa = { .exit_signal = SIGCHLD };
		pid_t j = (pid_t) sys_clone3(&fa);
		if (j == 0) {
			close(p[1]);
			janitor_main(&jp, p[0]);
		}
		_exit(j < 0 ? 1 : 0);
	}
	close(p[0]);
	siginfo_t si = { 0 };
	while (waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED | __WALL) < 0 && errno == EINTR)
		;
	close(pidfd);
	if (si.si_code != CLD_EXITED || si.si_status != 0) {
		close(p[1]);
		return nsbox_err(err, ECHILD, "cgroup", "start the cgroup janitor: it failed");
	}
	*wake = p[1];
	return 0;
}
