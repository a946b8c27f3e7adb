/* The workspace tools of `nsbox mcp`, offered when the operator started the
 * server with a session (--workspace DIR --session NAME): the model reviews
 * what its runs changed and applies or discards it. Each call is a child
 * `nsbox session changes|diff|apply|discard` on the operator's session,
 * with the operator's policy: the model names no session, workspace or
 * option, only (for apply) paths inside the session, after "--". What the
 * sandbox wrote (file names, contents) is hostile: the CLI escapes control
 * characters, and the text the model reads is cut at MCP_MAX_TEXT. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cli.h"
#include "mcp/mcp.h"
#include "nsbox.h"

#define MAX_PATHS 1000
#define MAX_PATH_ARG 4096
#define MAX_LINES 200            /* change lines in the text for the model */

static json_t *object_schema(json_t *props, json_t *required)
{
	return json_pack("{s:s, s:o, s:o, s:b}", "type", "object", "properties", props, "required", required,
	                 "additionalProperties", 0);
}

static json_t *ws_tool(const mcp_server *s, const char *name, const char *title, const char *desc, json_t *input,
                       bool destructive, bool read_only, json_t *output)
{
	json_t *t = json_pack("{s:s, s:s, s:s, s:o, s:{s:b, s:b, s:b, s:b}}", "name", name, "title", title,
	                      "description", desc, "inputSchema", input, "annotations", "readOnlyHint", read_only,
	                      "destructiveHint", destructive, "idempotentHint", read_only, "openWorldHint", 0);
	if (t && s->structured)
		json_object_set_new(t, "outputSchema", output);
	else
		json_decref(output);
	return t;
}

void mcp_workspace_tools(const mcp_server *s, json_t *list)
{
	if (!s->session)
		return;
	json_t *none = json_pack("{s:s, s:{}, s:b}", "type", "object", "properties", "additionalProperties", 0);
	json_t *changes_out = object_schema(
	        json_pack("{s:{s:s}, s:{s:s}, s:{s:s}}", "session", "type", "string", "changes", "type", "array",
	                  "count", "type", "integer"),
	        json_pack("[s,s,s]", "session", "changes", "count"));
	json_t *text_out = object_schema(
	        json_pack("{s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}}", "session", "type", "string", "output", "type",
	                  "string", "exit_status", "type", "integer", "truncated", "type", "boolean"),
	        json_pack("[s,s,s,s]", "session", "output", "exit_status", "truncated"));
	json_t *apply_in = json_pack("{s:s, s:{s:{s:s, s:{s:s}, s:i, s:s}}, s:b}", "type", "object", "properties",
	                             "paths", "type", "array", "items", "type", "string", "maxItems", MAX_PATHS,
	                             "description",
	                             "paths in the workspace to apply (default: every change); a directory "
	                             "includes what is below it",
	                             "additionalProperties", 0);
	json_array_append_new(list, ws_tool(s, "workspace_changes", "List the workspace's changes",
	                                    "List what the sandboxed runs of this session changed in the "
	                                    "workspace (nothing is applied to it until workspace_apply).",
	                                    json_deep_copy(none), false, true, changes_out));
	json_array_append_new(list, ws_tool(s, "workspace_diff", "Show the workspace's changes as a diff",
	                                    "A unified diff of the session's changes against the workspace.",
	                                    json_deep_copy(none), false, true, json_deep_copy(text_out)));
	json_array_append_new(list, ws_tool(s, "workspace_apply", "Apply the session's changes to the workspace",
	                                    "Write the session's changes (or those under the given paths) "
	                                    "into the real workspace. Changes the policy denies are refused.",
	                                    apply_in, true, false, json_deep_copy(text_out)));
	json_array_append_new(list, ws_tool(s, "workspace_discard", "Discard the session's changes",
	                                    "Throw away every change of the session; the workspace is left "
	                                    "as it is.",
	                                    none, true, false, text_out));
}

