/* The monitor of a long-lived sandbox. It owns the sandbox (it dies, the
 * sandbox dies) and listens on NAME.sock, serving only its own user
 * (SO_PEERCRED). Each connection is served by a thread: it reads one
 * request with the client's stdin/stdout/stderr attached (SCM_RIGHTS), runs
 * the command in the sandbox with those very streams (or captures them with
 * --json), and answers with the exit status and, with --json, the record.
 * A signal the client gets is passed on as one byte; the client's end
 * closing kills the exec. NAME.lock stays flock'ed for the monitor's whole
 * life (by its cleaner, which removes the files after it). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "live/ctl.h"
#include "live/monitor.h"


/* ---- a handler: one connection, in a thread of the monitor ---------------------- */

typedef struct watch_args {
	int fd;
	nsbox_cancel *cancel;
} watch_args;

/* The client's signals (one byte each) go to the run: a command gets the
 * signal, a cell is interrupted; its end closing ends the run (a command is
 * killed, a cell interrupted). A signal that comes while the command is
 * still being started (nothing to signal yet: -ESRCH) is kept and passed
 * on once it runs: `docker stop` right after `docker run -d` must not be
 * lost. (After the end it is tried until the answer closes the
 * connection, which is at once.) */
static void *watch_client(void *arg)
{
	watch_args *w = arg;
	unsigned char pending = 0;
	for (;;) {
		if (pending && nsbox_cancel_signal(w->cancel, pending) != -ESRCH)
			pending = 0;
		struct pollfd p = { .fd = w->fd, .events = POLLIN };
		int ready = poll(&p, 1, pending ? 5 : -1);
		if (ready < 0 && errno != EINTR)
			break;
		if (ready <= 0)
			continue;
		unsigned char sig;
		ssize_t n = read(w->fd, &sig, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 1 && (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT)) {
			if (nsbox_cancel_signal(w->cancel, sig) == -ESRCH)
				pending = sig;
			continue;
		}
		if (n == 1)
			continue;
		break;
	}
	nsbox_cancel_fire(w->cancel);
	return NULL;
}

static int reply(int fd, int status, const char *json)
{
	ctl_reply r = { .status = status, .len = json ? (uint32_t) strlen(json) : 0 };
	if (ctl_write_all(fd, &r, sizeof(r)) < 0)
		return -1;
	return json ? ctl_write_all(fd, json, r.len) : 0;
}

/* A request that could not be served: the message on the client's stderr,
 * and with --json the record of a failed run. */
static int refuse(int cfd, bool json, int err_fd, const nsbox_error *e, const char *why)
{
	if (err_fd >= 0)
		(void) dprintf(err_fd, "nsbox: %s\n", e ? nsbox_error_message(e) : why);
	char *j = NULL;
	nsbox_result *failed = NULL;
	if (json && nsbox_result_new_failed(NULL, e, &failed, NULL) == 0)
		(void) nsbox_result_to_json(failed, &j, NULL);
	int r = reply(cfd, EXIT_SETUP, j);
	free(j);
	nsbox_result_free(failed);
	return r;
}

/* Split n strings off the body; false if they are not all there. */
static bool body_strings(char *body, uint32_t len, uint32_t n, char **out)
{
	char *pos = body, *end = body + len;
	for (uint32_t i = 0; i < n; i++) {
		char *nul = memchr(pos, '\0', (size_t) (end - pos));
		if (!nul)
			return false;
		out[i] = pos;
		pos = nul + 1;
	}
	return pos == end;
}

/* Run through the library, with the client watched meanwhile, and answer:
 * the exit status and, with --json (or CTL_RECORD), the record. Without
 * --json the reason a run failed goes to the client's stderr, as `nsbox run`
 * prints it. */
