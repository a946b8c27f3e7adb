/* Workspaces: a host directory at /workspace, copy-on-write through
 * overlayfs (the host directory is the read-only lower layer, the upper layer
 * lives in nsbox's state directory), read-only, or read-write. */
#ifndef NSBOX_WORKSPACE_H
#define NSBOX_WORKSPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include <linux/filter.h>

#include "nsbox.h"
#include "base/strv.h"

typedef struct ws_plan {
	bool active;
	int mode;             /* WS_OVERLAY, WS_RO, WS_RW */
	char *lower;          /* canonical host directory */
	int lower_fd;         /* O_PATH, what the checks looked at */
	char *state;          /* the state directory (overlay) */
	char *dir;            /* state: runs/<id> or sessions/<name> */
	bool created;         /* ws_create made the ephemeral run's dir */
	uid_t setup_uid;      /* the host ids the sandbox's setup runs as */
	gid_t setup_gid;
	char *upper, *work;
	char *opts;           /* overlay mount options */
	char *session;        /* NULL: ephemeral */
	int lock_fd;          /* held while the run lasts */
	bool idmap;           /* root: the lower layer is idmapped into the sandbox */
	uid_t user_uid;       /* root: the sandbox's user as the host sees it */
	gid_t user_gid;
	strv deny;            /* workspace.deny_changes */
	int git;              /* workspace.git: WS_GIT_APPLY, WS_GIT_DROP, WS_GIT_DENY */
	char *target;         /* where it is mounted inside, without the leading '/' */
	bool made;            /* this run made the session (it was not there) */
	bool payload_ran;     /* supervisor: no setup error; else a session this
	                       * run made, still empty, goes with the run */
	uint64_t max_bytes;   /* workspace.max_size: the upper layer's bound */
	uint64_t max_files;   /* workspace.max_files: its bound in entries */
	int upper_fd;         /* supervisor: the upper layer, watched */
	uint64_t base_bytes, avail0, base_files, ffree0;
	unsigned polls;
	const char *over;     /* which bound the watch found passed */
	struct sock_filter *nosuid;   /* rw: the seccomp layer against set-id modes */
	unsigned short nosuid_len;
} ws_plan;

typedef struct ws_change {
	char *path;           /* relative to the workspace */
	const char *kind;     /* "added", "modified", "deleted", "type_changed",
	                       * "error" (the scan could not go on below path) */
	const char *detail;   /* "file", "directory", "symlink", "fifo", "socket",
	                       * "device", "content", "mode", "too deep",
	                       * "unreadable" (a directory the scan could not open) */
	mode_t mode;          /* type and permission bits in the session (0: deleted) */
	char *target;         /* a symlink's target as the payload wrote it */
	bool denied;          /* workspace.deny_changes matches it or, for a
	                       * replaced or removed directory, something below
	                       * (and workspace.git makes no exception) */
	const char *rule;     /* "apply", "denied", "git" (housekeeping applied),
	                       * "dropped" (housekeeping left out) */
	struct timespec mtime, atime;   /* in the session; zeros for a deletion */
	const char *left;     /* apply: why it was left out, or NULL */
} ws_change;

/* workspace.git: what apply does with git's own housekeeping under a .git
 * directory (ws_git_housekeeping) that workspace.deny_changes denies. */
enum { WS_GIT_APPLY = 0, WS_GIT_DROP, WS_GIT_DENY };
/* The rule's decision for `path` (kind, detail and mode as the scan found
 * them): "git" (housekeeping: applied), "dropped" (left out: lock files
 * always, housekeeping with WS_GIT_DROP), or NULL (deny_changes decides). */
const char *ws_git_rule(int git, const char *path, const char *kind, const char *detail, mode_t mode);
/* A change's time as ISO 8601 UTC with nanoseconds ("" for zero). */
void ws_time_iso(char out[64], const struct timespec *t);

/* The rules a scan marks changes with. */
typedef struct ws_rules {
	const strv *deny;     /* workspace.deny_changes, or NULL */
	int git;              /* workspace.git */
} ws_rules;

