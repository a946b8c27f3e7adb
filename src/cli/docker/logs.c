/* docker logs: a detached container's log (runner.c writes it), frame by
 * frame to our stdout and stderr; --tail, --follow. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "docker/docker.h"
#include "opts.h"

/* ---- logs --------------------------------------------------------------------------- */

typedef struct logs_opts {
	bool follow, help;
	const char *tail, *refused;
} logs_opts;

enum { L_FOLLOW = 1, L_TAIL, L_TIMESTAMPS, L_SINCE, L_UNTIL, L_DETAILS, L_HELP };
static const opt_def logs_defs[] = {
	{ "follow", 'f', OPT_BOOL, L_FOLLOW, "keep printing the output until the container ends", NULL },
	{ "tail", 'n', "N", L_TAIL, "only the last N lines (all: everything)", NULL },
	{ "help", 0, NULL, L_HELP, "print this help", NULL },
	{ "timestamps", 't', OPT_BOOL, L_TIMESTAMPS, NULL, NULL },
	{ "since", 0, "T", L_SINCE, NULL, NULL },
	{ "until", 0, "T", L_UNTIL, NULL, NULL },
	{ "details", 0, OPT_BOOL, L_DETAILS, NULL, NULL },
	{ 0 },
};

static void logs_take(int id, const char *v, void *ctx)
{
	logs_opts *o = ctx;
	switch (id) {
	case L_FOLLOW: o->follow = v; break;
	case L_TAIL: o->tail = v; break;
	case L_TIMESTAMPS: case L_SINCE: case L_UNTIL: case L_DETAILS:
		if (v)
			o->refused = id == L_TIMESTAMPS ? "--timestamps" : id == L_SINCE ? "--since" : id == L_UNTIL ? "--until"
			             : "--details";
		break;
	case L_HELP:
		fputs("Usage: nsbox docker logs [OPTIONS] CONTAINER\nPrint a detached container's output: its stdout on "
		      "stdout, its stderr on stderr.\n\n", stdout);
		opt_help(stdout, logs_defs);
		o->help = true;
		break;
	}
}

typedef struct frame_reader {
	int fd;
	unsigned char head[8];
	size_t have;        /* bytes of the header read */
	uint32_t left;      /* of the frame's data */
	int stream;
} frame_reader;

/* Copy whole frames from the log to our stdout/stderr from where the
 * reader is, up to the end of what is written; skip bytes of data first
 * (--tail). */
static void copy_frames(frame_reader *r, uint64_t *skip)
{
	char buf[65536];
	for (;;) {
		if (r->left == 0) {
			ssize_t n = read(r->fd, r->head + r->have, sizeof(r->head) - r->have);
			if (n <= 0)
				return;
			r->have += (size_t) n;
			if (r->have < sizeof(r->head))
				continue;
			r->have = 0;
			r->stream = r->head[0] == 2 ? 2 : 1;
			r->left = (uint32_t) r->head[4] << 24 | (uint32_t) r->head[5] << 16 | (uint32_t) r->head[6] << 8 |
			          r->head[7];
			continue;
		}
		ssize_t n = read(r->fd, buf, r->left < sizeof(buf) ? r->left : sizeof(buf));
		if (n <= 0)
			return;
		r->left -= (uint32_t) n;
		size_t off = 0;
		if (*skip) {
			off = *skip < (uint64_t) n ? (size_t) *skip : (size_t) n;
			*skip -= off;
		}
		if (off < (size_t) n) {
			fflush(stdout);
			(void) !write(r->stream, buf + off, (size_t) n - off);
		}
	}
}

