/* The monitor of a started sandbox: the program nsbox-monitor, which
 * nsbox_live_start() execs (live.c). It owns the sandbox (it dies, the
 * sandbox dies) and listens on NAME.sock, serving only its own user in its
 * own user namespace (ctl_peer_ok). Each connection is served by a thread:
 * one request (ctl.h), done with the library on the sandbox it holds, as
 * the same calls in one process would do it: nsbox_run for commands and
 * cells (governed by the sandbox's configuration), nsbox_file_*,
 * nsbox_process_*, nsbox_forward_*, contexts, pause. It keeps the
 * registries a sandbox outlives its clients with: contexts, background
 * processes, published ports. It stops on STOP, on SIGTERM, when its owner
 * (the process that started it, unless detached) exits, when idle or out of
 * lifetime, or when the sandbox ends. NAME.lock stays flock'ed for its
 * whole life (by its cleaner, which removes the files after it). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "base/fdpass.h"
#include "live/ctl.h"
#include "live/live.h"
#include "live/remote.h"

#include "live/monitor.h"

double since_ms(const struct timespec *t)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double) (now.tv_sec - t->tv_sec) * 1e3 + (double) (now.tv_nsec - t->tv_nsec) / 1e6;
}

/* ---- the main loop ---------------------------------------------------------------- */

typedef struct conn {
	monitor *m;
	int fd;
	struct conn *next;
} conn;

/* Off the list of connections being served (under m->lock). */
static void unlink_conn(monitor *m, conn *c)
{
	conn **pp = &m->conns;
	while (*pp && *pp != c)
		pp = &(*pp)->next;
	if (*pp)
		*pp = c->next;
}

static void *serve_thread(void *arg)
{
	conn *c = arg;
	monitor *m = c->m;
	serve(m, c->fd);
	pthread_mutex_lock(&m->lock);
	unlink_conn(m, c);
	pthread_mutex_unlock(&m->lock);
	close(c->fd);
	free(c);
	pthread_mutex_lock(&m->lock);
	m->active--;
	clock_gettime(CLOCK_MONOTONIC, &m->last);
	pthread_cond_broadcast(&m->quiet);
	pthread_mutex_unlock(&m->lock);
	(void) !write(m->wake[1], "w", 1);   /* the idle timer may start now */
	return NULL;
}


/* Busy: a request being served, or a background process running. */
static bool busy(monitor *m)
{
	if (m->active)
		return true;
	for (proc_ent *p = m->procs; p; p = p->next)
		if (nsbox_process_running(p->p))
			return true;
	return false;
}

/* The next moment the monitor must look at the clock: the idle timeout
 * (when nothing runs; a background process polled each second) or the
 * lifetime. */
static void arm(monitor *m)
{
	double next = -1;
	pthread_mutex_lock(&m->lock);
	if (m->idle_ms && !m->idle_paused)
		next = busy(m) ? 1000 : (double) m->idle_ms - since_ms(&m->last);
	pthread_mutex_unlock(&m->lock);
	if (m->lifetime_ms) {
		double l = (double) m->lifetime_ms - since_ms(&m->started);
		if (next < 0 || l < next)
			next = l;
	}
	struct itimerspec its = { 0 };
	if (next > -1) {
		if (next < 1)
			next = 1;
		its.it_value.tv_sec = (time_t) (next / 1000);
		its.it_value.tv_nsec = (long) ((next - (double) its.it_value.tv_sec * 1000) * 1e6);
	}
	(void) timerfd_settime(m->timer_fd, 0, &its, NULL);
}

/* Out of lifetime: stop. Idle: stop, or pause (pause_when_idle). */
static bool expired(monitor *m)
{
	if (m->lifetime_ms && since_ms(&m->started) >= (double) m->lifetime_ms)
		return true;
	pthread_mutex_lock(&m->lock);
	if (busy(m))
		clock_gettime(CLOCK_MONOTONIC, &m->last);
	bool idle = m->idle_ms && !m->idle_paused && !busy(m) && since_ms(&m->last) >= (double) m->idle_ms;
	bool pause = idle && m->pause_when_idle;
	if (pause)
		m->idle_paused = true;
	pthread_mutex_unlock(&m->lock);
	if (pause) {
		(void) nsbox_sandbox_pause(m->sb, NULL);
		write_info(m);
		return false;
	}
	return idle;
}

