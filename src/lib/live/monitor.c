/* The monitor of a started sandbox: the program nsbox-monitor, which
 * nsbox_live_start() execs (live.c). It owns the sandbox (it dies, the
 * sandbox dies) and listens on NAME.sock, serving only its own user in its
 * own user namespace (ctl_peer_ok). Each connection is served by a thread:
 * one request (ctl.h), done with the library on the sandbox it holds, as
 * the same calls in one process would do it: nsbox_run for commands and
 * cells (governed by the sandbox's configuration), nsbox_file_*,
 * nsbox_process_*, nsbox_forward_*, contexts, pause. It keeps the
 * registries a sandbox outlives its clients with: contexts, background
 * processes, published ports. It stops on STOP, on SIGTERM, when its owner
 * (the process that started it, unless detached) exits, when idle or out of
 * lifetime, or when the sandbox ends. NAME.lock stays flock'ed for its
 * whole life (by its cleaner, which removes the files after it). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "base/fdpass.h"
#include "live/ctl.h"
#include "live/live.h"
#include "live/remote.h"

#define MAX_CONTEXTS 64
#define MAX_PROCESSES 64
#define MAX_FORWARDS 64
/* A client has this long to send its whole request: its thread counts as
 * active, and one that never sent it would keep the sandbox from idling
 * out and nsbox stop from returning. */
#define REQUEST_MS 10000

typedef struct ctx_ent {
	char name[64];
	pthread_mutex_t start;  /* one starter per context */
	nsbox_context *ctx;     /* NULL until its interpreter started */
	struct ctx_ent *next;
} ctx_ent;

typedef struct proc_ent {
	nsbox_process *p;
	struct proc_ent *next;
} proc_ent;

typedef struct fwd_ent {
	nsbox_forward *f;
	char addr[64];
	struct fwd_ent *next;
} fwd_ent;

typedef struct monitor {
	char name[64];
	char *image;
	int dirfd, lock_fd, listen_fd, sig_fd, timer_fd, ready_fd, owner_fd;
	int wake[2];            /* handlers -> main loop: 'w' (one ended), 's' (stop), 'i' (info changed) */
	uint64_t idle_ms, lifetime_ms;
	bool pause_when_idle, idle_paused;
	struct timespec started, last;
	time_t started_wall;
	nsbox_config *cfg;
	nsbox_sandbox *sb;
	pthread_mutex_t lock;   /* everything below, and the two above */
	pthread_cond_t quiet;
	unsigned active;        /* connections being served */
	ctx_ent *contexts;
	unsigned n_contexts;
	proc_ent *procs;
	unsigned n_procs;
	fwd_ent *forwards;
	unsigned n_forwards;
} monitor;

static double since_ms(const struct timespec *t)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double) (now.tv_sec - t->tv_sec) * 1e3 + (double) (now.tv_nsec - t->tv_nsec) / 1e6;
}

/* ---- answering ------------------------------------------------------------------- */

static int reply_error(int cfd, const nsbox_error *e, int fallback)
{
	char *j = ctl_error_json(e);
	int st = e && nsbox_error_errno(e) > 0 ? -nsbox_error_errno(e) : -fallback;
	int r = ctl_send_reply(cfd, st, j ? j : "{\"error\":{\"message\":\"out of memory\",\"errno\":12}}");
	free(j);
	return r;
}

