/* The stateful tools of `nsbox mcp`: a model creates sandboxes that stay
 * (sandbox_create), runs code in them whose variables persist (a context
 * per language), runs commands, writes, reads and lists files, and stops
 * them. Each sandbox is started by this server with the operator's options
 * (the same ceiling as run_code's) and belongs to it: it ends when the
 * server does, when the model stops it, or after the operator's idle
 * timeout. A call names a sandbox by the name this server gave it, and only
 * those: a model cannot reach the user's other sandboxes. Runs and file
 * transfers are child `nsbox exec` / `cp` / `ls` processes on that name,
 * as the other tools are child `nsbox run`s; what the sandbox wrote is
 * hostile (escaped, bounded at MCP_MAX_TEXT for the model). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "live/live_cli.h"
#include "mcp/mcp.h"
#include "nsbox.h"

#define MAX_CODE (1u << 20)
#define MAX_COMMAND (64u << 10)
#define MAX_FILE_IN (MCP_MAX_TEXT)

static json_t *box_tool(const char *name, const char *title, const char *desc, json_t *props, json_t *required,
                        bool read_only, bool destructive)
{
	json_t *in = json_pack("{s:s, s:o, s:o, s:b}", "type", "object", "properties", props, "required", required,
	                       "additionalProperties", 0);
	return json_pack("{s:s, s:s, s:s, s:o, s:{s:b, s:b, s:b, s:b}}", "name", name, "title", title, "description",
	                 desc, "inputSchema", in, "annotations", "readOnlyHint", read_only, "destructiveHint",
	                 destructive, "idempotentHint", read_only, "openWorldHint", 0);
}

static json_t *str_prop(const char *desc)
{
	return json_pack("{s:s, s:s}", "type", "string", "description", desc);
}

static json_t *timeout_prop(void)
{
	return json_pack("{s:s, s:f, s:s}", "type", "number", "exclusiveMinimum", 0.0, "description",
	                 "wall-clock limit in seconds; may only lower the server's limit");
}

void mcp_live_tools(const mcp_server *s, json_t *list)
{
	if (!s->boxes)
		return;
	json_t *sb = str_prop("the sandbox's name, as sandbox_create returned it");
	json_array_append_new(list, box_tool("sandbox_create", "Create a sandbox that stays",
	        "Start an isolated sandbox that keeps its files, processes and interpreter state between calls "
	        "(the operator's limits and network apply); returns its name. It ends with sandbox_stop, when "
	        "idle for long, or when this server ends.",
	        json_object(), json_array(), false, false));
	json_array_append_new(list, box_tool("sandbox_run_code", "Run code in a sandbox, keeping state",
	        "Run Python or Node.js code in the sandbox's persistent interpreter for that language: variables, "
	        "imports and functions persist between calls, like notebook cells. The last expression is shown; "
	        "matplotlib figures come back as images.",
	        json_pack("{s:O, s:o, s:{s:s, s:[s,s], s:s}, s:o}", "sandbox", sb, "code", str_prop("the code"),
	                  "language", "type", "string", "enum", "python", "node", "default", "python", "timeout",
	                  timeout_prop()),
	        json_pack("[s,s]", "sandbox", "code"), false, false));
	json_array_append_new(list, box_tool("sandbox_run_command", "Run a shell command in a sandbox",
	        "Run a shell command line (sh -c) in the sandbox; files it writes stay for later calls.",
	        json_pack("{s:O, s:o, s:o}", "sandbox", sb, "command", str_prop("a shell command line"), "timeout",
	                  timeout_prop()),
	        json_pack("[s,s]", "sandbox", "command"), false, false));
	json_array_append_new(list, box_tool("sandbox_write_file", "Write a file into a sandbox",
	        "Write content to a file inside the sandbox (made or replaced).",
	        json_pack("{s:O, s:o, s:o, s:{s:s, s:[s,s], s:s}}", "sandbox", sb, "path",
	                  str_prop("the file's path inside (absolute, or relative to the working directory)"),
	                  "content", str_prop("the file's content"), "encoding", "type", "string", "enum", "utf-8",
	                  "base64", "default", "utf-8"),
	        json_pack("[s,s,s]", "sandbox", "path", "content"), false, true));
	json_array_append_new(list, box_tool("sandbox_read_file", "Read a file from a sandbox",
	        "Read a file inside the sandbox: text as text, other bytes as a base64 resource, images as images "
	        "(at most 1 MiB).",
	        json_pack("{s:O, s:o}", "sandbox", sb, "path", str_prop("the file's path inside")),
	        json_pack("[s,s]", "sandbox", "path"), true, false));
	json_array_append_new(list, box_tool("sandbox_list_files", "List a directory in a sandbox",
	        "List a directory inside the sandbox (its working directory by default).",
	        json_pack("{s:O, s:o}", "sandbox", sb, "path", str_prop("the directory's path inside")),
	        json_pack("[s]", "sandbox"), true, false));
	json_array_append_new(list, box_tool("sandbox_stop", "Stop a sandbox",
	        "End the sandbox and everything in it; its files are gone.",
	        json_pack("{s:O}", "sandbox", sb), json_pack("[s]", "sandbox"), false, true));
	json_decref(sb);
}

/* The slot of the sandbox a call names: this server's only. */
static int box_find(const mcp_server *s, json_t *args)
{
	const char *name = json_string_value(json_object_get(args, "sandbox"));
	for (int i = 0; name && i < MCP_MAX_SANDBOXES; i++)
		if (s->boxes[i].name[0] && !strcmp(s->boxes[i].name, name))
			return i;
	return -1;
}