static void accept_one(monitor *m)
{
	int cfd = accept4(m->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	if (cfd < 0)
		return;
	/* The directory is private already; the socket still serves no one
	 * but its owner, in its owner's user namespace (not the payload of a
	 * rootless sandbox, which has the same uid). */
	conn *c = malloc(sizeof(*c));
	if (!ctl_peer_ok(cfd) || !c) {
		free(c);
		close(cfd);
		return;
	}
	*c = (conn){ m, cfd, NULL };
	pthread_mutex_lock(&m->lock);
	m->active++;
	c->next = m->conns;
	m->conns = c;
	clock_gettime(CLOCK_MONOTONIC, &m->last);
	pthread_mutex_unlock(&m->lock);
	pthread_attr_t at;
	pthread_t t;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &at, serve_thread, c) != 0) {
		pthread_mutex_lock(&m->lock);
		unlink_conn(m, c);
		m->active--;
		pthread_mutex_unlock(&m->lock);
		close(cfd);
		free(c);
	}
	pthread_attr_destroy(&at);
}

static void loop(monitor *m)
{
	int pidfd = nsbox_sandbox_pidfd(m->sb);
	for (;;) {
		arm(m);
		pthread_mutex_lock(&m->lock);
		int owner = m->owner_fd;
		pthread_mutex_unlock(&m->lock);
		struct pollfd p[6] = {
			{ .fd = m->listen_fd, .events = POLLIN }, { .fd = m->sig_fd, .events = POLLIN },
			{ .fd = m->timer_fd, .events = POLLIN },  { .fd = pidfd, .events = POLLIN },
			{ .fd = m->wake[0], .events = POLLIN },   { .fd = owner, .events = POLLIN },
		};
		if (poll(p, 6, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		if (p[3].revents || p[1].revents)
			return;   /* the sandbox ended (killed from outside), or a signal to stop */
		if (p[5].revents && owner >= 0) {
			/* The owner has exited, unless a detach let it go meanwhile
			 * (its fd closed under the poll: POLLNVAL, or a number
			 * reused by then). */
			pthread_mutex_lock(&m->lock);
			bool still = m->owner_fd == owner;
			pthread_mutex_unlock(&m->lock);
			if (still && !(p[5].revents & POLLNVAL))
				return;
		}
		if (p[4].revents) {
			char b[64];
			ssize_t n = read(m->wake[0], b, sizeof(b));
			if (n > 0 && memchr(b, 's', (size_t) n))
				return;
		}
		if (p[2].revents) {
			uint64_t ticks;
			(void) !read(m->timer_fd, &ticks, sizeof(ticks));
			if (expired(m))
				return;
		}
		if (p[0].revents & POLLIN)
			accept_one(m);
	}
}

/* Stop: the handlers end with the sandbox's end, and file transfers
 * with stop_fd; they answer their clients. One still at it after a grace
 * is writing to a client that does not read (a reply, logs, a run's
 * output): its connection is shut down, which ends the write. */
#define STOP_GRACE_S 2

static void wait_handlers(monitor *m)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += STOP_GRACE_S;
	pthread_mutex_lock(&m->lock);
	while (m->active && pthread_cond_timedwait(&m->quiet, &m->lock, &until) != ETIMEDOUT)
		;
	for (conn *c = m->conns; c; c = c->next)
		(void) shutdown(c->fd, SHUT_RDWR);
	while (m->active)
		pthread_cond_wait(&m->quiet, &m->lock);
	pthread_mutex_unlock(&m->lock);
}

static void remove_files(const monitor *m)
{
	static const char *const ext[] = { "sock", "json", "lock" };
	for (size_t i = 0; i < 3; i++) {
		char f[80];
		snprintf(f, sizeof(f), "%s.%s", m->name, ext[i]);
		(void) unlinkat(m->dirfd, f, 0);
	}
}

/* Coverage builds: the cleaner ends with _exit, so it writes its counts
 * itself; it was forked before any thread, so no lock of gcov's is held. */
#ifdef NSBOX_COVERAGE
void __gcov_dump(void);
#define cleaner_coverage_dump() __gcov_dump()
#else
#define cleaner_coverage_dump() ((void) 0)
#endif

/* The files go when the monitor does, however it ends (SIGKILL too): a
 * child of it waits for its death (PR_SET_PDEATHSIG), removes them, and
 * holds the lock (inherited) until then, so that a stop, which waits for
 * the lock, returns once they are gone. */
static int start_cleaner(const monitor *m)
{
	pid_t parent = getpid();
	pid_t c = fork();
	if (c != 0)
		return c < 0 ? -1 : 0;
	for (int fd = 3; fd < 1024; fd++)
		if (fd != m->dirfd && fd != m->lock_fd)
			(void) close(fd);
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGUSR1);
	(void) sigprocmask(SIG_BLOCK, &s, NULL);
	if (prctl(PR_SET_PDEATHSIG, SIGUSR1, 0, 0, 0) == 0 && getppid() == parent)
		while (sigwaitinfo(&s, NULL) < 0 && errno == EINTR)
			;
	remove_files(m);
	cleaner_coverage_dump();
	_exit(0);
}

