/* The image store (images.c). */
#ifndef NSBOX_IMAGES_H
#define NSBOX_IMAGES_H

#include <stdbool.h>

#include "image_strip.h"
#include "nsbox.h"

#define NSBOX_SYSTEM_STORE "/var/lib/nsbox/images"

/* The caller's store (root: the system store), or the system store. */
char *image_store(bool system);
bool image_name_valid(const char *name);
int image_write_meta(const char *dir, const char *name, const char *source, const image_stripped *s,
                     nsbox_error **err);
int image_install(const char *store, const char *name, const char *tmp, bool replace, nsbox_error **err);

#endif
