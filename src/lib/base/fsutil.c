/* Directory trees on the host (fsutil.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fsutil.h"
#include "base/syscalls.h"

static int walk_dir(int fd, dev_t dev, unsigned depth, unsigned flags, tree_visit_fn visit, void *ctx)
{
	if (depth > TREE_MAX_DEPTH) {
		close(fd);
		return flags & TREE_KEEP_GOING ? 0 : -ELOOP;
	}
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return flags & TREE_KEEP_GOING ? 0 : -e;
	}
	bool keep_going = flags & TREE_KEEP_GOING;
	struct dirent *e;
	int r = 0;
	while (r == 0 && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			/* Gone since it was listed: nothing to walk. */
			r = keep_going || errno == ENOENT ? 0 : -errno;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			r = visit(dirfd(d), e->d_name, &st, -1, ctx);
			r = r == TREE_SKIP ? 0 : r;
			continue;
		}
		if (st.st_dev != dev)
			continue;   /* a mount left inside (a build's /proc): not ours */
		int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		struct stat sst;
		if (sub >= 0 && (fstat(sub, &sst) < 0 || sst.st_dev != st.st_dev || sst.st_ino != st.st_ino)) {
			close(sub);   /* swapped since it was looked at */
			sub = -1;
			errno = ESTALE;
		}
		if (sub < 0) {
			if (!keep_going) {
				r = -errno;
				continue;
			}
			r = visit(dirfd(d), e->d_name, &st, -1, ctx);
			r = r == TREE_SKIP ? 0 : r;
			continue;
		}
		r = visit(dirfd(d), e->d_name, &st, sub, ctx);
		if (r == 0)
			r = walk_dir(sub, dev, depth + 1, flags, visit, ctx);
		else {
			close(sub);
			r = r == TREE_SKIP ? 0 : r;
		}
	}
	closedir(d);
	return r;
}

int tree_walk(int dirfd, unsigned flags, tree_visit_fn visit, void *ctx)
{
	struct stat st;
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return -e;
	}
	return walk_dir(fd, st.st_dev, 0, flags, visit, ctx);
}

static int usage_visit(int dir, const char *name, const struct stat *st, int sub, void *ctx)
{
	(void) dir;
	(void) name;
	(void) sub;
	*(uint64_t *) ctx += (uint64_t) st->st_blocks * 512;
	return 0;
}

uint64_t tree_usage(int dirfd)
{
	struct stat st;
	if (fstat(dirfd, &st) < 0)
		return 0;
	uint64_t bytes = (uint64_t) st.st_blocks * 512;
	(void) tree_walk(dirfd, TREE_KEEP_GOING, usage_visit, &bytes);
	return bytes;
}

int open_beneath(int dirfd, const char *rel, int flags, unsigned opts)
{
	uint64_t resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
	flags |= O_CLOEXEC;
	if (!(opts & BENEATH_SYMLINKS_INSIDE)) {
		resolve |= RESOLVE_NO_SYMLINKS;
		flags |= O_NOFOLLOW;
	}
	if (opts & BENEATH_NO_XDEV)
		resolve |= RESOLVE_NO_XDEV;
	struct open_how how = { .flags = (uint64_t) flags, .resolve = resolve };
	int fd = sys_openat2(dirfd, rel, &how);
	return fd < 0 ? -errno : fd;
}

int mkdir_p(const char *path, mode_t mode)
{
	_cleanup_free_ char *p = strdup(path);
	if (!p)
		return -ENOMEM;
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			if (mkdir(p, mode) < 0 && errno != EEXIST)
				return -errno;
			*s = '/';
		}
	return mkdir(p, mode) < 0 && errno != EEXIST ? -errno : 0;
}

/* The first entry of directory `dir` other than "." and "..": its name in
 * `name` (and whether it is a directory), 0 when empty, or -errno. */
