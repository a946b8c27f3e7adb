/* Resolving mount targets in the new root and making the missing mount
 * points (mountpoint.c), for mounts.c. Child side: no allocation, no
 * stdio. */
#ifndef NSBOX_CHILD_MOUNTPOINT_H
#define NSBOX_CHILD_MOUNTPOINT_H

#include <limits.h>

#include "plan/plan.h"

/* An O_PATH fd (plus extra_flags) of target, resolved in root; -errno. */
int mountpoint_resolve(int root, const char *target, unsigned extra_flags);

/* Split "a/b/c" into the parent fd (resolved in root) and the last name. */
int mountpoint_open_parent(int root, const char *target, char name[NAME_MAX + 1]);

/* The target of op, resolved in *root, its mount point made first when
 * op asks for it (OPF_MKPOINT) and it is missing; *root may become a
 * mirror of the root then. An O_PATH fd, or -errno. */
int mountpoint_resolve_target(int *root, const mount_op *op);

#endif
