/* `nsbox mcp [RUN OPTIONS]`: a Model Context Protocol server on stdio.
 * JSON-RPC 2.0, one message per line. Every client byte is hostile: it is
 * parsed by jansson (strict: valid UTF-8, no trailing garbage, bounded
 * nesting), a line longer than MAX_MSG is discarded with an error, and any
 * malformed message gets a JSON-RPC error while the server keeps serving.
 * stdout carries only protocol messages; diagnostics go to stderr. Tool
 * calls run as child processes, so several can run at once and a
 * notifications/cancelled stops one (its sandbox is killed). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "mcp/mcp.h"

#define MAX_MSG (4u << 20)
#define MAX_RECORD (64u << 20)
#define MAX_CALLS MCP_MAX_CALLS

/* Newest first: the answer to a version we do not know. */
static const char *const versions[] = { "2025-11-25", "2025-06-18", "2025-03-26" };

static const char mcp_usage[] =
	"Usage: nsbox mcp [--max-sandboxes N] [--sandbox-idle-timeout D] [RUN OPTIONS]\n"
	"Serve the tools run_code and run_command, and the stateful sandbox_* tools, to a\n"
	"Model Context Protocol client on stdin/stdout. The options (and --policy) are the\n"
	"ceiling for every call: a call may only lower the timeout. --max-sandboxes (default\n"
	"4; 0: no sandbox_* tools) bounds the sandboxes a client keeps; each ends after\n"
	"--sandbox-idle-timeout (default 10m) without a call. See nsbox(1), MCP SERVER.\n";

extern char **environ;

static void send_msg(const mcp_server *srv, json_t *m)
{
	char *s = m ? json_dumps(m, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
	json_decref(m);
	if (!s) {
		print_msg("mcp: cannot render a message (out of memory)");
		return;
	}
	size_t n = strlen(s);
	s[n] = '\n';   /* replaces the NUL: written with its length */
	const char *p = s;
	n++;
	while (n) {
		ssize_t w = write(srv->out_fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			break;
		p += w;
		n -= (size_t) w;
	}
	free(s);
}

static void send_error(const mcp_server *s, json_t *id, int code, const char *msg)
{
	send_msg(s, json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error",
	                   "code", code, "message", msg));
}

static void send_result(const mcp_server *s, json_t *id, json_t *result)
{
	send_msg(s, json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result ? result : json_object()));
}

static json_t *initialize(mcp_server *s, json_t *params, const char **err)
{
	const char *want = json_string_value(json_object_get(params, "protocolVersion"));
	if (!json_is_object(params) || !want) {
		*err = "invalid params: initialize needs a string 'protocolVersion'";
		return NULL;
	}
	const char *v = versions[0];
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
		if (!strcmp(versions[i], want))
			v = versions[i];
	/* structuredContent and outputSchema came with 2025-06-18. */
	s->structured = strcmp(v, "2025-03-26") != 0;
	return json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s}, s:s}", "protocolVersion", v, "capabilities", "tools",
	                 "listChanged", 0, "serverInfo", "name", "nsbox", "version", PACKAGE_VERSION, "instructions",
	                 s->boxes ? "run_code and run_command run each call in a fresh sandbox; sandbox_create makes "
	                            "one that keeps its files and interpreter state for the sandbox_* tools until "
	                            "sandbox_stop, its idle timeout or the end of this server. The operator's options "
	                            "bound every sandbox; a call may only lower the timeout."
	                          : "Each call runs in a fresh sandbox that the operator's options bound; a call may only "
	                            "lower the timeout.");
}

/* The run supervisor forwards a first signal to the sandbox and kills it
 * at a second one; two different signals cannot merge while pending, so
 * the sandbox is killed now, and its cgroup and mounts go with it. */
static void stop(mcp_call *c)
{
	/* kill() with 0 or -1 would reach our group or every process. */
	if (c->pid <= 0)
		return;
	(void) kill(c->pid, SIGTERM);
	(void) kill(c->pid, SIGINT);
}