/* A copy of s[0, len) that is valid UTF-8 without NUL: what is not is
 * written as \xNN (JSON strings must be UTF-8; a file name need not be). */
static char *utf8_clean(const char *s, size_t len)
{
	char *out = malloc(len * 4 + 1), *o = out;
	if (!out)
		return NULL;
	const unsigned char *p = (const unsigned char *) s, *end = p + len;
	while (p < end) {
		size_t n = *p < 0x80 ? 1 : (*p & 0xe0) == 0xc0 ? 2 : (*p & 0xf0) == 0xe0 ? 3 : (*p & 0xf8) == 0xf0 ? 4 : 0;
		bool ok = n && *p && (size_t) (end - p) >= n && !(n == 2 && *p < 0xc2) && !(n == 4 && *p > 0xf4);
		for (size_t k = 1; ok && k < n; k++)
			ok = (p[k] & 0xc0) == 0x80;
		/* Overlong three-byte forms, UTF-16 surrogates, beyond U+10FFFF. */
		if (ok && n == 3 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0)))
			ok = false;
		if (ok && n == 4 && ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90)))
			ok = false;
		if (!ok) {
			o += sprintf(o, "\\x%02x", *p++);
			continue;
		}
		memcpy(o, p, n);
		o += n, p += n;
	}
	*o = '\0';
	return out;
}

static json_t *ws_error(const char *msg)
{
	return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", msg, "isError", 1);
}

/* Paths for apply: strings, relative, without NUL or "..", bounded. */
static json_t *check_paths(json_t *paths, size_t *n)
{
	*n = 0;
	if (!paths || json_is_null(paths))
		return NULL;
	if (!json_is_array(paths) || json_array_size(paths) > MAX_PATHS)
		return ws_error("workspace_apply: 'paths' must be an array of at most 1000 strings");
	size_t i;
	json_t *p;
	json_array_foreach(paths, i, p) {
		const char *v = json_string_value(p);
		size_t len = json_string_length(p);
		if (!v || !len || len > MAX_PATH_ARG || strlen(v) != len || v[0] == '/' || !strcmp(v, "..") ||
		    !strncmp(v, "../", 3) || strstr(v, "/../") ||
		    (len >= 3 && !strcmp(v + len - 3, "/..")))
			return ws_error("workspace_apply: each path must be a relative path inside the workspace "
			                "(no leading '/', no '..', no NUL, at most 4096 bytes)");
	}
	*n = json_array_size(paths);
	return NULL;
}

int mcp_workspace_call(const mcp_server *s, const char *name, json_t *args, mcp_call **call, json_t **result,
                       int (*start)(const mcp_server *, char **, const char *, size_t, mcp_call **))
{
	mcp_kind kind = !strcmp(name, "workspace_changes") ? MCP_CHANGES
	                : !strcmp(name, "workspace_diff")   ? MCP_DIFF
	                : !strcmp(name, "workspace_apply")  ? MCP_APPLY
	                : !strcmp(name, "workspace_discard") ? MCP_DISCARD
	                                                     : MCP_RUN;
	if (kind == MCP_RUN || !s->session)
		return -1;
	const char *key;
	json_t *v;
	json_object_foreach(args, key, v)
		if (kind != MCP_APPLY || strcmp(key, "paths")) {
			*result = ws_error("refused argument: the workspace tools act on the operator's session only "
			                   "(workspace_apply takes 'paths'; the others take nothing)");
			return 0;
		}
	size_t n_paths = 0;
	json_t *paths = json_object_get(args, "paths");
	if ((*result = check_paths(paths, &n_paths)))
		return 0;
	char **argv = calloc(n_paths + 10, sizeof(char *));
	if (!argv) {
		*result = ws_error("out of memory");
		return 0;
	}
	int n = 0;
	argv[n++] = "nsbox";
	argv[n++] = "session";
	argv[n++] = kind == MCP_CHANGES ? "changes" : kind == MCP_DIFF ? "diff" : kind == MCP_APPLY ? "apply" : "discard";
	if (kind == MCP_CHANGES)
		argv[n++] = "--json";
	if (kind == MCP_DIFF)
		argv[n++] = "--escape";   /* for a model to read, as for a terminal */
	if (s->policy && (kind == MCP_CHANGES || kind == MCP_APPLY)) {
		argv[n++] = "--policy";
		argv[n++] = (char *) s->policy;
	}
	argv[n++] = "--";
	argv[n++] = (char *) s->session;
	for (size_t i = 0; i < n_paths; i++)
		argv[n++] = (char *) json_string_value(json_array_get(paths, i));
	int r = start(s, argv, NULL, 0, call);
	free(argv);
	if (r < 0)
		*result = ws_error(strerror(-r));
	else
		(*call)->kind = kind;
	return 0;
}

