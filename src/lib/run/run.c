/* The governed run: nsbox_run(), the one entry point behind every door
 * (nsbox run and run-code, exec and its contexts, MCP, the Python SDK, its
 * pool and Celery). One sequence for all of them:
 *
 *   options -> the run's configuration (+ the code, as run-code places it)
 *   -> nsbox_config_validate() -> governance (audit log opened, import gate)
 *   -> start (a fresh sandbox, an exec in a long-lived one, a warm sandbox
 *      from a pool, or a context's cell) -> wait -> classify
 *   -> governance's end (gate verdict, audit line, artifacts) -> the record
 *
 * so that every door gets the same fields, the same classification and the
 * same bounds, and no door can skip the audit. Doors marshal, print and
 * cancel (nsbox_cancel); they decide nothing here. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/error.h"
#include "base/json.h"
#include "code/context.h"
#include "code/lang.h"
#include "config/conf.h"
#include "live/remote.h"
#include "sandbox/sandbox.h"

/* ---- cancelling ------------------------------------------------------------ */

struct nsbox_cancel {
	pthread_mutex_t lock;
	bool fired;
	int remote_fd;          /* a request to a started sandbox's monitor, or -1 */
	nsbox_sandbox *sb;      /* the command running now, or NULL */
	nsbox_context *ctx;     /* the cell running now, or NULL */
};

int nsbox_cancel_new(nsbox_cancel **out, nsbox_error **err)
{
	if (!out)
		return nsbox_err(err, EINVAL, "run", "create a cancel handle: no output pointer");
	nsbox_cancel *c = calloc(1, sizeof(*c));
	if (!c)
		return nsbox_err(err, ENOMEM, "run", "create a cancel handle");
	pthread_mutex_init(&c->lock, NULL);
	c->remote_fd = -1;
	*out = c;
	return 0;
}

void nsbox_cancel_fire(nsbox_cancel *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->fired = true;
	if (c->remote_fd >= 0)
		(void) shutdown(c->remote_fd, SHUT_WR);   /* the monitor cancels the run */
	else if (c->sb)
		(void) nsbox_sandbox_kill(c->sb, SIGKILL);
	else if (c->ctx)
		context_interrupt(c->ctx);
	pthread_mutex_unlock(&c->lock);
}

