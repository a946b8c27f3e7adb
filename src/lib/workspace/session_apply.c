/* Applying a session: check every change (all or nothing, or the rest
 * with --skip-denied), stage every file next to the workspace's top, then
 * rename into place, with the session's times. Every path is opened
 * beneath the workspace without following a symlink; modes are at most
 * 0777; sparse files stay sparse. Then the session goes, unless kept. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/buf.h"
#include "base/cleanup.h"
#include "config/conf.h"
#include "base/error.h"
#include "workspace/session.h"
#include "base/syscalls.h"
#include "workspace/workspace.h"

/* ---- apply ------------------------------------------------------------ */

/* `rel` beneath `root`, never through a symlink (not even one that stays
 * inside: the session's view of the tree is what apply writes, and a host
 * symlink where the session has a directory is a conflict). */
int session_beneath(int root, const char *rel, unsigned flags)
{
	return open_beneath(root, *rel ? rel : ".", (int) flags, 0);
}

/* rm -rf `name` in directory `at`, never following a symlink, at any depth. */
static int remove_at(int at, const char *name)
{
	struct stat st;
	if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(at, name, 0) < 0 ? -errno : 0;
	int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = empty_dir_at(fd);
	close(fd);
	return r < 0 ? r : unlinkat(at, name, AT_REMOVEDIR) < 0 ? -errno : 0;
}

/* Copy a regular file, keeping its holes (a payload's `truncate -s 200G`
 * stays a few blocks on the host). */
static int copy_sparse(int in, int out)
{
	struct stat st;
	if (fstat(in, &st) < 0)
		return -errno;
	_cleanup_free_ char *chunk = malloc(65536);
	if (!chunk)
		return -ENOMEM;
	off_t off = 0;
	while (off < st.st_size) {
		off_t data = lseek(in, off, SEEK_DATA);
		if (data < 0 && errno == ENXIO)
			break;   /* only a hole is left */
		if (data < 0)
			return -errno;
		off_t hole = lseek(in, data, SEEK_HOLE);
		if (hole < 0)
			return -errno;
		for (off = data; off < hole;) {
			size_t want = (size_t) (hole - off < 65536 ? hole - off : 65536);
			ssize_t n = pread(in, chunk, want, off);
			if (n <= 0)
				return n < 0 ? -errno : -EIO;
			for (ssize_t w = 0; w < n;) {
				ssize_t k = pwrite(out, chunk + w, (size_t) (n - w), off + w);
				if (k < 0)
					return -errno;
				w += k;
			}
			off += n;
		}
	}
	return ftruncate(out, st.st_size) < 0 ? -errno : 0;
}

static bool selected(const char *path, const char *const *paths, size_t n)
{
	if (!n)
		return true;
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(paths[i]);
		while (l > 1 && paths[i][l - 1] == '/')
			l--;
		if (!strncmp(path, paths[i], l) && (path[l] == '\0' || path[l] == '/'))
			return true;
	}
	return false;
}

static bool newer(const struct stat *st, const struct timespec *t)
{
	return st->st_ctim.tv_sec > t->tv_sec || (st->st_ctim.tv_sec == t->tv_sec && st->st_ctim.tv_nsec > t->tv_nsec);
}

/* Does the symlink at `rel` with `target` stay in the workspace? Relative,
 * and never climbing above the workspace's top on the way (lexically: the
 * link is resolved on the host, where only what apply writes is known). */
static bool target_inside(const char *rel, const char *target)
{
	if (!*target || target[0] == '/')
		return false;
	long depth = 0;
	for (const char *p = rel; *p; p++)
		depth += *p == '/';
	bool named = false;
	for (const char *p = target; *p;) {
		size_t n = strcspn(p, "/");
		/* ".." only before any name: a name may itself be a symlink the
		 * session makes ("q -> ." then "q/q/../../x"), which the text
		 * alone cannot count. */
		if (n == 2 && !strncmp(p, "..", 2) && named)
			return false;
		if (n == 2 && !strncmp(p, "..", 2))
			depth--;
		else if (n && !(n == 1 && *p == '.')) {
			depth++;
			named = true;
		}
		if (depth < 0)
			return false;
		p += n + (p[n] == '/');
	}
	return true;
}

