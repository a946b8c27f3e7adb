/* The SDK's one door into nsbox_run(): every run the package makes (a
 * fresh sandbox, an exec in a long-lived one, a context's cell, a pool's
 * run) goes through governed(), which only marshals: the GIL released
 * while the library runs, the caller's output callback called with it
 * taken back, warnings turned into Python warnings, cancellation through a
 * Handle (an nsbox_cancel). Governance, classification and the record are
 * the library's. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"

/* ---- cancellation handle -------------------------------------------------- */

typedef struct {
	PyObject_HEAD
	nsbox_cancel *cancel;
} Handle;

static PyObject *handle_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	(void) args;
	(void) kw;
	Handle *h = (Handle *) type->tp_alloc(type, 0);
	if (!h)
		return NULL;
	nsbox_error *e = NULL;
	int r = nsbox_cancel_new(&h->cancel, &e);
	if (r < 0) {
		Py_DECREF(h);
		return raise_error(e, r);
	}
	return (PyObject *) h;
}

static void handle_dealloc(Handle *h)
{
	nsbox_cancel_free(h->cancel);
	Py_TYPE(h)->tp_free((PyObject *) h);
}

/* kill(): cancel the run (now, or before it starts); idempotent. */
static PyObject *handle_kill(Handle *h, PyObject *unused)
{
	(void) unused;
	nsbox_cancel_fire(h->cancel);
	Py_RETURN_NONE;
}

static PyObject *handle_cancelled(Handle *h, void *unused)
{
	(void) unused;
	return PyBool_FromLong(nsbox_cancel_fired(h->cancel));
}

