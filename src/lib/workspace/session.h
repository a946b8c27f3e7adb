/* Sessions, shared by the review commands (session.c) and apply
 * (session_apply.c). */
#ifndef NSBOX_SESSION_H
#define NSBOX_SESSION_H

#include <limits.h>
#include <time.h>

#include "nsbox.h"

#include "workspace/workspace.h"

typedef struct session {
	char dir[PATH_MAX];
	char upper[PATH_MAX + 8];
	char workspace[PATH_MAX];
	struct timespec created;
	bool has_owner;       /* the meta names who made it (newer sessions) */
	unsigned long owner;  /* ...their audit login uid (4294967295: none) */
} session;

struct nsbox_changes {
	ws_change *v;
	size_t n;
};

/* The caller's audit login uid (/proc/self/loginuid, which sudo keeps), or
 * 4294967295 when it has none. */
unsigned long session_login_uid(void);
/* The rules workspace.deny_changes and workspace.git of `cfg` (NULL: no
 * denials, git: apply). */
ws_rules session_rules(const nsbox_config *cfg);

/* The session `name` (a checked name, its meta file read). */
int session_open(const char *name, session *s, nsbox_error **err);
/* The same, locked so that no run uses it meanwhile: the lock's fd. */
int session_open_locked(const char *name, session *s, nsbox_error **err);
/* `rel` beneath the directory fd `root`, never through a symlink: an fd
 * or -errno. */
int session_beneath(int root, const char *rel, unsigned flags);

#endif
