/* A detached container's runner: the process that owns it. It starts the
 * long-lived sandbox as `nsbox start` does (live_start: the monitor is its
 * child and stops when it dies), runs the command in it as `nsbox exec`
 * does (the control socket, ctl.h), with the output passing through pipes
 * (or a pseudo-terminal with -t) that it keeps in the container's log, and
 * answered with the record (CTL_RECORD) for the exit code and OOM kill. When
 * the command ends, the container ends: the runner records how, stops the
 * sandbox, and (--rm) removes the container. Signals it gets go to the
 * command (docker stop sends them here), one byte each, as nsbox exec
 * passes them on. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "docker/docker.h"
#include "live/ctl.h"
#include "live/monitor.h"

/* The log: frames of Docker's multiplexed stream format, bounded. */
typedef struct logw {
	int fd;
	uint64_t written;
	bool full;
} logw;

static void log_frame(logw *l, int stream, const char *data, size_t len)
{
	if (l->fd < 0 || l->full)
		return;
	static const char full_msg[] = "nsbox: the log reached its bound (64 MiB): the rest of the output was dropped\n";
	if (l->written + len > LOG_MAX) {
		l->full = true;
		stream = 2;
		data = full_msg;
		len = sizeof(full_msg) - 1;
	}
	unsigned char h[8] = { (unsigned char) stream, 0, 0, 0, (unsigned char) (len >> 24), (unsigned char) (len >> 16),
	                       (unsigned char) (len >> 8), (unsigned char) len };
	struct iovec iov[2] = { { h, sizeof(h) }, { (void *) data, len } };
	/* One writev per frame: a reader sees a frame whole or not yet. */
	ssize_t w;
	while ((w = writev(l->fd, iov, 2)) < 0 && errno == EINTR)
		;
	if (w > 0)
		l->written += (uint64_t) w;
}