/* A refusal of our own: the message, errno, and the step. */
static int refuse(int cfd, int errnum, const char *step, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int refuse(int cfd, int errnum, const char *step, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	nsbox_error *e = NULL;
	(void) nsbox_err_invalid(&e, step, "%s", msg);
	if (e)
		e->errnum = errnum;
	int r = reply_error(cfd, e, errnum);
	nsbox_error_free(e);
	return r;
}

static int reply_json(int cfd, json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	int r = s ? ctl_send_reply(cfd, 0, s) : refuse(cfd, ENOMEM, "live", "out of memory");
	free(s);
	return r;
}

/* ---- a run, with the client watched ------------------------------------------------ */

typedef struct watch_args {
	int fd;
	nsbox_cancel *cancel;
} watch_args;

/* The client's signals (one byte each) go to the run: a command gets the
 * signal, a cell is interrupted; its end closing cancels the run (a command
 * is killed, a cell interrupted). A signal that comes while the command is
 * still being started (nothing to signal yet: -ESRCH) is kept and passed
 * on once it runs: a stop right after a start must not be lost. */
static void *watch_client(void *arg)
{
	watch_args *w = arg;
	unsigned char pending = 0;
	for (;;) {
		if (pending && nsbox_cancel_signal(w->cancel, pending) != -ESRCH)
			pending = 0;
		struct pollfd p = { .fd = w->fd, .events = POLLIN };
		int ready = poll(&p, 1, pending ? 5 : -1);
		if (ready < 0 && errno != EINTR)
			break;
		if (ready <= 0)
			continue;
		unsigned char sig;
		ssize_t n = read(w->fd, &sig, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 1) {
			/* SIGWINCH (exec -t): the terminal takes the client's size. */
			if ((sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT || sig == SIGWINCH) &&
			    nsbox_cancel_signal(w->cancel, sig) == -ESRCH && sig != SIGWINCH)
				pending = sig;
			continue;
		}
		break;
	}
	nsbox_cancel_fire(w->cancel);
	return NULL;
}

typedef struct stream_ctx {
	int fd;
	bool broken;
} stream_ctx;

static void send_output(void *userdata, int stream, const char *data, size_t len)
{
	stream_ctx *s = userdata;
	while (!s->broken && len) {
		size_t n = len > CTL_FRAME_MAX ? CTL_FRAME_MAX : len;
		if (ctl_send_frame(s->fd, stream == 2 ? CTL_ERR : CTL_OUT, data, n) < 0)
			s->broken = true;
		data += n;
		len -= n;
	}
}

static void send_warning(void *userdata, const char *message)
{
	stream_ctx *s = userdata;
	if (!s->broken && ctl_send_frame(s->fd, CTL_WARN, message, strlen(message) + 1) < 0)
		s->broken = true;
}

/* Run through the library, with the client watched meanwhile; answer with
 * the exit status and the record. */
static int governed(int cfd, nsbox_run_options *o, bool stream)
{
	nsbox_cancel *cancel = NULL;
	nsbox_error *e = NULL;
	if (nsbox_cancel_new(&cancel, &e) < 0) {
		int r = reply_error(cfd, e, ENOMEM);
		nsbox_error_free(e);
		return r;
	}
	stream_ctx sc = { .fd = cfd };
	o->cancel = cancel;
	o->on_warning = send_warning;
	o->warning_userdata = &sc;
	if (stream) {
		o->on_output = send_output;
		o->output_userdata = &sc;
	}
	watch_args w = { cfd, cancel };
	pthread_t t;
	bool watching = pthread_create(&t, NULL, watch_client, &w) == 0;
	nsbox_result *res = NULL;
	int ran = nsbox_run(o, &res, &e);
	int r;
	if (!res) {
		r = reply_error(cfd, e, -ran);
	} else {
		char *j = NULL;
		(void) nsbox_result_to_json(res, &j, NULL);
		r = j ? ctl_send_reply(cfd, nsbox_result_exit_status(res), j) : refuse(cfd, ENOMEM, "run", "out of memory");
		free(j);
	}
	/* The watcher ends with the client's close; the run is over. */
	if (watching) {
		(void) shutdown(cfd, SHUT_RDWR);
		pthread_join(t, NULL);
	}
	nsbox_result_free(res);
	nsbox_error_free(e);
	nsbox_cancel_free(cancel);
	return r;
}

/* The request's strings: exactly h->argc of them in the body. */
static char **split(char *body, const ctl_req *h)
{
	if (h->argc > CTL_STRINGS_MAX)
		return NULL;
	char **v = calloc((size_t) h->argc + 2, sizeof(char *));
	char *pos = body, *end = body + h->len;
	for (uint32_t i = 0; v && i < h->argc; i++) {
		char *nul = memchr(pos, '\0', (size_t) (end - pos));
		if (!nul) {
			free(v);
			return NULL;
		}
		v[i] = pos;
		pos = nul + 1;
	}
	if (v && pos != end) {
		free(v);
		return NULL;
	}
	return v;
}

/* How many fds a request of these flags carries. */
static int fds_wanted(const ctl_req *h)
{
	if (h->op == CTL_EXEC)
		return !!(h->flags & CTL_STDIN) + 2 * !!(h->flags & CTL_STDOUT);
	if (h->op == CTL_CELL)
		return 2 * !!(h->flags & CTL_STDOUT);
	if (h->op == CTL_FILE)
		return -1;   /* 0 or 1, by the operation */
	return 0;
}

/* argv (and envp) of an exec or a spawn: [WORKDIR] ARGV... ENV... in v. */
typedef struct command {
	const char *workdir;
	char **argv, **envp;
	char *store;            /* argv, its NULL, envp, its NULL */
} command;

static int command_of(const ctl_req *h, char **v, command *c)
{
	uint32_t nwd = !!(h->flags & CTL_WORKDIR);
	if (h->env > h->argc || h->argc - h->env <= nwd || (!(h->flags & (CTL_ENV | CTL_ENV_ADD)) && h->env))
		return -EINVAL;
	uint32_t nargs = h->argc - h->env - nwd;
	char **all = calloc((size_t) h->argc + 3, sizeof(char *));
	if (!all)
		return -ENOMEM;
	c->workdir = nwd ? v[0] : NULL;
	if (c->workdir && c->workdir[0] != '/') {
		free(all);
		return -EINVAL;
	}
	memcpy(all, v + nwd, nargs * sizeof(char *));
	c->argv = all;
	c->envp = (h->flags & (CTL_ENV | CTL_ENV_ADD)) ? all + nargs + 1 : NULL;
	if (c->envp)
		memcpy(c->envp, v + nwd + nargs, h->env * sizeof(char *));
	c->store = (char *) all;
	return 0;
}

static int serve_exec(monitor *m, int cfd, const ctl_req *h, char **v, const int *fds, int nfds)
{
	command c = { 0 };
	bool code = h->flags & CTL_CODE;
	int r = command_of(h, v, &c);
	if (r < 0)
		return refuse(cfd, -r, "run", "a malformed command");
	if (code && (c.argv[0] == NULL || c.argv[1] == NULL || c.argv[2] != NULL)) {
		free(c.store);
		return refuse(cfd, EINVAL, "run", "code takes a language and its text");
	}
	int k = 0;
	nsbox_run_options o = {
		.version = NSBOX_RUN_OPTIONS_VERSION,
		.flags = ((h->flags & CTL_CAPTURE) ? NSBOX_SPAWN_CAPTURE : 0) |
		         ((h->flags & CTL_ENV_ADD) ? NSBOX_EXEC_ENV_ADD : 0) | ((h->flags & CTL_TTY) ? NSBOX_SPAWN_TTY : 0),
		.sandbox = m->sb,
		.argv = code ? NULL : (const char *const *) c.argv,
		.lang = code ? c.argv[0] : NULL,
		.code = code ? c.argv[1] : NULL,
		.code_len = code ? strlen(c.argv[1]) : 0,
		.envp = (const char *const *) c.envp,
		.workdir = c.workdir,
		.stdin_fd = (h->flags & CTL_STDIN) ? fds[k++] : -1,
		.stdout_fd = -1,
		.stderr_fd = -1,
		.timeout_ms = h->timeout_ms,
		.signal_fd = -1,
		.stats_fd = -1,
	};
	if (h->flags & CTL_STDOUT) {
		o.stdout_fd = fds[k++];
		o.stderr_fd = fds[k++];
	} else if (!(h->flags & (CTL_CAPTURE | CTL_STREAM))) {
		o.flags |= NSBOX_SPAWN_CAPTURE;   /* nowhere to pass it: kept in the record */
	}
	(void) nfds;
	r = governed(cfd, &o, h->flags & CTL_STREAM);
	free(c.store);
	return r;
}

/* ---- contexts -------------------------------------------------------------------- */

static ctx_ent *ctx_lookup(monitor *m, const char *name)
{
	ctx_ent *c = m->contexts;
	while (c && strcmp(c->name, name))
		c = c->next;
	return c;
}

/* The context NAME, its interpreter started now if new (*created). */
static nsbox_context *ctx_find(monitor *m, const char *name, const char *lang, bool *created, nsbox_error **err)
{
	*created = false;
	if (!ctl_name_ok(name)) {
		(void) nsbox_err_invalid(err, "context", "invalid context name '%.80s' (letters, digits, '-', '_', '.')",
		                         name);
		return NULL;
	}
	pthread_mutex_lock(&m->lock);
	ctx_ent *c = ctx_lookup(m, name);
	if (!c && m->n_contexts >= MAX_CONTEXTS) {
		pthread_mutex_unlock(&m->lock);
		(void) nsbox_err_invalid(err, "context", "the sandbox has %d contexts already: close one", MAX_CONTEXTS);
		return NULL;
	}
	if (!c && (c = calloc(1, sizeof(*c)))) {
		snprintf(c->name, sizeof(c->name), "%s", name);
		pthread_mutex_init(&c->start, NULL);
		c->next = m->contexts;
		m->contexts = c;
		m->n_contexts++;
	}
	pthread_mutex_unlock(&m->lock);
	if (!c) {
		(void) nsbox_err(err, ENOMEM, "context", "start context '%s'", name);
		return NULL;
	}
	pthread_mutex_lock(&c->start);
	if (!c->ctx && nsbox_context_new(m->sb, lang, name, &c->ctx, err) == 0)
		*created = true;
	nsbox_context *ctx = c->ctx;
	pthread_mutex_unlock(&c->start);
	return ctx;
}

static int serve_cell(monitor *m, int cfd, const ctl_req *h, char **v, const int *fds)
{
	if (h->argc != 3)
		return refuse(cfd, EINVAL, "context", "a cell takes a context, a language and code");
	bool created;
	nsbox_error *e = NULL;
	nsbox_context *ctx = ctx_find(m, v[0], v[1], &created, &e);
	if (!ctx) {
		int r = reply_error(cfd, e, EINVAL);
		nsbox_error_free(e);
		return r;
	}
	nsbox_run_options o = {
		.version = NSBOX_RUN_OPTIONS_VERSION,
		.flags = (h->flags & CTL_CAPTURE) || !(h->flags & (CTL_STDOUT | CTL_STREAM)) ? NSBOX_SPAWN_CAPTURE : 0,
		.context = ctx,
		.lang = v[1],
		.code = v[2],
		.code_len = strlen(v[2]),
		.stdin_fd = -1,
		.stdout_fd = (h->flags & CTL_STDOUT) ? fds[0] : -1,
		.stderr_fd = (h->flags & CTL_STDOUT) ? fds[1] : -1,
		.timeout_ms = h->timeout_ms,
		.signal_fd = -1,
		.stats_fd = -1,
	};
	return governed(cfd, &o, h->flags & CTL_STREAM);
}

static int serve_context(monitor *m, int cfd, const ctl_req *h, char **v)
{
	nsbox_error *e = NULL;
	int r = 0;
	if (h->op == CTL_CONTEXT_NEW) {
		bool created;
		if (h->argc != 2)
			return refuse(cfd, EINVAL, "context", "a context takes a name and a language");
		nsbox_context *c = ctx_find(m, v[0], v[1], &created, &e);
		if (c && strcmp(nsbox_context_language(c), v[1])) {
			nsbox_error_free(e);
			return refuse(cfd, EEXIST, "context", "context '%s' is a %s context, not %s", v[0],
			              nsbox_context_language(c), v[1]);
		}
		if (!c) {
			r = reply_error(cfd, e, EINVAL);
			nsbox_error_free(e);
			return r;
		}
		return reply_json(cfd, json_pack("{s:s, s:s, s:b}", "name", v[0], "language", v[1], "created", created));
	}
	if (h->argc != 1)
		return refuse(cfd, EINVAL, "context", "name the context");
	pthread_mutex_lock(&m->lock);
	ctx_ent *c = ctx_lookup(m, v[0]), **pp = &m->contexts;
	if (c && h->op == CTL_CONTEXT_CLOSE) {
		while (*pp != c)
			pp = &(*pp)->next;
		*pp = c->next;
		m->n_contexts--;
	}
	pthread_mutex_unlock(&m->lock);
	if (!c || !c->ctx)
		return refuse(cfd, ENOENT, "context", "no context named '%.80s'", v[0]);
	if (h->op == CTL_INTERRUPT)
		nsbox_context_interrupt(c->ctx);
	else if (h->op == CTL_CONTEXT_RESTART)
		r = nsbox_context_restart(c->ctx, &e);
	else {
		/* (A cell running in it ends: its interpreter is killed.) */
		nsbox_context_free(c->ctx);
		pthread_mutex_destroy(&c->start);
		free(c);
	}
	if (r < 0) {
		r = reply_error(cfd, e, -r);
		nsbox_error_free(e);
		return r;
	}
	return ctl_send_reply(cfd, 0, NULL);
}

/* ---- files ----------------------------------------------------------------------- */

static json_t *info_json(const nsbox_file_info *f)
{
	char t[2] = { f->type, 0 };
	return json_pack("{s:s, s:s, s:s, s:i, s:I, s:I}", "name", f->name, "path", f->path, "type", t, "mode",
	                 (int) f->mode, "size", (json_int_t) f->size, "mtime_ns", (json_int_t) f->mtime_ns);
}

static int serve_file(monitor *m, int cfd, const ctl_req *h, char **v, const int *fds, int nfds)
{
	if (h->argc < 2 || h->argc > 3)
		return refuse(cfd, EINVAL, "files", "a file operation takes an operation, a path and its argument");
	const char *op = v[0], *path = v[1], *arg = v[2];
	bool data = !strcmp(op, "read") || !strcmp(op, "write");
	if (nfds != (data ? 1 : 0) || (data && !arg))
		return refuse(cfd, EINVAL, "files", "%s: a malformed request", op);
	nsbox_error *e = NULL;
	int r;
	json_t *out = NULL;
	if (!strcmp(op, "read")) {
		uint64_t size = 0;
		r = nsbox_file_read(m->sb, path, fds[0], strtoull(arg, NULL, 10), &size, &e);
		if (r == 0)
			out = json_pack("{s:I}", "size", (json_int_t) size);
	} else if (!strcmp(op, "write")) {
		char *colon = strchr(arg, ':');
		unsigned mode = colon ? (unsigned) strtoul(colon + 1, NULL, 8) : 0644;
		r = nsbox_file_write(m->sb, path, fds[0], mode, strtoull(arg, NULL, 10), &e);
	} else if (!strcmp(op, "list")) {
		nsbox_file_info *fi = NULL;
		size_t n = 0;
		r = nsbox_file_list(m->sb, path, &fi, &n, &e);
		json_t *a = r == 0 ? json_array() : NULL;
		for (size_t i = 0; a && i < n; i++)
			json_array_append_new(a, info_json(&fi[i]));
		nsbox_file_info_free(fi, n);
		if (r == 0)
			out = json_pack("{s:o}", "entries", a);
	} else if (!strcmp(op, "stat")) {
		nsbox_file_info fi = { 0 };
		r = nsbox_file_stat(m->sb, path, &fi, &e);
		if (r == 0)
			out = info_json(&fi);
		free(fi.name);
		free(fi.path);
	} else if (!strcmp(op, "remove")) {
		r = nsbox_file_remove(m->sb, path, h->flags & CTL_RECURSIVE, &e);
	} else if (!strcmp(op, "mkdir")) {
		r = nsbox_file_mkdir(m->sb, path, arg ? (unsigned) strtoul(arg, NULL, 8) : 0755, &e);
	} else {
		return refuse(cfd, EINVAL, "files", "no file operation '%.40s'", op);
	}
	if (r < 0) {
		r = reply_error(cfd, e, -r);
		nsbox_error_free(e);
		return r;
	}
	return out ? reply_json(cfd, out) : ctl_send_reply(cfd, 0, NULL);
}

/* ---- processes ------------------------------------------------------------------- */

static nsbox_process *proc_lookup(monitor *m, const char *id)
{
	for (proc_ent *p = m->procs; p; p = p->next)
		if (!strcmp(nsbox_process_id(p->p), id))
			return p->p;
	return NULL;
}

static json_t *proc_json(nsbox_process *p)
{
	uint64_t out = 0, err = 0;
	char *t;
	size_t l;
	if (nsbox_process_logs(p, 1, &t, &l, &out, NULL) == 0)
		free(t);
	if (nsbox_process_logs(p, 2, &t, &l, &err, NULL) == 0)
		free(t);
	return json_pack("{s:s, s:b, s:I, s:I}", "id", nsbox_process_id(p), "running", nsbox_process_running(p),
	                 "stdout_bytes", (json_int_t) out, "stderr_bytes", (json_int_t) err);
}

static int serve_spawn(monitor *m, int cfd, const ctl_req *h, char **v)
{
	command c = { 0 };
	int r = command_of(h, v, &c);
	if (r < 0)
		return refuse(cfd, -r, "process", "a malformed command");
	pthread_mutex_lock(&m->lock);
	/* Room: the oldest ended process (and its logs) goes first. */
	if (m->n_procs >= MAX_PROCESSES) {
		proc_ent **old = NULL;
		for (proc_ent **pp = &m->procs; *pp; pp = &(*pp)->next)
			if (!nsbox_process_running((*pp)->p))
				old = pp;
		if (old) {
			proc_ent *gone = *old;
			*old = gone->next;
			m->n_procs--;
			nsbox_process_free(gone->p);
			free(gone);
		}
	}
	bool full = m->n_procs >= MAX_PROCESSES;
	pthread_mutex_unlock(&m->lock);
	if (full) {
		free(c.store);
		return refuse(cfd, EAGAIN, "process", "%d processes are running in the sandbox", MAX_PROCESSES);
	}
	nsbox_process_options o = { .version = NSBOX_PROCESS_OPTIONS_VERSION,
		                    .flags = (h->flags & CTL_ENV_ADD) ? NSBOX_EXEC_ENV_ADD : 0,
		                    .argv = (const char *const *) c.argv,
		                    .envp = (const char *const *) c.envp,
		                    .workdir = c.workdir,
		                    .timeout_ms = h->timeout_ms,
		                    .log_bytes = h->arg > (16u << 20) ? (16u << 20) : h->arg };
	nsbox_process *p = NULL;
	nsbox_error *e = NULL;
	proc_ent *ent = calloc(1, sizeof(*ent));
	r = ent ? nsbox_process_start(m->sb, &o, &p, &e) : -ENOMEM;
	free(c.store);
	if (r < 0) {
		free(ent);
		r = reply_error(cfd, e, -r);
		nsbox_error_free(e);
		return r;
	}
	pthread_mutex_lock(&m->lock);
	ent->p = p;
	ent->next = m->procs;
	m->procs = ent;
	m->n_procs++;
	pthread_mutex_unlock(&m->lock);
	return reply_json(cfd, json_pack("{s:s}", "id", nsbox_process_id(p)));
}

static int serve_proc(monitor *m, int cfd, const ctl_req *h, char **v)
{
	if (h->op == CTL_PROCS) {
		json_t *a = json_array();
		pthread_mutex_lock(&m->lock);
		for (proc_ent *p = m->procs; a && p; p = p->next)
			if (!h->argc || !strcmp(v[0], nsbox_process_id(p->p)))
				json_array_append_new(a, proc_json(p->p));
		pthread_mutex_unlock(&m->lock);
		return reply_json(cfd, a);
	}
	if (h->argc < 1)
		return refuse(cfd, EINVAL, "process", "name the process");
	/* A process stays in the registry until the sandbox ends or its room
	 * is needed, which only spawn takes (under the lock, as here): looked
	 * up, it is used without the lock, so a wait does not hold it. */
	pthread_mutex_lock(&m->lock);
	nsbox_process *p = proc_lookup(m, v[0]);
	pthread_mutex_unlock(&m->lock);
	if (!p)
		return refuse(cfd, ENOENT, "process", "no process '%.40s' in the sandbox", v[0]);
	nsbox_error *e = NULL;
	int r = 0;
	if (h->op == CTL_LOGS) {
		char *t = NULL;
		size_t len = 0;
		uint64_t total = 0;
		r = nsbox_process_logs(p, h->argc > 1 && !strcmp(v[1], "2") ? 2 : 1, &t, &len, &total, &e);
		if (r == 0) {
			stream_ctx sc = { .fd = cfd };
			send_output(&sc, 1, t, len);
			free(t);
			return reply_json(cfd, json_pack("{s:I}", "total", (json_int_t) total));
		}
	} else if (h->op == CTL_KILL) {
		int sig = h->argc > 1 ? atoi(v[1]) : SIGTERM;
		if (sig <= 0 || sig >= NSIG)
			return refuse(cfd, EINVAL, "process", "no signal '%.20s'", h->argc > 1 ? v[1] : "");
		r = nsbox_process_kill(p, sig);
		if (r < 0)
			return refuse(cfd, -r, "process", "process %s has ended", v[0]);
		return ctl_send_reply(cfd, 0, NULL);
	} else {   /* CTL_WAIT */
		nsbox_result *res = NULL;
		r = nsbox_process_wait(p, h->timeout_ms, &res, &e);
		if (r == 0) {
			char *j = NULL;
			(void) nsbox_result_to_json(res, &j, NULL);
			nsbox_result_free(res);
			r = j ? ctl_send_reply(cfd, 0, j) : refuse(cfd, ENOMEM, "process", "out of memory");
			free(j);
			return r;
		}
	}
	r = reply_error(cfd, e, -r);
	nsbox_error_free(e);
	return r;
}

/* ---- ports ----------------------------------------------------------------------- */

static void write_info(monitor *m);

static int publish(monitor *m, const char *addr, unsigned host_port, unsigned port, uint16_t *bound, nsbox_error **err)
{
	pthread_mutex_lock(&m->lock);
	bool full = m->n_forwards >= MAX_FORWARDS;
	pthread_mutex_unlock(&m->lock);
	if (full)
		return nsbox_err_invalid(err, "network", "publish: %d ports are published already", MAX_FORWARDS);
	if (!port || port > 65535 || host_port > 65535)
		return nsbox_err_invalid(err, "network", "publish: a port is 1..65535 (a host port of 0: any free)");
	fwd_ent *ent = calloc(1, sizeof(*ent));
	if (!ent)
		return nsbox_err(err, ENOMEM, "network", "publish");
	snprintf(ent->addr, sizeof(ent->addr), "%s", addr);
	int r = nsbox_forward_start(m->sb, addr, (uint16_t) host_port, (uint16_t) port, &ent->f, bound, err);
	if (r < 0) {
		free(ent);
		return r;
	}
	pthread_mutex_lock(&m->lock);
	ent->next = m->forwards;
	m->forwards = ent;
	m->n_forwards++;
	pthread_mutex_unlock(&m->lock);
	write_info(m);
	return 0;
}

static int serve_expose(monitor *m, int cfd, const ctl_req *h, char **v)
{
	if (h->argc != 3)
		return refuse(cfd, EINVAL, "network", "publish takes a port, an address and a host port");
	char *end1, *end2;
	unsigned long port = strtoul(v[0], &end1, 10), hp = strtoul(v[2], &end2, 10);
	if (*end1 || *end2 || !*v[0] || !*v[2])
		return refuse(cfd, EINVAL, "network", "publish: ports are numbers");
	uint16_t bound = 0;
	nsbox_error *e = NULL;
	int r = publish(m, v[1], (unsigned) hp, (unsigned) port, &bound, &e);
	if (r < 0) {
		r = reply_error(cfd, e, -r);
		nsbox_error_free(e);
		return r;
	}
	return reply_json(cfd, json_pack("{s:s, s:i, s:i}", "host", v[1], "host_port", (int) bound, "port", (int) port));
}

/* ---- information ----------------------------------------------------------------- */

static json_t *info(monitor *m)
{
	json_t *pub = json_array(), *ctxs = json_array();
	pthread_mutex_lock(&m->lock);
	for (fwd_ent *f = m->forwards; f && pub; f = f->next)
		json_array_append_new(pub, json_pack("{s:s, s:i, s:i}", "host", f->addr, "host_port",
		                                     (int) nsbox_forward_host_port(f->f), "port",
		                                     (int) nsbox_forward_port(f->f)));
	for (ctx_ent *c = m->contexts; c && ctxs; c = c->next)
		if (c->ctx)
			json_array_append_new(ctxs, json_pack("{s:s, s:s}", "name", c->name, "language",
			                                      nsbox_context_language(c->ctx)));
	unsigned procs = 0;
	for (proc_ent *p = m->procs; p; p = p->next)
		procs += nsbox_process_running(p->p);
	bool owned = m->owner_fd >= 0;
	pthread_mutex_unlock(&m->lock);
	const char *w = nsbox_sandbox_warning(m->sb);
	return json_pack("{s:s, s:s, s:i, s:I, s:s, s:I, s:I, s:b, s:b, s:b, s:s?, s:s?, s:o, s:o, s:i}", "name",
	                 m->name, "id", nsbox_sandbox_id(m->sb), "monitor_pid", (int) getpid(), "started",
	                 (json_int_t) m->started_wall, "image", m->image,
	                 "idle_timeout_ms", (json_int_t) m->idle_ms, "lifetime_ms", (json_int_t) m->lifetime_ms, "paused",
	                 nsbox_sandbox_paused(m->sb), "pause_when_idle", m->pause_when_idle, "owned", owned, "warning",
	                 w, "enforced_by", nsbox_sandbox_enforced_by(m->sb), "published", pub ? pub : json_array(),
	                 "contexts", ctxs ? ctxs : json_array(), "processes_running", (int) procs);
}

/* NAME.json, what `nsbox ps` and nsbox_live_list() read: replaced whole. */
static void write_info(monitor *m)
{
	json_t *j = info(m);
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!s)
		return;
	char f[80], tmpf[96];
	snprintf(f, sizeof(f), "%s.json", m->name);
	snprintf(tmpf, sizeof(tmpf), ".%s.json.%d.tmp", m->name, (int) gettid());
	int fd = openat(m->dirfd, tmpf, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0) {
		size_t n = strlen(s);
		s[n] = '\n';
		bool ok = write(fd, s, n + 1) == (ssize_t) (n + 1);
		close(fd);
		if (!ok || renameat(m->dirfd, tmpf, m->dirfd, f) < 0)
			(void) unlinkat(m->dirfd, tmpf, 0);
	}
	free(s);
}

