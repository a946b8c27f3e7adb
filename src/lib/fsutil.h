/* Directory trees on the host: create a path, remove a tree. */
#ifndef NSBOX_FSUTIL_H
#define NSBOX_FSUTIL_H

#include <sys/types.h>

/* mkdir -p: every missing component with `mode`. 0 or -errno. */
int mkdir_p(const char *path, mode_t mode);
/* rm -rf that never leaves its filesystem (a mount left inside, such as a
 * failed build's /proc, is not descended into) nor follows a link. 0, or
 * -errno (-ENOTEMPTY when something could not go). */
int remove_tree(const char *path);

#endif
