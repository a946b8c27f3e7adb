/* _nsbox.Live and _nsbox.Context: long-lived sandboxes (NSBOX_SPAWN_KEEP)
 * and their code contexts for the Python SDK (nsbox/live.py).
 *
 * Live(policy, settings) sets the sandbox up (GIL released) and keeps it;
 * exec(...) runs a command or code in it through the SDK's one door
 * (governed(), run.c). Context(live, lang, name) starts an interpreter in
 * it; run(...) runs a cell the same way. Several threads may exec at once;
 * close() kills the sandbox, lets the running calls return, frees it. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pool.h"

typedef struct Context Context;
typedef struct Process Process;

typedef struct {
	PyObject_HEAD
	nsbox_sandbox *sb;
	pthread_mutex_t lock;
	pthread_cond_t idle;
	unsigned busy;          /* calls using sb */
	bool closing;
	Context *contexts;      /* open ones: stopped before the sandbox goes */
	Process *processes;     /* likewise */
	nsbox_forward **forwards;   /* published ports (expose), freed with the sandbox */
	size_t n_forwards;
} Live;

struct Process {
	PyObject_HEAD
	Live *live;             /* a reference: the sandbox outlives its processes */
	nsbox_process *proc;
	Process *next;          /* in live->processes, under live->lock */
};

struct Context {
	PyObject_HEAD
	Live *live;             /* a reference: the sandbox outlives its contexts */
	nsbox_context *ctx;
	pthread_mutex_t lock;
	unsigned busy;          /* cells and restarts in flight */
	pthread_cond_t idle;
	Context *next;          /* in live->contexts, under live->lock */
};

static void context_shut(Context *c);
static void process_shut(Process *p);

static PyTypeObject ContextType;

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

/* Live(policy, settings, name, idle_ms, lifetime_ms, publish, flags): a
 * started sandbox (nsbox_live_start: its own monitor, a name, in nsbox ps);
 * Live(None, None, attach=NAME): a handle on a running one. */
static PyObject *live_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "policy", "settings", "name", "idle_ms", "lifetime_ms", "publish", "flags", "attach",
		                  "from_snapshot", NULL };
	PyObject *policy = Py_None, *settings = Py_None, *publish = Py_None;
	const char *name = NULL, *attach = NULL, *from = NULL;
	unsigned long long idle_ms = 0, lifetime_ms = 0;
	unsigned int flags = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOzKKOIzz", kwlist, &policy, &settings, &name, &idle_ms,
	                                 &lifetime_ms, &publish, &flags, &attach, &from))
		return NULL;
	Live *l = (Live *) type->tp_alloc(type, 0);
	if (!l)
		return NULL;
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->idle, NULL);
	nsbox_error *e = NULL;
	int r;
	if (attach) {
		Py_BEGIN_ALLOW_THREADS
		r = nsbox_live_connect(attach, &l->sb, &e);
		Py_END_ALLOW_THREADS
		if (r < 0) {
			Py_DECREF(l);
			return raise_error(e, r);
		}
		return (PyObject *) l;
	}
	nsbox_config *cfg = build_config(policy, settings);
	if (!cfg) {
		Py_DECREF(l);
		return NULL;
	}
	/* "[ADDR:]HOSTPORT:PORT" strings, kept alive by the list. */
	Py_ssize_t np = publish == Py_None ? 0 : PySequence_Size(publish);
	const char **pub = np >= 0 ? calloc((size_t) np + 1, sizeof(char *)) : NULL;
	for (Py_ssize_t i = 0; pub && i < np; i++) {
		PyObject *it = PySequence_GetItem(publish, i);
		pub[i] = it ? PyUnicode_AsUTF8(it) : NULL;
		Py_XDECREF(it);   /* the sequence keeps it */
		if (!pub[i]) {
			free(pub);
			pub = NULL;
		}
	}
	if (!pub) {
		nsbox_config_free(cfg);
		Py_DECREF(l);
		return PyErr_Occurred() ? NULL : PyErr_NoMemory();
	}
	nsbox_live_options o = { .version = NSBOX_LIVE_OPTIONS_VERSION,
		                 .flags = flags,
		                 .config = cfg,
		                 .name = name,
		                 .idle_timeout_ms = idle_ms,
		                 .lifetime_ms = lifetime_ms,
		                 .publish = pub,
		                 .from = from };
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_live_start(&o, &l->sb, &e);
	Py_END_ALLOW_THREADS
	free(pub);
	nsbox_config_free(cfg);
	if (r < 0) {
		Py_DECREF(l);
		return raise_error(e, r);
	}
	return (PyObject *) l;
}