/* ---- one connection ---------------------------------------------------------------- */

/* Until the request's deadline, something to read on fd. */
static bool readable_by(int fd, const struct timespec *start)
{
	for (;;) {
		double left = REQUEST_MS - since_ms(start);
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int n = left > 0 ? poll(&p, 1, (int) left + 1) : 0;
		if (n < 0 && errno == EINTR)
			continue;
		return n > 0;
	}
}

/* n bytes of the request by its deadline. */
static int read_by(int fd, char *p, size_t n, const struct timespec *start)
{
	while (n) {
		if (!readable_by(fd, start))
			return -ETIMEDOUT;
		ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EPIPE;
		p += r;
		n -= (size_t) r;
	}
	return 0;
}

/* An idle-paused sandbox wakes for a request that needs it running. */
static void wake_up(monitor *m, uint32_t op)
{
	if (op == CTL_INFO || op == CTL_STOP || op == CTL_PAUSE || op == CTL_RESUME || op == CTL_PROCS ||
	    op == CTL_LOGS || op == CTL_DETACH)
		return;
	pthread_mutex_lock(&m->lock);
	bool was = m->idle_paused;
	m->idle_paused = false;
	pthread_mutex_unlock(&m->lock);
	if (was) {
		(void) nsbox_sandbox_resume(m->sb, NULL);
		write_info(m);
	}
}

