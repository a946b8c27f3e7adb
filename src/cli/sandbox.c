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
#include "context.h"

extern char **environ;

#define CTL_MAGIC 0x4e534278u   /* "NSBx" */
#define CTL_MAX (256 * 1024)
enum { CTL_EXEC = 1, CTL_STOP = 2 };
enum { CTL_JSON = 1, CTL_STDIN = 2, CTL_WORKDIR = 4, CTL_CONTEXT = 8, CTL_RESTART = 16, CTL_ENV = 32 };

/* A request: this header, then `len` bytes of NUL-terminated strings (the
 * working directory with CTL_WORKDIR, then argc arguments, then with
 * CTL_ENV the NAME=VALUE entries to set, up to the end). */
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

/* ---- the monitor ------------------------------------------------------------- */

typedef struct monitor {
	const char *name;
	char dir[PATH_MAX];
	int dirfd, lock_fd, listen_fd, sig_fd, timer_fd, ready_fd;
	int wake[2];            /* handlers -> main loop: 'w' (one ended), 's' (stop) */
	uint64_t idle_ms, lifetime_ms;
	struct timespec started;
	nsbox_sandbox *sb;
	pthread_mutex_t lock;   /* active, last */
	pthread_cond_t quiet;
	unsigned active;        /* connections being served */
	struct timespec last;
	pthread_mutex_t ctx_lock;
	context *contexts;
} monitor;

/* ---- a handler: one connection, in a thread of the monitor ---------------------- */

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

/* A failure before the command ran: the message on the client's stderr,
 * and with --json the record of a failed run (from the library's error, or
 * the context's). */
