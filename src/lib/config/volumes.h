/* Checking host paths against the mount policy before they are bound. */
#ifndef NSBOX_VOLUMES_H
#define NSBOX_VOLUMES_H

#include "config/conf.h"
#include "nsbox.h"

/* Expand a leading "~" with `home`. Returns a malloc'ed string or NULL. */
char *path_expand_home(const char *path, const char *home);

/* Is the canonical path `src` refused by the forbidden entry `rule` (already
 * expanded and canonical)? A rule forbids itself, what is below it, and what
 * contains it; "/" forbids only itself (everything is below it). */
bool path_forbidden_by(const char *src, const char *rule);

/* Canonicalise a volume source and check it against the policy; on success
 * *canon is the canonical path and *fd an O_PATH descriptor of exactly the
 * object that was checked. */
int volume_open(const nsbox_config *cfg, const char *source, const char *home, char **canon,
                int *fd, nsbox_error **err);

#endif