static PyMethodDef handle_methods[] = {
	{ "kill", (PyCFunction) handle_kill, METH_NOARGS,
	  "Cancel this run: a command is killed, a context's cell interrupted (now or when it starts)." },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef handle_getset[] = {
	{ "cancelled", (getter) handle_cancelled, NULL, "kill() was called", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject HandleType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "nsbox._nsbox.Handle",
	.tp_basicsize = sizeof(Handle),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Cancels one run from any thread.",
	.tp_new = handle_new,
	.tp_dealloc = (destructor) handle_dealloc,
	.tp_methods = handle_methods,
	.tp_getset = handle_getset,
};

/* ---- the governed run -------------------------------------------------------- */

typedef struct {
	PyObject *callback;      /* callable(stream: int, data: bytes) or None */
	nsbox_cancel *cancel;
	bool failed;             /* the callback raised: it is not called again */
	PyObject *exc_type, *exc_value, *exc_tb;
	char **warnings;         /* collected while the GIL is released */
	size_t n_warnings;
} door;

/* Called by the library (GIL released) with each chunk of output. */
static void on_output(void *userdata, int stream, const char *data, size_t len)
{
	door *d = userdata;
	if (d->failed)
		return;
	PyGILState_STATE g = PyGILState_Ensure();
	PyObject *res = PyObject_CallFunction(d->callback, "iy#", stream, data, (Py_ssize_t) len);
	if (res) {
		Py_DECREF(res);
	} else {
		/* The caller's code failed: stop the run, raise it afterwards. */
		d->failed = true;
		PyErr_Fetch(&d->exc_type, &d->exc_value, &d->exc_tb);
		nsbox_cancel_fire(d->cancel);
	}
	PyGILState_Release(g);
}

static void on_warning(void *userdata, const char *message)
{
	door *d = userdata;
	char **v = realloc(d->warnings, (d->n_warnings + 1) * sizeof(*v));
	if (!v)
		return;
	d->warnings = v;
	v[d->n_warnings] = strdup(message);
	if (v[d->n_warnings])
		d->n_warnings++;
}

/* The record as JSON text; r is freed. */
PyObject *result_json(nsbox_result *r)
{
	char *json = NULL;
	nsbox_error *e = NULL;
	int rc = nsbox_result_to_json(r, &json, &e);
	nsbox_result_free(r);
	if (rc < 0)
		return raise_error(e, rc);
	PyObject *ret = PyUnicode_DecodeUTF8(json, (Py_ssize_t) strlen(json), "strict");
	free(json);
	return ret;
}

PyObject *governed(nsbox_run_options *o, PyObject *handle, PyObject *callback)
{
	if (handle != Py_None && !PyObject_TypeCheck(handle, &HandleType))
		return PyErr_Format(PyExc_TypeError, "handle must be a Handle or None");
	if (callback != Py_None && !PyCallable_Check(callback))
		return PyErr_Format(PyExc_TypeError, "on_output must be callable or None");
	door d = { .callback = callback };
	nsbox_error *e = NULL;
	if (handle != Py_None) {
		d.cancel = ((Handle *) handle)->cancel;
	} else {
		int r = nsbox_cancel_new(&d.cancel, &e);
		if (r < 0)
			return raise_error(e, r);
	}
	o->cancel = d.cancel;
	if (callback != Py_None) {
		o->on_output = on_output;
		o->output_userdata = &d;
	}
	o->on_warning = on_warning;
	o->warning_userdata = &d;
	nsbox_result *res = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_run(o, &res, &e);
	Py_END_ALLOW_THREADS
	if (handle == Py_None)
		nsbox_cancel_free(d.cancel);
	PyObject *ret = NULL;
	bool warned_into_error = false;
	for (size_t i = 0; i < d.n_warnings; i++) {
		if (!warned_into_error && PyErr_WarnEx(PyExc_RuntimeWarning, d.warnings[i], 1) < 0)
			warned_into_error = true;   /* the warnings filter made it an exception */
		free(d.warnings[i]);
	}
	free(d.warnings);
	if (d.failed) {
		/* The callback's exception wins over anything else. */
		nsbox_result_free(res);
		nsbox_error_free(e);
		if (warned_into_error)
			PyErr_Clear();
		PyErr_Restore(d.exc_type, d.exc_value, d.exc_tb);
		return NULL;
	}
	if (warned_into_error || r < 0) {
		/* A warning made an error, the run cancelled before it started,
		 * or its audit line could not be written: not a success. */
		nsbox_result_free(res);
		if (warned_into_error) {
			nsbox_error_free(e);
			return NULL;
		}
		return raise_error(e, r);
	}
	ret = result_json(res);
	return ret;
}

/* run(policy, settings, argv, code, lang, stdin_fd, on_output, handle,
 *     timeout_ms) -> str (the JSON record): a fresh sandbox for a command
 * (argv) or for code in `lang`. A failure before anything could start is
 * still a record (status "setup_failed"). */
PyObject *py_run(PyObject *self, PyObject *args)
{
	PyObject *policy, *settings, *argv, *callback, *handle;
	Py_buffer code = { 0 };
	const char *lang = NULL;
	int stdin_fd;
	unsigned long long timeout_ms;
	(void) self;
	if (!PyArg_ParseTuple(args, "OOOz*ziOOK", &policy, &settings, &argv, &code, &lang, &stdin_fd, &callback,
	                      &handle, &timeout_ms))
		return NULL;
	PyObject *ret = NULL;
	const char **av = NULL;
	nsbox_config *cfg = build_config(policy, settings);
	if (!cfg)
		goto out;
	if (argv != Py_None && strings(argv, &av) < 0)
		goto out;
	nsbox_run_options o = {
		.version = NSBOX_RUN_OPTIONS_VERSION,
		.flags = NSBOX_SPAWN_CAPTURE,
		.config = cfg,
		.argv = av,
		.lang = lang,
		.code = code.buf,
		.code_len = (size_t) code.len,
		.timeout_ms = timeout_ms,
		.stdin_fd = stdin_fd,
		.stdout_fd = -1,
		.stderr_fd = -1,
		.signal_fd = -1,
		.stats_fd = -1,
	};
	ret = governed(&o, handle, callback);
out:
	PyMem_Free(av);
	nsbox_config_free(cfg);
	if (code.obj)
		PyBuffer_Release(&code);
	return ret;
}

/* A NULL-terminated array of the sequence's strings (str as UTF-8, bytes
 * as they are), pointing into the objects: valid while `seq` lives. */
int strings(PyObject *seq, const char ***out)
{
	*out = NULL;
	if (!PyList_Check(seq) && !PyTuple_Check(seq)) {
		PyErr_SetString(PyExc_TypeError, "expected a list or tuple of str or bytes");
		return -1;
	}
	PyObject *fast = PySequence_Fast(seq, "expected a sequence of str or bytes");
	if (!fast)
		return -1;
	Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
	const char **v = PyMem_Calloc((size_t) n + 1, sizeof(char *));
	if (!v) {
		Py_DECREF(fast);
		PyErr_NoMemory();
		return -1;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *it = PySequence_Fast_GET_ITEM(fast, i);
		v[i] = PyBytes_Check(it) ? PyBytes_AsString(it) : PyUnicode_AsUTF8(it);
		if (!v[i]) {
			PyMem_Free(v);
			Py_DECREF(fast);
			return -1;
		}
	}
	/* The items are borrowed from seq, which the caller holds. */
	Py_DECREF(fast);
	*out = v;
	return 0;
}
