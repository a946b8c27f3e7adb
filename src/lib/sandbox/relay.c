/* The payload's standard streams. No fd of the caller's enters a sandbox:
 * a terminal handed in as stdout is open read-write, so the payload could
 * read what the person types meanwhile (a password) and change the
 * terminal's modes for good; any fd handed to an exec can be passed on to
 * another process of the sandbox and kept after the exec returns. So the
 * payload gets pipes of the library's own - or with NSBOX_SPAWN_TTY a
 * pseudo-terminal of its own, whose window size follows the caller's - and
 * the supervisor copies between them and the caller's fds in its event loop
 * (supervise.c), as `docker run` does without and with -t; the caller's
 * terminal, made raw for -t, gets its modes back whatever happened.
 *
 * The supervisor must never block on the caller's end (its timeout and the
 * caller's signals are served by the same loop): a FIFO or a terminal is
 * reopened through /proc/self/fd with O_NONBLOCK (a description of our own:
 * the caller's keeps its flags), a socket is used with MSG_DONTWAIT, a
 * regular file never blocks. Output waiting for a slow reader stops the
 * reading of the payload's pipe, so the payload waits as it would have on
 * the caller's fd. A destination that is gone (EPIPE) closes the payload's
 * pipe: its next write fails as it would have. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <termios.h>
#include <unistd.h>

#include "base/error.h"
#include "sandbox/relay.h"
#include "sandbox/sandbox.h"

#define RELAY_CHUNK 65536
/* Chunks moved per event, so that one busy stream cannot starve the loop. */
#define RELAY_BATCH 8

enum { P_IN, P_OUT, P_ERR, P_N };

typedef struct pump {
	int src, dst;           /* ours; -1 once closed (dst -1 from the start: discard) */
	bool src_poll, dst_poll;   /* epoll can wait on them (not a regular file) */
	bool src_sock, dst_sock;   /* sockets: MSG_DONTWAIT */
	bool src_nb, dst_nb;       /* never wait (a description of our own with
	                            * O_NONBLOCK, or a socket): else one call per event */
	bool src_reg, dst_reg;     /* registered with the epoll set now */
	bool eof;
	bool used;
	bool eot;               /* into a terminal: its end is told as a typed ^D */
	char last;              /* the last byte written */
	char *buf;
	size_t off, len;
} pump;

struct relay {
	pump p[P_N];
	int ep;                 /* the supervisor's epoll set while it waits, or -1 */
	uint64_t base;
	int master;             /* NSBOX_SPAWN_TTY: the pseudo-terminal's master, or -1 */
	int size_from;          /* the caller's terminal its window size comes from, or -1 */
	int raw_fd;             /* the caller's terminal we made raw, or -1 */
	struct termios saved;   /* ...and its modes before */
};

/* ---- the caller's end ----------------------------------------------------- */

/* Our own fd for the caller's `fd` (O_RDONLY or O_WRONLY use), to wait on
 * without blocking: see above. *sock for a socket. */
static int caller_end(int fd, int acc, bool *sock)
{
	struct stat st;
	*sock = false;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISSOCK(st.st_mode)) {
		*sock = true;
	} else if (S_ISFIFO(st.st_mode) || (S_ISCHR(st.st_mode) && isatty(fd))) {
		/* Not a pseudo-terminal master: opening /dev/ptmx again would
		 * make a new terminal, not this one. */
		bool ptmx = S_ISCHR(st.st_mode) && major(st.st_rdev) == 5 && minor(st.st_rdev) == 2;
		char path[40];
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		int r = ptmx ? -1 : open(path, acc | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		struct stat again;
		if (r >= 0 && fstat(r, &again) == 0 && again.st_dev == st.st_dev && again.st_ino == st.st_ino &&
		    again.st_rdev == st.st_rdev)
			return r;
		if (r >= 0)
			close(r);
		/* (A FIFO with no reader left, or a terminal we may not open:
		 * written to as it is, which may wait.) */
	}
	int r = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	return r < 0 ? -errno : r;
}

static bool nonblocking(int fd, bool sock)
{
	int fl = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
	return sock || (fl >= 0 && (fl & O_NONBLOCK));
}

static bool same_file(int a, int b)
{
	struct stat sa, sb;
	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino &&
	       sa.st_rdev == sb.st_rdev;
}

/* ---- moving bytes --------------------------------------------------------- */