/* A fifo, socket or device the session made: not carried back. */
static bool is_special(const ws_change *c)
{
	return c->mode && !S_ISREG(c->mode) && !S_ISDIR(c->mode) && !S_ISLNK(c->mode);
}

/* A file or symlink: copied to the staging directory, then renamed. */
static bool is_staged(const ws_change *c)
{
	return strcmp(c->kind, "deleted") && (S_ISREG(c->mode) || S_ISLNK(c->mode));
}

/* One change to carry back, as checked. */
typedef struct step {
	const ws_change *c;
	const char *base;     /* its name in its directory */
	char *parent;         /* its directory, relative */
	uid_t uid;            /* root: the owner it gets */
	gid_t gid;
	const char *left;     /* left out, and why (dropped, or refused and skipped) */
} step;

/* The owner of `rel` on the host, or of its nearest existing directory. */
static void host_owner(int root, const char *rel, uid_t *uid, gid_t *gid)
{
	_cleanup_free_ char *p = strdup(rel);
	struct stat st;
	*uid = 0;
	*gid = 0;
	for (char *slash; p;) {
		if (fstatat(root, *p ? p : ".", &st, AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) == 0 && !S_ISLNK(st.st_mode)) {
			*uid = st.st_uid;
			*gid = st.st_gid;
			return;
		}
		if (!*p)
			return;
		slash = strrchr(p, '/');
		if (slash)
			*slash = '\0';
		else
			*p = '\0';
	}
}

/* Why apply refuses change st (NULL: it does not); *forceable: whether
 * --force may override it. `inside_made`: below a directory this apply
 * makes anew (in place of a host symlink, say): nothing there on the host
 * to check, or to follow. */
static const char *problem_of(const session *s, int root, const step *st, bool inside_made, bool *forceable)
{
	const ws_change *c = st->c;
	*forceable = true;
	if (!strcmp(c->kind, "error")) {
		*forceable = false;
		return c->detail && !strcmp(c->detail, "unreadable")
		       ? "is a directory the scan could not read (its mode forbids it): nothing below it is known"
		       : "is too deep for the scan (more than 128 levels): nothing below it can be applied";
	}
	const char *problem = NULL;
	if (c->denied)
		problem = !strcmp(c->kind, "added") ? "is added, and workspace.deny_changes denies it"
		          : !strcmp(c->kind, "deleted") ? "is deleted, and workspace.deny_changes denies it"
		          : !strcmp(c->kind, "modified") ? "is modified, and workspace.deny_changes denies it"
		          : "is type_changed, and workspace.deny_changes denies it";
	else if (S_ISLNK(c->mode) && !c->target) {
		*forceable = false;
		return "is a symlink whose target cannot be read";
	} else if (is_special(c))
		problem = "is a fifo, socket or device, which apply does not carry back (--force leaves it out)";
	else if (c->target && !target_inside(c->path, c->target))
		problem = "is a symlink that leads out of the workspace";
	else if (!S_ISLNK(c->mode) && (c->mode & S_IWOTH))
		problem = "is world-writable";
	/* On the host: no symlink on the way, and not changed since the
	 * session started (someone's edits would be lost). */
	struct stat hs;
	int pfd = inside_made ? -ENOENT : session_beneath(root, st->parent, O_PATH | O_DIRECTORY);
	bool exists = pfd >= 0 && fstatat(pfd, st->base, &hs, AT_SYMLINK_NOFOLLOW) == 0;
	bool should_exist = strcmp(c->kind, "added") != 0;
	if (pfd >= 0)
		close(pfd);
	if (!problem && (pfd == -ELOOP || pfd == -EXDEV || pfd == -ENOTDIR)) {
		*forceable = false;
		return "is reached through a symlink or file on the host";
	}
	if (!problem && ((exists && newer(&hs, &s->created)) || exists != should_exist))
		problem = "changed on the host since the session started";
	return problem;
}

