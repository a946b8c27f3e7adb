/* nsbox._nsbox: the thin C layer of the Python SDK over libnsbox.
 *
 * It only marshals: configurations are given as (policy, [(key, value,
 * origin)...]) and built with nsbox_config_* for every call, runs return the
 * library's JSON record, and errors become _nsbox.Error(step, errno,
 * message). Everything a person would call an API lives in the pure-Python
 * package. The GIL is released while a sandbox is set up and supervised; an
 * output callback takes it back for the time of one Python call. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nsbox.h"
#include "pool.h"

PyObject *Error;   /* _nsbox.Error(step, errno, message) */

/* Raise Error from a library error (and free it); returns NULL. */
PyObject *raise_error(nsbox_error *e, int r)
{
	const char *step = e ? nsbox_error_step(e) : "nsbox";
	const char *msg = e ? nsbox_error_message(e) : strerror(r < 0 ? -r : r);
	int errnum = e ? nsbox_error_errno(e) : (r < 0 ? -r : r);
	PyObject *args = Py_BuildValue("(sis)", step ? step : "", errnum, msg ? msg : "");
	if (args) {
		PyErr_SetObject(Error, args);
		Py_DECREF(args);
	}
	nsbox_error_free(e);
	return NULL;
}

/* ---- configuration ------------------------------------------------------ */

/* A configuration from a policy path (or None) and a sequence of
 * (key, value, origin) string triples, applied in order. */
nsbox_config *build_config(PyObject *policy, PyObject *settings)
{
	nsbox_config *cfg = NULL;
	nsbox_error *e = NULL;
	int r = nsbox_config_new(&cfg, &e);
	if (r == 0 && policy != Py_None) {
		const char *p = PyUnicode_AsUTF8(policy);
		if (!p)
			goto pyfail;
		r = nsbox_config_load_policy(cfg, p, &e);
	}
	PyObject *seq = PySequence_Fast(settings, "settings must be a sequence");
	if (!seq)
		goto pyfail;
	for (Py_ssize_t i = 0; r == 0 && i < PySequence_Fast_GET_SIZE(seq); i++) {
		const char *key, *value, *origin;
		if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "sss", &key, &value, &origin)) {
			Py_DECREF(seq);
			goto pyfail;
		}
		r = nsbox_config_set(cfg, key, value, origin, &e);
	}
	Py_DECREF(seq);
	if (r < 0) {
		nsbox_config_free(cfg);
		raise_error(e, r);
		return NULL;
	}
	return cfg;
pyfail:
	nsbox_config_free(cfg);
	nsbox_error_free(e);
	return NULL;
}

/* validate(policy, settings): raise Error for what the library refuses. */
static PyObject *py_validate(PyObject *self, PyObject *args)
{
	PyObject *policy, *settings;
	(void) self;
	if (!PyArg_ParseTuple(args, "OO", &policy, &settings))
		return NULL;
	nsbox_config *cfg = build_config(policy, settings);
	if (!cfg)
		return NULL;
	nsbox_config_free(cfg);
	Py_RETURN_NONE;
}

/* config_yaml(policy, settings) -> str: the effective configuration. */
static PyObject *py_config_yaml(PyObject *self, PyObject *args)
{
	PyObject *policy, *settings;
	(void) self;
	if (!PyArg_ParseTuple(args, "OO", &policy, &settings))
		return NULL;
	nsbox_config *cfg = build_config(policy, settings);
	if (!cfg)
		return NULL;
	char *yaml = NULL;
	nsbox_error *e = NULL;
	int r = nsbox_config_to_yaml(cfg, &yaml, &e);
	nsbox_config_free(cfg);
	if (r < 0)
		return raise_error(e, r);
	PyObject *s = PyUnicode_DecodeUTF8(yaml, (Py_ssize_t) strlen(yaml), "surrogateescape");
	free(yaml);
	return s;
}

/* ---- cancellation handle ------------------------------------------------ */

/* Shared between the thread that runs a sandbox and any thread that cancels
 * it: the sandbox pointer is published under the mutex, and
 * nsbox_sandbox_kill() is documented as callable during a wait. */
typedef struct {
	PyObject_HEAD
	pthread_mutex_t lock;
	nsbox_sandbox *sb;
	bool cancelled;
	bool used;
} Handle;

