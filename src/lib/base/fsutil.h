/* Directory trees on the host: create a path, remove a tree. */
#ifndef NSBOX_FSUTIL_H
#define NSBOX_FSUTIL_H

#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* mkdir -p: every missing component with `mode`. 0 or -errno. */
int mkdir_p(const char *path, mode_t mode);
/* rm -rf, for trees whose content may be hostile (an image, a workspace's
 * upper layer): iterative, to any depth, with one directory fd at a time and
 * no path longer than a name; never follows a link nor enters another
 * filesystem (a mount left inside, such as a failed build's /proc, stops it
 * with -EXDEV). 0 or -errno. */
int remove_tree(const char *path);
/* The same for `name` (one component) of directory `dirfd`. */
int remove_beneath(int dirfd, const char *name);
/* Empty the directory open at `fd` (its entries go, it stays). */
int empty_dir_at(int fd);

/* How open_beneath may resolve, beyond its rules. */
enum {
	BENEATH_NO_XDEV = 1 << 0,          /* nor onto another mount (EXDEV) */
	BENEATH_SYMLINKS_INSIDE = 1 << 1,  /* symlinks that stay beneath are followed */
};
/* openat2 of `rel` beneath the directory fd `dirfd`, the one way a path in
 * a hostile tree is opened: never above it ('..', an absolute path or
 * symlink: EXDEV), never through a /proc magic link, and (unless
 * BENEATH_SYMLINKS_INSIDE) through no symlink at all (ELOOP), the last
 * component included (O_NOFOLLOW added). O_CLOEXEC always. `rel` is taken
 * as it is ("" is ENOENT, as for openat). An fd, or -errno (errno set).
 * A system call only: the child may call it. */
int open_beneath(int dirfd, const char *rel, int flags, unsigned opts);

/* What tree_walk shows its visitor: the entry `name` of the directory open
 * at `dir`, as lstat saw it; for a directory, `sub` is that directory
 * opened (O_DIRECTORY|O_NOFOLLOW, the same inode), else -1. The visitor
 * returns 0 to go on (into the directory), TREE_SKIP not to enter it, or
 * -errno to end the walk with that. */
typedef int (*tree_visit_fn)(int dir, const char *name, const struct stat *st, int sub, void *ctx);
#define TREE_SKIP 1
#define TREE_MAX_DEPTH 512
enum {
	/* An entry that cannot be read or entered is passed over (shown with
	 * sub -1 when it is a directory), not the end of the walk. */
	TREE_KEEP_GOING = 1 << 0,
};
/* Walk the tree under the directory fd `dirfd` (itself not shown),
 * depth-first, parents before their entries, anchored to directory fds
 * (one per level; deeper than TREE_MAX_DEPTH is -ELOOP), never following
 * a symlink and never entering another filesystem (a directory on another
 * device, a mount left inside, is neither shown nor entered). An entry gone
 * between readdir and lstat is passed over. 0 or -errno. */
int tree_walk(int dirfd, unsigned flags, tree_visit_fn visit, void *ctx);
/* du: the bytes allocated to the tree at `dirfd`, itself included, by
 * tree_walk with TREE_KEEP_GOING (what cannot be read is not counted;
 * hard links count each time). */
uint64_t tree_usage(int dirfd);

#endif
