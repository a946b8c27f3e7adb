/* Root's image store is readable by every local user. Were an image's
 * files owned on disk by the ids the image gives them, a file of uid 1000
 * would belong to host user 1000, who could change it in the store and so
 * in every later sandbox of that image. So root's images are stored with
 * their owners shifted into root's sandbox range: image id N is host id
 * base + N, the very id a sandbox's N is on the host. No host account owns
 * any of it, and the sandbox needs no idmapped mount to see the owners
 * right. The read-only mount keeps sandboxes from changing it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fsutil.h"
#include "plan/idmap.h"
#include "image/image_owners.h"

#define OVERFLOW_ID 65534u

static uint32_t shifted(uint32_t id, uint32_t base, unsigned long *overflow)
{
	if (id >= base && id - base < NSBOX_RANGE_COUNT)
		return id;
	if (id < NSBOX_RANGE_COUNT)
		return base + id;
	(*overflow)++;
	return base + OVERFLOW_ID;
}

typedef struct shift_ctx {
	uint32_t ub, gb;
	unsigned long *overflow;
	bool replace;   /* converting a published store in place */
} shift_ctx;

/* A published image's file that a host user could still write (it owned
 * it until now, so it may hold it open) or that is hard-linked (perhaps to
 * a host file that user linked in): chowning that inode would leave the
 * open writer its write access, or give a host file away. The name gets a
 * fresh copy, made by root beside it and renamed over it; the old inode
 * keeps its owner and leaves the image. */
static int replace_copy(int dfd, const char *name, const struct stat *st, uint32_t u, uint32_t g)
{
	_cleanup_close_ int in = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat ist;
	if (in < 0)
		return -errno;
	if (fstat(in, &ist) < 0 || ist.st_ino != st->st_ino || ist.st_dev != st->st_dev || !S_ISREG(ist.st_mode))
		return -ESTALE;
	char tmp[64];
	snprintf(tmp, sizeof(tmp), ".nsbox-shift-%d", (int) getpid());
	(void) unlinkat(dfd, tmp, 0);   /* an interrupted pass's */
	_cleanup_close_ int out = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return -errno;
	int r = 0;
	for (;;) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			break;
		}
		if (n == 0)
			break;
	}
	struct timespec times[2] = { ist.st_atim, ist.st_mtim };
	if (r == 0 && (fchown(out, u, g) < 0 || fchmod(out, ist.st_mode & 01777) < 0 || futimens(out, times) < 0))
		r = -errno;
	if (r == 0 && renameat(dfd, tmp, dfd, name) < 0)
		r = -errno;
	if (r < 0)
		(void) unlinkat(dfd, tmp, 0);
	return r;
}

static int shift_entry(int dfd, const char *name, const struct stat *st, const shift_ctx *c)
{
	uint32_t u = shifted((uint32_t) st->st_uid, c->ub, c->overflow);
	uint32_t g = shifted((uint32_t) st->st_gid, c->gb, c->overflow);
	if (u == st->st_uid && g == st->st_gid)
		return 0;
	if (c->replace && S_ISREG(st->st_mode) && (st->st_uid != 0 || st->st_nlink > 1))
		return replace_copy(dfd, name, st, u, g);
	/* chown clears set-id bits: stripped already. A directory keeps its
	 * mode. */
	return fchownat(dfd, name, u, g, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

/* A directory comes before what is in it: its old owner may add no entry
 * behind the walk. (The image's root alone comes last: see shift_tree.) */
static int shift_visit(int dir, const char *name, const struct stat *st, int sub, void *ctx)
{
	(void) sub;
	if (!strncmp(name, ".nsbox-shift-", 13))
		return TREE_SKIP;   /* replace_copy's own */
	return shift_entry(dir, name, st, ctx);
}

int shift_tree(int dirfd, uint32_t uid_base, uint32_t gid_base, bool replace, unsigned long *overflow)
{
	struct stat st;
	if (fstat(dirfd, &st) < 0)
		return -errno;
	const shift_ctx c = { .ub = uid_base, .gb = gid_base, .overflow = overflow, .replace = replace };
	/* The root last: its owner says the store is shifted (rootfs.c,
	 * image ls), so an interrupted pass is seen and finished. */
	int r = tree_walk(dirfd, 0, shift_visit, (void *) &c);
	return r ?: shift_entry(dirfd, ".", &st, &c);
}

bool image_owners_shifted(const struct stat *st, uint32_t uid_base, uint32_t gid_base)
{
	return st->st_uid >= uid_base && st->st_uid - uid_base < NSBOX_RANGE_COUNT && st->st_gid >= gid_base &&
	       st->st_gid - gid_base < NSBOX_RANGE_COUNT;
}

int image_shift_owners(int root_fd, bool replace, const char *what, nsbox_error **err)
{
	root_ids ri;
	int r = idmap_root_ids("/etc/subuid", "/etc/subgid", &ri, err);
	if (r < 0)
		return r;
	if (ri.conflict_file)
		return nsbox_err_hint(err, EBUSY, "image", "see 'nsbox check': root's sandbox range must be nsbox's alone",
		                      "%s: root's sandbox range overlaps an entry of '%s'", what, ri.conflict_file);
	unsigned long overflow = 0;
	r = shift_tree(root_fd, (uint32_t) ri.uid.start, (uint32_t) ri.gid.start, replace, &overflow);
	if (r < 0)
		return nsbox_err(err, -r, "image", "%s: shift the owners into root's sandbox range", what);
	return 0;
}