/* Read what fd has into the log; false at its end. */
static bool drain(int fd, int stream, logw *l)
{
	char buf[65536];
	ssize_t n = read(fd, buf, sizeof(buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return true;
	if (n <= 0)   /* end (EIO: a pseudo-terminal's last user closed it) */
		return false;
	log_frame(l, stream, buf, (size_t) n);
	return true;
}

/* Stop the sandbox and wait for its monitor. */
static void stop_sandbox(const char *name, pid_t monitor_pid)
{
	char *argv[] = { "stop", (char *) name, NULL };
	(void) cmd_stop(2, argv);
	if (monitor_pid > 0)
		(void) waitpid(monitor_pid, NULL, 0);
}

/* The request for the command: CTL_EXEC with its arguments. */
static int send_command(int fd, const docker_run *d, const int *fds, int nfds, bool with_stdin)
{
	/* No timeout: a container runs until its command exits or it is
	 * stopped, as Docker's do (each docker exec has the sandbox's). */
	ctl_req h = { .magic = CTL_MAGIC, .op = CTL_EXEC, .flags = CTL_RECORD | (with_stdin ? CTL_STDIN : 0),
	              .timeout_ms = NSBOX_TIMEOUT_NONE };
	size_t len = 0;
	if (d->entrypoint)
		len += strlen(d->entrypoint) + 1, h.argc++;
	for (int i = 0; i < d->argc; i++)
		len += strlen(d->argv[i]) + 1, h.argc++;
	if (len > CTL_MAX) {
		print_msg("docker run: the command line is longer than %d bytes", CTL_MAX);
		return -1;
	}
	char *body = malloc(len + 1), *pos = body;
	if (!body)
		return -1;
	if (d->entrypoint)
		pos = stpcpy(pos, d->entrypoint) + 1;
	for (int i = 0; i < d->argc; i++)
		pos = stpcpy(pos, d->argv[i]) + 1;
	h.len = (uint32_t) len;
	int r = ctl_send_req(fd, &h, body, fds, nfds);
	free(body);
	if (r < 0)
		print_msg("docker run: send the command to the sandbox: %s", strerror(errno));
	return r;
}

/* How the command ended, from the record: OOM kill, and the reason a run
 * that never started failed. */
static void read_record(const char *j, size_t len, bool *oom, char **why)
{
	json_t *r = json_loadb(j, len, 0, NULL);
	*oom = json_is_true(json_object_get(r, "oom_killed"));
	const char *m = json_string_value(json_object_get(json_object_get(r, "error"), "message"));
	*why = m ? strdup(m) : NULL;
	json_decref(r);
}

typedef struct streams {
	int conn, out, err, master, in_keep, sfd;
} streams;

/* Until the answer has come and the output has ended: output to the log,
 * signals to the command. The answer's status, or -1 if the sandbox ended
 * without one. */
static int supervise(streams *s, logw *l, bool *oom, char **why)
{
	ctl_reply rep = { .status = -1 };
	bool answered = false;
	while (!answered || s->out >= 0 || s->err >= 0 || s->master >= 0) {
		struct pollfd p[5] = {
			{ .fd = answered ? -1 : s->conn, .events = POLLIN }, { .fd = s->out, .events = POLLIN },
			{ .fd = s->err, .events = POLLIN }, { .fd = s->master, .events = POLLIN },
			{ .fd = answered ? -1 : s->sfd, .events = POLLIN },
		};
		if (poll(p, 5, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[4].revents & POLLIN) {
			struct signalfd_siginfo si;
			while (read(s->sfd, &si, sizeof(si)) == (ssize_t) sizeof(si)) {
				unsigned char b = (unsigned char) si.ssi_signo;
				(void) ctl_write_all(s->conn, &b, 1);
			}
		}
		int *fds[3] = { &s->out, &s->err, &s->master };
		for (int i = 0; i < 3; i++)
			if (p[1 + i].revents && !drain(*fds[i], i == 1 ? 2 : 1, l)) {
				close(*fds[i]);
				*fds[i] = -1;
			}
		if (p[0].revents) {
			answered = true;
			if (ctl_read_all(s->conn, &rep, sizeof(rep)) < 0) {
				rep.status = -1;
				continue;
			}
			char *j = rep.len && rep.len <= (16u << 20) ? malloc(rep.len) : NULL;
			if (j && ctl_read_all(s->conn, j, rep.len) == 0)
				read_record(j, rep.len, oom, why);
			free(j);
			/* Nothing more will read the command's stdin. */
			if (s->in_keep >= 0)
				close(s->in_keep);
			s->in_keep = -1;
		}
	}
	return rep.status;
}

/* The command's streams: a pseudo-terminal (-t), or pipes, and with -i a
 * stdin that stays open (nothing writes to it: a shell waits on it, as
 * `docker run -d -i` keeps it). fds/nfds go to the sandbox; to_close are
 * ours to close once sent. */
static int make_streams(const docker_run *d, streams *s, int *fds, int *nfds, int *to_close)
{
	*nfds = 0;
	if (d->tty) {
		int slave;
		if (tty_open(&s->master, &slave) < 0)
			return -1;
		fds[0] = fds[1] = fds[2] = slave;
		*nfds = 3;
		to_close[0] = slave;
		return 0;
	}
	int o[2], e[2], in[2] = { -1, -1 };
	if (pipe2(o, O_CLOEXEC) < 0 || pipe2(e, O_CLOEXEC) < 0 || (d->a.interactive && pipe2(in, O_CLOEXEC) < 0)) {
		print_msg("docker run: %s", strerror(errno));
		return -1;
	}
	if (d->a.interactive)
		fds[(*nfds)++] = in[0];
	fds[(*nfds)++] = o[1];
	fds[(*nfds)++] = e[1];
	s->out = o[0];
	s->err = e[0];
	s->in_keep = in[1];
	to_close[0] = o[1];
	to_close[1] = e[1];
	to_close[2] = in[0];
	return 0;
}

/* The sandbox, as nsbox start makes it (its timeout is each exec's). 0
 * with *mon the monitor, or -1 having said why. */
static int start_sandbox(const docker_run *d, int dirfd, pid_t *mon)
{
	run_args a = d->a;
	a.interactive = false;   /* the command's, not the sandbox's */
	char started_name[64];
	int r = live_start(&a, LIVE_DIE_WITH_PARENT, started_name, sizeof(started_name), mon);
	if (r != 0)
		return -1;
	json_t *st = state_running();
	r = st ? store_write(dirfd, "state.json", st) : -ENOMEM;
	json_decref(st);
	if (r < 0) {
		print_msg("docker run: could not record that container '%s' runs", d->a.name);
		return -1;
	}
	return 0;
}

/* The command to the sandbox, its output to the log. */
static int start_command(const docker_run *d, int dirfd, streams *s, logw *l)
{
	int fds[3], nfds = 0, to_close[3] = { -1, -1, -1 };
	l->fd = openat(dirfd, LOG_FILE, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (l->fd < 0) {
		print_msg("docker run: open the container's log: %s", strerror(errno));
		return -1;
	}
	if (make_streams(d, s, fds, &nfds, to_close) < 0)
		return -1;
	s->conn = ctl_connect(d->a.name);
	int r = s->conn < 0 ? -1 : send_command(s->conn, d, fds, nfds, d->a.interactive || d->tty);
	/* The sandbox has its copies: ours would keep the output open. */
	for (int i = 0; i < 3; i++)
		if (to_close[i] >= 0)
			close(to_close[i]);
	return r;
}

__attribute__((noreturn)) void runner_main(docker_run *d, int base, int dirfd, int lock_fd, int status_fd)
{
	(void) lock_fd;   /* held until we exit (and by the monitor, our child) */
	(void) signal(SIGPIPE, SIG_IGN);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	(void) sigprocmask(SIG_BLOCK, &set, NULL);
	streams s = { .conn = -1, .out = -1, .err = -1, .master = -1, .in_keep = -1 };
	s.sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	const char *name = d->a.name;
	pid_t mon = -1;
	logw l = { .fd = -1 };
	if (start_sandbox(d, dirfd, &mon) < 0) {
		(void) store_remove(base, name);
		exit(DOCKER_EXIT_RUN);
	}
	if (start_command(d, dirfd, &s, &l) < 0) {
		stop_sandbox(name, mon);
		(void) store_remove(base, name);
		exit(DOCKER_EXIT_RUN);
	}
	/* Running: the caller may go. */
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null >= 0) {
		(void) dup2(null, 2);
		close(null);
	}
	(void) !write(status_fd, "O", 1);
	close(status_fd);
	bool oom = false;
	char *why = NULL;
	int status = supervise(&s, &l, &oom, &why);
	if (status < 0) {   /* the sandbox was stopped under the command */
		status = 128 + SIGKILL;
		free(why);
		why = NULL;
	}
	(void) store_end(base, dirfd, name, status, oom, why);
	free(why);
	close(l.fd);
	close(s.conn);
	stop_sandbox(name, mon);
	if (d->rm)
		(void) store_remove(base, name);
	exit(0);
}