static int first_entry(int dir, char name[NAME_MAX + 1], bool *is_dir)
{
	int fd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return -e;
	}
	struct dirent *e;
	int r = 0;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(dir, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = errno == ENOENT ? 0 : -errno;
			if (r == 0)
				continue;
			break;
		}
		if (!S_ISDIR(st.st_mode)) {
			/* Files go as they are met. */
			if (unlinkat(dir, e->d_name, 0) < 0 && errno != ENOENT) {
				r = -errno;
				break;
			}
			continue;
		}
		snprintf(name, NAME_MAX + 1, "%s", e->d_name);
		*is_dir = true;
		r = 1;
		break;
	}
	closedir(d);
	return r;
}

int empty_dir_at(int fd)
{
	/* rm -rf without recursion, without a path longer than a name, and
	 * with one directory fd at a time: a payload chooses the depth (the
	 * upper layer may be thousands of levels deep). Going back up is
	 * openat(".."), checked against the directory we came from. The
	 * overlay leaves work/work with mode 000: directories are opened up
	 * before they are entered. */
	struct stat top;
	if (fstat(fd, &top) < 0)
		return -errno;
	int cur = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (cur < 0)
		return -errno;
	typedef struct level { char name[NAME_MAX + 1]; dev_t dev; ino_t ino; } level;
	level *stack = NULL;
	size_t depth = 0, cap = 0;
	int r = 0;
	for (;;) {
		char name[NAME_MAX + 1];
		bool is_dir = false;
		r = first_entry(cur, name, &is_dir);
		if (r < 0)
			break;
		if (r == 0) {
			if (depth == 0)
				break;
			struct stat up;
			int parent = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			level *l = &stack[--depth];
			if (parent < 0 || fstat(parent, &up) < 0 || up.st_dev != l->dev || up.st_ino != l->ino) {
				r = parent < 0 ? -errno : -ESTALE;   /* moved meanwhile: stop */
				if (parent >= 0)
					close(parent);
				break;
			}
			close(cur);
			cur = parent;
			if (unlinkat(cur, l->name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
				r = -errno;
				break;
			}
			continue;
		}
		struct stat here;
		(void) fchmodat(cur, name, 0700, AT_SYMLINK_NOFOLLOW);   /* never through a link swapped in */
		int sub = openat(cur, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		struct stat below;
		if (sub < 0 || fstat(cur, &here) < 0 || fstat(sub, &below) < 0) {
			r = -errno;
			if (sub >= 0)
				close(sub);
			break;
		}
		if (below.st_dev != top.st_dev) {
			/* A mount left inside (a failed build's /proc): never
			 * descend into another filesystem. */
			close(sub);
			r = -EXDEV;
			break;
		}
		if (depth == cap) {
			level *v = realloc(stack, (cap = cap ? cap * 2 : 64) * sizeof(*v));
			if (!v) {
				close(sub);
				r = -ENOMEM;
				break;
			}
			stack = v;
		}
		stack[depth] = (level){ .dev = here.st_dev, .ino = here.st_ino };
		memcpy(stack[depth++].name, name, sizeof(name));
		close(cur);
		cur = sub;
	}
	close(cur);
	free(stack);
	return r;
}

int remove_beneath(int dirfd, const char *name)
{
	if (!name || !*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
		return -EINVAL;
	struct stat st, top;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dirfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
	if (fstat(dirfd, &top) < 0)
		return -errno;
	if (st.st_dev != top.st_dev)
		return -EXDEV;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* Its entries go only if it is writable: a read-only directory
	 * (as images have them) is made so first, as those below it are. */
	(void) fchmod(fd, 0700);
	int r = empty_dir_at(fd);
	close(fd);
	if (r < 0)
		return r;
	return unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? -errno : 0;
}

int remove_tree(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	(void) fchmod(fd, 0700);   /* as remove_beneath */
	int r = empty_dir_at(fd);
	close(fd);
	if (r < 0)
		return r;
	return rmdir(path) < 0 && errno != ENOENT ? -errno : 0;
}
