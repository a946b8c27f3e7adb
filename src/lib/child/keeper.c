/* pid 1 of a long-lived sandbox (NSBOX_SPAWN_KEEP): set up like any other,
 * it runs no command of its own. Each command (exec_req, on the
 * supervisor's socket) runs in a pid namespace of its own, whose pid 1 is
 * an init like a run's (init.c): forked and forwarded to, reaped, reported
 * on the exec's own socket. When that pid 1 exits the kernel kills
 * whatever the command left, so nothing an exec started outlives it, and
 * from inside the exec that pid 1 cannot be signalled away. That pid 1 is
 * made ahead of its request: it waits for it on the supervisor's socket
 * itself, and once its payload is started the keeper makes the next one
 * (PREARM_MIN_PIDS).
 *
 * Like child.c it never allocates: it is a copy of a caller that may have
 * had other threads. The keeper keeps the setup identity's capabilities in
 * the sandbox's user namespace (it creates pid namespaces and each exec's
 * init drops them as a run's does); it is non-dumpable, reads only the
 * supervisor's socket, and runs nothing else. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "config/conf.h"
#include "base/coverage.h"
#include "base/fdpass.h"
#include "sandbox/proto.h"
#include "base/syscalls.h"

enum { FD_SOCK, FD_IN, FD_OUT, FD_ERR, FD_3, FD__MAX };

/* An exec's pid 1 made ahead holds a pid of the sandbox's limit while the
 * current exec runs: below this limit none is made, so that a tight one
 * stays the command's. */
#define PREARM_MIN_PIDS 16

/* The request being served: the keeper's own memory, copied into each
 * exec's pid 1 by the fork. */
static char req_buf[sizeof(exec_req) + EXEC_REQ_MAX + 1];
static char *req_argv[EXEC_ARGS_MAX + 1];
static char *req_envp[EXEC_ARGS_MAX + 1];
static nsbox_plan exec_plan;

static void close_all(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			(void) close(fds[i]);
}

/* Split `n` strings off *pos (bounded by end) into vec; false if they are
 * not there. */
static bool take_strings(char **pos, const char *end, uint32_t n, char **vec)
{
	for (uint32_t i = 0; i < n; i++) {
		char *s = *pos;
		char *nul = memchr(s, '\0', (size_t) (end - s));
		if (!nul)
			return false;
		vec[i] = s;
		*pos = nul + 1;
	}
	vec[n] = NULL;
	return true;
}

/* Check the request and point the exec's plan at its strings. */
static bool parse_request(const child_args *a, size_t n, int nfds)
{
	exec_req h;
	if (n < sizeof(h))
		return false;
	memcpy(&h, req_buf, sizeof(h));
	if (h.type != MSG_EXEC || h.len != n - sizeof(h) || h.argc == 0 || h.argc > EXEC_ARGS_MAX ||
	    h.envc > EXEC_ARGS_MAX || (h.flags & ~(uint32_t) (EXEC_WORKDIR | EXEC_ENV | EXEC_FD3 | EXEC_FILE | EXEC_TTY)) ||
	    nfds != ((h.flags & EXEC_FD3) ? FD__MAX : FD_3))
		return false;
	char *pos = req_buf + sizeof(h);
	const char *end = req_buf + n;
	exec_plan = *a->plan;
	exec_plan.keep = false;
	exec_plan.trace = NULL;
	exec_plan.pass_fd3 = h.flags & EXEC_FD3;
	exec_plan.file_op = h.flags & EXEC_FILE;
	exec_plan.tty = h.flags & EXEC_TTY;
	exec_plan.keeper_exec = true;
	char *wd[2];
	if (h.flags & EXEC_WORKDIR) {
		if (!take_strings(&pos, end, 1, wd) || wd[0][0] != '/')
			return false;
		exec_plan.workdir = wd[0];
	}
	if (!take_strings(&pos, end, h.argc, req_argv))
		return false;
	exec_plan.argv = req_argv;
	if (h.flags & EXEC_ENV) {
		if (!take_strings(&pos, end, h.envc, req_envp))
			return false;
		exec_plan.envp = req_envp;
		/* The command is looked up in the exec's own PATH. */
		exec_plan.path_env = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
		for (uint32_t i = 0; i < h.envc; i++)
			if (!strncmp(req_envp[i], "PATH=", 5))
				exec_plan.path_env = req_envp[i] + 5;
	}
	return pos == end;
}

