/* Long-lived sandboxes, host side: waiting for the keeper to be ready, and
 * nsbox_sandbox_exec(), which hands one command to the keeper (keeper.c)
 * and returns a sandbox handle for it that nsbox_sandbox_wait(),
 * nsbox_sandbox_kill() and nsbox_sandbox_free() serve like a run's. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "config/conf.h"
#include "base/error.h"
#include "base/fdpass.h"
#include "live/remote.h"
#include "sandbox/relay.h"
#include "sandbox/sandbox.h"
#include "base/strv.h"
#include "base/syscalls.h"

struct exec_own {
	strv argv;
	strv envp;            /* with env: the exec's own environment */
	bool env;             /* false: the sandbox's */
	char *workdir;        /* NULL: the sandbox's */
	nsbox_config *cfg;    /* the sandbox's, with this command: for the record */
};

static int strv_from(strv *dst, const char *const *v)
{
	for (; v && *v; v++) {
		int r = strv_push(dst, *v);
		if (r < 0)
			return r;
	}
	return 0;
}

/* NSBOX_EXEC_ENV_ADD: each entry must be NAME=VALUE with a name. */
static bool env_entries_ok(const char *const *v)
{
	for (; v && *v; v++) {
		const char *eq = strchr(*v, '=');
		if (!eq || eq == *v)
			return false;
	}
	return true;
}

/* The sandbox's environment with `add` set over it, as run's -e is. */
static int env_merge(strv *dst, char *const *base, const char *const *add)
{
	int r = strv_from(dst, (const char *const *) base);
	for (; r == 0 && add && *add; add++)
		r = strv_set_env_take(dst, strdup(*add));
	return r;
}

int keep_wait_ready(nsbox_sandbox *sb, nsbox_error **err)
{
	unsigned char raw[16] = { 0 };
	random_name_bytes(raw, sizeof(raw));
	for (int i = 0; i < 16; i++)
		snprintf(sb->keep_id + 2 * i, 3, "%02x", raw[i]);
	for (;;) {
		struct pollfd pfd[2] = { { .fd = sb->sync_fd, .events = POLLIN }, { .fd = sb->pidfd, .events = POLLIN } };
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return nsbox_err(err, errno, "spawn", "wait for the sandbox");
		}
		msg m;
		int fd = -1, nfds = 0;
		if ((pfd[0].revents & POLLIN) &&
		    fd_recv(sb->sync_fd, &m, sizeof(m), &fd, 1, &nfds, MSG_DONTWAIT) == (ssize_t) sizeof(m)) {
			if (m.type == MSG_PROXY_SOCKET && nfds == 1 && sb->plan->proxy && !sb->keep_proxy) {
				/* --allow-host: its socket, made inside; served from now on. */
				int r = keep_proxy_start(sb, TAKE_FD(fd));
				if (r < 0)
					return nsbox_err(err, -r, "spawn", "serve the sandbox's allowlist proxy");
			}
			if (fd >= 0)
				close(fd);
			if (m.type == MSG_READY)
				return sb->plan->proxy && !sb->keep_proxy
				       ? nsbox_err(err, EPROTO, "spawn", "set up the sandbox: its allowlist proxy's socket "
				                   "never came")
				       : 0;
			if (m.type == MSG_ERROR)
				return step_error(sb->plan, &m, err);
			continue;
		}
		if ((pfd[0].revents & (POLLHUP | POLLERR)) || pfd[1].revents)
			return nsbox_err(err, ESRCH, "setup", "set up the sandbox: pid 1 ended before it was ready");
	}
}

/* The request: header, then the strings, in one buffer. */
static int build_request(const struct exec_own *own, uint32_t flags, char **out, size_t *out_len,
                         nsbox_error **err)
{
	exec_req h = { .type = MSG_EXEC, .flags = flags };
	size_t len = own->workdir ? strlen(own->workdir) + 1 : 0;
	for (char **a = own->argv.v; *a; a++, h.argc++)
		len += strlen(*a) + 1;
	for (char **e = own->envp.v; e && *e; e++, h.envc++)
		len += strlen(*e) + 1;
	if (len > EXEC_REQ_MAX || h.argc > EXEC_ARGS_MAX || h.envc > EXEC_ARGS_MAX)
		return nsbox_err(err, E2BIG, "exec", "run in sandbox: the command line and environment exceed %u bytes "
		                 "or %u strings", (unsigned) EXEC_REQ_MAX, (unsigned) EXEC_ARGS_MAX);
	h.len = (uint32_t) len;
	char *b = malloc(sizeof(h) + len);
	if (!b)
		return nsbox_err(err, ENOMEM, "exec", "run in sandbox");
	memcpy(b, &h, sizeof(h));
	char *pos = b + sizeof(h);
	if (own->workdir)
		pos = stpcpy(pos, own->workdir) + 1;
	for (char **a = own->argv.v; *a; a++)
		pos = stpcpy(pos, *a) + 1;
	for (char **e = own->envp.v; e && *e; e++)
		pos = stpcpy(pos, *e) + 1;
	*out = b;
	*out_len = sizeof(h) + len;
	return 0;
}

