/* The supervisor's event loop: one epoll set over the sandbox's pidfd, the
 * timeout timerfd, the caller's signalfd, the output pipes and the socket to
 * pid 1. It ends when pid 1 is reaped, which (pid 1 being the namespace's
 * init) means every process of the sandbox is gone. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/error.h"
#include "base/fdpass.h"
#include "sandbox/relay.h"
#include "sandbox/sandbox.h"
#include "sandbox/stats.h"
#include "base/syscalls.h"

#define GRACE_MS 5000

enum { EV_PIDFD, EV_SYNC, EV_OUT, EV_ERR, EV_TIMEOUT, EV_SIGNAL, EV_GRACE, EV_STATS, EV_NOTIFY, EV_PROXY, EV_WORKSPACE,
       EV_RELAY /* and up: relay.c's */ };

static int arm_timer(int *fd, uint64_t ms, bool repeat)
{
	if (*fd < 0)
		*fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (*fd < 0)
		return -errno;
	struct timespec t = { (time_t) (ms / 1000), (long) (ms % 1000) * 1000000L };
	struct itimerspec its = { .it_value = t, .it_interval = repeat ? t : (struct timespec){ 0, 0 } };
	return timerfd_settime(*fd, 0, &its, NULL) < 0 ? -errno : 0;
}

static int watch(int ep, int fd, uint64_t tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = tag };
	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* Read what is available from an output pipe; close it at EOF. */
static void pump(nsbox_sandbox *sb, int i, int ep)
{
	char chunk[65536];
	for (;;) {
		ssize_t n = read(sb->out_fd[i], chunk, sizeof(chunk));
		if (n > 0) {
			if (sb->on_output)
				sb->on_output(sb->output_userdata, i + 1, chunk, (size_t) n);
			(void) capture_feed(&sb->streams[i], chunk, (size_t) n);
			if ((size_t) n < sizeof(chunk) && ep >= 0)
				return;   /* drained for now; epoll will say when there is more */
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN && ep >= 0)
			return;
		/* EOF, an error, or (draining at the end) nothing left. */
		if (ep >= 0)
			(void) epoll_ctl(ep, EPOLL_CTL_DEL, sb->out_fd[i], NULL);
		(void) close(sb->out_fd[i]);
		sb->out_fd[i] = -1;
		return;
	}
}

/* One message, and the fd it may carry (the seccomp listener, the proxy's
 * socket). One with more fds than that is closed whole: -EBADMSG. */
static ssize_t recv_msg(int fd, msg *m, int *passed, int flags)
{
	int nfds = 0;
	ssize_t n = fd_recv(fd, m, sizeof(*m), passed, 1, &nfds, flags);
	if (nfds == 0)
		*passed = -1;
	return n;
}

static void read_messages(nsbox_sandbox *sb, int flags, int ep)
{
	msg m;
	int fd;
	for (;;) {
		ssize_t n = recv_msg(sb->sync_fd, &m, &fd, flags);
		if (n == -EBADMSG) {
			/* Dropped, its fds closed: not a message we read. */
			flags |= MSG_DONTWAIT;
			continue;
		}
		if (n != (ssize_t) sizeof(m))
			break;
		if (m.type == MSG_ERROR && sb->error.type == 0)
			sb->error = m;
		else if (m.type == MSG_EXIT) {
			sb->have_exit = true;
			sb->payload_status = m.status;
			if (sb->exec_of || sb->pooled) {   /* what pid 1 saw its children use */
				sb->rusage.ru_utime = (struct timeval){ m.utime_us / 1000000, m.utime_us % 1000000 };
				sb->rusage.ru_stime = (struct timeval){ m.stime_us / 1000000, m.stime_us % 1000000 };
				sb->rusage.ru_maxrss = m.maxrss_kb;
			}
		} else if (m.type == MSG_PROXY_SOCKET && fd >= 0 && !sb->proxy && sb->plan->proxy && ep >= 0) {
			/* The proxy's socket, listening inside: serve it from here. */
			sb->proxy = proxy_new(fd, &sb->plan->allow);
			fd = -1;   /* taken, or closed by proxy_new's failure */
			if (sb->proxy && watch(ep, proxy_fd(sb->proxy), EV_PROXY) < 0) {
				proxy_finish(sb->proxy, NULL, NULL);
				sb->proxy = NULL;
			}
		} else if (m.type == MSG_LISTENER && fd >= 0 && sb->notify_fd < 0 && sb->plan->seccomp.notify) {
			sb->notify_fd = TAKE_FD(fd);
			if (ep >= 0 && watch(ep, sb->notify_fd, EV_NOTIFY) < 0) {
				/* Unwatched, it would leave the payload blocked: close
				 * it, and the kernel fails the calls with ENOSYS. */
				close(sb->notify_fd);
				sb->notify_fd = -1;
			}
		}
		if (fd >= 0)
			close(fd);
		flags |= MSG_DONTWAIT;
	}
}

