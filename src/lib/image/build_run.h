/* One build step's sandbox (build_run.c). */
#ifndef NSBOX_IMAGE_BUILD_RUN_H
#define NSBOX_IMAGE_BUILD_RUN_H

#include <sys/types.h>

#include "base/strv.h"
#include "nsbox.h"

typedef struct step_run {
	const char *rootfs;        /* the base image's root filesystem */
	const char *overlay_dir;   /* the layers' directory */
	const char *overlay;       /* overlayfs options, paths relative to it */
	uid_t uid;
	gid_t gid;
	const char *workdir;       /* NULL: / */
	const char *timeout;       /* NULL: 1h */
	strv allow;                /* HOST[:PORT] it may reach */
	strv env;                  /* NAME=VALUE */
	strv volumes;              /* SRC, DST, SRC, DST...: COPY's sources, read-only */
	strv argv;
	int log_fd;                /* its output; -1: discarded */
	int signal_fd;             /* as nsbox_spawn_options', or -1 */
} step_run;

/* Run it to the end; *out is its result. */
int step_sandbox(const step_run *s, nsbox_result **out, nsbox_error **err);
/* The first destination its proxy refused, with why ("other.test:80 (not
 * allowed)"), or NULL; malloc'ed. */
char *step_denied(const nsbox_result *res);

#endif
