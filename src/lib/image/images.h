/* The image store (images.c). */
#ifndef NSBOX_IMAGES_H
#define NSBOX_IMAGES_H

#include <stdbool.h>

#include "image/image_strip.h"
#include "nsbox.h"

#define NSBOX_SYSTEM_STORE "/var/lib/nsbox/images"

/* The caller's store (root: the system store), or the system store. */
char *image_store(bool system);
bool image_name_valid(const char *name);
int image_write_meta(const char *dir, const char *name, const char *source, const image_stripped *s,
                     nsbox_error **err);
/* ...with `extra` (JSON members, each followed by ',') before the source. */
int image_write_meta_extra(const char *dir, const char *name, const char *source, const image_stripped *s,
                           const char *extra, nsbox_error **err);
int image_install(const char *store, const char *name, const char *tmp, bool replace, nsbox_error **err);

/* nsbox_image_build with debootstrap (root only; o is version 2). */
int image_build_recipe(const nsbox_image_build_options *o, nsbox_error **err);

/* image_reap.c: a directory of the store being made (.import-, .build-) is
 * locked by its maker while it works: returns the fd holding the lock. */
int image_tmp_lock(const char *dir);
/* Remove what killed imports and builds left in `store`; a previous image
 * a killed rebuild had moved aside goes back in place. */
void image_reap(const char *store);

#endif