static void waiting_free(mcp_waiting *w)
{
	json_decref(w->id);
	json_decref(w->params);
	free(w);
}

/* A cancelled call is not answered (the protocol says so), whether it ran
 * or waited. */
static void cancel(mcp_server *s, mcp_call *calls, json_t *params)
{
	json_t *rid = json_object_get(params, "requestId");
	for (mcp_call *c = calls; rid && c; c = c->next)
		if (!c->cancelled && json_equal(c->id, rid)) {
			c->cancelled = true;
			stop(c);
		}
	for (mcp_waiting **pp = &s->waiting; rid && *pp;) {
		mcp_waiting *w = *pp;
		if (!json_equal(w->id, rid)) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		if (s->waiting_tail == &w->next)
			s->waiting_tail = pp;
		s->n_waiting--;
		s->waiting_bytes -= w->bytes;
		waiting_free(w);
	}
	if (!s->waiting)
		s->waiting_tail = NULL;
}

static int count_calls(const mcp_call *calls)
{
	int n = 0;
	for (; calls; calls = calls->next)
		n++;
	return n;
}

/* Start one checked call now; its answer comes when it ends (or now, for a
 * call refused before it ran). */
static void call_now(mcp_server *s, mcp_call **calls, json_t *id, json_t *params)
{
	mcp_call *c = NULL;
	json_t *r = NULL;
	const char *err = NULL;
	if (mcp_tools_call(s, params, &c, &r, &err) == 0) {
		if (c) {
			c->id = json_incref(id);
			c->next = *calls;
			*calls = c;
		} else {
			send_result(s, id, r);
		}
	} else {
		send_error(s, id, -32602, err);
	}
}

void mcp_start_waiting(mcp_server *s, mcp_call **calls)
{
	while (s->waiting && count_calls(*calls) < MAX_CALLS) {
		mcp_waiting *w = s->waiting;
		s->waiting = w->next;
		if (!s->waiting)
			s->waiting_tail = NULL;
		s->n_waiting--;
		s->waiting_bytes -= w->bytes;
		call_now(s, calls, w->id, w->params);
		waiting_free(w);
	}
}

void mcp_drop_waiting(mcp_server *s)
{
	while (s->waiting) {
		mcp_waiting *w = s->waiting;
		s->waiting = w->next;
		waiting_free(w);
	}
	s->waiting_tail = NULL;
	s->n_waiting = s->waiting_bytes = 0;
}

/* A call waits when MAX_CALLS run; past the queue's bounds it is refused. */
static const char *call_or_wait(mcp_server *s, mcp_call **calls, json_t *id, json_t *params, size_t len)
{
	for (mcp_call *o = *calls; o; o = o->next)
		if (json_equal(o->id, id))
			return "invalid request: a call with this id is still running";
	for (mcp_waiting *w = s->waiting; w; w = w->next)
		if (json_equal(w->id, id))
			return "invalid request: a call with this id is waiting to run";
	if (count_calls(*calls) < MAX_CALLS && !s->waiting) {
		call_now(s, calls, id, params);
		return NULL;
	}
	if (s->n_waiting >= MCP_MAX_WAITING || s->waiting_bytes + len > MCP_MAX_WAITING_BYTES)
		return "invalid request: 8 calls are running and the queue is full (1024 calls or 64 MiB "
		       "waiting); wait for some to end";
	mcp_waiting *w = calloc(1, sizeof(*w));
	if (!w)
		return "internal error: out of memory";
	w->id = json_incref(id);
	w->params = json_incref(params);
	w->bytes = len;
	if (!s->waiting_tail)
		s->waiting_tail = &s->waiting;
	*s->waiting_tail = w;
	s->waiting_tail = &w->next;
	s->n_waiting++;
	s->waiting_bytes += len;
	return NULL;
}

