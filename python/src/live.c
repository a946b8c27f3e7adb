/* _nsbox.Live and _nsbox.Exec: long-lived sandboxes (NSBOX_SPAWN_KEEP) for
 * the Python SDK (nsbox/live.py).
 *
 * Live(policy, settings) sets the sandbox up (GIL released) and keeps it.
 * exec(argv, env, workdir, timeout_ms, stdin_fd) runs one command with its
 * output captured and returns the JSON record; spawn(...) starts one with
 * the caller's fds for stdout, stderr and fd 3 and returns an Exec, which
 * the caller waits for or kills (code contexts). Several threads may exec at
 * once; close() kills the sandbox, lets the running calls return, frees it. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"

typedef struct {
	PyObject_HEAD
	nsbox_sandbox *sb;
	pthread_mutex_t lock;
	pthread_cond_t idle;
	unsigned busy;          /* calls using sb */
	bool closing;
} Live;

typedef struct {
	PyObject_HEAD
	Live *live;             /* a reference: the sandbox outlives its execs */
	nsbox_sandbox *ex;
	bool waited;
	pthread_mutex_t lock;
} Exec;

static PyTypeObject ExecType;

/* Take the sandbox for one call; false (exception set) once it is closed. */
static bool enter(Live *l)
{
	pthread_mutex_lock(&l->lock);
	bool ok = l->sb && !l->closing;
	if (ok)
		l->busy++;
	pthread_mutex_unlock(&l->lock);
	if (!ok)
		PyErr_SetString(PyExc_ValueError, "the sandbox is closed");
	return ok;
}

static void leave(Live *l)
{
	pthread_mutex_lock(&l->lock);
	if (--l->busy == 0)
		pthread_cond_broadcast(&l->idle);
	pthread_mutex_unlock(&l->lock);
}

static PyObject *live_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	PyObject *policy, *settings;
	(void) kw;
	if (!PyArg_ParseTuple(args, "OO", &policy, &settings))
		return NULL;
	nsbox_config *cfg = build_config(policy, settings);
	if (!cfg)
		return NULL;
	static const char *const placeholder[] = { "true", NULL };
	nsbox_error *e = NULL;
	int r = nsbox_config_set_command(cfg, 1, placeholder, &e);
	if (r < 0) {
		nsbox_config_free(cfg);
		return raise_error(e, r);
	}
	Live *l = (Live *) type->tp_alloc(type, 0);
	if (!l) {
		nsbox_config_free(cfg);
		return NULL;
	}
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->idle, NULL);
	nsbox_spawn_options o = {
		.version = NSBOX_SPAWN_OPTIONS_VERSION,
		.flags = NSBOX_SPAWN_KEEP,
		.config = cfg,
		.stdin_fd = -1,
		.stdout_fd = -1,
		.stderr_fd = -1,
		.signal_fd = -1,
		.stats_fd = -1,
	};
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_spawn(&o, &l->sb, &e);
	Py_END_ALLOW_THREADS
	nsbox_config_free(cfg);
	if (r < 0) {
		Py_DECREF(l);
		return raise_error(e, r);
	}
	return (PyObject *) l;
}

/* Kill the sandbox, wait for the calls in flight, free it. */
static void live_shut(Live *l)
{
	pthread_mutex_lock(&l->lock);
	if (!l->sb || l->closing) {
		/* Another thread closes it: wait for that to finish. */
		while (l->sb)
			pthread_cond_wait(&l->idle, &l->lock);
		pthread_mutex_unlock(&l->lock);
		return;
	}
	l->closing = true;
	(void) nsbox_sandbox_kill(l->sb, SIGKILL);
	while (l->busy)
		pthread_cond_wait(&l->idle, &l->lock);
	nsbox_sandbox *sb = l->sb;
	pthread_mutex_unlock(&l->lock);
	nsbox_sandbox_free(sb);
	pthread_mutex_lock(&l->lock);
	l->sb = NULL;
	pthread_cond_broadcast(&l->idle);
	pthread_mutex_unlock(&l->lock);
}

static PyObject *live_close(Live *l, PyObject *unused)
{
	(void) unused;
	Py_BEGIN_ALLOW_THREADS
	live_shut(l);
	Py_END_ALLOW_THREADS
	Py_RETURN_NONE;
}

static void live_dealloc(Live *l)
{
	/* Execs hold a reference: none is running. */
	live_shut(l);
	pthread_cond_destroy(&l->idle);
	pthread_mutex_destroy(&l->lock);
	Py_TYPE(l)->tp_free((PyObject *) l);
}

