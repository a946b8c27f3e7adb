/* Code contexts: a persistent interpreter (code/agents/context_*, embedded
 * at build time) running as an exec of a long-lived sandbox, taking cells
 * over its fd 3 (docs/contexts-protocol.md: a 4-byte big-endian length,
 * then JSON). A cell is a run like any other: nsbox_run() with .context,
 * governed the same way, and its record is the library's record, with
 * the same classification (an OOM kill is oom_killed), the same output
 * bound (limits.output), and the sandbox's resources and limits.
 *
 * What the agent says is hostile (it runs the sandbox's code): frames are
 * bounded, parsed by jansson, and only the fields we expect, of the types
 * we expect, are used; the interpreter process itself is watched, not only
 * its socket. What a cell's end was, and its record, are made in
 * context_result.c. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "base/strv.h"
#include "code/context.h"
#include "code/context_cell.h"
#include "code/lang.h"
#include "config/conf.h"
#include "live/ctl.h"
#include "live/remote.h"
#include "sandbox/sandbox.h"

#define FRAME_MAX (16u << 20)
#define READY_MS 30000
#define GRACE_MS 2000

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double) t.tv_sec * 1e3 + (double) t.tv_nsec / 1e6;
}

/* ---- the interpreter ------------------------------------------------------------ */

/* Kill the interpreter and collect its end (its record, when asked). */
static void stop_interp(nsbox_context *c, nsbox_result **ended)
{
	if (c->ex) {
		nsbox_sandbox *ex = c->ex;
		__atomic_store_n(&c->ex, NULL, __ATOMIC_RELEASE);
		(void) nsbox_sandbox_kill(ex, SIGKILL);
		nsbox_result *r = NULL;
		if (nsbox_sandbox_wait(ex, &r, NULL) == 0 && ended)
			*ended = r;
		else
			nsbox_result_free(r);
		nsbox_sandbox_free(ex);
	}
	int *fds[] = { &c->sock, &c->out[0], &c->out[1] };
	for (size_t i = 0; i < 3; i++)
		if (*fds[i] >= 0) {
			close(*fds[i]);
			*fds[i] = -1;
		}
}

/* Where a cell's output goes: a bounded capture (the record's), the
 * caller's fd, and the caller's callback. */
typedef struct sink {
	int stream;             /* 1 or 2 */
	int fd;                 /* pass-through, or -1 */
	capture *cap;           /* or NULL */
	const nsbox_run_options *o;
} sink;

static void sink_feed(sink *s, const char *p, size_t n)
{
	if (s->cap)
		(void) capture_feed(s->cap, p, n);
	if (s->o && s->o->on_output)
		s->o->on_output(s->o->output_userdata, s->stream, p, n);
	while (s->fd >= 0 && n) {
		ssize_t w = write(s->fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;   /* the reader went: the cell goes on */
		p += w;
		n -= (size_t) w;
	}
}

static void pump(int fd, sink *s)
{
	char chunk[65536];
	ssize_t n;
	while (fd >= 0 && (n = read(fd, chunk, sizeof(chunk))) > 0)
		sink_feed(s, chunk, (size_t) n);
}

static int send_frame(int fd, json_t *obj)
{
	char *text = json_dumps(obj, JSON_COMPACT | JSON_ENSURE_ASCII);
	if (!text)
		return -ENOMEM;
	size_t n = strlen(text);
	unsigned char hdr[4] = { (unsigned char) (n >> 24), (unsigned char) (n >> 16), (unsigned char) (n >> 8),
	                         (unsigned char) n };
	struct iovec iov[2] = { { hdr, 4 }, { text, n } };
	int r = 0;
	size_t left = n + 4;
	while (left) {
		ssize_t w = writev(fd, iov, 2);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			r = -EPIPE;
			break;
		}
		left -= (size_t) w;
		for (int i = 0; i < 2 && w > 0; i++) {
			size_t t = (size_t) w < iov[i].iov_len ? (size_t) w : iov[i].iov_len;
			iov[i].iov_base = (char *) iov[i].iov_base + t;
			iov[i].iov_len -= t;
			w -= (ssize_t) t;
		}
	}
	free(text);
	return r;
}

