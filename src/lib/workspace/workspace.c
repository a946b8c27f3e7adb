/* Workspaces, parent side: checking the directory, laying out the overlay's
 * upper and work directories in the state directory, session locks, and the
 * idmapped lower layer for sandboxes run by root. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/cleanup.h"
#include "config/conf.h"
#include "base/error.h"
#include "image/images.h"
#include "base/syscalls.h"
#include "config/volumes.h"
#include "workspace/workspace.h"
#include "workspace/session.h"

char *ws_state_dir(void)
{
	char *s = NULL;
	if (geteuid() == 0)
		return strdup("/var/lib/nsbox/state");
	const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	if (xdg && *xdg == '/')
		(void) !asprintf(&s, "%s/nsbox", xdg);
	else if (home && *home == '/')
		(void) !asprintf(&s, "%s/.local/state/nsbox", home);
	return s;
}

int ws_session_lock(const char *dir)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%.4000s/lock", dir);
	/* A new lock appears held: made unnamed, locked, then linked into
	 * place. Created by name and then locked, another run's reap_stale
	 * could take it in between, as a lock whose holder is gone, and
	 * remove a run that had only just begun. Where the file system has no
	 * O_TMPFILE, or a lock is there already, it is opened by name. */
	int tmp = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (tmp >= 0) {
		char proc[64];
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", tmp);
		if (flock(tmp, LOCK_EX | LOCK_NB) == 0 && linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) == 0)
			return tmp;
		close(tmp);
	}
	int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno == EWOULDBLOCK ? EBUSY : errno;
		close(fd);
		return -e;
	}
	return fd;
}

/* An existing session must be of this workspace. */
static int session_meta(ws_plan *w, nsbox_error **err)
{
	char path[PATH_MAX + 16], text[PATH_MAX + 128];
	snprintf(path, sizeof(path), "%.4000s/meta", w->dir);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;
	if (fd >= 0)
		close(fd);
	text[n > 0 ? n : 0] = '\0';
	char *nl = strchr(text, '\n');
	if (!nl)
		return nsbox_err_hint(err, EINVAL, "workspace", "discard it with 'nsbox session discard NAME'",
		                      "use session '%s': its meta file '%s' is damaged", w->session, path);
	*nl = '\0';
	if (strcmp(text, w->lower))
		return nsbox_err_invalid(err, "workspace",
		                         "use session '%s': it belongs to workspace '%s', not '%s'",
		                         w->session, text, w->lower);
	return 0;
}

/* A new session's meta: the workspace, and when it started (for apply's
 * conflict check). */
static int write_meta(const char *dir, const char *lower)
{
	char path[PATH_MAX + 16], text[PATH_MAX + 128];
	snprintf(path, sizeof(path), "%.4000s/meta", dir);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	/* Who: root's state directory is every root caller's, and `session
	 * ls` shows each login its own. */
	int len = snprintf(text, sizeof(text), "%s\n%lld.%09ld\nowner %lu\n", lower, (long long) now.tv_sec, now.tv_nsec,
	                   session_login_uid());
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	int r = fd < 0 ? -errno : 0;
	ssize_t wr = r == 0 ? write(fd, text, (size_t) len) : 0;
	if (r == 0 && wr != len)
		r = wr < 0 ? -errno : -ENOSPC;
	if (fd >= 0)
		close(fd);
	return r;
}

/* The session's directory, made whole or not at all: a new session is
 * laid out (lock taken, meta written) under a hidden name and renamed into
 * place, so that a supervisor killed meanwhile, or a full disk, never
 * leaves a session without its meta (reap_stale removes the hidden one).
 * Returns with the session's lock held in w->lock_fd. */
