/* _nsbox.Pool: nsbox_pool for the Python SDK (nsbox/pool.py).
 *
 * Pool(policy, settings, argv, files, size) builds the configuration once
 * (it stays alive as long as the pool, which spawns from it); run(code,
 * lang) takes a ready sandbox, hands it the code and returns the JSON
 * record, with the GIL released while it runs. */
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
	nsbox_config *cfg;
	nsbox_pool *pool;
	pthread_mutex_t lock;   /* pool vs close() from another thread */
	unsigned busy;          /* runs between take and return */
	bool closing;
} Pool;

/* The command and the files, as _nsbox.run takes them. */
static int configure(nsbox_config *cfg, PyObject *argv, PyObject *files)
{
	nsbox_error *e = NULL;
	int r = 0;
	PyObject *aseq = PySequence_Fast(argv, "argv must be a sequence");
	if (!aseq)
		return -1;
	Py_ssize_t argc = PySequence_Fast_GET_SIZE(aseq);
	const char **av = PyMem_Calloc((size_t) argc + 1, sizeof(char *));
	if (!av) {
		Py_DECREF(aseq);
		PyErr_NoMemory();
		return -1;
	}
	for (Py_ssize_t i = 0; i < argc && !PyErr_Occurred(); i++)
		av[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(aseq, i));
	if (!PyErr_Occurred())
		r = nsbox_config_set_command(cfg, (int) argc, av, &e);
	PyMem_Free(av);
	Py_DECREF(aseq);
	if (PyErr_Occurred())
		return -1;
	PyObject *fseq = r < 0 ? NULL : PySequence_Fast(files, "files must be a sequence");
	for (Py_ssize_t i = 0; fseq && r == 0 && i < PySequence_Fast_GET_SIZE(fseq); i++) {
		const char *path;
		Py_buffer data;
		unsigned int mode;
		if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fseq, i), "sy*I", &path, &data, &mode)) {
			Py_DECREF(fseq);
			return -1;
		}
		r = nsbox_config_add_file(cfg, path, data.buf, (size_t) data.len, mode, &e);
		PyBuffer_Release(&data);
	}
	Py_XDECREF(fseq);
	if (r < 0) {
		raise_error(e, r);
		return -1;
	}
	return PyErr_Occurred() ? -1 : 0;
}

static int pool_init(Pool *self, PyObject *args, PyObject *kw)
{
	PyObject *policy, *settings, *argv, *files;
	unsigned int size;
	(void) kw;
	if (self->cfg)
		return PyErr_Format(PyExc_RuntimeError, "Pool already initialised"), -1;
	if (!PyArg_ParseTuple(args, "OOOOI", &policy, &settings, &argv, &files, &size))
		return -1;
	nsbox_config *cfg = build_config(policy, settings);
	if (!cfg)
		return -1;
	if (configure(cfg, argv, files) < 0) {
		nsbox_config_free(cfg);
		return -1;
	}
	/* A pooled run does not pass through the audit log, the artifacts or
	 * the import gate (nsbox_governor_*) yet: a policy that asks for them
	 * gets no pool rather than runs that skip them. */
	const char *log = NULL, *artifacts = NULL, *gate = NULL;
	(void) nsbox_config_audit(cfg, &log, NULL, &artifacts, NULL, NULL);
	(void) nsbox_config_import_gate(cfg, &gate, NULL, NULL);
	if (log || artifacts || (gate && strcmp(gate, "off"))) {
		nsbox_config_free(cfg);
		PyErr_Format(PyExc_ValueError, "the warm pool does not yet audit, keep artifacts or run the import "
		                               "gate, which this policy asks for (audit.log, audit.artifacts, "
		                               "code.import_gate): use Sandbox.run_code");
		return -1;
	}
	nsbox_pool_options o = { .version = NSBOX_POOL_OPTIONS_VERSION, .size = size, .config = cfg };
	nsbox_error *e = NULL;
	nsbox_pool *p = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_pool_new(&o, &p, &e);
	Py_END_ALLOW_THREADS
	if (r < 0) {
		nsbox_config_free(cfg);
		raise_error(e, r);
		return -1;
	}
	self->cfg = cfg;
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
static bool detach_locked(Pool *self, nsbox_pool **p, nsbox_config **cfg)
{
	if (!self->closing || self->busy || !self->pool)
		return false;
	*p = self->pool;
	*cfg = self->cfg;
	self->pool = NULL;
	self->cfg = NULL;
	return true;
}

static PyObject *pool_close(Pool *self, PyObject *unused)
{
	(void) unused;
	nsbox_pool *p = NULL;
	nsbox_config *cfg = NULL;
	/* Killing and reaping the ready sandboxes takes a while: not under
	 * the GIL. A run in progress frees the pool when it ends. */
	Py_BEGIN_ALLOW_THREADS
	pthread_mutex_lock(&self->lock);
	self->closing = true;
	bool mine = detach_locked(self, &p, &cfg);
	pthread_mutex_unlock(&self->lock);
	if (mine) {
		nsbox_pool_free(p);
		nsbox_config_free(cfg);
	}
	Py_END_ALLOW_THREADS
	Py_RETURN_NONE;
}

static void pool_dealloc(Pool *self)
{
	/* No run can hold a pool nothing refers to. */
	Py_BEGIN_ALLOW_THREADS
	nsbox_pool_free(self->pool);
	nsbox_config_free(self->cfg);
	Py_END_ALLOW_THREADS
	pthread_mutex_destroy(&self->lock);
	Py_TYPE(self)->tp_free((PyObject *) self);
}

static PyObject *pool_run(Pool *self, PyObject *args)
{
	Py_buffer code;
	const char *lang;
	if (!PyArg_ParseTuple(args, "y*s", &code, &lang))
		return NULL;
	nsbox_error *e = NULL;
	nsbox_result *res = NULL;
	int r = 0, waited = 0;
	Py_BEGIN_ALLOW_THREADS
	pthread_mutex_lock(&self->lock);
	nsbox_pool *p = self->closing ? NULL : self->pool;
	if (p)
		self->busy++;
	pthread_mutex_unlock(&self->lock);
	if (!p) {
		r = -ESHUTDOWN;
	} else {
		nsbox_sandbox *sb = NULL;
		r = nsbox_pool_take(p, code.buf, (size_t) code.len, &sb, &e);
		if (r == 0) {
			waited = nsbox_sandbox_wait(sb, &res, &e);
			nsbox_pool_release(p, sb);   /* its teardown off our path */
		}
		nsbox_pool *gone = NULL;
		nsbox_config *cfg = NULL;
		pthread_mutex_lock(&self->lock);
		self->busy--;
		bool last = detach_locked(self, &gone, &cfg);   /* closed meanwhile */
		pthread_mutex_unlock(&self->lock);
		if (last) {
			nsbox_pool_free(gone);
			nsbox_config_free(cfg);
		}
	}
	Py_END_ALLOW_THREADS
	PyBuffer_Release(&code);
	if (r == -ESHUTDOWN && !e)
		return PyErr_Format(PyExc_ValueError, "the pool is closed");
	if (r < 0 || waited < 0) {
		nsbox_result_free(res);
		return raise_error(e, r < 0 ? r : waited);
	}
	if (nsbox_result_classify_code(res, lang, &e) < 0) {
		nsbox_result_free(res);
		return raise_error(e, -EINVAL);
	}
	return result_json(res);
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
