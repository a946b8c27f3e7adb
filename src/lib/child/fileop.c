/* The files API of a long-lived sandbox, inside it: an exec whose payload,
 * instead of execve, runs one file operation (sandbox/files.c sends it).
 * It runs exactly where a command would: in the sandbox's namespaces and
 * root, as its user, without capabilities, under no_new_privs and the
 * seccomp filter, in the working directory. So a path resolves in the
 * sandbox's own root (a symlink to /etc/shadow reads the sandbox's file),
 * and a write lands only where the sandbox's user may write: the kernel
 * checks it, not us.
 *
 * argv: OP PATH [ARG], OP one of read, write, list, stat, remove, mkdir;
 * or connect / PORT: a TCP connection to PORT on the sandbox's loopback
 * (its own network namespace), handed to the host over stdout (a unix
 * socket) for a published port's forwarder (net/forward.c).
 * Data: read's file on stdout; write's from stdin; list's and stat's
 * entries on stdout as fileop_entry records, each followed by its name.
 * The exit status is 0, or the errno of the failure (EFBIG past the bound).
 *
 * Like all code after clone it never allocates: stack buffers, raw calls.
 * It runs in a copy of pid 1's memory (init.c: no vfork for it, which would
 * hold pid 1 and with it the keeper's next exec), on pid 1's stack. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>   /* rename(2): a plain system call */
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/fdpass.h"
#include "child/fileop.h"
#include "plan/plan.h"

/* A decimal number (the bound, a mode in octal with base 8); false if it
 * is not one. */
static bool number(const char *s, unsigned base, uint64_t *out)
{
	uint64_t v = 0;
	if (!s || !*s)
		return false;
	for (; *s; s++) {
		unsigned d = (unsigned) (*s - '0');
		if (d >= base || v > (UINT64_MAX - d) / base)
			return false;
		v = v * base + d;
	}
	*out = v;
	return true;
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? errno : EPIPE;
		c += w;
		n -= (size_t) w;
	}
	return 0;
}

static int op_read(const char *path, uint64_t max)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return errno;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return errno;
	if (S_ISDIR(st.st_mode))
		return EISDIR;
	if (!S_ISREG(st.st_mode))
		return EINVAL;   /* a FIFO or a device would never end, or say anything */
	if ((uint64_t) st.st_size > max)
		return EFBIG;
	char buf[32768];
	uint64_t total = 0;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		if (n == 0)
			return 0;
		total += (uint64_t) n;
		if (total > max)
			return EFBIG;   /* it grew while read */
		int r = write_all(1, buf, (size_t) n);
		if (r)
			return r;
	}
}

/* The file is written under a temporary name beside it and renamed into
 * place once whole: a reader never sees half of it, and a failure leaves
 * the old one. */
static int op_write(const char *path, uint64_t max, unsigned mode)
{
	char tmp[PATH_MAX];
	const char *slash = strrchr(path, '/');
	size_t dir = slash ? (size_t) (slash - path) + 1 : 0, base = strlen(path) - dir;
	if (base == 0)
		return EISDIR;
	static const char tag[] = ".nsbox-write-";
	char pid[16];
	size_t np = 0;
	for (unsigned v = (unsigned) getpid(); np == 0 || v; v /= 10)
		pid[np++] = (char) ('0' + v % 10);
	if (dir + 1 + base + sizeof(tag) + np + 1 > sizeof(tmp))
		return ENAMETOOLONG;
	char *t = tmp;
	memcpy(t, path, dir);
	t += dir;
	*t++ = '.';
	memcpy(t, path + dir, base);
	t += base;
	memcpy(t, tag, sizeof(tag) - 1);
	t += sizeof(tag) - 1;
	while (np)
		*t++ = pid[--np];
	*t = '\0';
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode & 0777);
	if (fd < 0)
		return errno;
	char buf[32768];
	uint64_t total = 0;
	int r = 0;
	for (;;) {
		ssize_t n = read(0, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = errno;
			break;
		}
		if (n == 0)
			break;
		total += (uint64_t) n;
		if (total > max) {
			r = EFBIG;
			break;
		}
		r = write_all(fd, buf, (size_t) n);
		if (r)
			break;
	}
	/* The mode asked for, whatever the umask took away. */
	if (!r && fchmod(fd, mode & 0777) < 0)
		r = errno;
	if (close(fd) < 0 && !r)
		r = errno;
	if (!r && rename(tmp, path) < 0)
		r = errno;
	if (r)
		(void) unlink(tmp);
	return r;
}

/* One entry on stdout: the record, then the name. */
static int put_entry(const char *name, const struct stat *st)
{
	fileop_entry e = { .mode = st->st_mode, .size = (uint64_t) st->st_size,
	                   .mtime_sec = (int64_t) st->st_mtim.tv_sec, .mtime_nsec = (uint32_t) st->st_mtim.tv_nsec };
	size_t n = strlen(name);
	if (n > FILEOP_NAME_MAX)
		n = FILEOP_NAME_MAX;
	e.name_len = (uint16_t) n;
	int r = write_all(1, &e, sizeof(e));
	return r ? r : write_all(1, name, n);
}