static PyObject *handle_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	(void) args;
	(void) kw;
	Handle *h = (Handle *) type->tp_alloc(type, 0);
	if (h)
		pthread_mutex_init(&h->lock, NULL);
	return (PyObject *) h;
}

static void handle_dealloc(Handle *h)
{
	pthread_mutex_destroy(&h->lock);
	Py_TYPE(h)->tp_free((PyObject *) h);
}

/* kill(): kill the sandbox (now, or as soon as it exists); idempotent. */
static PyObject *handle_kill(Handle *h, PyObject *unused)
{
	(void) unused;
	pthread_mutex_lock(&h->lock);
	h->cancelled = true;
	if (h->sb)
		(void) nsbox_sandbox_kill(h->sb, SIGKILL);
	pthread_mutex_unlock(&h->lock);
	Py_RETURN_NONE;
}

static PyObject *handle_cancelled(Handle *h, void *unused)
{
	(void) unused;
	pthread_mutex_lock(&h->lock);
	bool c = h->cancelled;
	pthread_mutex_unlock(&h->lock);
	return PyBool_FromLong(c);
}

static PyMethodDef handle_methods[] = {
	{ "kill", (PyCFunction) handle_kill, METH_NOARGS, "Kill the sandbox of this run (now or when it starts)." },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef handle_getset[] = {
	{ "cancelled", (getter) handle_cancelled, NULL, "kill() was called", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject HandleType = {
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

/* ---- running ------------------------------------------------------------ */

typedef struct {
	PyObject *callback;      /* callable(stream: int, data: bytes) or None */
	nsbox_sandbox *sb;
	bool failed;             /* the callback raised: it is not called again */
	PyObject *exc_type, *exc_value, *exc_tb;
} output_ctx;

/* Called by the supervisor (GIL released) with each chunk of output. */
static void on_output(void *userdata, int stream, const char *data, size_t len)
{
	output_ctx *c = userdata;
	if (c->failed)
		return;
	PyGILState_STATE g = PyGILState_Ensure();
	PyObject *res = PyObject_CallFunction(c->callback, "iy#", stream, data, (Py_ssize_t) len);
	if (res) {
		Py_DECREF(res);
	} else {
		/* The caller's code failed: stop the run, raise it afterwards. */
		c->failed = true;
		PyErr_Fetch(&c->exc_type, &c->exc_value, &c->exc_tb);
		(void) nsbox_sandbox_kill(c->sb, SIGKILL);
	}
	PyGILState_Release(g);
}

/* run(policy, settings, argv, files, stdin_fd, on_output, handle, lang)
 *   -> str (the JSON record)
 * files: [(path, bytes, mode)], placed in the sandbox's tmpfs during setup.
 * lang: None, or "python"/"node"/"bash" to classify a failed code run.
 * A failure before the sandbox exists raises Error; one during its setup is
 * a record with status "setup_failed". */
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

/* The governor's warnings as Python RuntimeWarnings (-1: one was turned
 * into an exception by the warnings filter). */
static int warn_governor(const nsbox_governor *g, size_t *shown)
{
	const char *w = nsbox_governor_warnings(g);
	size_t len = w ? strlen(w) : 0;
	if (len <= *shown)
		return 0;
	w += *shown + (*shown > 0);   /* past the newline between warnings */
	*shown = len;
	return PyErr_WarnEx(PyExc_RuntimeWarning, w, 1);
}

static PyObject *py_run(PyObject *self, PyObject *args)
{
	PyObject *policy, *settings, *argv, *files, *callback, *handle_obj, *lang;
	int stdin_fd;
	(void) self;
	if (!PyArg_ParseTuple(args, "OOOOiOOO", &policy, &settings, &argv, &files, &stdin_fd, &callback,
	                      &handle_obj, &lang))
		return NULL;
	if (handle_obj != Py_None && !PyObject_TypeCheck(handle_obj, &HandleType))
		return PyErr_Format(PyExc_TypeError, "handle must be a Handle or None");
	if (callback != Py_None && !PyCallable_Check(callback))
		return PyErr_Format(PyExc_TypeError, "on_output must be callable or None");
	const char *lang_s = NULL;
	if (lang != Py_None && !(lang_s = PyUnicode_AsUTF8(lang)))
		return NULL;
	Handle *h = handle_obj == Py_None ? NULL : (Handle *) handle_obj;
	if (h) {
		pthread_mutex_lock(&h->lock);
		bool used = h->used;
		h->used = true;
		pthread_mutex_unlock(&h->lock);
		if (used)
			return PyErr_Format(PyExc_ValueError, "a Handle serves one run only");
	}

	nsbox_config *cfg = build_config(policy, settings);
	if (!cfg)
		return NULL;
	PyObject *ret = NULL;
	nsbox_error *e = NULL;
	int r;
	/* The command: each argument as UTF-8 text (or bytes, taken as is). */
	PyObject *aseq = PySequence_Fast(argv, "argv must be a sequence");
	if (!aseq)
		goto out;
	Py_ssize_t argc = PySequence_Fast_GET_SIZE(aseq);
	const char **av = PyMem_Calloc((size_t) argc + 1, sizeof(char *));
	if (!av) {
		Py_DECREF(aseq);
		PyErr_NoMemory();
		goto out;
	}
	for (Py_ssize_t i = 0; i < argc; i++) {
		PyObject *it = PySequence_Fast_GET_ITEM(aseq, i);
		av[i] = PyBytes_Check(it) ? PyBytes_AsString(it) : PyUnicode_AsUTF8(it);
		if (!av[i])
			break;
	}
	r = PyErr_Occurred() ? -1 : nsbox_config_set_command(cfg, (int) argc, av, &e);
	PyMem_Free(av);
	Py_DECREF(aseq);
	if (PyErr_Occurred())
		goto out;
	if (r < 0) {
		raise_error(e, r);
		goto out;
	}
	PyObject *fseq = PySequence_Fast(files, "files must be a sequence");
	if (!fseq)
		goto out;
	for (Py_ssize_t i = 0; r == 0 && i < PySequence_Fast_GET_SIZE(fseq); i++) {
		const char *path;
		Py_buffer data;
		unsigned int mode;
		if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fseq, i), "sy*I", &path, &data, &mode)) {
			r = -1;
			break;
		}
		r = nsbox_config_add_file(cfg, path, data.buf, (size_t) data.len, mode, &e);
		PyBuffer_Release(&data);
	}
	Py_DECREF(fseq);
	if (PyErr_Occurred())
		goto out;
	if (r < 0) {
		raise_error(e, r);
		goto out;
	}

	/* audit.*, code.*: the audit log opened before the run (fail closed)
	 * and the import gate for Python code, as nsbox run-code does. The
	 * code is the first file of a run_code call. */
	const char *code = NULL;
	Py_ssize_t code_len = 0;
	PyObject *code_obj = NULL;
	if (lang_s && PySequence_Check(files) && PySequence_Size(files) > 0) {
		PyObject *first = PySequence_GetItem(files, 0);
		code_obj = first ? PySequence_GetItem(first, 1) : NULL;
		Py_XDECREF(first);
		if (!code_obj || PyBytes_AsStringAndSize(code_obj, (char **) &code, &code_len) < 0) {
			Py_XDECREF(code_obj);
			goto out;
		}
	}
	nsbox_governor *gov = NULL;
	nsbox_result *refused = NULL;
	size_t shown = 0;
	int gr;
	Py_BEGIN_ALLOW_THREADS
	gr = nsbox_governor_begin(cfg, lang_s, code, (size_t) code_len, &gov, &refused, &e);
	Py_END_ALLOW_THREADS
	Py_XDECREF(code_obj);
	if (warn_governor(gov, &shown) < 0) {
		nsbox_result_free(refused);
		nsbox_error_free(e);
		nsbox_governor_free(gov);
		goto out;
	}
	if (gr < 0 && refused) {
		/* Refused by the import gate: the record says why, as the CLI's. */
		nsbox_error_free(e);
		nsbox_governor_free(gov);
		ret = result_json(refused);
		goto out;
	}
	if (gr < 0) {
		nsbox_governor_free(gov);
		raise_error(e, gr);
		goto out;
	}

	output_ctx octx = { .callback = callback };
	nsbox_spawn_options o = {
		.version = NSBOX_SPAWN_OPTIONS_VERSION,
		.flags = NSBOX_SPAWN_CAPTURE,
		.config = cfg,
		.stdin_fd = stdin_fd,
		.stdout_fd = -1,
		.stderr_fd = -1,
		.signal_fd = -1,
		.stats_fd = -1,
		.on_output = callback == Py_None ? NULL : on_output,
		.output_userdata = &octx,
	};
	nsbox_sandbox *sb = NULL;
	nsbox_result *res = NULL;
	int waited = 0;
	bool cancelled = false;
	Py_BEGIN_ALLOW_THREADS
	if (h) {
		pthread_mutex_lock(&h->lock);
		cancelled = h->cancelled;
		pthread_mutex_unlock(&h->lock);
	}
	/* Cancelled before it started: no sandbox is made at all. */
	r = cancelled ? -ECANCELED : nsbox_spawn(&o, &sb, &e);
	if (r == 0) {
		octx.sb = sb;
		if (h) {
			pthread_mutex_lock(&h->lock);
			h->sb = sb;
			if (h->cancelled)   /* cancelled while it was being set up */
				(void) nsbox_sandbox_kill(sb, SIGKILL);
			pthread_mutex_unlock(&h->lock);
		}
		waited = nsbox_sandbox_wait(sb, &res, &e);
		if (h) {
			pthread_mutex_lock(&h->lock);
			h->sb = NULL;
			pthread_mutex_unlock(&h->lock);
		}
		nsbox_sandbox_free(sb);
	}
	Py_END_ALLOW_THREADS
	if (r < 0 && !cancelled) {
		/* A failed start is a run for the audit log and the artifacts. */
		nsbox_result *failed = NULL;
		if (nsbox_result_new_failed(cfg, e, &failed, NULL) == 0) {
			nsbox_error *ae = NULL;
			(void) nsbox_governor_end(gov, failed, &ae);
			nsbox_error_free(ae);
			nsbox_result_free(failed);
		}
	}
	if (r == 0 && waited == 0 && res) {
		nsbox_error *ae = NULL;
		int audited = nsbox_governor_end(gov, res, &ae);
		if (warn_governor(gov, &shown) < 0 || audited < 0) {
			nsbox_result_free(res);
			nsbox_error_free(e);
			nsbox_governor_free(gov);
			if (audited < 0 && !PyErr_Occurred())
				raise_error(ae, audited);
			else
				nsbox_error_free(ae);
			goto out;
		}
	}
	nsbox_governor_free(gov);
	if (octx.failed) {
		/* The callback's exception wins over anything else. */
		nsbox_result_free(res);
		nsbox_error_free(e);
		PyErr_Restore(octx.exc_type, octx.exc_value, octx.exc_tb);
		goto out;
	}
	if (cancelled) {
		PyObject *a = Py_BuildValue("(sis)", "cancel", ECANCELED, "run cancelled before it started");
		if (a) {
			PyErr_SetObject(Error, a);
			Py_DECREF(a);
		}
		goto out;
	}
	if (r < 0 || waited < 0) {
		raise_error(e, r < 0 ? r : waited);
		goto out;
	}
	if (lang_s && nsbox_result_classify_code(res, lang_s, &e) < 0) {
		nsbox_result_free(res);
		raise_error(e, -EINVAL);
		goto out;
	}
	ret = result_json(res);
out:
	nsbox_config_free(cfg);
	return ret;
}

/* ---- images, sessions, host check, values --------------------------------- */

static PyObject *str_or_none(const char *s)
{
	if (!s)
		Py_RETURN_NONE;
	return PyUnicode_DecodeFSDefault(s);
}

static PyObject *py_images(PyObject *self, PyObject *unused)
{
	(void) self;
	(void) unused;
	nsbox_image_info *v = NULL;
	size_t n = 0;
	nsbox_error *e = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_image_list(&v, &n, &e);
	Py_END_ALLOW_THREADS
	if (r < 0)
		return raise_error(e, r);
	PyObject *list = PyList_New(0);
	for (size_t i = 0; list && i < n; i++) {
		PyObject *d = Py_BuildValue("{s:N,s:N,s:K,s:N,s:N,s:N}", "name", str_or_none(v[i].name), "path",
		                            str_or_none(v[i].path), "size_bytes", (unsigned long long) v[i].size_bytes,
		                            "created", str_or_none(v[i].created), "source", str_or_none(v[i].source),
		                            "stripped", str_or_none(v[i].stripped));
		if (!d || PyList_Append(list, d) < 0)
			Py_CLEAR(list);
		Py_XDECREF(d);
	}
	nsbox_image_list_free(v, n);
	return list;
}

static PyObject *py_check(PyObject *self, PyObject *unused)
{
	(void) self;
	(void) unused;
	nsbox_check *c = NULL;
	nsbox_error *e = NULL;
	char *json = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_check_run(&c, &e);
	if (r == 0)
		r = nsbox_check_to_json(c, &json, &e);
	nsbox_check_free(c);
	Py_END_ALLOW_THREADS
	if (r < 0)
		return raise_error(e, r);
	PyObject *s = PyUnicode_FromString(json);
	free(json);
	return s;
}

static PyObject *py_session_list(PyObject *self, PyObject *unused)
{
	(void) self;
	(void) unused;
	char **names = NULL;
	size_t n = 0;
	nsbox_error *e = NULL;
	int r = nsbox_session_list(&names, &n, &e);
	if (r < 0)
		return raise_error(e, r);
	PyObject *list = PyList_New(0);
	for (size_t i = 0; i < n; i++) {
		PyObject *s = list ? PyUnicode_DecodeFSDefault(names[i]) : NULL;
		if (!s || PyList_Append(list, s) < 0)
			Py_CLEAR(list);
		Py_XDECREF(s);
		free(names[i]);
	}
	free(names);
	return list;
}

/* session_changes(name, policy, settings) -> [(path: bytes, kind, detail,
 * mode: int, target: bytes | None, denied: bool)]. Paths stay the raw bytes
 * the sandbox chose (they may not be UTF-8). */
static PyObject *py_session_changes(PyObject *self, PyObject *args)
{
	(void) self;
	const char *name;
	PyObject *policy, *settings;
	if (!PyArg_ParseTuple(args, "sOO", &name, &policy, &settings))
		return NULL;
	nsbox_config *cfg = build_config(policy, settings);
	if (!cfg)
		return NULL;
	nsbox_changes *c = NULL;
	nsbox_error *e = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_session_changes(name, cfg, &c, &e);
	Py_END_ALLOW_THREADS
	nsbox_config_free(cfg);
	if (r < 0)
		return raise_error(e, r);
	PyObject *list = PyList_New(0);
	for (size_t i = 0; list && i < nsbox_changes_count(c); i++) {
		const char *path = NULL, *kind = NULL, *detail = NULL, *target = NULL;
		bool denied = false;
		unsigned mode = 0;
		(void) nsbox_changes_get(c, i, &path, &kind, &detail, &denied);
		(void) nsbox_changes_get_mode(c, i, &mode, &target);
		PyObject *t = target ? PyBytes_FromString(target) : (Py_INCREF(Py_None), Py_None);
		PyObject *it = t ? Py_BuildValue("(yssINO)", path ? path : "", kind ? kind : "", detail ? detail : "",
		                                 mode, t, denied ? Py_True : Py_False) : NULL;
		if (!it || PyList_Append(list, it) < 0)
			Py_CLEAR(list);
		Py_XDECREF(it);
	}
	nsbox_changes_free(c);
	return list;
}

/* session_open_pair(name, path) -> (host_fd, session_fd), -1 for none. */
static PyObject *py_session_open_pair(PyObject *self, PyObject *args)
{
	(void) self;
	const char *name, *path;
	Py_ssize_t plen;
	if (!PyArg_ParseTuple(args, "sy#", &name, &path, &plen))
		return NULL;
	if (strlen(path) != (size_t) plen)
		return PyErr_Format(PyExc_ValueError, "path contains a NUL byte");
	int a = -1, b = -1;
	nsbox_error *e = NULL;
	int r = nsbox_session_open_pair(name, path, &a, &b, &e);
	if (r < 0)
		return raise_error(e, r);
	return Py_BuildValue("(ii)", a, b);
}

/* session_apply(name, policy, settings, paths or None, force) */
static PyObject *py_session_apply(PyObject *self, PyObject *args)
{
	(void) self;
	const char *name;
	PyObject *policy, *settings, *paths;
	int force;
	if (!PyArg_ParseTuple(args, "sOOOp", &name, &policy, &settings, &paths, &force))
		return NULL;
	nsbox_config *cfg = build_config(policy, settings);
	if (!cfg)
		return NULL;
	PyObject *pseq = NULL;
	const char **pv = NULL;
	Py_ssize_t n = 0;
	if (paths != Py_None) {
		pseq = PySequence_Fast(paths, "paths must be a sequence");
		if (!pseq)
			goto fail;
		n = PySequence_Fast_GET_SIZE(pseq);
		pv = PyMem_Calloc((size_t) n + 1, sizeof(char *));
		if (!pv) {
			PyErr_NoMemory();
			goto fail;
		}
		for (Py_ssize_t i = 0; i < n; i++) {
			PyObject *it = PySequence_Fast_GET_ITEM(pseq, i);
			pv[i] = PyBytes_Check(it) ? PyBytes_AsString(it) : PyUnicode_AsUTF8(it);
			if (!pv[i])
				goto fail;
		}
	}
	nsbox_error *e = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_session_apply(name, cfg, pv, (size_t) n, force, &e);
	Py_END_ALLOW_THREADS
	PyMem_Free(pv);
	Py_XDECREF(pseq);
	nsbox_config_free(cfg);
	if (r < 0)
		return raise_error(e, r);
	Py_RETURN_NONE;
fail:
	PyMem_Free(pv);
	Py_XDECREF(pseq);
	nsbox_config_free(cfg);
	return NULL;
}

static PyObject *py_session_discard(PyObject *self, PyObject *args)
{
	(void) self;
	const char *name;
	if (!PyArg_ParseTuple(args, "s", &name))
		return NULL;
	nsbox_error *e = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_session_discard(name, &e);
	Py_END_ALLOW_THREADS
	if (r < 0)
		return raise_error(e, r);
	Py_RETURN_NONE;
}

static PyObject *py_parse_duration_ms(PyObject *self, PyObject *args)
{
	(void) self;
	const char *s;
	uint64_t ms = 0;
	if (!PyArg_ParseTuple(args, "s", &s))
		return NULL;
	if (nsbox_parse_duration_ms(s, &ms) < 0)
		return PyErr_Format(PyExc_ValueError, "invalid duration '%s' (expected e.g. 30s, 2m, 500ms)", s);
	return PyLong_FromUnsignedLongLong(ms);
}

static PyObject *py_parse_size(PyObject *self, PyObject *args)
{
	(void) self;
	const char *s;
	uint64_t b = 0;
	if (!PyArg_ParseTuple(args, "s", &s))
		return NULL;
	if (nsbox_parse_size(s, &b) < 0)
		return PyErr_Format(PyExc_ValueError, "invalid size '%s' (expected e.g. 512m, 1g)", s);
	return PyLong_FromUnsignedLongLong(b);
}

static PyObject *py_version(PyObject *self, PyObject *unused)
{
	(void) self;
	(void) unused;
	return PyUnicode_FromString(nsbox_version());
}

static PyMethodDef methods[] = {
	{ "validate", py_validate, METH_VARARGS, "Build a configuration; raise Error if refused." },
	{ "config_yaml", py_config_yaml, METH_VARARGS, "The effective configuration as YAML." },
	{ "run", py_run, METH_VARARGS, "Run a sandbox; returns the JSON record." },
	{ "images", py_images, METH_NOARGS, "The images this user may run." },
	{ "check", py_check, METH_NOARGS, "The host check as JSON." },
	{ "session_list", py_session_list, METH_NOARGS, "Session names." },
	{ "session_changes", py_session_changes, METH_VARARGS, "A session's changes as JSON." },
	{ "session_open_pair", py_session_open_pair, METH_VARARGS, "Host and session fds of a path." },
	{ "session_apply", py_session_apply, METH_VARARGS, "Apply a session's changes." },
	{ "session_discard", py_session_discard, METH_VARARGS, "Discard a session." },
	{ "parse_duration_ms", py_parse_duration_ms, METH_VARARGS, "A duration in milliseconds." },
	{ "parse_size", py_parse_size, METH_VARARGS, "A size in bytes." },
	{ "version", py_version, METH_NOARGS, "libnsbox's version." },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef module = {
	PyModuleDef_HEAD_INIT, "nsbox._nsbox", "libnsbox bindings (internal; use the nsbox package)", -1,
	methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__nsbox(void)
{
	if (PyType_Ready(&HandleType) < 0)
		return NULL;
	PyObject *m = PyModule_Create(&module);
	if (!m)
		return NULL;
	Error = PyErr_NewException("nsbox._nsbox.Error", NULL, NULL);
	if (!Error || PyModule_AddObject(m, "Error", Error) < 0)
		goto fail;
	Py_INCREF(Error);
	Py_INCREF(&HandleType);
	if (PyModule_AddObject(m, "Handle", (PyObject *) &HandleType) < 0) {
		Py_DECREF(&HandleType);
		goto fail;
	}
	if (pool_type_add(m) < 0 || live_types_add(m) < 0)
		goto fail;
	return m;
fail:
	Py_DECREF(m);
	return NULL;
}
