/* The tools of `nsbox mcp`: run_code and run_command. Each call is a child
 * `nsbox run-code --json` / `nsbox run --json` with the operator's options
 * first; the model's arguments can only add a lower --timeout. Everything
 * else a client sends (a network, a volume, an image, a workspace, more
 * memory) is refused with a tool error naming the ceiling: arguments are
 * checked against a closed list, not filtered. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "mcp/mcp.h"

#define MAX_CODE (1u << 20)       /* run_code: bytes of code */
#define MAX_COMMAND (64u << 10)   /* run_command: fits one argv string */

static const char *const languages[] = { "python", "node", "bash" };

static json_t *result_schema(void)
{
	/* The shipped docs/result.schema.json describes the full record; the
	 * tool's outputSchema states the part a client relies on. */
	return json_pack("{s:s, s:[s,s,s,s,s], s:{s:{s:s}, s:{s:s}, s:{s:[s,s]}, s:{s:[s,s]}, s:{s:s},"
	                 " s:{s:[s,s]}, s:{s:[s,s]}, s:{s:s}, s:{s:s}, s:{s:[s,s]}}}",
	                 "type", "object", "required", "version", "status", "exit_status", "timed_out", "duration_ms",
	                 "properties", "version", "type", "integer", "status", "type", "string", "exit_code", "type",
	                 "integer", "null", "signal", "type", "integer", "null", "exit_status", "type", "integer",
	                 "stdout", "type", "string", "null", "stderr", "type", "string", "null", "timed_out", "type",
	                 "boolean", "duration_ms", "type", "number", "limits", "type", "object", "null");
}

static json_t *tool(const mcp_server *s, const char *name, const char *title, const char *desc, json_t *input)
{
	json_t *t = json_pack("{s:s, s:s, s:s, s:o, s:{s:b, s:b, s:b, s:b}}", "name", name, "title", title,
	                      "description", desc, "inputSchema", input, "annotations", "readOnlyHint", 0,
	                      "destructiveHint", 0, "idempotentHint", 0, "openWorldHint", 0);
	if (t && s->structured)
		json_object_set_new(t, "outputSchema", result_schema());
	return t;
}

static json_t *timeout_schema(void)
{
	return json_pack("{s:s, s:f, s:s}", "type", "number", "exclusiveMinimum", 0.0, "description",
	                 "wall-clock limit in seconds; may only lower the server's limit");
}

json_t *mcp_tools_list(const mcp_server *s)
{
	json_t *code_in = json_pack("{s:s, s:{s:{s:s, s:s}, s:{s:s, s:[s,s,s], s:s}, s:o}, s:[s], s:b}", "type",
	                            "object", "properties", "code", "type", "string", "description", "the program text",
	                            "language", "type", "string", "enum", "python", "node", "bash", "default", "python",
	                            "timeout", timeout_schema(), "required", "code", "additionalProperties", 0);
	json_t *cmd_in = json_pack("{s:s, s:{s:{s:s, s:s}, s:o}, s:[s], s:b}", "type", "object", "properties",
	                           "command", "type", "string", "description", "a shell command line (sh -c)",
	                           "timeout", timeout_schema(), "required", "command", "additionalProperties", 0);
	json_t *list = json_pack("{s:[o,o]}", "tools",
	                 tool(s, "run_code", "Run code in a sandbox",
	                      "Run a Python, Node.js or Bash program in a fresh, isolated sandbox (no network "
	                      "unless the operator allowed it) and return its output and why it ended.",
	                      code_in),
	                 tool(s, "run_command", "Run a shell command in a sandbox",
	                      "Run a shell command line in a fresh, isolated sandbox and return its output "
	                      "and why it ended.",
	                      cmd_in));
	if (list) {
		mcp_workspace_tools(s, json_object_get(list, "tools"));
		mcp_live_tools(s, json_object_get(list, "tools"));
	}
	return list;
}

json_t *mcp_tool_error(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", msg, "isError", 1);
}

/* The arguments: only `allowed` keys; a timeout only at or below the
 * operator's. Returns a tool error, or NULL when they are acceptable. */
static json_t *check_args(const mcp_server *s, json_t *args, const char *const *allowed, char *timeout,
                          size_t tlen)
{
	const char *key;
	json_t *v;
	json_object_foreach(args, key, v) {
		bool ok = false;
		for (const char *const *a = allowed; *a; a++)
			ok |= !strcmp(*a, key);
		if (!ok)
			return mcp_tool_error("refused argument '%.64s': the operator's options are the ceiling; a call may "
			                  "only give %s and lower the timeout (no network, volume, image, workspace or "
			                  "limit changes)",
			                  key, allowed[1] && !strcmp(allowed[1], "language") ? "code, language" : "command");
	}
	return mcp_timeout_arg(s, args, timeout, tlen);
}