/* The exec's pid 1: its pidfd to the supervisor, the command's streams on
 * 0-2 (and 3), nothing else open; then the same init as a run's. */
__attribute__((noreturn)) static void exec_init(const child_args *a, int fds[FD__MAX])
{
	int pidfd = (int) syscall(SYS_pidfd_open, getpid(), 0);
	if (pidfd < 0 || child_send_fd(fds[FD_SOCK], MSG_PIDFD, pidfd) < 0)
		_exit(125);
	(void) close(pidfd);
	/* A pid 1 made ahead keeps the keeper's pipe, out of the way too. */
	int started = -1;
	if (exec_plan.started_fd >= 0) {
		started = fcntl(exec_plan.started_fd, F_DUPFD_CLOEXEC, 64);
		if (started < 0)
			_exit(125);
		(void) close(exec_plan.started_fd);
		exec_plan.started_fd = started;
	}
	/* Out of the way of 0-3 first: a received fd may have any of those
	 * numbers. */
	int high[FD__MAX];
	for (int i = 0; i < FD__MAX; i++) {
		high[i] = fds[i] >= 0 ? fcntl(fds[i], F_DUPFD_CLOEXEC, 64) : -1;
		if (fds[i] >= 0 && high[i] < 0)
			_exit(125);
	}
	for (int i = 0; i < FD__MAX; i++)
		if (fds[i] >= 0)
			(void) close(fds[i]);
	for (int i = FD_IN; i < FD__MAX; i++)
		if (high[i] >= 0 && dup3(high[i], i - FD_IN, 0) < 0) {
			child_report(high[FD_SOCK], STEP_STDIO, i - FD_IN, errno);
			_exit(125);
		}
	int sock = high[FD_SOCK];
	unsigned keep_from = exec_plan.pass_fd3 ? 4 : 3;
	/* Everything else goes: from keep_from on, all but sock (and started).
	 * (coverage builds keep their counts' directory open: coverage.h) */
	unsigned lo = (unsigned) sock, hi = (unsigned) sock;
	if (started >= 0) {
		lo = (unsigned) (started < sock ? started : sock);
		hi = (unsigned) (started < sock ? sock : started);
	}
	if (lo > keep_from)
		(void) coverage_close_range(keep_from, lo - 1, 0);
	if (hi > lo + 1)
		(void) coverage_close_range(lo + 1, hi - 1, 0);
	(void) coverage_close_range(hi + 1, ~0U, 0);
	child_args ea = *a;
	ea.plan = &exec_plan;
	ea.sync_fd = sock;
	init_run(&ea);
}

/* Wait for a valid request on the supervisor's socket: its fds in fds[],
 * their number returned; 0 once the supervisor is gone. One we did not
 * send is refused on its own socket and the wait goes on. */
static int take_request(const child_args *a, int fds[FD__MAX])
{
	for (;;) {
		for (int i = 0; i < FD__MAX; i++)
			fds[i] = -1;
		int nfds = 0;
		/* MSG_TRUNC: the request's whole length, to refuse one longer
		 * than req_buf. More fds than FD__MAX, or a cut control message,
		 * and fd_recv closes them all: nothing left to answer on. */
		ssize_t n = fd_recv(a->sync_fd, req_buf, sizeof(req_buf), fds, FD__MAX, &nfds, MSG_TRUNC);
		if (n == -EBADMSG)
			continue;
		if (n <= 0)
			return 0;
		if ((size_t) n <= sizeof(req_buf) && nfds >= FD_3 && parse_request(a, (size_t) n, nfds))
			return nfds;
		/* Not a request we sent: refuse it on its socket. */
		if (nfds > 0)
			child_report(fds[FD_SOCK], STEP_SYNC, -1, EPROTO);
		close_all(fds, nfds);
	}
}

