/* Started sandboxes: nsbox_live_start() execs the sandbox's monitor (the
 * program nsbox-monitor, monitor.c), which owns the sandbox and serves it
 * on NAME.sock, and returns a remote handle (remote.c) that every
 * nsbox_sandbox function takes. Any process of the same user attaches to
 * it by name (nsbox_live_connect), lists them (nsbox_live_list), stops
 * them (nsbox_live_stop). No daemon: one monitor per sandbox, gone with
 * it. NAME.lock is flock'ed for the monitor's whole life: a live name
 * cannot be taken twice, and the lock tells a live sandbox from a dead
 * one's leftovers. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/error.h"
#include "base/strv.h"
#include "config/conf.h"
#include "live/ctl.h"
#include "live/live.h"
#include "live/remote.h"
#include "sandbox/sandbox.h"

#ifndef PKGLIBEXECDIR
#error "PKGLIBEXECDIR must name the directory of nsbox-monitor"
#endif

extern char **environ;

/* Where nsbox-monitor is: NSBOX_MONITOR (not honoured in a set-id
 * program), beside the libnsbox that is running (a build tree's or a
 * staged copy), else where `make install` put it. */
static void monitor_path(char *out, size_t len)
{
	const char *env = secure_getenv("NSBOX_MONITOR");
	if (env && *env) {
		snprintf(out, len, "%s", env);
		return;
	}
	Dl_info info;
	if (dladdr((void *) monitor_path, &info) && info.dli_fname && info.dli_fname[0] == '/') {
		const char *slash = strrchr(info.dli_fname, '/');
		if (snprintf(out, len, "%.*s/nsbox-monitor", (int) (slash - info.dli_fname), info.dli_fname) < (int) len &&
		    access(out, X_OK) == 0)
			return;
	}
	snprintf(out, len, "%s/nsbox-monitor", PKGLIBEXECDIR);
}