static int session_dir(ws_plan *w, const char *parent, nsbox_error **err)
{
	for (int attempt = 0; attempt < 3; attempt++) {
		w->lock_fd = ws_session_lock(w->dir);
		if (w->lock_fd >= 0)
			return session_meta(w, err);
		if (w->lock_fd == -EBUSY)
			return nsbox_err_hint(err, EBUSY, "workspace", "wait for the other run to end",
			                      "use session '%s': another run is using it", w->session);
		if (w->lock_fd != -ENOENT)
			return nsbox_err(err, -w->lock_fd, "workspace", "lock session '%s' ('%s/lock')", w->session,
			                 w->dir);
		unsigned char rnd[6] = { 0 };
		random_name_bytes(rnd, sizeof(rnd));
		char tmp[PATH_MAX];
		snprintf(tmp, sizeof(tmp), "%.4000s/.new-%d-%02x%02x%02x%02x%02x%02x", parent, (int) getpid(), rnd[0],
		         rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
		if (mkdir(tmp, 0700) < 0)
			return nsbox_err(err, errno, "workspace", "create session '%s' ('%s')", w->session, tmp);
		int lock = ws_session_lock(tmp);
		int r = lock < 0 ? lock : write_meta(tmp, w->lower);
		if (r == 0 && rename(tmp, w->dir) == 0) {
			w->lock_fd = lock;
			w->made = true;
			return 0;
		}
		if (r == 0)
			r = -errno;
		(void) remove_tree(tmp);
		if (lock >= 0)
			close(lock);
		/* Another run made it meanwhile: use that one. */
		if (r != -EEXIST && r != -ENOTEMPTY)
			return nsbox_err(err, -r, "workspace", "create session '%s' ('%s')", w->session, w->dir);
	}
	return nsbox_err(err, EAGAIN, "workspace", "create session '%s': it keeps changing", w->session);
}

/* The pid at the start of a run directory's name ("<pid>-<random>", or
 * ".new-<pid>-<random>" for a session being made), or 0. */
static pid_t owner_of(const char *name)
{
	if (!strncmp(name, ".new-", 5))
		name += 5;
	char *end;
	long pid = strtol(name, &end, 10);
	return end != name && *end == '-' && pid > 0 && pid <= INT32_MAX ? (pid_t) pid : 0;
}

/* Remove what supervisors that are gone left below `parent` (runs/, or
 * sessions/ being made): killed with SIGKILL, by the OOM killer, or a
 * crash, before they removed an ephemeral upper layer themselves. A run
 * holds the lock in its directory for as long as it lasts (and its sandbox
 * until it executes the payload); a lock that can be taken has no holder
 * left. A directory without a lock is older than this rule, or was made a
 * moment ago and its lock is being taken: its owner's pid, in its name,
 * says which. Removal is fd-anchored and never follows a link nor leaves
 * the file system (remove_beneath). */
static void reap_stale(const char *parent, bool sessions)
{
	int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0)
		return;
	int lfd = dup(pfd);
	DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    (sessions && strncmp(e->d_name, ".new-", 5)))
			continue;   /* a session itself is kept until discarded */
		int dfd = openat(pfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0)
			continue;
		int lock = openat(dfd, "lock", O_RDWR | O_NOFOLLOW | O_CLOEXEC);
		bool gone;
		if (lock >= 0) {
			gone = flock(lock, LOCK_EX | LOCK_NB) == 0;
		} else {
			pid_t pid = owner_of(e->d_name);
			gone = errno == ENOENT && pid && pid != getpid() && kill(pid, 0) < 0 && errno == ESRCH;
		}
		if (gone)
			(void) remove_beneath(pfd, e->d_name);
		if (lock >= 0)
			close(lock);
		close(dfd);
	}
	if (d)
		closedir(d);
	else if (lfd >= 0)
		close(lfd);
	close(pfd);
}

void ws_reap(const char *state)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%.4000s/runs", state);
	reap_stale(dir, false);
	snprintf(dir, sizeof(dir), "%.4000s/sessions", state);
	reap_stale(dir, true);
}

/* Refuse, before anything is mounted, a state directory the overlay could
 * not use as its upper layer: another overlay, a network filesystem, or
 * one without user extended attributes (the overlay keeps whiteouts and
 * opaque markers there, mounted with userxattr). */
#define CIFS_MAGIC 0xff534d42   /* not in <linux/magic.h> */