void mcp_handle(mcp_server *s, mcp_call **calls, const char *line, size_t len)
{
	json_error_t jerr;
	json_t *m = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!m) {
		send_error(s, NULL, -32700, "parse error: not a JSON message");
		return;
	}
	json_t *id = json_object_get(m, "id");
	json_t *params = json_object_get(m, "params");
	const char *method = json_string_value(json_object_get(m, "method"));
	bool valid_id = !id || json_is_string(id) || json_is_integer(id);
	if (!json_is_object(m) || !json_is_string(json_object_get(m, "jsonrpc")) ||
	    strcmp(json_string_value(json_object_get(m, "jsonrpc")), "2.0") || !valid_id ||
	    (params && !json_is_object(params) && !json_is_array(params))) {
		send_error(s, valid_id ? id : NULL, -32600, "invalid request: expected a JSON-RPC 2.0 object");
		goto out;
	}
	if (!method) {
		/* A response to us: we send no requests, so there is nothing to match. */
		if (!json_object_get(m, "result") && !json_object_get(m, "error"))
			send_error(s, id, -32600, "invalid request: 'method' must be a string");
		goto out;
	}
	if (!id) {   /* a notification: never answered */
		if (!strcmp(method, "notifications/cancelled"))
			cancel(s, *calls, params);
		goto out;
	}
	const char *err = NULL;
	if (!strcmp(method, "initialize")) {
		json_t *r = initialize(s, params, &err);
		if (r)
			send_result(s, id, r);
	} else if (!strcmp(method, "server/discover")) {
		/* The stateless discovery of the 2026-07-28 revision: everything
		 * initialize and tools/list say, in one answer. */
		json_t *r = mcp_tools_list(s);
		json_object_set_new(r, "protocolVersion", json_string("2026-07-28"));
		json_object_set_new(r, "capabilities", json_pack("{s:{s:b}}", "tools", "listChanged", 0));
		json_object_set_new(r, "serverInfo", json_pack("{s:s, s:s}", "name", "nsbox", "version", PACKAGE_VERSION));
		send_result(s, id, r);
	} else if (!strcmp(method, "ping")) {
		send_result(s, id, NULL);
	} else if (!strcmp(method, "tools/list")) {
		if (params && json_is_object(params) && json_object_get(params, "cursor") &&
		    !json_is_string(json_object_get(params, "cursor")))
			err = "invalid params: 'cursor' must be a string";
		else
			send_result(s, id, mcp_tools_list(s));
	} else if (!strcmp(method, "tools/call")) {
		err = call_or_wait(s, calls, id, params, len);
	} else {
		send_error(s, id, -32601, "method not found");
	}
	if (err)
		send_error(s, id, strncmp(err, "invalid params", 14) ? -32600 : -32602, err);
out:
	json_decref(m);
}

size_t mcp_feed(mcp_server *s, mcp_call **calls, char *buf, size_t used, size_t cap, bool *discarding)
{
	char *start = buf, *nl;
	while ((nl = memchr(start, '\n', used - (size_t) (start - buf)))) {
		size_t len = (size_t) (nl - start);
		if (!*discarding && len && !(len == 1 && start[0] == '\r'))
			mcp_handle(s, calls, start, len);
		*discarding = false;
		start = nl + 1;
	}
	used -= (size_t) (start - buf);
	memmove(buf, start, used);
	if (used == cap) {
		if (!*discarding)
			send_error(s, NULL, -32600, "invalid request: message longer than 4 MiB");
		*discarding = true;
		used = 0;
	}
	return used;
}

