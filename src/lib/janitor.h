/* The janitor: a small process that outlives a supervisor killed with
 * SIGKILL, to remove that run's cgroups once its processes are gone. */
#ifndef NSBOX_JANITOR_H
#define NSBOX_JANITOR_H

#include "cgroup.h"
#include "nsbox.h"

/* Start a janitor for `cg`. *wake is the write end of a pipe: closing it
 * (explicitly, or by our death) sends the janitor to work. */
int janitor_start(const cgroup *cg, int *wake, nsbox_error **err);

#endif