static int check_upper_fs(const char *dir, nsbox_error **err)
{
	const char *remedy = geteuid() == 0
	                     ? "put /var/lib/nsbox on a local filesystem such as ext4, xfs, btrfs or tmpfs"
	                     : "set XDG_STATE_HOME to a directory on a local filesystem such as ext4, xfs, btrfs or tmpfs";
	struct statfs sf;
	if (statfs(dir, &sf) < 0)
		return nsbox_err(err, errno, "workspace", "inspect the state directory '%s'", dir);
	const char *kind = sf.f_type == OVERLAYFS_SUPER_MAGIC ? "an overlay"
	                   : sf.f_type == NFS_SUPER_MAGIC ? "an NFS"
	                   : sf.f_type == SMB_SUPER_MAGIC || sf.f_type == CIFS_MAGIC ? "an SMB/CIFS"
	                   : NULL;
	if (kind)
		return nsbox_err_hint(err, EINVAL, "workspace", remedy,
		                      "keep the workspace's upper layer in '%s': it is on %s filesystem, "
		                      "which cannot be an overlay upper layer", dir, kind);
	if (lsetxattr(dir, "user.nsbox.probe", "1", 1, 0) < 0) {
		if (errno == ENOTSUP)
			return nsbox_err_hint(err, ENOTSUP, "workspace", remedy,
			                      "keep the workspace's upper layer in '%s': its filesystem has no user "
			                      "extended attributes, which the overlay needs", dir);
	} else {
		(void) lremovexattr(dir, "user.nsbox.probe");
	}
	return 0;
}

static int lay_out(ws_plan *w, nsbox_error **err)
{
	if (asprintf(&w->upper, "%s/upper", w->dir) < 0 || asprintf(&w->work, "%s/work", w->dir) < 0)
		return nsbox_err(err, ENOMEM, "workspace", "prepare the workspace");
	int r = mkdir_p(w->upper, 0755);
	if (r == 0 && mkdir(w->work, 0700) < 0 && errno != EEXIST)
		r = -errno;
	if (r < 0)
		return nsbox_err(err, -r, "workspace", "create the upper layer in '%s'", w->dir);
	r = check_upper_fs(w->dir, err);
	if (r < 0)
		return r;
	/* The overlay writes its layers with the credentials of the sandbox's
	 * setup, which must own the work directory. The upper directory is
	 * /workspace itself as the sandbox sees it: it gets the owner and mode
	 * of the host directory (through the idmapping, for root), so the
	 * sandbox's user may create files at the top as it may below. */
	struct stat st;
	if (fstat(w->lower_fd, &st) < 0)
		return nsbox_err(err, errno, "workspace", "stat workspace '%s'", w->lower);
	if (geteuid() == 0 && (chown(w->upper, w->user_uid, w->user_gid) < 0 || chown(w->work, w->setup_uid, w->setup_gid) < 0))
		return nsbox_err(err, errno, "workspace", "hand the upper layer '%s' to the sandbox", w->upper);
	(void) chmod(w->upper, st.st_mode & 07777);
	return 0;
}

