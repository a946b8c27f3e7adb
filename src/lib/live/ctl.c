/* The directory of sandboxes, names, peers and the framing of the control
 * protocol (ctl.h). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/error.h"
#include "base/fdpass.h"
#include "live/ctl.h"

/* ---- names and paths ------------------------------------------------------ */

static int dir_path(const char *leaf, char *out, size_t len, nsbox_error **err)
{
	const char *xdg = secure_getenv("XDG_STATE_HOME"), *home = secure_getenv("HOME");
	int n;
	if (geteuid() == 0)
		n = snprintf(out, len, "/var/lib/nsbox/state/%s", leaf);
	else if (xdg && *xdg == '/')
		n = snprintf(out, len, "%s/nsbox/%s", xdg, leaf);
	else if (home && *home == '/')
		n = snprintf(out, len, "%s/.local/state/nsbox/%s", home, leaf);
	else
		return nsbox_err_invalid(err, "live", "find the directory of %s: HOME is not set", leaf);
	if (n < 0 || (size_t) n >= len)
		return nsbox_err_invalid(err, "live", "the directory of %s is too long a path", leaf);
	return 0;
}

int ctl_open_state_dir(const char *leaf, char *path, size_t len, bool create, nsbox_error **err)
{
	int r = dir_path(leaf, path, len, err);
	if (r < 0)
		return r;
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
		int e = errno;
		if (e == ENOENT && !create)
			return -ENOENT;
		return nsbox_err(err, e, "live", "open the directory of %s '%s'", leaf, path);
	}
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077)) {
		close(fd);
		return nsbox_err_hint(err, EPERM, "live", "chmod 0700 it, as its owner", "the directory of %s '%s' must be "
		                      "owned by you and private (mode 0700)", leaf, path);
	}
	return fd;
}

int ctl_open_dir(char *path, size_t len, bool create, nsbox_error **err)
{
	return ctl_open_state_dir("sandboxes", path, len, create, err);
}

void ctl_sock_path(struct sockaddr_un *sa, int dirfd, const char *name)
{
	/* A socket's path must fit in 108 bytes, which the directory may not. */
	snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%.63s.sock", dirfd, name);
}

bool ctl_name_ok(const char *n)
{
	size_t len = n ? strlen(n) : 0;
	if (len == 0 || len > 63 || n[0] == '.' || n[0] == '-')
		return false;
	for (const char *c = n; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' ||
		      *c == '_' || *c == '.'))
			return false;
	return true;
}

int ctl_check_name(const char *n, nsbox_error **err)
{
	if (ctl_name_ok(n))
		return 0;
	return nsbox_err_invalid(err, "live", "invalid sandbox name '%.80s' (letters, digits, '-', '_', '.'; at most "
	                         "63; not starting with '.' or '-')", n ? n : "");
}

