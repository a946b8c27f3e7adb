/* Code contexts for `nsbox exec NAME --context C --lang L`: a persistent
 * interpreter (python/nsbox/contexts/agent.{py,js}, embedded at build time)
 * running as an exec of the long-lived sandbox, taking cells over its fd 3
 * (docs/contexts-protocol.md: 4-byte big-endian length, then JSON). The
 * monitor keeps the contexts; each runs one cell at a time.
 *
 * What the agent says is treated as hostile (it runs the sandbox's code):
 * frames are bounded, parsed by jansson, and only the fields we expect, of
 * the types we expect, are used. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "live/context.h"

#define FRAME_MAX (16u << 20)
#define READY_MS 30000
#define GRACE_MS 2000
#define CAPTURE_MAX 10240

const char *agent_python_text(const char *name);   /* generated: agent_python.c */
const char *agent_node_text(const char *name);     /* generated: agent_node.c */

struct context {
	char name[64];
	char lang[8];
	pthread_mutex_t lock;   /* one cell at a time */
	nsbox_sandbox *ex;      /* the interpreter, or NULL (start at the next cell) */
	int sock, out[2];
	unsigned cells;
	bool restarted;         /* the next cell's record says so */
	bool running;           /* a cell runs (context_interrupt) */
	context *next;
};

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double) t.tv_sec * 1e3 + (double) t.tv_nsec / 1e6;
}

static void stop_interp(context *c)
{
	if (c->ex) {
		(void) nsbox_sandbox_kill(c->ex, SIGKILL);
		nsbox_result *r = NULL;
		if (nsbox_sandbox_wait(c->ex, &r, NULL) == 0)
			nsbox_result_free(r);
		nsbox_sandbox_free(c->ex);
		c->ex = NULL;
	}
	int *fds[] = { &c->sock, &c->out[0], &c->out[1] };
	for (size_t i = 0; i < 3; i++)
		if (*fds[i] >= 0) {
			close(*fds[i]);
			*fds[i] = -1;
		}
}

/* Output of the interpreter: to the client's fds, or into a bounded
 * head-and-tail capture. */
typedef struct sink {
	int fd;                 /* pass-through, or -1 */
	char head[CAPTURE_MAX / 2], tail[CAPTURE_MAX / 2];
	size_t head_len, tail_len, tail_pos;
	uint64_t total;
} sink;

static void sink_feed(sink *s, const char *p, size_t n)
{
	s->total += n;
	if (s->fd >= 0) {
		while (n) {
			ssize_t w = write(s->fd, p, n);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return;   /* the client went: the cell goes on */
			p += w;
			n -= (size_t) w;
		}
		return;
	}
	size_t room = sizeof(s->head) - s->head_len, take = n < room ? n : room;
	memcpy(s->head + s->head_len, p, take);
	s->head_len += take;
	for (size_t i = take; i < n; i++) {   /* a ring of the last bytes */
		s->tail[s->tail_pos] = p[i];
		s->tail_pos = (s->tail_pos + 1) % sizeof(s->tail);
		if (s->tail_len < sizeof(s->tail))
			s->tail_len++;
	}
}

static json_t *sink_json(const sink *s, bool *truncated)
{
	size_t len = s->head_len + s->tail_len;
	*truncated = s->total > len;
	static const char mark[] = "\n[... output truncated ...]\n";
	char *buf = malloc(len + sizeof(mark));
	if (!buf)
		return json_null();
	memcpy(buf, s->head, s->head_len);
	size_t off = s->head_len;
	if (*truncated) {
		memcpy(buf + off, mark, sizeof(mark) - 1);
		off += sizeof(mark) - 1;
	}
	size_t start = s->tail_len < sizeof(s->tail) ? 0 : s->tail_pos;
	for (size_t i = 0; i < s->tail_len; i++)
		buf[off++] = s->tail[(start + i) % sizeof(s->tail)];
	json_t *j = json_stringn(buf, off);
	if (!j) {
		/* Not UTF-8 (a cell may print anything, or be cut mid-character):
		 * the bytes that are not ASCII become '?'. */
		for (size_t i = 0; i < off; i++)
			if ((unsigned char) buf[i] >= 0x80 || buf[i] == '\0')
				buf[i] = '?';
		j = json_stringn(buf, off);
	}
	free(buf);
	return j ? j : json_null();
}

