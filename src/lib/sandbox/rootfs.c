/* Root's sandboxes: the root filesystem idmapped into the sandbox's user
 * namespace, so that its files keep their owners as the sandbox sees them
 * (root's files are root's, as under Docker) instead of reading as nobody's.
 * The mapping is the sandbox's own: image id N is host id base+N, which is
 * id N inside and never host root. Root's own store needs none of it
 * (see below). Parent side; the tree travels to the child with the
 * go-ahead. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <sys/stat.h>

#include "base/cleanup.h"
#include "image/image_owners.h"
#include "plan/plan.h"
#include "base/syscalls.h"

int rootfs_idmapped(const nsbox_plan *p, pid_t pid)
{
	if (!p->root_range)
		return -EOPNOTSUPP;   /* rootless: only the host's root may idmap */
	/* Root's images are stored shifted into the sandbox's own range
	 * (image_owners.c): the child's plain clone shows their owners right,
	 * and costs no mapping. A tree with the image's own ids on it (an
	 * older store, a --rootfs directory) is idmapped. */
	struct stat st;
	if (fstat(p->rootfs_fd, &st) < 0)
		return -errno;
	if (image_owners_shifted(&st, p->host_setup_uid, p->host_setup_gid))
		return -EOPNOTSUPP;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int) pid);
	_cleanup_close_ int userns = open(path, O_RDONLY | O_CLOEXEC);
	if (userns < 0)
		return -errno;
	int tree = sys_open_tree(p->rootfs_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
	if (tree < 0)
		return -errno;
	/* Read-only, nosuid and nodev from birth, as the child's own clone
	 * would be: the payload never sees the image writable. */
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
	                           .userns_fd = (uint64_t) userns };
	if (sys_mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr) < 0) {
		int e = errno;
		close(tree);
		return -e;
	}
	return tree;
}
