/* Who owns root's images on disk (image_owners.c). */
#ifndef NSBOX_IMAGE_OWNERS_H
#define NSBOX_IMAGE_OWNERS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "base/error.h"

/* Shift every owner beneath `dirfd` (the directory itself included) into
 * the range [uid_base, uid_base + NSBOX_RANGE_COUNT) and its gid twin: id
 * N becomes base + N, an id already in the range stays, one beyond the
 * range becomes base + 65534 (nobody, as a sandbox saw it before) and is
 * counted in *overflow. Never follows a link nor leaves the filesystem;
 * idempotent, so an interrupted pass is finished by the next. `replace`
 * (converting a published store, whose old owners may hold files open or
 * have hard-linked host files in): a regular file not root's or with
 * several links gets a fresh copy instead of a chown. */
int shift_tree(int dirfd, uint32_t uid_base, uint32_t gid_base, bool replace, unsigned long *overflow);

/* Root's store: shift the image rooted at `root_fd` into root's sandbox
 * range (the 'nsbox' entries of /etc/subuid and /etc/subgid, else the
 * built-in one), so that no host user owns a file of it. */
int image_shift_owners(int root_fd, bool replace, const char *what, nsbox_error **err);

/* Whether an image root with this stat is stored shifted into the range
 * starting at uid_base/gid_base. */
bool image_owners_shifted(const struct stat *st, uint32_t uid_base, uint32_t gid_base);

#endif