static int op_stat(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno;
	const char *slash = strrchr(path, '/');
	return put_entry(slash && slash[1] ? slash + 1 : path, &st);
}

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

static int op_list(const char *path, uint64_t max_entries)
{
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return errno;
	char buf[16384] __attribute__((aligned(8)));
	uint64_t count = 0;
	for (;;) {
		long n = syscall(SYS_getdents64, dfd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		if (n == 0)
			return 0;
		for (long off = 0; off < n;) {
			struct linux_dirent64 *d = (struct linux_dirent64 *) (buf + off);
			off += d->d_reclen;
			if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
				continue;
			if (++count > max_entries)
				return E2BIG;
			struct stat st;
			if (fstatat(dfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
				continue;   /* gone meanwhile */
			int r = put_entry(d->d_name, &st);
			if (r)
				return r;
		}
	}
}

/* Remove what is at name in dfd; a directory with all it holds, to a
 * bounded depth (the walk keeps one fd and one buffer per level on the
 * stack). */
static int remove_at(int dfd, const char *name, unsigned depth)
{
	if (unlinkat(dfd, name, 0) == 0)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return errno;
	if (depth == 0)
		return ELOOP;
	int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0)
		return errno == ENOTDIR ? EPERM : errno;
	char buf[1024] __attribute__((aligned(8)));   /* (one entry at least: a name is at most 255) */
	int r = 0;
	/* Read the directory to its end, removing as we go; entries removed
	 * meanwhile can shift a directory's offsets, so once a pass removed
	 * something, read it again from its start, until one finds it empty. */
	for (bool removed = true; removed && !r;) {
		removed = false;
		if (lseek(sub, 0, SEEK_SET) < 0) {
			r = errno;
			break;
		}
		for (;;) {
			long n = syscall(SYS_getdents64, sub, buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				r = n < 0 ? errno : 0;
				break;
			}
			for (long off = 0; off < n && !r;) {
				struct linux_dirent64 *d = (struct linux_dirent64 *) (buf + off);
				off += d->d_reclen;
				if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
					continue;
				r = remove_at(sub, d->d_name, depth - 1);
				removed = true;
			}
			if (r)
				break;
		}
	}
	(void) close(sub);
	if (r)
		return r;
	return unlinkat(dfd, name, AT_REMOVEDIR) == 0 ? 0 : errno;
}

static int op_remove(const char *path, bool recursive)
{
	if (!recursive)
		return unlinkat(AT_FDCWD, path, 0) == 0 ? 0 : (errno == EISDIR && rmdir(path) == 0) ? 0 : errno;
	return remove_at(AT_FDCWD, path, 48);
}

static int op_mkdir(const char *path, unsigned mode)
{
	/* Each missing parent too, as mkdir -p. */
	char p[PATH_MAX];
	size_t n = strlen(path);
	if (n >= sizeof(p))
		return ENAMETOOLONG;
	memcpy(p, path, n + 1);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return errno;
		*s = '/';
	}
	if (mkdir(p, mode & 0777) < 0)
		return errno == EEXIST ? 0 : errno;
	return 0;
}

/* A connection to the sandbox's own loopback, as its user would make it,
 * passed on stdout. */
static int op_connect(uint64_t port)
{
	if (port == 0 || port > 65535)
		return EINVAL;
	struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port),
	                          .sin_addr = { htonl(INADDR_LOOPBACK) } };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t) port),
	                           .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int r = fd < 0 ? -1 : connect(fd, (struct sockaddr *) &a4, sizeof(a4));
	if (r < 0) {
		/* A server listening on ::1 only. */
		int e = errno;
		if (fd >= 0)
			(void) close(fd);
		fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *) &a6, sizeof(a6)) < 0)
			return e;
	}
	char one = 'c';
	ssize_t n = fd_send(1, &one, 1, &fd, 1);
	return n == 1 ? 0 : (int) -n;
}

int fileop_run(char *const *argv)
{
	const char *op = argv[0], *path = argv[1], *arg = argv[1] ? argv[2] : NULL;
	uint64_t v = 0;
	if (!op || !path || path[0] != '/')
		return EINVAL;
	if (!strcmp(op, "connect"))
		return number(arg, 10, &v) ? op_connect(v) : EINVAL;
	if (!strcmp(op, "read"))
		return number(arg, 10, &v) ? op_read(path, v) : EINVAL;
	if (!strcmp(op, "write")) {
		uint64_t mode = 0;
		return number(arg, 10, &v) && argv[3] && number(argv[3], 8, &mode) && mode <= 0777
			? op_write(path, v, (unsigned) mode) : EINVAL;
	}
	if (!strcmp(op, "list"))
		return number(arg, 10, &v) ? op_list(path, v) : EINVAL;
	if (!strcmp(op, "stat"))
		return op_stat(path);
	if (!strcmp(op, "remove"))
		return op_remove(path, arg && !strcmp(arg, "recursive"));
	if (!strcmp(op, "mkdir"))
		return number(arg, 8, &v) && v <= 0777 ? op_mkdir(path, (unsigned) v) : EINVAL;
	return EINVAL;
}