static ssize_t src_read_max(pump *p, size_t max)
{
	if (!p->buf && !(p->buf = malloc(RELAY_CHUNK))) {
		errno = ENOMEM;
		return -1;
	}
	if (max > RELAY_CHUNK)
		max = RELAY_CHUNK;
	if (p->src_sock)
		return recv(p->src, p->buf, max, MSG_DONTWAIT);
	return read(p->src, p->buf, max);
}

static ssize_t src_read(pump *p)
{
	return src_read_max(p, RELAY_CHUNK);
}

/* write(2) to a pipe whose reader is gone raises SIGPIPE in the writing
 * thread, which would kill the embedding program: blocked for the call, and
 * taken back if it was ours. */
static ssize_t write_quiet(int fd, const void *b, size_t n)
{
	sigset_t pipe_set, old, pending;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	(void) pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	bool was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
	ssize_t w = write(fd, b, n);
	int e = errno;
	if (w < 0 && e == EPIPE && !was_pending) {
		struct timespec now = { 0, 0 };
		while (sigtimedwait(&pipe_set, NULL, &now) < 0 && errno == EINTR)
			;
	}
	(void) pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return w;
}

static ssize_t dst_write(pump *p)
{
	size_t n = p->len - p->off;
	if (p->dst < 0)
		return (ssize_t) n;   /* nowhere to go: dropped */
	if (p->dst_sock)
		return send(p->dst, p->buf + p->off, n, MSG_DONTWAIT | MSG_NOSIGNAL);
	return write_quiet(p->dst, p->buf + p->off, n);
}

static void set_reg(relay *r, int fd, bool *reg, bool want, uint32_t events, uint64_t tag)
{
	if (r->ep < 0 || want == *reg || fd < 0)
		return;
	if (want) {
		struct epoll_event ev = { .events = events, .data.u64 = tag };
		*reg = epoll_ctl(r->ep, EPOLL_CTL_ADD, fd, &ev) == 0;
	} else {
		(void) epoll_ctl(r->ep, EPOLL_CTL_DEL, fd, NULL);
		*reg = false;
	}
}

/* Watch what the pump waits for: its source when it has room, its
 * destination when it holds bytes (or, for a source epoll cannot wait on,
 * whenever the destination takes more). Only then: a registered fd reports
 * EPOLLHUP whatever was asked for. */
static void pump_sync(relay *r, int k)
{
	pump *p = &r->p[k];
	bool live = p->src >= 0 && !p->eof;
	bool want_src = live && p->len == 0 && p->src_poll;
	bool want_dst = p->dst >= 0 && p->dst_poll && (p->len > 0 || (live && !p->src_poll));
	set_reg(r, p->src, &p->src_reg, want_src, EPOLLIN, r->base + 2 * (uint64_t) k);
	set_reg(r, p->dst, &p->dst_reg, want_dst, EPOLLOUT, r->base + 2 * (uint64_t) k + 1);
}

static void close_reg(relay *r, int *fd, bool *reg)
{
	set_reg(r, *fd, reg, false, 0, 0);
	if (*fd >= 0)
		(void) close(*fd);
	*fd = -1;
}

/* The end of a stream: its source said so, or its destination is gone
 * (which closes the payload's pipe too: its next write fails). */
static void pump_close(relay *r, int k)
{
	pump *p = &r->p[k];
	close_reg(r, &p->src, &p->src_reg);
	close_reg(r, &p->dst, &p->dst_reg);
	free(p->buf);
	p->buf = NULL;
	p->off = p->len = 0;
	p->eof = true;
}