/* Dropped by workspace.git (or always, for git's locks): why. */
static const char *dropped_why(const ws_change *c)
{
	size_t n = strlen(c->path);
	bool lock = (n > 5 && !strcmp(c->path + n - 5, ".lock")) || (n >= 6 && !strcmp(c->path + n - 6, "gc.pid")) ||
	            (n >= 6 && !strcmp(c->path + n - 6, "gc.log"));
	return lock ? "is a lock or log git leaves behind, which is never applied"
	            : "is git's housekeeping, which workspace.git: drop leaves out";
}

/* Is st[j] below the directory of st[i]? */
static bool below(const step *st, size_t i, size_t j)
{
	size_t l = strlen(st[i].c->path);
	return !strncmp(st[j].c->path, st[i].c->path, l) && st[j].c->path[l] == '/';
}

/* Refuse first, write after: collect everything that stops the apply into
 * one message, so that nothing is written when anything is refused. With
 * skip, what would be refused is left out instead (and everything below a
 * directory left out with it). */
static int check(const char *name, const session *s, int root, step *st, size_t n, unsigned flags,
                 nsbox_error **err)
{
	bool force = flags & NSBOX_APPLY_FORCE, skip = flags & NSBOX_APPLY_SKIP_DENIED;
	buf why = { 0 };
	int count = 0;
	const char *made = NULL;   /* a directory this apply makes anew */
	for (size_t i = 0; i < n; i++) {
		const ws_change *c = st[i].c;
		size_t ml = made ? strlen(made) : 0;
		bool inside_made = made && !strncmp(c->path, made, ml) && c->path[ml] == '/';
		if (!inside_made)
			made = S_ISDIR(c->mode) && strcmp(c->kind, "modified") ? c->path : NULL;
		host_owner(root, c->path, &st[i].uid, &st[i].gid);
		if (st[i].left)
			continue;   /* below a directory left out */
		bool forceable;
		const char *problem = c->rule && !strcmp(c->rule, "dropped") ? NULL
		                      : problem_of(s, root, &st[i], inside_made, &forceable);
		if (c->rule && !strcmp(c->rule, "dropped"))
			st[i].left = dropped_why(c);
		else if (!problem || (force && forceable))
			continue;
		else if (skip)
			st[i].left = problem;
		if (st[i].left) {
			for (size_t j = i + 1; j < n && !strncmp(st[j].c->path, c->path, strlen(c->path)); j++)
				if (below(st, i, j) && !st[j].left)
					st[j].left = "is below a directory left out";
			continue;
		}
		_cleanup_free_ char *p = ws_escape(c->path), *t = c->target ? ws_escape(c->target) : NULL;
		if (count++ < 8)
			buf_printf(&why, "%s'%s'%s%s%s %s", count > 1 ? "; " : "", p, t ? " (-> " : "", t ? t : "",
			           t ? ")" : "", problem);
	}
	if (!count) {
		buf_free(&why);
		return 0;
	}
	if (count > 8)
		buf_printf(&why, "; and %d more", count - 8);
	int r = nsbox_err_hint(err, EPERM, "session",
	                       "review them with `nsbox session changes`; apply with --force what you accept, "
	                       "or --skip-denied to apply the rest",
	                       "apply session '%s': %s", name, why.data ? why.data : "");
	buf_free(&why);
	return r;
}

/* Copy (or create) a file or symlink of the upper layer into the staging
 * directory as `tmp`, with its final mode, owner and times. */