/* Only the keys a tool takes. */
static bool only(json_t *args, const char *const *keys)
{
	const char *key;
	json_t *v;
	json_object_foreach(args, key, v) {
		bool ok = false;
		for (const char *const *k = keys; *k; k++)
			ok |= !strcmp(*k, key);
		if (!ok)
			return false;
	}
	return true;
}

/* Let go of a sandbox that ended by itself (its idle timeout, or stopped
 * from outside): its slot is free again. */
static bool box_ended(const mcp_server *s, int slot)
{
	mcp_box *b = &s->boxes[slot];
	if (!s->alive || s->alive(s, b))
		return false;
	s->destroy(s, b);
	b->name[0] = '\0';
	return true;
}

static json_t *create(const mcp_server *s, json_t *args)
{
	if (json_object_size(args))
		return mcp_tool_error("sandbox_create takes no arguments: the operator's options make the sandbox");
	for (int i = 0; i < MCP_MAX_SANDBOXES; i++)
		if (s->boxes[i].name[0])
			box_ended(s, i);
	int slot = -1;
	for (int i = 0; i < MCP_MAX_SANDBOXES && i < s->max_sandboxes && slot < 0; i++)
		if (!s->boxes[i].name[0])
			slot = i;
	if (slot < 0)
		return mcp_tool_error("%d sandboxes are running (the operator's bound): stop one with sandbox_stop",
		                s->max_sandboxes);
	mcp_box *b = &s->boxes[slot];
	snprintf(b->name, sizeof(b->name), "%.40s-%u", s->box_prefix, ++s->boxes_made[0]);
	char why[512] = "";
	if (s->create(s, b, why, sizeof(why)) < 0) {
		b->name[0] = '\0';
		return mcp_tool_error("sandbox_create: %s", why[0] ? why : "the sandbox could not be started (see the "
		                "server's stderr)");
	}
	json_t *res = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", b->name, "isError", 0);
	if (res && s->structured)
		json_object_set_new(res, "structuredContent", json_pack("{s:s}", "sandbox", b->name));
	return res;
}

static json_t *stop(const mcp_server *s, int slot)
{
	mcp_box *b = &s->boxes[slot];
	char name[64];
	snprintf(name, sizeof(name), "%s", b->name);
	s->destroy(s, b);
	b->name[0] = '\0';
	char text[128];
	snprintf(text, sizeof(text), "stopped %s", name);
	return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", text, "isError", 0);
}

/* Decode base64 (standard alphabet, padding optional); NULL if invalid. */
static char *unbase64(const char *in, size_t len, size_t *out_len)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *out = malloc(len / 4 * 3 + 3);
	unsigned acc = 0, bits = 0;
	size_t n = 0;
	for (size_t i = 0; out && i < len; i++) {
		if (in[i] == '=')
			break;
		const char *p = in[i] ? strchr(a, in[i]) : NULL;
		if (!p) {
			free(out);
			return NULL;
		}
		acc = (acc << 6) | (unsigned) (p - a);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[n++] = (char) ((acc >> bits) & 0xff);
		}
	}
	*out_len = n;
	return out;
}

