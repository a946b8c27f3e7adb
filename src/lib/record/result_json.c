/* Rendering the result record as one line of JSON (docs/result.schema.json). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/json.h"
#include "sandbox/sandbox.h"
#include "seccomp/seccomp_profile.h"

static void bool_field(buf *b, const char *name, bool v)
{
	buf_printf(b, ",\"%s\":%s", name, v ? "true" : "false");
}

/* A JSON string of `len` bytes in base64 (RFC 4648, padded). */
static void base64(buf *b, const char *data, size_t len)
{
	static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *p = (const unsigned char *) data;
	if (!p)
		len = 0;
	buf_puts(b, "\"");
	for (size_t i = 0; i < len; i += 3) {
		unsigned v = (unsigned) p[i] << 16 | (i + 1 < len ? (unsigned) p[i + 1] << 8 : 0) | (i + 2 < len ? p[i + 2] : 0);
		char q[4] = { al[v >> 18 & 63], al[v >> 12 & 63], i + 1 < len ? al[v >> 6 & 63] : '=', i + 2 < len ? al[v & 63] : '=' };
		buf_append(b, q, 4);
	}
	buf_puts(b, "\"");
}

static void streams(buf *b, const nsbox_result *r)
{
	static const char *names[] = { "stdout", "stderr" };
	bool invalid[2] = { false, false };
	for (int i = 0; i < 2; i++) {
		buf_printf(b, ",\"%s\":", names[i]);
		if (r->captured)
			invalid[i] = json_strn(b, r->out[i] ? r->out[i] : "", r->out[i] ? r->out_len[i] : 0);
		else
			buf_puts(b, "null");
	}
	for (int i = 0; i < 2; i++) {
		if (r->captured)
			buf_printf(b, ",\"%s_bytes\":%llu", names[i], (unsigned long long) r->out_bytes[i]);
		else
			buf_printf(b, ",\"%s_bytes\":null", names[i]);
	}
	for (int i = 0; i < 2; i++) {
		char k[32];
		snprintf(k, sizeof(k), "%s_truncated", names[i]);
		bool_field(b, k, r->out_truncated[i]);
	}
	for (int i = 0; i < 2; i++) {
		char k[32];
		snprintf(k, sizeof(k), "%s_invalid_utf8", names[i]);
		bool_field(b, k, invalid[i]);
	}
	/* The text fields replace bytes that are not UTF-8; the captured bytes
	 * themselves, losslessly, for a stream that has such bytes. */
	for (int i = 0; i < 2; i++) {
		buf_printf(b, ",\"%s_base64\":", names[i]);
		if (invalid[i])
			base64(b, r->out[i], r->out_len[i]);
		else
			buf_puts(b, "null");
	}
}

static void resources(buf *b, const nsbox_result *r)
{
	if (r->have_cg_stats) {
		const cg_stats *st = &r->cg_stats;
		buf_puts(b, ",\"resources\":{\"peak_memory_bytes\":");
		if (st->have_memory)
			buf_printf(b, "%llu", (unsigned long long) st->peak_memory);
		else
			buf_puts(b, "null");
		if (st->have_cpu)
			buf_printf(b, ",\"cpu_user_ms\":%.3f,\"cpu_system_ms\":%.3f", st->cpu_user_ms, st->cpu_system_ms);
		else if (r->have_rusage)
			buf_printf(b, ",\"cpu_user_ms\":%.3f,\"cpu_system_ms\":%.3f",
			           (double) r->rusage.ru_utime.tv_sec * 1e3 + (double) r->rusage.ru_utime.tv_usec / 1e3,
			           (double) r->rusage.ru_stime.tv_sec * 1e3 + (double) r->rusage.ru_stime.tv_usec / 1e3);
		else
			buf_puts(b, ",\"cpu_user_ms\":null,\"cpu_system_ms\":null");
		/* rusage (pid 1's, with every process it reaped) misses what the
		 * kernel kills and reaps itself when a run is killed: say which. */
		buf_puts(b, st->have_cpu ? ",\"cpu_source\":\"cgroup\""
		            : r->have_rusage ? ",\"cpu_source\":\"rusage\"" : ",\"cpu_source\":null");
		if (st->have_pids_peak)
			buf_printf(b, ",\"pids_peak\":%llu}", (unsigned long long) st->pids_peak);
		else
			buf_puts(b, ",\"pids_peak\":null}");
		return;
	}
	if (!r->have_rusage) {
		buf_puts(b, ",\"resources\":{\"peak_memory_bytes\":null,\"cpu_user_ms\":null,"
		            "\"cpu_system_ms\":null,\"cpu_source\":null,\"pids_peak\":null}");
		return;
	}
	const struct rusage *u = &r->rusage;
	/* Without a cgroup, ru_maxrss is the largest resident set of any one
	 * process of the sandbox (in KiB), not their sum. */
	buf_printf(b, ",\"resources\":{\"peak_memory_bytes\":%llu,\"cpu_user_ms\":%.3f,"
	              "\"cpu_system_ms\":%.3f,\"cpu_source\":\"rusage\",\"pids_peak\":null}",
	           (unsigned long long) u->ru_maxrss * 1024ull,
	           (double) u->ru_utime.tv_sec * 1e3 + (double) u->ru_utime.tv_usec / 1e3,
	           (double) u->ru_stime.tv_sec * 1e3 + (double) u->ru_stime.tv_usec / 1e3);
}