/* Let the sandbox go: with stop, it ends (the calls in flight end with
 * it); without, only this handle goes (an owner's still stops it: the
 * library's rule). Wait for the calls in flight, free the handle. */
static void live_shut(Live *l, bool stop)
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
	/* Its contexts first: each stops its interpreter, an exec of this
	 * sandbox that must end before the sandbox is freed. */
	while (l->contexts) {
		Context *c = l->contexts;
		l->contexts = c->next;
		pthread_mutex_unlock(&l->lock);
		context_shut(c);
		pthread_mutex_lock(&l->lock);
	}
	while (l->processes) {
		Process *p = l->processes;
		l->processes = p->next;
		pthread_mutex_unlock(&l->lock);
		process_shut(p);
		pthread_mutex_lock(&l->lock);
	}
	for (size_t i = 0; i < l->n_forwards; i++)
		nsbox_forward_free(l->forwards[i]);
	free(l->forwards);
	l->forwards = NULL;
	l->n_forwards = 0;
	if (stop)
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

/* close(stop): see live_shut. */
static PyObject *live_close(Live *l, PyObject *args)
{
	int stop = 1;
	if (!PyArg_ParseTuple(args, "|p", &stop))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	live_shut(l, stop);
	Py_END_ALLOW_THREADS
	Py_RETURN_NONE;
}

/* snapshot(name): keep the sandbox's files and configuration. */
static PyObject *live_snapshot(Live *l, PyObject *args)
{
	const char *snap;
	if (!PyArg_ParseTuple(args, "s", &snap) || !enter(l))
		return NULL;
	nsbox_error *e = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_live_snapshot(l->sb, snap, &e);
	Py_END_ALLOW_THREADS
	leave(l);
	if (r < 0)
		return raise_error(e, r);
	Py_RETURN_NONE;
}

/* detach(): the sandbox outlives this process (and this handle). */
static PyObject *live_detach(Live *l, PyObject *unused)
{
	(void) unused;
	if (!enter(l))
		return NULL;
	nsbox_error *e = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_live_detach(l->sb, &e);
	Py_END_ALLOW_THREADS
	leave(l);
	if (r < 0)
		return raise_error(e, r);
	Py_RETURN_NONE;
}

static PyObject *live_name(Live *l, void *unused)
{
	(void) unused;
	pthread_mutex_lock(&l->lock);
	const char *n = l->sb ? nsbox_live_name(l->sb) : NULL;
	PyObject *r = n ? PyUnicode_FromString(n) : (Py_INCREF(Py_None), Py_None);
	pthread_mutex_unlock(&l->lock);
	return r;
}

static void live_dealloc(Live *l)
{
	/* Execs hold a reference: none is running. An owner's handle stops
	 * its sandbox (the library's rule); an attached one lets go. */
	live_shut(l, false);
	pthread_cond_destroy(&l->idle);
	pthread_mutex_destroy(&l->lock);
	Py_TYPE(l)->tp_free((PyObject *) l);
}

/* exec(argv, code, lang, env, workdir, timeout_ms, stdin_fd, on_output,
 *      handle) -> JSON record: a command (argv) or code in `lang`. */
