/* Child side: where each mount op lands in the new root (mounts.c makes
 * the mounts). A target is resolved with openat2(RESOLVE_IN_ROOT) against
 * the new root, so a symlink in a hostile image resolves inside the image
 * and never onto the host. A missing mount point is made: in the root where
 * it is writable, else in a read-only mirror of its nearest directory.
 * Kept apart from mounts.c, which walks the ops and mounts on what is
 * there: finding and making the place is a concern of its own. No
 * allocation and no stdio here: this runs after clone. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/mount.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "child/mountpoint.h"
#include "base/syscalls.h"

int mountpoint_resolve(int root, const char *target, unsigned extra_flags)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC | extra_flags,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	int fd = sys_openat2(root, *target ? target : ".", &how);
	return fd < 0 ? -errno : fd;
}

/* Split "a/b/c" into the parent fd (resolved in root) and the last name. */
int mountpoint_open_parent(int root, const char *target, char name[NAME_MAX + 1])
{
	char dir[PATH_MAX];
	size_t len = strlen(target);
	if (len >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, target, len + 1);
	char *slash = strrchr(dir, '/');
	const char *base = slash ? slash + 1 : dir;
	if (strlen(base) > NAME_MAX || !*base)
		return -EINVAL;
	memcpy(name, base, strlen(base) + 1);
	if (slash)
		*slash = '\0';
	else
		dir[0] = '\0';
	return mountpoint_resolve(root, dir, O_DIRECTORY);
}

