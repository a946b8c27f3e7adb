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

#include "base/fsutil.h"
#include "image/image_strip.h"
#include "base/syscalls.h"

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

static int strip_visit(int dir, const char *name, const struct stat *st, int sub, void *ctx)
{
	if (sub < 0)
		return strip_file(dir, name, st, ctx);
	/* No directory writable by group or others (see strip_entry). */
	return (st->st_mode & 022) && fchmod(sub, st->st_mode & 07755) < 0 ? -errno : 0;
}

int strip_tree(int dirfd, image_stripped *s)
{
	return tree_walk(dirfd, 0, strip_visit, s);
}
