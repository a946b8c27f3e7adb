/* nsbox_image_import, the public entry, opens the import module on demand
 * (import_module.h): a launch never maps libarchive and its dependencies.
 * The module is looked for, in order, where NSBOX_IMPORT_MODULE says (not
 * honoured in a set-id program), beside the libnsbox that is running (a
 * build tree's .libs, or a staged copy), and in pkglibdir, where `make
 * install` puts it. It stays loaded: libarchive's dependencies (ICU,
 * libstdc++) are not safe to unload. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "image/import_module.h"

#ifndef PKGLIBDIR
#error "PKGLIBDIR must name the directory of the import module"
#endif

static const import_module *loaded;

/* The directory of the object that holds this function (libnsbox.so). */
static bool own_dir(char *out, size_t len)
{
	Dl_info info;
	if (!dladdr((void *) own_dir, &info) || !info.dli_fname || info.dli_fname[0] != '/')
		return false;
	const char *slash = strrchr(info.dli_fname, '/');
	return snprintf(out, len, "%.*s", (int) (slash - info.dli_fname), info.dli_fname) < (int) len;
}

static int load(const import_module **out, nsbox_error **err)
{
	const import_module *m = __atomic_load_n(&loaded, __ATOMIC_ACQUIRE);
	if (m) {
		*out = m;
		return 0;
	}
	char beside[PATH_MAX], dir[PATH_MAX];
	const char *env = secure_getenv("NSBOX_IMPORT_MODULE");
	const char *path = env && *env ? env : NULL;
	/* Beside libnsbox only if there is one there: a module that is there
	 * but does not load is an error to report, not a reason to go on. */
	if (!path && own_dir(dir, sizeof(dir)) &&
	    snprintf(beside, sizeof(beside), "%s/%s", dir, NSBOX_IMPORT_MODULE_FILE) < (int) sizeof(beside) &&
	    access(beside, F_OK) == 0)
		path = beside;
	if (!path)
		path = PKGLIBDIR "/" NSBOX_IMPORT_MODULE_FILE;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!h) {
		/* dlerror() names the file and says why. */
		const char *why = dlerror();
		return nsbox_err_hint(err, -ELIBACC, "image",
		                      "the module is installed with nsbox; NSBOX_IMPORT_MODULE may name it",
		                      "import: load the import module: %s", why ? why : path);
	}
	m = dlsym(h, NSBOX_IMPORT_MODULE_SYMBOL);
	if (!m || !m->version || strcmp(m->version, PACKAGE_VERSION) || !m->import || !m->import_as)
		return nsbox_err_invalid(err, "image",
		                         "import: the import module '%s' is not the one of nsbox %s (%s)", path,
		                         PACKAGE_VERSION, m && m->version ? m->version : "no version");
	__atomic_store_n(&loaded, m, __ATOMIC_RELEASE);
	*out = m;
	return 0;
}

int nsbox_image_import(const char *name, const char *source, nsbox_error **err)
{
	const import_module *m = NULL;
	int r = load(&m, err);
	return r < 0 ? r : m->import(name, source, err);
}

int image_import_labeled(const char *name, const char *source, const char *label, nsbox_error **err)
{
	const import_module *m = NULL;
	int r = load(&m, err);
	return r < 0 ? r : m->import_as(name, source, label, err);
}
