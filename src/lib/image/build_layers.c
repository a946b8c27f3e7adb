/* A declarative build's image from its layers: the base image's tree is
 * copied, then each step's layer (an overlayfs upper directory, written by
 * the step's sandbox: hostile) is applied on top, bottom first, as overlayfs
 * itself would show it: a whiteout (a character device 0/0) removes what is
 * below it, an opaque directory (user.overlay.opaque, as a user namespace's
 * overlayfs writes it) hides what was below it, anything else replaces what
 * was there. Every file operation is anchored to a directory fd; no link is
 * followed, no other filesystem entered; hard links within the sources stay
 * hard links. Extended attributes are not copied (imports drop them too);
 * set-id bits and devices go in the strip that follows. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "image/build.h"

#define MAX_DEPTH 512

typedef struct hardlink {
	dev_t dev;
	ino_t ino;
	char *rel;        /* its first copy, relative to the destination's root */
} hardlink;

typedef struct flat {
	int dest_root;
	bool keep_owners;
	hardlink *links;
	size_t n_links, cap_links;
	char rel[PATH_MAX];   /* the entry being made, relative to dest_root */
	nsbox_error **err;
} flat;

static int fail(flat *f, int e, const char *what)
{
	return nsbox_err(f->err, e, "image", "build the image: %s '/%s'", what, f->rel);
}

static const char *link_of(const flat *f, const struct stat *st)
{
	for (size_t i = 0; i < f->n_links; i++)
		if (f->links[i].dev == st->st_dev && f->links[i].ino == st->st_ino)
			return f->links[i].rel;
	return NULL;
}