/* Read what the child wrote; at EOF reap it and answer (unless cancelled). */
static bool call_io(mcp_server *s, mcp_call *c)
{
	/* A read may fill the bound exactly: one byte more tells it is over. */
	if (c->kind != MCP_RUN && c->kind != MCP_BOX_RUN && c->len >= MCP_MAX_TEXT + (c->kind == MCP_BOX_READ)) {
		/* Enough of a diff for a model: the rest is drained, unkept (a
		 * read is refused: mcp_live.c). */
		if (!c->truncated)
			stop(c), c->truncated = true;
		char sink[65536];
		ssize_t d = read(c->out_fd, sink, sizeof(sink));
		if (d > 0 || (d < 0 && (errno == EINTR || errno == EAGAIN)))
			return false;
	} else if (c->len == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 65536;
		char *n = cap <= MAX_RECORD ? realloc(c->out, cap) : NULL;
		if (!n) {
			stop(c);
			c->len = 0;   /* drop it; the answer says no record */
		} else {
			c->out = n;
			c->cap = cap;
		}
	}
	ssize_t r = c->len < c->cap && !c->truncated ? read(c->out_fd, c->out + c->len, c->cap - c->len) : 0;
	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return false;
	if (r > 0) {
		c->len += (size_t) r;
		return false;
	}
	int st = 0;
	while (waitpid(c->pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!c->cancelled)
		send_result(s, c->id, mcp_call_result(s, c, st));
	return true;
}

static int parse_options(int argc, char **argv, mcp_server *s)
{
	char **v = calloc((size_t) argc + 3, sizeof(char *));
	if (!v)
		return -1;
	v[0] = "run";
	for (int i = 1; i < argc; i++)
		v[i] = argv[i];
	v[argc] = "--";
	v[argc + 1] = "true";
	run_args a;
	char msg[512];
	int rc = -1;
	if (parse_run_args(argc + 2, v, environ, &a, msg, sizeof(msg)) < 0) {
		print_msg("mcp: %s", msg);
		goto out;
	}
	if (a.argc != 1 || a.json || a.interactive || a.result_file || a.stats_interval) {
		print_msg("mcp: only run options that bound the sandbox apply (no command, --json, -i, "
		          "--result-file or --stats-interval)");
		goto out;
	}
	nsbox_config *cfg = NULL;
	nsbox_error *e = NULL;
	int r = config_with_policy(a.policy, &cfg, &e);
	for (size_t i = 0; r == 0 && i < a.n_settings; i++)
		r = nsbox_config_set(cfg, a.settings[i].key, a.settings[i].value, a.settings[i].origin, &e);
	if (r < 0) {
		print_error(e);
		nsbox_error_free(e);
	} else {
		s->timeout_ms = nsbox_config_timeout_ms(cfg);
		s->run_opts = argv + 1;
		s->n_run_opts = argc - 1;
		/* A session (--session NAME or NSBOX_SESSION) turns the
		 * workspace tools on: they review that session only. */
		const char *session = NULL;
		for (size_t i = 0; i < a.n_settings; i++)
			if (!strcmp(a.settings[i].key, "workspace.session"))
				session = a.settings[i].value;
		s->session = session ? strdup(session) : NULL;
		s->policy = a.policy ? strdup(a.policy) : NULL;
		rc = (session && !s->session) || (a.policy && !s->policy) ? -1 : 0;
	}
	nsbox_config_free(cfg);
out:
	if (!a.help || rc == 0)
		run_args_free(&a);
	free(v);
	return rc;
}

/* --max-sandboxes N and --sandbox-idle-timeout D: the server's own, taken
 * out of argv (the rest are run options). */
static int server_options(int *argc, char **argv, mcp_server *s)
{
	int n = 1;
	for (int i = 1; i < *argc; i++) {
		bool max = !strcmp(argv[i], "--max-sandboxes"), idle = !strcmp(argv[i], "--sandbox-idle-timeout");
		if (!strcmp(argv[i], "--")) {
			while (i < *argc)
				argv[n++] = argv[i++];
			break;
		}
		if (!max && !idle) {
			argv[n++] = argv[i];
			continue;
		}
		if (i + 1 >= *argc) {
			print_msg("mcp: %s needs a value", argv[i]);
			return -1;
		}
		const char *v = argv[++i];
		char *end;
		long k = max ? strtol(v, &end, 10) : 0;
		if (max && (*end || !*v || k < 0 || k > MCP_MAX_SANDBOXES)) {
			print_msg("mcp: --max-sandboxes: expected 0 to %d, not '%s'", MCP_MAX_SANDBOXES, v);
			return -1;
		}
		if (max)
			s->max_sandboxes = (int) k;
		else if (nsbox_parse_duration_ms(v, &s->sandbox_idle_ms) < 0) {
			print_msg("mcp: --sandbox-idle-timeout: invalid duration '%s' (such as 30s, 10m; 0: none)", v);
			return -1;
		}
	}
	*argc = n;
	argv[n] = NULL;
	return 0;
}

int cmd_mcp(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			return fputs(mcp_usage, stdout), 0;
	static mcp_box boxes[MCP_MAX_SANDBOXES];
	static unsigned made;
	mcp_server s = { .structured = true, .out_fd = 1, .max_sandboxes = 4, .sandbox_idle_ms = 600000,
		         .create = mcp_live_create, .destroy = mcp_live_destroy, .alive = mcp_live_alive,
		         .boxes_made = &made };
	if (server_options(&argc, argv, &s) < 0)
		return EXIT_SETUP;
	if (s.max_sandboxes)
		s.boxes = boxes;
	char prefix[32];
	snprintf(prefix, sizeof(prefix), "mcp-%d", (int) getpid());
	s.box_prefix = prefix;
	if (parse_options(argc, argv, &s) < 0) {
		free((char *) s.session);
		free((char *) s.policy);
		return EXIT_SETUP;
	}
	signal(SIGPIPE, SIG_IGN);
	/* A client closing us with SIGTERM (the SDK does after EOF) must not
	 * leave calls running: the signals end the loop like EOF does. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	int sfd = sigprocmask(SIG_BLOCK, &set, NULL) == 0 ? signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK) : -1;
	mcp_call *calls = NULL;
	char *buf = malloc(MAX_MSG + 1);
	if (!buf) {
		free((char *) s.session);
		free((char *) s.policy);
		if (sfd >= 0)
			close(sfd);
		return EXIT_SETUP;
	}
	size_t used = 0;
	bool eof = false, discarding = false;
	while (!eof || calls) {
		struct pollfd p[MAX_CALLS + 2];
		mcp_call *who[MAX_CALLS + 2];
		nfds_t n = 0;
		if (!eof)
			p[n++] = (struct pollfd){ .fd = 0, .events = POLLIN };
		p[n++] = (struct pollfd){ .fd = sfd, .events = POLLIN };
		for (mcp_call *c = calls; c && n < MAX_CALLS + 2; c = c->next) {
			who[n] = c;
			p[n++] = (struct pollfd){ .fd = c->out_fd, .events = POLLIN };
		}
		if (poll(p, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			print_msg("mcp: poll: %s", strerror(errno));
			break;
		}
		nfds_t first = eof ? 1 : 2;
		struct signalfd_siginfo si;
		if (p[first - 1].revents && read(sfd, &si, sizeof(si)) == (ssize_t) sizeof(si))
			eof = true;
		for (nfds_t i = first; i < n; i++) {
			if (!p[i].revents || !call_io(&s, who[i]))
				continue;
			for (mcp_call **pp = &calls; *pp; pp = &(*pp)->next)
				if (*pp == who[i]) {
					*pp = who[i]->next;
					break;
				}
			mcp_call_free(who[i]);
		}
		if (!eof)
			mcp_start_waiting(&s, &calls);
		ssize_t r = eof || !p[0].revents ? 1 : read(0, buf + used, MAX_MSG - used);
		if (r < 0 && errno == EINTR)
			continue;
		if (eof || r <= 0) {
			/* The client is gone: nothing it started may outlive it. */
			eof = true;
			mcp_drop_waiting(&s);
			for (mcp_call *c = calls; c; c = c->next)
				if (!c->cancelled)
					c->cancelled = true, stop(c);
			continue;
		}
		if (!p[0].revents)
			continue;
		used = mcp_feed(&s, &calls, buf, used + (size_t) r, MAX_MSG, &discarding);
	}
	mcp_drop_waiting(&s);
	/* The client is gone: its sandboxes go too (each is ours). */
	for (int i = 0; s.boxes && i < MCP_MAX_SANDBOXES; i++)
		if (s.boxes[i].name[0])
			s.destroy(&s, &s.boxes[i]);
	free(buf);
	free((char *) s.session);
	free((char *) s.policy);
	if (sfd >= 0)
		close(sfd);
	return 0;
}