json_t *mcp_timeout_arg(const mcp_server *s, json_t *args, char *out, size_t len)
{
	out[0] = '\0';
	json_t *t = json_object_get(args, "timeout");
	if (!t || json_is_null(t))
		return NULL;
	if (!json_is_number(t) || !(json_number_value(t) > 0) || json_number_value(t) > 1e9)
		return mcp_tool_error("invalid timeout: expected a positive number of seconds");
	double ms = json_number_value(t) * 1000.0;
	if (s->timeout_ms && ms > (double) s->timeout_ms)
		return mcp_tool_error("refused timeout %gs: the operator's limit is %gs and a call may only lower it",
		                      json_number_value(t), (double) s->timeout_ms / 1000.0);
	snprintf(out, len, "%llums", (unsigned long long) (ms < 1 ? 1 : ms));
	return NULL;
}

static void child_exec(char **argv, int in_fd, int out_fd)
{
	if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0)
		_exit(EXIT_SETUP);
	/* A workspace tool's errors are its answer: stderr with its output. */
	if (argv[1] && (!strcmp(argv[1], "session") || !strcmp(argv[1], "cp") || !strcmp(argv[1], "ls")) &&
	    dup2(out_fd, 2) < 0)
		_exit(EXIT_SETUP);
	/* Its own process group: a cancelled call's signal reaches only it. */
	(void) setpgid(0, 0);
	sigset_t none;
	sigemptyset(&none);
	(void) sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	execv("/proc/self/exe", argv);
	_exit(EXIT_SETUP);
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t) w;
	}
	return 0;
}

static int spawn(const mcp_server *s, char **argv, const char *input, size_t ilen, mcp_call **out)
{
	(void) s;
	int in[2] = { -1, -1 }, o[2] = { -1, -1 };
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(o, O_CLOEXEC) < 0) {
		int e = errno;
		if (in[0] >= 0)
			close(in[0]), close(in[1]);
		return -e;
	}
	pid_t pid = fork();
	if (pid == 0)
		child_exec(argv, in[0], o[1]);
	int e = errno;
	close(in[0]);
	close(o[1]);
	if (pid < 0) {
		close(in[1]);
		close(o[0]);
		return -e;
	}
	/* run-code reads the whole program before it starts the sandbox, so
	 * this does not wait on the sandbox; a child that died early gives
	 * EPIPE (SIGPIPE is ignored), and its record says why. */
	if (input)
		(void) write_all(in[1], input, ilen);
	close(in[1]);
	mcp_call *c = calloc(1, sizeof(*c));
	if (!c) {
		close(o[0]);
		kill(pid, SIGKILL);
		(void) waitpid(pid, NULL, 0);
		return -ENOMEM;
	}
	c->pid = pid;
	c->out_fd = o[0];
	*out = c;
	return 0;
}

/* The child's argv: the tool's head, the operator's options, the tail. */
static int start(const mcp_server *s, char **head, int nhead, char **tail, int ntail, const char *input,
                 size_t ilen, mcp_call **out)
{
	char **argv = calloc((size_t) (nhead + s->n_run_opts + ntail + 1), sizeof(char *));
	if (!argv)
		return -ENOMEM;
	int n = 0;
	for (int i = 0; i < nhead; i++)
		argv[n++] = head[i];
	for (int i = 0; i < s->n_run_opts; i++)
		argv[n++] = s->run_opts[i];
	for (int i = 0; i < ntail; i++)
		argv[n++] = tail[i];
	int r = (s->start ? s->start : spawn)(s, argv, input, ilen, out);
	free(argv);
	return r;
}

