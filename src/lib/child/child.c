/* The cloned child: pid 1 of the new namespaces. It walks the plan with
 * plain system calls (no allocation, no stdio: the library may be embedded in
 * a threaded program, whose locks a forked child must never take), reports a
 * failed step as {step, errno} and exits. */
#include <errno.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <netinet/in.h>

#include "base/coverage.h"
#include "base/fdpass.h"
#include "sandbox/proto.h"
#include "net/proxy.h"
#include "base/syscalls.h"
#include "child/fileop.h"

static int proxy_listen(int sync_fd);

/* A message of `type` to the supervisor, carrying `fd` (SCM_RIGHTS). */
int child_send_fd(int sync_fd, enum msg_type type, int fd)
{
	msg m = { .type = type };
	ssize_t n = fd_send(sync_fd, &m, sizeof(m), &fd, 1);
	return n < 0 ? (int) n : 0;
}

void child_report(int sync_fd, enum step step, int index, int err)
{
	msg m = { .type = MSG_ERROR, .step = step, .index = index, .err = err };
	(void) send(sync_fd, &m, sizeof(m), MSG_NOSIGNAL);
}

void child_arm_parent_death(const child_args *a)
{
	/* Every credential change clears the parent-death signal: set it
	 * again, then make sure the supervisor did not die in between (our
	 * parent is outside the pid namespace, so getppid() cannot tell; the
	 * socket can). */
	struct pollfd pfd = { .fd = a->sync_fd, .events = POLLIN };
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 ||
	    (poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLHUP | POLLERR))))
		_exit(125);
}

__attribute__((noreturn)) static void fail(const child_args *a, enum step step, int index, int err)
{
	coverage_sandbox_dump();   /* first: the report may get us killed */
	child_report(a->sync_fd, step, index, err < 0 ? -err : err);
	_exit(125);
}

/* A message of `type` from the supervisor; anything else (EOF: it is gone,
 * or gave up on the sandbox) ends us. */
static void wait_msg(const child_args *a, enum msg_type type)
{
	msg m;
	ssize_t n;
	do
		n = recv(a->sync_fd, &m, sizeof(m), 0);
	while (n < 0 && errno == EINTR);
	if (n != sizeof(m) || m.type != type)
		_exit(125);
}

/* The go-ahead, and the trees it may carry (root's idmapped workspace and
 * root filesystem): *ws and *rootfs, or -1. */
static void wait_go(const child_args *a, int *ws, int *rootfs)
{
	msg m;
	int fds[2] = { -1, -1 }, got = 0;
	/* More than two fds, or a cut control message: -EBADMSG, closed. */
	ssize_t n = fd_recv(a->sync_fd, &m, sizeof(m), fds, 2, &got, 0);
	/* EOF: the supervisor is gone (or failed to write the id maps). */
	if (n != sizeof(m) || m.type != MSG_GO)
		_exit(125);
	int want = !!(m.index & GO_WORKSPACE) + !!(m.index & GO_ROOTFS);
	if (got != want)
		_exit(125);
	*ws = m.index & GO_WORKSPACE ? fds[0] : -1;
	*rootfs = m.index & GO_ROOTFS ? fds[want - 1] : -1;
}

static void setup_stdio(const child_args *a)
{
	for (int i = 0; i < 3; i++)
		if (a->stdio[i] != i && dup3(a->stdio[i], i, 0) < 0)
			fail(a, STEP_STDIO, i, errno);
}

/* pid 1 is a copy of the caller, so its command line (visible to the
 * payload in /proc/1/cmdline) would show host paths and arguments. Find the
 * argument area through /proc/self/stat (fields 48 and 49) and overwrite it;
 * it is our private copy of the caller's memory. */
static void hide_cmdline(void)
{
	static const char title[] = "nsbox-init";
	char stat[1024];
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, stat, sizeof(stat) - 1);
	close(fd);
	if (n <= 0)
		return;
	stat[n] = '\0';
	char *p = strrchr(stat, ')');
	unsigned long start = 0, end = 0;
	/* After ')' comes field 3; walk to fields 48 and 49. */
	for (int field = 2; p && *p && field < 49;) {
		p = strchr(p, ' ');
		if (!p)
			return;
		p++;
		field++;
		if (field == 48 || field == 49) {
			unsigned long v = 0;
			while (*p >= '0' && *p <= '9')
				v = v * 10 + (unsigned long) (*p++ - '0');
			*(field == 48 ? &start : &end) = v;
		}
	}
	if (!start || end <= start + sizeof(title))
		return;
	memset((void *) start, 0, end - start);
	memcpy((void *) start, title, sizeof(title));
	(void) prctl(PR_SET_NAME, title, 0, 0, 0);
}

