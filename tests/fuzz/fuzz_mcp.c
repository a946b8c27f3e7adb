/* `nsbox mcp`'s protocol handling: the bytes a Model Context Protocol
 * client sends (hostile: a model drives it). The input is the client's
 * stream, fed through the server's line splitter and dispatcher exactly as
 * cmd_mcp's loop does, in reads of varying size into a small buffer (so
 * that the over-long line path is reached); after a NUL byte, the rest is
 * the result record each running call's child printed.
 *
 * No sandbox is launched: the server's start hook is this harness's, which
 * checks the command line a call would run instead. What must hold:
 *   - every message the server writes is one line of JSON, a JSON-RPC 2.0
 *     response (an id, and a result or an error);
 *   - a call runs `nsbox run --json` or `nsbox run-code --json` with the
 *     operator's options right after, and the client can add nothing but a
 *     --timeout at or below the operator's, and the payload itself;
 *   - at most 8 calls run at once; more wait, within the queue's bounds;
 *   - a stateful tool runs `nsbox exec|cp|ls` only on a sandbox this server
 *     created (its name), with nothing but a lower --timeout, a context of
 *     python or node, and the payload. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "mcp/mcp.h"

#define CAP 4096            /* the read buffer (the server's is 4 MiB) */
#define OPERATOR_TIMEOUT_MS 30000

static char *operator_opts[] = { "--timeout", "30s", "--memory", "256M", "--network", "none" };
static int out_fd = -1;
static unsigned running;

static mcp_box boxes[MCP_MAX_SANDBOXES];
static unsigned made;

static int fake_create(const mcp_server *s, mcp_box *b, char *why, size_t len)
{
	(void) s;
	(void) why;
	(void) len;
	FUZZ_CHECK(b >= boxes && b < boxes + MCP_MAX_SANDBOXES && b->name[0]);
	b->sb = NULL;   /* no sandbox: the calls are checked, not run */
	return 0;
}

static void fake_destroy(const mcp_server *s, mcp_box *b)
{
	(void) s;
	FUZZ_CHECK(b->name[0]);
}

static bool is_box(const char *name)
{
	for (int i = 0; i < MCP_MAX_SANDBOXES; i++)
		if (boxes[i].name[0] && !strcmp(boxes[i].name, name))
			return true;
	return false;
}

/* NAME:PATH of one of our sandboxes. */
static bool box_path(const char *spec)
{
	const char *colon = strchr(spec, ':');
	char name[64];
	if (!colon || (size_t) (colon - spec) >= sizeof(name))
		return false;
	snprintf(name, sizeof(name), "%.*s", (int) (colon - spec), spec);
	return is_box(name) && colon[1];
}

static void check_timeout(char **argv, int n, int *i)
{
	if (*i < n && !strcmp(argv[*i], "--timeout")) {
		FUZZ_CHECK(*i + 1 < n);
		char *end;
		errno = 0;
		unsigned long long ms = strtoull(argv[*i + 1], &end, 10);
		FUZZ_CHECK(!errno && !strcmp(end, "ms") && ms >= 1 && ms <= OPERATOR_TIMEOUT_MS);
		*i += 2;
	}
}

/* A stateful tool's command line. */
static void check_box_call(char **argv, int n, const char *input, size_t ilen)
{
	if (!strcmp(argv[1], "exec")) {
		FUZZ_CHECK(n >= 5 && is_box(argv[2]) && !strcmp(argv[3], "--json"));
		int i = 4;
		check_timeout(argv, n, &i);
		if (!strcmp(argv[i], "--context")) {
			FUZZ_CHECK(i + 5 == n && !strcmp(argv[i + 2], "--lang") && !strcmp(argv[i + 1], argv[i + 3]));
			FUZZ_CHECK(!strcmp(argv[i + 1], "python") || !strcmp(argv[i + 1], "node"));
			FUZZ_CHECK(!strcmp(argv[i + 4], "-") && input && ilen <= (1u << 20));
		} else {
			FUZZ_CHECK(i + 4 == n && !strcmp(argv[i], "--") && !strcmp(argv[i + 1], "sh") &&
			           !strcmp(argv[i + 2], "-c") && !input);
		}
	} else if (!strcmp(argv[1], "cp")) {
		FUZZ_CHECK(n == 4);
		FUZZ_CHECK((!strcmp(argv[2], "-") && box_path(argv[3]) && input && ilen <= MCP_MAX_TEXT) ||
		           (box_path(argv[2]) && !strcmp(argv[3], "-") && !input));
	} else {
		FUZZ_CHECK(!strcmp(argv[1], "ls") && n == 5 && is_box(argv[2]) && !strcmp(argv[4], "--json") && !input);
	}
}