int mcp_live_call(const mcp_server *s, const char *name, json_t *args, mcp_call **call, json_t **result,
                  int (*start)(const mcp_server *, char **, const char *, size_t, mcp_call **))
{
	if (!s->boxes || strncmp(name, "sandbox_", 8))
		return -1;
	static const char *const k_run_code[] = { "sandbox", "code", "language", "timeout", NULL };
	static const char *const k_run_cmd[] = { "sandbox", "command", "timeout", NULL };
	static const char *const k_write[] = { "sandbox", "path", "content", "encoding", NULL };
	static const char *const k_path[] = { "sandbox", "path", NULL };
	static const char *const k_box[] = { "sandbox", NULL };
	const char *const *keys = !strcmp(name, "sandbox_run_code")      ? k_run_code
	                          : !strcmp(name, "sandbox_run_command") ? k_run_cmd
	                          : !strcmp(name, "sandbox_write_file")  ? k_write
	                          : !strcmp(name, "sandbox_read_file") || !strcmp(name, "sandbox_list_files") ? k_path
	                          : !strcmp(name, "sandbox_stop")        ? k_box
	                                                                 : NULL;
	if (!strcmp(name, "sandbox_create")) {
		*result = create(s, args);
		return 0;
	}
	if (!keys)
		return -1;
	if (!only(args, keys)) {
		*result = mcp_tool_error("refused argument: %s takes only its own arguments (the operator's options are the "
		                   "ceiling: no network, volume, image or limit changes)", name);
		return 0;
	}
	int slot = box_find(s, args);
	if (slot < 0) {
		*result = mcp_tool_error("%s: no sandbox '%.64s' of this server (sandbox_create makes one)", name,
		                   json_string_value(json_object_get(args, "sandbox")) ?: "");
		return 0;
	}
	if (box_ended(s, slot)) {
		*result = mcp_tool_error("%s: sandbox '%s' has ended (idle for longer than the operator's "
		                   "--sandbox-idle-timeout, or stopped from outside); sandbox_create makes a new one",
		                   name, json_string_value(json_object_get(args, "sandbox")));
		return 0;
	}
	if (!strcmp(name, "sandbox_stop")) {
		*result = stop(s, slot);
		return 0;
	}
	char *box = s->boxes[slot].name, timeout[48];
	const char *path = json_string_value(json_object_get(args, "path"));
	size_t plen = json_string_length(json_object_get(args, "path"));
	if (path && (!plen || plen > 4096 || strlen(path) != plen)) {
		*result = mcp_tool_error("%s: 'path' must be 1 to 4096 bytes without NUL", name);
		return 0;
	}
	char target[4200];
	char *argv[16];
	int n = 0;
	const char *input = NULL;
	size_t ilen = 0;
	char *decoded = NULL;
	mcp_kind kind;
	argv[n++] = "nsbox";
	if (!strcmp(name, "sandbox_run_code") || !strcmp(name, "sandbox_run_command")) {
		if ((*result = mcp_timeout_arg(s, args, timeout, sizeof(timeout))))
			return 0;
		bool code = !strcmp(name, "sandbox_run_code");
		json_t *text = json_object_get(args, code ? "code" : "command");
		json_t *jl = json_object_get(args, "language");
		const char *lang = !jl || json_is_null(jl) ? "python" : json_string_value(jl);
		if (!json_is_string(text) || json_string_length(text) > (code ? MAX_CODE : MAX_COMMAND) ||
		    strlen(json_string_value(text)) != json_string_length(text) || !lang ||
		    (strcmp(lang, "python") && strcmp(lang, "node"))) {
			*result = mcp_tool_error(code ? "sandbox_run_code needs 'code' (a string of at most 1 MiB) and takes "
			                          "'language' (python, the default, or node)"
			                        : "sandbox_run_command needs 'command': a string of at most 64 KiB without NUL");
			return 0;
		}
		kind = MCP_BOX_RUN;
		argv[n++] = "exec";
		argv[n++] = box;
		argv[n++] = "--json";
		if (timeout[0]) {
			argv[n++] = "--timeout";
			argv[n++] = timeout;
		}
		if (code) {
			argv[n++] = "--context";
			argv[n++] = (char *) lang;
			argv[n++] = "--lang";
			argv[n++] = (char *) lang;
			argv[n++] = "-";
			input = json_string_value(text);
			ilen = json_string_length(text);
		} else {
			argv[n++] = "--";
			argv[n++] = "sh";
			argv[n++] = "-c";
			argv[n++] = (char *) json_string_value(text);
		}
	} else if (!strcmp(name, "sandbox_write_file")) {
		json_t *content = json_object_get(args, "content");
		const char *enc = json_string_value(json_object_get(args, "encoding"));
		if (!path || !json_is_string(content) || json_string_length(content) > 2 * MAX_FILE_IN ||
		    (enc && strcmp(enc, "utf-8") && strcmp(enc, "base64"))) {
			*result = mcp_tool_error("sandbox_write_file needs 'path' and 'content' (at most 1 MiB; 'encoding' utf-8 "
			                   "or base64)");
			return 0;
		}
		input = json_string_value(content);
		ilen = json_string_length(content);
		if (enc && !strcmp(enc, "base64")) {
			decoded = unbase64(input, ilen, &ilen);
			if (!decoded) {
				*result = mcp_tool_error("sandbox_write_file: 'content' is not base64");
				return 0;
			}
			input = decoded;
		}
		if (ilen > MAX_FILE_IN) {
			free(decoded);
			*result = mcp_tool_error("sandbox_write_file: the content is larger than 1 MiB");
			return 0;
		}
		kind = MCP_BOX_WRITE;
		snprintf(target, sizeof(target), "%s:%s", box, path);
		argv[n++] = "cp";
		argv[n++] = "-";
		argv[n++] = target;
	} else if (!strcmp(name, "sandbox_read_file")) {
		if (!path) {
			*result = mcp_tool_error("sandbox_read_file needs 'path'");
			return 0;
		}
		kind = MCP_BOX_READ;
		snprintf(target, sizeof(target), "%s:%s", box, path);
		argv[n++] = "cp";
		argv[n++] = target;
		argv[n++] = "-";
	} else {
		kind = MCP_BOX_LIST;
		argv[n++] = "ls";
		argv[n++] = box;
		argv[n++] = (char *) (path ? path : ".");
		argv[n++] = "--json";
	}
	argv[n] = NULL;
	int r = start(s, argv, input, ilen, call);
	free(decoded);
	if (r < 0)
		*result = mcp_tool_error("%s: %s", name, strerror(-r));
	else
		(*call)->kind = kind;
	return 0;
}