/* How deep the scan goes in the upper layer (a payload chooses the depth). */
#define WS_MAX_DEPTH 128
/* How many changes a result record lists (it counts them all). */
#define RECORD_CHANGES_MAX 1000

/* rw mode (ws_nosuid.c): compile, in the parent, the seccomp layer that
 * keeps setuid/setgid modes off the host; install it in the child (after
 * no_new_privs, before the profile's filter). */
int ws_nosuid_filter(ws_plan *w, nsbox_error **err);
int ws_nosuid_install(const ws_plan *w);

/* The state directory: /var/lib/nsbox/state (root), else
 * $XDG_STATE_HOME/nsbox or ~/.local/state/nsbox. */
char *ws_state_dir(void);

struct nsbox_plan;
struct nsbox_config;
/* Planning: check and open the directory, name the run's state directory;
 * nothing is created on the host (ws_create does). setup_uid/gid: the host
 * ids the sandbox's setup runs as (overlayfs writes the upper layer with
 * the mounter's credentials). */
int ws_prepare(ws_plan *w, const struct nsbox_config *cfg, bool rootless, uid_t setup_uid,
               gid_t setup_gid, nsbox_error **err);
/* Spawn, before clone (overlay): remove what killed runs left, create the
 * run's (or session's) directory and layers, take its lock. */
int ws_create(ws_plan *w, nsbox_error **err);
/* Parent (root): an idmapped, read-only clone of the lower layer in which
 * the workspace owner's files belong to (to_uid, to_gid), the sandbox's user
 * as the host sees it. Returns the detached mount's fd. */
int ws_idmapped_lower(const ws_plan *w, uid_t to_uid, gid_t to_gid, nsbox_error **err);
/* After the run: list the changes (overlay only), then drop an ephemeral
 * upper layer and release the session. */
int ws_scan(const char *upper, const char *lower, const strv *deny, ws_change **out, size_t *n,
            uint64_t *upper_bytes);
/* The same, with workspace.git's rule too (ws_scan: WS_GIT_APPLY). */
int ws_scan_rules(const char *upper, const char *lower, const ws_rules *rules, ws_change **out, size_t *n,
                  uint64_t *upper_bytes);
void ws_changes_free(ws_change *v, size_t n);
/* A name for a person to read: control characters, bidirectional
 * overrides, '\\' and bytes that are not UTF-8 as \xNN (malloc'ed). */
char *ws_escape(const char *s);
struct buf;
/* The fields after "path" of a change's JSON object (through json.c). */
void ws_change_json(struct buf *b, const ws_change *c);
void ws_finish(ws_plan *w);
void ws_plan_free(ws_plan *w);

/* Does `path` match the glob (with "**" for any number of directories)? */
bool ws_glob_match(const char *glob, const char *path);
/* Take the lock of the session in `dir` (no waiting): its fd, -EBUSY when
 * another run or command holds it, or another -errno. */
int ws_session_lock(const char *dir);
/* Remove the run directories (and half-made sessions) of the state
 * directory `state` whose supervisor is gone (killed before it cleaned up):
 * every workspace run and `nsbox session ls` does this first. */
void ws_reap(const char *state);
/* Bytes on disk and entries of the tree under the directory fd `top` (any
 * depth); complete is false when a directory could not be read (a payload's
 * mode 000) or moved while counted: the figures are then a floor. */
typedef struct ws_usage {
	uint64_t bytes, entries;
	bool complete;
} ws_usage;
void ws_du(int top, ws_usage *u);
/* Supervisor: start watching the upper layer's size (1: watching, 0: no
 * bound, -errno), and is it over workspace.max_size or max_files now? A
 * poll: cheap (statfs) until the filesystem lost more blocks or inodes than
 * a bound allows, then counted; a count that cannot be completed then is
 * taken as over (w->over says which). */
int ws_watch_start(ws_plan *w);
bool ws_over_bound(ws_plan *w);

#endif
