/* nsbox image import, shared between the formats (import.c) and the tar
 * layer reader (import_layer.c). */
#ifndef NSBOX_IMPORT_H
#define NSBOX_IMPORT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "image/image_strip.h"

typedef struct importer {
	const char *source;
	int root_fd;             /* the image's rootfs being filled */
	char root[PATH_MAX];
	uint64_t max_bytes, bytes;
	uint64_t max_entries, entries;
	bool rootless;
	image_stripped stripped;
} importer;

/* snprintf for paths: truncation shows as an empty result. */
void import_path_fmt(char *out, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* "import 'SOURCE': member 'M': WHAT", -e. */
int import_err(importer *im, nsbox_error **err, int e, const char *member, const char *what);
/* A regular file beneath `dirfd` (no symlink, no FIFO): fd, -ENOENT, or
 * -EPERM for anything else; layer_open_err says which. */
int layer_open(int dirfd, const char *rel);
int layer_open_err(importer *im, nsbox_error **err, int r, const char *rel);
struct archive *layer_reader(int fd);
/* Extract the tar at `fd` (from its start) below the importer's root. */
int layer_extract(importer *im, int fd, nsbox_error **err);
/* A layer: its whiteouts, then its members. */
int layer_apply_fd(importer *im, int fd, nsbox_error **err);
int layer_apply(importer *im, int dirfd, const char *rel, nsbox_error **err);

#endif