/* ---- results ------------------------------------------------------------------------ */

static bool utf8_ok(const char *s, size_t len)
{
	json_t *j = json_stringn(s, len);   /* NULL unless valid UTF-8 (NUL allowed) */
	json_decref(j);
	return j != NULL && !memchr(s, '\0', len);
}

static char *b64(const char *data, size_t len)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;
	const unsigned char *p = (const unsigned char *) data;
	for (size_t i = 0; out && i < len; i += 3) {
		unsigned v = (unsigned) p[i] << 16 | (i + 1 < len ? (unsigned) p[i + 1] << 8 : 0) |
		             (i + 2 < len ? p[i + 2] : 0);
		*o++ = a[v >> 18 & 63];
		*o++ = a[v >> 12 & 63];
		*o++ = i + 1 < len ? a[v >> 6 & 63] : '=';
		*o++ = i + 2 < len ? a[v & 63] : '=';
	}
	if (out)
		*o = '\0';
	return out;
}

static bool png(const char *d, size_t n)
{
	return n >= 8 && !memcmp(d, "\x89PNG\r\n\x1a\n", 8);
}

/* The record's rich results (a cell's display protocol): images as MCP
 * image content, after the text. */
static void add_images(json_t *content, json_t *rec)
{
	size_t i;
	json_t *bundle;
	json_array_foreach(json_object_get(rec, "results"), i, bundle) {
		const char *key;
		json_t *v;
		json_object_foreach(json_object_get(bundle, "data") ?: bundle, key, v)
			if (!strncmp(key, "image/", 6) && json_is_string(v) && strcmp(key, "image/svg+xml"))
				json_array_append_new(content, json_pack("{s:s, s:O, s:s}", "type", "image", "data", v,
				                                         "mimeType", key));
	}
}

