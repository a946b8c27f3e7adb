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
/* run.c: the SDK's one door into nsbox_run(): `handle` is a Handle or
 * None, `callback` a callable(stream, bytes) or None; the JSON record, or
 * NULL with an exception. o's cancel, callbacks and userdata are set here. */
PyObject *governed(nsbox_run_options *o, PyObject *handle, PyObject *callback);
PyObject *py_run(PyObject *self, PyObject *args);
extern PyTypeObject HandleType;
/* A NULL-terminated array of a list's or tuple's str/bytes items (pointing
 * into them), PyMem_Free'd by the caller; -1 with an exception. */
int strings(PyObject *seq, const char ***out);
/* Add _nsbox.Pool to the module; -1 with an exception set on failure. */
int pool_type_add(PyObject *m);
/* Add _nsbox.Live and _nsbox.Exec (live.c). */
int live_types_add(PyObject *m);

#endif