static void reap(nsbox_sandbox *sb)
{
	siginfo_t si = { 0 };
	if (sb->exec_of) {
		/* An exec's pid 1 is the keeper's child, not ours: its pidfd
		 * says it is gone, and with it everything the exec started. */
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		sb->duration_ms = (double) (now.tv_sec - sb->start.tv_sec) * 1e3 +
		                  (double) (now.tv_nsec - sb->start.tv_nsec) / 1e6;
		__atomic_store_n(&sb->reaped, true, __ATOMIC_RELEASE);
		return;
	}
	/* The raw waitid also returns the resource usage of pid 1 and of every
	 * process it reaped, i.e. the whole sandbox. */
	while (syscall(SYS_waitid, P_PIDFD, sb->pidfd, &si, WEXITED | __WALL, &sb->rusage) < 0 &&
	       errno == EINTR)
		;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	sb->duration_ms = (double) (now.tv_sec - sb->start.tv_sec) * 1e3 +
	                  (double) (now.tv_nsec - sb->start.tv_nsec) / 1e6;
	sb->init_status = si.si_code == CLD_EXITED ? si.si_status : -si.si_status;
	__atomic_store_n(&sb->reaped, true, __ATOMIC_RELEASE);
	trace_mark(sb->trace, TR_REAPED);
}

/* A pooled run's record is complete when pid 1 reports the payload's
 * exit: pid 1 exits right after (taking what the payload left running with
 * its namespace), and what the payload wrote is in the pipes already. The
 * caller need not wait for that teardown (the namespaces' and the mounts'
 * release, a few hundred microseconds): nsbox_pool_release() has the pool's
 * thread reap pid 1, remove the cgroup and end the janitor. Not with a
 * relay (a terminal, stdin) or a workspace, whose ends need pid 1 gone. */
static bool ends_at_exit(const nsbox_sandbox *sb)
{
	return sb->pooled && sb->have_exit && !sb->relay && !sb->plan->ws.active;
}

static void end_at_exit(nsbox_sandbox *sb)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	sb->duration_ms = (double) (now.tv_sec - sb->start.tv_sec) * 1e3 +
	                  (double) (now.tv_nsec - sb->start.tv_nsec) / 1e6;
	sb->init_status = 0;   /* pid 1 exits 0 once it has reported */
}

static void on_signal(nsbox_sandbox *sb, int *grace_fd, int ep)
{
	struct signalfd_siginfo ssi;
	while (read(sb->signal_fd, &ssi, sizeof(ssi)) == (ssize_t) sizeof(ssi)) {
		if (ssi.ssi_signo == SIGWINCH) {   /* the caller's window, for -t */
			(void) relay_winch(sb->relay);
			continue;
		}
		if (*grace_fd >= 0) {
			/* A second signal: stop waiting. */
			sb->killed = true;
			(void) sys_pidfd_send_signal(sb->pidfd, SIGKILL);
			continue;
		}
		(void) sys_pidfd_send_signal(sb->pidfd, (int) ssi.ssi_signo);
		if (arm_timer(grace_fd, GRACE_MS, false) == 0)
			(void) watch(ep, *grace_fd, EV_GRACE);
	}
}

