/* The import module (libnsbox-import.so, in pkglibdir): `image import` is the
 * only code that needs libarchive, whose dependencies (libxml2, ICU,
 * libstdc++, nettle, lzma, zstd ...) cost every launch milliseconds of
 * loading and relocation when linked into libnsbox. libnsbox opens the
 * module on demand (import_load.c); the module exports this one object. */
#ifndef NSBOX_IMPORT_MODULE_H
#define NSBOX_IMPORT_MODULE_H

#include "nsbox.h"

#define NSBOX_IMPORT_MODULE_SYMBOL "nsbox_import_module"
#define NSBOX_IMPORT_MODULE_FILE "libnsbox-import.so"

typedef struct import_module {
	/* The module shares libnsbox's internal types (the error object it
	 * hands back is freed by libnsbox): only the same build may be used. */
	const char *version;
	int (*import)(const char *name, const char *source, nsbox_error **err);
	/* The same, with `label` as the image's source in meta.json (a pull
	 * names the registry reference, not its scratch directory). */
	int (*import_as)(const char *name, const char *source, const char *label, nsbox_error **err);
} import_module;

/* import.c, in the module */
int image_import_as(const char *name, const char *source, const char *label, nsbox_error **err);
/* import_load.c: the module's image_import_as, loaded on demand. */
int image_import_labeled(const char *name, const char *source, const char *label, nsbox_error **err);

#endif
