/* Creating the sandbox: plan, clone into new namespaces, write the id maps,
 * release the child. */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/coverage.h"
#include "base/error.h"
#include "base/fdpass.h"
#include "plan/idmap.h"
#include "sandbox/janitor.h"
#include "live/remote.h"
#include "sandbox/relay.h"
#include "sandbox/sandbox.h"
#include "base/syscalls.h"

static const char userns_hint[] =
	"unprivileged user namespaces may be disabled: check the sysctls kernel.unprivileged_userns_clone "
	"and user.max_user_namespaces, and AppArmor's kernel.apparmor_restrict_unprivileged_userns";

/* clone3 with CLONE_PIDFD, falling back to clone(2) on kernels without it.
 * exit_signal 0 keeps our child out of the embedding program's SIGCHLD and
 * waitpid(-1) handling; we wait on the pidfd with __WALL. */
/* With a cgroup v2 fd, the child is born in its cgroup (CLONE_INTO_CGROUP):
 * not a single instruction of it runs unlimited. *into reports whether that
 * happened; otherwise the caller attaches the child before releasing it. */
static pid_t clone_sandbox(uint64_t flags, int cgroup_fd, int *pidfd, bool *into)
{
	*into = false;
	if (!getenv("NSBOX_TEST_NO_CLONE3")) {
		struct clone_args ca = {
			.flags = flags | CLONE_PIDFD | (cgroup_fd >= 0 ? CLONE_INTO_CGROUP : 0),
			.pidfd = (uint64_t) (uintptr_t) pidfd,
			.exit_signal = 0,
			.cgroup = cgroup_fd >= 0 ? (uint64_t) cgroup_fd : 0,
		};
		long r = sys_clone3(&ca);
		if (r >= 0) {
			*into = cgroup_fd >= 0;
			return (pid_t) r;
		}
		if (errno != ENOSYS && errno != E2BIG)
			return (pid_t) r;
	}
	return (pid_t) syscall(SYS_clone, (unsigned long) flags | CLONE_PIDFD, NULL, pidfd, NULL, 0);
}

/* The run's cgroup, named after us so that a later run can tell it was
 * left by a supervisor that no longer exists. */
static int setup_cgroup(nsbox_sandbox *sb, nsbox_error **err)
{
	if (sb->plan->cg_host.driver == CG_NONE)
		return 0;
	char rnd[4] = { 0 };
	random_name_bytes(rnd, sizeof(rnd));
	/* The pid means something only in our pid namespace: its inode is in
	 * the name, so that a collector elsewhere leaves the cgroup alone. */
	snprintf(sb->cg_name, sizeof(sb->cg_name), "nsbox-%d-%02x%02x%02x%02x-%llx", (int) getpid(),
	         (unsigned char) rnd[0], (unsigned char) rnd[1], (unsigned char) rnd[2], (unsigned char) rnd[3],
	         (unsigned long long) cgroup_own_pidns());
	cg_host *h = &sb->plan->cg_host;
	cgroup_collect_stale(h);
	/* cgroup v1's cpuacct is kept even when mounted apart from cpu: the
	 * record's CPU time must come from it, since the rusage of pid 1 misses
	 * every process the kernel kills (and autoreaps) when a run is killed. */
	/* A long-lived sandbox can be paused: on cgroup v1 that takes a
	 * freezer cgroup of its own (v2 has cgroup.freeze). */
	sb->plan->limits.freezer = sb->plan->keep;
	int r = cgroup_create(h, sb->cg_name, &sb->plan->limits, &sb->cg, err);
	return r < 0 ? nsbox_err_prefix(err, r, "set up resource limits") : 0;
}

static void close_fds(int *fds, size_t n);

static int open_tasks_files(const cgroup *cg, int fds[CG_N], nsbox_error **err)
{
	for (int i = 0; i < CG_N; i++) {
		if (!cg->path[i])
			continue;
		bool dup = false;
		for (int j = 0; j < i; j++)
			dup |= cg->path[j] && !strcmp(cg->path[i], cg->path[j]);
		if (dup)
			continue;
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/tasks", cg->path[i]);
		fds[i] = open(path, O_WRONLY | O_CLOEXEC);
		if (fds[i] < 0) {
			int e = errno;
			close_fds(fds, CG_N);
			return nsbox_err(err, e, "cgroup", "open '%s'", path);
		}
	}
	return 0;
}

