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
} import_module;

#endif