static int stage(int upper, int sdir, const char *tmp, const step *st)
{
	const ws_change *c = st->c;
	bool root = geteuid() == 0;
	if (S_ISLNK(c->mode)) {
		struct timespec ts[2] = { c->atime, c->mtime };
		if (symlinkat(c->target, sdir, tmp) < 0)
			return -errno;
		if (root && fchownat(sdir, tmp, st->uid, st->gid, AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
		return utimensat(sdir, tmp, ts, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
	}
	/* Without touching its access time where the kernel lets us (the
	 * owner, or root). */
	int in = session_beneath(upper, c->path, O_RDONLY | O_NONBLOCK | O_NOATIME);
	if (in == -EPERM)
		in = session_beneath(upper, c->path, O_RDONLY | O_NONBLOCK);
	_cleanup_close_ int in_fd = in;
	if (in < 0)
		return in;
	struct stat us;
	if (fstat(in, &us) < 0)
		return -errno;
	if (!S_ISREG(us.st_mode))
		return -EOPNOTSUPP;
	_cleanup_close_ int out = openat(sdir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return -errno;
	int r = copy_sparse(in, out);
	/* Owner first: chown clears set-id bits, but there are none to keep:
	 * the mode is at most rwxrwxrwx. */
	if (r == 0 && root && fchown(out, st->uid, st->gid) < 0)
		r = -errno;
	if (r == 0 && fchmod(out, us.st_mode & 0777) < 0)
		r = -errno;
	/* The session's times, to the nanosecond: a build applied is not
	 * stale to make on the host. */
	struct timespec ts[2] = { us.st_atim, us.st_mtim };
	if (r == 0 && futimens(out, ts) < 0)
		r = -errno;
	if (r == 0 && fsync(out) < 0)
		r = -errno;
	return r;
}

/* The directory `base` in `pfd` with the session's mode (at most 0777),
 * changed through its fd (a path could be swapped for a symlink). */
static int put_dir(int pfd, const step *st)
{
	struct stat hs;
	bool had = fstatat(pfd, st->base, &hs, AT_SYMLINK_NOFOLLOW) == 0;
	if (had && !S_ISDIR(hs.st_mode) && unlinkat(pfd, st->base, 0) < 0)
		return -errno;
	if ((!had || !S_ISDIR(hs.st_mode)) && mkdirat(pfd, st->base, 0700) < 0 && errno != EEXIST)
		return -errno;
	_cleanup_close_ int fd = openat(pfd, st->base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if ((!had || !S_ISDIR(hs.st_mode)) && geteuid() == 0 && fchown(fd, st->uid, st->gid) < 0)
		return -errno;
	return fchmod(fd, st->c->mode & 0777) < 0 ? -errno : 0;
}

static int commit_one(int root, int sdir, const char *tmp, const step *st)
{
	const ws_change *c = st->c;
	_cleanup_close_ int pfd = session_beneath(root, st->parent, O_RDONLY | O_DIRECTORY);
	if (pfd < 0)
		return pfd;
	if (!strcmp(c->kind, "deleted"))
		return remove_at(pfd, st->base);
	if (S_ISDIR(c->mode))
		return put_dir(pfd, st);
	/* Replacing a directory: it must go first (rename cannot). */
	struct stat hs;
	if (fstatat(pfd, st->base, &hs, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(hs.st_mode)) {
		int r = remove_at(pfd, st->base);
		if (r < 0)
			return r;
	}
	return renameat(sdir, tmp, pfd, st->base) < 0 ? -errno : 0;
}

/* Directories get their times last, once nothing is added to them any
 * more: each directory apply wrote into (and each it made or changed)
 * takes the session's times; the workspace's top, when apply only passed
 * through it (its staging directory), gets its own back. Best effort: a
 * directory of someone else's keeps the time the host gives it. */
static void dir_times(int root, int upper, const step *st, size_t n, const struct timespec top[2])
{
	bool top_done = false;
	for (size_t i = 0; i < n; i++) {
		if (st[i].left)
			continue;
		const char *dirs[2] = { st[i].parent,
		                        S_ISDIR(st[i].c->mode) && strcmp(st[i].c->kind, "deleted") ? st[i].c->path : NULL };
		for (int k = 0; k < 2; k++) {
			if (!dirs[k])
				continue;
			/* The same parent as the change before: done already. */
			if (k == 0 && i > 0 && !st[i - 1].left && !strcmp(st[i - 1].parent, dirs[0]))
				continue;
			struct stat us;
			_cleanup_close_ int u = session_beneath(upper, dirs[k], O_PATH | O_DIRECTORY);
			_cleanup_close_ int h = session_beneath(root, dirs[k], O_RDONLY | O_DIRECTORY);
			if (u < 0 || h < 0 || fstat(u, &us) < 0)
				continue;
			struct timespec ts[2] = { us.st_atim, us.st_mtim };
			if (futimens(h, ts) == 0 && !*dirs[k])
				top_done = true;
		}
	}
	if (!top_done)
		(void) futimens(root, top);
}

/* Stage every file next to the workspace's top (a full disk or an
 * unreadable file stops the apply before the host tree is touched), then
 * commit in path order (a directory before what it holds) with renames. */
static int write_changes(const char *name, const session *s, int root, int upper, step *st, size_t n,
                         nsbox_error **err)
{
	char sname[64], tmp[32];
	unsigned char rnd[4] = { 0 };
	random_name_bytes(rnd, sizeof(rnd));
	snprintf(sname, sizeof(sname), ".nsbox-apply-%d-%02x%02x%02x%02x", (int) getpid(), rnd[0], rnd[1], rnd[2], rnd[3]);
	struct stat top;
	if (fstat(root, &top) < 0)
		return nsbox_err(err, errno, "session", "apply session '%s': stat '%s'", name, s->workspace);
	if (mkdirat(root, sname, 0700) < 0)
		return nsbox_err(err, errno, "session", "apply session '%s': create '%s' in '%s'", name, sname, s->workspace);
	int r = 0, sdir = session_beneath(root, sname, O_RDONLY | O_DIRECTORY);
	if (sdir < 0)
		r = nsbox_err(err, -sdir, "session", "apply session '%s': open '%s'", name, sname);
	for (size_t i = 0; r == 0 && i < n; i++) {
		const ws_change *c = st[i].c;
		if (st[i].left || !is_staged(c))
			continue;
		snprintf(tmp, sizeof(tmp), "%zu", i);
		int rr = stage(upper, sdir, tmp, &st[i]);
		if (rr < 0) {
			_cleanup_free_ char *p = ws_escape(c->path);
			r = nsbox_err(err, -rr, "session", "apply session '%s': copy '%s' (nothing was applied)", name, p);
		}
	}
	size_t done = 0;
	for (size_t i = 0; r == 0 && i < n; i++) {
		if (st[i].left || is_special(st[i].c))
			continue;   /* left out, as check said */
		snprintf(tmp, sizeof(tmp), "%zu", i);
		int rr = commit_one(root, sdir, tmp, &st[i]);
		if (rr < 0) {
			_cleanup_free_ char *p = ws_escape(st[i].c->path);
			r = nsbox_err(err, -rr, "session", "apply session '%s': write '%s' (%zu of %zu changes were applied)",
			              name, p, done, n);
		}
		done++;
	}
	if (sdir >= 0)
		close(sdir);
	(void) remove_at(root, sname);
	struct timespec was[2] = { top.st_atim, top.st_mtim };
	dir_times(root, upper, st, n, was);
	return r;
}

/* What was left out, as a change list of its own. */
static int left_list(const step *st, size_t n, nsbox_changes **out)
{
	nsbox_changes *l = calloc(1, sizeof(*l));
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += st[i].left != NULL;
	if (!l || (k && !(l->v = calloc(k, sizeof(*l->v))))) {
		free(l);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		if (!st[i].left)
			continue;
		ws_change c = *st[i].c;
		c.path = strdup(c.path);
		c.target = c.target ? strdup(c.target) : NULL;
		c.left = st[i].left;
		l->v[l->n++] = c;
		if (!c.path || (st[i].c->target && !c.target)) {
			nsbox_changes_free(l);
			return -ENOMEM;
		}
	}
	*out = l;
	return 0;
}

int nsbox_session_apply_with(const char *name, const nsbox_apply_options *o, nsbox_changes **left,
                             nsbox_error **err)
{
	if (left)
		*left = NULL;
	if (!o || o->version < 1 || (o->n_paths && !o->paths) ||
	    (o->flags & ~(NSBOX_APPLY_FORCE | NSBOX_APPLY_SKIP_DENIED | NSBOX_APPLY_KEEP)))
		return nsbox_err_invalid(err, "session", "apply session '%s': bad options", name ? name : "");
	const nsbox_config *cfg = o->config;
	session s;
	int lock = session_open_locked(name, &s, err);
	if (lock < 0)
		return lock;
	int r = 0;
	ws_change *v = NULL;
	size_t n = 0, k = 0;
	uint64_t bytes = 0;
	step *st = NULL;
	ws_rules rules = session_rules(cfg);
	_cleanup_close_ int root = open(s.workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int upper = open(s.upper, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (root < 0 || upper < 0)
		r = nsbox_err(err, errno, "session", "open workspace '%s'", root < 0 ? s.workspace : s.upper);
	else if ((r = ws_scan_rules(s.upper, s.workspace, &rules, &v, &n, &bytes)) < 0)
		r = nsbox_err(err, -r, "session", "read the changes of session '%s'", name);
	if (r == 0 && !(o->flags & NSBOX_APPLY_FORCE) && cfg && cfg->workspace_max_size && bytes > cfg->workspace_max_size)
		r = nsbox_err_hint(err, EFBIG, "session", "apply with --force if you want it all",
		                   "apply session '%s': it holds %llu bytes, more than workspace.max_size (%llu)", name,
		                   (unsigned long long) bytes, (unsigned long long) cfg->workspace_max_size);
	if (r == 0 && n && !(st = calloc(n, sizeof(*st))))
		r = nsbox_err(err, ENOMEM, "session", "apply session '%s'", name);
	for (size_t i = 0; r == 0 && i < n; i++) {
		if (!selected(v[i].path, o->paths, o->n_paths))
			continue;
		const char *slash = strrchr(v[i].path, '/');
		st[k] = (step){ .c = &v[i], .base = slash ? slash + 1 : v[i].path };
		st[k].parent = strndup(v[i].path, slash ? (size_t) (slash - v[i].path) : 0);
		if (!st[k++].parent)
			r = nsbox_err(err, ENOMEM, "session", "apply session '%s'", name);
	}
	if (r == 0 && k)
		r = check(name, &s, root, st, k, o->flags, err);
	if (r == 0 && k)
		r = write_changes(name, &s, root, upper, st, k, err);
	if (r == 0 && left && left_list(st, k, left) < 0)
		r = nsbox_err(err, ENOMEM, "session", "apply session '%s'", name);
	for (size_t i = 0; i < k; i++)
		free(st[i].parent);
	free(st);
	ws_changes_free(v, n);
	/* Applied whole: the session has done its work (its lock is still
	 * ours, so no run can be using it). Applied in part (some paths): the
	 * rest is still to review, and stays. */
	if (r == 0 && !(o->flags & NSBOX_APPLY_KEEP) && !o->n_paths) {
		int rr = remove_tree(s.dir);
		r = rr < 0 ? nsbox_err(err, -rr, "session", "remove session '%s' after applying it ('%s')", name, s.dir) : 1;
		if (r < 0 && left) {
			nsbox_changes_free(*left);
			*left = NULL;
		}
	}
	close(lock);
	return r;
}

int nsbox_session_apply(const char *name, const nsbox_config *cfg, const char *const *paths,
                        size_t n_paths, bool force, nsbox_error **err)
{
	nsbox_apply_options o = { .version = NSBOX_APPLY_OPTIONS_VERSION,
	                          .flags = NSBOX_APPLY_KEEP | (force ? NSBOX_APPLY_FORCE : 0),
	                          .config = cfg, .paths = paths, .n_paths = n_paths };
	int r = nsbox_session_apply_with(name, &o, NULL, err);
	return r < 0 ? r : 0;
}