/* The agent's next frame, pumping its output meanwhile, until `deadline`
 * (ms on the monotonic clock; 0: none). NULL at the deadline (*broken
 * false), or at EOF or on a frame that breaks the protocol (*broken). With
 * `nag`, SIGINT every 100 ms until the reply: an interrupt that lands as a
 * cell returns can be lost (docs/contexts-protocol.md). */
static json_t *recv_frame(nsbox_context *c, double deadline, sink *out, sink *err, bool *broken, bool nag)
{
	unsigned char hdr[4];
	double nagged = 0;
	size_t got = 0, need = 4;
	char *body = NULL;
	*broken = false;
	for (;;) {
		int wait = -1;
		if (deadline > 0) {
			double left = deadline - now_ms();
			if (left <= 0) {
				free(body);
				return NULL;
			}
			wait = (int) left + 1;
		}
		if (nag) {
			if (now_ms() - nagged >= 100) {
				(void) nsbox_sandbox_kill(c->ex, SIGINT);
				nagged = now_ms();
			}
			if (wait < 0 || wait > 100)
				wait = 100;
		}
		struct pollfd p[4] = { { .fd = c->sock, .events = POLLIN }, { .fd = c->out[0], .events = POLLIN },
		                       { .fd = c->out[1], .events = POLLIN },
		                       { .fd = nsbox_sandbox_pidfd(c->ex), .events = POLLIN } };
		int n = poll(p, 4, wait);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			*broken = true;
			free(body);
			return NULL;
		}
		for (int i = 1; i < 3; i++)
			if (p[i].revents)
				pump(c->out[i - 1], i == 1 ? out : err);
		if (!p[0].revents && p[3].revents) {
			/* The interpreter is gone and said nothing more. */
			*broken = true;
			free(body);
			return NULL;
		}
		if (!p[0].revents)
			continue;
		ssize_t r = need == 4 && !body ? read(c->sock, hdr + got, 4 - got) : read(c->sock, body + got, need - got);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0) {
			*broken = true;
			free(body);
			return NULL;
		}
		got += (size_t) r;
		if (got < need)
			continue;
		if (!body) {
			uint32_t len = (uint32_t) hdr[0] << 24 | (uint32_t) hdr[1] << 16 | (uint32_t) hdr[2] << 8 | hdr[3];
			if (len > FRAME_MAX || !(body = malloc(len ? len : 1))) {
				*broken = true;
				return NULL;
			}
			need = len;
			got = 0;
			if (len)
				continue;
		}
		json_t *j = json_loadb(body, need, JSON_REJECT_DUPLICATES, NULL);
		free(body);
		if (!json_is_object(j)) {
			json_decref(j);
			*broken = true;
			return NULL;
		}
		return j;
	}
}

