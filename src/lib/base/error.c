#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

static int set_error(nsbox_error **err, int errnum, const char *step, const char *hint,
                     const char *fmt, va_list ap)
{
	bool quiet = errnum < 0;   /* user input: no kernel words */
	if (quiet)
		errnum = -errnum;
	int ret = errnum ? -errnum : -EINVAL;
	if (!err)
		return ret;
	char *msg = NULL;
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	nsbox_error *e = calloc(1, sizeof(*e));
	if (!e) {
		free(msg);
		return ret;
	}
	e->errnum = errnum;
	e->step = strdup(step ? step : "");
	if (msg && ((errnum && !quiet) || hint)) {
		char *full = NULL;
		bool words = errnum && !quiet;
		if (asprintf(&full, "%s%s%s%s%s%s", msg, words ? ": " : "",
		             words ? strerror(errnum) : "", hint ? " (hint: " : "",
		             hint ? hint : "", hint ? ")" : "") >= 0) {
			free(msg);
			msg = full;
		}
	}
	e->message = msg ? msg : strdup("out of memory");
	e->hint = hint ? strdup(hint) : NULL;
	nsbox_error_free(*err);
	*err = e;
	return ret;
}

int nsbox_err(nsbox_error **err, int errnum, const char *step, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int ret = set_error(err, errnum, step, NULL, fmt, ap);
	va_end(ap);
	return ret;
}

int nsbox_err_invalid(nsbox_error **err, const char *step, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int ret = set_error(err, -EINVAL, step, NULL, fmt, ap);
	va_end(ap);
	return ret;
}

int nsbox_err_at(nsbox_error **err, const char *step, const char *origin, size_t line, size_t col,
                 const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return nsbox_err_invalid(err, step, "%s:%zu:%zu: %s", origin, line, col, msg);
}

int nsbox_err_hint(nsbox_error **err, int errnum, const char *step, const char *hint,
                   const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int ret = set_error(err, errnum, step, hint, fmt, ap);
	va_end(ap);
	return ret;
}

int nsbox_err_prefix(nsbox_error **err, int ret, const char *fmt, ...)
{
	if (!err || !*err)
		return ret;
	char *ctx = NULL, *full = NULL;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&ctx, fmt, ap);
	va_end(ap);
	if (n >= 0 && asprintf(&full, "%s: %s", ctx, (*err)->message) >= 0) {
		free((*err)->message);
		(*err)->message = full;
	}
	free(ctx);
	return ret;
}

nsbox_error *nsbox_error_dup(const nsbox_error *e)
{
	if (!e)
		return NULL;
	nsbox_error *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->errnum = e->errnum;
	d->step = strdup(e->step ? e->step : "");
	d->message = strdup(e->message ? e->message : "");
	d->hint = e->hint ? strdup(e->hint) : NULL;
	if (!d->step || !d->message || (e->hint && !d->hint)) {
		nsbox_error_free(d);
		return NULL;
	}
	return d;
}

const char *nsbox_error_message(const nsbox_error *e) { return e ? e->message : NULL; }
int nsbox_error_errno(const nsbox_error *e) { return e ? e->errnum : 0; }
const char *nsbox_error_step(const nsbox_error *e) { return e ? e->step : NULL; }
const char *nsbox_error_hint(const nsbox_error *e) { return e ? e->hint : NULL; }

void nsbox_error_free(nsbox_error *e)
{
	if (!e)
		return;
	free(e->step);
	free(e->message);
	free(e->hint);
	free(e);
}