bool ctl_alive(int dirfd, const char *name)
{
	char f[80];
	snprintf(f, sizeof(f), "%s.lock", name);
	int fd = openat(dirfd, f, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool held = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(fd);
	return held;
}

int ctl_connect(const char *name, nsbox_error **err)
{
	int r = ctl_check_name(name, err);
	if (r < 0)
		return r;
	char dir[PATH_MAX], f[80];
	int dfd = ctl_open_dir(dir, sizeof(dir), false, err);
	if (dfd == -ENOENT)
		return nsbox_err_hint(err, ESRCH, "live", "nsbox ps lists yours", "no sandbox named '%s'", name);
	if (dfd < 0)
		return dfd;
	/* The socket itself, opened without following a symlink put in its
	 * place, and reached through that fd: the directory is private, but
	 * its owner may have bound it (or ~/.local) into a sandbox. */
	snprintf(f, sizeof(f), "%s.sock", name);
	int pfd = openat(dfd, f, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	int e = errno;
	struct stat st;
	close(dfd);
	if (pfd < 0 && e == ENOENT)
		return nsbox_err_hint(err, ESRCH, "live", "nsbox ps lists yours", "no sandbox named '%s'", name);
	if (pfd < 0)
		return nsbox_err(err, e, "live", "reach sandbox '%s'", name);
	if (fstat(pfd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		close(pfd);
		return nsbox_err_hint(err, EPERM, "live", "remove it: nsbox start makes the socket",
		                      "reach sandbox '%s': '%s/%s' is not a socket (a symlink?)", name, dir, f);
	}
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", pfd);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int c = fd < 0 ? -1 : connect(fd, (struct sockaddr *) &sa, sizeof(sa));
	e = errno;
	close(pfd);
	if (c < 0) {
		if (fd >= 0)
			close(fd);
		if (e == ENOENT || e == ECONNREFUSED)
			return nsbox_err_hint(err, ESRCH, "live", "nsbox ps lists yours", "no sandbox named '%s'", name);
		return nsbox_err(err, e, "live", "reach sandbox '%s'", name);
	}
	/* What answers must be a monitor of ours, not a socket that a
	 * sandbox's payload (which may have our uid) put there to be handed
	 * our fds and requests. */
	if (!ctl_server_ok(fd)) {
		close(fd);
		return nsbox_err_hint(err, EPERM, "live", "a sandbox's process may have replaced it: stop that sandbox",
		                      "reach sandbox '%s': '%s/%s' is not served by a monitor of yours (refused)", name,
		                      dir, f);
	}
	return fd;
}

/* ---- peers ------------------------------------------------------------------- */

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
#ifndef PIDFD_GET_USER_NAMESPACE
#define PIDFD_GET_USER_NAMESPACE _IO(0xFF, 9)
#endif

/* The user namespace of the process at the other end of cfd, as an fd; -1
 * when it cannot be known. The process is pinned by a pidfd taken from the
 * socket (SO_PEERPIDFD), so a peer that exited cannot lend its pid to
 * another; kernels before 6.5 give only the pid (SO_PEERCRED), which is
 * checked to be alive after its namespace was opened. */
static int peer_userns(int cfd)
{
	int pidfd = -1;
	socklen_t len = sizeof(pidfd);
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 || cr.pid <= 0)
		return -1;
	if (getsockopt(cfd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0 || pidfd < 0) {
		if (errno != ENOPROTOOPT)
			return -1;
		pidfd = (int) syscall(SYS_pidfd_open, cr.pid, 0);
		if (pidfd < 0)
			return -1;
	}
	/* Linux 6.11: the namespace straight from the pidfd. */
	int ns = ioctl(pidfd, PIDFD_GET_USER_NAMESPACE, 0);
	if (ns < 0 && (errno == ENOTTY || errno == EINVAL)) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int) cr.pid);
		ns = open(path, O_RDONLY | O_CLOEXEC);
		/* Still the same process: its pid was not reused meanwhile. */
		if (ns >= 0 && syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0) {
			close(ns);
			ns = -1;
		}
	}
	close(pidfd);
	return ns;
}

bool ctl_peer_ok(int cfd)
{
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 || cr.uid != geteuid())
		return false;
	/* A rootless sandbox's processes have the caller's host uid too: only
	 * the user namespace tells them from the caller. Ours, or no one. */
	int ns = peer_userns(cfd);
	struct stat theirs, ours;
	bool same = ns >= 0 && fstat(ns, &theirs) == 0 && stat("/proc/self/ns/user", &ours) == 0 &&
	            theirs.st_dev == ours.st_dev && theirs.st_ino == ours.st_ino;
	if (ns >= 0)
		close(ns);
	return same;
}

/* How deep in the pid namespaces below /proc's the process of pidfd is
 * (its NSpid entries; 1 for /proc's own), or -1. */
static int pid_depth(int pidfd)
{
	char path[64] = "/proc/self/status", text[4096];
	if (pidfd >= 0)
		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof(text) - 1);
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -1;
	text[n] = '\0';
	char *line = strstr(text, "\nNSpid:");
	if (!line)
		return -1;
	int depth = 0;
	for (char *s = line + 7; *s && *s != '\n'; s++)
		if ((*s == '\t' || *s == ' ') && s[1] >= '0' && s[1] <= '9')
			depth++;
	return depth;
}

