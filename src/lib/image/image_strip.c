/* What an image may not carry onto the host (image_strip.h). The store is
 * traversable by every local user and a payload always runs with
 * no_new_privs, so setuid/setgid bits and file capabilities are useless
 * inside and a local root shell outside: they never reach the disk. Device
 * nodes neither: the sandbox makes its own /dev. Every operation here is
 * anchored to a directory fd and never follows a symlink. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "image/image_strip.h"
#include "base/syscalls.h"

/* Directory depth we walk; each level holds one fd. */
#define MAX_DEPTH 512

static int strip_file(int dfd, const char *name, const struct stat *st, image_stripped *s)
{
	if (S_ISCHR(st->st_mode) && s->keep_whiteouts && st->st_rdev == makedev(0, 0))
		return 0;
	if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) {
		s->devices++;
		return unlinkat(dfd, name, 0) < 0 ? -errno : 0;
	}
	if (!S_ISREG(st->st_mode))
		return 0;
	/* A regular file's open does not block; O_NOFOLLOW and the inode check
	 * make sure it is the entry we looked at. Unreadable files (a user's
	 * import of a mode-000 file) cannot carry a capability: only root can
	 * set one, and import never restores them. */
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat fst;
	if (fd >= 0 && (fstat(fd, &fst) < 0 || fst.st_ino != st->st_ino || fst.st_dev != st->st_dev)) {
		close(fd);
		return -ESTALE;
	}
	int r = 0;
	if (st->st_mode & 06022) {
		s->setid += !!(st->st_mode & 06000);
		if ((fd >= 0 ? fchmod(fd, st->st_mode & 01755) : fchmodat(dfd, name, st->st_mode & 01755, 0)) < 0)
			r = -errno;
	}
	/* Looked up first: removing a security.* attribute needs privilege
	 * even when there is none. */
	if (fd >= 0 && r == 0 && fgetxattr(fd, "security.capability", NULL, 0) >= 0) {
		s->caps++;
		if (fremovexattr(fd, "security.capability") < 0)
			r = -errno;
	}
	if (fd >= 0)
		close(fd);
	return r;
}

static int strip_dir(int fd, dev_t dev, int depth, image_stripped *s)
{
	if (depth > MAX_DEPTH) {
		close(fd);
		return -ELOOP;
	}
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return -e;
	}
	struct dirent *e;
	int r = 0;
	while (r == 0 && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = -errno;
			break;
		}
		if (!S_ISDIR(st.st_mode)) {
			r = strip_file(dirfd(d), e->d_name, &st, s);
			continue;
		}
		if (st.st_dev != dev)
			continue;   /* a mount left inside (a build's /proc): not ours */
		int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		/* No directory writable by group or others (see strip_entry). */
		if (sub < 0)
			r = -errno;
		else if ((st.st_mode & 022) && fchmod(sub, st.st_mode & 07755) < 0) {
			r = -errno;
			close(sub);
		} else
			r = strip_dir(sub, dev, depth + 1, s);
	}
	closedir(d);
	return r;
}

int strip_tree(int dirfd, image_stripped *s)
{
	struct stat st;
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return -e;
	}
	return strip_dir(fd, st.st_dev, 0, s);
}