int ws_prepare(ws_plan *w, const nsbox_config *cfg, bool rootless, uid_t setup_uid, gid_t setup_gid,
               nsbox_error **err)
{
	*w = (ws_plan){ .lower_fd = -1, .lock_fd = -1, .upper_fd = -1 };
	/* The sandbox's user as the host sees it (root's range starts at the
	 * setup identity, inside uid 0). */
	w->user_uid = setup_uid + cfg->uid;
	w->user_gid = setup_gid + cfg->gid;
	if (!cfg->workspace) {
		if (cfg->session)
			return nsbox_err_invalid(err, "workspace", "--session needs --workspace");
		return 0;
	}
	w->active = true;
	w->mode = cfg->workspace_mode;
	w->git = cfg->workspace_git;
	w->target = strdup(cfg->workspace_target ? cfg->workspace_target + 1 : "workspace");
	if (!w->target)
		return nsbox_err(err, ENOMEM, "workspace", "prepare the workspace");
	w->max_bytes = cfg->workspace_max_size;
	w->max_files = cfg->workspace_max_files;
	if (strv_copy(&w->deny, &cfg->deny_changes) < 0)
		return nsbox_err(err, ENOMEM, "workspace", "prepare the workspace");
	/* The same checks as a volume: canonical, not forbidden, opened. */
	int r = volume_open(cfg, cfg->workspace, getenv("HOME"), &w->lower, &w->lower_fd, err);
	if (r < 0)
		return nsbox_err_prefix(err, r, "use workspace '%s'", cfg->workspace);
	struct stat st;
	if (fstat(w->lower_fd, &st) < 0 || !S_ISDIR(st.st_mode))
		return nsbox_err(err, ENOTDIR, "workspace", "use workspace '%s'", w->lower);
	w->idmap = !rootless;
	if (w->mode == WS_RW && (r = ws_nosuid_filter(w, err)) < 0)
		return r;
	if (w->mode != WS_OVERLAY) {
		if (cfg->session)
			return nsbox_err_invalid(err, "workspace", "--session needs --workspace-mode overlay (the default)");
		return 0;
	}
	w->state = ws_state_dir();
	if (!w->state)
		return nsbox_err(err, ENOENT, "workspace", "find the state directory (HOME is not set)");
	w->setup_uid = setup_uid;
	w->setup_gid = setup_gid;
	/* The child adds the layers as /proc/self/fd/N (child/mounts.c): an
	 * fd of exactly the directory checked, no host path walked again or
	 * shown in the sandbox's mountinfo. */
	if (!(w->opts = strdup("userxattr")))
		return nsbox_err(err, ENOMEM, "workspace", "prepare the workspace");
	const char *parent = cfg->session ? "sessions" : "runs";
	if (cfg->session) {
		w->session = strdup(cfg->session);
		if (asprintf(&w->dir, "%s/%s/%s", w->state, parent, cfg->session) < 0)
			w->dir = NULL;
	} else {
		unsigned char rnd[6] = { 0 };
		random_name_bytes(rnd, sizeof(rnd));
		if (asprintf(&w->dir, "%s/%s/%d-%02x%02x%02x%02x%02x%02x", w->state, parent, (int) getpid(),
		             rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]) < 0)
			w->dir = NULL;
	}
	if (!w->dir || (cfg->session && !w->session))
		return nsbox_err(err, ENOMEM, "workspace", "prepare the workspace");
	return 0;
}

int ws_create(ws_plan *w, nsbox_error **err)
{
	if (!w->active || w->mode != WS_OVERLAY)
		return 0;
	char parent[PATH_MAX];
	snprintf(parent, sizeof(parent), "%.4000s/%s", w->state, w->session ? "sessions" : "runs");
	/* Traversable (not listable) down to the run's own directory: the
	 * overlay reaches its layers with the sandbox setup's credentials. */
	int r = mkdir_p(parent, 0711);
	if (r == 0 && chmod(w->state, 0711) < 0)
		r = -errno;
	if (r < 0)
		return nsbox_err(err, -r, "workspace", "create the state directory '%s'", parent);
	ws_reap(w->state);
	if (w->session) {
		r = session_dir(w, parent, err);
		if (r < 0)
			return r;
	} else {
		/* Locked from the start: see reap_stale. */
		if (mkdir(w->dir, 0700) < 0)
			return nsbox_err(err, errno, "workspace", "create the state directory '%s'", w->dir);
		w->created = true;   /* ours: ws_finish removes it */
		int lock = ws_session_lock(w->dir);
		if (lock < 0)
			return nsbox_err(err, -lock, "workspace", "lock '%s/lock'", w->dir);
		w->lock_fd = lock;
	}
	if (chmod(w->dir, 0700) < 0 || (geteuid() == 0 && chown(w->dir, w->setup_uid, w->setup_gid) < 0))
		return nsbox_err(err, errno, "workspace", "create the state directory '%s'", w->dir);
	return lay_out(w, err);
}

/* A user namespace that only maps the workspace's owner (uid and gid as
 * on disk) to the sandbox's user as the host sees it: the idmapping for
 * the lower layer. Made by a short-lived child that waits while root writes
 * its maps; the namespace lives on through the returned fd. */