bool ctl_server_ok(int fd)
{
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 || cr.uid != geteuid() || cr.pid <= 0)
		return false;
	/* The monitor is not dumpable: its user namespace is not ours to read
	 * (ctl_peer_ok's test) unless we are root. Its pid namespace is told
	 * by the pidfd's NSpid: a process visible here at our own depth is in
	 * our namespace; a sandbox's, in one below it, is deeper. */
	int pidfd = -1;
	socklen_t len = sizeof(pidfd);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0 || pidfd < 0) {
		if (errno != ENOPROTOOPT)
			return false;
		pidfd = (int) syscall(SYS_pidfd_open, cr.pid, 0);
		if (pidfd < 0)
			return false;
	}
	int theirs = pid_depth(pidfd), ours = pid_depth(-1);
	close(pidfd);
	return theirs > 0 && theirs == ours;
}

/* ---- framing ----------------------------------------------------------------- */

int ctl_write_all(int fd, const void *p, size_t n)
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

int ctl_read_all(int fd, void *p, size_t n)
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

int ctl_send_req(int fd, const ctl_req *h, const char *body, const int *fds, int nfds)
{
	if (nfds > 4)
		return -EINVAL;
	ssize_t n = fd_send(fd, h, sizeof(*h), fds, nfds);
	if (n < 0)
		return (int) n;
	return h->len ? ctl_write_all(fd, body, h->len) : 0;
}

int ctl_send_frame(int fd, uint32_t type, const void *data, size_t len)
{
	ctl_frame f = { type, (uint32_t) len };
	int r = ctl_write_all(fd, &f, sizeof(f));
	return r < 0 || !len ? r : ctl_write_all(fd, data, len);
}

int ctl_send_reply(int fd, int32_t status, const char *json)
{
	if (!json)
		json = "{}";
	size_t n = strlen(json);
	ctl_frame f = { CTL_REPLY, (uint32_t) (n + sizeof(status)) };
	int r = ctl_write_all(fd, &f, sizeof(f));
	r = r ?: ctl_write_all(fd, &status, sizeof(status));
	return r ?: ctl_write_all(fd, json, n);
}

char *ctl_error_json(const nsbox_error *e)
{
	json_t *j = json_pack("{s:{s:s?, s:s?, s:s?, s:i}}", "error", "step", nsbox_error_step(e), "message",
	                      e ? nsbox_error_message(e) : "out of memory", "hint", nsbox_error_hint(e), "errno",
	                      e ? nsbox_error_errno(e) : ENOMEM);
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	return s;
}

nsbox_error *ctl_error_from_json(const char *json)
{
	json_t *j = json ? json_loads(json, 0, NULL) : NULL;
	json_t *e = json_object_get(j, "error");
	nsbox_error *out = NULL;
	if (json_is_object(e)) {
		out = calloc(1, sizeof(*out));
		const char *step = json_string_value(json_object_get(e, "step"));
		const char *msg = json_string_value(json_object_get(e, "message"));
		const char *hint = json_string_value(json_object_get(e, "hint"));
		if (out) {
			out->errnum = (int) json_integer_value(json_object_get(e, "errno"));
			out->step = strdup(step ? step : "live");
			out->message = strdup(msg ? msg : "the sandbox's monitor failed");
			out->hint = hint ? strdup(hint) : NULL;
			if (!out->step || !out->message) {
				nsbox_error_free(out);
				out = NULL;
			}
		}
	}
	json_decref(j);
	return out;
}

int nsbox_state_dir(const char *leaf, char *path, size_t len, bool create, nsbox_error **err)
{
	if (!leaf || !path || strchr(leaf, '/') || !*leaf)
		return nsbox_err(err, EINVAL, "live", "state directory: invalid arguments");
	return ctl_open_state_dir(leaf, path, len, create, err);
}

bool nsbox_name_ok(const char *name)
{
	return ctl_name_ok(name);
}