/* The exec's pid 1 sends its pidfd first, or the keeper its error. */
static int recv_pidfd(nsbox_sandbox *e, nsbox_error **err)
{
	for (;;) {
		msg m;
		int fd = -1, nfds = 0;
		ssize_t n = fd_recv(e->sync_fd, &m, sizeof(m), &fd, 1, &nfds, 0);
		/* More than the one fd, or a cut control message: fd_recv
		 * closed them all; not a message our pid 1 sends. */
		if (n == -EBADMSG)
			return nsbox_err(err, EPROTO, "exec", "run in sandbox: a malformed answer from the sandbox");
		if (nfds == 0)
			fd = -1;
		if (n == (ssize_t) sizeof(m) && m.type == MSG_PIDFD && fd >= 0) {
			e->pidfd = fd;
			return 0;
		}
		if (fd >= 0)
			close(fd);
		if (n == (ssize_t) sizeof(m) && m.type == MSG_ERROR)
			return step_error(e->plan, &m, err);
		if (n <= 0)
			return nsbox_err(err, ESRCH, "exec", "run in sandbox: the sandbox has ended");
	}
}

static int exec_start(nsbox_sandbox *sb, const nsbox_exec_options *o, uint32_t req_flags, nsbox_sandbox **out,
                      nsbox_error **err);

int nsbox_sandbox_exec(nsbox_sandbox *sb, const nsbox_exec_options *o, nsbox_sandbox **out, nsbox_error **err)
{
	if (sb && sb->remote)
		return nsbox_err_invalid(err, "exec", "an exec in started sandbox '%s' goes through nsbox_run()",
		                         sb->remote->name);
	return exec_start(sb, o, 0, out, err);
}

int sandbox_exec_file(nsbox_sandbox *sb, const char *const *argv, int stdin_fd, int stdout_fd, nsbox_sandbox **out,
                      nsbox_error **err)
{
	/* Never the caller's own fd 1 or 2 (what -1 means for a command). */
	int null = stdout_fd < 0 ? open("/dev/null", O_WRONLY | O_CLOEXEC) : -1;
	if (stdout_fd < 0 && null < 0)
		return nsbox_err(err, errno, "files", "open '/dev/null'");
	/* The channel is ours, read while the operation runs, nobody waiting:
	 * handed in as it is (a socket, never a terminal). */
	nsbox_exec_options o = { .version = NSBOX_EXEC_OPTIONS_VERSION, .flags = NSBOX_SPAWN_DIRECT_FDS,
	                         .argv = argv, .stdin_fd = stdin_fd,
	                         .stdout_fd = stdout_fd >= 0 ? stdout_fd : null,
	                         .stderr_fd = stdout_fd >= 0 ? stdout_fd : null, .fd3 = -1, .signal_fd = -1 };
	int r = exec_start(sb, &o, EXEC_FILE, out, err);
	if (null >= 0)
		close(null);
	return r;
}