static int governed(int cfd, nsbox_run_options *o, bool json, bool record, int err_fd)
{
	nsbox_cancel *cancel = NULL;
	nsbox_error *e = NULL;
	if (nsbox_cancel_new(&cancel, &e) < 0) {
		int r = refuse(cfd, json, err_fd, e, NULL);
		nsbox_error_free(e);
		return r;
	}
	o->cancel = cancel;
	watch_args w = { cfd, cancel };
	pthread_t t;
	bool watching = pthread_create(&t, NULL, watch_client, &w) == 0;
	nsbox_result *res = NULL;
	int ran = nsbox_run(o, &res, &e);
	int status = res ? nsbox_result_exit_status(res) : EXIT_SETUP;
	if (ran < 0)
		status = EXIT_SETUP;
	char *j = NULL;
	if ((json || record) && res)
		(void) nsbox_result_to_json(res, &j, NULL);
	const nsbox_error *why = res ? nsbox_result_error(res) : NULL;
	if (!json && err_fd >= 0 && (why || ran < 0))
		(void) dprintf(err_fd, "nsbox: %s\n", nsbox_error_message(ran < 0 ? e : why));
	int r = reply(cfd, status, j);
	/* The watcher ends with the client's close; the run is over. */
	if (watching) {
		(void) shutdown(cfd, SHUT_RDWR);
		pthread_join(t, NULL);
	}
	free(j);
	nsbox_result_free(res);
	nsbox_error_free(e);
	nsbox_cancel_free(cancel);
	return r;
}

static int serve_exec(monitor *m, int cfd, const ctl_req *h, char *body, const int *fds, int nfds)
{
	/* fds: the client's stdin (with CTL_STDIN), stdout, stderr. */
	int want = 2 + !!(h->flags & CTL_STDIN);
	bool json = h->flags & CTL_JSON;
	int nwd = !!(h->flags & CTL_WORKDIR);
	/* With CTL_ENV, every string after the arguments is an entry. The
	 * count is bounded before any sum of it (a client's argc of 2^32-1
	 * would wrap it). */
	static const uint32_t max = 8192;
	if (nfds != want || h->argc == 0 || h->argc > max)
		return reply(cfd, EXIT_SETUP, NULL);
	uint32_t total = h->argc + (uint32_t) nwd;
	if (h->flags & CTL_ENV)
		for (uint32_t i = 0, seen = 0; i < h->len; i++)
			if (!body[i] && ++seen > h->argc + (uint32_t) nwd)
				total++;
	if (total > max)
		return reply(cfd, EXIT_SETUP, NULL);
	char **strs = calloc(max + 2, sizeof(char *));
	if (!strs || !body_strings(body, h->len, total, strs)) {
		free(strs);
		return reply(cfd, EXIT_SETUP, NULL);
	}
	/* argv, its NULL, then envp and its NULL: one slot moved up. */
	char **argv = strs + nwd, **envp = argv + h->argc + 1;
	memmove(envp, argv + h->argc, (total - h->argc - (uint32_t) nwd) * sizeof(char *));
	envp[total - h->argc - (uint32_t) nwd] = NULL;
	argv[h->argc] = NULL;
	nsbox_run_options o = {
		.version = NSBOX_RUN_OPTIONS_VERSION,
		.flags = (json ? NSBOX_SPAWN_CAPTURE : 0) | ((h->flags & CTL_ENV) ? NSBOX_EXEC_ENV_ADD : 0),
		.sandbox = m->sb,
		.argv = (const char *const *) argv,
		.envp = (h->flags & CTL_ENV) ? (const char *const *) envp : NULL,
		.workdir = nwd ? strs[0] : NULL,
		.stdin_fd = (h->flags & CTL_STDIN) ? fds[0] : -1,
		.stdout_fd = fds[want - 2],
		.stderr_fd = fds[want - 1],
		.timeout_ms = h->timeout_ms,
		.signal_fd = -1,
		.stats_fd = -1,
	};
	int r = governed(cfd, &o, json, h->flags & CTL_RECORD, fds[want - 1]);
	free(strs);
	return r;
}

/* A cell: body is NAME, LANG and (unless only --restart) the code. */
static int serve_cell(monitor *m, int cfd, const ctl_req *h, char *body, const int *fds, int nfds)
{
	bool json = h->flags & CTL_JSON;
	char *strs[3] = { NULL, NULL, NULL };
	if (nfds != 2 || (h->argc != 2 && h->argc != 3) || !body_strings(body, h->len, h->argc, strs) ||
	    !ctl_name_ok(strs[0]) || (strcmp(strs[1], "python") && strcmp(strs[1], "node")))
		return reply(cfd, EXIT_SETUP, NULL);
	bool fresh = false;
	nsbox_error *e = NULL;
	nsbox_context *ctx = context_find(&m->contexts, &m->ctx_lock, m->sb, strs[0], strs[1], &fresh, &e);
	if (ctx && (h->flags & CTL_RESTART) && !fresh && nsbox_context_restart(ctx, &e) < 0)
		ctx = NULL;
	if (!ctx) {
		int r = refuse(cfd, json, fds[1], e, "start the context: out of memory");
		nsbox_error_free(e);
		return r;
	}
	if (!strs[2])   /* --restart alone */
		return reply(cfd, 0, NULL);
	nsbox_run_options o = {
		.version = NSBOX_RUN_OPTIONS_VERSION,
		.flags = json ? NSBOX_SPAWN_CAPTURE : 0,
		.context = ctx,
		.lang = strs[1],
		.code = strs[2],
		.code_len = strlen(strs[2]),
		.stdin_fd = -1,
		.stdout_fd = fds[0],
		.stderr_fd = fds[1],
		.timeout_ms = h->timeout_ms,
		.signal_fd = -1,
		.stats_fd = -1,
	};
	return governed(cfd, &o, json, false, fds[1]);
}

