/* A result from its record's JSON (a run that another process of ours
 * made: a long-lived sandbox's monitor, a background process): the fields
 * the accessors give, read with jansson, and the record itself kept so that
 * nsbox_result_to_json() gives back exactly what was written. The text
 * comes from our own monitor, yet it is checked as any input is. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "sandbox/sandbox.h"

/* The record's error kind as one of the library's own (static) names. */
static const char *known_kind(const char *k)
{
	static const char *const kinds[] = { "timeout", "oom", "signal", "syntax_error", "interpreter_missing",
	                                     "runtime_error", "interrupted", "pids_limit", "exec", NULL };
	for (size_t i = 0; k && kinds[i]; i++)
		if (!strcmp(k, kinds[i]))
			return kinds[i];
	return NULL;
}

static char *dup_string(json_t *o, const char *key, size_t *len)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_string(v))
		return NULL;
	size_t n = json_string_length(v);
	char *s = malloc(n + 1);
	if (s) {
		memcpy(s, json_string_value(v), n);
		s[n] = '\0';
		if (len)
			*len = n;
	}
	return s;
}

int result_from_json(const char *text, nsbox_result **out, nsbox_error **err)
{
	*out = NULL;
	json_error_t je;
	json_t *j = json_loads(text, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
	static const char *const names[] = { "exited", "signaled", "timed_out", "oom_killed", "setup_failed" };
	const char *status = json_string_value(json_object_get(j, "status"));
	int st = -1;
	for (int i = 0; status && i < 5; i++)
		if (!strcmp(status, names[i]))
			st = i;
	if (!json_is_object(j) || st < 0) {
		json_decref(j);
		return nsbox_err(err, EPROTO, "result", "read a record: %s", j ? "no status" : je.text);
	}
	nsbox_result *r = calloc(1, sizeof(*r));
	if (!r) {
		json_decref(j);
		return nsbox_err(err, ENOMEM, "result", "read a record");
	}
	r->status = (nsbox_status) st;
	json_t *code = json_object_get(j, "exit_code");
	r->exit_code = json_is_integer(code) ? (int) json_integer_value(code) : -1;
	r->signal = (int) json_integer_value(json_object_get(j, "signal"));
	r->timed_out = json_is_true(json_object_get(j, "timed_out"));
	r->oom_killed = json_is_true(json_object_get(j, "oom_killed"));
	r->pids_limit_hit = json_is_true(json_object_get(j, "pids_limit_hit"));
	r->duration_ms = json_number_value(json_object_get(j, "duration_ms"));
	const char *id = json_string_value(json_object_get(j, "id")), *sb = json_string_value(json_object_get(j, "sandbox"));
	snprintf(r->id, sizeof(r->id), "%s", id ? id : "");
	snprintf(r->sandbox_id, sizeof(r->sandbox_id), "%s", sb ? sb : "");
	static const char *const streams[] = { "stdout", "stderr" };
	for (int i = 0; i < 2; i++) {
		char key[32];
		r->out[i] = dup_string(j, streams[i], &r->out_len[i]);
		r->captured |= r->out[i] != NULL;
		snprintf(key, sizeof(key), "%s_bytes", streams[i]);
		r->out_bytes[i] = (uint64_t) json_integer_value(json_object_get(j, key));
		snprintf(key, sizeof(key), "%s_truncated", streams[i]);
		r->out_truncated[i] = json_is_true(json_object_get(j, key));
	}
	json_t *e = json_object_get(j, "error");
	if (json_is_object(e)) {
		r->error = calloc(1, sizeof(*r->error));
		if (r->error) {
			r->error->step = dup_string(e, "step", NULL);
			r->error->message = dup_string(e, "message", NULL);
			r->error->hint = dup_string(e, "hint", NULL);
			r->error->errnum = (int) json_integer_value(json_object_get(e, "errno"));
		}
		const char *kind = json_string_value(json_object_get(e, "kind"));
		r->error_kind = known_kind(kind);
		r->exec_failed = kind && !strcmp(kind, "exec");
		r->code_error = json_is_string(json_object_get(e, "step")) && !strcmp(json_string_value(json_object_get(e, "step")), "code");
	}
	json_decref(j);
	r->raw_json = strdup(text);
	if (!r->raw_json || (r->error && (!r->error->step || !r->error->message))) {
		nsbox_result_free(r);
		return nsbox_err(err, ENOMEM, "result", "read a record");
	}
	*out = r;
	return 0;
}
