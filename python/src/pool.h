/* Shared between the extension's files: errors, configurations, and the
 * warm pool's type (pool.c). */
#ifndef NSBOX_PY_POOL_H
#define NSBOX_PY_POOL_H

#include "nsbox.h"

extern PyObject *Error;
PyObject *raise_error(nsbox_error *e, int r);
nsbox_config *build_config(PyObject *policy, PyObject *settings);
/* The record of r as JSON text (a str); r is freed. NULL with Error set. */
PyObject *result_json(nsbox_result *r);
/* Add _nsbox.Pool to the module; -1 with an exception set on failure. */
int pool_type_add(PyObject *m);
/* Add _nsbox.Live and _nsbox.Exec (live.c). */
int live_types_add(PyObject *m);

#endif
