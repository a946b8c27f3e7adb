/* The library's error object: errno, failing step, and a message built from
 * the innermost cause outwards (each layer prepends its context). */
#ifndef NSBOX_ERROR_H
#define NSBOX_ERROR_H

#include "nsbox.h"

struct nsbox_error {
	int errnum;
	char *step;
	char *message;  /* with " (hint: ...)" at its end when there is a hint */
	char *hint;     /* the remedy alone, or NULL */
};

/* Set *err (if err is non-NULL) from a printf-style message; when errnum is
 * non-zero the kernel's words are appended. Returns -errnum (or -EINVAL when
 * errnum is 0) so callers can write `return nsbox_err(...)`. */
int nsbox_err(nsbox_error **err, int errnum, const char *step, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Like nsbox_err but appends " (hint: ...)" after the kernel's words. */
int nsbox_err_hint(nsbox_error **err, int errnum, const char *step, const char *hint,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* An error in the user's input (EINVAL) whose message says everything: no
 * kernel words are appended. */
int nsbox_err_invalid(nsbox_error **err, const char *step, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* An input error at a position of a file: "ORIGIN:LINE:COL: message". */
int nsbox_err_at(nsbox_error **err, const char *step, const char *origin, size_t line, size_t col,
                 const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Prepend "context: " to an existing error. Returns -errnum of that error. */
int nsbox_err_prefix(nsbox_error **err, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

nsbox_error *nsbox_error_dup(const nsbox_error *e);

#endif
