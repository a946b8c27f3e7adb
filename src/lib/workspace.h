/* Workspaces: a host directory at /workspace, copy-on-write through
 * overlayfs (the host directory is the read-only lower layer, the upper layer
 * lives in nsbox's state directory), read-only, or read-write. */
#ifndef NSBOX_WORKSPACE_H
#define NSBOX_WORKSPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "nsbox.h"
#include "strv.h"

typedef struct ws_plan {
	bool active;
	int mode;             /* WS_OVERLAY, WS_RO, WS_RW */
	char *lower;          /* canonical host directory */
	int lower_fd;         /* O_PATH, what the checks looked at */
	char *dir;            /* state: runs/<id> or sessions/<name> */
	char *upper, *work;
	char *opts;           /* overlay mount options */
	char *session;        /* NULL: ephemeral */
	int lock_fd;          /* held while the run lasts */
	bool idmap;           /* root: the lower layer is idmapped into the sandbox */
	uid_t user_uid;       /* root: the sandbox's user as the host sees it */
	gid_t user_gid;
	strv deny;            /* workspace.deny_changes */
} ws_plan;

typedef struct ws_change {
	char *path;           /* relative to the workspace */
	const char *kind;     /* "added", "modified", "deleted", "type_changed" */
	const char *detail;   /* "file", "directory", "symlink", "content", "mode", ... */
	bool denied;          /* matches workspace.deny_changes */
} ws_change;

/* The state directory: /var/lib/nsbox/state (root), else
 * $XDG_STATE_HOME/nsbox or ~/.local/state/nsbox. */
char *ws_state_dir(void);

struct nsbox_plan;
struct nsbox_config;
/* Parent, before clone: check the directory, prepare the layers, take the
 * session's lock. setup_uid/gid: the host ids the sandbox's setup runs as
 * (overlayfs writes the upper layer with the mounter's credentials). */
int ws_prepare(ws_plan *w, const struct nsbox_config *cfg, bool rootless, uid_t setup_uid,
               gid_t setup_gid, nsbox_error **err);
/* Parent (root): an idmapped, read-only clone of the lower layer in which
 * the workspace owner's files belong to (to_uid, to_gid), the sandbox's user
 * as the host sees it. Returns the detached mount's fd. */
int ws_idmapped_lower(const ws_plan *w, uid_t to_uid, gid_t to_gid, nsbox_error **err);
/* After the run: list the changes (overlay only), then drop an ephemeral
 * upper layer and release the session. */
int ws_scan(const char *upper, const char *lower, const strv *deny, ws_change **out, size_t *n);
void ws_changes_free(ws_change *v, size_t n);
void ws_finish(ws_plan *w);
void ws_plan_free(ws_plan *w);

/* Does `path` match the glob (with "**" for any number of directories)? */
bool ws_glob_match(const char *glob, const char *path);
/* rm -rf for trees the overlay made (its work directory has mode 000). */
int ws_remove_tree(const char *path);
/* Take the lock of the session in `dir` (no waiting): its fd, -EBUSY when
 * another run or command holds it, or another -errno. */
int ws_session_lock(const char *dir);

#endif