static pid_t clone_newpid(void)
{
	struct clone_args ca = { .flags = CLONE_NEWPID, .exit_signal = SIGCHLD };
	pid_t pid = (pid_t) sys_clone3(&ca);
	if (pid < 0 && errno == ENOSYS)
		pid = (pid_t) syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, 0, NULL, NULL, 0);
	return pid;
}

/* An exec's pid 1 made before its request: it waits for one on the
 * supervisor's socket (the keeper does not read it meanwhile) and goes on
 * as exec_init, whose init_run writes a byte on the pipe once the payload
 * is started. The pipe's read end is returned, or -1. */
static int arm(const child_args *a)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = clone_newpid();
	if (pid == 0) {
		close(p[0]);
		int fds[FD__MAX];
		if (take_request(a, fds) == 0)
			_exit(0);
		/* Signals sent to the process group while we waited (a
		 * terminal's ^C, an interrupt meant for the embedding program)
		 * are pending here, blocked: they are not this command's. */
		init_drop_forwarded();
		/* The keeper makes the next pid 1 once our payload is started
		 * (init_run), so that it never takes the payload's last pid. */
		exec_plan.started_fd = p[1];
		exec_init(a, fds);
	}
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		return -1;
	}
	return p[0];
}

__attribute__((noreturn)) void keeper_run(const child_args *a)
{
	sigset_t all;
	sigfillset(&all);
	(void) sigprocmask(SIG_SETMASK, &all, NULL);
	/* Every disposition the embedding program left us back to SIG_DFL,
	 * once: each exec's payload then resets only its init's own. */
	init_default_signals(false);
	/* Each exec's pid 1 is reaped by the kernel once it exits: the
	 * supervisor learns of it through its pidfd. */
	struct sigaction ign = { .sa_handler = SIG_IGN };
	/* The forwarding handlers now, inherited by each exec's init: a signal
	 * sent to it before it installs them itself would otherwise be dropped
	 * by the kernel (SIG_DFL at a namespace's init); with them it stays
	 * pending (blocked) until the init knows its payload. */
	if (sigaction(SIGCHLD, &ign, NULL) < 0 || init_forwarders() < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
		child_report(a->sync_fd, STEP_SIGNALS, -1, errno);
		_exit(125);
	}
	/* The bounding set now, once: the keeper never execs, and each exec's
	 * init and payload skip the drop (keeper_exec). Its effective
	 * capabilities (pid namespaces) are unaffected. */
	int r = caps_drop_bounding(a->plan->cap_last);
	if (r < 0) {
		child_report(a->sync_fd, STEP_CAPS, -1, -r);
		_exit(125);
	}
	msg ready = { .type = MSG_READY };
	if (send(a->sync_fd, &ready, sizeof(ready), MSG_NOSIGNAL) != (ssize_t) sizeof(ready))
		_exit(125);
	bool prearm = !a->plan->cfg || a->plan->cfg->pids >= PREARM_MIN_PIDS;
	for (;;) {
		/* The next exec's pid 1, made ahead: its clone (a copy of our
		 * memory, which is the embedding program's) is then not on the
		 * exec's path. It takes the next request itself and tells us
		 * once its payload is started, and we make the one after. */
		int took = prearm ? arm(a) : -1;
		if (took >= 0) {
			char c;
			ssize_t n;
			do
				n = read(took, &c, 1);
			while (n < 0 && errno == EINTR);
			close(took);
			if (n == 1)
				continue;
			/* It ended without a request: because the supervisor
			 * is gone (so is the sandbox), or killed. */
			if (recv(a->sync_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
				_exit(0);
		}
		/* No armed init (its clone failed: a pids limit, memory): serve
		 * one request here, whose socket hears why if the clone fails
		 * again. */
		int fds[FD__MAX];
		int nfds = take_request(a, fds);
		if (nfds == 0)
			_exit(0);   /* the supervisor is gone: so is the sandbox */
		pid_t pid = clone_newpid();
		if (pid == 0)
			exec_init(a, fds);
		if (pid < 0)
			child_report(fds[FD_SOCK], STEP_FORK, -1, errno);
		close_all(fds, nfds);
	}
}
