/* The workspace's size, counted and watched: ws_du walks a tree of any
 * depth one directory fd at a time; the supervisor's watch polls statfs and
 * counts the upper layer only when a bound may have been passed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "config/conf.h"
#include "workspace/workspace.h"

void ws_du(int top, ws_usage *u)
{
	/* Every block of the tree, at any depth, one directory fd at a time:
	 * going down remembers where the parent's listing was (telldir), going
	 * up reopens ".." (checked) and seeks back. */
	typedef struct level { long pos; dev_t dev; ino_t ino; } level;
	level *stack = NULL;
	size_t depth = 0, cap = 0;
	*u = (ws_usage){ .complete = true };
	/* A new open file description: a dup would share (and move) the
	 * caller's directory offset. */
	int fd = openat(top, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		u->complete = false;
		return;
	}
	for (;;) {
		struct dirent *e = readdir(d);
		if (!e) {
			if (depth == 0)
				break;
			level *l = &stack[--depth];
			struct stat up;
			int pfd = openat(dirfd(d), "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			closedir(d);
			d = NULL;
			if (pfd < 0 || fstat(pfd, &up) < 0 || up.st_dev != l->dev || up.st_ino != l->ino ||
			    !(d = fdopendir(pfd))) {
				if (pfd >= 0 && !d)
					close(pfd);
				u->complete = false;
				break;   /* moved meanwhile: what was counted */
			}
			seekdir(d, l->pos);
			continue;
		}
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		u->bytes += (uint64_t) st.st_blocks * 512;
		u->entries++;
		if (!S_ISDIR(st.st_mode))
			continue;
		struct stat here;
		int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		DIR *sd = sub >= 0 ? fdopendir(sub) : NULL;
		if (!sd || fstat(dirfd(d), &here) < 0) {
			/* A directory the payload made unreadable (or gone):
			 * what it holds is not counted, so the count is a floor. */
			if (sd)
				closedir(sd);
			else if (sub >= 0)
				close(sub);
			u->complete = false;
			continue;
		}
		if (depth == cap) {
			level *v = realloc(stack, (cap = cap ? cap * 2 : 64) * sizeof(*v));
			if (!v) {
				closedir(sd);
				u->complete = false;
				break;
			}
			stack = v;
		}
		stack[depth++] = (level){ .pos = telldir(d), .dev = here.st_dev, .ino = here.st_ino };
		closedir(d);
		d = sd;
	}
	if (d)
		closedir(d);
	free(stack);
}

/* The upper layer's size when statfs says the filesystem lost more than
 * a bound allows since the last look; a full count only then. */
static void fs_free(int fd, uint64_t *avail, uint64_t *ffree, bool *has_inodes)
{
	struct statfs sf;
	if (fstatfs(fd, &sf) < 0) {
		*avail = *ffree = 0;
		*has_inodes = false;
		return;
	}
	*avail = (uint64_t) sf.f_bavail * (uint64_t) sf.f_bsize;
	*ffree = (uint64_t) sf.f_ffree;
	*has_inodes = sf.f_files != 0;   /* btrfs and others count none */
}

int ws_watch_start(ws_plan *w)
{
	if (!w->active || w->mode != WS_OVERLAY || (!w->max_bytes && !w->max_files))
		return 0;
	w->upper_fd = open(w->upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (w->upper_fd < 0)
		return -errno;
	ws_usage u;
	ws_du(w->upper_fd, &u);
	w->base_bytes = u.bytes;
	w->base_files = u.entries;
	bool inodes;
	fs_free(w->upper_fd, &w->avail0, &w->ffree0, &inodes);
	return 1;
}

bool ws_over_bound(ws_plan *w)
{
	if (w->upper_fd < 0)
		return false;
	uint64_t avail, ffree;
	bool inodes;
	fs_free(w->upper_fd, &avail, &ffree, &inodes);
	uint64_t used = w->avail0 > avail ? w->avail0 - avail : 0;
	uint64_t made = w->ffree0 > ffree ? w->ffree0 - ffree : 0;
	/* statfs sees the whole filesystem: space another program frees
	 * meanwhile hides what the sandbox used. So the tree is counted every
	 * two seconds anyway, and every second without an inode count. */
	w->polls++;
	bool periodic = w->polls % 20 == 0 || (w->max_files && !inodes && w->polls % 10 == 0);
	bool bytes_near = w->max_bytes && w->base_bytes + used > w->max_bytes;
	bool files_near = w->max_files && inodes && w->base_files + made > w->max_files;
	if (!bytes_near && !files_near && !periodic)
		return false;
	/* Someone used the space: the sandbox, or another program on the
	 * host. Count, and start again from here. */
	ws_usage u;
	ws_du(w->upper_fd, &u);
	w->base_bytes = u.bytes;
	w->base_files = u.entries;
	w->avail0 = avail;
	w->ffree0 = ffree;
	if (w->max_bytes && u.bytes > w->max_bytes)
		w->over = "max_size";
	else if (w->max_files && u.entries > w->max_files)
		w->over = "max_files";
	else if (!u.complete && (bytes_near || files_near))
		/* The filesystem says a bound may be passed and the count cannot
		 * say otherwise (a directory made unreadable hides what it
		 * holds): fail closed. */
		w->over = "unreadable";
	return w->over != NULL;
}