static PyObject *live_exec(Live *l, PyObject *args)
{
	PyObject *argv, *env, *workdir, *callback, *handle;
	Py_buffer code = { 0 };
	const char *lang = NULL;
	unsigned long long timeout_ms;
	int stdin_fd;
	if (!PyArg_ParseTuple(args, "Oz*zOOKiOO", &argv, &code, &lang, &env, &workdir, &timeout_ms, &stdin_fd,
	                      &callback, &handle))
		return NULL;
	PyObject *ret = NULL;
	const char **av = NULL, **ev = NULL;
	const char *wd = NULL;
	if ((argv != Py_None && strings(argv, &av) < 0) || (env != Py_None && strings(env, &ev) < 0) ||
	    (workdir != Py_None && !(wd = PyUnicode_AsUTF8(workdir))))
		goto out;
	if (!enter(l))
		goto out;
	nsbox_run_options o = {
		.version = NSBOX_RUN_OPTIONS_VERSION,
		.flags = NSBOX_SPAWN_CAPTURE,
		.sandbox = l->sb,
		.argv = av,
		.lang = lang,
		.code = code.buf,
		.code_len = (size_t) code.len,
		.envp = ev,
		.workdir = wd,
		.timeout_ms = timeout_ms,
		.stdin_fd = stdin_fd,
		.stdout_fd = -1,
		.stderr_fd = -1,
		.signal_fd = -1,
		.stats_fd = -1,
	};
	ret = governed(&o, handle, callback);
	leave(l);
out:
	PyMem_Free(av);
	PyMem_Free(ev);
	if (code.obj)
		PyBuffer_Release(&code);
	return ret;
}

/* ---- files --------------------------------------------------------------------- */

/* A memfd holding `data`, at its start. */
static int memfd_of(const char *data, size_t len)
{
	int fd = memfd_create("nsbox-file", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	while (len) {
		ssize_t w = write(fd, data, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			close(fd);
			return -1;
		}
		data += w;
		len -= (size_t) w;
	}
	return lseek(fd, 0, SEEK_SET) == 0 ? fd : (close(fd), -1);
}

/* file_read(path, max) -> bytes */
static PyObject *live_file_read(Live *l, PyObject *args)
{
	const char *path;
	unsigned long long max;
	if (!PyArg_ParseTuple(args, "sK", &path, &max))
		return NULL;
	int fd = memfd_create("nsbox-read", MFD_CLOEXEC);
	if (fd < 0)
		return PyErr_SetFromErrno(PyExc_OSError);
	if (!enter(l)) {
		close(fd);
		return NULL;
	}
	nsbox_error *e = NULL;
	uint64_t size = 0;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_file_read(l->sb, path, fd, max, &size, &e);
	Py_END_ALLOW_THREADS
	leave(l);
	if (r < 0) {
		close(fd);
		return raise_error(e, r);
	}
	PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t) size);
	char *p = b ? PyBytes_AS_STRING(b) : NULL;
	for (size_t got = 0; p && got < size;) {
		ssize_t n = pread(fd, p + got, size - got, (off_t) got);
		if (n <= 0) {
			Py_CLEAR(b);
			PyErr_SetFromErrno(PyExc_OSError);
			break;
		}
		got += (size_t) n;
	}
	close(fd);
	return b;
}

/* file_write(path, data, mode, max): data is bytes, or an fd to read to
 * its end (streamed, never held whole) */
static PyObject *live_file_write(Live *l, PyObject *args)
{
	const char *path;
	PyObject *src;
	unsigned int mode;
	unsigned long long max;
	if (!PyArg_ParseTuple(args, "sOIK", &path, &src, &mode, &max))
		return NULL;
	int fd = -1;
	bool own = false;
	if (PyLong_Check(src)) {
		fd = (int) PyLong_AsLong(src);
		if (fd < 0 && PyErr_Occurred())
			return NULL;
	} else {
		Py_buffer data;
		if (PyObject_GetBuffer(src, &data, PyBUF_SIMPLE) < 0)
			return NULL;
		fd = memfd_of(data.buf, (size_t) data.len);
		PyBuffer_Release(&data);
		if (fd < 0)
			return PyErr_SetFromErrno(PyExc_OSError);
		own = true;
	}
	if (!enter(l)) {
		if (own)
			close(fd);
		return NULL;
	}
	nsbox_error *e = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_file_write(l->sb, path, fd, mode, max, &e);
	Py_END_ALLOW_THREADS
	leave(l);
	if (own)
		close(fd);
	if (r < 0)
		return raise_error(e, r);
	Py_RETURN_NONE;
}