static void close_fds(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0) {
			(void) close(fds[i]);
			fds[i] = -1;
		}
}

/* What the stages of a spawn hand on: the child's ends (closed here once
 * it has them), the supervisor's end of the socket pair, and whether the
 * process was made dumpable for the length of the setup. */
typedef struct spawn_state {
	int child_stdio[3];
	int close_after[4];
	int sv[2];
	bool undumpable;
	bool in_cgroup;     /* cloned straight into its cgroup (v2) */
} spawn_state;

/* Stage 1, prepare: the plan, the workspace's state directory, the cgroup,
 * the streams, the socket pair. Nothing runs yet. */
static int spawn_prepare(nsbox_sandbox *sb, const nsbox_spawn_options *o, spawn_state *st, nsbox_error **err)
{
	int r = plan_build(o->config, &sb->plan, err);
	if (r == 0) {
		sb->plan->trace = sb->trace;
		sb->plan->keep = o->flags & NSBOX_SPAWN_KEEP;
		sb->plan->tty = o->flags & NSBOX_SPAWN_TTY;
		trace_mark(sb->trace, TR_PLAN);
	}
	/* The plan touched nothing on the host; the workspace's state is made
	 * now that a sandbox is to be. */
	r = r ?: ws_create(&sb->plan->ws, err);
	r = r ?: setup_cgroup(sb, err);
	trace_mark(sb->trace, TR_CGROUP);
	r = r ?: spawn_open_streams(sb, o->stdin_fd, o->stdout_fd, o->stderr_fd, o->flags, st->child_stdio,
	                            st->close_after, err);
	if (r == 0 && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, st->sv) < 0)
		r = nsbox_err(err, errno, "spawn", "create socketpair");
	if (r == 0)
		st->close_after[3] = st->sv[1];
	return r;
}

/* Stage 2, clone: the child in its new namespaces (child_main, which
 * waits for the go-ahead), as the user that owns root's sandboxes. */
static int spawn_clone(nsbox_sandbox *sb, spawn_state *st, nsbox_error **err)
{
	child_args args = { .plan = sb->plan, .sync_fd = st->sv[1],
	                    .stdio = { st->child_stdio[0], st->child_stdio[1], st->child_stdio[2] },
	                    .cg_tasks_fd = { -1 } };
	/* Every controller's slot (an initializer list would go stale when
	 * one is added: a 0 left there is stdin, written to and closed). */
	for (int i = 0; i < CG_N; i++)
		args.cg_tasks_fd[i] = -1;
	uint64_t flags = sb->plan->clone_flags;
	if (sb->cg && sb->cg->driver == CG_V1) {
		int r = open_tasks_files(sb->cg, args.cg_tasks_fd, err);
		if (r < 0)
			return r;
		/* The cgroup namespace is rooted where the child moves itself. */
		flags &= ~(uint64_t) CLONE_NEWCGROUP;
		args.unshare_cgroupns = true;
	}
	/* The child's /proc files are its owner's only while it is dumpable,
	 * and it inherits our flag: a non-dumpable caller (a monitor, a CLI
	 * that made itself so) is dumpable until the id maps are written and
	 * the network helper has joined, or a rootless parent could write no
	 * map. The flag is the process's; it is put back when the spawn ends. */
	st->undumpable = sb->plan->rootless && prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0;
	if (st->undumpable)
		(void) prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
	coverage_sandbox_prepare(sb->plan);
	/* Root's sandbox: its user namespace is owned by its range, not root. */
	owner_saved owner;
	int r = owner_become(sb->plan, &owner);
	if (r < 0) {
		coverage_sandbox_end();
		close_fds(args.cg_tasks_fd, CG_N);
		return nsbox_err(err, -r, "namespaces", "create namespaces: take the sandbox range's uid %u",
		                 (unsigned) sb->plan->host_setup_uid);
	}
	pid_t pid = clone_sandbox(flags, sb->cg && sb->cg->driver == CG_V2 ? sb->cg->dirfd : -1, &sb->pidfd,
	                          &st->in_cgroup);
	if (pid == 0) {
		(void) close(st->sv[0]);
		child_main(&args);
	}
	int clone_errno = errno;
	owner_restore(&owner);
	trace_mark(sb->trace, TR_CLONE);
	coverage_sandbox_end();
	close_fds(args.cg_tasks_fd, CG_N);
	if (pid < 0)
		return (clone_errno == EPERM || clone_errno == ENOSPC || clone_errno == EUSERS)
		       ? nsbox_err_hint(err, clone_errno, "namespaces", userns_hint, "create namespaces")
		       : nsbox_err(err, clone_errno, "namespaces", "create namespaces");
	sb->pid = pid;
	sb->sync_fd = TAKE_FD(st->sv[0]);
	if (sb->stats_interval_ms && !sb->cg) {
		/* Read now: once pid 1 is non-dumpable only root may. */
		char path[64];
		struct stat pst;
		snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int) pid);
		if (stat(path, &pst) == 0) {
			sb->pidns_dev = pst.st_dev;
			sb->pidns_ino = pst.st_ino;
		}
	}
	close_fds(st->close_after, ARRAY_SIZE(st->close_after));
	return 0;
}

