/* Child side: building the new root filesystem from the plan's mount ops.
 * Every target is resolved with openat2(RESOLVE_IN_ROOT) against the new
 * root (mountpoint.c, which also makes the missing mount points), so a
 * symlink in a hostile image resolves inside the image and never onto the
 * host; every bind is made from an fd with open_tree/move_mount.
 * No allocation and no stdio here: this runs after clone. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plan/plan.h"
#include "child/mountpoint.h"
#include "base/syscalls.h"

/* "/proc/self/fd/N" into buf (no snprintf in the child). */
static const char *fd_path(char buf[32], int fd)
{
	static const char prefix[] = "/proc/self/fd/";
	char digits[12];
	int n = 0;
	unsigned v = (unsigned) fd;
	do {
		digits[n++] = (char) ('0' + v % 10);
		v /= 10;
	} while (v && n < 11);
	memcpy(buf, prefix, sizeof(prefix) - 1);
	for (int i = 0; i < n; i++)
		buf[sizeof(prefix) - 1 + i] = digits[n - 1 - i];
	buf[sizeof(prefix) - 1 + n] = '\0';
	return buf;
}

static unsigned attr_flags(unsigned f)
{
	return ((f & OPF_RDONLY) ? MOUNT_ATTR_RDONLY : 0) | ((f & OPF_NOSUID) ? MOUNT_ATTR_NOSUID : 0) |
	       ((f & OPF_NODEV) ? MOUNT_ATTR_NODEV : 0) | ((f & OPF_NOEXEC) ? MOUNT_ATTR_NOEXEC : 0);
}

/* Clone the tree at src_fd, set its attributes while it is still detached
 * (so it is never visible writable), then attach it on dst_fd. */