int mcp_tools_call(const mcp_server *s, json_t *params, mcp_call **call, json_t **result, const char **rpc_msg)
{
	*call = NULL;
	*result = NULL;
	const char *name = NULL;
	json_t *args = NULL;
	if (!json_is_object(params) || !(name = json_string_value(json_object_get(params, "name")))) {
		*rpc_msg = "invalid params: tools/call needs a string 'name'";
		return -1;
	}
	args = json_object_get(params, "arguments");
	if (args && !json_is_object(args)) {
		*rpc_msg = "invalid params: 'arguments' must be an object";
		return -1;
	}
	json_t *empty = json_object();
	if (!args)
		args = empty;
	char timeout[48] = "";   /* check_args() fills it only on success */
	int r = 0;
	if (!strcmp(name, "run_code")) {
		static const char *const allowed[] = { "code", "language", "timeout", NULL };
		const char *code = json_string_value(json_object_get(args, "code"));
		json_t *jl = json_object_get(args, "language");
		const char *lang = !jl || json_is_null(jl) ? "python" : json_string_value(jl);
		size_t clen = json_string_length(json_object_get(args, "code"));
		bool known = false;
		for (size_t i = 0; lang && i < sizeof(languages) / sizeof(languages[0]); i++)
			known |= !strcmp(languages[i], lang);
		if ((*result = check_args(s, args, allowed, timeout, sizeof(timeout))))
			goto out;
		if (!code || !lang || !known || clen > MAX_CODE) {
			*result = mcp_tool_error("run_code needs 'code' (a string of at most 1 MiB) and takes 'language' "
			                     "(python, the default, node or bash)");
			goto out;
		}
		char *head[] = { "nsbox", "run-code", "--json", "--lang", (char *) lang };
		char *tail[] = { "--timeout", timeout, "-" };
		r = timeout[0] ? start(s, head, 5, tail, 3, code, clen, call)
		               : start(s, head, 5, tail + 2, 1, code, clen, call);
	} else if (!strcmp(name, "run_command")) {
		static const char *const allowed[] = { "command", "timeout", NULL };
		const char *cmd = json_string_value(json_object_get(args, "command"));
		if ((*result = check_args(s, args, allowed, timeout, sizeof(timeout))))
			goto out;
		if (!cmd || json_string_length(json_object_get(args, "command")) > MAX_COMMAND ||
		    strlen(cmd) != json_string_length(json_object_get(args, "command"))) {
			*result = mcp_tool_error("run_command needs 'command': a string of at most 64 KiB without NUL bytes");
			goto out;
		}
		char *head[] = { "nsbox", "run", "--json" };
		char *tail[] = { "--timeout", timeout, "--", "sh", "-c", (char *) cmd };
		r = timeout[0] ? start(s, head, 3, tail, 6, NULL, 0, call)
		               : start(s, head, 3, tail + 2, 4, NULL, 0, call);
	} else if (mcp_workspace_call(s, name, args, call, result, s->start ? s->start : spawn) < 0 &&
	           mcp_live_call(s, name, args, call, result, s->start ? s->start : spawn) < 0) {
		json_decref(empty);
		*rpc_msg = "invalid params: unknown tool";
		return -1;
	}
	if (r < 0)
		*result = mcp_tool_error("start the sandbox: %s", strerror(-r));
out:
	json_decref(empty);
	return 0;
}

/* Output, then why it ended: what a model reads. */
static char *compact_text(json_t *rec)
{
	const char *out = json_string_value(json_object_get(rec, "stdout"));
	const char *err = json_string_value(json_object_get(rec, "stderr"));
	const char *status = json_string_value(json_object_get(rec, "status"));
	json_t *error = json_object_get(rec, "error");
	const char *why = json_string_value(json_object_get(error, "message"));
	if (!why)
		why = json_string_value(error);
	char tail[640];
	snprintf(tail, sizeof(tail), "[%s, exit status %lld, %.0f ms%s%.500s%s]", status ? status : "unknown",
	         (long long) json_integer_value(json_object_get(rec, "exit_status")),
	         json_number_value(json_object_get(rec, "duration_ms")),
	         json_is_true(json_object_get(rec, "stdout_truncated")) ||
	                         json_is_true(json_object_get(rec, "stderr_truncated"))
	                 ? ", output truncated"
	                 : "",
	         why ? ": " : "", why ? why : "");
	size_t n = (out ? strlen(out) : 0) + (err ? strlen(err) : 0) + strlen(tail) + 16;
	char *t = malloc(n);
	if (!t)
		return NULL;
	snprintf(t, n, "%s%s%s%s%s%s", out ? out : "", out && *out && out[strlen(out) - 1] != '\n' ? "\n" : "",
	         err && *err ? "stderr:\n" : "", err ? err : "", err && *err && err[strlen(err) - 1] != '\n' ? "\n" : "",
	         tail);
	return t;
}

json_t *mcp_call_result(const mcp_server *s, mcp_call *c, int wstatus)
{
	if (c->kind == MCP_BOX_READ || c->kind == MCP_BOX_WRITE || c->kind == MCP_BOX_LIST)
		return mcp_live_result(s, c, wstatus, NULL);
	if (c->kind != MCP_RUN && c->kind != MCP_BOX_RUN)
		return mcp_workspace_result(s, c, wstatus);
	json_error_t jerr;
	/* The payload's output may hold NUL bytes (\u0000 in the record). */
	json_t *rec = c->len ? json_loadb(c->out, c->len, JSON_ALLOW_NUL, &jerr) : NULL;
	if (!json_is_object(rec)) {
		json_decref(rec);
		return mcp_tool_error("the sandbox gave no result record (nsbox exited with status %d; see the server's "
		                  "stderr)",
		                  WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus));
	}
	char *text = compact_text(rec);
	const char *status = json_string_value(json_object_get(rec, "status"));
	bool failed = status && !strcmp(status, "setup_failed");
	json_t *res = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", text ? text : "",
	                        "isError", failed);
	free(text);
	if (res && s->structured)
		json_object_set(res, "structuredContent", rec);
	if (res && c->kind == MCP_BOX_RUN) {
		json_t *r = mcp_live_result(s, c, wstatus, res);
		json_decref(rec);
		return r;
	}
	json_decref(rec);
	return res;
}

void mcp_call_free(mcp_call *c)
{
	if (!c)
		return;
	if (c->out_fd >= 0)
		close(c->out_fd);
	json_decref(c->id);
	free(c->out);
	free(c);
}