int nsbox_cancel_signal(nsbox_cancel *c, int sig)
{
	if (!c || sig <= 0 || sig >= NSIG)
		return -EINVAL;
	int r = -ESRCH;
	pthread_mutex_lock(&c->lock);
	if (c->remote_fd >= 0) {
		unsigned char b = (unsigned char) sig;
		r = send(c->remote_fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1 ? 0 : -errno;
	} else if (c->sb)
		r = nsbox_sandbox_kill(c->sb, sig);
	else if (c->ctx && (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT))
		r = (context_interrupt(c->ctx), 0);
	pthread_mutex_unlock(&c->lock);
	return r;
}

bool nsbox_cancel_fired(const nsbox_cancel *c)
{
	if (!c)
		return false;
	pthread_mutex_lock((pthread_mutex_t *) &c->lock);
	bool f = c->fired;
	pthread_mutex_unlock((pthread_mutex_t *) &c->lock);
	return f;
}

void nsbox_cancel_free(nsbox_cancel *c)
{
	if (!c)
		return;
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* The run has a handle now: a cancel that came first kills it at once. */
static void cancel_attach(nsbox_cancel *c, nsbox_sandbox *sb, nsbox_context *ctx)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->sb = sb;
	c->ctx = ctx;
	if (c->fired && sb)
		(void) nsbox_sandbox_kill(sb, SIGKILL);
	else if (c->fired && ctx)
		context_interrupt(ctx);
	pthread_mutex_unlock(&c->lock);
}

static void cancel_detach(nsbox_cancel *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->sb = NULL;
	c->ctx = NULL;
	pthread_mutex_unlock(&c->lock);
}

void cancel_attach_remote(nsbox_cancel *c, int fd)
{
	pthread_mutex_lock(&c->lock);
	c->remote_fd = fd;
	if (c->fired)
		(void) shutdown(fd, SHUT_WR);
	pthread_mutex_unlock(&c->lock);
}

void cancel_detach_remote(nsbox_cancel *c)
{
	pthread_mutex_lock(&c->lock);
	c->remote_fd = -1;
	pthread_mutex_unlock(&c->lock);
}

void context_cancel_attach(nsbox_cancel *c, nsbox_context *ctx)
{
	cancel_attach(c, NULL, ctx);
}

void context_cancel_detach(nsbox_cancel *c)
{
	cancel_detach(c);
}

/* ---- the run ------------------------------------------------------------------ */

enum target { T_FRESH, T_EXEC, T_POOL, T_CELL };

typedef struct run {
	const nsbox_run_options *o;
	enum target t;
	const code_lang *lang;
	const nsbox_config *gov_cfg;   /* whose audit.* and code.* apply */
	nsbox_config *own;             /* a configuration made for this run */
	nsbox_governor *gov;
	size_t warned;                 /* governor warnings already passed on */
	const char *cold_reason;       /* a pool's run that runs cold, and why */
} run;

static void warn(const run *r, const char *text)
{
	if (r->o->on_warning && text && *text)
		r->o->on_warning(r->o->warning_userdata, text);
}

/* The governor's warnings that are new since the last call, one by one. */
static void governor_warnings(run *r)
{
	const char *w = nsbox_governor_warnings(r->gov);
	size_t len = w ? strlen(w) : 0;
	while (r->warned < len) {
		const char *s = w + r->warned + (r->warned > 0 && w[r->warned] == '\n');
		size_t n = strcspn(s, "\n");
		char *one = strndup(s, n);
		warn(r, one);
		free(one);
		r->warned = (size_t) (s - w) + n;
	}
}

static int check_options(const nsbox_run_options *o, nsbox_error **err)
{
	if (!o || o->version < 1 || o->version > NSBOX_RUN_OPTIONS_VERSION)
		return nsbox_err(err, EINVAL, "run", "run: invalid options (version)");
	int targets = !!o->config + !!o->sandbox + !!o->context + !!o->pool;
	if (targets != 1)
		return nsbox_err_invalid(err, "run", "run: give exactly one of config, sandbox, context and pool");
	if (o->flags & ~(NSBOX_SPAWN_CAPTURE | NSBOX_EXEC_ENV_ADD | NSBOX_RUN_UNDUMPABLE | NSBOX_SPAWN_TTY |
	                 NSBOX_RUN_EXITING))
		return nsbox_err(err, EINVAL, "run", "run: unknown flags");
	if ((o->flags & NSBOX_SPAWN_TTY) && ((o->flags & NSBOX_SPAWN_CAPTURE) || o->context || o->pool))
		return nsbox_err_invalid(err, "run", "run: a terminal (NSBOX_SPAWN_TTY) is for a command whose output "
		                         "is not captured, fresh or in a long-lived sandbox");
	if (o->lang && !code_lang_find(o->lang))
		return nsbox_err_invalid(err, "code", "run code: unknown language '%s' (%s)", o->lang, code_lang_names());
	if (o->lang && o->argv)
		return nsbox_err_invalid(err, "run", "run: give a command or code, not both");
	if (o->lang && o->context && !code_lang_find(o->lang)->context_agent)
		return nsbox_err_invalid(err, "context", "run a cell: '%s' has no context (python, node)", o->lang);
	if ((o->context || o->pool) && !o->code)
		return nsbox_err_invalid(err, "run", "run: a %s runs code (give .code)", o->context ? "context" : "pool");
	if (o->code && !o->lang && !o->context && !o->pool)
		return nsbox_err_invalid(err, "run", "run: code needs a language");
	if (o->sandbox && !o->argv && !o->code)
		return nsbox_err_invalid(err, "run", "run in sandbox: no command given");
	if (o->workdir && o->workdir[0] != '/')
		return nsbox_err_invalid(err, "run", "run: the working directory '%s' is not absolute", o->workdir);
	return 0;
}

/* The configuration of a fresh run: the caller's, or a copy with the code
 * (as run-code places it), the command or the timeout of this run. */
static int fresh_config(run *r, const nsbox_config *base, nsbox_error **err)
{
	const nsbox_run_options *o = r->o;
	if (r->lang) {
		int rc = code_config(base, r->lang, o->code, o->code_len, &r->own, err);
		if (rc < 0)
			return rc;
	} else if (o->argv || o->timeout_ms || o->workdir) {   /* (NSBOX_TIMEOUT_NONE too) */
		if (config_copy(&r->own, base) < 0)
			return nsbox_err(err, ENOMEM, "run", "prepare the run");
	}
	if (r->own && o->argv) {
		int n = 0;
		while (o->argv[n])
			n++;
		int rc = nsbox_config_set_command(r->own, n, o->argv, err);
		if (rc < 0)
			return rc;
	}
	if (r->own && o->timeout_ms)
		r->own->timeout_ms = o->timeout_ms == NSBOX_TIMEOUT_NONE ? 0 : o->timeout_ms;
	if (r->own && o->workdir) {
		int rc = nsbox_config_set(r->own, "workdir", o->workdir, "run", err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The configuration a run's record (and audit line) describes. */
static const nsbox_config *record_config(const run *r)
{
	return r->own ? r->own : r->t == T_FRESH ? r->o->config : r->gov_cfg;
}

/* Where a run that never started would have run: the long-lived sandbox,
 * the context. */
static void failed_record_decorate(const run *r, nsbox_result *res)
{
	const char *id = r->t == T_EXEC ? nsbox_sandbox_id(r->o->sandbox)
	                 : r->t == T_CELL ? context_sandbox_id(r->o->context) : NULL;
	if (id)
		snprintf(res->sandbox_id, sizeof(res->sandbox_id), "%s", id);
	if (r->t == T_CELL)
		context_describe(r->o->context, res);
}

/* A record for a run that never started: why, in the record's own form. */
static nsbox_result *failed_record(const run *r, const nsbox_error *why)
{
	nsbox_result *res = result_new(record_config(r));
	if (!res)
		return NULL;
	res->status = NSBOX_STATUS_SETUP_FAILED;
	res->error = nsbox_error_dup(why);
	/* Asked to capture: the streams are there, and empty. */
	if (r->o->flags & NSBOX_SPAWN_CAPTURE) {
		res->captured = true;
		res->out[0] = strdup("");
		res->out[1] = strdup("");
	}
	failed_record_decorate(r, res);
	return res;
}

/* A pool's record: warm, or why not; what is preloaded; and the
 * configuration of the cold run it stands for (with the code, for the audit
 * line's digest and the artifacts). */
static void pool_record(const run *r, nsbox_result *res)
{
	const strv *pre = pool_preload(r->o->pool);
	buf b = { 0 };
	buf_puts(&b, "[");
	for (size_t i = 0; i < pre->n; i++) {
		if (i)
			buf_puts(&b, ",");
		json_cstr(&b, pre->v[i]);
	}
	buf_puts(&b, "]");
	res->preloaded_json = buf_steal(&b);
	res->pool_run = r->cold_reason ? POOL_RUN_COLD : POOL_RUN_WARM;
	res->cold_reason = r->cold_reason;
	if (!r->cold_reason) {   /* the warm sandbox's own configuration has the hook */
		nsbox_config *c = NULL;
		if (config_copy(&c, r->own) == 0) {
			nsbox_config_free(res->cfg);
			res->cfg = c;
		}
	}
}

/* Supervise a started command to its end: the caller's cancel reaches it
 * meanwhile. */
static int supervise(run *r, nsbox_sandbox *sb, nsbox_result **res, nsbox_error **err)
{
	const char *w = nsbox_sandbox_warning(sb);
	if (w)
		warn(r, w);
	int dumpable = -1;
	if ((r->o->flags & NSBOX_RUN_UNDUMPABLE) && r->t == T_FRESH) {
		/* The id maps are written: from here the supervisor need not be
		 * ptrace-able or dumpable by anyone. */
		dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
		(void) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	}
	cancel_attach(r->o->cancel, sb, NULL);
	int rc = nsbox_sandbox_wait(sb, res, err);
	cancel_detach(r->o->cancel);
	if (dumpable > 0)   /* an ordinary process again: sanitizers and debuggers need it */
		(void) prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0);
	return rc;
}

static int start_fresh(run *r, const nsbox_config *cfg, nsbox_sandbox **sb, nsbox_error **err)
{
	const nsbox_run_options *o = r->o;
	nsbox_spawn_options so = {
		.version = NSBOX_SPAWN_OPTIONS_VERSION,
		.flags = o->flags & (NSBOX_SPAWN_CAPTURE | NSBOX_SPAWN_TTY),
		.config = cfg,
		.stdin_fd = o->stdin_fd,
		.stdout_fd = o->stdout_fd,
		.stderr_fd = o->stderr_fd,
		.signal_fd = o->signal_fd,
		.stats_interval_ms = o->stats_interval_ms,
		.stats_fd = o->stats_interval_ms ? o->stats_fd : -1,
		.on_output = o->on_output,
		.output_userdata = o->output_userdata,
	};
	return nsbox_spawn(&so, sb, err);
}

static int start_exec(run *r, nsbox_sandbox **sb, nsbox_error **err)
{
	const nsbox_run_options *o = r->o;
	const char *argv_code[] = { r->lang ? r->lang->interp : NULL, r->lang ? r->lang->inline_flag : NULL, NULL,
	                            NULL };
	_cleanup_free_ char *code = NULL;
	if (r->lang) {
		/* An exec takes the code on its command line (no file can be
		 * placed in a running sandbox's setup); a NUL would cut it. */
		if (memchr(o->code, '\0', o->code_len))
			return nsbox_err_invalid(err, "code", "run code in sandbox: the code contains a NUL byte");
		code = strndup(o->code, o->code_len);
		if (!code)
			return nsbox_err(err, ENOMEM, "exec", "run code in sandbox");
		argv_code[2] = code;
	}
	nsbox_exec_options xo = {
		.version = NSBOX_EXEC_OPTIONS_VERSION,
		.flags = o->flags & (NSBOX_SPAWN_CAPTURE | NSBOX_EXEC_ENV_ADD | NSBOX_SPAWN_TTY),
		.argv = r->lang ? argv_code : o->argv,
		.envp = o->envp,
		.workdir = o->workdir,
		.stdin_fd = o->stdin_fd,
		.stdout_fd = o->stdout_fd,
		.stderr_fd = o->stderr_fd,
		.fd3 = -1,
		.timeout_ms = o->timeout_ms,
		.signal_fd = o->signal_fd,
		.on_output = o->on_output,
		.output_userdata = o->output_userdata,
	};
	return nsbox_sandbox_exec(o->sandbox, &xo, sb, err);
}

/* Whether a warm sandbox can serve this call exactly as a cold run would;
 * the reason when not. */
static const char *cold_reason(const run *r)
{
	const nsbox_run_options *o = r->o;
	if (!pool_lang(o->pool))
		return "the pool runs no code";
	if (o->lang && strcmp(o->lang, pool_lang(o->pool)->name))
		return "the pool runs another language";
	if (o->stdin_fd >= 0)
		return "stdin of its own";
	if (o->workdir || o->envp)
		return "a working directory or environment of its own";
	if (o->stats_interval_ms)
		return "resource samples";
	return NULL;
}

static int take_warm(run *r, nsbox_sandbox **sb, nsbox_error **err)
{
	const nsbox_run_options *o = r->o;
	int rc = nsbox_pool_take(o->pool, o->code, o->code_len, sb, err);
	if (rc < 0)
		return rc;
	/* The pool spawned it capturing; the caller's callback and choice of
	 * streams apply from the take on. */
	if (o->flags & NSBOX_SPAWN_CAPTURE) {
		(*sb)->on_output = o->on_output;
		(*sb)->output_userdata = o->output_userdata;
	}
	(*sb)->signal_fd = o->signal_fd;
	/* The supervisor arms the timeout when it starts waiting: this run's
	 * own, counted from the take like the pool's. */
	if (o->timeout_ms)
		(*sb)->plan->timeout_ms = o->timeout_ms == NSBOX_TIMEOUT_NONE ? 0 : o->timeout_ms;
	return 0;
}

/* Start, supervise and free the command of a fresh run, an exec or a
 * pool's run; *res is its record, or a failed start's. */
static int run_command(run *r, nsbox_result **res, nsbox_error **err)
{
	nsbox_sandbox *sb = NULL;
	nsbox_error *e = NULL;
	int rc;
	if (nsbox_cancel_fired(r->o->cancel))
		return nsbox_err(err, ECANCELED, "run", "run cancelled before it started");
	switch (r->t) {
	case T_FRESH: rc = start_fresh(r, record_config(r), &sb, &e); break;
	case T_EXEC: rc = start_exec(r, &sb, &e); break;
	case T_POOL: rc = r->cold_reason ? start_fresh(r, r->own, &sb, &e) : take_warm(r, &sb, &e); break;
	default: rc = -EINVAL; break;
	}
	if (rc == 0 && sb && r->t == T_FRESH)
		sb->exiting = r->o->flags & NSBOX_RUN_EXITING;
	if (rc == 0) {
		rc = supervise(r, sb, res, &e);
		if (r->t == T_POOL && !r->cold_reason)
			nsbox_pool_release(r->o->pool, sb);   /* its teardown off the caller's path */
		else
			nsbox_sandbox_free(sb);
	}
	if (rc < 0 && rc != -ECANCELED) {
		/* A failed start is a run too: its record, audit line, artifacts. */
		*res = failed_record(r, e);
		rc = *res ? 0 : nsbox_err(err, ENOMEM, "run", "record the failed run");
	} else if (rc < 0 && err) {
		*err = TAKE_PTR(e);
	}
	nsbox_error_free(e);
	return rc;
}

static void run_free(run *r)
{
	nsbox_governor_free(r->gov);
	nsbox_config_free(r->own);
}

int nsbox_run(const nsbox_run_options *o, nsbox_result **out, nsbox_error **err)
{
	if (!out)
		return nsbox_err(err, EINVAL, "run", "run: no output pointer");
	*out = NULL;
	int rc = check_options(o, err);
	if (rc < 0)
		return rc;
	/* A started sandbox's monitor runs it, governed there. */
	if (o->sandbox && o->sandbox->remote)
		return remote_run(o, o->sandbox, NULL, out, err);
	if (o->context && context_remote(o->context))
		return remote_run(o, context_remote(o->context), o->context, out, err);
	run r = { .o = o, .lang = o->lang ? code_lang_find(o->lang) : NULL };
	nsbox_error *e = NULL;
	nsbox_result *res = NULL;
	const void *code = o->code;
	size_t code_len = o->code_len;
	if (o->config) {
		r.t = T_FRESH;
		r.gov_cfg = o->config;
		rc = fresh_config(&r, o->config, &e);
	} else if (o->sandbox) {
		r.t = T_EXEC;
		r.gov_cfg = sandbox_config(o->sandbox);
		rc = r.gov_cfg ? 0 : nsbox_err_invalid(&e, "exec", "run in sandbox: not a long-lived sandbox");
	} else if (o->pool) {
		/* A pool's run is described, audited and kept as the cold run it
		 * stands for: run-code's configuration with this code. */
		r.t = T_POOL;
		r.lang = pool_lang(o->pool);
		r.cold_reason = cold_reason(&r);
		rc = r.lang ? fresh_config(&r, pool_run_config(o->pool), &e)
		            : nsbox_err_invalid(&e, "pool", "run in pool: %s", r.cold_reason);
		r.gov_cfg = r.own;
	} else {
		r.t = T_CELL;
		r.gov_cfg = context_config(o->context);
		r.lang = code_lang_find(context_language(o->context));
		if (o->lang && strcmp(o->lang, r.lang->name))
			rc = nsbox_err_invalid(&e, "context", "run a cell: context '%s' is a %s context, not %s",
			                       nsbox_context_name(o->context), r.lang->name, o->lang);
	}
	if (rc == 0)
		rc = nsbox_config_validate(record_config(&r), &e);
	if (rc < 0)
		goto failed;
	/* Before anything starts: the audit log (a run that could not be
	 * audited is refused) and the Python import gate. */
	rc = nsbox_governor_begin(r.gov_cfg, r.lang ? r.lang->name : NULL, code, code_len, &r.gov, &res, &e);
	governor_warnings(&r);
	if (rc < 0 && res) {
		/* Refused by the import gate: the record says why, and the
		 * governor has already audited and kept it (under its id). */
		failed_record_decorate(&r, res);
		nsbox_error_free(e);
		*out = res;
		run_free(&r);
		return 0;
	}
	if (rc < 0)
		goto failed;
	if (r.t == T_CELL) {
		rc = context_cell(o->context, o, &res, err);
	} else {
		rc = run_command(&r, &res, err);
		if (rc == 0 && r.t == T_POOL)
			pool_record(&r, res);
		if (rc == 0 && r.lang && nsbox_result_classify_code(res, r.lang->name, &e) < 0) {
			nsbox_result_free(res);
			goto failed;   /* (e says why) */
		}
	}
	if (rc < 0) {   /* cancelled before it started, or out of memory */
		run_free(&r);
		return rc;
	}
	/* The gate's verdict goes into the record, which the audit line and
	 * the artifacts then take as it is returned. */
	rc = nsbox_governor_end(r.gov, res, &e);
	governor_warnings(&r);
	*out = res;
	run_free(&r);
	if (rc < 0) {
		if (err)
			*err = e;
		else
			nsbox_error_free(e);
		return rc;
	}
	return 0;
failed:
	/* Nothing started: the configuration, the audit log or a start that
	 * could not be tried. Still a run with a record (audited when the
	 * governor is there). */
	res = failed_record(&r, e);
	if (res && r.gov) {
		nsbox_error *ae = NULL;
		(void) nsbox_governor_end(r.gov, res, &ae);
		governor_warnings(&r);
		nsbox_error_free(ae);
	}
	nsbox_error_free(e);
	run_free(&r);
	if (!res)
		return nsbox_err(err, ENOMEM, "run", "record the failed run");
	*out = res;
	return 0;
}