static void pump_run(relay *r, int k)
{
	pump *p = &r->p[k];
	bool did_read = false, did_write = false;
	for (int i = 0; i < RELAY_BATCH; i++) {
		if (p->len == 0) {
			if (p->src < 0 || p->eof || (did_read && p->src_poll && !p->src_nb))
				break;
			did_read = true;
			ssize_t n = src_read(p);
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				break;
			if (n <= 0) {   /* the end (EIO: a terminal's last slave closed) */
				p->eof = true;
				/* A terminal has no end of its own: what reads it sees
				 * one when ^D starts a line (a second ^D ends a line
				 * left open), as if typed. */
				if (p->eot && p->dst >= 0) {
					static const char eot[2] = { 4, 4 };
					(void) write_quiet(p->dst, eot, p->last && p->last != '\n' ? 2 : 1);
				}
				break;
			}
			p->off = 0;
			p->len = (size_t) n;
		}
		/* An end that may wait is used once per readiness. */
		if (did_write && p->dst_poll && !p->dst_nb)
			break;
		did_write = true;
		ssize_t w = dst_write(p);
		if (w < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (w < 0) {
			pump_close(r, k);
			return;
		}
		if (w > 0)
			p->last = p->buf[p->off + (size_t) w - 1];
		p->off += (size_t) w;
		if (p->off == p->len)
			p->off = p->len = 0;
	}
	if (p->eof && p->len == 0)
		pump_close(r, k);
	else
		pump_sync(r, k);
}

int relay_watch(relay *r, int ep, uint64_t base)
{
	if (!r)
		return 0;
	r->ep = ep;
	r->base = base;
	for (int k = 0; k < P_N; k++) {
		pump *p = &r->p[k];
		if (!p->used)
			continue;
		p->src_nb = nonblocking(p->src, p->src_sock);
		p->dst_nb = nonblocking(p->dst, p->dst_sock);
		/* Which ends epoll can wait on (a regular file, /dev/zero:
		 * not; reading and writing them never waits either). */
		int ends[2] = { p->src, p->dst };
		bool *poll_ok[2] = { &p->src_poll, &p->dst_poll };
		for (int e = 0; e < 2; e++) {
			struct epoll_event ev = { .events = 0 };
			*poll_ok[e] = ends[e] >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, ends[e], &ev) == 0;
			if (*poll_ok[e])
				(void) epoll_ctl(ep, EPOLL_CTL_DEL, ends[e], NULL);
			else if (ends[e] >= 0 && errno != EPERM)
				return -errno;
		}
		pump_sync(r, k);
	}
	return 0;
}

void relay_event(relay *r, int ep, uint64_t k)
{
	(void) ep;
	if (r && k / 2 < P_N)
		pump_run(r, (int) (k / 2));
}

/* Until fd takes more; false when it never will. */
static bool wait_writable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	int n;
	while ((n = poll(&p, 1, -1)) < 0 && errno == EINTR)
		;
	return n == 1 && !(p.revents & (POLLERR | POLLHUP | POLLNVAL));
}

static void restore_terminal(relay *r)
{
	if (r->raw_fd < 0)
		return;
	(void) tcsetattr(r->raw_fd, TCSANOW, &r->saved);
	close(r->raw_fd);
	r->raw_fd = -1;
}

void relay_finish(relay *r, bool abandon)
{
	if (!r)
		return;
	/* Every process of the run or exec is gone: what is in the pipes now
	 * is the rest of its output. Only that is passed on - counted before
	 * it is read - not what is written meanwhile: a process that holds
	 * the pipe after the exec ended (passed to another exec of the
	 * sandbox) must not reach the caller's screen. Its stdin closes last,
	 * so that its end cannot prompt such a process to write first. */
	for (int k = P_OUT; k < P_N; k++) {
		pump *p = &r->p[k];
		int queued = 0;
		if (p->src >= 0 && ioctl(p->src, FIONREAD, &queued) < 0)
			queued = 0;
		size_t left = queued > 0 ? (size_t) queued : 0;
		for (;;) {
			if (p->len == 0) {
				ssize_t n = p->src >= 0 && left ? src_read_max(p, left) : 0;
				if (n < 0 && errno == EINTR)
					continue;
				if (n <= 0)
					break;
				left -= (size_t) n;
				p->off = 0;
				p->len = (size_t) n;
			}
			ssize_t w = dst_write(p);
			if (w > 0) {
				p->off += (size_t) w;
				if (p->off == p->len)
					p->off = p->len = 0;
				continue;
			}
			if (w < 0 && errno == EINTR)
				continue;
			/* A run that ended normally waits for a slow reader as
			 * its payload would have; a killed one does not. */
			if (w < 0 && errno == EAGAIN && !abandon && wait_writable(p->dst))
				continue;
			break;
		}
		pump_close(r, k);
	}
	pump_close(r, P_IN);
	restore_terminal(r);
	r->ep = -1;
}

int relay_winch(relay *r)
{
	struct winsize ws;
	if (!r || r->master < 0)
		return -ENOTTY;
	if (r->size_from < 0 || ioctl(r->size_from, TIOCGWINSZ, &ws) < 0)
		return r->size_from < 0 ? -ENOTTY : -errno;
	return ioctl(r->master, TIOCSWINSZ, &ws) < 0 ? -errno : 0;
}