static int refuse(int cfd, bool json, int err_fd, const nsbox_error *e, const char *why)
{
	if (err_fd >= 0)
		(void) dprintf(err_fd, "nsbox: %s\n", e ? nsbox_error_message(e) : why);
	char *j = NULL;
	nsbox_result *failed = NULL;
	if (json && e && nsbox_result_new_failed(NULL, e, &failed, NULL) == 0)
		(void) nsbox_result_to_json(failed, &j, NULL);
	else if (json)
		j = context_failed_record(why);
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

static int serve_exec(monitor *m, int cfd, const ctl_req *h, char *body, const int *fds, int nfds)
{
	/* fds: the client's stdin (with CTL_STDIN), stdout, stderr. */
	int want = 2 + !!(h->flags & CTL_STDIN);
	bool json = h->flags & CTL_JSON;
	int nwd = !!(h->flags & CTL_WORKDIR);
	/* With CTL_ENV, every string after the arguments is an entry. */
	uint32_t total = h->argc + (uint32_t) nwd;
	if (h->flags & CTL_ENV)
		for (uint32_t i = 0, seen = 0; i < h->len; i++)
			if (!body[i] && ++seen > h->argc + (uint32_t) nwd)
				total++;
	static const uint32_t max = 8192;
	if (nfds != want || h->argc == 0 || total > max)
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
	nsbox_exec_options o = {
		.version = NSBOX_EXEC_OPTIONS_VERSION,
		.flags = (json ? NSBOX_SPAWN_CAPTURE : 0) | ((h->flags & CTL_ENV) ? NSBOX_EXEC_ENV_ADD : 0),
		.argv = (const char *const *) argv,
		.envp = (h->flags & CTL_ENV) ? (const char *const *) envp : NULL,
		.workdir = nwd ? strs[0] : NULL,
		.stdin_fd = (h->flags & CTL_STDIN) ? fds[0] : -1,
		.stdout_fd = fds[want - 2],
		.stderr_fd = fds[want - 1],
		.fd3 = -1,
		.timeout_ms = h->timeout_ms,
		.signal_fd = -1,
	};
	nsbox_sandbox *ex = NULL;
	nsbox_result *res = NULL;
	nsbox_error *e = NULL;
	int started = nsbox_sandbox_exec(m->sb, &o, &ex, &e);
	free(strs);   /* the library copied them */
	if (started < 0) {
		int r = refuse(cfd, json, fds[want - 1], e, NULL);
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

typedef struct cell_watch {
	int fd;
	context *c;
} cell_watch;

static void *watch_cell_client(void *arg)
{
	cell_watch *w = arg;
	for (;;) {
		unsigned char sig;
		ssize_t n = read(w->fd, &sig, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 1 && sig != SIGINT && sig != SIGTERM && sig != SIGHUP && sig != SIGQUIT)
			continue;
		context_interrupt(w->c);
		if (n != 1)
			return NULL;
	}
}

/* A cell: body is NAME, LANG and (unless only --restart) the code. */
static int serve_cell(monitor *m, int cfd, const ctl_req *h, char *body, const int *fds, int nfds)
{
	bool json = h->flags & CTL_JSON;
	char *strs[3] = { NULL, NULL, NULL };
	if (nfds != 2 || (h->argc != 2 && h->argc != 3) || !body_strings(body, h->len, h->argc, strs) ||
	    !name_ok(strs[0]) || (strcmp(strs[1], "python") && strcmp(strs[1], "node")))
		return reply(cfd, EXIT_SETUP, NULL);
	char why[512] = "";
	context *c = context_find(&m->contexts, &m->ctx_lock, strs[0], strs[1], why, sizeof(why));
	if (!c)
		return refuse(cfd, json, fds[1], NULL, why);
	char *record = NULL;
	/* The client's Ctrl-C (or its end closing) interrupts the cell. */
	cell_watch w = { cfd, c };
	pthread_t t;
	bool watching = pthread_create(&t, NULL, watch_cell_client, &w) == 0;
	int rc = context_cell(c, m->sb, strs[2], h->timeout_ms, h->flags & CTL_RESTART, json ? -1 : fds[0],
	                      json ? -1 : fds[1], &record, why, sizeof(why));
	if (watching) {
		if (rc >= 0)
			(void) reply(cfd, rc, json ? record : NULL);
		(void) shutdown(cfd, SHUT_RDWR);
		pthread_join(t, NULL);
		if (rc >= 0) {
			free(record);
			return 0;
		}
	}
	if (rc < 0)
		return refuse(cfd, json, fds[1], NULL, why);
	int r = reply(cfd, rc, json ? record : NULL);
	free(record);
	return r;
}

static void serve(monitor *m, int cfd)
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
	monitor m = { .dirfd = -1, .lock_fd = -1, .listen_fd = -1, .sig_fd = -1, .timer_fd = -1, .ready_fd = -1,
	              .wake = { -1, -1 } };
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
		pthread_mutex_init(&m.lock, NULL);
		pthread_cond_init(&m.quiet, NULL);
		pthread_mutex_init(&m.ctx_lock, NULL);
		/* A client gone before its output was written is no reason to die. */
		(void) signal(SIGPIPE, SIG_IGN);
		if (pipe2(m.wake, O_CLOEXEC | O_NONBLOCK) < 0)
			_exit(EXIT_SETUP);
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, SIGTERM);
		sigaddset(&set, SIGINT);
		sigaddset(&set, SIGHUP);
		(void) sigprocmask(SIG_BLOCK, &set, NULL);
		m.sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
		m.timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
		/* exit, not _exit: nothing of the caller is buffered (flushed before
		 * the fork), and coverage builds write their counts at exit. */
		exit(monitor_main(&m, &a, cfg));
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

static int round_trip(const char *name, ctl_req *h, char *body, bool with_stdin);
static int exec_cell(const char *name, const char *ctx_name, const char *lang, const char *code, const char *file,
                     int nargs, bool restart, bool json, uint64_t tmo, bool bad_opts);

static const char exec_usage[] =
	"Usage: nsbox exec NAME [--json] [--timeout D] [-i] [-w DIR] [--] COMMAND [ARG...]\n"
	"Run COMMAND in the running sandbox NAME (nsbox start) and exit with its status.\n"
	"\n"
	"      --json              capture the output and print the result record as JSON\n"
	"      --timeout DURATION  kill the command (and all it started) after DURATION\n"
	"  -i, --interactive       pass stdin through (default: /dev/null)\n"
	"  -w, --workdir DIR       working directory inside (default: the sandbox's)\n"
	"  -e, --env NAME=VALUE    set a variable for this command (the sandbox's others stay)\n"
	"      --env-pass NAME     the same, with NAME's value here (if it is set)\n"
	"\n"
	"   or: nsbox exec NAME --context C [--lang python|node] [--restart] (-c CODE | FILE | -)\n"
	"Run a cell of code in the sandbox's persistent interpreter C (made at its first\n"
	"use): variables persist from one cell to the next; a timeout interrupts the cell\n"
	"and keeps the interpreter; --restart starts a fresh one (alone: only that).\n"
	"\n"
	"      --context C         the context's name\n"
	"      --lang L            python (default) or node\n"
	"  -c CODE                 the cell's code (else from FILE, or stdin with -)\n"
	"      --restart           a fresh interpreter before the cell\n";

/* The cell's code: -c, a file, or stdin ("-"); malloc'ed. */
static char *read_code(const char *inline_code, const char *file)
{
	if (inline_code)
		return strdup(inline_code);
	if (!file)
		return NULL;
	int fd = strcmp(file, "-") ? open(file, O_RDONLY | O_CLOEXEC) : 0;
	if (fd < 0) {
		print_msg("exec: open '%s': %s", file, strerror(errno));
		return NULL;
	}
	size_t cap = 65536, len = 0;
	char *buf = malloc(cap);
	ssize_t n;
	while (buf && (n = read(fd, buf + len, cap - len - 1)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || len + (size_t) n > CTL_MAX - 256) {
			print_msg("exec: read the code: %s", n < 0 ? strerror(errno) : "longer than 256 KiB");
			free(buf);
			buf = NULL;
			break;
		}
		len += (size_t) n;
		if (len + 1 == cap) {
			char *nb = realloc(buf, cap *= 2);
			if (!nb)
				free(buf);
			buf = nb;
		}
	}
	if (fd > 0)
		close(fd);
	if (buf)
		buf[len] = '\0';
	if (buf && strlen(buf) != len) {
		print_msg("exec: the code holds a NUL byte");
		free(buf);
		return NULL;
	}
	return buf;
}

/* -e NAME=VALUE and --env-pass NAME, in order: NULL-terminated, malloc'ed. */
typedef struct env_list {
	char **v;
	size_t n;
} env_list;

static void env_list_free(env_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
}

static int env_list_add(env_list *l, int opt, const char *arg)
{
	const char *eq = strchr(arg, '=');
	if (opt == 'e' ? !eq || eq == arg : !*arg || eq) {
		print_msg("exec: %s '%s': expected %s", opt == 'e' ? "--env" : "--env-pass", arg,
		          opt == 'e' ? "NAME=VALUE" : "a NAME");
		return -1;
	}
	const char *v = opt == 'e' ? NULL : getenv(arg);
	if (opt != 'e' && !v)
		return 0;   /* not set here: not set there, as with run's --env-pass */
	char *kv = NULL;
	if (opt == 'e' ? !(kv = strdup(arg)) : asprintf(&kv, "%s=%s", arg, v) < 0)
		return -1;
	l->v[l->n++] = kv;
	return 0;
}

int cmd_exec(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' }, { "timeout", required_argument, NULL, 't' },
		{ "interactive", no_argument, NULL, 'i' }, { "workdir", required_argument, NULL, 'w' },
		{ "context", required_argument, NULL, 'C' }, { "lang", required_argument, NULL, 'L' },
		{ "restart", no_argument, NULL, 'R' }, { "help", no_argument, NULL, 'h' },
		{ "env", required_argument, NULL, 'e' }, { "env-pass", required_argument, NULL, 'P' }, { 0 },
	};
	bool json = false, interactive = false, restart = false;
	const char *workdir = NULL, *timeout = NULL, *ctx_name = NULL, *lang = NULL, *code = NULL;
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
	env_list env = { calloc((size_t) argc + 1, sizeof(char *)), 0 };
	if (!env.v)
		return EXIT_SETUP;
	int c, rc = EXIT_SETUP;
	opterr = 0;
	optind = 0;
	while ((c = getopt_long(argc, argv, "+:iw:c:he:", opts, NULL)) != -1)
		switch (c) {
		case 'C': ctx_name = optarg; break;
		case 'L': lang = optarg; break;
		case 'R': restart = true; break;
		case 'c': code = optarg; break;
		case 'j': json = true; break;
		case 't': timeout = optarg; break;
		case 'i': interactive = true; break;
		case 'w': workdir = optarg; break;
		case 'e':
		case 'P':
			if (env_list_add(&env, c, optarg) < 0)
				goto out;
			break;
		case 'h': fputs(exec_usage, stdout); rc = 0; goto out;
		case ':': print_msg("exec: option '%s' needs a value", argv[optind - 1]); goto out;
		default: print_msg("exec: unknown option '%s' (see nsbox exec --help)", argv[optind - 1]); goto out;
		}
	uint64_t tmo = 0;
	if (check_name(name) < 0 || parse_ms("--timeout", timeout, &tmo) < 0)
		goto out;
	if (ctx_name || lang || code || restart) {
		rc = exec_cell(name, ctx_name, lang ? lang : "python", code, optind < argc ? argv[optind] : NULL,
		               argc - optind, restart, json, tmo, interactive || workdir || env.n);
		goto out;
	}
	if (optind >= argc) {
		print_msg("exec: no command given");
		goto out;
	}
	if (workdir && workdir[0] != '/') {
		print_msg("exec: --workdir must be an absolute path inside the sandbox");
		goto out;
	}
	ctl_req h = { .magic = CTL_MAGIC, .op = CTL_EXEC, .timeout_ms = tmo,
	              .flags = (json ? CTL_JSON : 0) | (interactive ? CTL_STDIN : 0) | (workdir ? CTL_WORKDIR : 0) |
	                       (env.n ? CTL_ENV : 0) };
	size_t len = workdir ? strlen(workdir) + 1 : 0;
	for (int i = optind; i < argc; i++, h.argc++)
		len += strlen(argv[i]) + 1;
	for (size_t i = 0; i < env.n; i++)
		len += strlen(env.v[i]) + 1;
	if (len > CTL_MAX) {
		print_msg("exec: the command line and environment are longer than %d bytes", CTL_MAX);
		goto out;
	}
	h.len = (uint32_t) len;
	char *body = malloc(len + 1), *pos = body;
	if (!body)
		goto out;
	if (workdir)
		pos = stpcpy(pos, workdir) + 1;
	for (int i = optind; i < argc; i++)
		pos = stpcpy(pos, argv[i]) + 1;
	for (size_t i = 0; i < env.n; i++)
		pos = stpcpy(pos, env.v[i]) + 1;
	rc = round_trip(name, &h, body, interactive);
out:
	env_list_free(&env);
	return rc;
}

/* Send the request with our stdout and stderr (and stdin), pass our
 * signals on, print the record, return the exit status. Frees body. */
static int round_trip(const char *name, ctl_req *h, char *body, bool with_stdin)
{
	int fd = connect_to(name);
	if (fd < 0) {
		free(body);
		return EXIT_SETUP;
	}
	int fds[3] = { 0, 1, 2 };
	int sent = with_stdin ? send_req(fd, h, body, fds, 3) : send_req(fd, h, body, fds + 1, 2);
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

/* nsbox exec NAME --context C ...: one cell. */
static int exec_cell(const char *name, const char *ctx_name, const char *lang, const char *code, const char *file,
                     int nargs, bool restart, bool json, uint64_t tmo, bool bad_opts)
{
	if (!ctx_name) {
		print_msg("exec: --lang, -c and --restart go with --context NAME");
		return EXIT_SETUP;
	}
	if (!name_ok(ctx_name)) {
		print_msg("exec: invalid context name '%s' (letters, digits, '-', '_', '.')", ctx_name);
		return EXIT_SETUP;
	}
	if (strcmp(lang, "python") && strcmp(lang, "node")) {
		print_msg("exec: --lang: '%s' has no context (python, node)", lang);
		return EXIT_SETUP;
	}
	if (bad_opts || nargs > 1 || (code && nargs) || (!code && !nargs && !restart)) {
		print_msg("exec: a context takes -c CODE, a FILE or - (stdin); not -i, -w or -e");
		return EXIT_SETUP;
	}
	char *text = (code || nargs) ? read_code(code, file) : NULL;
	if ((code || nargs) && !text)
		return EXIT_SETUP;
	size_t len = strlen(ctx_name) + strlen(lang) + 2 + (text ? strlen(text) + 1 : 0);
	if (len > CTL_MAX) {
		print_msg("exec: the code is longer than %d bytes", CTL_MAX);
		free(text);
		return EXIT_SETUP;
	}
	ctl_req h = { .magic = CTL_MAGIC, .op = CTL_EXEC, .timeout_ms = tmo, .argc = text ? 3 : 2, .len = (uint32_t) len,
	              .flags = CTL_CONTEXT | (json ? CTL_JSON : 0) | (restart ? CTL_RESTART : 0) };
	char *body = malloc(len + 1), *pos = body;
	if (!body) {
		free(text);
		return EXIT_SETUP;
	}
	pos = stpcpy(pos, ctx_name) + 1;
	pos = stpcpy(pos, lang) + 1;
	if (text)
		(void) stpcpy(pos, text);
	free(text);
	return round_trip(name, &h, body, false);
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
