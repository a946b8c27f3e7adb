/* Planning the user namespace's id maps. */
#ifndef NSBOX_IDMAP_H
#define NSBOX_IDMAP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "plan/plan.h"

/* The host range root maps the sandbox to when /etc/subuid has no "nsbox" entry. */
#define NSBOX_ROOT_RANGE_BASE 1073741824u
#define NSBOX_RANGE_COUNT 65536u

typedef struct subid_range {
	uint64_t start, count;
} subid_range;

typedef struct subid_entry {
	char owner[64];
	uint64_t start, count;
} subid_entry;

/* Find the range for `name` or numeric `id` in a subordinate-id file (the
 * format of /etc/subuid). Returns 1 when found, 0 when not, -errno. */
int subid_lookup(const char *file, const char *name, unsigned long id, subid_range *out);
/* The first entry of `file` not owned by `self` that overlaps
 * [start, start + count): 1 and *out, 0 when none (or no file), -errno. */
int subid_overlap(const char *file, const char *self, uint64_t start, uint64_t count, subid_entry *out);
/* The lowest multiple of `count` from `from` on that no entry of either file
 * (but `self`'s) overlaps, for a hint; 0 when there is none below 2^32. */
uint64_t subid_free_start(const char *subuid, const char *subgid, const char *self, uint64_t from,
                          uint64_t count);

/* Root's host range: the 'nsbox' entries of the two files, else the built-in
 * one, and whether another entry overlaps the NSBOX_RANGE_COUNT ids used
 * (conflict_file non-NULL). The paths are parameters for the unit tests. */
typedef struct root_ids {
	subid_range uid, gid;
	bool own_uid, own_gid;       /* from an 'nsbox' entry */
	const char *conflict_file;   /* the file with an overlapping entry, or NULL */
	bool conflict_gid;           /* ...which is the group side */
	subid_entry other;           /* that entry */
	uint64_t free_start;         /* a free range to suggest, 0 if none */
} root_ids;
int idmap_root_ids(const char *subuid, const char *subgid, root_ids *out, nsbox_error **err);
/* The error's message and hint for a conflict (both allocated). */
int idmap_root_conflict(const root_ids *ri, const char *subuid, const char *subgid, char **detail,
                        char **hint);

/* Render the keep-id map: `inside` -> `outside` (1 id), every other id in
 * [0, NSBOX_RANGE_COUNT) -> the subordinate range. Lines as for uid_map. */
int idmap_keep_id(unsigned inside, unsigned outside, const subid_range *sub, char **out);

int idmap_plan(nsbox_plan *p, const nsbox_config *cfg, nsbox_error **err);
/* Write the maps of the child `pid` (parent side, after clone). */
int idmap_write(const nsbox_plan *p, pid_t pid, nsbox_error **err);

#endif