static int fake_start(const mcp_server *s, char **argv, const char *input, size_t ilen, mcp_call **out)
{
	int n = 0;
	while (argv[n])
		n++;
	if (n >= 2 && (!strcmp(argv[1], "exec") || !strcmp(argv[1], "cp") || !strcmp(argv[1], "ls"))) {
		check_box_call(argv, n, input, ilen);
		mcp_call *c = calloc(1, sizeof(*c));
		FUZZ_CHECK(c);
		c->out_fd = -1;
		*out = c;
		running++;
		return 0;
	}
	FUZZ_CHECK(n >= 3 + s->n_run_opts);
	FUZZ_CHECK(!strcmp(argv[0], "nsbox") && !strcmp(argv[2], "--json"));
	bool code = !strcmp(argv[1], "run-code");
	FUZZ_CHECK(code || !strcmp(argv[1], "run"));
	int i = code ? 5 : 3;
	if (code) {
		FUZZ_CHECK(!strcmp(argv[3], "--lang"));
		FUZZ_CHECK(!strcmp(argv[4], "python") || !strcmp(argv[4], "node") || !strcmp(argv[4], "bash"));
	}
	for (int k = 0; k < s->n_run_opts; k++)
		FUZZ_CHECK(argv[i + k] == s->run_opts[k]);
	i += s->n_run_opts;
	if (i < n && !strcmp(argv[i], "--timeout")) {
		FUZZ_CHECK(i + 1 < n);
		char *end;
		errno = 0;
		unsigned long long ms = strtoull(argv[i + 1], &end, 10);
		FUZZ_CHECK(!errno && !strcmp(end, "ms") && ms >= 1 && ms <= OPERATOR_TIMEOUT_MS);
		i += 2;
	}
	if (code) {
		FUZZ_CHECK(i + 1 == n && !strcmp(argv[i], "-"));
		FUZZ_CHECK(input && ilen <= (1u << 20));
	} else {
		FUZZ_CHECK(i + 4 == n && !strcmp(argv[i], "--") && !strcmp(argv[i + 1], "sh") &&
		           !strcmp(argv[i + 2], "-c"));
		FUZZ_CHECK(strlen(argv[i + 3]) <= (64u << 10) && !input);
	}
	mcp_call *c = calloc(1, sizeof(*c));
	FUZZ_CHECK(c);
	c->pid = 0;      /* nothing to signal */
	c->out_fd = -1;
	*out = c;
	running++;
	return 0;
}

