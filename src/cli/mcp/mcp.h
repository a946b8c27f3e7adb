/* `nsbox mcp`: the tools and how a call runs. The protocol loop is mcp.c;
 * the tool definitions, the ceiling checks and the child runs are
 * mcp_tools.c. */
#ifndef NSBOX_MCP_H
#define NSBOX_MCP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <jansson.h>

#include "nsbox.h"

/* What the operator fixed when starting the server: the `nsbox run`
 * options passed through to every call, and the timeout they amount to
 * (the ceiling for a tool's `timeout`). */
typedef struct mcp_call mcp_call;
typedef struct mcp_server mcp_server;
/* A sandbox a model created (sandbox_create): this server's. */
#define MCP_MAX_SANDBOXES 32
typedef struct mcp_box {
	char name[64];           /* "" : a free slot */
	nsbox_sandbox *sb;
} mcp_box;
/* A tools/call that came while MCP_MAX_CALLS ran: it waits, in order. */
typedef struct mcp_waiting {
	json_t *id, *params;
	size_t bytes;
	struct mcp_waiting *next;
} mcp_waiting;
/* Calls running at once in one server: each is a sandbox with the
 * operator's limits, so this bounds what one client can multiply them by.
 * More wait, up to MCP_MAX_WAITING calls and MCP_MAX_WAITING_BYTES of
 * their messages; only past that is a call refused. */
#define MCP_MAX_CALLS 8
#define MCP_MAX_WAITING 1024
#define MCP_MAX_WAITING_BYTES (64u << 20)
struct mcp_server {
	char **run_opts;
	int n_run_opts;
	uint64_t timeout_ms;     /* 0: none */
	bool structured;         /* the negotiated revision has structuredContent */
	const char *session;     /* --session NAME: the workspace tools review it */
	const char *policy;      /* --policy FILE|NAME, for the session's deny rules */
	int out_fd;              /* where protocol messages go: stdout */
	/* The stateful tools (mcp_live.c): the sandboxes, how many may run
	 * (--max-sandboxes; 0: the tools are off) and their idle timeout. */
	mcp_box *boxes;
	unsigned *boxes_made;
	const char *box_prefix;  /* names are PREFIX-N: "mcp-PID" */
	int max_sandboxes;
	uint64_t sandbox_idle_ms;
	/* Start and stop one (the fuzz harness puts its own here). */
	int (*create)(const mcp_server *s, mcp_box *b, char *why, size_t why_len);
	void (*destroy)(const mcp_server *s, mcp_box *b);
	/* Whether it still runs (its idle timeout may have ended it); NULL:
	 * assumed to. */
	bool (*alive)(const mcp_server *s, const mcp_box *b);
	mcp_waiting *waiting, **waiting_tail;   /* the queue (tail NULL: empty) */
	size_t n_waiting, waiting_bytes;
	/* Starts a checked call: argv (NULL-terminated, "nsbox" first) with
	 * `input` on its stdin. NULL: a child `nsbox` (mcp_tools.c); the fuzz
	 * harness puts its own here, so that no sandbox is launched. */
	int (*start)(const mcp_server *s, char **argv, const char *input, size_t ilen, mcp_call **out);
};

/* What a call runs: a sandbox (its record is the result), or one of the
 * workspace tools (`nsbox session ...`, whose output is the result). */
typedef enum mcp_kind {
	MCP_RUN, MCP_CHANGES, MCP_DIFF, MCP_APPLY, MCP_DISCARD,
	MCP_BOX_RUN, MCP_BOX_READ, MCP_BOX_WRITE, MCP_BOX_LIST,   /* the stateful tools */
} mcp_kind;
/* The most of a workspace tool's output kept (a diff is cut there). */
#define MCP_MAX_TEXT (1u << 20)

/* A running tool call: an `nsbox run` child whose stdout (the result
 * record) we collect. */
struct mcp_call {
	json_t *id;
	pid_t pid;               /* > 0 for a child we may signal */
	int out_fd;
	char *out;
	size_t len, cap;
	bool cancelled;
	mcp_kind kind;
	bool truncated;          /* a workspace tool's output was cut */
	struct mcp_call *next;
};

/* One client message (a line without its newline). */
void mcp_handle(mcp_server *s, mcp_call **calls, const char *line, size_t len);

/* Handle each complete line in buf[0, used) and return how many bytes are
 * left (the start of a line, moved to buf). A line that fills the whole
 * buffer (cap bytes) is answered with an error and dropped up to its end;
 * *discarding carries that from one call to the next. */
size_t mcp_feed(mcp_server *s, mcp_call **calls, char *buf, size_t used, size_t cap, bool *discarding);

/* Start waiting calls while fewer than MCP_MAX_CALLS run. */
void mcp_start_waiting(mcp_server *s, mcp_call **calls);
/* Drop the waiting calls unanswered (the client is gone). */
void mcp_drop_waiting(mcp_server *s);

/* The tools/list answer. */
json_t *mcp_tools_list(const mcp_server *s);

/* Start a tools/call. On success *call is running (or NULL with *result
 * set: an immediate tool error, e.g. a refused argument). Returns -1 with
 * *rpc_msg set for a JSON-RPC invalid-params error. */
int mcp_tools_call(const mcp_server *s, json_t *params, mcp_call **call, json_t **result, const char **rpc_msg);

/* A CallToolResult that is an error the model can correct (isError). */
json_t *mcp_tool_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* args' "timeout" (seconds; may only lower the operator's) as "--timeout
 * Nms" in out (out[0] empty: none given); NULL, or a tool error. */
json_t *mcp_timeout_arg(const mcp_server *s, json_t *args, char *out, size_t len);

/* The finished child's record turned into a CallToolResult. */
json_t *mcp_call_result(const mcp_server *s, mcp_call *c, int wstatus);

void mcp_call_free(mcp_call *c);

/* The workspace tools (mcp_workspace.c), when s->session is set: appended
 * to the tools/list array; a call (-1: not one of them); its result. */
void mcp_workspace_tools(const mcp_server *s, json_t *list);
int mcp_workspace_call(const mcp_server *s, const char *name, json_t *args, mcp_call **call, json_t **result,
                       int (*start)(const mcp_server *, char **, const char *, size_t, mcp_call **));
json_t *mcp_workspace_result(const mcp_server *s, mcp_call *c, int wstatus);

/* The stateful tools (mcp_live.c), when s->boxes is set: appended to the
 * tools/list array; a call (-1: not one of them); its result (a run's:
 * run_result, the record's answer, gets the images). */
void mcp_live_tools(const mcp_server *s, json_t *list);
int mcp_live_call(const mcp_server *s, const char *name, json_t *args, mcp_call **call, json_t **result,
                  int (*start)(const mcp_server *, char **, const char *, size_t, mcp_call **));
json_t *mcp_live_result(const mcp_server *s, mcp_call *c, int wstatus, json_t *run_result);
int mcp_live_create(const mcp_server *s, mcp_box *b, char *why, size_t why_len);
void mcp_live_destroy(const mcp_server *s, mcp_box *b);
bool mcp_live_alive(const mcp_server *s, const mcp_box *b);

#endif