static void dispatch(monitor *m, int cfd, const ctl_req *h, char **v, const int *fds, int nfds)
{
	wake_up(m, h->op);
	nsbox_error *e = NULL;
	int r;
	switch (h->op) {
	case CTL_EXEC: (void) serve_exec(m, cfd, h, v, fds, nfds); break;
	case CTL_CELL: (void) serve_cell(m, cfd, h, v, fds); break;
	case CTL_FILE: (void) serve_file(m, cfd, h, v, fds, nfds); break;
	case CTL_SPAWN: (void) serve_spawn(m, cfd, h, v); break;
	case CTL_PROCS:
	case CTL_LOGS:
	case CTL_KILL:
	case CTL_WAIT: (void) serve_proc(m, cfd, h, v); break;
	case CTL_EXPOSE: (void) serve_expose(m, cfd, h, v); break;
	case CTL_CONTEXT_NEW:
	case CTL_CONTEXT_RESTART:
	case CTL_CONTEXT_CLOSE:
	case CTL_INTERRUPT: (void) serve_context(m, cfd, h, v); break;
	case CTL_INFO: (void) reply_json(cfd, info(m)); break;
	case CTL_PAUSE:
	case CTL_RESUME:
		r = h->op == CTL_PAUSE ? nsbox_sandbox_pause(m->sb, &e) : nsbox_sandbox_resume(m->sb, &e);
		pthread_mutex_lock(&m->lock);
		m->idle_paused = false;
		pthread_mutex_unlock(&m->lock);
		if (r < 0)
			(void) reply_error(cfd, e, -r);
		else
			(void) ctl_send_reply(cfd, 0, NULL);
		nsbox_error_free(e);
		write_info(m);
		break;
	case CTL_DETACH:
		pthread_mutex_lock(&m->lock);
		if (m->owner_fd >= 0)
			close(m->owner_fd);
		m->owner_fd = -1;
		pthread_mutex_unlock(&m->lock);
		(void) ctl_send_reply(cfd, 0, NULL);
		(void) !write(m->wake[1], "i", 1);   /* the loop stops watching the owner */
		write_info(m);
		break;
	case CTL_STOP:
		(void) ctl_send_reply(cfd, 0, NULL);
		(void) !write(m->wake[1], "s", 1);
		break;
	default: (void) refuse(cfd, EINVAL, "live", "unknown request %u", (unsigned) h->op);
	}
}

