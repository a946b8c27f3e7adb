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
#include <string.h>
#include <unistd.h>

#include "idmap.h"
#include "image_owners.h"

#define MAX_DEPTH 512
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

static int shift_entry(int dfd, const char *name, const struct stat *st, uint32_t ub, uint32_t gb,
                       unsigned long *overflow)
{
	uint32_t u = shifted((uint32_t) st->st_uid, ub, overflow), g = shifted((uint32_t) st->st_gid, gb, overflow);
	if (u == st->st_uid && g == st->st_gid)
		return 0;
	/* chown clears set-id bits: stripped already. A directory keeps its
	 * mode. */
	return fchownat(dfd, name, u, g, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

static int shift_dir(int fd, dev_t dev, int depth, uint32_t ub, uint32_t gb, unsigned long *overflow)
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
		if (S_ISDIR(st.st_mode)) {
			if (st.st_dev != dev)
				continue;   /* a mount left inside: not ours */
			int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0) {
				r = -errno;
				break;
			}
			struct stat sst;
			if (fstat(sub, &sst) < 0 || sst.st_ino != st.st_ino) {
				close(sub);
				r = -ESTALE;
				break;
			}
			r = shift_dir(sub, dev, depth + 1, ub, gb, overflow);
		}
		/* A directory last, once all beneath it is done. */
		r = r ?: shift_entry(dirfd(d), e->d_name, &st, ub, gb, overflow);
	}
	closedir(d);
	return r;
}

int shift_tree(int dirfd, uint32_t uid_base, uint32_t gid_base, unsigned long *overflow)
{
	struct stat st;
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return -e;
	}
	int r = shift_dir(fd, st.st_dev, 0, uid_base, gid_base, overflow);
	return r ?: shift_entry(dirfd, ".", &st, uid_base, gid_base, overflow);
}

bool image_owners_shifted(const struct stat *st, uint32_t uid_base, uint32_t gid_base)
{
	return st->st_uid >= uid_base && st->st_uid - uid_base < NSBOX_RANGE_COUNT && st->st_gid >= gid_base &&
	       st->st_gid - gid_base < NSBOX_RANGE_COUNT;
}

int image_shift_owners(int root_fd, const char *what, nsbox_error **err)
{
	root_ids ri;
	int r = idmap_root_ids("/etc/subuid", "/etc/subgid", &ri, err);
	if (r < 0)
		return r;
	if (ri.conflict_file)
		return nsbox_err_hint(err, EBUSY, "image", "see 'nsbox check': root's sandbox range must be nsbox's alone",
		                      "%s: root's sandbox range overlaps an entry of '%s'", what, ri.conflict_file);
	unsigned long overflow = 0;
	r = shift_tree(root_fd, (uint32_t) ri.uid.start, (uint32_t) ri.gid.start, &overflow);
	if (r < 0)
		return nsbox_err(err, -r, "image", "%s: shift the owners into root's sandbox range", what);
	return 0;
}