/* Stage 3, release: the cgroup joined (v2 without CLONE_INTO_CGROUP),
 * the id maps written, the network helper started, the idmapped trees
 * made; then the go-ahead, with them. */
static int spawn_release(nsbox_sandbox *sb, const spawn_state *st, nsbox_error **err)
{
	/* cgroup v2 without CLONE_INTO_CGROUP: the child waits for MSG_GO, so
	 * joining the cgroup now still happens before it runs anything. */
	int r;
	if (sb->cg && sb->cg->driver == CG_V2 && !st->in_cgroup && (r = cgroup_attach(sb->cg, sb->pid, err)) < 0)
		return nsbox_err_prefix(err, r, "set up resource limits");
	r = idmap_write(sb->plan, sb->pid, err);
	if (r < 0)
		return nsbox_err_prefix(err, r, "set up user namespace");
	trace_mark(sb->trace, TR_IDMAP);
	/* --network user: the helper configures the sandbox's interface while
	 * the child sets up; the child waits for MSG_NET_READY before it runs
	 * the payload, which never sees a network that is not up yet. */
	if (sb->plan->net_user && (r = netuser_start(&sb->plan->netuser, sb->pid, &sb->net, err)) < 0)
		return r;
	/* Root's workspace: the lower layer idmapped into the sandbox's user
	 * namespace, which exists only now; it travels with the go-ahead. */
	int ws_fd = -1;
	if (sb->plan->ws.active && sb->plan->ws.idmap) {
		ws_fd = ws_idmapped_lower(&sb->plan->ws, sb->plan->ws.user_uid, sb->plan->ws.user_gid, err);
		if (ws_fd < 0)
			return ws_fd;
	}
	/* Root's root filesystem, idmapped likewise so that its files keep
	 * their owners inside. Where the filesystem cannot be idmapped the
	 * child clones it plainly (files then read as nobody's, as rootless). */
	int rootfs_fd = rootfs_idmapped(sb->plan, sb->pid);
	msg go = { .type = MSG_GO, .index = (ws_fd >= 0 ? GO_WORKSPACE : 0) | (rootfs_fd >= 0 ? GO_ROOTFS : 0) };
	int fds[2], nfds = 0;
	if (ws_fd >= 0)
		fds[nfds++] = ws_fd;
	if (rootfs_fd >= 0)
		fds[nfds++] = rootfs_fd;
	ssize_t sent = fd_send(sb->sync_fd, &go, sizeof(go), fds, nfds);
	int send_errno = sent < 0 ? (int) -sent : EPROTO;
	close_fds(fds, (size_t) nfds);
	if (sent != (ssize_t) sizeof(go)) {
		/* A child that failed before the go-ahead (joining its cgroups)
		 * said why before it exited: that is the error, not our EPIPE. */
		msg why;
		if (recv(sb->sync_fd, &why, sizeof(why), MSG_DONTWAIT) == (ssize_t) sizeof(why) &&
		    why.type == MSG_ERROR)
			return step_error(sb->plan, &why, err);
		return nsbox_err(err, send_errno, "spawn", "release the sandbox");
	}
	trace_mark(sb->trace, TR_GO);
	return 0;
}