/* A NULL-terminated array of UTF-8 strings (bytes as they are), or NULL
 * with an exception; None gives *out NULL. */
static int strings(PyObject *seq_obj, const char ***out)
{
	*out = NULL;
	if (seq_obj == Py_None)
		return 0;
	PyObject *seq = PySequence_Fast(seq_obj, "expected a sequence of strings");
	if (!seq)
		return -1;
	Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
	const char **v = PyMem_Calloc((size_t) n + 1, sizeof(char *));
	if (!v) {
		Py_DECREF(seq);
		PyErr_NoMemory();
		return -1;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
		v[i] = PyBytes_Check(it) ? PyBytes_AsString(it) : PyUnicode_AsUTF8(it);
		if (!v[i]) {
			PyMem_Free(v);
			Py_DECREF(seq);
			return -1;
		}
	}
	/* The strings live in the sequence's items, which live as long as
	 * the caller's arguments. */
	Py_DECREF(seq);
	*out = v;
	return 0;
}

typedef struct {
	PyObject *argv, *env, *workdir;
	unsigned long long timeout_ms;
	int stdin_fd, stdout_fd, stderr_fd, fd3;
} exec_args;

static int exec_options(exec_args *a, nsbox_exec_options *o, const char ***av, const char ***ev)
{
	if (strings(a->argv, av) < 0)
		return -1;
	if (!*av || !(*av)[0]) {
		PyMem_Free(*av);
		PyErr_SetString(PyExc_ValueError, "argv must not be empty");
		return -1;
	}
	if (strings(a->env, ev) < 0) {
		PyMem_Free(*av);
		return -1;
	}
	const char *wd = NULL;
	if (a->workdir != Py_None && !(wd = PyUnicode_AsUTF8(a->workdir))) {
		PyMem_Free(*av);
		PyMem_Free(*ev);
		return -1;
	}
	*o = (nsbox_exec_options){
		.version = NSBOX_EXEC_OPTIONS_VERSION,
		.argv = *av,
		.envp = *ev,
		.workdir = wd,
		.stdin_fd = a->stdin_fd,
		.stdout_fd = a->stdout_fd,
		.stderr_fd = a->stderr_fd,
		.fd3 = a->fd3,
		.timeout_ms = a->timeout_ms,
		.signal_fd = -1,
	};
	return 0;
}

/* exec(argv, env, workdir, timeout_ms, stdin_fd) -> JSON record */
static PyObject *live_exec(Live *l, PyObject *args)
{
	exec_args a = { .stdout_fd = -1, .stderr_fd = -1, .fd3 = -1 };
	if (!PyArg_ParseTuple(args, "OOOKi", &a.argv, &a.env, &a.workdir, &a.timeout_ms, &a.stdin_fd))
		return NULL;
	nsbox_exec_options o;
	const char **av = NULL, **ev = NULL;
	if (exec_options(&a, &o, &av, &ev) < 0)
		return NULL;
	o.flags = NSBOX_SPAWN_CAPTURE;
	if (!enter(l)) {
		PyMem_Free(av);
		PyMem_Free(ev);
		return NULL;
	}
	nsbox_sandbox *ex = NULL;
	nsbox_result *res = NULL;
	nsbox_error *e = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_sandbox_exec(l->sb, &o, &ex, &e);
	if (r == 0)
		r = nsbox_sandbox_wait(ex, &res, &e);
	nsbox_sandbox_free(ex);
	Py_END_ALLOW_THREADS
	leave(l);
	PyMem_Free(av);
	PyMem_Free(ev);
	if (r < 0)
		return raise_error(e, r);
	return result_json(res);
}

/* spawn(argv, env, workdir, timeout_ms, stdin_fd, stdout_fd, stderr_fd, fd3) -> Exec */
static PyObject *live_spawn(Live *l, PyObject *args)
{
	exec_args a = { 0 };
	if (!PyArg_ParseTuple(args, "OOOKiiii", &a.argv, &a.env, &a.workdir, &a.timeout_ms, &a.stdin_fd,
	                      &a.stdout_fd, &a.stderr_fd, &a.fd3))
		return NULL;
	nsbox_exec_options o;
	const char **av = NULL, **ev = NULL;
	if (exec_options(&a, &o, &av, &ev) < 0)
		return NULL;
	Exec *x = PyObject_New(Exec, &ExecType);
	if (x) {
		x->live = NULL;
		x->ex = NULL;
		x->waited = false;
		pthread_mutex_init(&x->lock, NULL);
	}
	if (!x || !enter(l)) {
		Py_XDECREF(x);
		PyMem_Free(av);
		PyMem_Free(ev);
		return NULL;
	}
	Py_INCREF(l);
	x->live = l;
	nsbox_error *e = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_sandbox_exec(l->sb, &o, &x->ex, &e);
	Py_END_ALLOW_THREADS
	PyMem_Free(av);
	PyMem_Free(ev);
	if (r < 0) {
		Py_DECREF(x);   /* leaves the sandbox */
		return raise_error(e, r);
	}
	return (PyObject *) x;
}

