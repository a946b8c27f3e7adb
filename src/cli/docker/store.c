/* The containers of the Docker front door: one private directory per name
 * under nsbox's state (nsbox_state_dir "docker", 0700, the caller's
 * own), holding
 *   lock            flock'ed by the container's owner for its whole life: the
 *                   door of a foreground run, or a detached one's runner (and
 *                   the sandbox's processes, which inherit it); a container
 *                   is running exactly while it is held
 *   container.json  what was asked (id, name, image, command, options)
 *   state.json      what happened (running: the owner's pid and start time;
 *                   exited: the exit code, OOM kill, error)
 *   log             a detached container's output (runner.c)
 * Every path is opened beneath the directory's fd without following a
 * symlink. The name is the directory's: mkdir makes a name taken atomically. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "docker/docker.h"

int store_open(bool create)
{
	char path[PATH_MAX];
	nsbox_error *e = NULL;
	int fd = nsbox_state_dir("docker", path, sizeof(path), create, &e);
	if (fd < 0 && fd != -ENOENT)
		print_error(e);
	nsbox_error_free(e);
	if (fd < 0)
		errno = -fd;
	return fd < 0 ? -1 : fd;
}

int random_hex(char *out, size_t n_bytes)
{
	unsigned char rnd[64];
	if (n_bytes > sizeof(rnd))
		return -EINVAL;
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, rnd, n_bytes) != (ssize_t) n_bytes) {
		int e = errno ? errno : EIO;
		if (fd >= 0)
			close(fd);
		return -e;
	}
	close(fd);
	for (size_t i = 0; i < n_bytes; i++)
		snprintf(out + 2 * i, 3, "%02x", rnd[i]);
	return 0;
}

void now_rfc3339(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	char head[32];
	strftime(head, sizeof(head), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, len, "%s.%09ldZ", head, ts.tv_nsec);
}

int store_create(int base, const char *name, int *dirfd, int *lock_fd)
{
	*dirfd = *lock_fd = -1;
	if (!nsbox_name_ok(name)) {
		print_msg("invalid container name '%s' (letters, digits, '-', '_', '.'; at most 63; not starting with "
		          "'.' or '-')", name);
		return -EINVAL;
	}
	if (mkdirat(base, name, 0700) < 0) {
		int e = errno;
		if (e == EEXIST)
			print_msg("the container name '%s' is already in use (nsbox docker rm %s)", name, name);
		else
			print_msg("create container '%s': %s", name, strerror(e));
		return -e;
	}
	*dirfd = openat(base, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*dirfd >= 0)
		*lock_fd = openat(*dirfd, "lock", O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (*lock_fd < 0 || flock(*lock_fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		print_msg("create container '%s': %s", name, strerror(e));
		if (*lock_fd >= 0)
			close(*lock_fd);
		if (*dirfd >= 0)
			close(*dirfd);
		*dirfd = *lock_fd = -1;
		(void) store_remove(base, name);
		return -e;
	}
	return 0;
}

/* A JSON file of the container's (bounded: these are small). */
static json_t *load(int dirfd, const char *file)
{
	int fd = openat(dirfd, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	char buf[1 << 16];
	size_t len = 0;
	ssize_t n;
	while (len < sizeof(buf) && (n = read(fd, buf + len, sizeof(buf) - len)) > 0)
		len += (size_t) n;
	close(fd);
	json_t *j = len < sizeof(buf) ? json_loadb(buf, len, 0, NULL) : NULL;
	if (j && !json_is_object(j)) {
		json_decref(j);
		j = NULL;
	}
	return j;
}

int store_write(int dirfd, const char *file, json_t *doc)
{
	char tmp[64];
	snprintf(tmp, sizeof(tmp), ".%s.tmp", file);
	char *text = json_dumps(doc, JSON_COMPACT);
	if (!text)
		return -ENOMEM;
	int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	int r = fd < 0 ? -errno : 0;
	size_t len = strlen(text);
	for (size_t off = 0; r == 0 && off < len;) {
		ssize_t w = write(fd, text + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			r = w < 0 ? -errno : -EIO;
		else
			off += (size_t) w;
	}
	if (fd >= 0)
		close(fd);
	free(text);
	if (r == 0 && renameat(dirfd, tmp, dirfd, file) < 0)
		r = -errno;
	return r;
}

bool store_locked(int dirfd)
{
	int fd = openat(dirfd, "lock", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool held = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(fd);
	return held;
}

bool store_wait_unlocked(int dirfd, unsigned ms)
{
	int fd = openat(dirfd, "lock", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return true;
	bool free_now = false;
	if (ms == 0) {
		while (!(free_now = flock(fd, LOCK_SH) == 0) && errno == EINTR)
			;
	} else {
		/* flock has no timeout: look every 20 ms. */
		for (unsigned waited = 0;; waited += 20) {
			if ((free_now = flock(fd, LOCK_SH | LOCK_NB) == 0) || waited >= ms)
				break;
			struct timespec t = { 0, 20 * 1000000 };
			nanosleep(&t, NULL);
		}
	}
	close(fd);
	return free_now;
}

static int load_container(int base, const char *name, container *c)
{
	*c = (container){ .dirfd = -1 };
	c->dirfd = openat(base, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (c->dirfd < 0)
		return -errno;
	c->info = load(c->dirfd, "container.json");
	const char *id = json_string_value(json_object_get(c->info, "Id"));
	if (!id) {   /* being made, or not one of ours */
		container_free(c);
		return -ENOENT;
	}
	snprintf(c->name, sizeof(c->name), "%s", name);
	snprintf(c->id, sizeof(c->id), "%s", id);
	c->state = load(c->dirfd, "state.json");
	c->running = store_locked(c->dirfd);
	return 0;
}

void container_free(container *c)
{
	if (c->dirfd >= 0)
		close(c->dirfd);
	json_decref(c->info);
	json_decref(c->state);
	*c = (container){ .dirfd = -1 };
}

int store_find(int base, const char *ref, container *c, bool quiet)
{
	*c = (container){ .dirfd = -1 };
	/* A name, as Docker also takes it with its leading '/'. */
	const char *name = ref[0] == '/' ? ref + 1 : ref;
	if (nsbox_name_ok(name) && load_container(base, name, c) == 0)
		return 0;
	/* An id, or a unique prefix of one. */
	size_t n = strlen(ref), found = 0;
	char match[64] = "";
	int dfd = dup(base);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d && dfd >= 0)
		close(dfd);
	struct dirent *de;
	while (d && n && strspn(ref, "0123456789abcdef") == n && (de = readdir(d))) {
		container k;
		if (de->d_name[0] == '.' || !nsbox_name_ok(de->d_name) || load_container(base, de->d_name, &k) < 0)
			continue;
		if (!strncmp(k.id, ref, n) && found++ == 0)
			snprintf(match, sizeof(match), "%s", k.name);
		container_free(&k);
	}
	if (d)
		closedir(d);
	if (found == 1)
		return load_container(base, match, c);
	if (!quiet)
		print_msg(found ? "'%s' names more than one container: give more of the id" : "no such container: %s",
		          ref);
	return found ? -EINVAL : -ENOENT;
}

int store_remove(int base, const char *name)
{
	int dfd = openat(base, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return errno == ENOENT ? 0 : -errno;
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -errno;
	}
	struct dirent *de;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			(void) unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
	return unlinkat(base, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? -errno : 0;
}

/* A process's start time (clock ticks since boot, /proc/PID/stat field
 * 22), or 0: with the pid, what identifies a process across pid reuse. */
static unsigned long long start_time(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* After the command's name, which may hold anything: its last ')'. */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	/* At the space before field 3 (the state): 19 steps to the one
	 * before field 22, the start time (field 23, the size, changes). */
	p++;
	for (int field = 2; p && field < 21; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

json_t *state_running(void)
{
	char now[64];
	now_rfc3339(now, sizeof(now));
	return json_pack("{s:s,s:b,s:i,s:I,s:s,s:s,s:i,s:b,s:s}", "Status", "running", "Running", 1, "Pid",
	                 (int) getpid(), "PidStart", (json_int_t) start_time(getpid()), "StartedAt", now,
	                 "FinishedAt", "0001-01-01T00:00:00Z", "ExitCode", 0, "OOMKilled", 0, "Error", "");
}

json_t *state_exited(json_t *prev, int exit_code, bool oom, const char *error)
{
	char now[64];
	now_rfc3339(now, sizeof(now));
	json_t *s = prev ? json_deep_copy(prev) : json_object();
	if (!s)
		return NULL;
	json_object_set_new(s, "Status", json_string("exited"));
	json_object_set_new(s, "Running", json_false());
	json_object_set_new(s, "Pid", json_integer(0));
	json_object_set_new(s, "ExitCode", json_integer(exit_code));
	json_object_set_new(s, "OOMKilled", json_boolean(oom));
	json_object_set_new(s, "Error", json_string(error ? error : ""));
	json_object_set_new(s, "FinishedAt", json_string(now));
	json_object_del(s, "Ports");   /* published while it ran */
	if (!json_object_get(s, "StartedAt"))
		json_object_set_new(s, "StartedAt", json_string("0001-01-01T00:00:00Z"));
	return s;
}

int owner_signal(const container *c, int sig)
{
	json_int_t pid = json_integer_value(json_object_get(c->state, "Pid"));
	json_int_t started = json_integer_value(json_object_get(c->state, "PidStart"));
	if (pid <= 0 || !c->running)
		return -ESRCH;
	/* Through a pidfd, and only if the process is the one that wrote
	 * the state (the same start time): never a process that reused its
	 * pid. */
	int pfd = (int) syscall(SYS_pidfd_open, (pid_t) pid, 0);
	if (pfd < 0)
		return -errno;
	int r = -ESRCH;
	if (started && start_time((pid_t) pid) == (unsigned long long) started)
		r = syscall(SYS_pidfd_send_signal, pfd, sig, NULL, 0) < 0 ? -errno : 0;
	close(pfd);
	return r;
}

int store_set_ports(int dirfd, json_t *ports)
{
	json_t *st = load(dirfd, "state.json");
	if (!st)
		return -ENOENT;
	json_object_set(st, "Ports", ports);
	int r = store_write(dirfd, "state.json", st);
	json_decref(st);
	return r;
}

int store_end(int base, int dirfd, const char *name, int status, bool oom, const char *why)
{
	container c;
	json_t *prev = store_find(base, name, &c, true) == 0 ? c.state : NULL;
	json_t *st = state_exited(prev, status, oom, why);
	int r = st ? store_write(dirfd, "state.json", st) : -ENOMEM;
	json_decref(st);
	if (prev)
		container_free(&c);
	return r;
}

json_t *store_effective_state(const container *c)
{
	json_t *s = c->state ? json_deep_copy(c->state) : json_object();
	if (!s)
		return NULL;
	const char *status = json_string_value(json_object_get(s, "Status"));
	if (c->running && status && !strcmp(status, "created")) {
		/* Being started: its owner has not written its pid yet. */
		json_object_set_new(s, "Running", json_false());
	} else if (c->running) {
		json_object_set_new(s, "Status", json_string("running"));
		json_object_set_new(s, "Running", json_true());
	} else if (status && !strcmp(status, "running")) {
		/* Its owner ended without recording the end: killed. */
		json_object_set_new(s, "Status", json_string("exited"));
		json_object_set_new(s, "Running", json_false());
		json_object_set_new(s, "ExitCode", json_integer(128 + SIGKILL));
		json_object_set_new(s, "Pid", json_integer(0));
		json_object_set_new(s, "Error", json_string("the container's nsbox process ended before it recorded the "
		                                            "command's end (killed)"));
	} else if (!status) {
		json_object_set_new(s, "Status", json_string("created"));
	}
	json_object_del(s, "PidStart");
	json_object_del(s, "Ports");   /* NetworkSettings.Ports (ports.c) */
	static const char *const fixed[] = { "Paused", "Restarting", "Dead" };
	for (size_t i = 0; i < 3; i++)
		json_object_set_new(s, fixed[i], json_false());
	if (!json_object_get(s, "OOMKilled"))
		json_object_set_new(s, "OOMKilled", json_false());
	if (!json_object_get(s, "ExitCode"))
		json_object_set_new(s, "ExitCode", json_integer(0));
	return s;
}

int store_settle(int base, container *c)
{
	for (unsigned waited = 0;; waited += 20) {
		const char *st = json_string_value(json_object_get(c->state, "Status"));
		if (!c->running || !st || strcmp(st, "created"))
			return 0;
		if (waited >= 60000)
			return -ETIMEDOUT;
		struct timespec t = { 0, 20 * 1000000 };
		nanosleep(&t, NULL);
		char name[64];
		snprintf(name, sizeof(name), "%s", c->name);
		container_free(c);
		int r = store_find(base, name, c, true);
		if (r < 0)
			return r;
	}
}
