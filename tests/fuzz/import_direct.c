/* The libFuzzer build links the import code itself (import.c and its
 * helpers, not the module import_load.c opens): what import_load.c gives
 * the rest of the library, straight to it. */
#include "image/import_module.h"

int image_import_labeled(const char *name, const char *source, const char *label, nsbox_error **err)
{
	return image_import_as(name, source, label, err);
}