/* Create a missing mount point and its missing parents. */
static int make_point(int root, const char *target, bool file)
{
	char part[PATH_MAX];
	size_t len = strlen(target);
	if (len >= sizeof(part))
		return -ENAMETOOLONG;
	for (size_t i = 1; i <= len; i++) {
		if (target[i] != '/' && target[i] != '\0')
			continue;
		memcpy(part, target, i);
		part[i] = '\0';
		bool last = target[i] == '\0';
		char name[NAME_MAX + 1];
		int dfd = mountpoint_open_parent(root, part, name);
		if (dfd < 0)
			return dfd;
		int r = 0;
		if (last && file) {
			int f = openat(dfd, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0644);
			if (f >= 0)
				close(f);
			else if (errno != EEXIST)
				r = -errno;
		} else if (mkdirat(dfd, name, 0755) < 0 && errno != EEXIST) {
			r = -errno;
		}
		close(dfd);
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- mount points the root filesystem lacks ------------------------------
 * The root is read-only from the moment it is attached, and nothing is ever
 * written to the image (nor to a read-only volume): a missing mount point
 * (--workspace DIR:PATH with a PATH the image has not, `--rootfs /` without
 * /workspace, a volume on a missing file or nested directory) is made in the
 * sandbox's own root instead. The nearest existing directory on the way is
 * mirrored: a small tmpfs goes over it holding, for each entry it had, a
 * bind of that entry (with what is mounted below it), a copy of a symlink,
 * then the missing directories (and a missing file) of the target; then
 * that tmpfs turns read-only. Everything that was visible stays visible and
 * as writable as it was. */

/* Entries a mirrored directory may have: each costs a mount. */
#define MIRROR_MAX 4096

struct dirent64_raw {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/* Decimal or octal digits of v into buf (no snprintf in the child). */
static const char *digits(char buf[24], unsigned long v, unsigned base)
{
	char tmp[24];
	int n = 0;
	do {
		tmp[n++] = (char) ('0' + v % base);
		v /= base;
	} while (v && n < 23);
	for (int i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	buf[n] = '\0';
	return buf;
}

/* A new tmpfs, detached, with the mode and (when mapped here) owner of the
 * directory it stands in for. */
static int mirror_fs(const struct stat *st)
{
	char num[24];
	int fs = sys_fsopen("tmpfs", FSOPEN_CLOEXEC);
	if (fs < 0)
		return -errno;
	int r = 0;
	if (sys_fsconfig(fs, FSCONFIG_SET_STRING, "mode", digits(num, st->st_mode & 07777, 8), 0) < 0 ||
	    sys_fsconfig(fs, FSCONFIG_SET_STRING, "size", "1m", 0) < 0 ||
	    sys_fsconfig(fs, FSCONFIG_SET_STRING, "nr_inodes", digits(num, MIRROR_MAX + 256, 10), 0) < 0)
		r = -errno;
	/* An owner this namespace does not map (the overflow id) is left
	 * to root here. */
	if (r == 0 && st->st_uid != 65534)
		(void) sys_fsconfig(fs, FSCONFIG_SET_STRING, "uid", digits(num, st->st_uid, 10), 0);
	if (r == 0 && st->st_gid != 65534)
		(void) sys_fsconfig(fs, FSCONFIG_SET_STRING, "gid", digits(num, st->st_gid, 10), 0);
	if (r == 0 && sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		r = -errno;
	int m = r == 0 ? sys_fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV) : -1;
	if (r == 0 && m < 0)
		r = -errno;
	close(fs);
	return r < 0 ? r : m;
}

/* Entry `name` of the original directory `dir`, put back in the mirror
 * `m`: a symlink copied, anything else bound (recursively) on a
 * placeholder of its kind. */
static int mirror_entry(int dir, int m, const char *name)
{
	struct stat st;
	if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlinkat(dir, name, target, sizeof(target) - 1);
		if (n < 0)
			return -errno;
		target[n] = '\0';
		return symlinkat(target, m, name) < 0 ? -errno : 0;
	}
	if (S_ISDIR(st.st_mode)) {
		if (mkdirat(m, name, 0755) < 0)
			return -errno;
	} else {
		int f = openat(m, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (f < 0)
			return -errno;
		close(f);
	}
	int tree = sys_open_tree(dir, name, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_SYMLINK_NOFOLLOW);
	if (tree < 0)
		return -errno;
	int r = sys_move_mount(tree, "", m, name, MOVE_MOUNT_F_EMPTY_PATH) < 0 ? -errno : 0;
	close(tree);
	return r;
}

/* Mirror the directory `dir` (relative to *root; "" is the root itself,
 * and *root then becomes the mirror), make `target` in it, and turn the
 * mirror read-only. */
static int mirror(int *root, const char *dir, const char *target, bool file)
{
	struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
	                        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	int d = sys_openat2(*root, *dir ? dir : ".", &how);
	if (d < 0)
		return -errno;
	struct stat st;
	int m = fstat(d, &st) < 0 ? -errno : mirror_fs(&st);
	int r = m < 0 ? m : 0;
	/* Over the directory, or stacked on the root itself. d still reads
	 * what was there. */
	if (r == 0 && sys_move_mount(m, "", d, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		r = -errno;
	char ents[4096] __attribute__((aligned(8)));
	long n, count = 0;
	while (r == 0 && (n = syscall(SYS_getdents64, d, ents, sizeof(ents))) != 0) {
		if (n < 0) {
			r = -errno;
			break;
		}
		for (long off = 0; r == 0 && off < n;) {
			struct dirent64_raw *e = (struct dirent64_raw *) (ents + off);
			off += e->d_reclen;
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			r = ++count > MIRROR_MAX ? -E2BIG : mirror_entry(d, m, e->d_name);
		}
	}
	close(d);
	if (r == 0 && !*dir) {
		/* The mirror is the new root: the rest resolves in it. */
		close(*root);
		*root = m;
		m = -1;
	}
	if (r == 0)
		r = make_point(*root, target, file);
	struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY };
	if (r == 0 && sys_mount_setattr(m >= 0 ? m : *root, "", AT_EMPTY_PATH, &ro) < 0)
		r = -errno;
	if (m >= 0)
		close(m);
	return r;
}

/* The longest leading part of `target` that exists as a directory, into
 * dir ("" for the root). */
static int nearest_dir(int root, const char *target, char dir[PATH_MAX])
{
	size_t len = strlen(target);
	if (len >= PATH_MAX)
		return -ENAMETOOLONG;
	memcpy(dir, target, len + 1);
	for (;;) {
		char *slash = strrchr(dir, '/');
		if (!slash) {
			dir[0] = '\0';
			return 0;
		}
		*slash = '\0';
		int fd = mountpoint_resolve(root, dir, O_DIRECTORY);
		if (fd >= 0) {
			close(fd);
			return 0;
		}
		if (fd != -ENOENT)
			return fd;
	}
}

int mountpoint_resolve_target(int *root, const mount_op *op)
{
	int fd = mountpoint_resolve(*root, op->target, 0);
	if (fd == -ENOENT && (op->flags & OPF_MKPOINT)) {
		int r = make_point(*root, op->target, op->flags & OPF_FILE);
		if (r == -EROFS) {
			char dir[PATH_MAX];
			r = nearest_dir(*root, op->target, dir);
			if (r == 0)
				r = mirror(root, dir, op->target, op->flags & OPF_FILE);
		}
		if (r < 0)
			return r;
		fd = mountpoint_resolve(*root, op->target, 0);
	}
	return fd;
}
