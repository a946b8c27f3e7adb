/* Directory trees on the host (fsutil.h). */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fsutil.h"

int mkdir_p(const char *path, mode_t mode)
{
	_cleanup_free_ char *p = strdup(path);
	if (!p)
		return -ENOMEM;
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			if (mkdir(p, mode) < 0 && errno != EEXIST)
				return -errno;
			*s = '/';
		}
	return mkdir(p, mode) < 0 && errno != EEXIST ? -errno : 0;
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void) st;
	(void) f;
	(void) (type == FTW_DP ? rmdir(path) : unlink(path));
	return 0;
}

int remove_tree(const char *path)
{
	if (nftw(path, rm_entry, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0 && errno != ENOENT)
		return -errno;
	return access(path, F_OK) == 0 ? -ENOTEMPTY : 0;
}
