/* Sessions: the kept upper layer of a workspace, and the review commands
 * (list, changes, apply, discard). apply writes into the host directory
 * safely: it refuses when a host file changed since the session started,
 * writes each file atomically (a temporary file renamed over), resolves
 * every path beneath the workspace (openat2 RESOLVE_BENEATH: no symlink can
 * lead out), and keeps the host's ownership of the files it replaces. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "conf.h"
#include "error.h"
#include "images.h"
#include "syscalls.h"
#include "workspace.h"

struct nsbox_changes {
	ws_change *v;
	size_t n;
};

typedef struct session {
	char dir[PATH_MAX];
	char upper[PATH_MAX + 8];
	char workspace[PATH_MAX];
	struct timespec created;
} session;

static int open_session(const char *name, session *s, nsbox_error **err)
{
	if (!image_name_valid(name))
		return nsbox_err_invalid(err, "session", "'%s' is not a session name (letters, digits, '.', '_', '-'; no '/')",
		                         name ? name : "");
	_cleanup_free_ char *state = ws_state_dir();
	if (!state)
		return nsbox_err(err, ENOENT, "session", "find the state directory (HOME is not set)");
	snprintf(s->dir, sizeof(s->dir), "%.3000s/sessions/%s", state, name);
	snprintf(s->upper, sizeof(s->upper), "%.4000s/upper", s->dir);
	char meta[PATH_MAX + 8], text[PATH_MAX + 64];
	snprintf(meta, sizeof(meta), "%.4000s/meta", s->dir);
	int fd = open(meta, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		return nsbox_err(err, e, "session", "open session '%s'%s", name,
		                 e == ENOENT ? ": there is no such session" : "");
	}
	ssize_t n = read(fd, text, sizeof(text) - 1);
	close(fd);
	text[n > 0 ? n : 0] = '\0';
	char *nl = strchr(text, '\n');
	long long sec = 0;
	long nsec = 0;
	if (!nl || sscanf(nl + 1, "%lld.%ld", &sec, &nsec) != 2)
		return nsbox_err_invalid(err, "session", "open session '%s': its meta file '%s' is damaged", name, meta);
	*nl = '\0';
	snprintf(s->workspace, sizeof(s->workspace), "%.4000s", text);
	s->created = (struct timespec){ (time_t) sec, nsec };
	return 0;
}

int nsbox_session_changes(const char *name, const nsbox_config *cfg, nsbox_changes **out,
                          nsbox_error **err)
{
	session s;
	int r = open_session(name, &s, err);
	if (r < 0)
		return r;
	nsbox_changes *c = calloc(1, sizeof(*c));
	if (!c)
		return nsbox_err(err, ENOMEM, "session", "read session '%s'", name);
	r = ws_scan(s.upper, s.workspace, cfg ? &cfg->deny_changes : NULL, &c->v, &c->n);
	if (r < 0) {
		free(c);
		return nsbox_err(err, -r, "session", "read the changes of session '%s' ('%s')", name, s.upper);
	}
	*out = c;
	return 0;
}

size_t nsbox_changes_count(const nsbox_changes *c) { return c ? c->n : 0; }

int nsbox_changes_get(const nsbox_changes *c, size_t i, const char **path, const char **kind,
                      const char **detail, bool *denied)
{
	if (!c || i >= c->n)
		return -EINVAL;
	if (path)
		*path = c->v[i].path;
	if (kind)
		*kind = c->v[i].kind;
	if (detail)
		*detail = c->v[i].detail;
	if (denied)
		*denied = c->v[i].denied;
	return 0;
}

void nsbox_changes_free(nsbox_changes *c)
{
	if (!c)
		return;
	ws_changes_free(c->v, c->n);
	free(c);
}

int nsbox_session_paths(const char *name, char **workspace, char **upper, nsbox_error **err)
{
	session s;
	int r = open_session(name, &s, err);
	if (r < 0)
		return r;
	*workspace = strdup(s.workspace);
	*upper = strdup(s.upper);
	return *workspace && *upper ? 0 : nsbox_err(err, ENOMEM, "session", "read session '%s'", name);
}

int nsbox_session_list(char ***names, size_t *count, nsbox_error **err)
{
	*names = NULL;
	*count = 0;
	_cleanup_free_ char *state = ws_state_dir();
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%.4000s/sessions", state ? state : "");
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : nsbox_err(err, errno, "session", "list sessions in '%s'", dir);
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char **v = realloc(*names, (*count + 1) * sizeof(*v));
		if (!v)
			break;
		*names = v;
		v[(*count)++] = strdup(e->d_name);
	}
	closedir(d);
	return 0;
}

/* The session, locked so that no run uses it meanwhile: the lock's fd. */
static int open_locked(const char *name, session *s, nsbox_error **err)
{
	int r = open_session(name, s, err);
	if (r < 0)
		return r;
	int fd = ws_session_lock(s->dir);
	if (fd == -EBUSY)
		return nsbox_err(err, EBUSY, "session", "lock session '%s': a run is using it", name);
	if (fd < 0)
		return nsbox_err(err, -fd, "session", "lock session '%s' ('%s/lock')", name, s->dir);
	return fd;
}

