/* The import module's one exported symbol (import_module.h); the rest of the
 * module (import.c, import_layer.c, image_strip_entry.c and its copies of the
 * store helpers) is local to it. */
#include "image/import_module.h"

extern const import_module nsbox_import_module;
const import_module nsbox_import_module = {
	.version = PACKAGE_VERSION,
	.import = nsbox_image_import,
	.import_as = image_import_as,
};
