/* Sessions, shared by the review commands (session.c) and apply
 * (session_apply.c). */
#ifndef NSBOX_SESSION_H
#define NSBOX_SESSION_H

#include <limits.h>
#include <time.h>

#include "nsbox.h"

typedef struct session {
	char dir[PATH_MAX];
	char upper[PATH_MAX + 8];
	char workspace[PATH_MAX];
	struct timespec created;
} session;

/* The session `name` (a checked name, its meta file read). */
int session_open(const char *name, session *s, nsbox_error **err);
/* The same, locked so that no run uses it meanwhile: the lock's fd. */
int session_open_locked(const char *name, session *s, nsbox_error **err);
/* `rel` beneath the directory fd `root`, never through a symlink: an fd
 * or -errno. */
int session_beneath(int root, const char *rel, unsigned flags);

#endif