/* The text a model reads for a change list: a line each, escaped, cut. */
static char *changes_text(json_t *list)
{
	size_t i;
	json_t *c;
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	if (!f)
		return NULL;
	json_array_foreach(list, i, c) {
		if (i == MAX_LINES) {
			fprintf(f, "... and %zu more (structuredContent has them all)\n", json_array_size(list) - i);
			break;
		}
		char *raw = nsbox_escape(json_string_value(json_object_get(c, "path")) ?: "?");
		char *p = raw ? utf8_clean(raw, strlen(raw)) : NULL;
		free(raw);
		const char *kind = json_string_value(json_object_get(c, "kind"));
		fprintf(f, "%s %s%s\n", kind ? kind : "changed", p ? p : "?",
		        json_is_true(json_object_get(c, "denied")) ? " (denied by the policy)" : "");
		free(p);
	}
	if (!json_array_size(list))
		fputs("no changes\n", f);
	fclose(f);
	return out;
}

json_t *mcp_workspace_result(const mcp_server *s, mcp_call *c, int wstatus)
{
	int status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
	json_t *structured = NULL;
	char *text = NULL;
	bool failed = status != 0 && !c->truncated;
	/* No run has made the session yet (or it was discarded): nothing to
	 * review, which is an answer, not an error. */
	bool none = c->kind == MCP_CHANGES && status != 0 && c->out &&
	            memmem(c->out, c->len, "there is no such session", 24);
	if (none)
		status = 0, failed = false;
	if (c->kind == MCP_CHANGES && status == 0) {
		json_error_t jerr;
		json_t *list = none ? json_array() : json_loadb(c->out, c->len, 0, &jerr);
		if (!json_is_array(list)) {
			json_decref(list);
			return ws_error("workspace_changes: the change list could not be read");
		}
		text = changes_text(list);
		structured = json_pack("{s:s, s:o, s:I}", "session", s->session, "changes", list, "count",
		                       (json_int_t) json_array_size(list));
	} else {
		/* The CLI's own output (escaped there), and its error when it
		 * failed: what happened, in its words. */
		const char *what = c->kind == MCP_DIFF ? "diff" : c->kind == MCP_APPLY ? "apply"
		                 : c->kind == MCP_DISCARD ? "discard" : "changes";
		char *clean = utf8_clean(c->out ? c->out : "", c->len);
		size_t cl = clean ? strlen(clean) : 0;
		size_t n = cl + 160;
		text = clean ? malloc(n) : NULL;
		if (text)
			snprintf(text, n, "%s%s[%s %s%s, exit status %d]", clean, cl && clean[cl - 1] != '\n' ? "\n" : "",
			         what, failed ? "failed" : "done", c->truncated ? ", output cut at 1 MiB" : "", status);
		structured = json_pack("{s:s, s:s, s:i, s:b}", "session", s->session, "output", clean ? clean : "",
		                       "exit_status", status, "truncated", c->truncated);
		free(clean);
	}
	json_t *res = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", text ? text : "",
	                        "isError", failed);
	free(text);
	if (res && s->structured && structured)
		json_object_set(res, "structuredContent", structured);
	json_decref(structured);
	return res;
}