static int start_interp(nsbox_context *c, nsbox_error **err)
{
	const char *agent = code_agent_text(c->lang->context_agent);
	const char *argv_py[] = { c->lang->interp, "-I", "-u", "-c", agent, NULL };
	const char *argv_node[] = { c->lang->interp, "-e", agent, NULL };
	bool py = !strcmp(c->lang->name, "python");
	int sv[2] = { -1, -1 }, o[2] = { -1, -1 }, e[2] = { -1, -1 };
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 || pipe2(o, O_CLOEXEC) < 0 ||
	    pipe2(e, O_CLOEXEC) < 0) {
		int en = errno;
		int all[] = { sv[0], sv[1], o[0], o[1], e[0], e[1] };
		for (int i = 0; i < 6; i++)
			if (all[i] >= 0)
				close(all[i]);
		return nsbox_err(err, en, "context", "start the %s context", c->lang->name);
	}
	nsbox_exec_options x = {
		.version = NSBOX_EXEC_OPTIONS_VERSION,
		/* Our own pipes, read while the interpreter lives. */
		.flags = NSBOX_SPAWN_DIRECT_FDS,
		.argv = py ? argv_py : argv_node,
		.stdin_fd = -1,
		.stdout_fd = o[1],
		.stderr_fd = e[1],
		.fd3 = sv[1],
		.signal_fd = -1,
	};
	nsbox_sandbox *ex = NULL;
	int r = nsbox_sandbox_exec(c->sb, &x, &ex, err);
	close(sv[1]);
	close(o[1]);
	close(e[1]);
	c->sock = sv[0];
	c->out[0] = o[0];
	c->out[1] = e[0];
	if (r < 0) {
		stop_interp(c, NULL);
		return nsbox_err_prefix(err, r, "start the %s context", c->lang->name);
	}
	__atomic_store_n(&c->ex, ex, __ATOMIC_RELEASE);
	for (int i = 0; i < 2; i++)
		(void) fcntl(c->out[i], F_SETFL, O_NONBLOCK);
	capture text;
	capture_init(&text, 600);
	sink discard_out = { .stream = 1, .fd = -1 }, keep_err = { .stream = 2, .fd = -1, .cap = &text };
	bool broken;
	json_t *hello = recv_frame(c, now_ms() + READY_MS, &discard_out, &keep_err, &broken, false);
	bool ok = hello && json_is_true(json_object_get(hello, "ready"));
	json_decref(hello);
	if (!ok) {
		size_t len = 0;
		bool t;
		char *why = capture_text(&text, &len, &t);
		if (why)
			why[len = text_trim_end(why, len)] = '\0';
		nsbox_result *ended = NULL;
		stop_interp(c, &ended);
		if (ended && ended->exec_failed && ended->error) {
			/* The interpreter is not there (or cannot run): the
			 * exec's own words, and what to do about it. */
			const char *how = nsbox_error_message(ended->error);   /* with the kernel's words */
			r = ended->exec_errno == ENOENT
				? nsbox_err_hint(err, -ENOENT, "context", "an image that has it, such as the default one",
				                 "start the %s context: the %s interpreter is not available in the image (%s)",
				                 c->lang->name, c->lang->name, how)
				: nsbox_err(err, -ended->exec_errno, "context", "start the %s context: %s", c->lang->name, how);
		} else {
			r = nsbox_err(err, ESRCH, "context",
			              "start the %s context: the interpreter ended before it was ready%s%.400s",
			              c->lang->name, len ? ": " : "", len && why ? why : "");
		}
		nsbox_result_free(ended);
		free(why);
	}
	capture_free(&text);
	return r;
}

/* ---- the public handle ------------------------------------------------------------ */

/* A context of a started sandbox: its monitor's, by name. One made with no
 * name is this handle's (a generated name; closed with the handle); a
 * named one is found or made, and stays until the sandbox ends. */