static void limits(buf *b, const nsbox_config *c, const char *enforced_by)
{
	if (!c) {
		buf_puts(b, ",\"limits\":null");
		return;
	}
	buf_printf(b, ",\"limits\":{\"memory_bytes\":%llu,\"cpus\":%g,\"pids\":%llu,\"timeout_ms\":%llu,"
	              "\"tmpfs_bytes\":%llu,\"output_bytes\":%llu,",
	           (unsigned long long) c->memory, c->cpus, (unsigned long long) c->pids,
	           (unsigned long long) c->timeout_ms, (unsigned long long) c->tmpfs,
	           (unsigned long long) c->output);
	/* As they applied (the plan writes them in): null is none (no file
	 * size limit; open files unlimited or not known before a start). */
	buf_printf(b, c->nofile ? "\"nofile\":%llu," : "\"nofile\":null,", (unsigned long long) c->nofile);
	buf_printf(b, c->fsize ? "\"fsize_bytes\":%llu," : "\"fsize_bytes\":null,", (unsigned long long) c->fsize);
	buf_printf(b, "\"inotify_instances\":%llu,\"inotify_watches\":%llu,\"fanotify_groups\":%llu,"
	              "\"fanotify_marks\":%llu,\"namespaces\":%llu,",
	           (unsigned long long) c->inotify_instances, (unsigned long long) c->inotify_watches,
	           (unsigned long long) c->fanotify_groups, (unsigned long long) c->fanotify_marks,
	           (unsigned long long) c->namespaces);
	buf_puts(b, "\"enforced_by\":");
	json_cstr(b, enforced_by ? enforced_by : "none");
	buf_puts(b, "}");
}

static void isolation(buf *b, const nsbox_result *r)
{
	buf_printf(b, ",\"isolation\":{\"rootless\":%s,\"namespaces\":%s,\"seccomp\":",
	           r->rootless ? "true" : "false", r->namespaces_json ? r->namespaces_json : "[]");
	json_cstr(b, r->seccomp);
	buf_puts(b, ",\"network\":");
	json_cstr(b, r->network);
	if (r->cfg)
		buf_printf(b, ",\"user\":\"%u:%u\"", (unsigned) r->cfg->uid, (unsigned) r->cfg->gid);
	buf_puts(b, "}");
}

/* The destinations, then how many requests went to ones not listed
 * (the list is bounded: the payload chooses the destinations). */
static void dests(buf *b, const char *key, const proxy_log *l)
{
	buf_printf(b, ",\"%s\":[", key);
	for (size_t i = 0; i < l->n; i++) {
		buf_puts(b, i ? ",{\"destination\":" : "{\"destination\":");
		json_cstr(b, l->v[i].name);
		buf_printf(b, ",\"count\":%llu", (unsigned long long) l->v[i].count);
		if (l->v[i].reason) {
			buf_puts(b, ",\"reason\":");
			json_cstr(b, l->v[i].reason);
		}
		buf_puts(b, "}");
	}
	buf_printf(b, "],\"%s_other\":%llu", key, (unsigned long long) l->other);
}

