/* Sessions: the kept upper layer of a workspace, and the review side:
 * list, changes (also as JSON), the two sides of a path for diff, discard.
 * Apply is in session_apply.c. */
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

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/fsutil.h"
#include "base/json.h"
#include "config/conf.h"
#include "base/error.h"
#include "image/images.h"
#include "base/syscalls.h"
#include "workspace/session.h"
#include "workspace/workspace.h"


/* Where session `name` lives (whether or not it is there). */
static int session_locate(const char *name, session *s, nsbox_error **err)
{
	if (!image_name_valid(name))
		return nsbox_err_invalid(err, "session", "'%s' is not a session name (letters, digits, '.', '_', '-'; no '/')",
		                         name ? name : "");
	_cleanup_free_ char *state = ws_state_dir();
	if (!state)
		return nsbox_err(err, ENOENT, "session", "find the state directory (HOME is not set)");
	snprintf(s->dir, sizeof(s->dir), "%.3000s/sessions/%s", state, name);
	snprintf(s->upper, sizeof(s->upper), "%.4000s/upper", s->dir);
	return 0;
}

int session_open(const char *name, session *s, nsbox_error **err)
{
	int r = session_locate(name, s, err);
	if (r < 0)
		return r;
	char meta[PATH_MAX + 8], text[PATH_MAX + 64];
	snprintf(meta, sizeof(meta), "%.4000s/meta", s->dir);
	int fd = open(meta, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
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
	unsigned long owner = 0;
	int fields = nl ? sscanf(nl + 1, "%lld.%ld\nowner %lu", &sec, &nsec, &owner) : 0;
	if (fields < 2)
		return nsbox_err_invalid(err, "session", "open session '%s': its meta file '%s' is damaged", name, meta);
	s->has_owner = fields == 3;
	s->owner = owner;
	*nl = '\0';
	snprintf(s->workspace, sizeof(s->workspace), "%.4000s", text);
	s->created = (struct timespec){ (time_t) sec, nsec };
	return 0;
}

int nsbox_session_changes(const char *name, const nsbox_config *cfg, nsbox_changes **out,
                          nsbox_error **err)
{
	session s;
	int r = session_open(name, &s, err);
	if (r < 0)
		return r;
	nsbox_changes *c = calloc(1, sizeof(*c));
	if (!c)
		return nsbox_err(err, ENOMEM, "session", "read session '%s'", name);
	ws_rules rules = session_rules(cfg);
	r = ws_scan_rules(s.upper, s.workspace, &rules, &c->v, &c->n, NULL);
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

int nsbox_changes_get_times(const nsbox_changes *c, size_t i, int64_t *mtime_sec, long *mtime_nsec,
                            int64_t *atime_sec, long *atime_nsec)
{
	if (!c || i >= c->n)
		return -EINVAL;
	if (mtime_sec)
		*mtime_sec = c->v[i].mtime.tv_sec;
	if (mtime_nsec)
		*mtime_nsec = c->v[i].mtime.tv_nsec;
	if (atime_sec)
		*atime_sec = c->v[i].atime.tv_sec;
	if (atime_nsec)
		*atime_nsec = c->v[i].atime.tv_nsec;
	return 0;
}

const char *nsbox_changes_rule(const nsbox_changes *c, size_t i)
{
	return c && i < c->n ? (c->v[i].rule ? c->v[i].rule : c->v[i].denied ? "denied" : "apply") : NULL;
}

const char *nsbox_changes_why(const nsbox_changes *c, size_t i)
{
	return c && i < c->n ? c->v[i].left : NULL;
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
	int r = session_open(name, &s, err);
	if (r < 0)
		return r;
	*workspace = strdup(s.workspace);
	*upper = strdup(s.upper);
	return *workspace && *upper ? 0 : nsbox_err(err, ENOMEM, "session", "read session '%s'", name);
}

unsigned long session_login_uid(void)
{
	char text[32] = "";
	int fd = open("/proc/self/loginuid", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;
	if (fd >= 0)
		close(fd);
	text[n > 0 ? n : 0] = '\0';
	char *end;
	unsigned long v = strtoul(text, &end, 10);
	return end != text ? v : 4294967295ul;
}

ws_rules session_rules(const nsbox_config *cfg)
{
	return (ws_rules){ .deny = cfg ? &cfg->deny_changes : NULL, .git = cfg ? cfg->workspace_git : WS_GIT_APPLY };
}

/* Root's state directory is every root caller's: a session made by
 * another login is not this caller's (nor one older than the owner line). */
static bool mine(const char *name)
{
	if (geteuid() != 0)
		return true;
	session s;
	return session_open(name, &s, NULL) == 0 && s.has_owner && s.owner == session_login_uid();
}

int nsbox_session_list(char ***names, size_t *count, nsbox_error **err)
{
	return nsbox_session_list_with(0, names, count, err);
}

int nsbox_session_list_with(unsigned flags, char ***names, size_t *count, nsbox_error **err)
{
	if (!names || !count || (flags & ~NSBOX_SESSION_LIST_ALL))
		return nsbox_err_invalid(err, "session", "list sessions: bad argument");
	*names = NULL;
	*count = 0;
	_cleanup_free_ char *state = ws_state_dir();
	if (state)
		ws_reap(state);   /* what killed runs left, half-made sessions among it */
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%.4000s/sessions", state ? state : "");
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : nsbox_err(err, errno, "session", "list sessions in '%s'", dir);
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || (!(flags & NSBOX_SESSION_LIST_ALL) && !mine(e->d_name)))
			continue;
		char **v = realloc(*names, (*count + 1) * sizeof(*v));
		if (!v)
			break;
		*names = v;
		if (!(v[*count] = strdup(e->d_name)))
			break;
		++*count;
	}
	closedir(d);
	return 0;
}

int session_open_locked(const char *name, session *s, nsbox_error **err)
{
	int r = session_open(name, s, err);
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
	/* Its meta is not needed (nor read): a session damaged by an older
	 * nsbox, killed while it made the session, can go too. */
	session s;
	int r = session_locate(name, &s, err);
	if (r < 0)
		return r;
	struct stat st;
	if (lstat(s.dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return nsbox_err(err, ENOENT, "session", "open session '%s': there is no such session", name);
	int lock = ws_session_lock(s.dir);
	if (lock == -EBUSY)
		return nsbox_err(err, EBUSY, "session", "lock session '%s': a run is using it", name);
	if (lock < 0)
		return nsbox_err(err, -lock, "session", "lock session '%s' ('%s/lock')", name, s.dir);
	r = remove_tree(s.dir);
	close(lock);
	return r < 0 ? nsbox_err(err, -r, "session", "remove session '%s' ('%s')", name, s.dir) : 0;
}

/* ---- review ----------------------------------------------------------- */

int nsbox_changes_json(const nsbox_changes *c, char **out)
{
	buf b = { 0 };
	buf_puts(&b, "[");
	for (size_t i = 0; c && i < c->n; i++) {
		buf_puts(&b, i ? ",{\"path\":" : "{\"path\":");
		json_cstr(&b, c->v[i].path);
		ws_change_json(&b, &c->v[i]);
		buf_puts(&b, "}");
	}
	buf_puts(&b, "]\n");
	*out = buf_steal(&b);
	return *out ? 0 : -ENOMEM;
}

int nsbox_changes_get_mode(const nsbox_changes *c, size_t i, unsigned *mode, const char **target)
{
	if (!c || i >= c->n)
		return -EINVAL;
	if (mode)
		*mode = (unsigned) c->v[i].mode;
	if (target)
		*target = c->v[i].target;
	return 0;
}

char *nsbox_escape(const char *s)
{
	return ws_escape(s);
}

int nsbox_session_open_pair(const char *name, const char *path, int *host_fd, int *session_fd,
                            nsbox_error **err)
{
	session s;
	*host_fd = *session_fd = -1;
	int r = session_open(name, &s, err);
	if (r < 0)
		return r;
	/* Both sides beneath their top, never through a symlink, regular
	 * files only: a symlink the host already had (link -> /etc) must not
	 * show the host's /etc/shadow as the old side. */
	const char *tops[2] = { s.workspace, s.upper };
	int *fds[2] = { host_fd, session_fd };
	for (int i = 0; i < 2; i++) {
		_cleanup_close_ int top = open(tops[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
		int fd = top >= 0 ? session_beneath(top, path, O_RDONLY | O_NONBLOCK) : -1;
		struct stat st;
		if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
			close(fd);
			fd = -1;
		}
		*fds[i] = fd;
	}
	return 0;
}
