/* Files of an image under construction, read from its layers (top first,
 * the base last) without mounting them (build_lookup.c). */
#ifndef NSBOX_IMAGE_BUILD_LOOKUP_H
#define NSBOX_IMAGE_BUILD_LOOKUP_H

#include <stddef.h>
#include <sys/types.h>

#include "base/error.h"
#include "base/strv.h"

/* The text of file `rel` (no leading '/') as the image has it; malloc'ed
 * into *out. -ENOENT when no layer has it or one removed it. */
int lookup_read(const int *dirs, size_t n, const char *rel, char **out);
/* USER's NAME|UID[:GROUP|GID] as ids of the image. */
int lookup_user(const int *dirs, size_t n, const char *spec, uid_t *uid, gid_t *gid, nsbox_error **err);
/* The hosts (HOST or HOST:PORT) of the http(s) archives apt uses. */
int lookup_apt_hosts(const int *dirs, size_t n, strv *hosts, nsbox_error **err);

#endif