/* What the allowlist proxy let through and refused, by destination. */
static void network(buf *b, const nsbox_result *r)
{
	buf_puts(b, ",\"network\":{\"mode\":");
	json_cstr(b, r->network);
	buf_puts(b, ",\"allow\":[");
	for (size_t i = 0; r->proxy && r->cfg && i < r->cfg->allow.n; i++) {
		if (i)
			buf_puts(b, ",");
		json_cstr(b, r->cfg->allow.v[i]);
	}
	buf_puts(b, "]");
	if (r->net_helper) {
		buf_puts(b, ",\"helper\":");
		json_cstr(b, r->net_helper);
		buf_printf(b, ",\"host_loopback\":%s,\"address\":\"%s\",\"gateway\":\"%s\",\"dns\":\"%s\"",
		           r->host_loopback ? "true" : "false", NETUSER_ADDRESS, NETUSER_GATEWAY, NETUSER_DNS);
	}
	dests(b, "allowed", &r->net_allowed);
	dests(b, "denied", &r->net_denied);
	buf_puts(b, "}");
}

int nsbox_result_to_json(const nsbox_result *r, char **out, nsbox_error **err)
{
	if (!r || !out)
		return nsbox_err(err, EINVAL, "result", "render result: missing argument");
	if (r->raw_json) {   /* read back from a record: as it was written */
		*out = strdup(r->raw_json);
		return *out ? 0 : nsbox_err(err, ENOMEM, "result", "render result");
	}
	buf b = { 0 };
	buf_printf(&b, "{\"version\":1,\"id\":\"%s\",", r->id);
	if (r->sandbox_id[0])   /* an exec in a long-lived sandbox: which */
		buf_printf(&b, "\"sandbox\":\"%s\",", r->sandbox_id);
	buf_puts(&b, "\"command\":[");
	for (size_t i = 0; r->cfg && i < r->cfg->command.n; i++) {
		if (i)
			buf_puts(&b, ",");
		json_cstr(&b, r->cfg->command.v[i]);
	}
	buf_printf(&b, "],\"status\":\"%s\"", nsbox_status_name(r->status));
	if (r->status == NSBOX_STATUS_EXITED)
		buf_printf(&b, ",\"exit_code\":%d", r->exit_code);
	else
		buf_puts(&b, ",\"exit_code\":null");
	if (r->signal)
		buf_printf(&b, ",\"signal\":%d", r->signal);
	else
		buf_puts(&b, ",\"signal\":null");
	bool_field(&b, "timed_out", r->timed_out);
	bool_field(&b, "oom_killed", r->oom_killed);
	bool_field(&b, "pids_limit_hit", r->pids_limit_hit);
	buf_printf(&b, ",\"duration_ms\":%.3f", r->duration_ms);
	buf_printf(&b, ",\"exit_status\":%d", nsbox_result_exit_status(r));
	streams(&b, r);
	resources(&b, r);
	limits(&b, r->cfg, r->enforced_by);
	isolation(&b, r);
	network(&b, r);
	/* A payload decides how many changes there are: the record keeps
	 * RECORD_CHANGES_MAX of them and counts them all; the session's own
	 * listing (nsbox session changes) has every one. Denied changes and
	 * scan errors come first, so that thousands of files cannot push
	 * them out of sight; then the rest, in path order. */
	buf_puts(&b, ",\"changes\":[");
	size_t shown = 0;
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < r->n_changes && shown < RECORD_CHANGES_MAX; i++) {
			const ws_change *c = &r->changes[i];
			bool first = c->denied || !strcmp(c->kind, "error");
			if (first != (pass == 0))
				continue;
			buf_puts(&b, shown++ ? ",{\"path\":" : "{\"path\":");
			json_cstr(&b, c->path);
			ws_change_json(&b, c);
			buf_puts(&b, "}");
		}
	buf_puts(&b, "]");
	if (r->have_workspace) {
		buf_puts(&b, ",\"session\":");
		json_cstr(&b, r->session);
		buf_printf(&b, ",\"changes_total\":%zu", r->n_changes);
		bool_field(&b, "changes_truncated", r->n_changes > RECORD_CHANGES_MAX);
		buf_printf(&b, ",\"workspace\":{\"upper_bytes\":%llu,\"max_bytes\":%llu,\"max_files\":%llu",
		           (unsigned long long) r->upper_bytes, (unsigned long long) r->max_bytes,
		           (unsigned long long) r->max_files);
		bool_field(&b, "limit_hit", r->ws_limit_hit);
		buf_puts(&b, ",\"limit\":");
		json_cstr(&b, r->ws_limit_hit ? (r->ws_limit ? r->ws_limit : "max_size") : NULL);
		buf_puts(&b, ",\"scan_error\":");
		json_cstr(&b, r->changes_err < 0 ? strerror(-r->changes_err) : NULL);
		buf_puts(&b, "}");
	}
	if (r->seccomp_log) {
		buf_puts(&b, ",\"denied\":[");
		for (size_t i = 0; i < r->n_denied; i++) {
			buf_puts(&b, i ? ",{\"syscall\":" : "{\"syscall\":");
			json_cstr(&b, r->denied[i].name);
			buf_printf(&b, ",\"count\":%llu", (unsigned long long) r->denied[i].count);
			/* ENOSYS is the answer a caller falls back from (clone3 ->
			 * clone); any other errno failed the call: behaviour changed. */
			int e = r->denied[i].errnum;
			const char *en = sc_errno_name(e);
			if (en)
				buf_printf(&b, ",\"errno\":\"%s\"", en);
			else
				buf_printf(&b, ",\"errno\":%d", e);
			buf_printf(&b, ",\"effect\":\"%s\"}", e == ENOSYS ? "fallback" : "refused");
		}
		buf_puts(&b, "]");
	} else {
		buf_puts(&b, ",\"denied\":null");
	}
	if (r->code_json)
		buf_printf(&b, ",\"code\":%s", r->code_json);
	if (r->is_cell) {
		buf_puts(&b, ",\"context\":{\"name\":");
		json_cstr(&b, r->cell_context);
		buf_puts(&b, ",\"language\":");
		json_cstr(&b, r->cell_lang);
		buf_printf(&b, ",\"cell\":%u", r->cell);
		bool_field(&b, "restarted", r->cell_restarted);
		bool_field(&b, "state_lost", r->cell_state_lost);
		buf_puts(&b, "}");
		buf_printf(&b, ",\"results\":%s", r->results_json ? r->results_json : "[]");
	}
	if (r->pool_run) {
		buf_printf(&b, ",\"pool\":{\"warm\":%s,\"preloaded\":%s,\"cold_reason\":",
		           r->pool_run == POOL_RUN_WARM ? "true" : "false", r->preloaded_json ? r->preloaded_json : "[]");
		json_cstr(&b, r->cold_reason);
		buf_puts(&b, "}");
	}
	if (r->error) {
		buf_puts(&b, ",\"error\":{\"step\":");
		json_cstr(&b, r->error->step);
		buf_puts(&b, ",\"kind\":");
		json_cstr(&b, record_error_kind(r));
		buf_puts(&b, ",\"message\":");
		json_cstr(&b, r->error->message);
		buf_puts(&b, ",\"hint\":");
		json_cstr(&b, r->error->hint);
		buf_printf(&b, ",\"errno\":%d}", r->error->errnum);
	} else {
		buf_puts(&b, ",\"error\":null");
	}
	buf_puts(&b, "}\n");
	*out = buf_steal(&b);
	return *out ? 0 : nsbox_err(err, ENOMEM, "result", "render result");
}

/* The audit line (audit.c) shares these renderings with the record. */
void result_json_audit_parts(buf *b, const nsbox_result *r)
{
	resources(b, r);
	limits(b, r->cfg, r->enforced_by);
	network(b, r);
}