void relay_free(relay *r)
{
	if (!r)
		return;
	relay_finish(r, true);
	if (r->master >= 0)
		close(r->master);
	if (r->size_from >= 0)
		close(r->size_from);
	free(r);
}

/* ---- setting up ----------------------------------------------------------- */

static relay *relay_of(nsbox_sandbox *sb)
{
	if (sb->relay)
		return sb->relay;
	relay *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->ep = r->master = r->size_from = r->raw_fd = -1;
	for (int k = 0; k < P_N; k++)
		r->p[k].src = r->p[k].dst = -1;
	return sb->relay = r;
}

static int null_fd(int *slot, int acc, nsbox_error **err)
{
	*slot = open("/dev/null", acc | O_CLOEXEC);
	return *slot < 0 ? nsbox_err(err, errno, "spawn", "open '/dev/null'") : *slot;
}

/* A pipe for the payload's stdout or stderr (k), relayed to the caller's
 * `target`: the payload's end in *child. */
static int out_pipe(relay *r, int k, int target, int *child, nsbox_error **err)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return nsbox_err(err, errno, "spawn", "create output pipe");
	(void) fcntl(p[0], F_SETFL, O_NONBLOCK);
	pump *q = &r->p[k];
	q->used = true;
	q->src = p[0];
	*child = p[1];
	int d = caller_end(target, O_WRONLY, &q->dst_sock);
	if (d < 0)
		return nsbox_err(err, -d, "spawn", "relay the command's output to fd %d", target);
	q->dst = d;
	return 0;
}

/* stdin: the caller's `from` relayed into a pipe (*child) or the terminal. */
static int in_pump(relay *r, int from, int into, nsbox_error **err)
{
	pump *q = &r->p[P_IN];
	q->used = true;
	q->dst = into;
	(void) fcntl(into, F_SETFL, O_NONBLOCK);
	int s = caller_end(from, O_RDONLY, &q->src_sock);
	if (s < 0)
		return nsbox_err(err, -s, "spawn", "relay the caller's stdin (fd %d)", from);
	q->src = s;
	return 0;
}

/* NSBOX_SPAWN_TTY: a pseudo-terminal of the sandbox's own; the payload gets
 * its slave as stdin, stdout and stderr (and makes it its controlling
 * terminal, child.c). */