/* Every line written is a JSON-RPC 2.0 response. */
static void check_output(void)
{
	off_t len = lseek(out_fd, 0, SEEK_CUR);
	FUZZ_CHECK(len >= 0);
	if (len == 0)
		return;
	char *buf = malloc((size_t) len);
	FUZZ_CHECK(buf && pread(out_fd, buf, (size_t) len, 0) == len);
	FUZZ_CHECK(buf[len - 1] == '\n');
	for (char *p = buf, *nl; p < buf + len; p = nl + 1) {
		nl = memchr(p, '\n', (size_t) (buf + len - p));
		FUZZ_CHECK(nl);
		json_error_t e;
		json_t *m = json_loadb(p, (size_t) (nl - p), JSON_REJECT_DUPLICATES, &e);
		FUZZ_CHECK(json_is_object(m));
		FUZZ_CHECK(!strcmp(json_string_value(json_object_get(m, "jsonrpc")) ?: "", "2.0"));
		json_t *id = json_object_get(m, "id");
		FUZZ_CHECK(json_is_null(id) || json_is_string(id) || json_is_integer(id));
		FUZZ_CHECK(!json_object_get(m, "result") != !json_object_get(m, "error"));
		if (json_object_get(m, "error")) {
			json_t *err = json_object_get(m, "error");
			FUZZ_CHECK(json_is_integer(json_object_get(err, "code")));
			FUZZ_CHECK(json_is_string(json_object_get(err, "message")));
		} else {
			FUZZ_CHECK(!json_is_null(id));
		}
		json_decref(m);
	}
	free(buf);
	FUZZ_CHECK(ftruncate(out_fd, 0) == 0 && lseek(out_fd, 0, SEEK_SET) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (out_fd < 0) {   /* what the server writes: read back after each input */
		out_fd = memfd_create("mcp-out", MFD_CLOEXEC);
		FUZZ_CHECK(out_fd >= 0);
	}
	mcp_server s = { .run_opts = operator_opts,
		         .n_run_opts = sizeof(operator_opts) / sizeof(*operator_opts),
		         .timeout_ms = OPERATOR_TIMEOUT_MS,
		         .structured = true,
		         .out_fd = out_fd,
		         .start = fake_start,
		         .boxes = boxes,
		         .boxes_made = &made,
		         .box_prefix = "mcp-1",
		         .max_sandboxes = 4,
		         .create = fake_create,
		         .destroy = fake_destroy };
	memset(boxes, 0, sizeof(boxes));
	made = 0;
	const uint8_t *nul = memchr(data, 0, size);
	size_t stream = nul ? (size_t) (nul - data) : size;
	mcp_call *calls = NULL;
	running = 0;
	char buf[CAP];
	size_t used = 0, pos = 0;
	bool discarding = false;
	/* Reads of 1 to 1024 bytes, varying with the data. */
	while (pos < stream) {
		size_t want = 1 + (size_t) (data[pos] * 4u + pos) % 1024;
		size_t n = stream - pos;
		if (n > want)
			n = want;
		if (n > CAP - used)
			n = CAP - used;
		memcpy(buf + used, data + pos, n);
		pos += n;
		used = mcp_feed(&s, &calls, buf, used + n, CAP, &discarding);
		FUZZ_CHECK(used < CAP);
		unsigned k = 0;
		for (mcp_call *c = calls; c; c = c->next)
			k++;
		FUZZ_CHECK(k <= MCP_MAX_CALLS && k == running);
		FUZZ_CHECK(s.n_waiting <= MCP_MAX_WAITING && s.waiting_bytes <= MCP_MAX_WAITING_BYTES);
		FUZZ_CHECK(!s.n_waiting || k == MCP_MAX_CALLS);
	}
	mcp_drop_waiting(&s);
	/* The children's records. */
	const char *rec = nul ? (const char *) nul + 1 : NULL;
	size_t rlen = nul ? size - stream - 1 : 0;
	while (calls) {
		mcp_call *c = calls;
		calls = c->next;
		if (rec) {
			c->out = malloc(rlen ? rlen : 1);
			FUZZ_CHECK(c->out);
			memcpy(c->out, rec, rlen);
			c->len = c->cap = rlen;
		}
		/* Output past the bound (the server cuts it; not a run's record). */
		c->truncated = (rlen & 2) && c->kind != MCP_RUN && c->kind != MCP_BOX_RUN;
		json_t *r = mcp_call_result(&s, c, rlen & 1 ? 9 : 0);
		FUZZ_CHECK(json_is_object(r) && json_is_array(json_object_get(r, "content")));
		FUZZ_CHECK(json_is_boolean(json_object_get(r, "isError")));
		/* A cut file never passes for the file. */
		FUZZ_CHECK(!(c->kind == MCP_BOX_READ && c->truncated) || json_is_true(json_object_get(r, "isError")));
		char *dump = json_dumps(r, JSON_COMPACT);
		FUZZ_CHECK(dump);
		free(dump);
		json_decref(r);
		mcp_call_free(c);
	}
	check_output();
	return 0;
}