static int note_link(flat *f, const struct stat *st)
{
	if (f->n_links == f->cap_links) {
		size_t cap = f->cap_links ? f->cap_links * 2 : 64;
		hardlink *v = realloc(f->links, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		f->links = v;
		f->cap_links = cap;
	}
	char *rel = strdup(f->rel);
	if (!rel)
		return -ENOMEM;
	f->links[f->n_links++] = (hardlink){ .dev = st->st_dev, .ino = st->st_ino, .rel = rel };
	return 0;
}

/* Owner, mode and times of what is at dfd/name, from st. */
static int attrs(flat *f, int dfd, const char *name, const struct stat *st)
{
	if (f->keep_owners && fchownat(dfd, name, st->st_uid, st->st_gid, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISLNK(st->st_mode) && fchmodat(dfd, name, st->st_mode & 07777, 0) < 0)
		return -errno;
	struct timespec t[2] = { st->st_atim, st->st_mtim };
	return utimensat(dfd, name, t, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

static int copy_data(int in, int out)
{
	if (ioctl(out, FICLONE, in) == 0)
		return 0;
	for (;;) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
		if (n == 0)
			return 0;
		if (n > 0)
			continue;
		if (errno == EINTR)
			continue;
		if (errno != EXDEV && errno != EINVAL && errno != EOPNOTSUPP && errno != ENOSYS)
			return -errno;
		break;
	}
	/* A filesystem copy_file_range does not serve: plain reads. */
	if (lseek(in, 0, SEEK_SET) < 0 || ftruncate(out, 0) < 0 || lseek(out, 0, SEEK_SET) < 0)
		return -errno;
	char b[65536];
	ssize_t n;
	while ((n = read(in, b, sizeof(b))) > 0)
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(out, b + off, (size_t) (n - off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return w < 0 ? -errno : -EIO;
			off += w;
		}
	return n < 0 ? -errno : 0;
}

static int copy_file(flat *f, int sfd, const char *name, const struct stat *st, int dfd)
{
	_cleanup_close_ int in = openat(sfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat ist;
	if (in < 0 || fstat(in, &ist) < 0)
		return fail(f, errno, "read");
	if (ist.st_ino != st->st_ino || ist.st_dev != st->st_dev || !S_ISREG(ist.st_mode))
		return fail(f, ESTALE, "read");
	/* A file with extended attributes (a step's, or overlayfs's own) is
	 * copied without them: an image carries none. */
	ssize_t xl = flistxattr(in, NULL, 0);
	if (xl == 0 || (xl < 0 && errno == ENOTSUP)) {
		if (linkat(sfd, name, dfd, name, 0) == 0)
			return 0;
		if (errno != EXDEV && errno != EMLINK && errno != EPERM)
			return fail(f, errno, "link");
	}
	const char *first = st->st_nlink > 1 ? link_of(f, st) : NULL;
	if (first)
		return linkat(f->dest_root, first, dfd, name, 0) < 0 ? fail(f, errno, "link") : 0;
	_cleanup_close_ int out = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return fail(f, errno, "create");
	int r = copy_data(in, out);
	if (r < 0)
		return fail(f, -r, "copy");
	r = attrs(f, dfd, name, &ist);
	if (r == 0 && st->st_nlink > 1)
		r = note_link(f, st);
	return r < 0 ? fail(f, -r, "copy") : 0;
}

static int copy_tree(flat *f, int sfd, int dfd, int depth);

/* One entry of sfd into dfd, where nothing of that name is. */
static int copy_entry(flat *f, int sfd, const char *name, const struct stat *st, int dfd, int depth)
{
	int r = 0;
	if (S_ISREG(st->st_mode))
		return copy_file(f, sfd, name, st, dfd);
	if (S_ISLNK(st->st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlinkat(sfd, name, target, sizeof(target) - 1);
		if (n < 0)
			return fail(f, errno, "read link");
		target[n] = '\0';
		if (symlinkat(target, dfd, name) < 0)
			return fail(f, errno, "create link");
	} else if (S_ISFIFO(st->st_mode)) {
		if (mkfifoat(dfd, name, 0600) < 0)
			return fail(f, errno, "create fifo");
	} else if (S_ISDIR(st->st_mode)) {
		if (mkdirat(dfd, name, 0700) < 0)
			return fail(f, errno, "create directory");
		_cleanup_close_ int s = openat(sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		_cleanup_close_ int d = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (s < 0 || d < 0)
			return fail(f, errno, "open directory");
		r = copy_tree(f, s, d, depth + 1);
		if (r < 0)
			return r;
	} else {
		return 0;   /* sockets; devices (a stripped image has none) */
	}
	r = attrs(f, dfd, name, st);
	return r < 0 ? fail(f, -r, "set the attributes of") : 0;
}

/* Call fn for every entry of directory fd (not . and ..), with the
 * relative path kept in f->rel. */
static int each_entry(flat *f, int fd, int depth,
                      int (*fn)(flat *, int, const char *, const struct stat *, void *, int), void *arg)
{
	if (depth > MAX_DEPTH)
		return fail(f, ELOOP, "walk below");
	int dup_fd = dup(fd);
	DIR *dir = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!dir) {
		if (dup_fd >= 0)
			close(dup_fd);
		return fail(f, errno, "read directory");
	}
	struct stat root;
	int r = fstat(fd, &root) < 0 ? fail(f, errno, "read directory") : 0;
	size_t len = strlen(f->rel);
	struct dirent *e;
	while (r == 0 && (e = readdir(dir))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (len + 1 + strlen(e->d_name) >= sizeof(f->rel)) {
			r = fail(f, ENAMETOOLONG, "walk below");
			break;
		}
		snprintf(f->rel + len, sizeof(f->rel) - len, "%s%s", len ? "/" : "", e->d_name);
		struct stat st;
		if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			r = fail(f, errno, "read");
		else if (st.st_dev != root.st_dev)
			r = fail(f, EXDEV, "copy (another filesystem)");
		else
			r = fn(f, fd, e->d_name, &st, arg, depth);
		f->rel[len] = '\0';
	}
	closedir(dir);
	return r;
}

static int copy_one(flat *f, int sfd, const char *name, const struct stat *st, void *arg, int depth)
{
	return copy_entry(f, sfd, name, st, *(int *) arg, depth);
}

static int copy_tree(flat *f, int sfd, int dfd, int depth)
{
	return each_entry(f, sfd, depth, copy_one, &dfd);
}

/* ---- applying a layer ------------------------------------------------------ */

static bool is_whiteout(const struct stat *st)
{
	return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);
}

static bool is_opaque(int dirfd)
{
	char v[4];
	ssize_t n = fgetxattr(dirfd, "user.overlay.opaque", v, sizeof(v));
	if (n < 0)
		n = fgetxattr(dirfd, "trusted.overlay.opaque", v, sizeof(v));
	return n == 1 && v[0] == 'y';
}

static int apply_tree(flat *f, int ufd, int dfd, int depth);

static int apply_one(flat *f, int ufd, const char *name, const struct stat *st, void *arg, int depth)
{
	int dfd = *(int *) arg;
	struct stat dst;
	bool there = fstatat(dfd, name, &dst, AT_SYMLINK_NOFOLLOW) == 0;
	if (is_whiteout(st)) {
		int r = there ? remove_beneath(dfd, name) : 0;
		return r < 0 ? fail(f, -r, "remove") : 0;
	}
	if (!S_ISDIR(st->st_mode) || (there && !S_ISDIR(dst.st_mode))) {
		int r = there ? remove_beneath(dfd, name) : 0;
		return r < 0 ? fail(f, -r, "replace") : copy_entry(f, ufd, name, st, dfd, depth);
	}
	_cleanup_close_ int u = openat(ufd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (u < 0)
		return fail(f, errno, "open directory");
	if (there && is_opaque(u)) {
		int r = remove_beneath(dfd, name);
		if (r < 0)
			return fail(f, -r, "replace");
		there = false;
	}
	if (!there)
		return copy_entry(f, ufd, name, st, dfd, depth);
	_cleanup_close_ int d = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d < 0)
		return fail(f, errno, "open directory");
	int r = apply_tree(f, u, d, depth + 1);
	if (r == 0 && (r = attrs(f, dfd, name, st)) < 0)
		r = fail(f, -r, "set the attributes of");
	return r;
}

static int apply_tree(flat *f, int ufd, int dfd, int depth)
{
	return each_entry(f, ufd, depth, apply_one, &dfd);
}

int layers_flatten(int base_fd, const int *upper_fds, size_t n, int dest_fd, bool keep_owners, nsbox_error **err)
{
	flat f = { .dest_root = dest_fd, .keep_owners = keep_owners, .err = err };
	struct stat st;
	int r = copy_tree(&f, base_fd, dest_fd, 0);
	for (size_t i = 0; r == 0 && i < n; i++)
		r = apply_tree(&f, upper_fds[i], dest_fd, 0);
	/* The root directory's attributes are the base's: a layer's root is
	 * the directory the build made for it. */
	if (r == 0 && fstat(base_fd, &st) == 0) {
		f.rel[0] = '\0';
		int a = attrs(&f, dest_fd, ".", &st);
		if (a < 0)
			r = fail(&f, -a, "set the attributes of");
	}
	for (size_t i = 0; i < f.n_links; i++)
		free(f.links[i].rel);
	free(f.links);
	return r;
}
