/* A detached container's runner: the process that owns it. It starts the
 * long-lived sandbox as `nsbox start` does (live_cli_start, owned by this
 * process: the sandbox stops when it dies) and runs the command in it as
 * `nsbox exec` does (nsbox_run on the sandbox's handle), its output going
 * through pipes (with -t, the command's own terminal, relayed by the
 * library to the stdout pipe) into the container's log, and the record
 * telling the exit code and OOM kill. When the command ends, the container
 * ends: the runner records how, stops the sandbox, and (--rm) removes the
 * container. Signals it gets go to the command (docker stop sends them
 * here), as nsbox exec passes them on. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cli.h"
#include "docker/docker.h"
#include "live/live_cli.h"

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

typedef struct streams {
	int out, err, in_keep;
	logw *log;
} streams;

/* The output pipes into the log, until both end. */
static void *drain_all(void *arg)
{
	streams *s = arg;
	while (s->out >= 0 || s->err >= 0) {
		struct pollfd p[2] = { { .fd = s->out, .events = POLLIN }, { .fd = s->err, .events = POLLIN } };
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		int *fds[2] = { &s->out, &s->err };
		for (int i = 0; i < 2; i++)
			if (p[i].revents && !drain(*fds[i], i + 1, s->log)) {
				close(*fds[i]);
				*fds[i] = -1;
			}
	}
	return NULL;
}

/* How the command ended: the exit status, the OOM kill, and the reason a
 * run that never started failed. */
static int outcome(nsbox_result *res, bool *oom, char **why)
{
	char *j = NULL;
	*oom = false;
	*why = NULL;
	if (!res)
		return -1;
	if (nsbox_result_to_json(res, &j, NULL) == 0) {
		json_t *r = json_loads(j, 0, NULL);
		*oom = json_is_true(json_object_get(r, "oom_killed"));
		json_decref(r);
	}
	free(j);
	const nsbox_error *e = nsbox_result_error(res);
	if (e && nsbox_result_status(res) == NSBOX_STATUS_SETUP_FAILED)
		*why = strdup(nsbox_error_message(e));
	return nsbox_result_exit_status(res);
}

__attribute__((noreturn)) void runner_main(docker_run *d, int base, int dirfd, int lock_fd, int status_fd)
{
	(void) lock_fd;   /* held until we exit */
	(void) signal(SIGPIPE, SIG_IGN);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	(void) sigprocmask(SIG_BLOCK, &set, NULL);
	int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	const char *name = d->a.name;
	logw l = { .fd = -1 };
	streams s = { .out = -1, .err = -1, .in_keep = -1, .log = &l };
	int o[2] = { -1, -1 }, e[2] = { -1, -1 }, in[2] = { -1, -1 };
	/* The sandbox, as nsbox start makes it (its timeout is each exec's):
	 * ours, so it ends with us. */
	run_args a = d->a;
	a.interactive = false;   /* the command's, not the sandbox's */
	char started[64];
	nsbox_sandbox *sb = NULL;
	json_t *st = NULL, *ports = NULL;
	if (live_cli_start(&a, 0, started, sizeof(started), &sb) != 0)
		goto fail;
	/* Where the monitor listens for the published ports (docker port). */
	if (d->n_ports && !(ports = ports_bound(sb)))
		goto fail;
	st = state_running();
	if (st && ports)
		json_object_set(st, "Ports", ports);
	if (!st || store_write(dirfd, "state.json", st) < 0) {
		print_msg("docker run: could not record that container '%s' runs", name);
		goto fail;
	}
	l.fd = openat(dirfd, LOG_FILE, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (l.fd < 0 || pipe2(o, O_CLOEXEC) < 0 || pipe2(e, O_CLOEXEC) < 0 ||
	    (d->a.interactive && pipe2(in, O_CLOEXEC) < 0)) {
		print_msg("docker run: the container's log and streams: %s", strerror(errno));
		goto fail;
	}
	/* -i: a stdin that stays open (nothing writes to it: a shell waits on
	 * it, as `docker run -d -i` keeps it). */
	s.out = o[0];
	s.err = e[0];
	s.in_keep = in[1];
	pthread_t t;
	if (pthread_create(&t, NULL, drain_all, &s) != 0)
		goto fail;
	/* Running: the caller may go. */
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null >= 0) {
		(void) dup2(null, 2);
		close(null);
	}
	(void) !write(status_fd, "O", 1);
	close(status_fd);
	char **argv = calloc((size_t) d->argc + 2, sizeof(char *));
	int n = 0;
	if (argv && d->entrypoint)
		argv[n++] = (char *) d->entrypoint;
	for (int i = 0; argv && i < d->argc; i++)
		argv[n++] = d->argv[i];
	/* No timeout: a container runs until its command exits or it is
	 * stopped, as Docker's do (each docker exec has the sandbox's). */
	nsbox_run_options ro = {
		.version = NSBOX_RUN_OPTIONS_VERSION,
		.flags = d->tty ? NSBOX_SPAWN_TTY : 0,
		.sandbox = sb,
		.argv = (const char *const *) argv,
		.timeout_ms = NSBOX_TIMEOUT_NONE,
		.stdin_fd = in[0],
		.stdout_fd = o[1],
		.stderr_fd = e[1],
		.signal_fd = sfd,
		.stats_fd = -1,
	};
	nsbox_result *res = NULL;
	nsbox_error *err = NULL;
	int ran = argv ? nsbox_run(&ro, &res, &err) : -ENOMEM;
	free(argv);
	/* Nothing more writes the output or reads the input. */
	for (int *fd = (int[]){ o[1], e[1], in[0], in[1] }, k = 0; k < 4; k++)
		if (fd[k] >= 0)
			close(fd[k]);
	pthread_join(t, NULL);
	bool oom = false;
	char *why = NULL;
	int status = outcome(res, &oom, &why);
	if (ran < 0 && !res) {
		free(why);
		why = strdup(nsbox_error_message(err));
		status = 125;
	}
	if (status < 0)   /* the sandbox was stopped under the command */
		status = 128 + SIGKILL;
	nsbox_result_free(res);
	nsbox_error_free(err);
	(void) store_end(base, dirfd, name, status, oom, why);
	free(why);
	close(l.fd);
	json_decref(st);
	json_decref(ports);
	nsbox_sandbox_free(sb);   /* ours: it stops */
	if (d->rm)
		(void) store_remove(base, name);
	exit(0);
fail:
	json_decref(st);
	json_decref(ports);
	nsbox_sandbox_free(sb);
	(void) store_remove(base, name);
	exit(DOCKER_EXIT_RUN);
}
