/* _nsbox.Pool: a pool of code runs (nsbox_pool, options version 2) for the
 * Python SDK (nsbox/pool.py).
 *
 * Pool(policy, settings, lang, size, preload) starts filling it; run(code,
 * timeout_ms, on_output, handle) serves one run through the SDK's one door
 * (governed(), run.c): warm when the warm sandbox can serve it exactly as a
 * cold run would, cold otherwise, the record says which. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"

typedef struct {
	PyObject_HEAD
	nsbox_pool *pool;
	pthread_mutex_t lock;   /* pool vs close() from another thread */
	unsigned busy;          /* runs in flight */
	bool closing;
} Pool;

static int pool_init(Pool *self, PyObject *args, PyObject *kw)
{
	PyObject *policy, *settings, *preload;
	const char *lang;
	unsigned int size;
	(void) kw;
	if (self->pool)
		return PyErr_Format(PyExc_RuntimeError, "Pool already initialised"), -1;
	if (!PyArg_ParseTuple(args, "OOsIO", &policy, &settings, &lang, &size, &preload))
		return -1;
	const char **pre = NULL;
	if (strings(preload, &pre) < 0)
		return -1;
	nsbox_config *cfg = build_config(policy, settings);
	if (!cfg) {
		PyMem_Free(pre);
		return -1;
	}
	nsbox_pool_options o = { .version = NSBOX_POOL_OPTIONS_VERSION, .size = size, .config = cfg, .lang = lang,
	                         .preload = pre };
	nsbox_error *e = NULL;
	nsbox_pool *p = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_pool_new(&o, &p, &e);
	Py_END_ALLOW_THREADS
	nsbox_config_free(cfg);
	PyMem_Free(pre);
	if (r < 0) {
		raise_error(e, r);
		return -1;
	}
	self->pool = p;
	return 0;
}

static PyObject *pool_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	(void) args;
	(void) kw;
	Pool *self = (Pool *) type->tp_alloc(type, 0);
	if (self)
		pthread_mutex_init(&self->lock, NULL);
	return (PyObject *) self;
}

/* Detach the pool and its configuration once closing and no run holds it
 * (lock held); the caller frees them outside the lock and the GIL. */
static bool detach_locked(Pool *self, nsbox_pool **p)
{
	if (!self->closing || self->busy)
		return false;
	*p = self->pool;
	self->pool = NULL;
	return true;
}

static PyObject *pool_close(Pool *self, PyObject *unused)
{
	(void) unused;
	nsbox_pool *p = NULL;
	pthread_mutex_lock(&self->lock);
	self->closing = true;
	bool last = detach_locked(self, &p);
	pthread_mutex_unlock(&self->lock);
	if (last) {
		Py_BEGIN_ALLOW_THREADS
		nsbox_pool_free(p);
		Py_END_ALLOW_THREADS
	}
	Py_RETURN_NONE;
}

static void pool_dealloc(Pool *self)
{
	/* No run can hold a pool nothing refers to. */
	Py_BEGIN_ALLOW_THREADS
	nsbox_pool_free(self->pool);
	Py_END_ALLOW_THREADS
	pthread_mutex_destroy(&self->lock);
	Py_TYPE(self)->tp_free((PyObject *) self);
}

/* run(code, timeout_ms, on_output, handle) -> JSON record */
static PyObject *pool_run(Pool *self, PyObject *args)
{
	Py_buffer code;
	unsigned long long timeout_ms;
	PyObject *callback, *handle;
	if (!PyArg_ParseTuple(args, "y*KOO", &code, &timeout_ms, &callback, &handle))
		return NULL;
	pthread_mutex_lock(&self->lock);
	nsbox_pool *p = self->closing ? NULL : self->pool;
	if (p)
		self->busy++;
	pthread_mutex_unlock(&self->lock);
	if (!p) {
		PyBuffer_Release(&code);
		return PyErr_Format(PyExc_ValueError, "the pool is closed");
	}
	nsbox_run_options o = {
		.version = NSBOX_RUN_OPTIONS_VERSION,
		.flags = NSBOX_SPAWN_CAPTURE,
		.pool = p,
		.code = code.buf,
		.code_len = (size_t) code.len,
		.timeout_ms = timeout_ms,
		.stdin_fd = -1,
		.stdout_fd = -1,
		.stderr_fd = -1,
		.signal_fd = -1,
		.stats_fd = -1,
	};
	PyObject *ret = governed(&o, handle, callback);
	PyBuffer_Release(&code);
	nsbox_pool *gone = NULL;
	pthread_mutex_lock(&self->lock);
	self->busy--;
	bool last = detach_locked(self, &gone);   /* closed meanwhile */
	pthread_mutex_unlock(&self->lock);
	if (last) {
		Py_BEGIN_ALLOW_THREADS
		nsbox_pool_free(gone);
		Py_END_ALLOW_THREADS
	}
	return ret;
}

static PyObject *pool_cost(Pool *self, PyObject *unused)
{
	(void) unused;
	nsbox_pool_cost c = { 0 };
	pthread_mutex_lock(&self->lock);
	if (self->pool)
		(void) nsbox_pool_cost_get(self->pool, &c);
	pthread_mutex_unlock(&self->lock);
	return Py_BuildValue("{s:I,s:I,s:K,s:K,s:K}", "ready", c.ready, "processes", c.processes,
	                     "memory_bytes", (unsigned long long) c.memory_bytes,
	                     "spawned", (unsigned long long) c.spawned, "taken", (unsigned long long) c.taken);
}

static PyMethodDef pool_methods[] = {
	{ "run", (PyCFunction) pool_run, METH_VARARGS, "Run code in a ready sandbox; the JSON record." },
	{ "cost", (PyCFunction) pool_cost, METH_NOARGS, "The idle pool's cost." },
	{ "close", (PyCFunction) pool_close, METH_NOARGS, "Kill the ready sandboxes." },
	{ NULL, NULL, 0, NULL },
};

static PyTypeObject PoolType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "nsbox._nsbox.Pool",
	.tp_basicsize = sizeof(Pool),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Pool(policy, settings, argv, files, size): a warm pool (internal).",
	.tp_new = pool_new,
	.tp_init = (initproc) pool_init,
	.tp_dealloc = (destructor) pool_dealloc,
	.tp_methods = pool_methods,
};

int pool_type_add(PyObject *m)
{
	if (PyType_Ready(&PoolType) < 0)
		return -1;
	Py_INCREF(&PoolType);
	if (PyModule_AddObject(m, "Pool", (PyObject *) &PoolType) < 0) {
		Py_DECREF(&PoolType);
		return -1;
	}
	return 0;
}