static void serve(monitor *m, int cfd)
{
	ctl_req h;
	int fds[4] = { -1, -1, -1, -1 }, nfds = 0;
	struct timespec start;
	clock_gettime(CLOCK_MONOTONIC, &start);
	/* The header comes whole (one sendmsg), with its fds. */
	ssize_t n = readable_by(cfd, &start) ? fd_recv(cfd, &h, sizeof(h), fds, 4, &nfds, MSG_DONTWAIT) : -1;
	char *body = NULL;
	char **v = NULL;
	if (n != (ssize_t) sizeof(h) || h.magic != CTL_MAGIC)
		goto out;
	int want = fds_wanted(&h);
	if (h.len > CTL_MAX || h.op == 0 || h.op >= CTL_OP_MAX || (h.flags & ~(uint32_t) CTL_FLAGS_ALL) ||
	    (want >= 0 && nfds != want) || (want < 0 && nfds > 1)) {
		(void) refuse(cfd, EPROTO, "live", "a malformed request");
		goto out;
	}
	body = malloc((size_t) h.len + 1);
	if (!body || read_by(cfd, body, h.len, &start) < 0)
		goto out;
	body[h.len] = '\0';
	v = split(body, &h);
	if (!v) {
		(void) refuse(cfd, EPROTO, "live", "a malformed request");
		goto out;
	}
	dispatch(m, cfd, &h, v, fds, nfds);
out:
	free(v);
	free(body);
	for (int i = 0; i < nfds; i++)
		(void) close(fds[i]);
}