static PyObject *info_tuple(const nsbox_file_info *f)
{
	char type[2] = { f->type, 0 };
	return Py_BuildValue("(NNsIKL)", PyUnicode_DecodeFSDefault(f->name), PyUnicode_DecodeFSDefault(f->path), type,
	                     f->mode, (unsigned long long) f->size, (long long) f->mtime_ns);
}

/* file_list(path) -> [(name, path, type, mode, size, mtime_ns)] */
static PyObject *live_file_list(Live *l, PyObject *args)
{
	const char *path;
	if (!PyArg_ParseTuple(args, "s", &path) || !enter(l))
		return NULL;
	nsbox_file_info *v = NULL;
	size_t n = 0;
	nsbox_error *e = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_file_list(l->sb, path, &v, &n, &e);
	Py_END_ALLOW_THREADS
	leave(l);
	if (r < 0)
		return raise_error(e, r);
	PyObject *list = PyList_New(0);
	for (size_t i = 0; list && i < n; i++) {
		PyObject *t = info_tuple(&v[i]);
		if (!t || PyList_Append(list, t) < 0)
			Py_CLEAR(list);
		Py_XDECREF(t);
	}
	nsbox_file_info_free(v, n);
	return list;
}

/* file_stat(path) -> tuple, or None when nothing is there */
static PyObject *live_file_stat(Live *l, PyObject *args)
{
	const char *path;
	if (!PyArg_ParseTuple(args, "s", &path) || !enter(l))
		return NULL;
	nsbox_file_info f = { 0 };
	nsbox_error *e = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_file_stat(l->sb, path, &f, &e);
	Py_END_ALLOW_THREADS
	leave(l);
	if (r == -ENOENT) {
		nsbox_error_free(e);
		Py_RETURN_NONE;
	}
	if (r < 0)
		return raise_error(e, r);
	PyObject *t = info_tuple(&f);
	free(f.name);
	free(f.path);
	return t;
}

/* file_remove(path, recursive) / file_mkdir(path, mode) */
static PyObject *live_file_remove(Live *l, PyObject *args)
{
	const char *path;
	int recursive;
	if (!PyArg_ParseTuple(args, "sp", &path, &recursive) || !enter(l))
		return NULL;
	nsbox_error *e = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_file_remove(l->sb, path, recursive, &e);
	Py_END_ALLOW_THREADS
	leave(l);
	if (r < 0)
		return raise_error(e, r);
	Py_RETURN_NONE;
}

static PyObject *live_file_mkdir(Live *l, PyObject *args)
{
	const char *path;
	unsigned int mode;
	if (!PyArg_ParseTuple(args, "sI", &path, &mode) || !enter(l))
		return NULL;
	nsbox_error *e = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_file_mkdir(l->sb, path, mode, &e);
	Py_END_ALLOW_THREADS
	leave(l);
	if (r < 0)
		return raise_error(e, r);
	Py_RETURN_NONE;
}

/* ---- background processes ------------------------------------------------------------ */

static PyTypeObject ProcessType;

/* spawn(argv, env, workdir, timeout_ms, log_bytes) -> Process */
static PyObject *live_spawn(Live *l, PyObject *args)
{
	PyObject *argv, *env, *workdir;
	unsigned long long timeout_ms, log_bytes;
	if (!PyArg_ParseTuple(args, "OOOKK", &argv, &env, &workdir, &timeout_ms, &log_bytes))
		return NULL;
	const char **av = NULL, **ev = NULL;
	const char *wd = NULL;
	if (strings(argv, &av) < 0 || (env != Py_None && strings(env, &ev) < 0) ||
	    (workdir != Py_None && !(wd = PyUnicode_AsUTF8(workdir)))) {
		PyMem_Free(av);
		PyMem_Free(ev);
		return NULL;
	}
	Process *p = (Process *) ProcessType.tp_alloc(&ProcessType, 0);
	if (!p || !enter(l)) {
		Py_XDECREF(p);
		PyMem_Free(av);
		PyMem_Free(ev);
		return NULL;
	}
	nsbox_process_options o = { .version = NSBOX_PROCESS_OPTIONS_VERSION, .flags = ev ? NSBOX_EXEC_ENV_ADD : 0,
	                            .argv = av, .envp = ev, .workdir = wd, .timeout_ms = timeout_ms,
	                            .log_bytes = log_bytes };
	nsbox_error *e = NULL;
	int r = nsbox_process_start(l->sb, &o, &p->proc, &e);
	if (r == 0) {
		Py_INCREF(l);
		p->live = l;
		pthread_mutex_lock(&l->lock);
		p->next = l->processes;
		l->processes = p;
		pthread_mutex_unlock(&l->lock);
	}
	leave(l);
	PyMem_Free(av);
	PyMem_Free(ev);
	if (r < 0) {
		Py_DECREF(p);
		return raise_error(e, r);
	}
	return (PyObject *) p;
}