/* Tell the starter: 'O' and the warning, or 'E' and the error's JSON. */
static void ready(monitor *m, const nsbox_error *e)
{
	char *msg = NULL;
	if (e) {
		char *j = ctl_error_json(e);
		if (asprintf(&msg, "E%s", j ? j : "{}") < 0)
			msg = NULL;
		free(j);
	} else {
		const char *w = nsbox_sandbox_warning(m->sb);
		if (asprintf(&msg, "O%s", w ? w : "") < 0)
			msg = NULL;
	}
	if (msg)
		(void) !write(m->ready_fd, msg, strlen(msg));
	free(msg);
	close(m->ready_fd);
	m->ready_fd = -1;
}

static int listen_here(monitor *m, nsbox_error **err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	ctl_sock_path(&sa, m->dirfd, m->name);
	(void) unlinkat(m->dirfd, strrchr(sa.sun_path, '/') + 1, 0);   /* a dead monitor's */
	m->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	mode_t old = umask(077);
	int b = m->listen_fd < 0 ? -1 : bind(m->listen_fd, (struct sockaddr *) &sa, sizeof(sa));
	umask(old);
	if (b < 0 || listen(m->listen_fd, 128) < 0)
		return nsbox_err(err, errno, "live", "listen on '%s.sock'", m->name);
	return 0;
}

/* --publish [ADDR:]HOSTPORT:PORT */
static int publish_spec(monitor *m, const char *spec, nsbox_error **err)
{
	char addr[64] = "127.0.0.1";
	unsigned hp, port;
	char rest;
	const char *last = strrchr(spec, ':');
	const char *first = last ? memrchr(spec, ':', (size_t) (last - spec)) : NULL;
	bool ok = last != NULL;
	if (ok && first) {
		size_t n = (size_t) (first - spec);
		const char *a = spec;
		if (n >= 2 && spec[0] == '[' && spec[n - 1] == ']')
			a++, n -= 2;
		ok = n > 0 && n < sizeof(addr);
		if (ok)
			snprintf(addr, sizeof(addr), "%.*s", (int) n, a);
	}
	ok = ok && sscanf(first ? first + 1 : spec, "%u:%u%c", &hp, &port, &rest) == 2;
	if (!ok)
		return nsbox_err_invalid(err, "network", "--publish '%.80s': expected [ADDR:]HOSTPORT:PORT", spec);
	return publish(m, addr, hp, port, NULL, err);
}