/* The bytes of data to skip for --tail N: all but the last N lines. */
static uint64_t tail_skip(int fd, long lines)
{
	uint64_t total = 0, nl_count = 0;
	char last = '\n';
	frame_reader r = { .fd = fd };
	char buf[65536];
	/* Pass 1: the data's length and its newlines. */
	for (;;) {
		if (read(fd, r.head, 8) != 8)
			break;
		uint32_t len = (uint32_t) r.head[4] << 24 | (uint32_t) r.head[5] << 16 | (uint32_t) r.head[6] << 8 | r.head[7];
		while (len) {
			ssize_t n = read(fd, buf, len < sizeof(buf) ? len : sizeof(buf));
			if (n <= 0)
				goto counted;
			for (ssize_t i = 0; i < n; i++)
				nl_count += buf[i] == '\n';
			last = buf[n - 1];
			total += (uint64_t) n;
			len -= (uint32_t) n;
		}
	}
counted:;
	/* A last line without its newline counts as one: skip past the
	 * newline that ends line (count - N). */
	uint64_t count = nl_count + (last != '\n'), seen = 0, pos = 0;
	uint64_t want_after = count > (uint64_t) lines ? count - (uint64_t) lines : 0;
	(void) lseek(fd, 0, SEEK_SET);
	if (want_after == 0)
		return 0;
	for (;;) {
		if (read(fd, r.head, 8) != 8)
			break;
		uint32_t len = (uint32_t) r.head[4] << 24 | (uint32_t) r.head[5] << 16 | (uint32_t) r.head[6] << 8 | r.head[7];
		while (len) {
			ssize_t n = read(fd, buf, len < sizeof(buf) ? len : sizeof(buf));
			if (n <= 0)
				goto done;
			for (ssize_t i = 0; i < n; i++) {
				pos++;
				if (buf[i] == '\n' && ++seen == want_after) {
					(void) lseek(fd, 0, SEEK_SET);
					return pos;
				}
			}
			len -= (uint32_t) n;
		}
	}
done:
	(void) lseek(fd, 0, SEEK_SET);
	return total;
}

/* Until the container has ended and the log is read to its end. */
static void follow(const container *c, frame_reader *r, uint64_t *skip)
{
	int in = inotify_init1(IN_CLOEXEC);
	char p[64];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", r->fd);
	if (in >= 0)
		(void) inotify_add_watch(in, p, IN_MODIFY);
	while (store_locked(c->dirfd)) {
		struct pollfd pf = { .fd = in, .events = POLLIN };
		/* The lock has no event of its own: look at it now and then. */
		if (poll(&pf, in >= 0 ? 1 : 0, 200) > 0) {
			char ev[4096];
			(void) !read(in, ev, sizeof(ev));
		}
		copy_frames(r, skip);
	}
	copy_frames(r, skip);
	if (in >= 0)
		close(in);
}

/* The log of a detached container: 0 with *fd (-1: nothing written yet),
 * or -1 having said why. */
static int open_log(const container *c, int *fd)
{
	if (!container_detached(c)) {
		print_msg("docker logs: container '%s' ran in the foreground: its output went to the caller, and nsbox kept "
		          "no log of it", c->name);
		return -1;
	}
	*fd = openat(c->dirfd, LOG_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (*fd < 0 && errno != ENOENT) {
		print_msg("docker logs: open the log of '%s': %s", c->name, strerror(errno));
		return -1;
	}
	return 0;
}

int docker_cmd_logs(int argc, char **argv)
{
	logs_opts o = { 0 };
	int first;
	if (docker_parse_opts("logs", logs_defs, argc, argv, logs_take, &o, &first) < 0)
		return DOCKER_EXIT_CMD;
	if (o.help)
		return 0;
	if (o.refused) {
		print_msg("docker logs: %s: refused: nsbox keeps the output alone, without times", o.refused);
		return DOCKER_EXIT_CMD;
	}
	long lines = -1;
	if (o.tail && strcmp(o.tail, "all")) {
		char *e = NULL;
		lines = strtol(o.tail, &e, 10);
		if (!*o.tail || *e || lines < 0) {
			print_msg("docker logs: --tail '%s': expected a number of lines or all", o.tail);
			return DOCKER_EXIT_CMD;
		}
	}
	if (argc - first != 1) {
		print_msg("docker logs: usage: nsbox docker logs [OPTIONS] CONTAINER");
		return DOCKER_EXIT_CMD;
	}
	int base = store_open(false), rc = DOCKER_EXIT_CMD;
	container c = { .dirfd = -1 };
	frame_reader r = { .fd = -1 };
	if (base < 0)
		print_msg("no such container: %s", argv[first]);
	if (base < 0 || store_find(base, argv[first], &c, false) < 0 || open_log(&c, &r.fd) < 0)
		goto out;
	rc = 0;
	if (r.fd < 0)
		goto out;   /* nothing written yet */
	uint64_t skip = 0;
	if (lines == 0)
		(void) lseek(r.fd, 0, SEEK_END);   /* only what comes (with -f) */
	else if (lines > 0)
		skip = tail_skip(r.fd, lines);
	copy_frames(&r, &skip);
	if (o.follow)
		follow(&c, &r, &skip);
out:
	if (r.fd >= 0)
		close(r.fd);
	container_free(&c);
	if (base >= 0)
		close(base);
	return rc;
}
