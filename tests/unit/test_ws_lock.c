/* A run's lock (workspace.c, ws_session_lock) appears held: at every system
 * call the locking process makes, a `lock` file in its directory is one that
 * cannot be taken. Otherwise another run's reap_stale, which takes a lock it
 * can as one whose holder is gone, could remove a run that had only just
 * begun (seen in CI: two workspace runs started at once, one lost its
 * directory). The locker is stopped at each system call (ptrace) and the
 * lock tried from outside, as reap_stale does. An existing lock (a
 * session's) is taken as it is, or refused while held. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "unit.h"
#include "workspace/workspace.h"

static char dir[64], lockpath[96];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/nsbox-unit-wslock.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(lockpath, sizeof(lockpath), "%s/lock", dir);
}

static void teardown(void)
{
	(void) remove_tree(dir);
}

/* Whether the lock at lockpath exists and can be taken now (and is let go
 * again at once): what reap_stale would take for a run whose holder is gone. */
static bool takeable(void)
{
	int fd = open(lockpath, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool free = flock(fd, LOCK_EX | LOCK_NB) == 0;
	if (free)
		(void) flock(fd, LOCK_UN);
	close(fd);
	return free;
}

START_TEST(test_never_takeable_while_made)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) < 0)
			_exit(3);
		raise(SIGSTOP);
		int fd = ws_session_lock(dir);
		_exit(fd >= 0 ? 0 : 2);
	}
	int st = 0;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFSTOPPED(st), "the locker did not stop for its tracer (status %#x)", st);
	ck_assert_int_eq(ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *) (long) (PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL)),
	                 0);
	int stops = 0, takeable_at = 0;
	for (;;) {
		ck_assert_int_eq(ptrace(PTRACE_SYSCALL, pid, NULL, NULL), 0);
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		if (WIFEXITED(st) || WIFSIGNALED(st))
			break;
		if (WIFSTOPPED(st) && WSTOPSIG(st) == (SIGTRAP | 0x80)) {
			stops++;
			if (takeable())
				takeable_at = stops;
		}
	}
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the locker failed (status %#x)", st);
	ck_assert_msg(stops > 2, "only %d system call stops were seen", stops);
	ck_assert_msg(takeable_at == 0, "the lock could be taken at system call stop %d of %d", takeable_at, stops);
	struct stat sb;
	ck_assert_int_eq(lstat(lockpath, &sb), 0);
	ck_assert(S_ISREG(sb.st_mode));
	ck_assert_int_eq(sb.st_mode & 07777, 0600);
}
END_TEST

START_TEST(test_existing_lock)
{
	int held = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	ck_assert_int_ge(held, 0);
	ck_assert_int_eq(flock(held, LOCK_EX | LOCK_NB), 0);
	/* flock conflicts between open file descriptions, even in one process */
	ck_assert_int_eq(ws_session_lock(dir), -EBUSY);
	struct stat before, after;
	ck_assert_int_eq(fstat(held, &before), 0);
	close(held);
	int fd = ws_session_lock(dir);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &after), 0);
	ck_assert_msg(after.st_ino == before.st_ino, "an existing lock was replaced, not taken");
	ck_assert(!takeable());
	close(fd);
	ck_assert(takeable());
}
END_TEST

START_TEST(test_missing_dir)
{
	char gone[128];
	snprintf(gone, sizeof(gone), "%s/none", dir);
	ck_assert_int_eq(ws_session_lock(gone), -ENOENT);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("ws_lock");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_never_takeable_while_made);
	tcase_add_test(tc, test_existing_lock);
	tcase_add_test(tc, test_missing_dir);
	return unit_run("ws_lock", tc);
}
