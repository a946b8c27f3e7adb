/* pid 1 inside the sandbox: forks the payload, reaps every orphan, forwards
 * the supervisor's signals to the payload's process group, and reports the
 * payload's wait status. When it exits the kernel kills whatever is left in
 * the pid namespace, so daemons cannot outlive the payload. */
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/coverage.h"
#include "sandbox/proto.h"
#include "base/syscalls.h"

static volatile sig_atomic_t payload_pid;

/* The payload's stack from its birth to its exec (see below): pid 1's own
 * copy of this library's memory, untouched by anyone else. */
static char payload_stack[64 * 1024] __attribute__((aligned(64)));

static int payload_main(void *arg)
{
	payload_exec(arg);
}

/* AddressSanitizer cannot follow a process onto another stack (it warns, on
 * the payload's stderr): sanitizer builds give the payload a copy of our
 * memory instead, as a plain fork would. */
#if defined(__SANITIZE_ADDRESS__)
#define PAYLOAD_SHARES_MEMORY 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PAYLOAD_SHARES_MEMORY 0
#endif
#endif
#ifndef PAYLOAD_SHARES_MEMORY
#define PAYLOAD_SHARES_MEMORY 1
#endif

static pid_t start_payload(const child_args *a)
{
	/* A files API operation never execs: in a vfork pid 1 would wait for
	 * it to end, and with pid 1 the keeper, which makes the next exec's
	 * pid 1 only once this payload is started. A copy of our memory. */
	if (a->plan->file_op) {
		struct clone_args ca = { .exit_signal = SIGCHLD };
		pid_t pid = (pid_t) sys_clone3(&ca);
		if (pid < 0 && errno == ENOSYS)
			pid = (pid_t) syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);
		if (pid == 0) {
			coverage_fileop_start();
			payload_exec(a);
		}
		return pid;
	}
	if (PAYLOAD_SHARES_MEMORY)
		return clone(payload_main, payload_stack + sizeof(payload_stack),
		             CLONE_VM | CLONE_VFORK | SIGCHLD, (void *) a);
	/* Still CLONE_VFORK: pid 1 takes the payload's ids below, and a signal
	 * it forwards to a payload that has not yet exec'd (whose ids are not
	 * yet its own) would fail with EPERM and be lost. */
	struct clone_args ca = { .flags = CLONE_VFORK, .exit_signal = SIGCHLD };
	pid_t pid = (pid_t) sys_clone3(&ca);
	if (pid < 0 && errno == ENOSYS)
		pid = (pid_t) syscall(SYS_clone, CLONE_VFORK | SIGCHLD, 0, NULL, NULL, 0);
	if (pid == 0)
		payload_exec(a);
	return pid;
}

static const int forwarded[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT };

static void forward(int sig)
{
	int saved = errno;
	/* The payload leads its own process group once it has called setsid();
	 * before that, signal the process itself. */
	if (payload_pid > 0 && kill(-payload_pid, sig) < 0 && errno == ESRCH)
		(void) kill(payload_pid, sig);
	errno = saved;
}

void init_default_signals(bool few)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	if (few) {
		for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
			(void) sigaction(forwarded[i], &dfl, NULL);
		(void) sigaction(SIGCHLD, &dfl, NULL);
		return;
	}
	for (int s = 1; s < NSIG; s++)
		if (sigaction(s, &dfl, NULL) < 0 && errno == EINVAL && s != SIGKILL && s != SIGSTOP) {
			/* glibc refuses its own signals (32 and 33), and an
			 * ignored one stays ignored across execve: the kernel's
			 * call, with its struct (handler, flags, restorer, mask). */
			struct { void *handler; unsigned long flags; void *restorer; uint64_t mask; } k = { 0 };
			k.handler = SIG_DFL;
			(void) syscall(SYS_rt_sigaction, s, &k, NULL, sizeof(k.mask));
		}
}