/* Stage 4, finish: while the child sets up on another CPU, the janitor
 * (were we killed before it exists, the next run collects the cgroup: its
 * name carries our pid), the network helper's readiness, and a long-lived
 * sandbox's keeper saying it takes commands. */
static int spawn_finish(nsbox_sandbox *sb, nsbox_error **err)
{
	int r;
	if (sb->cg) {
		if ((r = janitor_start(&sb->plan->cg_host, sb->cg_name, &sb->jan, err)) < 0)
			return r;
		trace_mark(sb->trace, TR_JANITOR);
	}
	if (sb->plan->net_user) {
		if ((r = netuser_wait(&sb->plan->netuser, &sb->net, err)) < 0)
			return r;
		/* A child that failed its setup meanwhile is gone: what it
		 * reported is the error, found by the supervisor. */
		msg ready = { .type = MSG_NET_READY };
		(void) send(sb->sync_fd, &ready, sizeof(ready), MSG_NOSIGNAL);
	}
	if (sb->plan->keep && (r = keep_wait_ready(sb, err)) < 0)
		return r;
	return 0;
}

int nsbox_spawn(const nsbox_spawn_options *o, nsbox_sandbox **out, nsbox_error **err)
{
	if (!o || !out || !o->config || o->version < 1 || o->version > NSBOX_SPAWN_OPTIONS_VERSION ||
	    (o->flags & ~(NSBOX_SPAWN_CAPTURE | NSBOX_SPAWN_KEEP | NSBOX_SPAWN_TTY | NSBOX_SPAWN_DIRECT_FDS)) ||
	    ((o->flags & NSBOX_SPAWN_TTY) && (o->flags & (NSBOX_SPAWN_CAPTURE | NSBOX_SPAWN_KEEP | NSBOX_SPAWN_DIRECT_FDS))))
		return nsbox_err(err, EINVAL, "spawn", "start sandbox: invalid options");
	nsbox_sandbox *sb = calloc(1, sizeof(*sb));
	if (!sb)
		return nsbox_err(err, ENOMEM, "spawn", "start sandbox");
	sb->pidfd = sb->sync_fd = sb->out_fd[0] = sb->out_fd[1] = sb->notify_fd = -1;
	sb->jan = (janitor){ .pid = 0, .pidfd = -1, .wake = -1 };
	sb->net = NETUSER_INIT;
	sb->signal_fd = o->signal_fd;
	sb->stats_interval_ms = o->stats_interval_ms;
	sb->stats_fd = o->stats_interval_ms ? o->stats_fd : -1;
	sb->capture = o->flags & NSBOX_SPAWN_CAPTURE;
	/* A version 1 caller's struct ends before these fields. */
	if (o->version >= 2 && sb->capture) {
		sb->on_output = o->on_output;
		sb->output_userdata = o->output_userdata;
	}
	clock_gettime(CLOCK_MONOTONIC, &sb->start);
	sb->trace = trace_start();

	spawn_state st = { .child_stdio = { -1, -1, -1 }, .close_after = { -1, -1, -1, -1 }, .sv = { -1, -1 } };
	int r = spawn_prepare(sb, o, &st, err);
	r = r ?: spawn_clone(sb, &st, err);
	r = r ?: spawn_release(sb, &st, err);
	r = r ?: spawn_finish(sb, err);
	if (st.undumpable)
		(void) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (r < 0) {
		close_fds(st.close_after, ARRAY_SIZE(st.close_after));
		close_fds(st.sv, 2);
		nsbox_sandbox_free(sb);
		return r;
	}
	trace_mark(sb->trace, TR_SPAWNED);
	*out = sb;
	return 0;
}

