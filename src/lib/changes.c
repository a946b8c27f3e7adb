/* Reading a workspace's changes from the overlay's upper layer: whiteouts
 * (0:0 character devices) are deletions, opaque directories (the
 * user.overlay.opaque xattr, as overlayfs sets it with userxattr) hide what
 * the lower layer had there, and files are compared with the lower layer's.
 * The walk visits only the upper layer (and the lower layer beneath opaque
 * directories): its cost follows what changed, not the workspace's size. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "workspace.h"

typedef struct scan {
	ws_change *v;
	size_t n, cap;
	const strv *deny;
	int err;
} scan;

bool ws_glob_match(const char *g, const char *p)
{
	for (;;) {
		if (g[0] == '*' && g[1] == '*') {
			g += 2;
			if (*g == '/') {
				/* "**" + "/": zero or more whole directories */
				g++;
				for (const char *q = p;; q++) {
					if ((q == p || q[-1] == '/') && ws_glob_match(g, q))
						return true;
					if (!*q)
						return false;
				}
			}
			for (const char *q = p;; q++) {   /* "**" at the end or mid-name: anything */
				if (ws_glob_match(g, q))
					return true;
				if (!*q)
					return false;
			}
		}
		if (*g == '*') {
			g++;
			for (const char *q = p;; q++) {
				if (ws_glob_match(g, q))
					return true;
				if (!*q || *q == '/')
					return false;
			}
		}
		if (!*g)
			return !*p;
		if (!*p || (*g != '?' && *g != *p) || (*g == '?' && *p == '/'))
			return false;
		g++;
		p++;
	}
}

static void add(scan *s, const char *path, const char *kind, const char *detail)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 32;
		ws_change *v = realloc(s->v, cap * sizeof(*v));
		if (!v) {
			s->err = -ENOMEM;
			return;
		}
		s->v = v;
		s->cap = cap;
	}
	bool denied = false;
	for (size_t i = 0; s->deny && i < s->deny->n; i++)
		denied |= ws_glob_match(s->deny->v[i], path);
	char *p = strdup(path);
	if (!p) {
		s->err = -ENOMEM;
		return;
	}
	s->v[s->n++] = (ws_change){ p, kind, detail, denied };
}

static const char *type_name(mode_t m)
{
	return S_ISDIR(m) ? "directory" : S_ISLNK(m) ? "symlink" : S_ISREG(m) ? "file" : "special file";
}

/* Same content? Reads both only as far as they agree. */
static bool same_content(int udir, const char *uname, int ldir, const char *lname, off_t size)
{
	int a = openat(udir, uname, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	int b = openat(ldir, lname, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	bool same = a >= 0 && b >= 0;
	char x[65536], y[65536];
	for (off_t off = 0; same && off < size;) {
		ssize_t n = read(a, x, sizeof(x)), m = n > 0 ? read(b, y, (size_t) n) : -1;
		same = n > 0 && m == n && !memcmp(x, y, (size_t) n);
		off += n > 0 ? n : 0;
	}
	if (a >= 0)
		close(a);
	if (b >= 0)
		close(b);
	return same;
}

static void walk_added(scan *s, int dir, const char *rel);

/* Everything of the lower directory `ldir` (at rel) that the upper one no
 * longer has: an opaque directory hides it all. */
static void lower_gone(scan *s, int udir, int ldir, const char *rel)
{
	int dup = openat(ldir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
	struct dirent *e;
	while (d && (e = readdir(d))) {
		struct stat st;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    fstatat(udir, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			continue;
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s%s%s", rel, *rel ? "/" : "", e->d_name);
		struct stat lst;
		add(s, path, "deleted", fstatat(ldir, e->d_name, &lst, AT_SYMLINK_NOFOLLOW) == 0 ? type_name(lst.st_mode) : "file");
	}
	if (d)
		closedir(d);
	else if (dup >= 0)
		close(dup);
}

static void walk(scan *s, int udir, int ldir, const char *rel)
{
	int dup = openat(udir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
	if (!d) {
		if (dup >= 0)
			close(dup);
		s->err = -errno;
		return;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s%s%s", rel, *rel ? "/" : "", e->d_name);
		struct stat us, ls;
		if (fstatat(udir, e->d_name, &us, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		bool in_lower = ldir >= 0 && fstatat(ldir, e->d_name, &ls, AT_SYMLINK_NOFOLLOW) == 0;
		if (S_ISCHR(us.st_mode) && major(us.st_rdev) == 0 && minor(us.st_rdev) == 0) {
			if (in_lower)
				add(s, path, "deleted", type_name(ls.st_mode));
			continue;
		}
		/* New here, or another type: everything below it is added. */
		bool added = !in_lower;
		if (added || (us.st_mode & S_IFMT) != (ls.st_mode & S_IFMT)) {
			add(s, path, added ? "added" : "type_changed", type_name(us.st_mode));
			int sub = S_ISDIR(us.st_mode)
			          ? openat(udir, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
			if (sub >= 0) {
				walk_added(s, sub, path);
				close(sub);
			}
			continue;
		}
		if (S_ISDIR(us.st_mode)) {
			if ((us.st_mode & 07777) != (ls.st_mode & 07777))
				add(s, path, "modified", "mode");
			int usub = openat(udir, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			int lsub = openat(ldir, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			char opaque[4] = "";
			if (usub >= 0 && fgetxattr(usub, "user.overlay.opaque", opaque, sizeof(opaque) - 1) > 0 &&
			    opaque[0] == 'y' && lsub >= 0)
				lower_gone(s, usub, lsub, path);
			if (usub >= 0)
				walk(s, usub, lsub, path);
			if (usub >= 0)
				close(usub);
			if (lsub >= 0)
				close(lsub);
		} else if (S_ISLNK(us.st_mode)) {
			char a[PATH_MAX], b[PATH_MAX];
			ssize_t x = readlinkat(udir, e->d_name, a, sizeof(a) - 1), y = readlinkat(ldir, e->d_name, b, sizeof(b) - 1);
			if (x != y || x < 0 || memcmp(a, b, (size_t) x))
				add(s, path, "modified", "symlink");
		} else if (S_ISREG(us.st_mode)) {
			if (us.st_size != ls.st_size || !same_content(udir, e->d_name, ldir, e->d_name, us.st_size))
				add(s, path, "modified", "content");
			else if ((us.st_mode & 07777) != (ls.st_mode & 07777))
				add(s, path, "modified", "mode");
		}
	}
	closedir(d);
}

static void walk_added(scan *s, int dir, const char *rel)
{
	walk(s, dir, -1, rel);
}

static int by_path(const void *a, const void *b)
{
	return strcmp(((const ws_change *) a)->path, ((const ws_change *) b)->path);
}

int ws_scan(const char *upper, const char *lower, const strv *deny, ws_change **out, size_t *n)
{
	scan s = { .deny = deny };
	int u = open(upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int l = open(lower, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (u < 0) {
		int e = errno;
		if (l >= 0)
			close(l);
		return -e;
	}
	char opaque[4] = "";
	if (l >= 0 && fgetxattr(u, "user.overlay.opaque", opaque, sizeof(opaque) - 1) > 0 && opaque[0] == 'y')
		lower_gone(&s, u, l, "");
	walk(&s, u, l, "");
	close(u);
	if (l >= 0)
		close(l);
	if (s.err < 0) {
		ws_changes_free(s.v, s.n);
		return s.err;
	}
	if (s.n)
		qsort(s.v, s.n, sizeof(*s.v), by_path);
	*out = s.v;
	*n = s.n;
	return 0;
}

void ws_changes_free(ws_change *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i].path);
	free(v);
}