__attribute__((noreturn)) void child_main(const child_args *a)
{
	const nsbox_plan *p = a->plan;
	int idx, r;

	coverage_sandbox_start();
	trace_mark(p->trace, TR_C_START);
	/* Into the run's cgroups before anything else (cgroup v1). */
	for (int i = 0; i < CG_N; i++)
		if (a->cg_tasks_fd[i] >= 0 && write(a->cg_tasks_fd[i], "0", 1) != 1)
			fail(a, STEP_CGROUP, -1, errno);
	if (a->unshare_cgroupns && unshare(CLONE_NEWCGROUP) < 0)
		fail(a, STEP_CGROUP, -1, errno);
	/* If the supervisor dies, so does pid 1, and with it the namespace. */
	child_arm_parent_death(a);
	trace_mark(p->trace, TR_C_CGROUP);
	int ws_fd, rootfs_fd;
	wait_go(a, &ws_fd, &rootfs_fd);
	trace_mark(p->trace, TR_C_GO);
	hide_cmdline();
	setup_stdio(a);

	/* Sources are reopened with the caller's credentials (host root can
	 * traverse its own 0700 directories; the mapped ids cannot). */
	r = mounts_open_sources(p, &idx);
	if (r < 0)
		fail(a, idx >= 0 ? STEP_MOUNT_OP : STEP_ROOT, idx, r);
	trace_mark(p->trace, TR_C_SOURCES);

	/* Become the namespace's setup identity: files created on our tmpfs
	 * mounts need an fsuid that is mapped in this user namespace. */
	if (p->may_setgroups && sys_setgroups0() < 0)
		fail(a, STEP_SETUP_IDS, -1, errno);
	if (sys_setresgid(p->setup_gid, p->setup_gid, p->setup_gid) < 0 ||
	    sys_setresuid(p->setup_uid, p->setup_uid, p->setup_uid) < 0)
		fail(a, STEP_SETUP_IDS, -1, errno);
	child_arm_parent_death(a);

	if (sethostname(p->hostname, strlen(p->hostname)) < 0)
		fail(a, STEP_HOSTNAME, -1, errno);
	/* The namespace's own inotify, fanotify and namespace counts, while
	 * we hold CAP_SYS_RESOURCE in it and before the payload exists. */
	r = ucounts_apply(p, &idx);
	if (r < 0)
		fail(a, STEP_UCOUNTS, idx, r);
	trace_mark(p->trace, TR_C_IDS);

	int root = mounts_build_root(p, rootfs_fd, &idx);
	if (root < 0)
		fail(a, idx >= 0 ? STEP_MOUNT_OP : STEP_ROOT, idx, root);
	trace_mark(p->trace, TR_C_ROOT);
	mounts_set_workspace_fd(ws_fd);
	r = mounts_apply(p, &root, &idx);
	if (r < 0)
		fail(a, STEP_MOUNT_OP, idx, r);
	trace_mark(p->trace, TR_C_MOUNTS);
	r = mounts_pivot(root);
	if (r < 0)
		fail(a, STEP_PIVOT_ROOT, -1, r);
	close(root);
	trace_mark(p->trace, TR_C_PIVOT);

	if (p->net_none || p->net_user) {
		r = net_loopback_up(p);
		if (r < 0)
			fail(a, STEP_LOOPBACK, -1, r);
	}
	if (p->proxy) {
		r = proxy_listen(a->sync_fd);
		if (r < 0)
			fail(a, STEP_PROXY, -1, r);
	}

	/* --network user: the helper has been configuring the interface
	 * meanwhile; the payload starts only once it is up. */
	if (p->net_user)
		wait_msg(a, MSG_NET_READY);
	trace_mark(p->trace, TR_C_NET);

	/* Nothing opened before pivot_root may reach the payload: close every
	 * fd but the standard streams and the supervisor's socket. */
	if (a->sync_fd > 3)
		(void) coverage_close_range(3, (unsigned) a->sync_fd - 1, 0);
	(void) coverage_close_range((unsigned) a->sync_fd + 1, ~0U, 0);
	trace_mark(p->trace, TR_C_INIT);
	if (p->keep)
		keeper_run(a);
	init_run(a);
}

/* --allow-host: a socket listening on 127.0.0.1:PROXY_PORT in the sandbox's
 * network namespace, handed to the supervisor, which accepts on it from
 * outside: the sandbox reaches the proxy with no route anywhere else. */
static int proxy_listen(int sync_fd)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(PROXY_PORT),
	                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int r = 0;
	if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(fd, 128) < 0)
		r = -errno;
	if (r == 0)
		r = child_send_fd(sync_fd, MSG_PROXY_SOCKET, fd);
	close(fd);
	return r;
}