/* process(id) -> Process: a started sandbox's process by id (one another
 * client started too). */
static PyObject *live_process(Live *l, PyObject *args)
{
	const char *id;
	if (!PyArg_ParseTuple(args, "s", &id))
		return NULL;
	Process *p = (Process *) ProcessType.tp_alloc(&ProcessType, 0);
	if (!p || !enter(l)) {
		Py_XDECREF(p);
		return NULL;
	}
	nsbox_error *e = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_process_attach(l->sb, id, &p->proc, &e);
	Py_END_ALLOW_THREADS
	if (r == 0) {
		Py_INCREF(l);
		p->live = l;
		pthread_mutex_lock(&l->lock);
		p->next = l->processes;
		l->processes = p;
		pthread_mutex_unlock(&l->lock);
	}
	leave(l);
	if (r < 0) {
		Py_DECREF(p);
		return raise_error(e, r);
	}
	return (PyObject *) p;
}

/* process_list() -> JSON: a started sandbox's processes. */
static PyObject *live_process_list(Live *l, PyObject *unused)
{
	(void) unused;
	if (!enter(l))
		return NULL;
	char *json = NULL;
	nsbox_error *e = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_process_list(l->sb, &json, &e);
	Py_END_ALLOW_THREADS
	leave(l);
	if (r < 0)
		return raise_error(e, r);
	PyObject *o = PyUnicode_FromString(json);
	free(json);
	return o;
}

/* Kill it if it runs and release it, once; off the sandbox's list. */
static void process_shut(Process *p)
{
	Live *l = p->live;
	if (!l)
		return;
	pthread_mutex_lock(&l->lock);
	nsbox_process *proc = p->proc;
	p->proc = NULL;
	for (Process **q = &l->processes; *q; q = &(*q)->next)
		if (*q == p) {
			*q = p->next;
			break;
		}
	pthread_mutex_unlock(&l->lock);
	nsbox_process_free(proc);
}

static nsbox_process *proc_of(Process *p)
{
	if (!p->proc)
		PyErr_SetString(PyExc_ValueError, "the process was closed with its sandbox");
	return p->proc;
}

static PyObject *process_id(Process *p, void *unused)
{
	(void) unused;
	return p->proc ? PyUnicode_FromString(nsbox_process_id(p->proc)) : (Py_INCREF(Py_None), Py_None);
}

static PyObject *process_running(Process *p, void *unused)
{
	(void) unused;
	return PyBool_FromLong(p->proc && nsbox_process_running(p->proc));
}

/* logs(stream) -> (bytes, total) */
static PyObject *process_logs(Process *p, PyObject *args)
{
	int stream;
	if (!PyArg_ParseTuple(args, "i", &stream) || !proc_of(p))
		return NULL;
	char *text = NULL;
	size_t len = 0;
	uint64_t total = 0;
	nsbox_error *e = NULL;
	int r = nsbox_process_logs(p->proc, stream, &text, &len, &total, &e);
	if (r < 0)
		return raise_error(e, r);
	PyObject *ret = Py_BuildValue("(y#K)", text, (Py_ssize_t) len, (unsigned long long) total);
	free(text);
	return ret;
}

static PyObject *process_kill(Process *p, PyObject *args)
{
	int sig;
	if (!PyArg_ParseTuple(args, "i", &sig) || !proc_of(p))
		return NULL;
	return PyBool_FromLong(nsbox_process_kill(p->proc, sig) == 0);
}

