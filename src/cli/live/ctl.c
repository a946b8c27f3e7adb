/* The directory of sandboxes, names, and the framing of the control
 * protocol (ctl.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cli.h"
#include "live/ctl.h"

/* ---- names and paths ------------------------------------------------------ */

static int ctl_dir_path(const char *leaf, char *out, size_t len)
{
	const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	int n;
	if (geteuid() == 0)
		n = snprintf(out, len, "/var/lib/nsbox/state/%s", leaf);
	else if (xdg && *xdg == '/')
		n = snprintf(out, len, "%s/nsbox/%s", xdg, leaf);
	else if (home && *home == '/')
		n = snprintf(out, len, "%s/.local/state/nsbox/%s", home, leaf);
	else {
		print_msg("find the directory of %s: HOME is not set", leaf);
		return -1;
	}
	if (n < 0 || (size_t) n >= len) {
		print_msg("the directory of %s is too long a path", leaf);
		return -1;
	}
	return 0;
}

/* The directory, created 0700 and checked to be ours and private. */
int ctl_open_dir(char *path, size_t len, bool create)
{
	return ctl_open_state_dir("sandboxes", path, len, create);
}

int ctl_open_state_dir(const char *leaf, char *path, size_t len, bool create)
{
	if (ctl_dir_path(leaf, path, len) < 0)
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
			print_msg("open the directory of %s '%s': %s", leaf, path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077)) {
		print_msg("the directory of %s '%s' must be owned by you and private (mode 0700)", leaf, path);
		close(fd);
		return -1;
	}
	return fd;
}

/* NAME.sock in the directory open as dirfd, through /proc/self/fd: a
 * socket's path must fit in 108 bytes, which the directory may not. */
void ctl_sock_path(struct sockaddr_un *sa, int dirfd, const char *name)
{
	snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%.63s.sock", dirfd, name);
}

bool ctl_name_ok(const char *n)
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

int ctl_check_name(const char *n)
{
	if (ctl_name_ok(n))
		return 0;
	print_msg("invalid sandbox name '%s' (letters, digits, '-', '_', '.'; at most 63; not starting with '.' or '-')", n);
	return -1;
}

int ctl_connect(const char *name)
{
	char dir[PATH_MAX];
	int dfd = ctl_open_dir(dir, sizeof(dir), false);
	if (dfd < 0) {
		if (errno == ENOENT)
			print_msg("no sandbox named '%s' (see nsbox ps)", name);
		return -1;
	}
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	ctl_sock_path(&sa, dfd, name);
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

/* The request and up to 3 fds, as the first bytes on the connection. */
int ctl_send_req(int fd, const ctl_req *h, const char *body, const int *fds, int nfds)
{
	char cbuf[CMSG_SPACE(3 * sizeof(int))];
	if (nfds < 0 || nfds > 3)
		return -1;
	memset(cbuf, 0, sizeof(cbuf));
	struct iovec iov = { (void *) h, sizeof(*h) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (nfds) {
		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE((size_t) nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		if (!c)
			return -1;
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN((size_t) nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, (size_t) nfds * sizeof(int));
	}
	if (sendmsg(fd, &mh, MSG_NOSIGNAL) != (ssize_t) sizeof(*h))
		return -1;
	return ctl_write_all(fd, body, h->len) < 0 ? -1 : 0;
}
