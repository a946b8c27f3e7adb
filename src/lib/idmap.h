/* Planning the user namespace's id maps. */
#ifndef NSBOX_IDMAP_H
#define NSBOX_IDMAP_H

#include <stdint.h>
#include <sys/types.h>

#include "plan.h"

/* The host range root maps the sandbox to when /etc/subuid has no "nsbox" entry. */
#define NSBOX_ROOT_RANGE_BASE 1073741824u
#define NSBOX_RANGE_COUNT 65536u

typedef struct subid_range {
	uint64_t start, count;
} subid_range;

/* Find the range for `name` or numeric `id` in a subordinate-id file (the
 * format of /etc/subuid). Returns 1 when found, 0 when not, -errno. */
int subid_lookup(const char *file, const char *name, unsigned long id, subid_range *out);

/* Render the keep-id map: `inside` -> `outside` (1 id), every other id in
 * [0, NSBOX_RANGE_COUNT) -> the subordinate range. Lines as for uid_map. */
int idmap_keep_id(unsigned inside, unsigned outside, const subid_range *sub, char **out);

int idmap_plan(nsbox_plan *p, const nsbox_config *cfg, nsbox_error **err);
/* Write the maps of the child `pid` (parent side, after clone). */
int idmap_write(const nsbox_plan *p, pid_t pid, nsbox_error **err);

#endif