static void pump(int fd, sink *s)
{
	char buf[65536];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		sink_feed(s, buf, (size_t) n);
}

static int send_frame(int fd, json_t *obj)
{
	char *text = json_dumps(obj, JSON_COMPACT | JSON_ENSURE_ASCII);
	if (!text)
		return -ENOMEM;
	size_t n = strlen(text);
	unsigned char hdr[4] = { (unsigned char) (n >> 24), (unsigned char) (n >> 16), (unsigned char) (n >> 8),
	                         (unsigned char) n };
	int r = 0;
	struct iovec iov[2] = { { hdr, 4 }, { text, n } };
	size_t left = n + 4;
	while (left && r == 0) {
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

/* The agent's next frame, pumping its output meanwhile, until deadline
 * (ms on the monotonic clock; 0: none). NULL at the deadline, at EOF, or
 * on a frame that breaks the protocol (*broken then). */
static json_t *recv_frame(context *c, double deadline, sink *out, sink *err, bool *broken, bool nag)
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
		/* Interrupting: SIGINT again every 100 ms until the reply (an
		 * interrupt that lands as the cell returns can be lost). */
		if (nag) {
			if (now_ms() - nagged >= 100) {
				(void) nsbox_sandbox_kill(c->ex, SIGINT);
				nagged = now_ms();
			}
			if (wait < 0 || wait > 100)
				wait = 100;
		}
		struct pollfd p[3] = { { .fd = c->sock, .events = POLLIN }, { .fd = c->out[0], .events = POLLIN },
		                       { .fd = c->out[1], .events = POLLIN } };
		int n = poll(p, 3, wait);
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

static int start_interp(context *c, nsbox_sandbox *sb, char *why, size_t whylen)
{
	bool py = !strcmp(c->lang, "python");
	const char *agent = py ? agent_python_text("agent") : agent_node_text("agent");
	const char *argv_py[] = { "python3", "-I", "-u", "-c", agent, NULL };
	const char *argv_node[] = { "node", "-e", agent, NULL };
	int sv[2] = { -1, -1 }, o[2] = { -1, -1 }, e[2] = { -1, -1 };
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 || pipe2(o, O_CLOEXEC) < 0 ||
	    pipe2(e, O_CLOEXEC) < 0) {
		snprintf(why, whylen, "start the context: %s", strerror(errno));
		int all[] = { sv[0], sv[1], o[0], o[1], e[0], e[1] };
		for (int i = 0; i < 6; i++)
			if (all[i] >= 0)
				close(all[i]);
		return -1;
	}
	nsbox_exec_options x = {
		.version = NSBOX_EXEC_OPTIONS_VERSION,
		.argv = py ? argv_py : argv_node,
		.stdin_fd = -1,
		.stdout_fd = o[1],
		.stderr_fd = e[1],
		.fd3 = sv[1],
		.signal_fd = -1,
		.timeout_ms = 0,
	};
	nsbox_error *err = NULL;
	int r = nsbox_sandbox_exec(sb, &x, &c->ex, &err);
	close(sv[1]);
	close(o[1]);
	close(e[1]);
	c->sock = sv[0];
	c->out[0] = o[0];
	c->out[1] = e[0];
	if (r < 0) {
		snprintf(why, whylen, "start the %s context: %s", c->lang, nsbox_error_message(err));
		nsbox_error_free(err);
		c->ex = NULL;
		stop_interp(c);
		return -1;
	}
	for (int i = 0; i < 2; i++)
		(void) fcntl(c->out[i], F_SETFL, O_NONBLOCK);
	sink discard_out = { .fd = -1 }, discard_err = { .fd = -1 };
	bool broken;
	json_t *hello = recv_frame(c, now_ms() + READY_MS, &discard_out, &discard_err, &broken, false);
	bool ok = hello && json_is_true(json_object_get(hello, "ready"));
	json_decref(hello);
	if (!ok) {
		bool t;
		json_t *msg = sink_json(&discard_err, &t);
		snprintf(why, whylen, "start the %s context: the interpreter ended before it was ready%s%.300s", c->lang,
		         discard_err.total ? ": " : "", json_string_value(msg) ? json_string_value(msg) : "");
		json_decref(msg);
		stop_interp(c);
		return -1;
	}
	return 0;
}

context *context_find(context **list, pthread_mutex_t *lock, const char *name, const char *lang, char *why,
                      size_t whylen)
{
	pthread_mutex_lock(lock);
	context *c = *list;
	while (c && strcmp(c->name, name))
		c = c->next;
	if (c && strcmp(c->lang, lang)) {
		snprintf(why, whylen, "context '%s' is a %s context, not %s", name, c->lang, lang);
		c = NULL;
	} else if (!c && (c = calloc(1, sizeof(*c)))) {
		snprintf(c->name, sizeof(c->name), "%s", name);
		snprintf(c->lang, sizeof(c->lang), "%s", lang);
		pthread_mutex_init(&c->lock, NULL);
		c->sock = c->out[0] = c->out[1] = -1;
		c->next = *list;
		*list = c;
	} else if (!c) {
		snprintf(why, whylen, "out of memory");
	}
	pthread_mutex_unlock(lock);
	return c;
}

void context_interrupt(context *c)
{
	/* c->ex changes only under c->lock, which the cell's thread holds
	 * while it runs; between cells there is nothing to interrupt. */
	nsbox_sandbox *ex = __atomic_load_n(&c->ex, __ATOMIC_ACQUIRE);
	if (ex && __atomic_load_n(&c->running, __ATOMIC_ACQUIRE))
		(void) nsbox_sandbox_kill(ex, SIGINT);
}

char *context_failed_record(const char *why)
{
	json_t *r = json_pack("{s:i, s:s, s:n, s:b, s:i, s:{s:s, s:i, s:s}}", "version", 1, "status", "setup_failed",
	                      "exit_code", "timed_out", 0, "exit_status", 125, "error", "step", "context", "errno", 0,
	                      "message", why);
	char *text = r ? json_dumps(r, JSON_COMPACT) : NULL;
	json_decref(r);
	return text;
}

void contexts_free(context **list)
{
	for (context *c = *list, *n; c; c = n) {
		n = c->next;
		pthread_mutex_lock(&c->lock);
		stop_interp(c);
		pthread_mutex_unlock(&c->lock);
		pthread_mutex_destroy(&c->lock);
		free(c);
	}
	*list = NULL;
}

static char *cell_record(const context *c, const char *sandbox_id, unsigned cell, const char *status,
                         int exit_code, bool timed_out, bool restarted, double ms, const sink *out,
                         const sink *err, const char *error)
{
	unsigned char raw[16] = { 0 };
	char id[33];
	(void) getrandom(raw, sizeof(raw), GRND_NONBLOCK);
	for (int i = 0; i < 16; i++)
		snprintf(id + 2 * i, 3, "%02x", raw[i]);
	char label[32];
	snprintf(label, sizeof(label), "<cell %u>", cell);
	bool ot = false, et = false;
	json_t *so = out->fd < 0 ? sink_json(out, &ot) : json_null();
	json_t *se = err->fd < 0 ? sink_json(err, &et) : json_null();
	int status_code = timed_out ? 124 : exit_code;
	json_t *r = json_pack("{s:i, s:s, s:s?, s:[s,s], s:s, s:o, s:n, s:b, s:b, s:b, s:f, s:i, s:o, s:o, s:I, s:I,"
	                      " s:b, s:b, s:{s:s, s:s, s:I, s:b}, s:o}",
	                      "version", 1, "id", id, "sandbox", sandbox_id, "command", c->lang, label,
	                      "status", status, "exit_code", timed_out ? json_null() : json_integer(exit_code),
	                      "signal", "timed_out", timed_out, "oom_killed", 0, "pids_limit_hit", 0,
	                      "duration_ms", (double) (long long) (ms * 1000) / 1000.0, "exit_status", status_code, "stdout", so, "stderr", se,
	                      "stdout_bytes", (json_int_t) out->total, "stderr_bytes", (json_int_t) err->total,
	                      "stdout_truncated", ot, "stderr_truncated", et,
	                      "context", "name", c->name, "language", c->lang, "cell", (json_int_t) cell,
	                      "restarted", restarted,
	                      "error", error ? json_pack("{s:s, s:i, s:s}", "step", "code", "errno", 0, "message", error)
	                                     : json_null());
	char *text = r ? json_dumps(r, JSON_COMPACT) : NULL;
	json_decref(r);
	if (text) {
		char *nl = realloc(text, strlen(text) + 2);
		if (nl) {
			strcat(nl, "\n");
			text = nl;
		}
	}
	return text;
}

int context_cell(context *c, nsbox_sandbox *sb, const char *code, uint64_t timeout_ms, bool restart,
                 int out_fd, int err_fd, char **record, char *why, size_t whylen)
{
	*record = NULL;
	pthread_mutex_lock(&c->lock);
	bool restarted = c->restarted;
	c->restarted = false;
	if (restart && c->ex) {
		stop_interp(c);
		restarted = true;
	}
	if (!c->ex) {
		if (c->cells)
			restarted = true;
		if (start_interp(c, sb, why, whylen) < 0) {
			pthread_mutex_unlock(&c->lock);
			return -1;
		}
	}
	if (!code) {   /* --restart alone */
		c->restarted = restarted;
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	unsigned cell = ++c->cells;
	sink out = { .fd = out_fd }, err = { .fd = err_fd };
	double t0 = now_ms();
	__atomic_store_n(&c->running, true, __ATOMIC_RELEASE);
	json_t *req = json_pack("{s:I, s:s}", "id", (json_int_t) cell, "code", code);
	int sent = req ? send_frame(c->sock, req) : -ENOMEM;
	json_decref(req);
	bool broken = sent < 0, timed_out = false;
	json_t *reply = NULL;
	if (!broken) {
		reply = recv_frame(c, timeout_ms ? t0 + (double) timeout_ms : 0, &out, &err, &broken, false);
		if (!reply && !broken) {
			/* The timeout: interrupt the cell (KeyboardInterrupt), keep the
			 * interpreter if it stops within the grace period. */
			timed_out = true;
			reply = recv_frame(c, now_ms() + GRACE_MS, &out, &err, &broken, true);
		}
	}
	__atomic_store_n(&c->running, false, __ATOMIC_RELEASE);
	for (int i = 0; i < 2 && c->out[i] >= 0; i++)
		pump(c->out[i], i ? &err : &out);
	double ms = now_ms() - t0;
	json_t *jid = reply ? json_object_get(reply, "id") : NULL;
	const char *st = reply ? json_string_value(json_object_get(reply, "status")) : NULL;
	json_t *jcode = reply ? json_object_get(reply, "exit_code") : NULL;
	const char *msg = reply ? json_string_value(json_object_get(reply, "error")) : NULL;
	int rc;
	char timeout_msg[160];
	snprintf(timeout_msg, sizeof(timeout_msg), "Code execution timed out after %llu ms",
	         (unsigned long long) timeout_ms);
	if (reply && json_is_integer(jid) && json_integer_value(jid) == (json_int_t) cell && st && json_is_integer(jcode)) {
		int code_ = (int) json_integer_value(jcode);
		if (code_ < 0 || code_ > 255)
			code_ = 1;
		if (timed_out && !strcmp(st, "interrupted")) {
			*record = cell_record(c, nsbox_sandbox_id(sb), cell, "timed_out", 0, true, restarted, ms, &out,
			                      &err, timeout_msg);
			rc = 124;
		} else {
			bool failed = strcmp(st, "ok") && !(!strcmp(st, "exit") && code_ == 0);
			*record = cell_record(c, nsbox_sandbox_id(sb), cell, "exited", code_, false, restarted, ms, &out,
			                      &err, failed ? (msg ? msg : "the cell failed") : NULL);
			rc = code_;
		}
	} else {
		/* No answer, or not one we can trust: the interpreter goes, and
		 * the next cell gets a fresh one. */
		stop_interp(c);
		c->restarted = true;
		if (timed_out) {
			strncat(timeout_msg, " (the interpreter did not stop and was restarted: its state is lost)",
			        sizeof(timeout_msg) - strlen(timeout_msg) - 1);
			*record = cell_record(c, nsbox_sandbox_id(sb), cell, "timed_out", 0, true, restarted, ms, &out, &err,
			                      timeout_msg);
			rc = 124;
		} else {
			*record = cell_record(c, nsbox_sandbox_id(sb), cell, "signaled", 137, false, restarted, ms, &out, &err,
			                      "the interpreter ended during the cell: its state is lost");
			rc = 137;
		}
	}
	/* Without --json the status alone would not say why, nor that the
	 * state is lost: the reason goes to the client's stderr. */
	if (err_fd >= 0 && (rc == 124 || rc == 137))
		dprintf(err_fd, "nsbox: exec: %s\n",
		        rc == 124 ? timeout_msg : "the interpreter ended during the cell: its state is lost");
	json_decref(reply);
	pthread_mutex_unlock(&c->lock);
	return rc;
}
