/* Long-lived sandboxes from the command line: `nsbox start`, `exec`, `ps`,
 * `stop`. No daemon: each started sandbox has a monitor process of its own
 * (the sandbox's owner: it dies, the sandbox dies), listening on a unix
 * socket NAME.sock in the caller's directory of sandboxes (0700), which
 * serves only its own user (SO_PEERCRED). NAME.lock is flock'ed by the
 * monitor for its whole life: a live name cannot be taken twice, and `ps`
 * and `stop` tell a live sandbox from a dead one's leftovers by it.
 *
 * Each connection is served by a child of the monitor (fork), so execs run
 * side by side: it reads one request with the client's stdin/stdout/stderr
 * attached (SCM_RIGHTS), runs the command in the sandbox with those very
 * streams (or captures them with --json), and answers with the exit status
 * and, with --json, the record. A signal the client gets is passed on as
 * one byte; the client's end closing kills the exec. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"

extern char **environ;

#define CTL_MAGIC 0x4e534278u   /* "NSBx" */
#define CTL_MAX (256 * 1024)
enum { CTL_EXEC = 1, CTL_STOP = 2 };
enum { CTL_JSON = 1, CTL_STDIN = 2, CTL_WORKDIR = 4 };

/* A request: this header, then `len` bytes of NUL-terminated strings (the
 * working directory with CTL_WORKDIR, then argc arguments). */
typedef struct ctl_req {
	uint32_t magic, op, flags, argc, len;
	uint64_t timeout_ms;
} ctl_req;

/* The answer: the exit status nsbox run would have given, and the record's
 * length (then the record) with CTL_JSON. */
typedef struct ctl_reply {
	int32_t status;
	uint32_t len;
} ctl_reply;

/* ---- names and paths ------------------------------------------------------ */

static int sandboxes_dir(char *out, size_t len)
{
	const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	int n;
	if (geteuid() == 0)
		n = snprintf(out, len, "/var/lib/nsbox/state/sandboxes");
	else if (xdg && *xdg == '/')
		n = snprintf(out, len, "%s/nsbox/sandboxes", xdg);
	else if (home && *home == '/')
		n = snprintf(out, len, "%s/.local/state/nsbox/sandboxes", home);
	else {
		print_msg("find the directory of sandboxes: HOME is not set");
		return -1;
	}
	if (n < 0 || (size_t) n >= len) {
		print_msg("the directory of sandboxes is too long a path");
		return -1;
	}
	return 0;
}

/* The directory, created 0700 and checked to be ours and private. */
static int open_dir(char *path, size_t len, bool create)
{
	if (sandboxes_dir(path, len) < 0)
		return -1;
	if (create) {
		char tmp[PATH_MAX];
		snprintf(tmp, sizeof(tmp), "%s", path);
		for (char *s = tmp + 1; *s; s++)
			if (*s == '/') {
				*s = '\0';
				(void) mkdir(tmp, 0700);
				*s = '/';
			}
		(void) mkdir(tmp, 0700);
	}
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0) {
		if (errno != ENOENT || create)
			print_msg("open the directory of sandboxes '%s': %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077)) {
		print_msg("the directory of sandboxes '%s' must be owned by you and private (mode 0700)", path);
		close(fd);
		return -1;
	}
	return fd;
}

/* NAME.sock in the directory open as dirfd, through /proc/self/fd: a
 * socket's path must fit in 108 bytes, which the directory may not. */
static void sock_path(struct sockaddr_un *sa, int dirfd, const char *name)
{
	snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%.63s.sock", dirfd, name);
}

static bool name_ok(const char *n)
{
	size_t len = strlen(n);
	if (len == 0 || len > 63 || n[0] == '.' || n[0] == '-')
		return false;
	for (const char *c = n; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
		      *c == '-' || *c == '_' || *c == '.'))
			return false;
	return true;
}

static int check_name(const char *n)
{
	if (name_ok(n))
		return 0;
	print_msg("invalid sandbox name '%s' (letters, digits, '-', '_', '.'; at most 63; not starting with '.' or '-')", n);
	return -1;
}