static int owner_userns(uid_t disk_uid, gid_t disk_gid, uid_t to_uid, gid_t to_gid, nsbox_error **err)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return nsbox_err(err, errno, "workspace", "create a pipe");
	int pidfd = -1;
	struct clone_args ca = { .flags = CLONE_NEWUSER | CLONE_PIDFD, .pidfd = (uint64_t) (uintptr_t) &pidfd };
	pid_t pid = (pid_t) sys_clone3(&ca);
	if (pid == 0) {
		char c;
		close(p[1]);
		(void) !read(p[0], &c, 1);
		_exit(0);
	}
	close(p[0]);
	if (pid < 0) {
		close(p[1]);
		return nsbox_err(err, errno, "workspace", "create the workspace's id mapping");
	}
	char path[64], map[64];
	int r = 0, fd = -1;
	static const char *const files[] = { "uid_map", "gid_map" };
	for (int i = 0; r == 0 && i < 2; i++) {
		snprintf(path, sizeof(path), "/proc/%d/%s", (int) pid, files[i]);
		int n = snprintf(map, sizeof(map), "%u %u 1\n", i ? (unsigned) disk_gid : (unsigned) disk_uid,
		                 i ? (unsigned) to_gid : (unsigned) to_uid);
		int m = open(path, O_WRONLY | O_CLOEXEC);
		if (m < 0 || write(m, map, (size_t) n) != n)
			r = nsbox_err(err, errno, "workspace", "write '%s'", path);
		if (m >= 0)
			close(m);
	}
	if (r == 0) {
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int) pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			r = nsbox_err(err, errno, "workspace", "open '%s'", path);
	}
	close(p[1]);   /* the child exits */
	siginfo_t si;
	while (waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED | __WALL) < 0 && errno == EINTR)
		;
	close(pidfd);
	return r < 0 ? r : fd;
}

int ws_idmapped_lower(const ws_plan *w, uid_t to_uid, gid_t to_gid, nsbox_error **err)
{
	struct stat st;
	if (fstat(w->lower_fd, &st) < 0)
		return nsbox_err(err, errno, "workspace", "stat workspace '%s'", w->lower);
	_cleanup_close_ int userns = owner_userns(st.st_uid, st.st_gid, to_uid, to_gid, err);
	if (userns < 0)
		return userns;
	int tree = sys_open_tree(w->lower_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (tree < 0)
		return nsbox_err(err, errno, "workspace", "clone workspace '%s'", w->lower);
	/* The workspace owner's files become the sandbox user's (keep-id, as
	 * a rootless caller gets by its own id mapping); other owners' files
	 * read as nobody's. Read-only unless --workspace-mode rw: the overlay
	 * never writes its lower layer, and nothing else may. */
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
	                                       (w->mode == WS_RW ? 0 : MOUNT_ATTR_RDONLY),
	                           .userns_fd = (uint64_t) userns };
	if (sys_mount_setattr(tree, "", AT_EMPTY_PATH, &attr) < 0) {
		int e = errno;
		close(tree);
		return nsbox_err_hint(err, e, "workspace", "the filesystem may not support idmapped mounts",
		                      "idmap workspace '%s' into the sandbox", w->lower);
	}
	return tree;
}

/* Is the directory `path` empty (and readable)? */
static bool empty_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	bool empty = d != NULL;
	while (empty && (e = readdir(d)))
		empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
	if (d)
		closedir(d);
	return empty;
}

void ws_finish(ws_plan *w)
{
	if (!w->active)
		return;
	if (w->mode == WS_OVERLAY && w->dir && w->created && !w->session)
		(void) remove_tree(w->dir);
	/* A session this run made, for a payload that never ran (a setup
	 * failure, a spawn that failed): nothing to review, so no session.
	 * (Its lock is still ours: no other run uses it.) */
	if (w->mode == WS_OVERLAY && w->dir && w->session && w->made && !w->payload_ran && w->lock_fd >= 0 &&
	    (!w->upper || empty_dir(w->upper)))
		(void) remove_tree(w->dir);
	w->made = false;
	if (w->lock_fd >= 0) {
		close(w->lock_fd);
		w->lock_fd = -1;
	}
}

void ws_plan_free(ws_plan *w)
{
	if (w->upper_fd >= 0)
		close(w->upper_fd);
	if (w->lower_fd >= 0)
		close(w->lower_fd);
	if (w->lock_fd >= 0)
		close(w->lock_fd);
	free(w->lower);
	free(w->dir);
	free(w->upper);
	free(w->work);
	free(w->opts);
	free(w->session);
	free(w->target);
	free(w->state);
	free(w->nosuid);
	strv_clear(&w->deny);
	*w = (ws_plan){ .lower_fd = -1, .lock_fd = -1, .upper_fd = -1 };
}