static int loop(nsbox_sandbox *sb, int ep, nsbox_error **err)
{
	_cleanup_close_ int timeout_fd = -1, grace_fd = -1, stats_fd = -1, ws_fd = -1;
	/* A long-lived sandbox's timeout is its execs'. */
	if (sb->plan->timeout_ms && !sb->plan->keep) {
		int r = arm_timer(&timeout_fd, sb->plan->timeout_ms, false);
		if (r < 0 || (r = watch(ep, timeout_fd, EV_TIMEOUT)) < 0)
			return nsbox_err(err, -r, "supervise", "arm the timeout");
	}
	if (sb->stats_interval_ms && sb->stats_fd >= 0) {
		int r = arm_timer(&stats_fd, sb->stats_interval_ms, true);
		if (r < 0 || (r = watch(ep, stats_fd, EV_STATS)) < 0)
			return nsbox_err(err, -r, "supervise", "arm the stats timer");
	}
	/* workspace.max_size: a poll every 100 ms (the bound on any one file
	 * is the hard RLIMIT_FSIZE; many files written faster than the poll
	 * overshoot by what was written in between, and the run is killed). */
	if (!sb->exec_of && ws_watch_start(&sb->plan->ws) > 0) {
		int r = arm_timer(&ws_fd, 100, true);
		if (r < 0 || (r = watch(ep, ws_fd, EV_WORKSPACE)) < 0)
			return nsbox_err(err, -r, "supervise", "arm the workspace size timer");
	}
	if (sb->signal_fd >= 0 && watch(ep, sb->signal_fd, EV_SIGNAL) < 0)
		return nsbox_err(err, errno, "supervise", "watch the signal fd");
	while (!sb->reaped && !ends_at_exit(sb)) {
		struct epoll_event evs[8];
		int n = epoll_wait(ep, evs, 8, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return nsbox_err(err, errno, "supervise", "wait for events");
		for (int i = 0; i < n; i++) {
			uint64_t tick;
			switch (evs[i].data.u64) {
			case EV_PIDFD:
				reap(sb);
				break;
			case EV_SYNC:
				read_messages(sb, MSG_DONTWAIT, ep);
				if (evs[i].events & (EPOLLHUP | EPOLLERR))
					(void) epoll_ctl(ep, EPOLL_CTL_DEL, sb->sync_fd, NULL);
				break;
			case EV_OUT:
			case EV_ERR:
				pump(sb, (int) evs[i].data.u64 - EV_OUT, ep);
				break;
			case EV_TIMEOUT:
				(void) read(timeout_fd, &tick, sizeof(tick));
				sb->timed_out = true;
				(void) sys_pidfd_send_signal(sb->pidfd, SIGKILL);
				break;
			case EV_GRACE:
				(void) read(grace_fd, &tick, sizeof(tick));
				sb->killed = true;
				(void) sys_pidfd_send_signal(sb->pidfd, SIGKILL);
				break;
			case EV_SIGNAL:
				on_signal(sb, &grace_fd, ep);
				break;
			case EV_NOTIFY:
				if ((evs[i].events & EPOLLIN) && notify_handle(sb))
					break;
				if (!(evs[i].events & EPOLLIN) || evs[i].events & (EPOLLHUP | EPOLLERR)) {
					(void) epoll_ctl(ep, EPOLL_CTL_DEL, sb->notify_fd, NULL);
					close(sb->notify_fd);
					sb->notify_fd = -1;
				}
				break;
			case EV_PROXY:
				proxy_dispatch(sb->proxy);
				break;
			case EV_STATS:
				(void) read(stats_fd, &tick, sizeof(tick));
				if (!sb->reaped)
					stats_write(sb);
				break;
			case EV_WORKSPACE:
				(void) read(ws_fd, &tick, sizeof(tick));
				if (!sb->ws_limit_hit && ws_over_bound(&sb->plan->ws)) {
					sb->ws_limit_hit = true;
					sb->ws_limit = sb->plan->ws.over;
					(void) sys_pidfd_send_signal(sb->pidfd, SIGKILL);
				}
				break;
			default:
				relay_event(sb->relay, ep, evs[i].data.u64 - EV_RELAY);
				break;
			}
		}
	}
	if (!sb->reaped)
		end_at_exit(sb);
	return 0;
}

/* An exec's end: the sandbox's cgroup stays; its counters since the
 * exec's start are the exec's. */
static int exec_result(nsbox_sandbox *sb, nsbox_result **out, nsbox_error **err)
{
	if (!sb->have_exit)
		sb->init_status = -SIGKILL;
	if (sb->exec_cg) {
		cgroup_stats(sb->exec_cg, &sb->cg_stats);
		sb->have_cg_stats = true;
		double u = sb->cg_stats.cpu_user_ms - sb->cpu_base_user_ms;
		double s = sb->cg_stats.cpu_system_ms - sb->cpu_base_system_ms;
		sb->cg_stats.cpu_user_ms = u > 0 ? u : 0;
		sb->cg_stats.cpu_system_ms = s > 0 ? s : 0;
		sb->cg_stats.oom_kills = sb->cg_stats.oom_kills > sb->oom_base ? sb->cg_stats.oom_kills - sb->oom_base : 0;
		sb->cg_stats.pids_max_events = sb->cg_stats.pids_max_events > sb->pids_events_base
			? sb->cg_stats.pids_max_events - sb->pids_events_base : 0;
	}
	if (sb->exec_of->keep_proxy) {
		proxy_log a, d;
		keep_proxy_logs(sb->exec_of, &a, &d);
		proxy_log_since(&a, &sb->net_base_allowed, &sb->net_allowed);
		proxy_log_since(&d, &sb->net_base_denied, &sb->net_denied);
		proxy_log_free(&a);
		proxy_log_free(&d);
	}
	return result_from_sandbox(sb, out, err);
}

int nsbox_sandbox_wait(nsbox_sandbox *sb, nsbox_result **out, nsbox_error **err)
{
	if (!sb || !out)
		return nsbox_err(err, EINVAL, "supervise", "wait for sandbox: missing argument");
	if (sb->remote)
		return nsbox_err_invalid(err, "supervise", "a started sandbox ends with nsbox_sandbox_free() or "
		                         "nsbox_live_stop(), not a wait");
	if (sb->reaped || ends_at_exit(sb))
		return nsbox_err(err, EALREADY, "supervise", "wait for sandbox: already waited for");
	_cleanup_close_ int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		return nsbox_err(err, errno, "supervise", "create epoll instance");
	int r = watch(ep, sb->pidfd, EV_PIDFD);
	r = r ?: watch(ep, sb->sync_fd, EV_SYNC);
	for (int i = 0; r == 0 && i < 2; i++)
		if (sb->out_fd[i] >= 0) {
			(void) fcntl(sb->out_fd[i], F_SETFL, O_NONBLOCK);
			r = watch(ep, sb->out_fd[i], EV_OUT + (uint64_t) i);
		}
	r = r ?: relay_watch(sb->relay, ep, EV_RELAY);
	r = r < 0 ? nsbox_err(err, -r, "supervise", "watch the sandbox") : loop(sb, ep, err);
	if (r < 0) {
		relay_finish(sb->relay, true);
		return r;
	}
	/* Everything in the namespace is dead (or, ended at the payload's exit,
	 * dying): collect what is left. */
	read_messages(sb, MSG_DONTWAIT, -1);
	for (int i = 0; i < 2; i++)
		if (sb->out_fd[i] >= 0)
			pump(sb, i, -1);
	relay_finish(sb->relay, sb->timed_out || sb->killed || sb->ws_limit_hit);
	if (sb->exec_of)
		return exec_result(sb, out, err);
	if (sb->cg) {
		cgroup_stats(sb->cg, &sb->cg_stats);
		sb->have_cg_stats = true;
		if (sb->have_cpu_base) {   /* a pooled run: from its request on */
			double u = sb->cg_stats.cpu_user_ms - sb->cpu_base_user_ms;
			double s = sb->cg_stats.cpu_system_ms - sb->cpu_base_system_ms;
			sb->cg_stats.cpu_user_ms = u > 0 ? u : 0;
			sb->cg_stats.cpu_system_ms = s > 0 ? s : 0;
		}
		trace_mark(sb->trace, TR_STATS);
		/* Should a directory refuse to go, the janitor keeps trying. A
		 * pooled sandbox's free does this, once it has reaped pid 1. */
		if (!sb->pooled) {
			int gone = cgroup_destroy(TAKE_PTR(sb->cg));
			trace_mark(sb->trace, TR_CG_REMOVED);
			/* A caller about to exit does not wait for the janitor's
			 * own exit when nothing is left for it (NSBOX_RUN_EXITING);
			 * when something is, it waits as everyone does. */
			if (sb->exiting && gone == 0)
				janitor_leave(&sb->jan);
			else
				janitor_finish(&sb->jan);
			trace_mark(sb->trace, TR_JANITOR_DONE);
		}
	}
	/* The helper's NAT goes with the sandbox. */
	netuser_stop(&sb->net);
	/* The proxy's last connections go with the sandbox. */
	if (sb->proxy)
		proxy_finish(TAKE_PTR(sb->proxy), &sb->net_allowed, &sb->net_denied);
	keep_proxy_stop(sb, &sb->net_allowed, &sb->net_denied);
	/* The workspace's changes, from the upper layer, now that nothing
	 * writes to it; then an ephemeral upper layer goes. */
	ws_plan *w = &sb->plan->ws;
	if (w->active && w->mode == WS_OVERLAY)
		sb->changes_err = ws_scan_rules(w->upper, w->lower, &(ws_rules){ &w->deny, w->git }, &sb->changes,
		                                &sb->n_changes, &sb->upper_bytes);
	/* Written faster than the poll. */
	if (w->active && w->mode == WS_OVERLAY && !sb->ws_limit_hit && w->max_bytes && sb->upper_bytes > w->max_bytes)
		sb->ws_limit_hit = true, sb->ws_limit = "max_size";
	if (w->active && w->mode == WS_OVERLAY && !sb->ws_limit_hit && w->max_files && sb->n_changes > w->max_files)
		sb->ws_limit_hit = true, sb->ws_limit = "max_files";
	w->payload_ran = sb->error.type == 0;   /* else a session it made, still empty, goes */
	ws_finish(w);
	r = result_from_sandbox(sb, out, err);
	trace_mark(sb->trace, TR_RESULT);
	return r;
}
