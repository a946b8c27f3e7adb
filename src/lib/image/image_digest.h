/* An image's digest (image_digest.c says what it covers). */
#ifndef NSBOX_IMAGE_DIGEST_H
#define NSBOX_IMAGE_DIGEST_H

#include <stdbool.h>

#include "nsbox.h"

/* "sha256:" and 64 hex digits, and a NUL. */
#define IMAGE_DIGEST_LEN 72

/* The digest of the tree under the directory fd root_fd. 0 or -errno. */
int image_tree_digest(int root_fd, char out[IMAGE_DIGEST_LEN], nsbox_error **err);
bool image_digest_valid(const char *s);
/* The "digest" field of a meta.json text, if present and well formed. */
bool image_meta_digest_of(const char *meta, char out[IMAGE_DIGEST_LEN]);
/* The digest in the meta.json beside an image's rootfs (fd on it). */
bool image_digest_beside(int rootfs_fd, char out[IMAGE_DIGEST_LEN]);

#endif
