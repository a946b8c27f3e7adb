/* A session's changes as one patch, in git's format, which GNU patch (2.7
 * and later) and `git apply` apply: `patch -p1` in the workspace reproduces
 * the session's files, byte for byte, with their permission bits, new and
 * deleted files (empty ones too), symlinks and files without a final
 * newline. What a patch cannot carry is said on a comment line ("# nsbox:
 * ...", which patch skips): directories, fifos, sockets and devices, files
 * that could not be read. Binary files (a NUL byte) and files past
 * DIFF_MAX_FILE are named, never dumped. Names are quoted as git quotes them,
 * so a name cannot drive a terminal or break a line; with NSBOX_DIFF_ESCAPE
 * the content is escaped too, for a terminal (the patch then no longer
 * applies byte for byte). Both sides are opened beneath their top, never
 * through a symlink: a link the host already had (link -> /etc) must not
 * show the host's /etc/shadow as the old side. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/error.h"
#include "workspace/diff.h"
#include "workspace/session.h"
#include "workspace/workspace.h"

/* Larger files are named, not diffed (both sides are read into memory). */
#define DIFF_MAX_FILE (64u << 20)
/* Written out whenever this much is ready. */
#define DIFF_FLUSH (1u << 20)

typedef struct side {
	mode_t mode;          /* type and bits; 0: nothing there */
	char *data;           /* a file's content or a symlink's target */
	size_t len;
	int err;              /* -errno: it could not be read */
	bool big;             /* a file larger than DIFF_MAX_FILE, not read */
} side;

typedef struct diff_ctx {
	int root, upper;      /* the host workspace, the session's upper layer */
	int fd;               /* where the patch goes */
	bool escape;
	buf out;
	int err;              /* the first write error */
} diff_ctx;

static void side_free(side *s)
{
	free(s->data);
	*s = (side){ 0 };
}

static void flush(diff_ctx *d, bool all)
{
	if (d->err || (!all && d->out.len < DIFF_FLUSH))
		return;
	if (d->out.oom) {
		d->err = -ENOMEM;
		return;
	}
	for (size_t off = 0; off < d->out.len;) {
		ssize_t n = write(d->fd, d->out.data + off, d->out.len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			d->err = n < 0 ? -errno : -EIO;
			break;
		}
		off += (size_t) n;
	}
	d->out.len = 0;
	if (d->out.data)
		d->out.data[0] = '\0';
}

static int read_all(int fd, size_t size_hint, side *s)
{
	size_t cap = size_hint + 1, len = 0;
	char *p = malloc(cap);
	if (!p)
		return -ENOMEM;
	for (;;) {
		if (len == cap) {
			char *q = cap > DIFF_MAX_FILE ? NULL : realloc(p, cap *= 2);
			if (!q) {
				free(p);
				if (cap > DIFF_MAX_FILE)
					s->big = true;
				return cap > DIFF_MAX_FILE ? 0 : -ENOMEM;
			}
			p = q;
		}
		ssize_t n = read(fd, p + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			free(p);
			return -e;
		}
		if (n == 0)
			break;
		len += (size_t) n;
	}
	s->data = p;
	s->len = len;
	return 0;
}

/* What is at `rel` beneath `top`: nothing, a file (read), a symlink (its
 * target), a directory or another type. An overlay whiteout is nothing. */