int nsbox_session_discard(const char *name, nsbox_error **err)
{
	session s;
	int lock = open_locked(name, &s, err);
	if (lock < 0)
		return lock;
	int r = ws_remove_tree(s.dir);
	close(lock);
	return r < 0 ? nsbox_err(err, -r, "session", "remove session '%s' ('%s')", name, s.dir) : 0;
}

/* ---- apply ------------------------------------------------------------ */

static int beneath(int root, const char *rel, unsigned flags)
{
	struct open_how how = { .flags = O_CLOEXEC | flags, .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS };
	int fd = sys_openat2(root, *rel ? rel : ".", &how);
	return fd < 0 ? -errno : fd;
}

/* rm -rf `name` in directory `dirfd`, never following a symlink. */
static int remove_at(int at, const char *name)
{
	struct stat st;
	if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(at, name, 0) < 0 ? -errno : 0;
	int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	int r = 0;
	while (d && r == 0 && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			r = remove_at(dirfd(d), e->d_name);
	if (d)
		closedir(d);
	else if (fd >= 0)
		close(fd);
	return r < 0 ? r : unlinkat(at, name, AT_REMOVEDIR) < 0 ? -errno : 0;
}

static int copy_into(int src, int dst)
{
	char buf[65536];
	ssize_t n;
	while ((n = read(src, buf, sizeof(buf))) > 0)
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(dst, buf + off, (size_t) (n - off));
			if (w < 0)
				return -errno;
			off += w;
		}
	return n < 0 ? -errno : 0;
}

/* Put the upper layer's `rel` (a file, directory or symlink) at `name` in
 * `pfd`, atomically, owned like what it replaces (or like its directory). */
