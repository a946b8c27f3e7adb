/* The monitor's answers, and its runs: a command or code in the sandbox
 * (serve_exec), a cell of a context (serve_cell) and the contexts
 * themselves, each through nsbox_run with the client watched meanwhile. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/error.h"
#include "live/ctl.h"
#include "live/monitor.h"
#include "live/remote.h"

/* ---- answering ------------------------------------------------------------------- */

int reply_error(int cfd, const nsbox_error *e, int fallback)
{
	char *j = ctl_error_json(e);
	int st = e && nsbox_error_errno(e) > 0 ? -nsbox_error_errno(e) : -fallback;
	int r = ctl_send_reply(cfd, st, j ? j : "{\"error\":{\"message\":\"out of memory\",\"errno\":12}}");
	free(j);
	return r;
}

/* A refusal of our own: the message, errno, and the step. */
int refuse(int cfd, int errnum, const char *step, const char *fmt, ...)
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

int reply_json(int cfd, json_t *j)
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

void send_output(void *userdata, int stream, const char *data, size_t len)
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
static int governed(int cfd, const nsbox_run_options *given, bool stream)
{
	nsbox_run_options run = *given, *o = &run;   /* with this call's callbacks */
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

int command_of(const ctl_req *h, char **v, command *c)
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

int serve_exec(monitor *m, int cfd, const ctl_req *h, char **v, const int *fds, int nfds)
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
	} else {
		/* Streamed (the library hands a run's output to on_output as it
		 * captures it), or nowhere to pass it: kept in the record. */
		o.flags |= NSBOX_SPAWN_CAPTURE;
	}
	(void) nfds;
	r = governed(cfd, &o, h->flags & CTL_STREAM);
	free(c.store);
	return r;
}

/* ---- contexts -------------------------------------------------------------------- */

/* A context is used by the requests that found it (users, under m->lock):
 * a close takes it off the list at once, and its last user frees it; one
 * whose interpreter could not start goes with its last user, so that
 * failed starts do not fill the sandbox's room for contexts. */
static ctx_ent *ctx_lookup(monitor *m, const char *name)
{
	ctx_ent *c = m->contexts;
	while (c && strcmp(c->name, name))
		c = c->next;
	return c;
}

static void ctx_unlink(monitor *m, ctx_ent *c)
{
	for (ctx_ent **pp = &m->contexts; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			m->n_contexts--;
			c->closed = true;
			return;
		}
}

static void ctx_put(monitor *m, ctx_ent *c)
{
	pthread_mutex_lock(&m->lock);
	bool last = --c->users == 0 && (c->closed || !c->ctx);
	if (last && !c->closed)
		ctx_unlink(m, c);
	pthread_mutex_unlock(&m->lock);
	if (last) {
		nsbox_context_free(c->ctx);
		pthread_mutex_destroy(&c->start);
		free(c);
	}
}

/* The context NAME, its interpreter started now if new (*created); the
 * caller ctx_put()s it. */
static ctx_ent *ctx_find(monitor *m, const char *name, const char *lang, bool *created, nsbox_error **err)
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
	if (c)
		c->users++;
	pthread_mutex_unlock(&m->lock);
	if (!c) {
		(void) nsbox_err(err, ENOMEM, "context", "start context '%s'", name);
		return NULL;
	}
	pthread_mutex_lock(&c->start);
	if (!c->ctx && nsbox_context_new(m->sb, lang, name, &c->ctx, err) == 0)
		*created = true;
	bool started = c->ctx != NULL;
	pthread_mutex_unlock(&c->start);
	if (!started) {
		ctx_put(m, c);
		return NULL;
	}
	return c;
}

int serve_cell(monitor *m, int cfd, const ctl_req *h, char **v, const int *fds)
{
	if (h->argc != 3)
		return refuse(cfd, EINVAL, "context", "a cell takes a context, a language and code");
	bool created;
	nsbox_error *e = NULL;
	ctx_ent *c = ctx_find(m, v[0], v[1], &created, &e);
	if (!c) {
		int r = reply_error(cfd, e, EINVAL);
		nsbox_error_free(e);
		return r;
	}
	nsbox_context *ctx = c->ctx;
	nsbox_run_options o = {
		.version = NSBOX_RUN_OPTIONS_VERSION,
		.flags = (h->flags & (CTL_CAPTURE | CTL_STREAM)) || !(h->flags & CTL_STDOUT) ? NSBOX_SPAWN_CAPTURE : 0,
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
	int r = governed(cfd, &o, h->flags & CTL_STREAM);
	ctx_put(m, c);
	return r;
}

int serve_context(monitor *m, int cfd, const ctl_req *h, char **v)
{
	nsbox_error *e = NULL;
	int r = 0;
	if (h->op == CTL_CONTEXT_NEW) {
		bool created;
		if (h->argc != 2)
			return refuse(cfd, EINVAL, "context", "a context takes a name and a language");
		ctx_ent *c = ctx_find(m, v[0], v[1], &created, &e);
		if (!c) {
			r = reply_error(cfd, e, EINVAL);
			nsbox_error_free(e);
			return r;
		}
		if (strcmp(nsbox_context_language(c->ctx), v[1]))
			r = refuse(cfd, EEXIST, "context", "context '%s' is a %s context, not %s", v[0],
			           nsbox_context_language(c->ctx), v[1]);
		else
			r = reply_json(cfd, json_pack("{s:s, s:s, s:b}", "name", v[0], "language", v[1], "created", created));
		ctx_put(m, c);
		return r;
	}
	if (h->argc != 1)
		return refuse(cfd, EINVAL, "context", "name the context");
	pthread_mutex_lock(&m->lock);
	ctx_ent *c = ctx_lookup(m, v[0]);
	if (c && c->ctx) {
		c->users++;
		if (h->op == CTL_CONTEXT_CLOSE)
			ctx_unlink(m, c);   /* freed by its last user: a cell running in it ends first */
	} else {
		c = NULL;
	}
	pthread_mutex_unlock(&m->lock);
	if (!c)
		return refuse(cfd, ENOENT, "context", "no context named '%.80s'", v[0]);
	if (h->op == CTL_INTERRUPT)
		nsbox_context_interrupt(c->ctx);
	else if (h->op == CTL_CONTEXT_RESTART)
		r = nsbox_context_restart(c->ctx, &e);
	ctx_put(m, c);
	if (r < 0) {
		r = reply_error(cfd, e, -r);
		nsbox_error_free(e);
		return r;
	}
	return ctl_send_reply(cfd, 0, NULL);
}