static double since_ms(const struct timespec *t)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double) (now.tv_sec - t->tv_sec) * 1e3 + (double) (now.tv_nsec - t->tv_nsec) / 1e6;
}

/* A client has this long to send its whole request: its thread counts as
 * active, and one that never sent it kept the sandbox from idling out and
 * nsbox stop from ever returning. */
#define REQUEST_MS 10000

/* Until the request's deadline, something to read on fd. */
static bool readable_by(int fd, const struct timespec *start)
{
	for (;;) {
		double left = REQUEST_MS - since_ms(start);
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int n = left > 0 ? poll(&p, 1, (int) left + 1) : 0;
		if (n < 0 && errno == EINTR)
			continue;
		return n > 0;
	}
}

/* n bytes of the request by its deadline. */
static int read_by(int fd, char *p, size_t n, const struct timespec *start)
{
	while (n) {
		if (!readable_by(fd, start))
			return -ETIMEDOUT;
		ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EPIPE;
		p += r;
		n -= (size_t) r;
	}
	return 0;
}

static void serve(monitor *m, int cfd)
{
	ctl_req h;
	/* Room for 3 fds holds a 4th (CMSG_SPACE rounds up), which the kernel
	 * then passes without MSG_CTRUNC: it is taken too, so that it is
	 * closed, and the request (no request has 4) refused. */
	int fds[4] = { -1, -1, -1, -1 }, nfds = 0;
	char cbuf[CMSG_SPACE(4 * sizeof(int))];
	struct iovec iov = { &h, sizeof(h) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	/* The header comes whole (one sendmsg), so no waiting for its rest. */
	struct timespec start;
	clock_gettime(CLOCK_MONOTONIC, &start);
	ssize_t n = readable_by(cfd, &start) ? recvmsg(cfd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT) : -1;
	for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && nfds == 0) {
			nfds = (int) ((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			if (nfds > 4)
				nfds = 4;
			memcpy(fds, CMSG_DATA(c), (size_t) nfds * sizeof(int));
		}
	char *body = NULL;
	if (n == (ssize_t) sizeof(h) && h.magic == CTL_MAGIC && h.len <= CTL_MAX && !(mh.msg_flags & MSG_CTRUNC)) {
		body = malloc(h.len + 1);
		if (body && read_by(cfd, body, h.len, &start) == 0) {
			body[h.len] = '\0';
			if (h.op == CTL_EXEC && (h.flags & CTL_CONTEXT))
				(void) serve_cell(m, cfd, &h, body, fds, nfds);
			else if (h.op == CTL_EXEC)
				(void) serve_exec(m, cfd, &h, body, fds, nfds);
			else if (h.op == CTL_STOP) {
				(void) reply(cfd, 0, NULL);
				(void) !write(m->wake[1], "s", 1);
			}
		}
	}
	free(body);
	for (int i = 0; i < nfds; i++)
		(void) close(fds[i]);
}

typedef struct conn {
	monitor *m;
	int fd;
} conn;

static void *serve_thread(void *arg)
{
	conn *c = arg;
	monitor *m = c->m;
	serve(m, c->fd);
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

/* The next moment the monitor must look at the clock: the idle timeout
 * (when nothing runs) or the lifetime. */
static void arm(monitor *m)
{
	double next = -1;
	pthread_mutex_lock(&m->lock);
	if (m->idle_ms && m->active == 0)
		next = (double) m->idle_ms - since_ms(&m->last);
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

static bool expired(monitor *m)
{
	pthread_mutex_lock(&m->lock);
	bool idle = m->idle_ms && m->active == 0 && since_ms(&m->last) >= (double) m->idle_ms;
	pthread_mutex_unlock(&m->lock);
	return idle || (m->lifetime_ms && since_ms(&m->started) >= (double) m->lifetime_ms);
}

static void remove_files(const monitor *m)
{
	char f[128];
	snprintf(f, sizeof(f), "%s.sock", m->name);
	(void) unlinkat(m->dirfd, f, 0);
	snprintf(f, sizeof(f), "%s.json", m->name);
	(void) unlinkat(m->dirfd, f, 0);
	snprintf(f, sizeof(f), "%s.lock", m->name);
	(void) unlinkat(m->dirfd, f, 0);
}

static int monitor_loop(monitor *m)
{
	int pidfd = nsbox_sandbox_pidfd(m->sb);
	for (;;) {
		arm(m);
		struct pollfd p[5] = {
			{ .fd = m->listen_fd, .events = POLLIN }, { .fd = m->sig_fd, .events = POLLIN },
			{ .fd = m->timer_fd, .events = POLLIN }, { .fd = pidfd, .events = POLLIN },
			{ .fd = m->wake[0], .events = POLLIN },
		};
		if (poll(p, 5, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (p[3].revents)
			return 0;   /* the sandbox ended (killed from outside) */
		if (p[1].revents) {
			struct signalfd_siginfo si;
			while (read(m->sig_fd, &si, sizeof(si)) == (ssize_t) sizeof(si))
				;
			return 0;
		}
		if (p[4].revents) {
			char b[64];
			ssize_t n = read(m->wake[0], b, sizeof(b));
			if (n > 0 && memchr(b, 's', (size_t) n))
				return 0;
		}
		if (p[2].revents) {
			uint64_t ticks;
			(void) !read(m->timer_fd, &ticks, sizeof(ticks));
			if (expired(m))
				return 0;
		}
		if (p[0].revents & POLLIN) {
			int cfd = accept4(m->listen_fd, NULL, NULL, SOCK_CLOEXEC);
			if (cfd < 0)
				continue;
			struct ucred cr;
			socklen_t cl = sizeof(cr);
			/* The directory is private already; the socket still
			 * serves no one but its owner. */
			conn *c = malloc(sizeof(*c));
			if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 || cr.uid != geteuid() || !c) {
				free(c);
				close(cfd);
				continue;
			}
			*c = (conn){ m, cfd };
			pthread_mutex_lock(&m->lock);
			m->active++;
			clock_gettime(CLOCK_MONOTONIC, &m->last);
			pthread_mutex_unlock(&m->lock);
			pthread_attr_t at;
			pthread_t t;
			pthread_attr_init(&at);
			pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
			if (pthread_create(&t, &at, serve_thread, c) != 0) {
				close(cfd);
				free(c);
				pthread_mutex_lock(&m->lock);
				m->active--;
				pthread_mutex_unlock(&m->lock);
			}
			pthread_attr_destroy(&at);
		}
	}
}

/* s as a JSON string's contents (escaped for a person first). */
static void json_str(int fd, const char *s)
{
	char *esc = nsbox_escape(s);
	for (const char *c = esc ? esc : ""; *c; c++) {
		if (*c == '"' || *c == '\\')
			dprintf(fd, "\\%c", *c);
		else if ((unsigned char) *c < 0x20)
			dprintf(fd, "\\u%04x", (unsigned) (unsigned char) *c);
		else
			dprintf(fd, "%c", *c);
	}
	free(esc);
}

static int write_info(const monitor *m, const run_args *a)
{
	char f[128], tmpf[140];
	snprintf(f, sizeof(f), "%s.json", m->name);
	snprintf(tmpf, sizeof(tmpf), ".%s.json.tmp", m->name);
	int fd = openat(m->dirfd, tmpf, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	const char *image = NULL;
	for (size_t i = 0; i < a->n_settings; i++)
		if (!strcmp(a->settings[i].key, "image") || !strcmp(a->settings[i].key, "rootfs"))
			image = a->settings[i].value;
	dprintf(fd, "{\"name\":\"%s\",\"id\":\"%s\",\"monitor_pid\":%d,\"started\":%lld,\"image\":\"", m->name, nsbox_sandbox_id(m->sb),
	        (int) getpid(), (long long) time(NULL));
	json_str(fd, image ? image : "default");
	dprintf(fd, "\",\"idle_timeout_ms\":%llu,\"lifetime_ms\":%llu}\n", (unsigned long long) m->idle_ms,
	        (unsigned long long) m->lifetime_ms);
	close(fd);
	return renameat(m->dirfd, tmpf, m->dirfd, f);
}

/* Coverage builds (make coverage): the cleaner ends with _exit, so it
 * writes its counts itself; it was forked before the monitor started any
 * thread, so no lock of gcov's can be held. */
#ifdef NSBOX_COVERAGE
void __gcov_dump(void);
#define cleaner_coverage_dump() __gcov_dump()
#else
#define cleaner_coverage_dump() ((void) 0)
#endif

/* The files go when the monitor does, however it ends (SIGKILL too): a
 * child of it waits for its death (PR_SET_PDEATHSIG), removes them, and
 * holds the lock (inherited) until then, so that `nsbox stop`, which waits
 * for the lock, returns once they are gone. */
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

/* In the monitor: set everything up, tell the starter, serve. */
static int monitor_main(monitor *m, const run_args *a, nsbox_config *cfg)
{
	char msg[1024] = "";
	nsbox_error *e = NULL;
	nsbox_spawn_options o = {
		.version = NSBOX_SPAWN_OPTIONS_VERSION,
		.flags = NSBOX_SPAWN_KEEP,
		.config = cfg,
		.stdin_fd = -1,
		.stdout_fd = -1,
		.stderr_fd = -1,
		.signal_fd = -1,
		.stats_fd = -1,
	};
	if (nsbox_spawn(&o, &m->sb, &e) < 0) {
		snprintf(msg, sizeof(msg), "E%s", nsbox_error_message(e));
		nsbox_error_free(e);
		goto fail;
	}
	(void) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	ctl_sock_path(&sa, m->dirfd, m->name);
	(void) unlinkat(m->dirfd, strrchr(sa.sun_path, '/') + 1, 0);   /* a dead monitor's */
	m->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	mode_t old = umask(077);
	int b = m->listen_fd < 0 ? -1 : bind(m->listen_fd, (struct sockaddr *) &sa, sizeof(sa));
	umask(old);
	if (b < 0 || listen(m->listen_fd, 64) < 0 || write_info(m, a) < 0 || start_cleaner(m) < 0) {
		snprintf(msg, sizeof(msg), "Elisten on '%.900s/%s.sock': %s", m->dir, m->name, strerror(errno));
		goto fail;
	}
	const char *w = nsbox_sandbox_warning(m->sb);
	snprintf(msg, sizeof(msg), "O%s", w ? w : "");
	(void) !write(m->ready_fd, msg, strlen(msg));
	close(m->ready_fd);
	m->ready_fd = -1;
	clock_gettime(CLOCK_MONOTONIC, &m->started);
	m->last = m->started;
	(void) monitor_loop(m);
	/* Stop: no new connection; the keeper and with it everything in the
	 * sandbox; the handlers then return (their execs ended); the contexts;
	 * the sandbox's cgroup. The files go with us (start_cleaner). */
	close(m->listen_fd);
	(void) nsbox_sandbox_kill(m->sb, SIGKILL);
	pthread_mutex_lock(&m->lock);
	while (m->active)
		pthread_cond_wait(&m->quiet, &m->lock);
	pthread_mutex_unlock(&m->lock);
	contexts_free(&m->contexts);
	nsbox_sandbox_free(m->sb);
	return 0;
fail:
	(void) !write(m->ready_fd, msg, strlen(msg));
	nsbox_sandbox_free(m->sb);
	remove_files(m);
	return EXIT_SETUP;
}

__attribute__((noreturn)) void monitor_run(monitor *m, int ready_fd, const run_args *a, nsbox_config *cfg)
{
	m->ready_fd = ready_fd;
	(void) setsid();
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		(void) dup2(null, 0);
		(void) dup2(null, 1);
		(void) dup2(null, 2);
		close(null);
	}
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->quiet, NULL);
	pthread_mutex_init(&m->ctx_lock, NULL);
	/* A client gone before its output was written is no reason to die. */
	(void) signal(SIGPIPE, SIG_IGN);
	if (pipe2(m->wake, O_CLOEXEC | O_NONBLOCK) < 0)
		_exit(EXIT_SETUP);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	(void) sigprocmask(SIG_BLOCK, &set, NULL);
	m->sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	m->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	/* exit, not _exit: nothing of the caller is buffered (flushed before
	 * the fork), and coverage builds write their counts at exit. */
	exit(monitor_main(m, a, cfg));
}