static int open_tty(relay *r, int stdin_fd, int stdout_fd, int child_stdio[3], int close_after[4],
                    nsbox_error **err)
{
	r->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (r->master < 0)
		return nsbox_err(err, errno, "spawn", "open a pseudo-terminal");
	int unlock = 0;
	if (ioctl(r->master, TIOCSPTLCK, &unlock) < 0)
		return nsbox_err(err, errno, "spawn", "unlock the pseudo-terminal");
	/* Its peer through the master (no path to race on; Linux 4.13). */
	int slave = ioctl(r->master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (slave < 0) {
		char name[64];
		if (ptsname_r(r->master, name, sizeof(name)) != 0 ||
		    (slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0)
			return nsbox_err(err, errno, "spawn", "open the pseudo-terminal's peer");
	}
	close_after[0] = child_stdio[0] = child_stdio[1] = child_stdio[2] = slave;
	(void) fcntl(r->master, F_SETFL, O_NONBLOCK);
	int out = stdout_fd >= 0 ? stdout_fd : 1;
	pump *q = &r->p[P_OUT];
	q->used = true;
	q->src = fcntl(r->master, F_DUPFD_CLOEXEC, 3);
	if (q->src < 0)
		return nsbox_err(err, errno, "spawn", "relay the pseudo-terminal");
	/* (No fd 1 at all: what the payload writes is dropped.) */
	if (fcntl(out, F_GETFD) >= 0) {
		int d = caller_end(out, O_WRONLY, &q->dst_sock);
		if (d < 0)
			return nsbox_err(err, -d, "spawn", "relay the pseudo-terminal's output to fd %d", out);
		q->dst = d;
	}
	int size_from = isatty(out) ? out : stdin_fd >= 0 && isatty(stdin_fd) ? stdin_fd : -1;
	if (size_from >= 0) {
		r->size_from = fcntl(size_from, F_DUPFD_CLOEXEC, 3);
		(void) relay_winch(r);
	}
	if (stdin_fd < 0)
		return 0;
	int into = fcntl(r->master, F_DUPFD_CLOEXEC, 3);
	if (into < 0)
		return nsbox_err(err, errno, "spawn", "relay the pseudo-terminal");
	int e = in_pump(r, stdin_fd, into, err);
	if (e < 0)
		return e;
	r->p[P_IN].eot = true;
	/* The person's keys go to the payload's terminal as they are typed
	 * (^C is the payload's SIGINT there); the modes come back at the end. */
	if (isatty(stdin_fd) && tcgetattr(stdin_fd, &r->saved) == 0) {
		struct termios raw = r->saved;
		cfmakeraw(&raw);
		r->raw_fd = fcntl(stdin_fd, F_DUPFD_CLOEXEC, 3);
		if (r->raw_fd >= 0 && tcsetattr(r->raw_fd, TCSANOW, &raw) < 0) {
			close(r->raw_fd);
			r->raw_fd = -1;
		}
	}
	return 0;
}

int spawn_open_streams(nsbox_sandbox *sb, int stdin_fd, int stdout_fd, int stderr_fd, uint32_t flags,
                       int child_stdio[3], int close_after[4], nsbox_error **err)
{
	bool direct = flags & NSBOX_SPAWN_DIRECT_FDS;
	/* A long-lived sandbox's pid 1 runs nothing that writes: its execs
	 * have streams of their own. */
	bool keep = flags & NSBOX_SPAWN_KEEP;
	int given[3] = { stdin_fd, stdout_fd, stderr_fd };
	for (int i = 0; direct && i < 3; i++)
		if (given[i] >= 0 && isatty(given[i]))
			return nsbox_err(err, EINVAL, "spawn", "hand fd %d to the sandbox: it is a terminal, which is "
			                 "relayed, never handed in (without NSBOX_SPAWN_DIRECT_FDS)", given[i]);
	relay *r = NULL;
	if (!keep && !direct && (stdin_fd >= 0 || !sb->capture || (flags & NSBOX_SPAWN_TTY)) && !(r = relay_of(sb)))
		return nsbox_err(err, ENOMEM, "spawn", "set up the command's streams");
	if (!keep && (flags & NSBOX_SPAWN_TTY))
		return r ? open_tty(r, stdin_fd, stdout_fd, child_stdio, close_after, err)
		         : nsbox_err(err, EINVAL, "spawn", "a terminal with NSBOX_SPAWN_DIRECT_FDS");

	if (keep || stdin_fd < 0) {
		int e = null_fd(&close_after[0], O_RDONLY, err);
		if (e < 0)
			return e;
		child_stdio[0] = close_after[0];
	} else if (direct) {
		child_stdio[0] = stdin_fd;
	} else {
		int p[2];
		if (pipe2(p, O_CLOEXEC) < 0)
			return nsbox_err(err, errno, "spawn", "create input pipe");
		close_after[0] = child_stdio[0] = p[0];
		int e = in_pump(r, stdin_fd, p[1], err);
		if (e < 0)
			return e;
	}
	for (int i = 0; i < 2; i++) {
		int k = P_OUT + i, target = given[i + 1];
		if (sb->capture) {
			int p[2];
			if (pipe2(p, O_CLOEXEC) < 0)
				return nsbox_err(err, errno, "spawn", "create output pipe");
			sb->out_fd[i] = p[0];
			close_after[i + 1] = child_stdio[i + 1] = p[1];
			capture_init(&sb->streams[i], sb->plan->output_cap);
			continue;
		}
		if (direct && target >= 0) {
			child_stdio[i + 1] = target;
			continue;
		}
		if (!direct && !keep && target < 0)
			target = i + 1;   /* the caller's own stdout or stderr */
		if (keep || direct || fcntl(target, F_GETFD) < 0) {
			int e = null_fd(&close_after[i + 1], O_WRONLY, err);
			if (e < 0)
				return e;
			child_stdio[i + 1] = close_after[i + 1];
			continue;
		}
		/* stderr where stdout goes (2>&1, one terminal): one pipe, so
		 * that the two keep their order. */
		if (i == 1 && r && r->p[P_OUT].used && same_file(target, given[1] >= 0 ? given[1] : 1)) {
			child_stdio[2] = child_stdio[1];
			continue;
		}
		/* (Not captured and not direct: the relay was made above.) */
		int e = r ? out_pipe(r, k, target, &close_after[i + 1], err)
		          : nsbox_err(err, ENOMEM, "spawn", "set up the command's streams");
		child_stdio[i + 1] = close_after[i + 1];
		if (e < 0)
			return e;
	}
	return 0;
}
