/* Files nsbox writes for its caller at a path the caller names (the audit
 * log, the result record, stats): caller_file.c. */
#ifndef NSBOX_CALLER_FILE_H
#define NSBOX_CALLER_FILE_H

#include "nsbox.h"

/* A character device (/dev/null, a terminal) is accepted too. */
#define CALLER_FILE_DEVICE 0x40000000

/* Open `path` for writing (creating it 0600) with `flags` (O_APPEND, or
 * O_TRUNC to empty it once it is known to be ours; CALLER_FILE_DEVICE),
 * refusing what another user could have made there first or could swap:
 * see caller_file.c. A regular file, unless CALLER_FILE_DEVICE. The fd
 * (O_CLOEXEC, blocking), or -errno with the error for `step`, the file
 * called `what` in messages. */
int caller_file_open(const char *path, int flags, const char *step, const char *what, nsbox_error **err);

#endif