static void gen_name(char *out, size_t len)
{
	unsigned char rnd[4] = { 0 };
	(void) getrandom(rnd, sizeof(rnd), GRND_NONBLOCK);
	snprintf(out, len, "sb-%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3]);
}

/* In the forked child (of a possibly threaded caller: async-signal-safe
 * calls only): the fds in place, nothing else of the caller's, signals as
 * a new program expects them; then the monitor, in a second child, so that
 * it is no child of the caller's (the caller reaps this one at once). */
static __attribute__((noreturn)) void exec_monitor(const char *path, char *const *argv, const int fds[5])
{
	if (setsid() < 0 || fork() != 0)   /* the intermediate ends here */
		_exit(0);
	/* Above every target first, so that no move overwrites another. */
	int high[5];
	for (int i = 0; i < 5; i++)
		high[i] = fds[i] >= 0 ? fcntl(fds[i], F_DUPFD, 64) : -1;
	for (int i = 0; i < 5; i++) {
		if (high[i] >= 0 && dup2(high[i], LIVE_FD_LOCK + i) < 0)
			_exit(127);
		if (high[i] < 0)
			(void) close(LIVE_FD_LOCK + i);
	}
	int null = open("/dev/null", O_RDWR);
	if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
		_exit(127);
	(void) syscall(SYS_close_range, LIVE_FD_OWNER + 1, ~0U, 0);
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	for (int s = 1; s < NSIG; s++)
		(void) sigaction(s, &dfl, NULL);
	sigset_t none;
	sigemptyset(&none);
	(void) sigprocmask(SIG_SETMASK, &none, NULL);
	execve(path, argv, environ);
	_exit(127);
}

static int read_ready(int fd, char **ready_msg)
{
	size_t cap = 4096, len = 0;
	char *b = malloc(cap);
	if (!b)
		return -ENOMEM;
	for (;;) {
		if (len + 1 == cap) {
			char *n = cap < (1u << 20) ? realloc(b, cap *= 2) : NULL;
			if (!n)
				break;
			b = n;
		}
		ssize_t r = read(fd, b + len, cap - len - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t) r;
	}
	b[len] = '\0';
	*ready_msg = b;
	return 0;
}

int nsbox_live_start(const nsbox_live_options *o, nsbox_sandbox **out, nsbox_error **err)
{
	if (!o || !out || !o->config || o->version < 1 || o->version > NSBOX_LIVE_OPTIONS_VERSION ||
	    (o->flags & ~(NSBOX_LIVE_DETACHED | NSBOX_LIVE_PAUSE_WHEN_IDLE)))
		return nsbox_err(err, EINVAL, "live", "start a sandbox: invalid options");
	*out = NULL;
	const char *from = o->version >= 2 ? o->from : NULL;
	char name[64];
	if (o->name)
		snprintf(name, sizeof(name), "%.63s", o->name);
	else
		gen_name(name, sizeof(name));
	int r = ctl_check_name(o->name ? o->name : name, err);
	if (r < 0)
		return r;
	/* Every exec and cell is governed by this configuration (nsbox_run):
	 * what would refuse them all (the rules joining keys, an audit log
	 * that cannot be opened) refuses the start. */
	nsbox_governor *gov = NULL;
	r = nsbox_config_validate(o->config, err);
	if (r == 0 && (r = nsbox_governor_begin(o->config, NULL, NULL, 0, &gov, NULL, err)) == 0)
		nsbox_governor_free(gov);
	if (r < 0)
		return r;
	char *yaml = NULL;
	r = nsbox_config_to_yaml(o->config, &yaml, err);
	if (r < 0)
		return r;
	char dir[PATH_MAX], path[PATH_MAX], lockname[80];
	int fds[5] = { -1, -1, -1, -1, -1 }, pipefd[2] = { -1, -1 };
	char *ready_msg = NULL;
	strv argv = { 0 };
	int dfd = ctl_open_dir(dir, sizeof(dir), true, err);
	if (dfd < 0) {
		free(yaml);
		return dfd;
	}
	fds[1] = dfd;
	snprintf(lockname, sizeof(lockname), "%s.lock", name);
	fds[0] = openat(dfd, lockname, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fds[0] < 0 || flock(fds[0], LOCK_EX | LOCK_NB) < 0) {
		r = errno == EWOULDBLOCK
		            ? nsbox_err_hint(err, EEXIST, "live", "stop it, or choose another name",
		                             "a sandbox named '%s' is running", name)
		            : nsbox_err(err, errno, "live", "lock '%s/%s'", dir, lockname);
		goto out;
	}
	fds[2] = memfd_create("nsbox-config", MFD_CLOEXEC);
	size_t ylen = strlen(yaml);
	if (fds[2] < 0 || write(fds[2], yaml, ylen) != (ssize_t) ylen || lseek(fds[2], 0, SEEK_SET) < 0 ||
	    pipe2(pipefd, O_CLOEXEC) < 0) {
		r = nsbox_err(err, errno, "live", "start sandbox '%s'", name);
		goto out;
	}
	fds[3] = pipefd[1];
	if (!(o->flags & NSBOX_LIVE_DETACHED)) {
		fds[4] = (int) syscall(SYS_pidfd_open, getpid(), 0);
		if (fds[4] < 0) {
			r = nsbox_err(err, errno, "live", "start sandbox '%s': a pidfd of this process", name);
			goto out;
		}
	}
	char num[2][24];
	snprintf(num[0], sizeof(num[0]), "%llu", (unsigned long long) o->idle_timeout_ms);
	snprintf(num[1], sizeof(num[1]), "%llu", (unsigned long long) o->lifetime_ms);
	monitor_path(path, sizeof(path));
	const char *image = o->config->rootfs ? o->config->rootfs : o->config->image;
	bool oom = strv_push(&argv, "nsbox-monitor") < 0 || strv_push(&argv, "--name") < 0 ||
	           strv_push(&argv, name) < 0 || strv_push(&argv, "--idle-timeout-ms") < 0 ||
	           strv_push(&argv, num[0]) < 0 || strv_push(&argv, "--lifetime-ms") < 0 ||
	           strv_push(&argv, num[1]) < 0 || strv_push(&argv, "--image") < 0 ||
	           strv_push(&argv, image ? image : "default") < 0;
	if (o->flags & NSBOX_LIVE_PAUSE_WHEN_IDLE)
		oom = oom || strv_push(&argv, "--pause-when-idle") < 0;
	if (fds[4] >= 0)
		oom = oom || strv_push(&argv, "--owner") < 0;
	for (const char *const *p = o->publish; p && *p; p++)
		oom = oom || strv_push(&argv, "--publish") < 0 || strv_push(&argv, *p) < 0;
	if (oom) {
		r = nsbox_err(err, ENOMEM, "live", "start sandbox '%s'", name);
		goto out;
	}
	if (access(path, X_OK) < 0) {
		r = nsbox_err_hint(err, errno, "live", "it is installed with nsbox; NSBOX_MONITOR may name it",
		                   "start sandbox '%s': the monitor program '%s'", name, path);
		goto out;
	}
	pid_t pid = fork();
	if (pid == 0)
		exec_monitor(path, argv.v, fds);
	if (pid < 0) {
		r = nsbox_err(err, errno, "live", "start sandbox '%s': fork", name);
		goto out;
	}
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	close(pipefd[1]);
	pipefd[1] = fds[3] = -1;
	r = read_ready(pipefd[0], &ready_msg);
	if (r < 0) {
		r = nsbox_err(err, -r, "live", "start sandbox '%s'", name);
		goto out;
	}
	if (ready_msg[0] == 'E') {
		nsbox_error *e = ctl_error_from_json(ready_msg + 1);
		r = e && nsbox_error_errno(e) > 0 ? -nsbox_error_errno(e) : -EIO;
		if (err && e)
			*err = e;
		else
			nsbox_error_free(e);
		if (err && !*err)
			(void) nsbox_err(err, EIO, "live", "start sandbox '%s': the monitor failed", name);
		goto out;
	}
	if (ready_msg[0] != 'O') {
		r = nsbox_err_hint(err, EIO, "live", "is nsbox-monitor the one of this nsbox?",
		                   "start sandbox '%s': the monitor '%s' ended before the sandbox was ready", name, path);
		goto out;
	}
	/* The lock and the rest are the monitor's now: our copies close (a
	 * stop below waits for the lock, which ours would hold). */
	for (int i = 0; i < 5; i++)
		if (fds[i] >= 0 && i != 3) {
			close(fds[i]);
			fds[i] = -1;
		}
	r = remote_open(name, !(o->flags & NSBOX_LIVE_DETACHED), out, err);
	/* Its snapshot's files, before anyone else uses it. A detached one
	 * is stopped by name if they cannot be restored. */
	if (r == 0 && from && (r = snapshot_restore(*out, from, err)) < 0) {
		(void) nsbox_live_stop(name, NULL);
		nsbox_sandbox_free(*out);
		*out = NULL;
	}
out:
	free(ready_msg);
	free(yaml);
	strv_clear(&argv);
	for (int i = 0; i < 5; i++)
		if (fds[i] >= 0 && i != 3)
			close(fds[i]);
	for (int i = 0; i < 2; i++)
		if (pipefd[i] >= 0)
			close(pipefd[i]);
	return r;
}

int nsbox_live_connect(const char *name, nsbox_sandbox **out, nsbox_error **err)
{
	if (!out)
		return nsbox_err(err, EINVAL, "live", "connect: no output pointer");
	*out = NULL;
	int r = ctl_check_name(name, err);
	return r < 0 ? r : remote_open(name, false, out, err);
}

const char *nsbox_live_name(const nsbox_sandbox *sb)
{
	return sb && sb->remote ? sb->remote->name : NULL;
}

int nsbox_live_detach(nsbox_sandbox *sb, nsbox_error **err)
{
	if (!sb || !sb->remote)
		return nsbox_err_invalid(err, "live", "detach: not a started sandbox (nsbox_live_start)");
	int r = remote_context_op(sb, CTL_DETACH, "", err);
	if (r == 0)
		sb->remote->owner = false;
	return r;
}

/* Stop NAME; with id, only if NAME is still that sandbox (a handle's
 * owner stop: the name may have been taken by another one since). */
int live_stop_id(const char *name, const char *id, nsbox_error **err)
{
	int fd = ctl_connect(name, err);
	if (fd < 0)
		return fd;
	ctl_req h = { .magic = CTL_MAGIC, .op = CTL_STOP, .argc = id ? 1 : 0,
	              .len = id ? (uint32_t) strlen(id) + 1 : 0 };
	ctl_frame f;
	int32_t status = 0;
	int r = ctl_send_req(fd, &h, id ? id : "", NULL, 0);
	if (r == 0)
		r = ctl_read_all(fd, &f, sizeof(f));
	if (r == 0 && f.type == CTL_REPLY && f.len >= sizeof(status))
		r = ctl_read_all(fd, &status, sizeof(status));
	close(fd);
	if (r < 0 && r != -EPIPE)
		return nsbox_err(err, -r, "live", "stop sandbox '%s'", name);
	if (status < 0)
		return nsbox_err(err, -status, "live", "stop sandbox '%s': it is another sandbox now (not stopped)", name);
	/* Done when the monitor has let go of its lock: the sandbox, its
	 * cgroup and its files are gone. */
	char dir[PATH_MAX];
	int dfd = ctl_open_dir(dir, sizeof(dir), false, NULL);
	char lf[80];
	snprintf(lf, sizeof(lf), "%s.lock", name);
	int lfd = dfd >= 0 ? openat(dfd, lf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
	if (lfd >= 0) {
		while (flock(lfd, LOCK_SH) < 0 && errno == EINTR)
			;
		close(lfd);
	}
	if (dfd >= 0)
		close(dfd);
	return 0;
}

int nsbox_live_stop(const char *name, nsbox_error **err)
{
	return live_stop_id(name, NULL, err);
}

int nsbox_live_list(char **out, nsbox_error **err)
{
	if (!out)
		return nsbox_err(err, EINVAL, "live", "list: no output pointer");
	*out = NULL;
	char dir[PATH_MAX];
	int dfd = ctl_open_dir(dir, sizeof(dir), false, err);
	if (dfd < 0 && dfd != -ENOENT)
		return dfd;
	json_t *a = json_array();
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (dfd >= 0 && !d)
		close(dfd);
	struct dirent *de;
	while (a && d && (de = readdir(d))) {
		size_t l = strlen(de->d_name);
		if (l < 6 || l > 68 || strcmp(de->d_name + l - 5, ".json") || de->d_name[0] == '.')
			continue;
		char name[64];
		snprintf(name, sizeof(name), "%.*s", (int) (l - 5), de->d_name);
		if (!ctl_name_ok(name) || !ctl_alive(dirfd(d), name))
			continue;
		int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		char text[65536];
		ssize_t r = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;
		if (fd >= 0)
			close(fd);
		if (r <= 0)
			continue;
		text[r] = 0;
		json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
		if (json_is_object(j) && json_is_string(json_object_get(j, "name")) &&
		    !strcmp(json_string_value(json_object_get(j, "name")), name))
			json_array_append(a, j);
		json_decref(j);
	}
	if (d)
		closedir(d);
	*out = a ? json_dumps(a, JSON_COMPACT) : NULL;
	json_decref(a);
	return *out ? 0 : nsbox_err(err, ENOMEM, "live", "list the sandboxes");
}