/* execvpe() searches the caller's PATH, not the sandbox's: do it here. */
static int exec_search(const nsbox_plan *p)
{
	const char *file = p->argv[0];
	if (strchr(file, '/')) {
		execve(file, p->argv, p->envp);
		return errno;
	}
	size_t flen = strlen(file);
	bool eacces = false;
	char full[PATH_MAX];
	for (const char *dir = p->path_env; dir;) {
		const char *end = strchrnul(dir, ':');
		size_t dlen = (size_t) (end - dir);
		if (dlen + flen + 2 <= sizeof(full)) {
			memcpy(full, dir, dlen);
			size_t off = dlen;
			if (dlen == 0)
				full[off++] = '.';
			full[off++] = '/';
			memcpy(full + off, file, flen + 1);
			execve(full, p->argv, p->envp);
			switch (errno) {
			case EACCES:
				eacces = true;
				break;
			case ENOENT: case ENOTDIR: case ESTALE: case ENODEV: case ETIMEDOUT:
				break;
			default:
				return errno;
			}
		}
		dir = *end ? end + 1 : NULL;
	}
	return eacces ? EACCES : ENOENT;
}

__attribute__((noreturn)) void payload_exec(const child_args *a)
{
	const nsbox_plan *p = a->plan;
	trace_mark(p->trace, TR_P_START);
	sigset_t none;
	sigemptyset(&none);
	init_default_signals(p->keeper_exec);
	(void) sigprocmask(SIG_SETMASK, &none, NULL);

	/* A new session: the payload has no controlling terminal, so it
	 * cannot push input into the caller's terminal (TIOCSTI). */
	if (setsid() < 0)
		fail(a, STEP_SETSID, -1, errno);
	/* NSBOX_SPAWN_TTY: a terminal of the sandbox's own (relay.c), its
	 * controlling one, so that ^C there is the payload's SIGINT. */
	if (p->tty && ioctl(0, TIOCSCTTY, 0) < 0)
		fail(a, STEP_TTY, -1, errno);
	int r = p->keeper_exec ? 0 : caps_drop_bounding_except(p->cap_last, p->keep_caps);
	if (r < 0)
		fail(a, STEP_CAPS, -1, r);
	if (p->may_setgroups && sys_setgroups0() < 0)
		fail(a, STEP_SETGROUPS, -1, errno);
	if (sys_setresgid(p->gid, p->gid, p->gid) < 0)
		fail(a, STEP_SETGID, -1, errno);
	if (sys_setresuid(p->uid, p->uid, p->uid) < 0)
		fail(a, STEP_SETUID, -1, errno);
	r = caps_set(p->keep_caps);
	if (r < 0)
		fail(a, STEP_CAPS, -1, r);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		fail(a, STEP_NO_NEW_PRIVS, -1, errno);
	trace_mark(p->trace, TR_P_CREDS);
	if (chdir(p->workdir) < 0)
		fail(a, STEP_CHDIR, -1, errno);
	enum step failed;
	r = limits_apply(p, &failed);
	if (r < 0)
		fail(a, failed, -1, r);
	trace_mark(p->trace, TR_P_LIMITS);
	/* Everything above 2 closes at exec, including the socket to the
	 * supervisor, which stays open until then to report an exec failure;
	 * an exec given an fd 3 (a code context's channel) keeps that one. */
	if (sys_close_range(p->pass_fd3 ? 4 : 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		fail(a, STEP_CLOSE_FDS, -1, errno);
	/* The filter goes last: capabilities are gone and no_new_privs is set,
	 * and nothing but execve (and reporting its failure) follows. */
	int listener = -1;
	r = ws_nosuid_install(&p->ws);
	if (r < 0)
		fail(a, STEP_SECCOMP, -1, r);
	r = sc_install(&p->seccomp, &listener);
	if (r < 0)
		fail(a, STEP_SECCOMP, -1, r);
	if (listener >= 0) {
		/* --seccomp-log: hand the listener to the supervisor, which
		 * answers (refuses) and counts each denied call. */
		r = child_send_fd(a->sync_fd, MSG_LISTENER, listener);
		if (r < 0)
			fail(a, STEP_SECCOMP, -1, r);
		close(listener);
	}
	trace_mark(p->trace, TR_P_EXEC);
	/* The files API: the operation instead of a program, set up exactly
	 * as a program would be (credentials, filter, working directory). */
	if (p->file_op) {
		int status = fileop_run(p->argv);
		coverage_fileop_dump();
		_exit(status);
	}
	int e = exec_search(p);
	child_report(a->sync_fd, STEP_EXEC, -1, e);
	_exit(e == ENOENT ? 127 : 126);
}