static int connect_to(const char *name)
{
	char dir[PATH_MAX];
	int dfd = open_dir(dir, sizeof(dir), false);
	if (dfd < 0) {
		if (errno == ENOENT)
			print_msg("no sandbox named '%s' (see nsbox ps)", name);
		return -1;
	}
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	sock_path(&sa, dfd, name);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int c = fd < 0 ? -1 : connect(fd, (struct sockaddr *) &sa, sizeof(sa));
	int e = errno;
	close(dfd);
	if (c < 0) {
		if (fd >= 0)
			close(fd);
		if (e == ENOENT || e == ECONNREFUSED)
			print_msg("no sandbox named '%s' (see nsbox ps)", name);
		else
			print_msg("reach sandbox '%s': %s", name, strerror(e));
		return -1;
	}
	return fd;
}

/* ---- framing ----------------------------------------------------------------- */

static int write_all(int fd, const void *p, size_t n)
{
	const char *s = p;
	while (n) {
		ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		s += w;
		n -= (size_t) w;
	}
	return 0;
}

static int read_all(int fd, void *p, size_t n)
{
	char *s = p;
	while (n) {
		ssize_t r = read(fd, s, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EPIPE;
		s += r;
		n -= (size_t) r;
	}
	return 0;
}

/* The request and up to 3 fds, as the first bytes on the connection. */
static int send_req(int fd, const ctl_req *h, const char *body, const int *fds, int nfds)
{
	char cbuf[CMSG_SPACE(3 * sizeof(int))];
	memset(cbuf, 0, sizeof(cbuf));
	struct iovec iov = { (void *) h, sizeof(*h) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (nfds) {
		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE((size_t) nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN((size_t) nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, (size_t) nfds * sizeof(int));
	}
	if (sendmsg(fd, &mh, MSG_NOSIGNAL) != (ssize_t) sizeof(*h))
		return -1;
	return write_all(fd, body, h->len) < 0 ? -1 : 0;
}

/* ---- the handler: one connection, in a child of the monitor -------------------- */

typedef struct watch_args {
	int fd;
	nsbox_sandbox *exec;
} watch_args;

/* The client's signals (one byte each) go to the exec; its end closing
 * kills it. */
static void *watch_client(void *arg)
{
	watch_args *w = arg;
	for (;;) {
		unsigned char sig;
		ssize_t n = read(w->fd, &sig, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 1 && (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT)) {
			(void) nsbox_sandbox_kill(w->exec, sig);
			continue;
		}
		if (n == 1)
			continue;
		(void) nsbox_sandbox_kill(w->exec, SIGKILL);
		return NULL;
	}
}

static int reply(int fd, int status, const char *json)
{
	ctl_reply r = { .status = status, .len = json ? (uint32_t) strlen(json) : 0 };
	if (write_all(fd, &r, sizeof(r)) < 0)
		return -1;
	return json ? write_all(fd, json, r.len) : 0;
}

static int serve_exec(nsbox_sandbox *sb, int cfd, const ctl_req *h, char *body, const int *fds, int nfds)
{
	/* fds: the client's stdin (with CTL_STDIN), stdout, stderr. */
	int want = 2 + !!(h->flags & CTL_STDIN);
	if (nfds != want || h->argc == 0 || h->argc > 4096)
		return reply(cfd, EXIT_SETUP, NULL);
	char *argv[4097];
	char *pos = body, *end = body + h->len, *workdir = NULL;
	for (uint32_t i = 0; i < h->argc + !!(h->flags & CTL_WORKDIR); i++) {
		char *nul = memchr(pos, '\0', (size_t) (end - pos));
		if (!nul)
			return reply(cfd, EXIT_SETUP, NULL);
		if ((h->flags & CTL_WORKDIR) && i == 0)
			workdir = pos;
		else
			argv[i - !!(h->flags & CTL_WORKDIR)] = pos;
		pos = nul + 1;
	}
	argv[h->argc] = NULL;
	bool json = h->flags & CTL_JSON;
	int in = (h->flags & CTL_STDIN) ? fds[0] : -1;
	nsbox_exec_options o = {
		.version = NSBOX_EXEC_OPTIONS_VERSION,
		.flags = json ? NSBOX_SPAWN_CAPTURE : 0,
		.argv = (const char *const *) argv,
		.workdir = workdir,
		.stdin_fd = in,
		.stdout_fd = fds[want - 2],
		.stderr_fd = fds[want - 1],
		.fd3 = -1,
		.timeout_ms = h->timeout_ms,
		.signal_fd = -1,
	};
	nsbox_sandbox *ex = NULL;
	nsbox_result *res = NULL;
	nsbox_error *e = NULL;
	if (nsbox_sandbox_exec(sb, &o, &ex, &e) < 0) {
		nsbox_result *failed = NULL;
		char *j = NULL;
		if (json && nsbox_result_new_failed(NULL, e, &failed, NULL) == 0)
			(void) nsbox_result_to_json(failed, &j, NULL);
		else
			(void) dprintf(fds[want - 1], "nsbox: %s\n", nsbox_error_message(e));
		int r = reply(cfd, EXIT_SETUP, j);
		free(j);
		nsbox_result_free(failed);
		nsbox_error_free(e);
		return r;
	}
	watch_args w = { cfd, ex };
	pthread_t t;
	bool watching = pthread_create(&t, NULL, watch_client, &w) == 0;
	int waited = nsbox_sandbox_wait(ex, &res, &e);
	int status = EXIT_SETUP;
	char *j = NULL;
	if (waited == 0) {
		status = nsbox_result_exit_status(res);
		if (json)
			(void) nsbox_result_to_json(res, &j, NULL);
	}
	int r = reply(cfd, status, j);
	/* The watcher ends with the client's close; the exec is over. */
	if (watching) {
		(void) shutdown(cfd, SHUT_RDWR);
		pthread_join(t, NULL);
	}
	free(j);
	nsbox_result_free(res);
	nsbox_error_free(e);
	nsbox_sandbox_free(ex);
	return r;
}

static void serve(nsbox_sandbox *sb, int cfd)
{
	ctl_req h;
	int fds[3] = { -1, -1, -1 }, nfds = 0;
	char cbuf[CMSG_SPACE(3 * sizeof(int))];
	struct iovec iov = { &h, sizeof(h) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	ssize_t n = recvmsg(cfd, &mh, MSG_CMSG_CLOEXEC | MSG_WAITALL);
	for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && nfds == 0) {
			nfds = (int) ((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			if (nfds > 3)
				nfds = 3;
			memcpy(fds, CMSG_DATA(c), (size_t) nfds * sizeof(int));
		}
	char *body = NULL;
	if (n == (ssize_t) sizeof(h) && h.magic == CTL_MAGIC && h.len <= CTL_MAX && !(mh.msg_flags & MSG_CTRUNC)) {
		body = malloc(h.len + 1);
		if (body && read_all(cfd, body, h.len) == 0) {
			body[h.len] = '\0';
			if (h.op == CTL_EXEC)
				(void) serve_exec(sb, cfd, &h, body, fds, nfds);
			else if (h.op == CTL_STOP) {
				(void) kill(getppid(), SIGTERM);
				(void) reply(cfd, 0, NULL);
			}
		}
	}
	free(body);
	for (int i = 0; i < nfds; i++)
		(void) close(fds[i]);
}

/* ---- the monitor ------------------------------------------------------------- */

typedef struct monitor {
	const char *name;
	char dir[PATH_MAX];
	int dirfd, lock_fd, listen_fd, sig_fd, timer_fd, ready_fd;
	uint64_t idle_ms, lifetime_ms;
	struct timespec started, last;
	unsigned active;
	nsbox_sandbox *sb;
} monitor;

static double since_ms(const struct timespec *t)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double) (now.tv_sec - t->tv_sec) * 1e3 + (double) (now.tv_nsec - t->tv_nsec) / 1e6;
}

/* The next moment the monitor must look at the clock: the idle timeout
 * (when nothing runs) or the lifetime. */
static void arm(monitor *m)
{
	double next = -1;
	if (m->idle_ms && m->active == 0)
		next = (double) m->idle_ms - since_ms(&m->last);
	if (m->lifetime_ms) {
		double l = (double) m->lifetime_ms - since_ms(&m->started);
		if (next < 0 || l < next)
			next = l;
	}
	struct itimerspec its = { 0 };
	if (next >= 0 || m->idle_ms || m->lifetime_ms) {
		if (next < 1)
			next = 1;
		its.it_value.tv_sec = (time_t) (next / 1000);
		its.it_value.tv_nsec = (long) ((next - (double) its.it_value.tv_sec * 1000) * 1e6);
	}
	(void) timerfd_settime(m->timer_fd, 0, &its, NULL);
}

static bool expired(const monitor *m)
{
	return (m->lifetime_ms && since_ms(&m->started) >= (double) m->lifetime_ms) ||
	       (m->idle_ms && m->active == 0 && since_ms(&m->last) >= (double) m->idle_ms);
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

static void reap_handlers(monitor *m)
{
	pid_t p;
	while ((p = waitpid(-1, NULL, WNOHANG)) > 0) {
		if (m->active)
			m->active--;
		clock_gettime(CLOCK_MONOTONIC, &m->last);
	}
}

static int monitor_loop(monitor *m)
{
	int pidfd = nsbox_sandbox_pidfd(m->sb);
	for (;;) {
		arm(m);
		struct pollfd p[4] = {
			{ .fd = m->listen_fd, .events = POLLIN }, { .fd = m->sig_fd, .events = POLLIN },
			{ .fd = m->timer_fd, .events = POLLIN }, { .fd = pidfd, .events = POLLIN },
		};
		if (poll(p, 4, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (p[3].revents)
			return 0;   /* the sandbox ended (killed from outside) */
		if (p[1].revents) {
			struct signalfd_siginfo si;
			bool stop = false;
			while (read(m->sig_fd, &si, sizeof(si)) == (ssize_t) sizeof(si))
				stop |= si.ssi_signo != SIGCHLD;
			reap_handlers(m);
			if (stop)
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
			if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 || cr.uid != geteuid()) {
				close(cfd);
				continue;
			}
			pid_t h = fork();
			if (h == 0) {
				close(m->listen_fd);
				close(m->sig_fd);
				close(m->timer_fd);
				sigset_t none;
				sigemptyset(&none);
				(void) sigprocmask(SIG_SETMASK, &none, NULL);
				(void) prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
				serve(m->sb, cfd);
				_exit(0);
			}
			if (h > 0)
				m->active++;
			close(cfd);
			clock_gettime(CLOCK_MONOTONIC, &m->last);
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
	sock_path(&sa, m->dirfd, m->name);
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
	/* Stop: the keeper and everything in the sandbox, then the handlers
	 * (their execs ended with it), then our files. */
	close(m->listen_fd);
	nsbox_sandbox_free(m->sb);
	while (m->active && waitpid(-1, NULL, WNOHANG) > 0)
		m->active--;
	return 0;
fail:
	(void) !write(m->ready_fd, msg, strlen(msg));
	nsbox_sandbox_free(m->sb);
	remove_files(m);
	return EXIT_SETUP;
}

static int parse_ms(const char *what, const char *v, uint64_t *ms)
{
	if (!v)
		return 0;
	if (nsbox_parse_duration_ms(v, ms) < 0) {
		print_msg("%s: invalid duration '%s' (such as 30s, 10m, 2h; 0: none)", what, v);
		return -1;
	}
	return 0;
}

int cmd_start(int argc, char **argv)
{
	run_args a;
	char err[512];
	if (parse_start_args(argc, argv, environ, &a, err, sizeof(err)) < 0) {
		print_msg("%s", err);
		run_args_free(&a);
		return EXIT_SETUP;
	}
	if (a.help) {
		printf("Usage: nsbox start [--name NAME] [--idle-timeout D] [--lifetime D] [RUN OPTIONS]\n"
		       "Start a long-lived sandbox and print its name; run commands in it with\n"
		       "nsbox exec NAME -- COMMAND, end it with nsbox stop NAME. The run options\n"
		       "are nsbox run's ('nsbox run --help'); --timeout is each exec's default.\n");
		run_args_free(&a);
		return 0;
	}
	monitor m = { .dirfd = -1, .lock_fd = -1, .listen_fd = -1, .sig_fd = -1, .timer_fd = -1, .ready_fd = -1 };
	char gen[16];
	int rc = EXIT_SETUP;
	nsbox_config *cfg = NULL;
	nsbox_error *e = NULL;
	if (!a.name) {
		unsigned char rnd[4] = { 0 };
		int ur = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
		if (ur >= 0) {
			(void) !read(ur, rnd, sizeof(rnd));
			close(ur);
		}
		snprintf(gen, sizeof(gen), "sb-%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3]);
		a.name = gen;
	}
	m.name = a.name;
	if (check_name(a.name) < 0 || parse_ms("--idle-timeout", a.idle_timeout, &m.idle_ms) < 0 ||
	    parse_ms("--lifetime", a.lifetime, &m.lifetime_ms) < 0)
		goto out;
	int r = config_with_policy(a.policy, &cfg, &e);
	for (size_t i = 0; r == 0 && i < a.n_settings; i++)
		r = nsbox_config_set(cfg, a.settings[i].key, a.settings[i].value, a.settings[i].origin, &e);
	static const char *const placeholder[] = { "true", NULL };
	if (r == 0)
		r = nsbox_config_set_command(cfg, 1, placeholder, &e);
	if (r < 0) {
		print_error(e);
		nsbox_error_free(e);
		goto out;
	}
	/* What an exec does not pass through yet: the audit log and the
	 * artifacts (their record is a run's), the import gate (code). */
	for (size_t i = 0; i < a.n_settings; i++)
		if (!strncmp(a.settings[i].key, "audit.", 6) || !strncmp(a.settings[i].key, "code.", 5)) {
			print_msg("start: %s is not supported for long-lived sandboxes yet (use nsbox run)",
			          a.settings[i].origin);
			goto out;
		}
	if (a.json || a.result_file || a.stats_interval || a.interactive) {
		print_msg("start: --json, --result-file, --stats-interval and -i are options of nsbox exec");
		goto out;
	}
	m.dirfd = open_dir(m.dir, sizeof(m.dir), true);
	if (m.dirfd < 0)
		goto out;
	char lockname[80];
	snprintf(lockname, sizeof(lockname), "%s.lock", a.name);
	m.lock_fd = openat(m.dirfd, lockname, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (m.lock_fd < 0 || flock(m.lock_fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EWOULDBLOCK)
			print_msg("a sandbox named '%s' is running (nsbox stop %s)", a.name, a.name);
		else
			print_msg("lock '%s/%s': %s", m.dir, lockname, strerror(errno));
		rc = errno == EWOULDBLOCK ? 2 : EXIT_SETUP;
		goto out;
	}
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		print_msg("start: %s", strerror(errno));
		goto out;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		print_msg("start: fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		close(pfd[0]);
		m.ready_fd = pfd[1];
		(void) setsid();
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (null >= 0) {
			(void) dup2(null, 0);
			(void) dup2(null, 1);
			(void) dup2(null, 2);
			close(null);
		}
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, SIGCHLD);
		sigaddset(&set, SIGTERM);
		sigaddset(&set, SIGINT);
		sigaddset(&set, SIGHUP);
		(void) sigprocmask(SIG_BLOCK, &set, NULL);
		m.sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
		m.timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
		_exit(monitor_main(&m, &a, cfg));
	}
	close(pfd[1]);
	char msg[1024];
	ssize_t n = read(pfd[0], msg, sizeof(msg) - 1);
	close(pfd[0]);
	msg[n > 0 ? n : 0] = '\0';
	if (n > 0 && msg[0] == 'O') {
		if (msg[1])
			print_msg("warning: %s", msg + 1);
		printf("%s\n", a.name);
		rc = 0;
	} else {
		print_msg("start: %s", n > 1 ? msg + 1 : "the monitor failed");
		(void) waitpid(pid, NULL, 0);
	}
out:
	if (m.lock_fd >= 0)
		close(m.lock_fd);
	if (m.dirfd >= 0)
		close(m.dirfd);
	nsbox_config_free(cfg);
	run_args_free(&a);
	return rc;
}

static const char exec_usage[] =
	"Usage: nsbox exec NAME [--json] [--timeout D] [-i] [-w DIR] [--] COMMAND [ARG...]\n"
	"Run COMMAND in the running sandbox NAME (nsbox start) and exit with its status.\n"
	"\n"
	"      --json              capture the output and print the result record as JSON\n"
	"      --timeout DURATION  kill the command (and all it started) after DURATION\n"
	"  -i, --interactive       pass stdin through (default: /dev/null)\n"
	"  -w, --workdir DIR       working directory inside (default: the sandbox's)\n";

int cmd_exec(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' }, { "timeout", required_argument, NULL, 't' },
		{ "interactive", no_argument, NULL, 'i' }, { "workdir", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' }, { 0 },
	};
	bool json = false, interactive = false;
	const char *workdir = NULL, *timeout = NULL;
	/* NAME first, then the options (getopt starts at argv[1] of what it
	 * is given, which is NAME's slot). */
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(exec_usage, stdout);
		return 0;
	}
	if (argc < 3) {
		print_msg("exec: usage: nsbox exec NAME [OPTIONS] [--] COMMAND [ARG...]");
		return EXIT_SETUP;
	}
	const char *name = argv[1];
	argc--;
	argv++;
	int c;
	opterr = 0;
	optind = 0;
	while ((c = getopt_long(argc, argv, "+:iw:h", opts, NULL)) != -1)
		switch (c) {
		case 'j': json = true; break;
		case 't': timeout = optarg; break;
		case 'i': interactive = true; break;
		case 'w': workdir = optarg; break;
		case 'h': fputs(exec_usage, stdout); return 0;
		case ':': print_msg("exec: option '%s' needs a value", argv[optind - 1]); return EXIT_SETUP;
		default: print_msg("exec: unknown option '%s' (see nsbox exec --help)", argv[optind - 1]); return EXIT_SETUP;
		}
	if (optind >= argc) {
		print_msg("exec: no command given");
		return EXIT_SETUP;
	}
	uint64_t tmo = 0;
	if (check_name(name) < 0 || parse_ms("--timeout", timeout, &tmo) < 0)
		return EXIT_SETUP;
	if (workdir && workdir[0] != '/') {
		print_msg("exec: --workdir must be an absolute path inside the sandbox");
		return EXIT_SETUP;
	}
	ctl_req h = { .magic = CTL_MAGIC, .op = CTL_EXEC, .timeout_ms = tmo,
	              .flags = (json ? CTL_JSON : 0) | (interactive ? CTL_STDIN : 0) | (workdir ? CTL_WORKDIR : 0) };
	size_t len = workdir ? strlen(workdir) + 1 : 0;
	for (int i = optind; i < argc; i++, h.argc++)
		len += strlen(argv[i]) + 1;
	if (len > CTL_MAX) {
		print_msg("exec: the command line is longer than %d bytes", CTL_MAX);
		return EXIT_SETUP;
	}
	h.len = (uint32_t) len;
	char *body = malloc(len + 1), *pos = body;
	if (!body)
		return EXIT_SETUP;
	if (workdir)
		pos = stpcpy(pos, workdir) + 1;
	for (int i = optind; i < argc; i++)
		pos = stpcpy(pos, argv[i]) + 1;
	int fd = connect_to(name);
	if (fd < 0) {
		free(body);
		return EXIT_SETUP;
	}
	int fds[3] = { 0, 1, 2 };
	int sent = interactive ? send_req(fd, &h, body, fds, 3) : send_req(fd, &h, body, fds + 1, 2);
	free(body);
	if (sent < 0) {
		print_msg("exec: send the command to '%s': %s", name, strerror(errno));
		close(fd);
		return EXIT_SETUP;
	}
	/* Our signals go to the command, as with nsbox run. */
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	(void) sigprocmask(SIG_BLOCK, &set, &old);
	int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	ctl_reply rep = { .status = EXIT_SETUP };
	bool got = false;
	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
		if (poll(p, sfd >= 0 ? 2 : 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (sfd >= 0 && (p[1].revents & POLLIN)) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) == (ssize_t) sizeof(si)) {
				unsigned char b = (unsigned char) si.ssi_signo;
				(void) write_all(fd, &b, 1);
			}
		}
		if (p[0].revents) {
			got = read_all(fd, &rep, sizeof(rep)) == 0;
			break;
		}
	}
	int rc = got ? rep.status : EXIT_SETUP;
	if (!got)
		print_msg("exec: sandbox '%s' ended before the command did", name);
	if (got && rep.len) {
		char *j = rep.len <= (64u << 20) ? malloc(rep.len) : NULL;
		if (j && read_all(fd, j, rep.len) == 0)
			(void) !write(1, j, rep.len);
		else
			rc = EXIT_SETUP;
		free(j);
	}
	close(fd);
	if (sfd >= 0)
		close(sfd);
	(void) sigprocmask(SIG_SETMASK, &old, NULL);
	return rc;
}

/* Is NAME's monitor alive? Its lock says. */
static bool alive(int dfd, const char *name)
{
	char f[128];
	snprintf(f, sizeof(f), "%s.lock", name);
	int fd = openat(dfd, f, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool held = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(fd);
	return held;
}

int cmd_ps(int argc, char **argv)
{
	bool json = argc > 1 && !strcmp(argv[1], "--json");
	if (argc > 1 + json) {
		print_msg("ps: usage: nsbox ps [--json]");
		return EXIT_SETUP;
	}
	char dir[PATH_MAX];
	int dfd = open_dir(dir, sizeof(dir), false);
	if (dfd < 0 && errno != ENOENT)
		return EXIT_SETUP;
	if (!json)
		printf("%-24s %-8s %-20s %s\n", "NAME", "MONITOR", "STARTED", "IMAGE");
	else
		printf("[");
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *de;
	int n = 0;
	while (d && (de = readdir(d))) {
		size_t l = strlen(de->d_name);
		if (l < 6 || strcmp(de->d_name + l - 5, ".json") || de->d_name[0] == '.')
			continue;
		char name[64];
		snprintf(name, sizeof(name), "%.*s", (int) (l - 5), de->d_name);
		if (!name_ok(name) || !alive(dirfd(d), name))
			continue;
		int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		char buf[4096];
		ssize_t r = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
		if (fd >= 0)
			close(fd);
		if (r <= 0)
			continue;
		buf[r] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		if (json) {
			printf("%s%s", n ? "," : "", buf);
		} else {
			int pid = 0;
			long long started = 0;
			char image[256] = "";
			const char *p = strstr(buf, "\"monitor_pid\":");
			if (p)
				pid = atoi(p + 14);
			p = strstr(buf, "\"started\":");
			if (p)
				started = atoll(p + 10);
			p = strstr(buf, "\"image\":\"");
			if (p)
				snprintf(image, sizeof(image), "%.*s", (int) strcspn(p + 9, "\""), p + 9);
			char when[32] = "";
			time_t t = (time_t) started;
			struct tm tm;
			if (gmtime_r(&t, &tm))
				strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
			printf("%-24s %-8d %-20s %s\n", name, pid, when, image);
		}
		n++;
	}
	if (json)
		printf("]\n");
	if (d)
		closedir(d);
	return 0;
}

int cmd_stop(int argc, char **argv)
{
	if (argc != 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		if (argc == 2)
			printf("Usage: nsbox stop NAME\nEnd sandbox NAME and everything in it.\n");
		else
			print_msg("stop: usage: nsbox stop NAME");
		return argc == 2 ? 0 : EXIT_SETUP;
	}
	const char *name = argv[1];
	if (check_name(name) < 0)
		return EXIT_SETUP;
	int fd = connect_to(name);
	if (fd < 0)
		return EXIT_SETUP;
	ctl_req h = { .magic = CTL_MAGIC, .op = CTL_STOP };
	ctl_reply rep;
	if (send_req(fd, &h, "", NULL, 0) < 0 || read_all(fd, &rep, sizeof(rep)) < 0) {
		print_msg("stop: '%s' did not answer", name);
		close(fd);
		return EXIT_SETUP;
	}
	close(fd);
	/* Done when the monitor has let go of its lock: the sandbox, its
	 * cgroup and its files are gone. */
	char dir[PATH_MAX];
	int dfd = open_dir(dir, sizeof(dir), false);
	char f[128];
	snprintf(f, sizeof(f), "%s.lock", name);
	int lfd = dfd >= 0 ? openat(dfd, f, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
	if (lfd >= 0) {
		(void) flock(lfd, LOCK_SH);
		close(lfd);
	}
	if (dfd >= 0)
		close(dfd);
	return 0;
}