static PyObject *live_id(Live *l, void *unused)
{
	(void) unused;
	const char *id = l->sb ? nsbox_sandbox_id(l->sb) : NULL;
	if (!id)
		Py_RETURN_NONE;
	return PyUnicode_FromString(id);
}

static PyMethodDef live_methods[] = {
	{ "exec", (PyCFunction) live_exec, METH_VARARGS, "Run a command in the sandbox; the JSON record." },
	{ "spawn", (PyCFunction) live_spawn, METH_VARARGS, "Start a command with the caller's fds; an Exec." },
	{ "close", (PyCFunction) live_close, METH_NOARGS, "Kill the sandbox and free it." },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef live_getset[] = {
	{ "id", (getter) live_id, NULL, "the sandbox's id", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject LiveType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "nsbox._nsbox.Live",
	.tp_basicsize = sizeof(Live),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A long-lived sandbox.",
	.tp_new = live_new,
	.tp_dealloc = (destructor) live_dealloc,
	.tp_methods = live_methods,
	.tp_getset = live_getset,
};

/* ---- Exec --------------------------------------------------------------- */

static void exec_dealloc(Exec *x)
{
	if (x->live) {
		Py_BEGIN_ALLOW_THREADS
		nsbox_sandbox_free(x->ex);   /* kills it if it still runs */
		Py_END_ALLOW_THREADS
		leave(x->live);
		Py_DECREF(x->live);
	}
	pthread_mutex_destroy(&x->lock);
	PyObject_Free(x);
}

/* kill(sig): -ESRCH after the end is not an error. */
static PyObject *exec_kill(Exec *x, PyObject *args)
{
	int sig;
	if (!PyArg_ParseTuple(args, "i", &sig))
		return NULL;
	int r = x->ex ? nsbox_sandbox_kill(x->ex, sig) : -ESRCH;
	if (r < 0 && r != -ESRCH)
		return raise_error(NULL, r);
	return PyBool_FromLong(r == 0);
}

/* wait() -> JSON record (once). */
static PyObject *exec_wait(Exec *x, PyObject *unused)
{
	(void) unused;
	pthread_mutex_lock(&x->lock);
	bool waited = x->waited;
	x->waited = true;
	pthread_mutex_unlock(&x->lock);
	if (waited)
		return PyErr_Format(PyExc_ValueError, "already waited for");
	nsbox_result *res = NULL;
	nsbox_error *e = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_sandbox_wait(x->ex, &res, &e);
	Py_END_ALLOW_THREADS
	if (r < 0)
		return raise_error(e, r);
	return result_json(res);
}

static PyObject *exec_pidfd(Exec *x, void *unused)
{
	(void) unused;
	return PyLong_FromLong(x->ex ? nsbox_sandbox_pidfd(x->ex) : -1);
}

static PyMethodDef exec_methods[] = {
	{ "kill", (PyCFunction) exec_kill, METH_VARARGS, "Signal the command (SIGKILL ends all it started)." },
	{ "wait", (PyCFunction) exec_wait, METH_NOARGS, "Wait for the command; the JSON record." },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef exec_getset[] = {
	{ "pidfd", (getter) exec_pidfd, NULL, "readable once the command and all it started are gone", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject ExecType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "nsbox._nsbox.Exec",
	.tp_basicsize = sizeof(Exec),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "One command running in a long-lived sandbox.",
	.tp_dealloc = (destructor) exec_dealloc,
	.tp_methods = exec_methods,
	.tp_getset = exec_getset,
};

int live_types_add(PyObject *m)
{
	if (PyType_Ready(&LiveType) < 0 || PyType_Ready(&ExecType) < 0)
		return -1;
	Py_INCREF(&LiveType);
	if (PyModule_AddObject(m, "Live", (PyObject *) &LiveType) < 0) {
		Py_DECREF(&LiveType);
		return -1;
	}
	Py_INCREF(&ExecType);
	if (PyModule_AddObject(m, "Exec", (PyObject *) &ExecType) < 0) {
		Py_DECREF(&ExecType);
		return -1;
	}
	return 0;
}
