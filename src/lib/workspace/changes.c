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
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/json.h"
#include "workspace/workspace.h"

typedef struct scan {
	ws_change *v;
	size_t n, cap;
	const strv *deny;
	int git;              /* workspace.git */
	uint64_t upper_bytes;
	int err;
} scan;

/* prefix: could some path that starts with `p` match (rather than `p`)?
 * Patterns with several stars backtrack, exponentially in the worst case
 * (found by fuzzing): after GLOB_BUDGET steps the answer is "matches",
 * which for a deny list fails closed (the change is denied). */
#define GLOB_BUDGET 200000
static bool glob(const char *g, const char *p, bool prefix, long *budget)
{
	for (;;) {
		if (--*budget < 0)
			return true;
		if (prefix && !*p)
			return *g != '\0';
		if (g[0] == '*' && g[1] == '*') {
			g += 2;
			if (*g == '/') {
				/* "**" + "/": zero or more whole directories */
				g++;
				for (const char *q = p;; q++) {
					if ((q == p || q[-1] == '/') && glob(g, q, prefix, budget))
						return true;
					if (!*q)
						return false;
				}
			}
			for (const char *q = p;; q++) {   /* "**" at the end or mid-name: anything */
				if (glob(g, q, prefix, budget))
					return true;
				if (!*q)
					return false;
			}
		}
		if (*g == '*') {
			g++;
			for (const char *q = p;; q++) {
				if (glob(g, q, prefix, budget))
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

bool ws_glob_match(const char *g, const char *p)
{
	long budget = GLOB_BUDGET;
	return glob(g, p, false, &budget);
}

static char *join(const char *rel, const char *name)
{
	char *p = NULL;
	return asprintf(&p, "%s%s%s", rel, *rel ? "/" : "", name) < 0 ? NULL : p;
}

static bool any_match(const strv *deny, const char *path)
{
	for (size_t i = 0; deny && i < deny->n; i++)
		if (ws_glob_match(deny->v[i], path))
			return true;
	return false;
}

/* Could a deny rule match something below `dir`? A symlink put where a
 * directory was redirects whatever is later written beneath it (by git,
 * a build, the next session). */
static bool could_match_below(const strv *deny, const char *dir)
{
	_cleanup_free_ char *p = NULL;
	if (asprintf(&p, "%s/", dir) < 0)
		return true;   /* fail closed */
	for (size_t i = 0; deny && i < deny->n; i++) {
		long budget = GLOB_BUDGET;
		if (glob(deny->v[i], p, true, &budget))
			return true;
	}
	return false;
}

/* Does a deny rule match something below the lower layer's directory
 * `name` in `ldir` (at `rel`)? A directory replaced by a file or symlink
 * changes all of it: ".git" made a symlink rewrites ".git/config". The
 * walk is iterative and bounded; too deep counts as denied, and so does a
 * directory the scan may not read (mode 000 in the project) when a rule
 * could match something below it. */
static bool below_denied(const strv *deny, int ldir, const char *name, const char *rel)
{
	if (!deny || !deny->n)
		return false;
	DIR *st[WS_MAX_DEPTH];
	char *rels[WS_MAX_DEPTH];
	int fd = openat(ldir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	size_t top = 0;
	bool denied = false;
	if (fd < 0 || !(st[0] = fdopendir(fd)) || !(rels[0] = strdup(rel))) {
		if (fd >= 0 && st[0])
			closedir(st[0]);
		else if (fd >= 0)
			close(fd);
		/* What it holds is unknown: fail closed. */
		return fd >= 0 || could_match_below(deny, rel);
	}
	for (;;) {
		struct dirent *e = denied ? NULL : readdir(st[top]);
		if (!e) {
			closedir(st[top]);
			free(rels[top]);
			if (top == 0)
				break;
			top--;
			continue;
		}
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char *path = join(rels[top], e->d_name);
		denied = !path || any_match(deny, path);
		/* A file system that does not give the type (DT_UNKNOWN) has the
		 * open say: ENOTDIR (a file) or ELOOP (a symlink) is no directory. */
		bool maybe_dir = e->d_type == DT_DIR || e->d_type == DT_UNKNOWN;
		int sub = denied || !maybe_dir ? -1
		          : openat(dirfd(st[top]), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		bool not_dir = sub < 0 && e->d_type == DT_UNKNOWN && (errno == ENOTDIR || errno == ELOOP);
		if (sub >= 0 && top + 1 >= WS_MAX_DEPTH)
			denied = true;
		else if (sub < 0 && !denied && maybe_dir && !not_dir)
			denied = could_match_below(deny, path);   /* unreadable: fail closed */
		DIR *d = sub >= 0 && !denied ? fdopendir(sub) : NULL;
		if (d) {
			st[++top] = d;
			rels[top] = path;
			continue;
		}
		if (sub >= 0)
			close(sub);
		free(path);
	}
	return denied;
}

static void add_denied(scan *s, const char *path, const char *kind, const char *detail, mode_t mode,
                       const char *target, bool denied, const struct stat *st)
{
	if (s->err < 0)
		return;
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
	char *p = strdup(path), *t = target ? strdup(target) : NULL;
	if (!p || (target && !t)) {
		free(p);
		free(t);
		s->err = -ENOMEM;
		return;
	}
	const char *rule = ws_git_rule(s->git, path, kind, detail, mode);
	if (!rule)
		rule = denied ? "denied" : "apply";
	s->v[s->n++] = (ws_change){ .path = p, .kind = kind, .detail = detail, .mode = mode, .target = t,
	                            .denied = !strcmp(rule, "denied"), .rule = rule,
	                            .mtime = st ? st->st_mtim : (struct timespec){ 0 },
	                            .atime = st ? st->st_atim : (struct timespec){ 0 } };
}

static void add(scan *s, const char *path, const char *kind, const char *detail, mode_t mode,
                const char *target, const struct stat *st)
{
	add_denied(s, path, kind, detail, mode, target, any_match(s->deny, path), st);
}

static const char *type_name(mode_t m)
{
	return S_ISDIR(m) ? "directory" : S_ISLNK(m) ? "symlink" : S_ISREG(m) ? "file"
	       : S_ISFIFO(m) ? "fifo" : S_ISSOCK(m) ? "socket" : "device";
}

/* Same content? Reads both only as far as they agree. Both are opened
 * beneath their directory fds without following a symlink. */
static bool same_content(int udir, const char *uname, int ldir, const char *lname, off_t size)
{
	int a = openat(udir, uname, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	int b = openat(ldir, lname, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	bool same = a >= 0 && b >= 0;
	char *x = same ? malloc(65536) : NULL, *y = same ? malloc(65536) : NULL;
	same = same && x && y;
	for (off_t off = 0; same && off < size;) {
		ssize_t n = read(a, x, 65536), m = n > 0 ? read(b, y, (size_t) n) : -1;
		same = n > 0 && m == n && !memcmp(x, y, (size_t) n);
		off += n > 0 ? n : 0;
	}
	free(x);
	free(y);
	if (a >= 0)
		close(a);
	if (b >= 0)
		close(b);
	return same;
}

/* The symlink `name` in `dir`'s target (malloc'ed), or NULL. */
static char *link_target(int dir, const char *name, off_t size)
{
	size_t cap = size > 0 && size < 65536 ? (size_t) size + 1 : 4097;
	char *t = malloc(cap);
	ssize_t n = t ? readlinkat(dir, name, t, cap - 1) : -1;
	if (n < 0) {
		free(t);
		return NULL;
	}
	t[n] = '\0';
	return t;
}

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
		char *path = join(rel, e->d_name);
		struct stat lst;
		if (path)
			add(s, path, "deleted", fstatat(ldir, e->d_name, &lst, AT_SYMLINK_NOFOLLOW) == 0
			                        ? type_name(lst.st_mode) : "file", 0, NULL, NULL);
		free(path);
	}
	if (d)
		closedir(d);
	else if (dup >= 0)
		close(dup);
}

/* One directory being read: the upper one, its lower counterpart (-1:
 * none, everything is added), and its path. The walk keeps these on an
 * explicit stack, never recursing: a payload decides the depth. */
typedef struct frame {
	DIR *ud;
	int ldir;
	char *rel;
} frame;

static bool is_opaque(int fd)
{
	char opaque[4] = "";
	return fgetxattr(fd, "user.overlay.opaque", opaque, sizeof(opaque) - 1) > 0 && opaque[0] == 'y';
}

/* A directory of the upper layer that cannot be opened (a payload's mode
 * 000, where the caller may not override it): what it holds is unknown,
 * which is said, never skipped: apply refuses a session with it. */
static void unreadable(scan *s, const char *path, mode_t mode)
{
	if (errno != ENOMEM)
		add(s, path, "error", "unreadable", mode, NULL, NULL);
	else
		s->err = -ENOMEM;
}

/* One entry of the directory on top of the stack: what changed; *descend
 * gets the fds of a directory to enter. */
static void entry(scan *s, frame *f, const char *name, int *usub, int *lsub)
{
	int udir = dirfd(f->ud), ldir = f->ldir;
	char *path = join(f->rel, name), *target = NULL;
	struct stat us, ls;
	if (!path) {
		s->err = -ENOMEM;
		return;
	}
	if (fstatat(udir, name, &us, AT_SYMLINK_NOFOLLOW) < 0)
		goto out;
	s->upper_bytes += (uint64_t) us.st_blocks * 512;
	bool in_lower = ldir >= 0 && fstatat(ldir, name, &ls, AT_SYMLINK_NOFOLLOW) == 0;
	if (S_ISCHR(us.st_mode) && major(us.st_rdev) == 0 && minor(us.st_rdev) == 0) {
		if (in_lower)
			add(s, path, "deleted", type_name(ls.st_mode), 0, NULL, NULL);
		goto out;
	}
	mode_t mode = us.st_mode;
	target = S_ISLNK(us.st_mode) ? link_target(udir, name, us.st_size) : NULL;
	/* New here, or another type: everything below it is added. */
	if (!in_lower || (us.st_mode & S_IFMT) != (ls.st_mode & S_IFMT)) {
		bool replaced_dir = in_lower && S_ISDIR(ls.st_mode);
		add_denied(s, path, in_lower ? "type_changed" : "added", type_name(us.st_mode), mode, target,
		           any_match(s->deny, path) || (replaced_dir && below_denied(s->deny, ldir, name, path)) ||
		           (replaced_dir && S_ISLNK(us.st_mode) && could_match_below(s->deny, path)), &us);
		if (S_ISDIR(us.st_mode) && (*usub = openat(udir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
			unreadable(s, path, mode);
		goto out;
	}
	if (S_ISDIR(us.st_mode)) {
		if ((mode & 07777) != (ls.st_mode & 07777))
			add(s, path, "modified", "mode", mode, NULL, &us);
		*usub = openat(udir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (*usub < 0)
			unreadable(s, path, mode);
		*lsub = openat(ldir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (*usub >= 0 && *lsub >= 0 && is_opaque(*usub))
			lower_gone(s, *usub, *lsub, path);
	} else if (S_ISLNK(us.st_mode)) {
		_cleanup_free_ char *old = link_target(ldir, name, ls.st_size);
		if (!target || !old || strcmp(target, old))
			add(s, path, "modified", "symlink", mode, target, &us);
	} else if (S_ISREG(us.st_mode)) {
		if (us.st_size != ls.st_size || !same_content(udir, name, ldir, name, us.st_size))
			add(s, path, "modified", "content", mode, NULL, &us);
		else if ((mode & 07777) != (ls.st_mode & 07777))
			add(s, path, "modified", "mode", mode, NULL, &us);
	} else {
		add(s, path, "modified", type_name(us.st_mode), mode, NULL, &us);
	}
out:
	free(path);
	free(target);
}

static void walk(scan *s, int u, int l)
{
	frame *st = calloc(WS_MAX_DEPTH + 1, sizeof(*st));
	int du = u >= 0 ? dup(u) : -1;
	size_t top = 0;
	if (!st || du < 0 || !(st[0].ud = fdopendir(du)) || !(st[0].rel = strdup(""))) {
		s->err = -(errno ?: ENOMEM);
		if (st && st[0].ud)
			closedir(st[0].ud);
		else if (du >= 0)
			close(du);
		free(st);
		return;
	}
	st[0].ldir = l >= 0 ? dup(l) : -1;
	for (;;) {
		frame *f = &st[top];
		struct dirent *e = s->err < 0 ? NULL : readdir(f->ud);
		if (!e) {
			closedir(f->ud);
			if (f->ldir >= 0)
				close(f->ldir);
			free(f->rel);
			if (top == 0)
				break;
			top--;
			continue;
		}
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		int usub = -1, lsub = -1;
		entry(s, f, e->d_name, &usub, &lsub);
		if (usub < 0) {
			if (lsub >= 0)
				close(lsub);
			continue;
		}
		char *rel = join(f->rel, e->d_name);
		if (top + 1 >= WS_MAX_DEPTH) {
			/* Deeper than any real project: say so instead of
			 * crashing, or skipping silently. */
			if (rel)
				add(s, rel, "error", "too deep", 0, NULL, NULL);
			free(rel);
			close(usub);
			if (lsub >= 0)
				close(lsub);
			continue;
		}
		DIR *d = rel ? fdopendir(usub) : NULL;
		if (!d) {
			s->err = -(errno ?: ENOMEM);
			free(rel);
			close(usub);
			if (lsub >= 0)
				close(lsub);
			continue;
		}
		st[++top] = (frame){ d, lsub, rel };
	}
	free(st);
}

static int by_path(const void *a, const void *b)
{
	return strcmp(((const ws_change *) a)->path, ((const ws_change *) b)->path);
}

int ws_scan(const char *upper, const char *lower, const strv *deny, ws_change **out, size_t *n,
            uint64_t *upper_bytes)
{
	ws_rules rules = { .deny = deny, .git = WS_GIT_APPLY };
	return ws_scan_rules(upper, lower, &rules, out, n, upper_bytes);
}

int ws_scan_rules(const char *upper, const char *lower, const ws_rules *rules, ws_change **out, size_t *n,
                  uint64_t *upper_bytes)
{
	scan s = { .deny = rules ? rules->deny : NULL, .git = rules ? rules->git : WS_GIT_APPLY };
	int u = open(upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int ue = u < 0 ? errno : 0;
	int l = open(lower, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	/* No lower layer is a new workspace; one that cannot be read is no
	 * reason to report its deletions and denied paths as absent. */
	int le = l < 0 && errno != ENOENT ? errno : 0;
	if (ue || le) {
		int e = ue ? ue : le;
		if (u >= 0)
			close(u);
		if (l >= 0)
			close(l);
		return -e;
	}
	if (l >= 0 && is_opaque(u))
		lower_gone(&s, u, l, "");
	walk(&s, u, l);
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
	if (upper_bytes)
		*upper_bytes = s.upper_bytes;
	return 0;
}

void ws_changes_free(ws_change *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free(v[i].path);
		free(v[i].target);
	}
	free(v);
}

/* ---- showing changes ---------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s (its code point in *cp), or 0. */
static size_t utf8_len(const unsigned char *s, uint32_t *cp)
{
	size_t n = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : 0;
	if (!n)
		return 0;
	uint32_t c = s[0] & (0x7f >> n);
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if ((n == 3 && (c < 0x800 || (c >= 0xd800 && c <= 0xdfff))) || (n == 4 && (c < 0x10000 || c > 0x10ffff)))
		return 0;
	*cp = c;
	return n;
}

char *ws_escape(const char *s)
{
	buf b = { 0 };
	const unsigned char *p = (const unsigned char *) (s ? s : "");
	while (*p) {
		uint32_t cp = 0;
		size_t n = *p >= 0x80 ? utf8_len(p, &cp) : 1;
		/* Control characters (C0, DEL, C1), bidirectional overrides, the
		 * backslash itself and bytes that are not UTF-8: \xNN each, so
		 * that a name cannot drive a terminal or hide what it is. */
		bool esc = n == 0 || *p < 0x20 || *p == 0x7f || *p == '\\' || (cp >= 0x80 && cp <= 0x9f) ||
		           (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
		if (!esc) {
			buf_append(&b, p, n);
			p += n;
			continue;
		}
		for (size_t i = 0; i < (n ? n : 1); i++) {
			if (p[i] == '\\')
				buf_puts(&b, "\\\\");
			else
				buf_printf(&b, "\\x%02x", p[i]);
		}
		p += n ? n : 1;
	}
	if (!b.data)
		buf_puts(&b, "");
	return buf_steal(&b);
}

void ws_time_iso(char out[64], const struct timespec *t)
{
	struct tm tm;
	time_t sec = t->tv_sec;
	out[0] = '\0';
	if ((t->tv_sec || t->tv_nsec) && gmtime_r(&sec, &tm))
		snprintf(out, 64, "%04d-%02d-%02dT%02d:%02d:%02d.%09ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
		         tm.tm_hour, tm.tm_min, tm.tm_sec, (long) t->tv_nsec);
}

void ws_change_json(buf *b, const ws_change *c)
{
	buf_puts(b, ",\"kind\":");
	json_cstr(b, c->kind);
	buf_puts(b, ",\"detail\":");
	json_cstr(b, c->detail);
	if (strcmp(c->kind, "deleted") && strcmp(c->kind, "error"))
		buf_printf(b, ",\"mode\":\"%04o\"", (unsigned) (c->mode & 07777));
	else
		buf_puts(b, ",\"mode\":null");
	buf_puts(b, ",\"target\":");
	json_cstr(b, c->target);
	buf_printf(b, ",\"denied\":%s", c->denied ? "true" : "false");
	buf_puts(b, ",\"rule\":");
	json_cstr(b, c->rule ? c->rule : (c->denied ? "denied" : "apply"));
	char t[64];
	ws_time_iso(t, &c->mtime);
	buf_puts(b, ",\"mtime\":");
	json_cstr(b, *t ? t : NULL);
	if (c->left) {
		buf_puts(b, ",\"left\":");
		json_cstr(b, c->left);
	}
}
