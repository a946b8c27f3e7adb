/* Background processes of a started sandbox, the client's side (remote.h):
 * start, state, list, logs, kill and wait, each one request
 * (remote_call.h) to the monitor, which holds the processes and their
 * logs; the id names the monitor's process. A process's record, once it
 * ended, is the library's (result_from_json). Apart from remote.c, the
 * handle and its runs, as one family of requests. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "live/ctl.h"
#include "live/remote.h"
#include "live/remote_call.h"
#include "sandbox/sandbox.h"

int remote_process_start(nsbox_sandbox *sb, const nsbox_process_options *o, char id[17], nsbox_error **err)
{
	ctl_req h = { .op = CTL_SPAWN, .timeout_ms = o->timeout_ms, .arg = o->log_bytes };
	strs s = { 0 };
	if (o->workdir) {
		h.flags |= CTL_WORKDIR;
		remote_adds(&s, o->workdir);
	}
	for (const char *const *a = o->argv; *a; a++)
		remote_adds(&s, *a);
	if (o->envp) {
		h.flags |= (o->flags & NSBOX_EXEC_ENV_ADD) ? CTL_ENV_ADD : CTL_ENV;
		for (const char *const *e = o->envp; *e; e++, h.env++)
			remote_adds(&s, *e);
	}
	json_t *j = NULL;
	int r = remote_call_json(sb, &h, &s, NULL, 0, &j, err);
	const char *got = json_string_value(json_object_get(j, "id"));
	if (r == 0 && got && strlen(got) == 16)
		memcpy(id, got, 17);
	else if (r == 0)
		r = nsbox_err(err, EPROTO, "process", "start a process: no id in the answer");
	json_decref(j);
	return r;
}

static int id_call(nsbox_sandbox *sb, uint32_t op, const char *id, const char *arg, uint64_t timeout_ms,
                   json_t **out, nsbox_error **err)
{
	strs s = { 0 };
	remote_adds(&s, id);
	if (arg)
		remote_adds(&s, arg);
	ctl_req h = { .op = op, .timeout_ms = timeout_ms };
	return remote_call_json(sb, &h, &s, NULL, 0, out, err);
}

int remote_process_state(nsbox_sandbox *sb, const char *id, bool *running)
{
	json_t *j = NULL;
	int r = id_call(sb, CTL_PROCS, id, NULL, 0, &j, NULL);
	json_t *p = json_array_get(j, 0);
	*running = r == 0 && json_is_true(json_object_get(p, "running"));
	if (r == 0 && !p)
		r = -ENOENT;
	json_decref(j);
	return r;
}

int remote_process_list(nsbox_sandbox *sb, char **json, nsbox_error **err)
{
	ctl_req h = { .op = CTL_PROCS };
	strs s = { 0 };
	json_t *j = NULL;
	int r = remote_call_json(sb, &h, &s, NULL, 0, &j, err);
	if (r < 0)
		return r;
	*json = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return *json ? 0 : nsbox_err(err, ENOMEM, "process", "list");
}

static void collect(void *userdata, int stream, const char *data, size_t len)
{
	(void) stream;
	buf_append(userdata, data, len);
}

int remote_process_logs(nsbox_sandbox *sb, const char *id, int stream, char **out, size_t *len, uint64_t *total,
                        nsbox_error **err)
{
	/* The bytes come as an output frame, exactly; the reply has the count. */
	strs s = { 0 };
	remote_adds(&s, id);
	remote_adds(&s, stream == 2 ? "2" : "1");
	ctl_req h = { .op = CTL_LOGS };
	buf data = { 0 };
	call_io io = { .on_output = collect, .output_userdata = &data, .signal_fd = -1 };
	int32_t status = 0;
	char *text = NULL;
	int r = remote_call(sb, &h, &s, NULL, 0, &io, &status, &text, err);
	buf_free(&s.b);
	if (r == 0 && status < 0) {
		nsbox_error *e = ctl_error_from_json(text);
		r = e ? -nsbox_error_errno(e) ?: -EIO : status;
		if (err)
			*err = e;
		else
			nsbox_error_free(e);
	}
	json_t *j = r == 0 ? json_loads(text ? text : "{}", 0, NULL) : NULL;
	free(text);
	if (r == 0 && total)
		*total = (uint64_t) json_integer_value(json_object_get(j, "total"));
	json_decref(j);
	size_t n = data.len;
	if (r == 0 && (data.oom || !(*out = n ? buf_steal(&data) : strdup(""))))
		r = nsbox_err(err, ENOMEM, "process", "logs of %s", id);
	if (r == 0)
		*len = n;
	buf_free(&data);
	return r;
}

int remote_process_kill(nsbox_sandbox *sb, const char *id, int sig)
{
	char num[16];
	snprintf(num, sizeof(num), "%d", sig);
	return id_call(sb, CTL_KILL, id, num, 0, NULL, NULL);
}

int remote_process_wait(nsbox_sandbox *sb, const char *id, uint64_t timeout_ms, nsbox_result **out,
                        nsbox_error **err)
{
	json_t *j = NULL;
	int r = id_call(sb, CTL_WAIT, id, NULL, timeout_ms, &j, err);
	if (r < 0)
		return r;
	char *text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (!text)
		return nsbox_err(err, ENOMEM, "process", "wait for %s", id);
	r = out ? result_from_json(text, out, err) : 0;
	free(text);
	return r;
}
