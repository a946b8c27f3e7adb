/* The janitor: a small process that outlives a supervisor killed with
 * SIGKILL, to remove that run's cgroups once its processes are gone. */
#ifndef NSBOX_JANITOR_H
#define NSBOX_JANITOR_H

#include "cgroup/cgroup.h"
#include "nsbox.h"

typedef struct janitor {
	pid_t pid;
	int pidfd;
	int wake;     /* write end of its pipe */
} janitor;

/* Start a janitor for the cgroups named `name` below the host's parents,
 * before they are created (so no moment exists when they could be left
 * behind). Closing j->wake (explicitly, or by our death) sends it to work. */
int janitor_start(const cg_host *h, const char *name, janitor *j, nsbox_error **err);
/* Release the janitor after we removed the cgroups ourselves, and reap it. */
void janitor_finish(janitor *j);
/* The same without the reap, for a process about to exit: the janitor,
 * woken with nothing left to remove, exits on its own and is reaped by the
 * reaper that inherits it. Its pidfd is closed. */
void janitor_leave(janitor *j);

/* In a background process of ours (a raw clone: no allocation): its own
 * session, so a terminal's Ctrl-C stays the supervisor's to handle; `name`
 * in ps; SIGINT, SIGHUP and SIGPIPE ignored. */
void background_init(const char *name);

#endif