int nsbox_sandbox_pidfd(const nsbox_sandbox *sb) { return sb && !sb->remote ? sb->pidfd : -EINVAL; }

const char *nsbox_sandbox_warning(const nsbox_sandbox *sb)
{
	return !sb ? NULL : sb->remote ? sb->remote->warning : sb->plan->warning;
}

const char *nsbox_sandbox_enforced_by(const nsbox_sandbox *sb)
{
	return !sb ? NULL : sb->remote ? sb->remote->enforced_by : sb->plan->enforced_by;
}

int nsbox_sandbox_kill(nsbox_sandbox *sb, int sig)
{
	if (!sb || sig <= 0 || sig >= NSIG)
		return -EINVAL;
	/* A started sandbox is stopped (SIGKILL, SIGTERM) by its monitor. */
	if (sb->remote)
		return sig == SIGKILL || sig == SIGTERM ? remote_stop(sb) : -ENOTSUP;
	/* Another thread may be reaping: the flag is read atomically, and the
	 * pidfd stays open until nsbox_sandbox_free(), so a signal sent after
	 * the reap fails with ESRCH instead of reaching a reused pid. */
	if (__atomic_load_n(&sb->reaped, __ATOMIC_ACQUIRE))
		return -ESRCH;
	/* A frozen task cannot die (cgroup v1): killing a paused sandbox, or
	 * anything in it, resumes it first. */
	nsbox_sandbox *owner = sb->exec_of ? sb->exec_of : sb;
	if (sig == SIGKILL && __atomic_load_n(&owner->paused, __ATOMIC_ACQUIRE) && owner->cg &&
	    cgroup_freeze(owner->cg, false, NULL) == 0)
		__atomic_store_n(&owner->paused, false, __ATOMIC_RELEASE);
	/* The caller's window changed: its size to the sandbox's terminal
	 * (NSBOX_SPAWN_TTY), whose foreground process group the kernel tells.
	 * Without one, pid 1 ignores it as before. */
	if (sig == SIGWINCH) {
		int w = relay_winch(sb->relay);
		if (w != -ENOTTY)
			return w;
	}
	/* SIGKILL goes to pid 1, which takes the whole pid namespace with it;
	 * other signals go to pid 1's handler, which forwards them. */
	return sys_pidfd_send_signal(sb->pidfd, sig) < 0 ? -errno : 0;
}

void nsbox_sandbox_free(nsbox_sandbox *sb)
{
	if (!sb)
		return;
	if (sb->remote) {
		remote_free(sb);
		return;
	}
	if (sb->exec_of) {
		exec_release(sb);
		return;
	}
	if (sb->pidfd >= 0 && !sb->reaped) {
		siginfo_t si;
		if (sb->paused && sb->cg)
			(void) cgroup_freeze(sb->cg, false, NULL);
		(void) sys_pidfd_send_signal(sb->pidfd, SIGKILL);
		while (waitid(P_PIDFD, (id_t) sb->pidfd, &si, WEXITED | __WALL) < 0 && errno == EINTR)
			;
	}
	(void) cgroup_destroy(sb->cg);
	janitor_finish(&sb->jan);
	netuser_stop(&sb->net);
	if (sb->plan)
		ws_finish(&sb->plan->ws);
	if (sb->proxy)
		proxy_finish(sb->proxy, NULL, NULL);
	keep_proxy_stop(sb, NULL, NULL);
	proxy_log_free(&sb->net_allowed);
	proxy_log_free(&sb->net_denied);
	int fds[] = { sb->pidfd, sb->sync_fd, sb->out_fd[0], sb->out_fd[1], sb->notify_fd };
	close_fds(fds, ARRAY_SIZE(fds));
	relay_free(sb->relay);
	for (int i = 0; i < 2; i++)
		capture_free(&sb->streams[i]);
	plan_free(sb->plan);
	for (size_t i = 0; i < sb->n_denied; i++)
		free(sb->denied[i].name);
	free(sb->denied);
	ws_changes_free(sb->changes, sb->n_changes);
	trace_finish(sb->trace);
	free(sb);
}