static int bind_fd(int src_fd, int dst_fd, unsigned flags)
{
	unsigned rec = (flags & OPF_RECURSIVE) ? AT_RECURSIVE : 0;
	int tree = sys_open_tree(src_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | rec);
	if (tree < 0)
		return -errno;
	int r = 0;
	struct mount_attr attr = { .attr_set = attr_flags(flags) };
	if (attr.attr_set && sys_mount_setattr(tree, "", AT_EMPTY_PATH | rec, &attr) < 0)
		r = -errno;
	if (r == 0 && sys_move_mount(tree, "", dst_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		r = -errno;
	close(tree);
	return r;
}

static unsigned long ms_flags(unsigned f)
{
	return ((f & OPF_RDONLY) ? MS_RDONLY : 0) | ((f & OPF_NOSUID) ? MS_NOSUID : 0) |
	       ((f & OPF_NODEV) ? MS_NODEV : 0) | ((f & OPF_NOEXEC) ? MS_NOEXEC : 0) | MS_SILENT;
}

static bool same_inode(int a, int b)
{
	struct stat sa, sb;
	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

static int reopen(const char *path, int checked_fd)
{
	struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS };
	int fd = sys_openat2(AT_FDCWD, path, &how);
	if (fd < 0)
		return -errno;
	if (!same_inode(fd, checked_fd)) {
		close(fd);
		return -EXDEV;   /* replaced since the parent checked it */
	}
	return fd;
}

/* The workspace overlay's upper and work directories (nsbox's own state,
 * reopened with the caller's credentials like the sources), named to the
 * overlay by fd so that its options show no host path. */
static int upper_fd = -1, work_fd = -1;

static int open_state_dir(const char *path)
{
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
	                        .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	int fd = sys_openat2(AT_FDCWD, path, &how);
	return fd < 0 ? -errno : fd;
}

int mounts_open_sources(const nsbox_plan *p, int *failed_op)
{
	for (size_t i = 0; i < p->n_ops; i++) {
		p->child_fds[i] = -1;
		if (p->ops[i].kind != OP_BIND && p->ops[i].kind != OP_OVERLAY)
			continue;
		int fd = reopen(p->ops[i].src_path, p->ops[i].src_fd);
		if (fd >= 0 && p->ops[i].kind == OP_OVERLAY) {
			upper_fd = open_state_dir(p->ws.upper);
			work_fd = upper_fd < 0 ? upper_fd : open_state_dir(p->ws.work);
			if (work_fd < 0) {
				close(fd);
				fd = work_fd;
			}
		}
		if (fd < 0) {
			*failed_op = (int) i;
			return fd;
		}
		p->child_fds[i] = fd;
	}
	*failed_op = -1;
	int fd = reopen(p->rootfs_path, p->rootfs_fd);
	if (fd < 0)
		return fd;
	p->child_fds[p->n_ops] = fd;
	fd = reopen("/dev/null", p->devnull_fd);
	if (fd < 0)
		return fd;
	p->child_fds[p->n_ops + 1] = fd;
	return 0;
}

/* A build step's root: the overlay of the base image and the layers below
 * it, writable, its upper directory the step's new layer. The options name
 * the layers relative to their directory (one page holds more of them),
 * so they are resolved from there. */
static int overlay_root(const nsbox_plan *p)
{
	const nsbox_config *c = p->cfg;
	if (chdir(c->build.overlay_dir) < 0)
		return -errno;
	if (mount("overlay", p->rootfs_path, "overlay", MS_NOSUID | MS_NODEV | MS_SILENT, c->build.overlay) < 0)
		return -errno;
	if (chdir("/") < 0)
		return -errno;
	int fd = open(p->rootfs_path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* A scratch tmpfs on the image's host path, beneath the new root: the image
 * tree and root's idmapped workspace are attached in it, named to their
 * overlays by fd, and it goes with the old root at pivot_root. -1 until
 * then. */
static int scratch_fd = -1;

static int attach(int tree, int at)
{
	return sys_move_mount(tree, "", at, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0 ? -errno : 0;
}

/* A directory `name` made in the scratch tmpfs; an O_PATH fd of it. */
static int scratch_dir(const char *name)
{
	if (mkdirat(scratch_fd, name, 0700) < 0)
		return -errno;
	int fd = openat(scratch_fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* The new root as a read-only overlay whose one layer is the image: a bind
 * mount's root shows in /proc/self/mountinfo (and statmount) as its path in
 * its filesystem - the image store's path on the host - where an overlay's
 * is "/" and its options name its layers as given, /proc/self/fd/N. (Two
 * layers: an overlay without an upper layer needs them; the second is an
 * empty directory.) Returns the overlay's root, attached on src over the
 * scratch tmpfs, which holds the image tree; -errno when the kernel cannot
 * (no overlayfs in a user namespace: before Linux 5.11), the scratch left
 * where it is, beneath whatever the caller attaches on src next (the image
 * tree itself, moved there from the scratch if it was in it). */
static int image_overlay_root(int src, int tree)
{
	char lower[64], t[32], e[32];
	int fs = sys_fsopen("tmpfs", FSOPEN_CLOEXEC);
	if (fs < 0)
		return -errno;
	int r = sys_fsconfig(fs, FSCONFIG_SET_STRING, "size", "16k", 0) < 0 ||
	        sys_fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0700", 0) < 0 ||
	        sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ? -errno : 0;
	int scratch = r < 0 ? r : sys_fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
	close(fs);
	if (scratch < 0)
		return r < 0 ? r : -errno;
	if ((r = attach(scratch, src)) < 0) {
		close(scratch);
		return r;
	}
	scratch_fd = scratch;
	int image = scratch_dir("image"), empty = scratch_dir("empty");
	if (image < 0 || empty < 0 || (r = attach(tree, image)) < 0) {
		r = image < 0 ? image : empty < 0 ? empty : r;
		goto fail;
	}
	/* The image is the bottom layer: overlayfs reads no xattr of a
	 * directory there (on a layer above, it reads user.overlay.opaque,
	 * which needs read permission: a 0700 directory of an owner the
	 * sandbox does not map could not even be looked up). The empty
	 * layer above gives the root directory its attributes: the image
	 * root's mode, and its owner where the sandbox maps it. */
	struct stat rst;
	if (fstat(tree, &rst) == 0) {
		(void) fchownat(empty, "", rst.st_uid, rst.st_gid, AT_EMPTY_PATH);
		(void) fchmodat(scratch_fd, "empty", rst.st_mode & 07777, 0);
	}
	const char *tp = fd_path(t, tree), *ep = fd_path(e, empty);
	size_t a = strlen("lowerdir="), b = strlen(ep), c = strlen(tp);
	memcpy(lower, "lowerdir=", a);
	memcpy(lower + a, ep, b);
	lower[a + b] = ':';
	memcpy(lower + a + b + 1, tp, c + 1);
	fs = sys_fsopen("overlay", FSOPEN_CLOEXEC);
	if (fs < 0) {
		r = -errno;
		goto fail;
	}
	/* userxattr: a user namespace cannot read trusted.* (and what the
	 * image's files say in user.overlay.* stays within its layers). */
	r = sys_fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir", lower + a, 0) < 0 ||
	    sys_fsconfig(fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0 ||
	    sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ? -errno : 0;
	int root = r < 0 ? r : sys_fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (root < 0 && r == 0)
		r = -errno;
	close(fs);
	if (r == 0 && (r = attach(root, src)) < 0)
		close(root);
	if (r < 0)
		goto fail;
	close(image);
	close(empty);
	return root;
fail:
	if (image >= 0)
		close(image);
	if (empty >= 0)
		close(empty);
	close(scratch_fd);
	scratch_fd = -1;
	return r;
}

int mounts_build_root(const nsbox_plan *p, int idmapped, int *failed_op)
{
	*failed_op = -1;
	/* Nothing we mount may propagate back to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -errno;
	if (p->cfg->build.overlay) {
		if (idmapped >= 0)
			close(idmapped);
		return overlay_root(p);
	}
	int src = p->child_fds[p->n_ops];
	/* Root's idmapped clone comes read-only from the parent; otherwise
	 * clone the root here and make it read-only before it is attached:
	 * the payload never sees it writable. */
	int tree = idmapped >= 0 ? idmapped
		: sys_open_tree(src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
	if (tree < 0)
		return -errno;
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV };
	int r = 0;
	if (idmapped < 0 && sys_mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr) < 0)
		r = -errno;
	int root = r < 0 || !p->overlay_root ? -1 : image_overlay_root(src, tree);
	if (root >= 0) {
		close(tree);
		return root;
	}
	/* The image bound as it is (its host path shows in mountinfo), or
	 * moved out of the scratch onto src. */
	if (r == 0)
		r = attach(tree, src);
	if (r < 0) {
		close(tree);
		return r;
	}
	return tree;
}

static int write_file(int dirfd, const char *name, const mount_op *op)
{
	int f = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, op->mode);
	if (f < 0)
		return -errno;
	/* openat's mode is filtered by the umask; the caller asked for this one */
	int r = fchmod(f, op->mode) < 0 ? -errno : 0;
	for (size_t off = 0; r == 0 && off < op->len;) {
		ssize_t n = write(f, op->data + off, op->len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			r = n < 0 ? -errno : -EIO;
		else
			off += (size_t) n;
	}
	close(f);
	return r;
}

static int workspace_fd = -1;

void mounts_set_workspace_fd(int fd)
{
	workspace_fd = fd;
}

/* dst: "KEY=/proc/self/fd/N," appended at *len; false when it would not fit. */
static bool opt_fd(char *dst, size_t size, size_t *len, const char *key, int fd)
{
	char num[32];
	const char *path = fd_path(num, fd);
	size_t k = strlen(key), n = strlen(path);
	if (*len + k + 1 + n + 2 > size)
		return false;
	memcpy(dst + *len, key, k);
	dst[*len + k] = '=';
	memcpy(dst + *len + k + 1, path, n);
	dst[*len + k + 1 + n] = ',';
	*len += k + n + 2;
	dst[*len] = '\0';
	return true;
}

/* The workspace overlay on /workspace (*fd). Its layers are named by fd, so
 * that its options show no host path: the lower layer is root's idmapped
 * clone (attached in the scratch beneath the root, or without one on
 * /workspace itself, where the overlay then hides it) or the directory the
 * parent checked, reopened in our namespace; the upper and work
 * directories are nsbox's state, reopened likewise. */
static int mount_overlay(const nsbox_plan *p, size_t i, int root, int *fd)
{
	const mount_op *op = &p->ops[i];
	int lower = p->child_fds[i];
	if (workspace_fd >= 0 && scratch_fd >= 0) {
		int at = scratch_dir("workspace");
		int r = at < 0 ? at : attach(workspace_fd, at);
		if (at >= 0)
			close(at);
		if (r < 0)
			return r;
		lower = workspace_fd;   /* now the attached mount's root */
	} else if (workspace_fd >= 0) {
		if (sys_move_mount(workspace_fd, "", *fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
			return -errno;
		close(*fd);
		*fd = mountpoint_resolve(root, op->target, 0);   /* now inside the idmapped mount */
		if (*fd < 0)
			return *fd;
		lower = *fd;
	}
	char opts[PATH_MAX], target[32];
	size_t len = 0, c = strlen(op->data);
	if (!opt_fd(opts, sizeof(opts), &len, "lowerdir", lower) ||
	    !opt_fd(opts, sizeof(opts), &len, "upperdir", upper_fd) ||
	    !opt_fd(opts, sizeof(opts), &len, "workdir", work_fd) || len + c + 1 > sizeof(opts))
		return -ENAMETOOLONG;
	memcpy(opts + len, op->data, c + 1);
	if (mount("overlay", fd_path(target, *fd), "overlay", ms_flags(op->flags), opts) < 0)
		return -errno;
	return 0;
}

/* OP_BIND_DATA: the file is made on a scratch tmpfs stacked for a moment on
 * the new root's /tmp, bound over the target, and the scratch mount detached:
 * the bind keeps the file, and nothing else of the scratch tmpfs is visible.
 * (A detached fsmount would be neater, but open_tree cannot clone from one
 * before Linux 6.15.) */
static int bind_data(int root, int target, const mount_op *op)
{
	char path[32];
	int dir = mountpoint_resolve(root, "tmp", O_DIRECTORY);
	if (dir < 0)
		return dir;
	int r = mount("tmpfs", fd_path(path, dir), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_SILENT,
	              "size=16k,nr_inodes=4,mode=0755") < 0 ? -errno : 0;
	close(dir);
	if (r < 0)
		return r;
	int scratch = mountpoint_resolve(root, "tmp", O_DIRECTORY);
	if (scratch < 0)
		return scratch;
	r = write_file(scratch, "data", op);
	if (r == 0) {
		int f = openat(scratch, "data", O_PATH | O_NOFOLLOW | O_CLOEXEC);
		r = f < 0 ? -errno : bind_fd(f, target, op->flags);
		if (f >= 0)
			close(f);
	}
	if (umount2(fd_path(path, scratch), MNT_DETACH) < 0 && r == 0)
		r = -errno;
	close(scratch);
	return r;
}

/* Append `s` to out (of size cap) at *len; false when it does not fit. */
static bool append(char *out, size_t cap, size_t *len, const char *s)
{
	size_t n = strlen(s);
	if (*len + n + 1 > cap)
		return false;
	memcpy(out + *len, s, n + 1);
	*len += n;
	return true;
}

/* OP_HOME: a tmpfs on the home directory for the overlay's upper and work
 * directories, then the overlay of the image's directory (named by an fd
 * taken before the tmpfs covered it) stacked on the tmpfs. Where overlayfs
 * refuses (a lower filesystem it cannot use), the bare tmpfs stays, the
 * payload's: the home is writable, and empty. */
static int mount_home(const nsbox_plan *p, const mount_op *op, int root)
{
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
	                        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	char lp[32], tp[32], up[48];
	struct stat st;
	int lower = sys_openat2(root, op->target, &how);
	if (lower < 0)
		return -errno;
	int r = fstat(lower, &st) < 0 ? -errno : 0;
	if (r == 0 && mount("tmpfs", fd_path(lp, lower), "tmpfs", ms_flags(op->flags), op->data) < 0)
		r = -errno;
	int t = r == 0 ? sys_openat2(root, op->target, &how) : -1;
	if (r == 0 && t < 0)
		r = -errno;
	if (r == 0 && (mkdirat(t, "upper", 0700) < 0 || mkdirat(t, "work", 0700) < 0 ||
	               fchownat(t, "upper", p->uid, p->gid, AT_SYMLINK_NOFOLLOW) < 0))
		r = -errno;
	if (r == 0) {
		/* The upper directory is the home's own inode: the image's mode,
		 * the payload's ownership. */
		const char *tdir = fd_path(tp, t);
		size_t n = strlen(tdir);
		memcpy(up, tdir, n);
		memcpy(up + n, "/upper", sizeof("/upper"));
		if (chmod(up, st.st_mode & 07777) < 0)
			r = -errno;
	}
	char opts[256];
	size_t len = 0;
	bool fits = r == 0 && append(opts, sizeof(opts), &len, "lowerdir=") &&
	            append(opts, sizeof(opts), &len, fd_path(lp, lower)) &&
	            append(opts, sizeof(opts), &len, ",upperdir=") && append(opts, sizeof(opts), &len, tp) &&
	            append(opts, sizeof(opts), &len, "/upper,workdir=") && append(opts, sizeof(opts), &len, tp) &&
	            append(opts, sizeof(opts), &len, "/work,userxattr");
	if (r == 0 && (!fits || mount("overlay", tp, "overlay", ms_flags(op->flags), opts) < 0)) {
		(void) unlinkat(t, "upper", AT_REMOVEDIR);
		(void) unlinkat(t, "work", AT_REMOVEDIR);
		if (fchownat(t, "", p->uid, p->gid, AT_EMPTY_PATH) < 0 || chmod(tp, st.st_mode & 07777) < 0)
			r = -errno;
	}
	if (t >= 0)
		close(t);
	close(lower);
	return r;
}

/* Hide what is at fd (resolved in the new root) as runc does: a directory
 * under an empty read-only tmpfs, anything else under /dev/null. The kind
 * is taken from what is there, not from the plan, so a kernel that makes a
 * file of a directory (or the reverse) still gets it masked. */
static int mask(const nsbox_plan *p, int fd)
{
	char path[32];
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return bind_fd(p->child_fds[p->n_ops + 1], fd, 0);
	if (mount("tmpfs", fd_path(path, fd), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_SILENT,
	          "size=4k,nr_inodes=1,mode=0555") < 0)
		return -errno;
	return 0;
}

static int apply_op(const nsbox_plan *p, size_t i, int *rootp)
{
	const mount_op *op = &p->ops[i];
	char name[NAME_MAX + 1], path[32];
	int fd, r = 0;
	if (op->kind == OP_MKDIR || op->kind == OP_SYMLINK || op->kind == OP_WRITE_FILE) {
		fd = mountpoint_open_parent(*rootp, op->target, name);
		if (fd < 0)
			return fd;
		if (op->kind == OP_MKDIR && mkdirat(fd, name, op->mode) < 0 && errno != EEXIST)
			r = -errno;
		if (op->kind == OP_SYMLINK && symlinkat(op->data, fd, name) < 0)
			r = -errno;
		if (op->kind == OP_WRITE_FILE)
			r = write_file(fd, name, op);
		close(fd);
		return r;
	}
	if (op->kind == OP_HOME)
		return mount_home(p, op, *rootp);
	fd = mountpoint_resolve_target(rootp, op);
	int root = *rootp;
	if (fd < 0)
		return (fd == -ENOENT && (op->flags & OPF_OPTIONAL)) ? 0 : fd;
	switch (op->kind) {
	case OP_BIND:
		if ((op->flags & OPF_WORKSPACE) && workspace_fd >= 0)
			r = sys_move_mount(workspace_fd, "", fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0 ? -errno : 0;
		else
			r = bind_fd(p->child_fds[i], fd, op->flags);
		break;
	case OP_FS:
		if (mount(op->fstype, fd_path(path, fd), op->fstype, ms_flags(op->flags), op->data) < 0)
			r = -errno;
		break;
	case OP_RDONLY:
		if (op->flags & OPF_RECURSIVE) {
			/* A directory inside a mount: bind it over itself, read-only. */
			r = bind_fd(fd, fd, op->flags | OPF_RDONLY);
		} else {
			/* A mount we made (/dev): flip that mount alone, keeping
			 * the binds and filesystems mounted below it. */
			struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY };
			if (sys_mount_setattr(fd, "", AT_EMPTY_PATH, &attr) < 0)
				r = -errno;
		}
		break;
	case OP_MASK_FILE:
	case OP_MASK_DIR:
		r = mask(p, fd);
		break;
	case OP_BIND_DATA:
		r = bind_data(root, fd, op);
		break;
	case OP_OVERLAY:
		r = mount_overlay(p, i, root, &fd);
		break;
	default:
		r = -EINVAL;
	}
	close(fd);
	return r;
}

int mounts_apply(const nsbox_plan *p, int *root, int *failed_op)
{
	for (size_t i = 0; i < p->n_ops; i++) {
		int r = apply_op(p, i, root);
		if (r < 0) {
			*failed_op = (int) i;
			return r;
		}
	}
	*failed_op = -1;
	return 0;
}

int mounts_pivot(int root)
{
	/* pivot_root(".", ".") stacks the old root on top of the new one; the
	 * lazy unmount then drops it, so no host path stays reachable. */
	if (fchdir(root) < 0 || sys_pivot_root(".", ".") < 0 || umount2(".", MNT_DETACH) < 0 ||
	    chdir("/") < 0)
		return -errno;
	return 0;
}