static void load(int top, const char *rel, side *s)
{
	*s = (side){ 0 };
	_cleanup_free_ char *dir = strdup(rel);
	if (!dir) {
		s->err = -ENOMEM;
		return;
	}
	char *slash = strrchr(dir, '/');
	const char *base = slash ? rel + (slash - dir) + 1 : rel;
	if (slash)
		*slash = '\0';
	else
		dir[0] = '\0';
	_cleanup_close_ int pfd = session_beneath(top, dir, O_PATH | O_DIRECTORY);
	struct stat st;
	if (pfd < 0 || fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return;   /* a symlink or file on the way: nothing there, as apply sees it */
	if (S_ISCHR(st.st_mode) && major(st.st_rdev) == 0 && minor(st.st_rdev) == 0)
		return;
	s->mode = st.st_mode;
	if (S_ISLNK(st.st_mode)) {
		size_t cap = st.st_size > 0 && st.st_size < 65536 ? (size_t) st.st_size + 1 : 4097;
		s->data = malloc(cap);
		ssize_t n = s->data ? readlinkat(pfd, base, s->data, cap - 1) : -1;
		if (n < 0)
			s->err = s->data ? -errno : -ENOMEM;
		else
			s->data[s->len = (size_t) n] = '\0';
	} else if (S_ISREG(st.st_mode)) {
		if ((uint64_t) st.st_size > DIFF_MAX_FILE) {
			s->big = true;
			return;
		}
		_cleanup_close_ int fd = openat(pfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		struct stat again;
		if (fd < 0 || fstat(fd, &again) < 0)
			s->err = -errno;
		else if (!S_ISREG(again.st_mode))
			s->err = -EAGAIN;   /* replaced meanwhile */
		else
			s->err = read_all(fd, (size_t) again.st_size, s);
	}
}

/* The mode a patch names: git's file and symlink types, the permission
 * bits as apply writes them (at most 0777). */
static unsigned git_mode(mode_t m)
{
	return S_ISLNK(m) ? 0120000 : 0100000 | (unsigned) (m & 0777);
}

static void name_line(diff_ctx *d, const char *mark, const char *prefix, const char *path, bool none)
{
	buf_puts(&d->out, mark);
	if (none) {
		buf_puts(&d->out, "/dev/null\n");
		return;
	}
	diff_quote_name(&d->out, prefix, path);
	/* git's way with a space in a name: a tab after it, where GNU patch
	 * ends the name. */
	buf_puts(&d->out, strchr(path, ' ') ? "\t\n" : "\n");
}

static void note(diff_ctx *d, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(diff_ctx *d, const char *path, const char *fmt, ...)
{
	char text[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	buf_puts(&d->out, "# nsbox: ");
	diff_quote_name(&d->out, "", path);
	buf_puts(&d->out, " ");
	buf_puts(&d->out, text);
	buf_puts(&d->out, "\n");
}

static bool carried(const side *s)
{
	return !s->mode || S_ISREG(s->mode) || S_ISLNK(s->mode);
}

/* One path from `old` (the host's) to `new` (the session's), both files,
 * symlinks or nothing, as git writes it. */
static void file_diff(diff_ctx *d, const char *path, const side *old, const side *new)
{
	bool from = old->mode != 0, to = new->mode != 0;
	if (!from && !to)
		return;
	if (old->err || new->err) {
		note(d, path, "could not be read: %s", strerror(-(old->err ? old->err : new->err)));
		return;
	}
	/* A file that became a symlink (or the reverse) is two changes, and
	 * so is a symlink that points elsewhere: the headers then say what
	 * each side is (git names the type on an "index" line, with object
	 * names that are not ours to give). */
	bool relink = from && to && S_ISLNK(new->mode) && (old->len != new->len || memcmp(old->data, new->data, old->len));
	if (relink || (from && to && (old->mode & S_IFMT) != (new->mode & S_IFMT))) {
		side none = { 0 };
		file_diff(d, path, old, &none);
		file_diff(d, path, &none, new);
		return;
	}
	bool same = from && to && !old->big && !new->big && old->len == new->len &&
	            (!old->len || !memcmp(old->data, new->data, old->len));
	if (same && git_mode(old->mode) == git_mode(new->mode))
		return;
	buf_puts(&d->out, "diff --git ");
	diff_quote_name(&d->out, "a/", path);
	buf_puts(&d->out, " ");
	diff_quote_name(&d->out, "b/", path);
	buf_puts(&d->out, "\n");
	if (!from)
		buf_printf(&d->out, "new file mode %06o\n", git_mode(new->mode));
	else if (!to)
		buf_printf(&d->out, "deleted file mode %06o\n", git_mode(old->mode));
	else if (git_mode(old->mode) != git_mode(new->mode))
		buf_printf(&d->out, "old mode %06o\nnew mode %06o\n", git_mode(old->mode), git_mode(new->mode));
	if (same)
		return;
	bool binary = old->big || new->big || (old->len && memchr(old->data, 0, old->len)) ||
	              (new->len && memchr(new->data, 0, new->len));
	if (binary) {
		buf_puts(&d->out, "Binary files ");
		if (from)
			diff_quote_name(&d->out, "a/", path);
		else
			buf_puts(&d->out, "/dev/null");
		buf_puts(&d->out, " and ");
		if (to)
			diff_quote_name(&d->out, "b/", path);
		else
			buf_puts(&d->out, "/dev/null");
		buf_puts(&d->out, old->big || new->big ? " differ (larger than 64 MiB: not shown)\n" : " differ\n");
		return;
	}
	/* An empty file made or removed: the header says it all. */
	if ((!from && !new->len) || (!to && !old->len))
		return;
	name_line(d, "--- ", "a/", path, !from);
	name_line(d, "+++ ", "b/", path, !to);
	if (diff_hunks(&d->out, from ? old->data : "", from ? old->len : 0, to ? new->data : "",
	               to ? new->len : 0, d->escape) < 0)
		d->err = -ENOMEM;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Everything below the host's directory `rel` goes: each file and
 * symlink as a deletion, in name order, at most WS_MAX_DEPTH deep. */
static void tree_deleted(diff_ctx *d, const char *rel, int depth)
{
	if (depth >= WS_MAX_DEPTH) {
		note(d, rel, "%s", "is too deep to list what it held");
		return;
	}
	int fd = session_beneath(d->root, rel, O_RDONLY | O_DIRECTORY);
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	if (!dir) {
		if (fd >= 0)
			close(fd);
		note(d, rel, "could not be listed: %s", strerror(errno));
		return;
	}
	char **names = NULL;
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(dir))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char **v = realloc(names, (n + 1) * sizeof(*v));
		char *p = NULL;
		if (!v || asprintf(&p, "%s/%s", rel, e->d_name) < 0) {
			if (v)
				names = v;
			d->err = -ENOMEM;
			break;
		}
		names = v;
		names[n++] = p;
	}
	closedir(dir);
	if (n)
		qsort(names, n, sizeof(*names), by_name);
	for (size_t i = 0; i < n; i++) {
		side old, none = { 0 };
		load(d->root, names[i], &old);
		if (S_ISDIR(old.mode))
			tree_deleted(d, names[i], depth + 1);
		else if (carried(&old))
			file_diff(d, names[i], &old, &none);
		else
			note(d, names[i], "%s", "is a fifo, socket or device on the host; the patch leaves it");
		side_free(&old);
		free(names[i]);
		flush(d, false);
	}
	free(names);
}

static void one(diff_ctx *d, const ws_change *c)
{
	if (!strcmp(c->kind, "error")) {
		note(d, c->path, "could not be read to the end (%s): nothing below it is shown", c->detail);
		return;
	}
	side old, new = { 0 };
	load(d->root, c->path, &old);
	if (strcmp(c->kind, "deleted"))
		load(d->upper, c->path, &new);
	char mode[32];
	if (S_ISDIR(old.mode) && S_ISDIR(new.mode)) {
		if ((old.mode & 07777) != (new.mode & 07777)) {
			snprintf(mode, sizeof(mode), "%04o -> %04o", (unsigned) (old.mode & 07777),
			         (unsigned) (new.mode & 07777));
			note(d, c->path, "is a directory whose mode changes: %s", mode);
		}
	} else {
		side none = { 0 };
		if (S_ISDIR(old.mode)) {
			note(d, c->path, "%s", "is a directory that goes, with all it holds:");
			tree_deleted(d, c->path, 1);
		} else if (old.mode && !carried(&old)) {
			note(d, c->path, "%s", "is a fifo, socket or device on the host; the patch leaves it");
		}
		if (S_ISDIR(new.mode)) {
			snprintf(mode, sizeof(mode), "%04o", (unsigned) (new.mode & 07777));
			note(d, c->path, "is a new directory (mode %s); the files in it follow", mode);
		} else if (new.mode && !carried(&new)) {
			note(d, c->path, "%s", "is a fifo, socket or device in the session; neither a patch nor apply carries it");
		}
		file_diff(d, c->path, S_ISDIR(old.mode) || !carried(&old) ? &none : &old,
		          S_ISDIR(new.mode) || !carried(&new) ? &none : &new);
	}
	side_free(&old);
	side_free(&new);
}

int nsbox_session_diff(const char *name, unsigned flags, int fd, nsbox_error **err)
{
	if (!name || fd < 0 || (flags & ~NSBOX_DIFF_ESCAPE))
		return nsbox_err_invalid(err, "session", "diff a session: bad argument");
	session s;
	int r = session_open(name, &s, err);
	if (r < 0)
		return r;
	diff_ctx d = { .root = -1, .upper = -1, .fd = fd, .escape = flags & NSBOX_DIFF_ESCAPE };
	d.root = open(s.workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
	d.upper = d.root >= 0 ? open(s.upper, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
	if (d.root < 0 || d.upper < 0) {
		r = nsbox_err(err, errno, "session", "diff session '%s': open '%s'", name,
		              d.root < 0 ? s.workspace : s.upper);
		if (d.root >= 0)
			close(d.root);
		return r;
	}
	ws_change *v = NULL;
	size_t n = 0;
	r = ws_scan(s.upper, s.workspace, NULL, &v, &n, NULL);
	if (r < 0)
		r = nsbox_err(err, -r, "session", "read the changes of session '%s' ('%s')", name, s.upper);
	for (size_t i = 0; r == 0 && i < n && !d.err; i++) {
		one(&d, &v[i]);
		flush(&d, false);
	}
	flush(&d, true);
	if (r == 0 && d.err)
		r = nsbox_err(err, -d.err, "session", "write the diff of session '%s'", name);
	ws_changes_free(v, n);
	buf_free(&d.out);
	close(d.root);
	close(d.upper);
	return r;
}