static int install(int pfd, const char *name, const char *upper, const char *rel)
{
	char src[PATH_MAX * 2], tmp[NAME_MAX + 32];
	snprintf(src, sizeof(src), "%s/%s", upper, rel);
	struct stat us, hs, ps;
	if (lstat(src, &us) < 0)
		return -errno;
	bool had = fstatat(pfd, name, &hs, AT_SYMLINK_NOFOLLOW) == 0;
	if (fstat(pfd, &ps) < 0)
		return -errno;
	uid_t uid = had ? hs.st_uid : ps.st_uid;
	gid_t gid = had ? hs.st_gid : ps.st_gid;
	if (S_ISDIR(us.st_mode)) {
		if (had && !S_ISDIR(hs.st_mode) && unlinkat(pfd, name, 0) < 0)
			return -errno;
		if (mkdirat(pfd, name, us.st_mode & 07777) < 0 && errno != EEXIST)
			return -errno;
		(void) fchmodat(pfd, name, us.st_mode & 07777, 0);
		if (!had && geteuid() == 0)
			(void) fchownat(pfd, name, uid, gid, AT_SYMLINK_NOFOLLOW);
		return 0;
	}
	snprintf(tmp, sizeof(tmp), ".nsbox-apply-%d-%.200s", (int) getpid(), name);
	int r = 0;
	if (S_ISLNK(us.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlink(src, target, sizeof(target) - 1);
		if (n < 0)
			return -errno;
		target[n] = '\0';
		if (symlinkat(target, pfd, tmp) < 0)
			return -errno;
	} else if (S_ISREG(us.st_mode)) {
		int in = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		int out = openat(pfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		r = in < 0 || out < 0 ? -errno : copy_into(in, out);
		if (r == 0 && fchmod(out, us.st_mode & 07777) < 0)
			r = -errno;
		if (r == 0 && geteuid() == 0 && fchown(out, uid, gid) < 0)
			r = -errno;
		if (r == 0 && fsync(out) < 0)
			r = -errno;
		if (in >= 0)
			close(in);
		if (out >= 0)
			close(out);
	} else {
		return -EOPNOTSUPP;   /* devices and fifos are not carried back */
	}
	if (r == 0 && S_ISLNK(us.st_mode) && geteuid() == 0)
		(void) fchownat(pfd, tmp, uid, gid, AT_SYMLINK_NOFOLLOW);
	/* Replacing a directory: it must go first (rename cannot). */
	if (r == 0 && had && S_ISDIR(hs.st_mode))
		r = remove_at(pfd, name);
	if (r == 0 && renameat(pfd, tmp, pfd, name) < 0)
		r = -errno;
	if (r < 0)
		(void) unlinkat(pfd, tmp, 0);
	return r;
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

int nsbox_session_apply(const char *name, const nsbox_config *cfg, const char *const *paths,
                        size_t n_paths, bool force, nsbox_error **err)
{
	session s;
	int lock = open_locked(name, &s, err);
	if (lock < 0)
		return lock;
	int r = 0;
	ws_change *v = NULL;
	size_t n = 0;
	_cleanup_close_ int root = open(s.workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		r = nsbox_err(err, errno, "session", "open workspace '%s'", s.workspace);
	else if ((r = ws_scan(s.upper, s.workspace, cfg ? &cfg->deny_changes : NULL, &v, &n)) < 0)
		r = nsbox_err(err, -r, "session", "read the changes of session '%s'", name);
	/* Refuse first, write after: denied changes, and host files that
	 * changed since the session started (someone's edits would be lost). */
	for (size_t i = 0; r == 0 && i < n; i++) {
		if (!selected(v[i].path, paths, n_paths))
			continue;
		if (v[i].denied && !force) {
			r = nsbox_err_hint(err, EPERM, "session", "review it, then apply with --force",
			                   "apply session '%s': '%s' is %s, and workspace.deny_changes denies it",
			                   name, v[i].path, v[i].kind);
			break;
		}
		struct stat st;
		char host[PATH_MAX * 2];
		snprintf(host, sizeof(host), "%s/%s", s.workspace, v[i].path);
		bool exists = lstat(host, &st) == 0;
		bool should_exist = strcmp(v[i].kind, "added") != 0;
		if (!force && ((exists && newer(&st, &s.created)) || (exists != should_exist)))
			r = nsbox_err_hint(err, EEXIST, "session", "look at it, then apply with --force to overwrite",
			                   "apply session '%s': '%s' changed on the host since the session started",
			                   name, v[i].path);
	}
	for (size_t i = 0; r == 0 && i < n; i++) {
		if (!selected(v[i].path, paths, n_paths))
			continue;
		const char *rel = v[i].path, *slash = strrchr(rel, '/');
		char parent[PATH_MAX] = "";
		if (slash)
			snprintf(parent, sizeof(parent), "%.*s", (int) (slash - rel), rel);
		const char *base = slash ? slash + 1 : rel;
		int pfd = beneath(root, parent, O_RDONLY | O_DIRECTORY);
		if (pfd < 0) {
			r = nsbox_err(err, -pfd, "session", "apply '%s': open its directory in '%s'", rel, s.workspace);
			break;
		}
		int rr = !strcmp(v[i].kind, "deleted") ? remove_at(pfd, base) : install(pfd, base, s.upper, rel);
		close(pfd);
		if (rr < 0)
			r = nsbox_err(err, -rr, "session", "apply '%s' to '%s'", rel, s.workspace);
	}
	ws_changes_free(v, n);
	close(lock);
	return r;
}