static int exec_start(nsbox_sandbox *sb, const nsbox_exec_options *o, uint32_t req_flags, nsbox_sandbox **out,
                      nsbox_error **err)
{
	if (!sb || !o || !out || o->version != NSBOX_EXEC_OPTIONS_VERSION || !o->argv || !o->argv[0] ||
	    (o->flags & ~(NSBOX_SPAWN_CAPTURE | NSBOX_EXEC_ENV_ADD | NSBOX_SPAWN_TTY | NSBOX_SPAWN_DIRECT_FDS)) ||
	    ((o->flags & NSBOX_SPAWN_TTY) && (o->flags & (NSBOX_SPAWN_CAPTURE | NSBOX_SPAWN_DIRECT_FDS))) ||
	    (o->workdir && o->workdir[0] != '/') ||
	    ((o->flags & NSBOX_EXEC_ENV_ADD) && !env_entries_ok(o->envp)))
		return nsbox_err(err, EINVAL, "exec", "run in sandbox: invalid options");
	if (!sb->plan || !sb->plan->keep || sb->exec_of)
		return nsbox_err(err, EINVAL, "exec", "run in sandbox: not a long-lived sandbox (NSBOX_SPAWN_KEEP)");
	if (__atomic_load_n(&sb->reaped, __ATOMIC_ACQUIRE))
		return nsbox_err(err, ESRCH, "exec", "run in sandbox: the sandbox has ended");
	if (__atomic_load_n(&sb->paused, __ATOMIC_ACQUIRE))
		return nsbox_err_hint(err, EAGAIN, "exec", "resume it first (nsbox resume NAME, live.resume())",
		                      "run in sandbox: the sandbox is paused");

	nsbox_sandbox *e = calloc(1, sizeof(*e));
	struct exec_own *own = calloc(1, sizeof(*own));
	nsbox_plan *plan = malloc(sizeof(*plan));
	if (!e || !own || !plan) {
		free(e);
		free(own);
		free(plan);
		return nsbox_err(err, ENOMEM, "exec", "run in sandbox");
	}
	*plan = *sb->plan;
	e->plan = plan;
	e->exec_own = own;
	e->exec_of = sb;
	e->exec_cg = sb->cg;
	e->pidfd = e->sync_fd = e->out_fd[0] = e->out_fd[1] = e->notify_fd = e->stats_fd = -1;
	e->jan = (janitor){ .pid = 0, .pidfd = -1, .wake = -1 };
	e->net = NETUSER_INIT;
	e->signal_fd = o->signal_fd;
	e->capture = o->flags & NSBOX_SPAWN_CAPTURE;
	if (e->capture) {
		e->on_output = o->on_output;
		e->output_userdata = o->output_userdata;
	}
	/* What the sandbox's proxy has counted so far: the exec's record
	 * names what it counts from now on. */
	keep_proxy_logs(sb, &e->net_base_allowed, &e->net_base_denied);
	plan->keep = false;
	plan->trace = NULL;
	plan->cfg = NULL;
	plan->timeout_ms = o->timeout_ms == NSBOX_TIMEOUT_NONE ? 0 : o->timeout_ms ? o->timeout_ms : sb->plan->timeout_ms;

	int stdio[3] = { -1, -1, -1 }, close_after[4] = { -1, -1, -1, -1 }, sv[2] = { -1, -1 };
	_cleanup_free_ char *req = NULL;
	size_t req_len = 0;
	int r = 0;
	static char *no_env[] = { NULL };
	own->env = o->envp != NULL;
	if (o->workdir)
		own->workdir = strdup(o->workdir);
	int env_r = !own->env ? 0
	            : (o->flags & NSBOX_EXEC_ENV_ADD) ? env_merge(&own->envp, sb->plan->envp, o->envp)
	                                              : strv_from(&own->envp, o->envp);
	if (strv_from(&own->argv, o->argv) < 0 || env_r < 0 ||
	    (o->workdir && !own->workdir) || config_copy(&own->cfg, sb->plan->cfg) < 0) {
		r = nsbox_err(err, ENOMEM, "exec", "run in sandbox");
		goto fail;
	}
	plan->argv = own->argv.v;
	if (own->env)
		plan->envp = own->envp.v ? own->envp.v : no_env;
	if (own->workdir)
		plan->workdir = own->workdir;
	plan->cfg = own->cfg;
	own->cfg->timeout_ms = plan->timeout_ms;   /* the record's limits: this exec's */
	r = nsbox_config_set_command(own->cfg, (int) own->argv.n, (const char *const *) own->argv.v, err);
	uint32_t flags = (own->workdir ? EXEC_WORKDIR : 0) | (own->env ? EXEC_ENV : 0) | (o->fd3 >= 0 ? EXEC_FD3 : 0) |
	                 req_flags | ((o->flags & NSBOX_SPAWN_TTY) ? EXEC_TTY : 0);
	r = r ?: build_request(own, flags, &req, &req_len, err);
	r = r ?: spawn_open_streams(e, o->stdin_fd, o->stdout_fd, o->stderr_fd, o->flags, stdio, close_after, err);
	if (r == 0 && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		r = nsbox_err(err, errno, "exec", "create socketpair");
	if (r < 0)
		goto fail;
	e->sync_fd = sv[0];
	if (e->exec_cg) {
		cg_stats st;
		cgroup_counters(e->exec_cg, &st);
		e->have_cpu_base = true;
		e->cpu_base_user_ms = st.cpu_user_ms;
		e->cpu_base_system_ms = st.cpu_system_ms;
		e->oom_base = st.oom_kills;
		e->pids_events_base = st.pids_max_events;
	}
	clock_gettime(CLOCK_MONOTONIC, &e->start);
	int fds[5] = { sv[1], stdio[0], stdio[1], stdio[2], o->fd3 };
	ssize_t sent = fd_send(sb->sync_fd, req, req_len, fds, o->fd3 >= 0 ? 5 : 4);
	r = sent < 0 ? (int) sent : 0;
	close(sv[1]);
	sv[1] = -1;
	for (size_t i = 0; i < ARRAY_SIZE(close_after); i++)
		if (close_after[i] >= 0)
			close(close_after[i]);
	if (r < 0) {
		r = r == -EPIPE || r == -ECONNRESET
			? nsbox_err(err, ESRCH, "exec", "run in sandbox: the sandbox has ended")
			: nsbox_err(err, -r, "exec", "run in sandbox: send the command");
		goto fail_sent;
	}
	r = recv_pidfd(e, err);
	if (r < 0)
		goto fail_sent;
	*out = e;
	return 0;
fail:
	for (size_t i = 0; i < ARRAY_SIZE(close_after); i++)
		if (close_after[i] >= 0)
			close(close_after[i]);
	if (sv[1] >= 0)
		close(sv[1]);
fail_sent:
	e->reaped = true;   /* nothing runs */
	exec_release(e);
	return r;
}

static int set_paused(nsbox_sandbox *sb, bool on, nsbox_error **err)
{
	const char *what = on ? "pause" : "resume";
	if (!sandbox_config(sb))
		return nsbox_err_invalid(err, "cgroup", "%s: not a long-lived sandbox (NSBOX_SPAWN_KEEP)", what);
	if (__atomic_load_n(&sb->reaped, __ATOMIC_ACQUIRE))
		return nsbox_err(err, ESRCH, "cgroup", "%s: the sandbox has ended", what);
	if (!sb->cg)
		return nsbox_err_hint(err, ENOTSUP, "cgroup",
		                      "run as root, or give a delegated cgroup v2 directory (--cgroup-parent)",
		                      "%s the sandbox: its limits are rlimits, and only a cgroup can freeze it", what);
	int r = cgroup_freeze(sb->cg, on, err);
	if (r == 0)
		__atomic_store_n(&sb->paused, on, __ATOMIC_RELEASE);
	return r;
}

int nsbox_sandbox_pause(nsbox_sandbox *sb, nsbox_error **err)
{
	return sb && sb->remote ? remote_pause(sb, true, err) : set_paused(sb, true, err);
}

int nsbox_sandbox_resume(nsbox_sandbox *sb, nsbox_error **err)
{
	return sb && sb->remote ? remote_pause(sb, false, err) : set_paused(sb, false, err);
}

bool nsbox_sandbox_paused(const nsbox_sandbox *sb)
{
	if (sb && sb->remote)
		return remote_paused((nsbox_sandbox *) sb);
	return sb && __atomic_load_n(&sb->paused, __ATOMIC_ACQUIRE);
}

const nsbox_config *sandbox_config(const nsbox_sandbox *sb)
{
	return sb && !sb->remote && sb->plan && sb->plan->keep && !sb->exec_of ? sb->plan->cfg : NULL;
}

const char *nsbox_sandbox_id(const nsbox_sandbox *sb)
{
	if (sb && sb->remote)
		return sb->remote->id;
	return sb && sb->keep_id[0] ? sb->keep_id : NULL;
}

void exec_release(nsbox_sandbox *e)
{
	if (e->pidfd >= 0 && !e->reaped) {
		/* Its pid 1 takes the exec's pid namespace with it. */
		(void) sys_pidfd_send_signal(e->pidfd, SIGKILL);
		struct pollfd p = { .fd = e->pidfd, .events = POLLIN };
		while (poll(&p, 1, -1) < 0 && errno == EINTR)
			;
	}
	int fds[] = { e->pidfd, e->sync_fd, e->out_fd[0], e->out_fd[1], e->notify_fd };
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	relay_free(e->relay);
	for (int i = 0; i < 2; i++)
		capture_free(&e->streams[i]);
	for (size_t i = 0; i < e->n_denied; i++)
		free(e->denied[i].name);
	free(e->denied);
	proxy_log_free(&e->net_allowed);
	proxy_log_free(&e->net_denied);
	proxy_log_free(&e->net_base_allowed);
	proxy_log_free(&e->net_base_denied);
	if (e->exec_own) {
		strv_clear(&e->exec_own->argv);
		strv_clear(&e->exec_own->envp);
		free(e->exec_own->workdir);
		nsbox_config_free(e->exec_own->cfg);
		free(e->exec_own);
	}
	free(e->plan);
	free(e);
}