void init_drop_forwarded(void)
{
	sigset_t set;
	sigemptyset(&set);
	for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		sigaddset(&set, forwarded[i]);
	struct timespec now = { 0, 0 };
	while (sigtimedwait(&set, NULL, &now) > 0)
		;
}

int init_forwarders(void)
{
	struct sigaction sa = { .sa_handler = forward, .sa_flags = SA_RESTART };
	sigfillset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		if (sigaction(forwarded[i], &sa, NULL) < 0)
			return -errno;
	return 0;
}

__attribute__((noreturn)) void init_run(const child_args *a)
{
	sigset_t all, none;
	sigfillset(&all);
	sigemptyset(&none);
	/* pid 1 ignores every signal it has no handler for, so forwarding
	 * needs real handlers; block them until the payload's pid is known. */
	(void) sigprocmask(SIG_SETMASK, &all, NULL);
	/* An embedding program may ignore SIGCHLD (Python, many servers), and
	 * that disposition is inherited: with it, children are reaped by the
	 * kernel and waitpid() could never report the payload. */
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	(void) sigaction(SIGCHLD, &dfl, NULL);
	int r = init_forwarders();
	if (r < 0) {
		child_report(a->sync_fd, STEP_SIGNALS, -1, -r);
		_exit(125);
	}

	/* The payload's process shares our memory until its exec, like
	 * posix_spawn's (CLONE_VM | CLONE_VFORK): no copy of the page tables to
	 * make, none to tear down at its exec, and no copy-on-write faults on
	 * either side; we sleep meanwhile, so nothing it writes (its stack,
	 * errno) is in our way. Every signal is blocked (above) until it has
	 * reset their dispositions, so no handler of ours runs in it. Not
	 * glibc's fork(), which takes malloc's locks that another thread of an
	 * embedding program may have held when we were cloned. */
	pid_t pid = start_payload(a);
	if (pid < 0) {
		child_report(a->sync_fd, STEP_FORK, -1, errno);
		_exit(125);
	}
	payload_pid = pid;
	trace_mark(a->plan->trace, TR_C_FORKED);
	if (a->plan->started_fd >= 0) {
		(void) !write(a->plan->started_fd, "", 1);
		(void) close(a->plan->started_fd);
	}

	/* pid 1 needs no privilege from here on. It takes the payload's ids,
	 * so it may still signal the payload's processes without CAP_KILL;
	 * being non-dumpable, it cannot be ptraced by them. */
	const nsbox_plan *p = a->plan;
	(void) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if ((!p->keeper_exec && caps_drop_bounding(p->cap_last) < 0) || (p->may_setgroups && sys_setgroups0() < 0) ||
	    sys_setresgid(p->gid, p->gid, p->gid) < 0 || sys_setresuid(p->uid, p->uid, p->uid) < 0 ||
	    caps_clear() < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		child_report(a->sync_fd, STEP_CAPS, -1, errno);
		(void) kill(pid, SIGKILL);
		_exit(125);
	}
	child_arm_parent_death(a);
	(void) sigprocmask(SIG_SETMASK, &none, NULL);

	for (;;) {
		int status;
		pid_t w = waitpid(-1, &status, 0);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			_exit(125);   /* ECHILD cannot happen before the payload is reaped */
		}
		if (w == pid) {
			trace_mark(a->plan->trace, TR_C_REAPED);
			msg m = { .type = MSG_EXIT, .status = status };
			struct rusage ru;
			if (getrusage(RUSAGE_CHILDREN, &ru) == 0) {
				m.utime_us = (int64_t) ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec;
				m.stime_us = (int64_t) ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec;
				m.maxrss_kb = ru.ru_maxrss;
			}
			/* Before the report: once it is read, we may be killed. */
			coverage_sandbox_dump();
			(void) send(a->sync_fd, &m, sizeof(m), MSG_NOSIGNAL);
			_exit(0);
		}
	}
}