static nsbox_config *load_config(int fd, nsbox_error **err)
{
	nsbox_config *cfg = NULL;
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	int r = nsbox_config_new(&cfg, err);
	if (r == 0)
		r = nsbox_config_load_policy(cfg, path, err);
	static const char *const placeholder[] = { "true", NULL };
	if (r == 0)
		r = nsbox_config_set_command(cfg, 1, placeholder, err);
	if (r < 0) {
		nsbox_config_free(cfg);
		return NULL;
	}
	return cfg;
}

enum { O_NAME = 1, O_IDLE, O_LIFETIME, O_PAUSE_IDLE, O_PUBLISH, O_OWNER, O_IMAGE };

int live_monitor_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "name", required_argument, NULL, O_NAME },      { "idle-timeout-ms", required_argument, NULL, O_IDLE },
		{ "lifetime-ms", required_argument, NULL, O_LIFETIME },
		{ "pause-when-idle", no_argument, NULL, O_PAUSE_IDLE },
		{ "publish", required_argument, NULL, O_PUBLISH }, { "owner", no_argument, NULL, O_OWNER },
		{ "image", required_argument, NULL, O_IMAGE },    { 0 },
	};
	monitor m = { .dirfd = LIVE_FD_DIR, .lock_fd = LIVE_FD_LOCK, .listen_fd = -1, .ready_fd = LIVE_FD_READY,
		      .owner_fd = -1, .stop_fd = -1, .wake = { -1, -1 } };
	const char *publishes[MAX_FORWARDS];
	int n_pub = 0, c;
	/* Only our starter runs us: the fds must be there, the name sane. */
	struct stat st;
	if (fstat(LIVE_FD_READY, &st) < 0 || !S_ISFIFO(st.st_mode) || fstat(LIVE_FD_CONFIG, &st) < 0 ||
	    fstat(LIVE_FD_DIR, &st) < 0 || !S_ISDIR(st.st_mode) || fstat(LIVE_FD_LOCK, &st) < 0) {
		return LIVE_NOT_BY_HAND;
	}
	(void) fcntl(LIVE_FD_READY, F_SETFD, FD_CLOEXEC);
	(void) fcntl(LIVE_FD_CONFIG, F_SETFD, FD_CLOEXEC);
	(void) fcntl(LIVE_FD_DIR, F_SETFD, FD_CLOEXEC);
	(void) fcntl(LIVE_FD_LOCK, F_SETFD, FD_CLOEXEC);
	opterr = 0;   /* (the library prints nothing: a bad argument is LIVE_NOT_BY_HAND) */
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1)
		switch (c) {
		case O_NAME: snprintf(m.name, sizeof(m.name), "%s", optarg); break;
		case O_IDLE: m.idle_ms = strtoull(optarg, NULL, 10); break;
		case O_LIFETIME: m.lifetime_ms = strtoull(optarg, NULL, 10); break;
		case O_PAUSE_IDLE: m.pause_when_idle = true; break;
		case O_PUBLISH:
			if (n_pub < MAX_FORWARDS)
				publishes[n_pub++] = optarg;
			break;
		case O_OWNER:
			m.owner_fd = LIVE_FD_OWNER;
			(void) fcntl(LIVE_FD_OWNER, F_SETFD, FD_CLOEXEC);
			break;
		case O_IMAGE: m.image = optarg; break;
		default: return LIVE_NOT_BY_HAND;
		}
	nsbox_error *e = NULL;
	if (!ctl_name_ok(m.name)) {
		(void) nsbox_err_invalid(&e, "live", "the monitor was given no valid name");
		goto fail;
	}
	pthread_mutex_init(&m.lock, NULL);
	/* (Its timed wait at a stop is against the monotonic clock.) */
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&m.quiet, &ca);
	pthread_condattr_destroy(&ca);
	/* A client gone before its answer was written is no reason to die. */
	(void) signal(SIGPIPE, SIG_IGN);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	(void) sigprocmask(SIG_BLOCK, &set, NULL);
	m.sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	m.timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	m.stop_fd = eventfd(0, EFD_CLOEXEC);
	if (m.sig_fd < 0 || m.timer_fd < 0 || m.stop_fd < 0 || pipe2(m.wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		(void) nsbox_err(&e, errno, "live", "start the monitor");
		goto fail;
	}
	m.cfg = load_config(LIVE_FD_CONFIG, &e);
	close(LIVE_FD_CONFIG);
	if (!m.cfg)
		goto fail;
	nsbox_spawn_options o = {
		.version = NSBOX_SPAWN_OPTIONS_VERSION,
		.flags = NSBOX_SPAWN_KEEP,
		.config = m.cfg,
		.stdin_fd = -1,
		.stdout_fd = -1,
		.stderr_fd = -1,
		.signal_fd = -1,
		.stats_fd = -1,
	};
	if (nsbox_spawn(&o, &m.sb, &e) < 0)
		goto fail;
	/* Pausing when idle takes the cgroup freezer: without it an idle
	 * sandbox would neither pause nor end (its idle timeout lost). */
	const char *by = nsbox_sandbox_enforced_by(m.sb);
	if (m.pause_when_idle && m.idle_ms && (!by || strncmp(by, "cgroup", 6))) {
		(void) nsbox_err_hint(&e, ENOTSUP, "live", "run as root, or give a delegated cgroup v2 directory "
		                      "(--cgroup-parent); or end it when idle (no --pause-when-idle)",
		                      "--pause-when-idle: the sandbox's limits are rlimits, and only a cgroup can "
		                      "freeze it");
		goto fail;
	}
	(void) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	clock_gettime(CLOCK_MONOTONIC, &m.started);
	m.started_wall = time(NULL);
	m.last = m.started;
	if (listen_here(&m, &e) < 0)
		goto fail;
	for (int i = 0; i < n_pub; i++)
		if (publish_spec(&m, publishes[i], &e) < 0)
			goto fail;
	write_info(&m);
	if (start_cleaner(&m) < 0) {
		(void) nsbox_err(&e, errno, "live", "start the monitor's cleaner");
		goto fail;
	}
	ready(&m, NULL);
	loop(&m);
	/* Stop: no new connection; the keeper and with it everything in the
	 * sandbox; the handlers then return (their runs ended); the
	 * forwarders, processes, contexts; the sandbox's cgroup. The files go
	 * with us (start_cleaner). */
	close(m.listen_fd);
	(void) nsbox_sandbox_resume(m.sb, NULL);
	(void) nsbox_sandbox_kill(m.sb, SIGKILL);
	(void) eventfd_write(m.stop_fd, 1);
	wait_handlers(&m);
	for (fwd_ent *f = m.forwards, *n; f; f = n) {
		n = f->next;
		nsbox_forward_free(f->f);
		free(f);
	}
	for (proc_ent *p = m.procs, *n; p; p = n) {
		n = p->next;
		nsbox_process_free(p->p);
		free(p);
	}
	for (ctx_ent *x = m.contexts, *n; x; x = n) {
		n = x->next;
		nsbox_context_free(x->ctx);
		pthread_mutex_destroy(&x->start);
		free(x);
	}
	nsbox_sandbox_free(m.sb);
	nsbox_config_free(m.cfg);
	return 0;
fail:
	/* Everything goes before the starter hears of the failure: its name
	 * is free (files removed, lock let go), its ports and sandbox gone,
	 * so that a start under the same name right after is not refused. */
	for (fwd_ent *f = m.forwards, *n; f; f = n) {
		n = f->next;
		nsbox_forward_free(f->f);
		free(f);
	}
	nsbox_sandbox_free(m.sb);
	nsbox_config_free(m.cfg);
	if (m.name[0])
		remove_files(&m);
	(void) close(m.lock_fd);
	ready(&m, e);
	nsbox_error_free(e);
	return 1;
}