json_t *mcp_live_result(const mcp_server *s, mcp_call *c, int wstatus, json_t *run_result)
{
	int status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
	if (c->kind == MCP_BOX_RUN) {
		/* run_result: the record as run_code's answer; the images added. */
		json_t *rec = json_object_get(run_result, "structuredContent");
		json_t *parsed = NULL;
		if (!rec && c->len)
			rec = parsed = json_loadb(c->out, c->len, JSON_ALLOW_NUL, NULL);
		add_images(json_object_get(run_result, "content"), rec);
		json_decref(parsed);
		return run_result;
	}
	const char *out = c->out ? c->out : "";
	size_t len = c->len;
	if (status != 0 && !c->truncated) {
		/* The CLI's error, in its words (escaped there). */
		char *msg = malloc(len + 1);
		if (msg) {
			memcpy(msg, out, len);
			msg[len] = '\0';
		}
		json_t *r = mcp_tool_error("%.400s", msg && utf8_ok(msg, len) ? msg : "the operation failed");
		free(msg);
		return r;
	}
	if (c->kind == MCP_BOX_WRITE)
		return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", "written", "isError", 0);
	if (c->kind == MCP_BOX_LIST) {
		json_t *list = json_loadb(out, len, 0, NULL);
		if (!json_is_array(list)) {
			json_decref(list);
			return mcp_tool_error("sandbox_list_files: the listing could not be read");
		}
		char *text = NULL;
		size_t tl = 0;
		FILE *f = open_memstream(&text, &tl);
		size_t i;
		json_t *e;
		json_array_foreach(list, i, e)
			if (f)
				fprintf(f, "%s%s\t%lld\n", json_string_value(json_object_get(e, "name")),
				        !strcmp(json_string_value(json_object_get(e, "type")) ?: "", "d") ? "/" : "",
				        (long long) json_integer_value(json_object_get(e, "size")));
		if (f)
			fclose(f);
		json_t *res = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text",
		                        text && *text ? text : "(empty)\n", "isError", 0);
		free(text);
		if (res && s->structured)
			json_object_set_new(res, "structuredContent", json_pack("{s:o}", "entries", list));
		else
			json_decref(list);
		return res;
	}
	/* read: text, an image, or bytes as a base64 resource; whole, or
	 * refused (a cut file would pass for the file). */
	if (c->truncated)
		return mcp_tool_error("sandbox_read_file: the file is larger than 1 MiB, the bound of a read: read a part "
		                "of it with sandbox_run_command (head -c, tail -c, split)");
	if (png(out, len)) {
		char *d = b64(out, len);
		json_t *r = json_pack("{s:[{s:s, s:s, s:s}], s:b}", "content", "type", "image", "data", d ? d : "",
		                      "mimeType", "image/png", "isError", 0);
		free(d);
		return r;
	}
	if (utf8_ok(out, len)) {
		json_t *t = json_stringn(out, len);
		return json_pack("{s:[{s:s, s:o}], s:b}", "content", "type", "text", "text", t, "isError", 0);
	}
	char *d = b64(out, len);
	json_t *r = json_pack("{s:[{s:s, s:{s:s, s:s, s:s}}], s:b}", "content", "type", "resource", "resource", "uri",
	                      "file:///sandbox-file", "mimeType", "application/octet-stream", "blob", d ? d : "",
	                      "isError", 0);
	free(d);
	return r;
}

/* ---- the sandboxes themselves ------------------------------------------------------ */

int mcp_live_create(const mcp_server *s, mcp_box *b, char *why, size_t why_len)
{
	/* The operator's run options, as nsbox start takes them. */
	char **v = calloc((size_t) s->n_run_opts + 2, sizeof(char *));
	if (!v)
		return -1;
	v[0] = "start";
	for (int i = 0; i < s->n_run_opts; i++)
		v[i + 1] = s->run_opts[i];
	run_args a;
	extern char **environ;
	int rc = parse_start_args(s->n_run_opts + 1, v, environ, &a, why, why_len);
	if (rc == 0) {
		a.name = b->name;
		char idle[32];
		snprintf(idle, sizeof(idle), "%llums", (unsigned long long) s->sandbox_idle_ms);
		if (s->sandbox_idle_ms)
			a.idle_timeout = idle;
		char got[64];
		rc = live_cli_start(&a, 0, got, sizeof(got), &b->sb) == 0 ? 0 : -1;
	}
	run_args_free(&a);
	free(v);
	return rc;
}

/* It runs while the user's list of running sandboxes has its name with its
 * id (a sandbox started later under the same name is not it). The list is
 * read from the sandboxes' state, not asked of the monitor: asking would
 * count as a request and hold off its idle timeout. */
bool mcp_live_alive(const mcp_server *s, const mcp_box *b)
{
	(void) s;
	char *text = NULL;
	nsbox_error *e = NULL;
	if (nsbox_live_list(&text, &e) < 0) {
		nsbox_error_free(e);
		return true;   /* not known to have ended: the call will say */
	}
	json_t *list = json_loads(text, 0, NULL);
	free(text);
	const char *ours = nsbox_sandbox_id(b->sb);
	bool found = !json_is_array(list);
	size_t i;
	json_t *v;
	json_array_foreach(list, i, v)
		found |= !strcmp(json_string_value(json_object_get(v, "name")) ?: "", b->name) && ours &&
		         !strcmp(json_string_value(json_object_get(v, "id")) ?: "", ours);
	json_decref(list);
	return found;
}

void mcp_live_destroy(const mcp_server *s, mcp_box *b)
{
	(void) s;
	nsbox_sandbox_free(b->sb);   /* the server's own: it stops */
	b->sb = NULL;
}