/* wait(timeout_ms) -> JSON record, or None on the timeout */
static PyObject *process_wait(Process *p, PyObject *args)
{
	unsigned long long ms;
	if (!PyArg_ParseTuple(args, "K", &ms) || !proc_of(p))
		return NULL;
	nsbox_result *res = NULL;
	nsbox_error *e = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_process_wait(p->proc, ms, &res, &e);
	Py_END_ALLOW_THREADS
	if (r == -ETIMEDOUT) {
		nsbox_error_free(e);
		Py_RETURN_NONE;
	}
	if (r < 0)
		return raise_error(e, r);
	return result_json(res);
}

static void process_dealloc(Process *p)
{
	Live *l = p->live;
	Py_BEGIN_ALLOW_THREADS
	process_shut(p);
	Py_END_ALLOW_THREADS
	Py_XDECREF(l);
	Py_TYPE(p)->tp_free((PyObject *) p);
}

static PyMethodDef process_methods[] = {
	{ "logs", (PyCFunction) process_logs, METH_VARARGS, "The last output of a stream and its total." },
	{ "kill", (PyCFunction) process_kill, METH_VARARGS, "Signal it." },
	{ "wait", (PyCFunction) process_wait, METH_VARARGS, "Its record once it ends, or None." },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef process_getset[] = {
	{ "id", (getter) process_id, NULL, "the process's id", NULL },
	{ "running", (getter) process_running, NULL, "whether it runs", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject ProcessType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "nsbox._nsbox.Process",
	.tp_basicsize = sizeof(Process),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A background process of a long-lived sandbox.",
	.tp_dealloc = (destructor) process_dealloc,
	.tp_methods = process_methods,
	.tp_getset = process_getset,
};

/* expose(port, host, host_port) -> the host port */
static PyObject *live_expose(Live *l, PyObject *args)
{
	unsigned int port, host_port;
	const char *host;
	if (!PyArg_ParseTuple(args, "IzI", &port, &host, &host_port))
		return NULL;
	if (port == 0 || port > 65535 || host_port > 65535)
		return PyErr_Format(PyExc_ValueError, "ports are 1..65535 (host port 0: any free one)");
	if (!enter(l))
		return NULL;
	nsbox_forward *f = NULL;
	nsbox_error *e = NULL;
	uint16_t bound = 0;
	int r = nsbox_forward_start(l->sb, host, (uint16_t) host_port, (uint16_t) port, &f, &bound, &e);
	if (r == 0) {
		pthread_mutex_lock(&l->lock);
		nsbox_forward **v = realloc(l->forwards, (l->n_forwards + 1) * sizeof(*v));
		if (v) {
			l->forwards = v;
			v[l->n_forwards++] = f;
		}
		pthread_mutex_unlock(&l->lock);
		if (!v) {
			nsbox_forward_free(f);
			leave(l);
			return PyErr_NoMemory();
		}
	}
	leave(l);
	if (r < 0)
		return raise_error(e, r);
	return PyLong_FromUnsignedLong(bound);
}

/* pause(on) */
static PyObject *live_pause(Live *l, PyObject *args)
{
	int on;
	if (!PyArg_ParseTuple(args, "p", &on) || !enter(l))
		return NULL;
	nsbox_error *e = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = on ? nsbox_sandbox_pause(l->sb, &e) : nsbox_sandbox_resume(l->sb, &e);
	Py_END_ALLOW_THREADS
	leave(l);
	if (r < 0)
		return raise_error(e, r);
	Py_RETURN_NONE;
}

static PyObject *live_paused(Live *l, void *unused)
{
	(void) unused;
	pthread_mutex_lock(&l->lock);
	bool p = l->sb && nsbox_sandbox_paused(l->sb);
	pthread_mutex_unlock(&l->lock);
	return PyBool_FromLong(p);
}

static PyObject *live_id(Live *l, void *unused)
{
	(void) unused;
	pthread_mutex_lock(&l->lock);
	const char *id = l->sb ? nsbox_sandbox_id(l->sb) : NULL;
	PyObject *r = id ? PyUnicode_FromString(id) : (Py_INCREF(Py_None), Py_None);
	pthread_mutex_unlock(&l->lock);
	return r;
}

static PyMethodDef live_methods[] = {
	{ "exec", (PyCFunction) live_exec, METH_VARARGS, "Run a command or code in the sandbox; the JSON record." },
	{ "spawn", (PyCFunction) live_spawn, METH_VARARGS, "Start a background process." },
	{ "process", (PyCFunction) live_process, METH_VARARGS, "A process of the sandbox's by id." },
	{ "process_list", (PyCFunction) live_process_list, METH_NOARGS, "The sandbox's processes as JSON." },
	{ "expose", (PyCFunction) live_expose, METH_VARARGS, "Publish a port; the host port." },
	{ "pause", (PyCFunction) live_pause, METH_VARARGS, "Freeze (True) or thaw (False) the sandbox." },
	{ "file_read", (PyCFunction) live_file_read, METH_VARARGS, "A file's bytes." },
	{ "file_write", (PyCFunction) live_file_write, METH_VARARGS, "Write a file." },
	{ "file_list", (PyCFunction) live_file_list, METH_VARARGS, "A directory's entries." },
	{ "file_stat", (PyCFunction) live_file_stat, METH_VARARGS, "What is at a path, or None." },
	{ "file_remove", (PyCFunction) live_file_remove, METH_VARARGS, "Remove a path." },
	{ "file_mkdir", (PyCFunction) live_file_mkdir, METH_VARARGS, "Make a directory." },
	{ "close", (PyCFunction) live_close, METH_VARARGS, "Let the sandbox go; close(True) ends it." },
	{ "detach", (PyCFunction) live_detach, METH_NOARGS, "Let the sandbox outlive this process." },
	{ "snapshot", (PyCFunction) live_snapshot, METH_VARARGS, "Keep its files and configuration." },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef live_getset[] = {
	{ "id", (getter) live_id, NULL, "the sandbox's id", NULL },
	{ "paused", (getter) live_paused, NULL, "whether it is paused", NULL },
	{ "name", (getter) live_name, NULL, "the sandbox's name", NULL },
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

/* ---- contexts ------------------------------------------------------------------ */

static PyObject *context_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	PyObject *live;
	const char *lang, *name = NULL;
	(void) kw;
	if (!PyArg_ParseTuple(args, "O!s|z", &LiveType, &live, &lang, &name))
		return NULL;
	Live *l = (Live *) live;
	if (!enter(l))
		return NULL;
	Context *c = (Context *) type->tp_alloc(type, 0);
	if (!c) {
		leave(l);
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->idle, NULL);
	Py_INCREF(live);
	c->live = l;
	nsbox_error *e = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_context_new(l->sb, lang, name, &c->ctx, &e);
	Py_END_ALLOW_THREADS
	if (r == 0) {
		pthread_mutex_lock(&l->lock);
		c->next = l->contexts;
		l->contexts = c;
		pthread_mutex_unlock(&l->lock);
	}
	leave(l);
	if (r < 0) {
		Py_DECREF(c);
		return raise_error(e, r);
	}
	return (PyObject *) c;
}

/* A context call holds both the context and its sandbox. */
static bool context_enter(Context *c)
{
	pthread_mutex_lock(&c->lock);
	bool ok = c->ctx != NULL;
	if (ok)
		c->busy++;
	pthread_mutex_unlock(&c->lock);
	if (!ok) {
		PyErr_SetString(PyExc_ValueError, "the context is closed");
		return false;
	}
	if (!enter(c->live)) {
		pthread_mutex_lock(&c->lock);
		if (--c->busy == 0)
			pthread_cond_broadcast(&c->idle);
		pthread_mutex_unlock(&c->lock);
		return false;
	}
	return true;
}

static void context_leave(Context *c)
{
	leave(c->live);
	pthread_mutex_lock(&c->lock);
	if (--c->busy == 0)
		pthread_cond_broadcast(&c->idle);
	pthread_mutex_unlock(&c->lock);
}

/* run(code, timeout_ms, on_output, handle) -> JSON record of the cell */
static PyObject *context_run(Context *c, PyObject *args)
{
	Py_buffer code;
	unsigned long long timeout_ms;
	PyObject *callback, *handle;
	if (!PyArg_ParseTuple(args, "s*KOO", &code, &timeout_ms, &callback, &handle))
		return NULL;
	PyObject *ret = NULL;
	if (context_enter(c)) {
		nsbox_run_options o = {
			.version = NSBOX_RUN_OPTIONS_VERSION,
			.flags = NSBOX_SPAWN_CAPTURE,
			.context = c->ctx,
			.code = code.buf,
			.code_len = (size_t) code.len,
			.timeout_ms = timeout_ms,
			.stdin_fd = -1,
			.stdout_fd = -1,
			.stderr_fd = -1,
			.signal_fd = -1,
			.stats_fd = -1,
		};
		ret = governed(&o, handle, callback);
		context_leave(c);
	}
	PyBuffer_Release(&code);
	return ret;
}

static PyObject *context_restart(Context *c, PyObject *unused)
{
	(void) unused;
	if (!context_enter(c))
		return NULL;
	nsbox_error *e = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = nsbox_context_restart(c->ctx, &e);
	Py_END_ALLOW_THREADS
	context_leave(c);
	if (r < 0)
		return raise_error(e, r);
	Py_RETURN_NONE;
}

static PyObject *context_interrupt(Context *c, PyObject *unused)
{
	(void) unused;
	pthread_mutex_lock(&c->lock);
	if (c->ctx)
		nsbox_context_interrupt(c->ctx);
	pthread_mutex_unlock(&c->lock);
	Py_RETURN_NONE;
}

/* Stop the interpreter once no call uses it; idempotent. */
static void context_shut(Context *c)
{
	Live *l = c->live;
	pthread_mutex_lock(&l->lock);
	for (Context **p = &l->contexts; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	pthread_mutex_unlock(&l->lock);
	pthread_mutex_lock(&c->lock);
	nsbox_context *ctx = c->ctx;
	c->ctx = NULL;
	if (ctx)
		nsbox_context_interrupt(ctx);
	while (c->busy)
		pthread_cond_wait(&c->idle, &c->lock);
	pthread_mutex_unlock(&c->lock);
	nsbox_context_free(ctx);
}

static PyObject *context_close(Context *c, PyObject *unused)
{
	(void) unused;
	Py_BEGIN_ALLOW_THREADS
	context_shut(c);
	Py_END_ALLOW_THREADS
	Py_RETURN_NONE;
}

static void context_dealloc(Context *c)
{
	if (c->live) {
		context_shut(c);
		Py_DECREF(c->live);
	}
	pthread_cond_destroy(&c->idle);
	pthread_mutex_destroy(&c->lock);
	Py_TYPE(c)->tp_free((PyObject *) c);
}

static PyMethodDef context_methods[] = {
	{ "run", (PyCFunction) context_run, METH_VARARGS, "Run a cell; the JSON record." },
	{ "restart", (PyCFunction) context_restart, METH_NOARGS, "A fresh interpreter." },
	{ "interrupt", (PyCFunction) context_interrupt, METH_NOARGS, "Interrupt the running cell." },
	{ "close", (PyCFunction) context_close, METH_NOARGS, "Stop the interpreter." },
	{ NULL, NULL, 0, NULL },
};

static PyTypeObject ContextType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "nsbox._nsbox.Context",
	.tp_basicsize = sizeof(Context),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A code context in a long-lived sandbox.",
	.tp_new = context_new,
	.tp_dealloc = (destructor) context_dealloc,
	.tp_methods = context_methods,
};

int live_types_add(PyObject *m)
{
	if (PyType_Ready(&LiveType) < 0 || PyType_Ready(&ContextType) < 0 || PyType_Ready(&ProcessType) < 0)
		return -1;
	Py_INCREF(&LiveType);
	if (PyModule_AddObject(m, "Live", (PyObject *) &LiveType) < 0) {
		Py_DECREF(&LiveType);
		return -1;
	}
	Py_INCREF(&ContextType);
	if (PyModule_AddObject(m, "Context", (PyObject *) &ContextType) < 0) {
		Py_DECREF(&ContextType);
		return -1;
	}
	return 0;
}
