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
#include <sys/mman.h>
#include <unistd.h>

#include "nsbox.h"
#include "pool.h"

PyObject *Error;   /* _nsbox.Error(step, errno, message) */

/* Raise Error(step, errno, message, hint) from a library error (and free
 * it); returns NULL. */
PyObject *raise_error(nsbox_error *e, int r)
{
	const char *step = e ? nsbox_error_step(e) : "nsbox";
	const char *msg = e ? nsbox_error_message(e) : strerror(r < 0 ? -r : r);
	const char *hint = e ? nsbox_error_hint(e) : NULL;
	int errnum = e ? nsbox_error_errno(e) : (r < 0 ? -r : r);
	PyObject *args = Py_BuildValue("(sisz)", step ? step : "", errnum, msg ? msg : "", hint);
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

/* env_settings() -> [(variable, policy key)]: the NSBOX_* table;
 * env_policy(environ: dict) -> str | None: NSBOX_POLICY's value. */
static PyObject *py_env_settings(PyObject *self, PyObject *unused)
{
	(void) self;
	(void) unused;
	PyObject *list = PyList_New(0);
	const char *var, *key;
	for (size_t i = 0; list && nsbox_env_setting(i, &var, &key) == 0; i++) {
		PyObject *t = Py_BuildValue("(ss)", var, key);
		if (!t || PyList_Append(list, t) < 0)
			Py_CLEAR(list);
		Py_XDECREF(t);
	}
	return list;
}

/* languages() -> [str]: the languages of code runs. */
static PyObject *py_languages(PyObject *self, PyObject *unused)
{
	(void) self;
	(void) unused;
	PyObject *list = PyList_New(0);
	for (const char *const *n = nsbox_code_languages(); list && *n; n++) {
		PyObject *s = PyUnicode_FromString(*n);
		if (!s || PyList_Append(list, s) < 0)
			Py_CLEAR(list);
		Py_XDECREF(s);
	}
	return list;
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

/* live_list() -> JSON text: the caller's started sandboxes. */
static PyObject *py_live_list(PyObject *self, PyObject *unused)
{
	(void) self;
	(void) unused;
	char *json = NULL;
	nsbox_error *e = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_live_list(&json, &e);
	Py_END_ALLOW_THREADS
	if (r < 0)
		return raise_error(e, r);
	PyObject *o = PyUnicode_FromString(json);
	free(json);
	return o;
}

/* snapshot_policy(name) -> its configuration file's path. */
static PyObject *py_snapshot_policy(PyObject *self, PyObject *args)
{
	(void) self;
	const char *name;
	if (!PyArg_ParseTuple(args, "s", &name))
		return NULL;
	char path[4096];
	nsbox_error *e = NULL;
	int r = nsbox_snapshot_policy(name, path, sizeof(path), &e);
	if (r < 0)
		return raise_error(e, r);
	return PyUnicode_DecodeFSDefault(path);
}

/* snapshot_list() -> JSON; snapshot_remove(name). */
static PyObject *py_snapshot_list(PyObject *self, PyObject *unused)
{
	(void) self;
	(void) unused;
	char *json = NULL;
	nsbox_error *e = NULL;
	int r = nsbox_snapshot_list(&json, &e);
	if (r < 0)
		return raise_error(e, r);
	PyObject *o = PyUnicode_FromString(json);
	free(json);
	return o;
}

static PyObject *py_snapshot_remove(PyObject *self, PyObject *args)
{
	(void) self;
	const char *name;
	if (!PyArg_ParseTuple(args, "s", &name))
		return NULL;
	nsbox_error *e = NULL;
	int r = nsbox_snapshot_remove(name, &e);
	if (r < 0)
		return raise_error(e, r);
	Py_RETURN_NONE;
}

/* live_stop(name): end a started sandbox and wait until it is gone. */
static PyObject *py_live_stop(PyObject *self, PyObject *args)
{
	(void) self;
	const char *name;
	if (!PyArg_ParseTuple(args, "s", &name))
		return NULL;
	nsbox_error *e = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_live_stop(name, &e);
	Py_END_ALLOW_THREADS
	if (r < 0)
		return raise_error(e, r);
	Py_RETURN_NONE;
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

/* session_list(all=False) -> [name] */
static PyObject *py_session_list(PyObject *self, PyObject *args)
{
	(void) self;
	int all = 0;
	if (!PyArg_ParseTuple(args, "|p", &all))
		return NULL;
	char **names = NULL;
	size_t n = 0;
	nsbox_error *e = NULL;
	int r = nsbox_session_list_with(all ? NSBOX_SESSION_LIST_ALL : 0, &names, &n, &e);
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
 * mode: int, target: bytes | None, denied: bool, rule: str, mtime_ns: int)].
 * Paths stay the raw bytes the sandbox chose (they may not be UTF-8). */
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
		int64_t sec = 0;
		long nsec = 0;
		(void) nsbox_changes_get_times(c, i, &sec, &nsec, NULL, NULL);
		const char *rule = nsbox_changes_rule(c, i);
		PyObject *t = target ? PyBytes_FromString(target) : (Py_INCREF(Py_None), Py_None);
		PyObject *it = t ? Py_BuildValue("(yssINOsL)", path ? path : "", kind ? kind : "", detail ? detail : "",
		                                 mode, t, denied ? Py_True : Py_False, rule ? rule : "apply",
		                                 (long long) sec * 1000000000LL + nsec) : NULL;
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

/* session_apply(name, policy, settings, paths or None, flags) -> (removed,
 * [(path: bytes, why: str)] left out); flags are NSBOX_APPLY_*. */
static PyObject *py_session_apply(PyObject *self, PyObject *args)
{
	(void) self;
	const char *name;
	PyObject *policy, *settings, *paths;
	unsigned flags;
	if (!PyArg_ParseTuple(args, "sOOOI", &name, &policy, &settings, &paths, &flags))
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
	nsbox_changes *left = NULL;
	nsbox_apply_options o = { .version = NSBOX_APPLY_OPTIONS_VERSION, .flags = flags, .config = cfg,
	                          .paths = pv, .n_paths = (size_t) n };
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_session_apply_with(name, &o, &left, &e);
	Py_END_ALLOW_THREADS
	PyMem_Free(pv);
	Py_XDECREF(pseq);
	nsbox_config_free(cfg);
	if (r < 0)
		return raise_error(e, r);
	PyObject *list = PyList_New(0);
	for (size_t i = 0; list && i < nsbox_changes_count(left); i++) {
		const char *path = NULL, *why = nsbox_changes_why(left, i);
		(void) nsbox_changes_get(left, i, &path, NULL, NULL, NULL);
		PyObject *it = Py_BuildValue("(ys)", path ? path : "", why ? why : "");
		if (!it || PyList_Append(list, it) < 0)
			Py_CLEAR(list);
		Py_XDECREF(it);
	}
	nsbox_changes_free(left);
	return list ? Py_BuildValue("(ON)", r == 1 ? Py_True : Py_False, list) : NULL;
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

/* session_diff(name, escape) -> bytes: the library's patch, written to a
 * memfd and read back (a large session's diff is never held twice). */
static PyObject *py_session_diff(PyObject *self, PyObject *args)
{
	(void) self;
	const char *name;
	int escape;
	if (!PyArg_ParseTuple(args, "sp", &name, &escape))
		return NULL;
	int fd = memfd_create("nsbox-diff", MFD_CLOEXEC);
	if (fd < 0)
		return PyErr_SetFromErrno(PyExc_OSError);
	nsbox_error *e = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_session_diff(name, escape ? NSBOX_DIFF_ESCAPE : 0, fd, &e);
	Py_END_ALLOW_THREADS
	off_t len = r < 0 ? 0 : lseek(fd, 0, SEEK_END);
	if (r < 0 || len < 0) {
		close(fd);
		return r < 0 ? raise_error(e, r) : PyErr_SetFromErrno(PyExc_OSError);
	}
	PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t) len);
	for (off_t off = 0; out && off < len;) {
		ssize_t k = pread(fd, PyBytes_AS_STRING(out) + off, (size_t) (len - off), off);
		if (k <= 0) {
			Py_CLEAR(out);
			PyErr_SetFromErrno(PyExc_OSError);
			break;
		}
		off += k;
	}
	close(fd);
	return out;
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
	{ "env_settings", py_env_settings, METH_NOARGS, "The NSBOX_* variables and their keys." },
	{ "languages", py_languages, METH_NOARGS, "The languages of code runs." },
	{ "images", py_images, METH_NOARGS, "The images this user may run." },
	{ "live_list", py_live_list, METH_NOARGS, "The started sandboxes as JSON." },
	{ "live_stop", py_live_stop, METH_VARARGS, "Stop a started sandbox." },
	{ "snapshot_policy", py_snapshot_policy, METH_VARARGS, "A snapshot's configuration file." },
	{ "snapshot_list", py_snapshot_list, METH_NOARGS, "The snapshots as JSON." },
	{ "snapshot_remove", py_snapshot_remove, METH_VARARGS, "Remove a snapshot." },
	{ "check", py_check, METH_NOARGS, "The host check as JSON." },
	{ "session_list", py_session_list, METH_VARARGS, "Session names (the caller's, or all)." },
	{ "session_diff", py_session_diff, METH_VARARGS, "A session's changes as one patch (bytes)." },
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
