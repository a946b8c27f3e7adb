/* Scope-bound cleanup helpers for the parent side (never used in the child). */
#ifndef NSBOX_CLEANUP_H
#define NSBOX_CLEANUP_H

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

static inline void freep(void *p) { free(*(void **) p); }
static inline void closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		(void) close(*fd);
		errno = saved;
	}
}

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)

/* Hand ownership on: return the value and disarm the cleanup. */
#define TAKE_PTR(p) ({ __typeof__(p) _p = (p); (p) = NULL; _p; })
#define TAKE_FD(fd) ({ int _fd = (fd); (fd) = -1; _fd; })

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
