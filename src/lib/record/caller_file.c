/* Files nsbox writes for its caller at a path the caller names: the audit
 * log, the result record, stats. What they hold (command lines, the
 * payload's output) is the caller's, and they are often written by root: a
 * file another local user made first where the caller's file goes (in a
 * shared or sticky directory, /tmp), or a link to one, let that user read
 * every line and rewrite or truncate them. So the file must be reached with
 * no symlink on the way, its directory must be the caller's or root's and
 * not writable by anyone else (who could make the file first, or rename
 * ours away and put theirs in its place), and the file itself the caller's,
 * not writable by others, with one name. Created, it is 0600. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/error.h"
#include "base/syscalls.h"
#include "record/caller_file.h"

static bool trusted_dir(const struct stat *st)
{
	return (st->st_uid == geteuid() || st->st_uid == 0) && !(st->st_mode & 022);
}

/* A regular file that is ours alone. */
static bool trusted_file(const struct stat *st)
{
	return st->st_uid == geteuid() && !(st->st_mode & 022) && st->st_nlink == 1;
}

/* The directory of path, opened with no symlink on the way and checked;
 * its last name in base. */
static int parent_dir(const char *path, char *base, size_t baselen, const char *step, const char *what,
                      nsbox_error **err)
{
	const char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;
	if (!*name || !strcmp(name, ".") || !strcmp(name, ".."))
		return nsbox_err(err, EISDIR, step, "open %s '%s': a directory, not a file", what, path);
	if (strlen(name) >= baselen)
		return nsbox_err(err, ENAMETOOLONG, step, "open %s '%s'", what, path);
	memcpy(base, name, strlen(name) + 1);
	_cleanup_free_ char *dir = slash ? strndup(path, (size_t) (slash - path)) : strdup(".");
	if (!dir)
		return nsbox_err(err, ENOMEM, step, "open %s '%s'", what, path);
	/* No symlink anywhere on the way: one planted by someone who can write
	 * in a directory we pass through would choose where the file goes. */
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
	                        .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	int dfd = sys_openat2(AT_FDCWD, *dir ? dir : "/", &how);
	if (dfd < 0) {
		int e = errno;
		return nsbox_err_hint(err, e, step, e == ELOOP ? "give the path without symlinks" : NULL,
		                      "open %s '%s': open its directory", what, path);
	}
	struct stat st;
	if (fstat(dfd, &st) < 0) {
		int e = errno;
		close(dfd);
		return nsbox_err(err, e, step, "open %s '%s': open its directory", what, path);
	}
	if (!trusted_dir(&st)) {
		close(dfd);
		return nsbox_err_hint(err, EPERM, step, "keep it in a directory of your own that only you can write",
		                      "open %s '%s': its directory is not yours (or root's), or others may write in it",
		                      what, path);
	}
	return dfd;
}

int caller_file_open(const char *path, int flags, const char *step, const char *what, nsbox_error **err)
{
	char base[NAME_MAX + 1];
	_cleanup_close_ int dfd = parent_dir(path, base, sizeof(base), step, what, err);
	if (dfd < 0)
		return dfd;
	/* O_NOFOLLOW: a symlink there is refused, not followed. O_NONBLOCK: a
	 * FIFO must not hang the open. Nobody else can create or swap the
	 * file in this directory (checked above), so what fstat() sees is
	 * what is written to. Emptied (O_TRUNC) only once it is known ours. */
	int f = openat(dfd, base, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC |
	                              (flags & O_APPEND), 0600);
	if (f < 0)
		return nsbox_err(err, errno, step, "open %s '%s'", what, path);
	struct stat st;
	int e = fstat(f, &st) < 0 ? errno : 0;
	/* A character device (/dev/null, a terminal) is nothing anyone
	 * planted (only root makes them), where the caller allows one. */
	bool device = !e && S_ISCHR(st.st_mode) && (flags & CALLER_FILE_DEVICE);
	if (!e && !device && !S_ISREG(st.st_mode)) {
		close(f);
		return nsbox_err(err, EINVAL, step, "open %s '%s': not a regular file", what, path);
	}
	if (!e && !device && !trusted_file(&st))
		e = EPERM;
	int fl = e ? -1 : fcntl(f, F_GETFL);
	if (!e && (fl < 0 || fcntl(f, F_SETFL, fl & ~O_NONBLOCK) < 0 ||
	           ((flags & O_TRUNC) && S_ISREG(st.st_mode) && ftruncate(f, 0) < 0)))
		e = errno;
	if (e) {
		close(f);
		if (e == EPERM)
			return nsbox_err_hint(err, e, step, "remove it, or name a file of your own (mode 0600)",
			                      "open %s '%s': it belongs to someone else, others may write it, or it has "
			                      "another name (hard link)", what, path);
		return nsbox_err(err, e, step, "open %s '%s'", what, path);
	}
	return f;
}