typedef struct conn {
	monitor *m;
	int fd;
} conn;

static void *serve_thread(void *arg)
{
	conn *c = arg;
	monitor *m = c->m;
	serve(m, c->fd);
	close(c->fd);
	free(c);
	pthread_mutex_lock(&m->lock);
	m->active--;
	clock_gettime(CLOCK_MONOTONIC, &m->last);
	pthread_cond_broadcast(&m->quiet);
	pthread_mutex_unlock(&m->lock);
	(void) !write(m->wake[1], "w", 1);   /* the idle timer may start now */
	return NULL;
}

/* ---- the main loop ---------------------------------------------------------------- */

/* Busy: a request being served, or a background process running. */
static bool busy(monitor *m)
{
	if (m->active)
		return true;
	for (proc_ent *p = m->procs; p; p = p->next)
		if (nsbox_process_running(p->p))
			return true;
	return false;
}

/* The next moment the monitor must look at the clock: the idle timeout
 * (when nothing runs; a background process polled each second) or the
 * lifetime. */
static void arm(monitor *m)
{
	double next = -1;
	pthread_mutex_lock(&m->lock);
	if (m->idle_ms && !m->idle_paused)
		next = busy(m) ? 1000 : (double) m->idle_ms - since_ms(&m->last);
	pthread_mutex_unlock(&m->lock);
	if (m->lifetime_ms) {
		double l = (double) m->lifetime_ms - since_ms(&m->started);
		if (next < 0 || l < next)
			next = l;
	}
	struct itimerspec its = { 0 };
	if (next > -1) {
		if (next < 1)
			next = 1;
		its.it_value.tv_sec = (time_t) (next / 1000);
		its.it_value.tv_nsec = (long) ((next - (double) its.it_value.tv_sec * 1000) * 1e6);
	}
	(void) timerfd_settime(m->timer_fd, 0, &its, NULL);
}

/* Out of lifetime: stop. Idle: stop, or pause (pause_when_idle). */
static bool expired(monitor *m)
{
	if (m->lifetime_ms && since_ms(&m->started) >= (double) m->lifetime_ms)
		return true;
	pthread_mutex_lock(&m->lock);
	if (busy(m))
		clock_gettime(CLOCK_MONOTONIC, &m->last);
	bool idle = m->idle_ms && !m->idle_paused && !busy(m) && since_ms(&m->last) >= (double) m->idle_ms;
	bool pause = idle && m->pause_when_idle;
	if (pause)
		m->idle_paused = true;
	pthread_mutex_unlock(&m->lock);
	if (pause) {
		(void) nsbox_sandbox_pause(m->sb, NULL);
		write_info(m);
		return false;
	}
	return idle;
}