static int remote_context(nsbox_sandbox *sb, const code_lang *l, const char *name, nsbox_context **out,
                          nsbox_error **err)
{
	char gen[64];
	if (!name) {
		unsigned char rnd[6] = { 0 };
		(void) getrandom(rnd, sizeof(rnd), GRND_NONBLOCK);
		snprintf(gen, sizeof(gen), "%s-%02x%02x%02x%02x%02x%02x", l->name, rnd[0], rnd[1], rnd[2], rnd[3], rnd[4],
		         rnd[5]);
	}
	nsbox_context *c = calloc(1, sizeof(*c));
	if (!c)
		return nsbox_err(err, ENOMEM, "context", "create a context");
	bool created = false;
	int r = remote_context_new(sb, l->name, name ? name : gen, &created, err);
	if (r < 0) {
		free(c);
		return r;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->sb = sb;
	c->lang = l;
	c->remote = true;
	c->owned = !name;
	c->sock = c->out[0] = c->out[1] = -1;
	snprintf(c->name, sizeof(c->name), "%s", name ? name : gen);
	*out = c;
	return 0;
}

nsbox_sandbox *context_remote(const nsbox_context *c)
{
	return c && c->remote ? c->sb : NULL;
}

int nsbox_context_new(nsbox_sandbox *sb, const char *lang, const char *name, nsbox_context **out,
                      nsbox_error **err)
{
	if (!out || !sb || !lang)
		return nsbox_err(err, EINVAL, "context", "create a context: missing argument");
	*out = NULL;
	const code_lang *l = code_lang_find(lang);
	if (!l || !l->context_agent)
		return nsbox_err_invalid(err, "context", "create a context: '%s' has no context (python, node)", lang);
	if (sb->remote)
		return remote_context(sb, l, name, out, err);
	if (!sandbox_config(sb))
		return nsbox_err_invalid(err, "context", "create a context: not a long-lived sandbox (NSBOX_SPAWN_KEEP)");
	if (name && strlen(name) >= sizeof(((nsbox_context *) NULL)->name))
		return nsbox_err_invalid(err, "context", "create a context: the name is longer than 63 bytes");
	nsbox_context *c = calloc(1, sizeof(*c));
	if (!c)
		return nsbox_err(err, ENOMEM, "context", "create a context");
	pthread_mutex_init(&c->lock, NULL);
	c->sb = sb;
	c->lang = l;
	snprintf(c->name, sizeof(c->name), "%s", name ? name : l->name);
	c->sock = c->out[0] = c->out[1] = -1;
	int r = start_interp(c, err);
	if (r < 0) {
		nsbox_context_free(c);
		return r;
	}
	*out = c;
	return 0;
}

int nsbox_context_restart(nsbox_context *c, nsbox_error **err)
{
	if (!c)
		return nsbox_err(err, EINVAL, "context", "restart a context: missing argument");
	if (c->remote) {
		int r = remote_context_op(c->sb, CTL_CONTEXT_RESTART, c->name, err);
		c->restarted = r == 0;
		return r;
	}
	pthread_mutex_lock(&c->lock);
	stop_interp(c, NULL);
	int r = start_interp(c, err);
	c->restarted = true;
	pthread_mutex_unlock(&c->lock);
	return r;
}

void nsbox_context_interrupt(nsbox_context *c)
{
	if (c && c->remote)
		(void) remote_context_op(c->sb, CTL_INTERRUPT, c->name, NULL);
	else if (c)
		context_interrupt(c);
}

const char *nsbox_context_language(const nsbox_context *c) { return c ? c->lang->name : NULL; }
const char *nsbox_context_name(const nsbox_context *c) { return c ? c->name : NULL; }

void nsbox_context_free(nsbox_context *c)
{
	if (!c)
		return;
	if (c->remote) {
		if (c->owned)
			(void) remote_context_op(c->sb, CTL_CONTEXT_CLOSE, c->name, NULL);
		pthread_mutex_destroy(&c->lock);
		free(c);
		return;
	}
	pthread_mutex_lock(&c->lock);
	stop_interp(c, NULL);
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* ---- for nsbox_run ------------------------------------------------------------------ */

const nsbox_config *context_config(const nsbox_context *c) { return sandbox_config(c->sb); }
const char *context_language(const nsbox_context *c) { return c->lang->name; }
const char *context_sandbox_id(const nsbox_context *c) { return nsbox_sandbox_id(c->sb); }

void context_interrupt(nsbox_context *c)
{
	/* c->ex changes only under c->lock, which the cell's thread holds
	 * while it runs; between cells there is nothing to interrupt. */
	nsbox_sandbox *ex = __atomic_load_n(&c->ex, __ATOMIC_ACQUIRE);
	if (ex && __atomic_load_n(&c->running, __ATOMIC_ACQUIRE))
		(void) nsbox_sandbox_kill(ex, SIGINT);
}

void context_describe(const nsbox_context *c, nsbox_result *r)
{
	r->is_cell = true;
	snprintf(r->cell_context, sizeof(r->cell_context), "%s", c->name);
	snprintf(r->cell_lang, sizeof(r->cell_lang), "%s", c->lang->name);
}

int context_cell(nsbox_context *c, const nsbox_run_options *o, nsbox_result **res, nsbox_error **err)
{
	*res = NULL;
	if (nsbox_cancel_fired(o->cancel))
		return nsbox_err(err, ECANCELED, "run", "cell cancelled before it started");
	json_t *req = json_pack("{s:I, s:s%}", "id", (json_int_t) c->cells + 1, "code", (const char *) o->code,
	                        o->code_len);
	if (!req)
		return nsbox_err_invalid(err, "code", "run a cell: the code is not UTF-8 text");
	pthread_mutex_lock(&c->lock);
	bool restarted = c->restarted;
	c->restarted = false;
	nsbox_error *e = NULL;
	if (!c->ex) {
		restarted |= c->cells > 0;
		if (start_interp(c, &e) < 0) {
			c->restarted = true;
			pthread_mutex_unlock(&c->lock);
			json_decref(req);
			nsbox_result *r = context_failed_record(c, e);
			if (r)
				e = NULL;
			nsbox_error_free(e);
			*res = r;
			return r ? 0 : nsbox_err(err, ENOMEM, "context", "record the cell");
		}
	}
	unsigned cell = ++c->cells;
	(void) json_object_set_new(req, "id", json_integer((json_int_t) cell));
	const nsbox_config *cfg = sandbox_config(c->sb);
	uint64_t timeout_ms = o->timeout_ms == NSBOX_TIMEOUT_NONE ? 0 : o->timeout_ms ? o->timeout_ms : cfg->timeout_ms;
	bool captured = o->flags & NSBOX_SPAWN_CAPTURE;
	capture caps[2];
	capture_init(&caps[0], c->sb->plan->output_cap);
	capture_init(&caps[1], c->sb->plan->output_cap);
	sink out = { 1, captured ? -1 : o->stdout_fd, captured ? &caps[0] : NULL, o };
	sink errs = { 2, captured ? -1 : o->stderr_fd, captured ? &caps[1] : NULL, o };
	if (!captured && out.fd < 0)
		out.fd = 1;
	if (!captured && errs.fd < 0)
		errs.fd = 2;
	cg_stats base = { 0 };
	if (c->sb->cg)
		cgroup_counters(c->sb->cg, &base);
	double t0 = now_ms();
	context_cancel_attach(o->cancel, c);
	__atomic_store_n(&c->running, true, __ATOMIC_RELEASE);
	bool broken = send_frame(c->sock, req) < 0, timed_out = false;
	json_decref(req);
	json_t *reply = NULL;
	if (!broken) {
		reply = recv_frame(c, timeout_ms ? t0 + (double) timeout_ms : 0, &out, &errs, &broken, false);
		if (!reply && !broken) {
			/* The timeout: interrupt the cell (KeyboardInterrupt), keep the
			 * interpreter if it stops within the grace period. */
			timed_out = true;
			reply = recv_frame(c, now_ms() + GRACE_MS, &out, &errs, &broken, true);
		}
	}
	__atomic_store_n(&c->running, false, __ATOMIC_RELEASE);
	context_cancel_detach(o->cancel);
	for (int i = 0; i < 2; i++)
		pump(c->out[i], i ? &errs : &out);
	double ms = now_ms() - t0;
	cell_end end = { .status = NSBOX_STATUS_EXITED };
	json_t *jid = reply ? json_object_get(reply, "id") : NULL;
	char *results = NULL;
	if (reply && json_is_integer(jid) && json_integer_value(jid) == (json_int_t) cell &&
	    json_is_string(json_object_get(reply, "status")) && json_is_integer(json_object_get(reply, "exit_code"))) {
		context_cell_reply(c, reply, timed_out, timeout_ms, &end);
		results = context_cell_results(reply);
	} else {
		/* No answer, or not one we can trust: the interpreter goes (what
		 * it printed last is kept), and the next cell gets a fresh one. */
		nsbox_result *ended = NULL;
		stop_interp(c, &ended);
		cg_stats now = { 0 };
		if (c->sb->cg)
			cgroup_counters(c->sb->cg, &now);
		bool oom = now.oom_kills > base.oom_kills;
		context_cell_lost(c, ended, oom, timed_out, timeout_ms, cfg->memory, &end);
		nsbox_result_free(ended);
		c->restarted = true;
	}
	json_decref(reply);
	nsbox_result *r = context_cell_record(c, cell, restarted, &end, ms, caps, captured, &base, timeout_ms);
	if (r)
		r->results_json = results;
	else
		free(results);
	pthread_mutex_unlock(&c->lock);
	capture_free(&caps[0]);
	capture_free(&caps[1]);
	if (!r)
		return nsbox_err(err, ENOMEM, "context", "record the cell");
	*res = r;
	return 0;
}