static void accept_one(monitor *m)
{
	int cfd = accept4(m->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	if (cfd < 0)
		return;
	/* The directory is private already; the socket still serves no one
	 * but its owner, in its owner's user namespace (not the payload of a
	 * rootless sandbox, which has the same uid). */
	conn *c = malloc(sizeof(*c));
	if (!ctl_peer_ok(cfd) || !c) {
		free(c);
		close(cfd);
		return;
	}
	*c = (conn){ m, cfd };
	pthread_mutex_lock(&m->lock);
	m->active++;
	clock_gettime(CLOCK_MONOTONIC, &m->last);
	pthread_mutex_unlock(&m->lock);
	pthread_attr_t at;
	pthread_t t;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &at, serve_thread, c) != 0) {
		close(cfd);
		free(c);
		pthread_mutex_lock(&m->lock);
		m->active--;
		pthread_mutex_unlock(&m->lock);
	}
	pthread_attr_destroy(&at);
}

static void loop(monitor *m)
{
	int pidfd = nsbox_sandbox_pidfd(m->sb);
	for (;;) {
		arm(m);
		pthread_mutex_lock(&m->lock);
		int owner = m->owner_fd;
		pthread_mutex_unlock(&m->lock);
		struct pollfd p[6] = {
			{ .fd = m->listen_fd, .events = POLLIN }, { .fd = m->sig_fd, .events = POLLIN },
			{ .fd = m->timer_fd, .events = POLLIN },  { .fd = pidfd, .events = POLLIN },
			{ .fd = m->wake[0], .events = POLLIN },   { .fd = owner, .events = POLLIN },
		};
		if (poll(p, 6, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		if (p[3].revents || p[1].revents)
			return;   /* the sandbox ended (killed from outside), or a signal to stop */
		if (p[5].revents && owner >= 0)
			return;   /* the owner has exited */
		if (p[4].revents) {
			char b[64];
			ssize_t n = read(m->wake[0], b, sizeof(b));
			if (n > 0 && memchr(b, 's', (size_t) n))
				return;
		}
		if (p[2].revents) {
			uint64_t ticks;
			(void) !read(m->timer_fd, &ticks, sizeof(ticks));
			if (expired(m))
				return;
		}
		if (p[0].revents & POLLIN)
			accept_one(m);
	}
}

static void remove_files(const monitor *m)
{
	static const char *const ext[] = { "sock", "json", "lock" };
	for (size_t i = 0; i < 3; i++) {
		char f[80];
		snprintf(f, sizeof(f), "%s.%s", m->name, ext[i]);
		(void) unlinkat(m->dirfd, f, 0);
	}
}

/* Coverage builds: the cleaner ends with _exit, so it writes its counts
 * itself; it was forked before any thread, so no lock of gcov's is held. */
#ifdef NSBOX_COVERAGE
void __gcov_dump(void);
#define cleaner_coverage_dump() __gcov_dump()
#else
#define cleaner_coverage_dump() ((void) 0)
#endif

/* The files go when the monitor does, however it ends (SIGKILL too): a
 * child of it waits for its death (PR_SET_PDEATHSIG), removes them, and
 * holds the lock (inherited) until then, so that a stop, which waits for
 * the lock, returns once they are gone. */
static int start_cleaner(const monitor *m)
{
	pid_t parent = getpid();
	pid_t c = fork();
	if (c != 0)
		return c < 0 ? -1 : 0;
	for (int fd = 3; fd < 1024; fd++)
		if (fd != m->dirfd && fd != m->lock_fd)
			(void) close(fd);
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGUSR1);
	(void) sigprocmask(SIG_BLOCK, &s, NULL);
	if (prctl(PR_SET_PDEATHSIG, SIGUSR1, 0, 0, 0) == 0 && getppid() == parent)
		while (sigwaitinfo(&s, NULL) < 0 && errno == EINTR)
			;
	remove_files(m);
	cleaner_coverage_dump();
	_exit(0);
}

/* Tell the starter: 'O' and the warning, or 'E' and the error's JSON. */
static void ready(monitor *m, const nsbox_error *e)
{
	char *msg = NULL;
	if (e) {
		char *j = ctl_error_json(e);
		if (asprintf(&msg, "E%s", j ? j : "{}") < 0)
			msg = NULL;
		free(j);
	} else {
		const char *w = nsbox_sandbox_warning(m->sb);
		if (asprintf(&msg, "O%s", w ? w : "") < 0)
			msg = NULL;
	}
	if (msg)
		(void) !write(m->ready_fd, msg, strlen(msg));
	free(msg);
	close(m->ready_fd);
	m->ready_fd = -1;
}

static int listen_here(monitor *m, nsbox_error **err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	ctl_sock_path(&sa, m->dirfd, m->name);
	(void) unlinkat(m->dirfd, strrchr(sa.sun_path, '/') + 1, 0);   /* a dead monitor's */
	m->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	mode_t old = umask(077);
	int b = m->listen_fd < 0 ? -1 : bind(m->listen_fd, (struct sockaddr *) &sa, sizeof(sa));
	umask(old);
	if (b < 0 || listen(m->listen_fd, 128) < 0)
		return nsbox_err(err, errno, "live", "listen on '%s.sock'", m->name);
	return 0;
}

/* --publish [ADDR:]HOSTPORT:PORT */
static int publish_spec(monitor *m, const char *spec, nsbox_error **err)
{
	char addr[64] = "127.0.0.1";
	unsigned hp, port;
	char rest;
	const char *last = strrchr(spec, ':');
	const char *first = last ? memrchr(spec, ':', (size_t) (last - spec)) : NULL;
	bool ok = last != NULL;
	if (ok && first) {
		size_t n = (size_t) (first - spec);
		const char *a = spec;
		if (n >= 2 && spec[0] == '[' && spec[n - 1] == ']')
			a++, n -= 2;
		ok = n > 0 && n < sizeof(addr);
		if (ok)
			snprintf(addr, sizeof(addr), "%.*s", (int) n, a);
	}
	ok = ok && sscanf(first ? first + 1 : spec, "%u:%u%c", &hp, &port, &rest) == 2;
	if (!ok)
		return nsbox_err_invalid(err, "network", "--publish '%.80s': expected [ADDR:]HOSTPORT:PORT", spec);
	return publish(m, addr, hp, port, NULL, err);
}

static nsbox_config *load_config(int fd, nsbox_error **err)
{
	nsbox_config *cfg = NULL;
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	int r = nsbox_config_new(&cfg, err);
	if (r == 0)
		r = nsbox_config_load_policy(cfg, path, err);
	static const char *const placeholder[] = { "true", NULL };
	if (r == 0)
		r = nsbox_config_set_command(cfg, 1, placeholder, err);
	if (r < 0) {
		nsbox_config_free(cfg);
		return NULL;
	}
	return cfg;
}

enum { O_NAME = 1, O_IDLE, O_LIFETIME, O_PAUSE_IDLE, O_PUBLISH, O_OWNER, O_IMAGE };

int live_monitor_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "name", required_argument, NULL, O_NAME },      { "idle-timeout-ms", required_argument, NULL, O_IDLE },
		{ "lifetime-ms", required_argument, NULL, O_LIFETIME },
		{ "pause-when-idle", no_argument, NULL, O_PAUSE_IDLE },
		{ "publish", required_argument, NULL, O_PUBLISH }, { "owner", no_argument, NULL, O_OWNER },
		{ "image", required_argument, NULL, O_IMAGE },    { 0 },
	};
	monitor m = { .dirfd = LIVE_FD_DIR, .lock_fd = LIVE_FD_LOCK, .listen_fd = -1, .ready_fd = LIVE_FD_READY,
		      .owner_fd = -1, .wake = { -1, -1 } };
	const char *publishes[MAX_FORWARDS];
	int n_pub = 0, c;
	/* Only our starter runs us: the fds must be there, the name sane. */
	struct stat st;
	if (fstat(LIVE_FD_READY, &st) < 0 || !S_ISFIFO(st.st_mode) || fstat(LIVE_FD_CONFIG, &st) < 0 ||
	    fstat(LIVE_FD_DIR, &st) < 0 || !S_ISDIR(st.st_mode) || fstat(LIVE_FD_LOCK, &st) < 0) {
		fprintf(stderr, "nsbox-monitor: started by nsbox itself (nsbox start, or the library), not by hand\n");
		return 2;
	}
	(void) fcntl(LIVE_FD_READY, F_SETFD, FD_CLOEXEC);
	(void) fcntl(LIVE_FD_CONFIG, F_SETFD, FD_CLOEXEC);
	(void) fcntl(LIVE_FD_DIR, F_SETFD, FD_CLOEXEC);
	(void) fcntl(LIVE_FD_LOCK, F_SETFD, FD_CLOEXEC);
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1)
		switch (c) {
		case O_NAME: snprintf(m.name, sizeof(m.name), "%s", optarg); break;
		case O_IDLE: m.idle_ms = strtoull(optarg, NULL, 10); break;
		case O_LIFETIME: m.lifetime_ms = strtoull(optarg, NULL, 10); break;
		case O_PAUSE_IDLE: m.pause_when_idle = true; break;
		case O_PUBLISH:
			if (n_pub < MAX_FORWARDS)
				publishes[n_pub++] = optarg;
			break;
		case O_OWNER:
			m.owner_fd = LIVE_FD_OWNER;
			(void) fcntl(LIVE_FD_OWNER, F_SETFD, FD_CLOEXEC);
			break;
		case O_IMAGE: m.image = optarg; break;
		default: return 2;
		}
	nsbox_error *e = NULL;
	if (!ctl_name_ok(m.name)) {
		(void) nsbox_err_invalid(&e, "live", "the monitor was given no valid name");
		goto fail;
	}
	pthread_mutex_init(&m.lock, NULL);
	pthread_cond_init(&m.quiet, NULL);
	/* A client gone before its answer was written is no reason to die. */
	(void) signal(SIGPIPE, SIG_IGN);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	(void) sigprocmask(SIG_BLOCK, &set, NULL);
	m.sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	m.timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (m.sig_fd < 0 || m.timer_fd < 0 || pipe2(m.wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		(void) nsbox_err(&e, errno, "live", "start the monitor");
		goto fail;
	}
	m.cfg = load_config(LIVE_FD_CONFIG, &e);
	close(LIVE_FD_CONFIG);
	if (!m.cfg)
		goto fail;
	nsbox_spawn_options o = {
		.version = NSBOX_SPAWN_OPTIONS_VERSION,
		.flags = NSBOX_SPAWN_KEEP,
		.config = m.cfg,
		.stdin_fd = -1,
		.stdout_fd = -1,
		.stderr_fd = -1,
		.signal_fd = -1,
		.stats_fd = -1,
	};
	if (nsbox_spawn(&o, &m.sb, &e) < 0)
		goto fail;
	(void) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	clock_gettime(CLOCK_MONOTONIC, &m.started);
	m.started_wall = time(NULL);
	m.last = m.started;
	if (listen_here(&m, &e) < 0)
		goto fail;
	for (int i = 0; i < n_pub; i++)
		if (publish_spec(&m, publishes[i], &e) < 0)
			goto fail;
	write_info(&m);
	if (start_cleaner(&m) < 0) {
		(void) nsbox_err(&e, errno, "live", "start the monitor's cleaner");
		goto fail;
	}
	ready(&m, NULL);
	loop(&m);
	/* Stop: no new connection; the keeper and with it everything in the
	 * sandbox; the handlers then return (their runs ended); the
	 * forwarders, processes, contexts; the sandbox's cgroup. The files go
	 * with us (start_cleaner). */
	close(m.listen_fd);
	(void) nsbox_sandbox_resume(m.sb, NULL);
	(void) nsbox_sandbox_kill(m.sb, SIGKILL);
	pthread_mutex_lock(&m.lock);
	while (m.active)
		pthread_cond_wait(&m.quiet, &m.lock);
	pthread_mutex_unlock(&m.lock);
	for (fwd_ent *f = m.forwards, *n; f; f = n) {
		n = f->next;
		nsbox_forward_free(f->f);
		free(f);
	}
	for (proc_ent *p = m.procs, *n; p; p = n) {
		n = p->next;
		nsbox_process_free(p->p);
		free(p);
	}
	for (ctx_ent *x = m.contexts, *n; x; x = n) {
		n = x->next;
		nsbox_context_free(x->ctx);
		pthread_mutex_destroy(&x->start);
		free(x);
	}
	nsbox_sandbox_free(m.sb);
	nsbox_config_free(m.cfg);
	return 0;
fail:
	ready(&m, e);
	nsbox_error_free(e);
	for (fwd_ent *f = m.forwards, *n; f; f = n) {
		n = f->next;
		nsbox_forward_free(f->f);
		free(f);
	}
	nsbox_sandbox_free(m.sb);
	nsbox_config_free(m.cfg);
	if (m.name[0])
		remove_files(&m);
	return 1;
}
