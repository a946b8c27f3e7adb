/* A cell's end and its record (context.c runs the cell): what the agent
 * replied, checked field by field because the agent runs the sandbox's
 * code, or when it did not answer, the interpreter's own end (an OOM
 * kill, a signal, an exit); then the library's record of the cell, as
 * for any run in the sandbox, with the cgroup's counts since the cell
 * began. Apart from context.c, which talks to the interpreter, because
 * this is where a cell's classification is decided. */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/units.h"
#include "code/code_error.h"
#include "code/context.h"
#include "code/context_cell.h"
#include "config/conf.h"
#include "sandbox/sandbox.h"

/* "Python syntax error: ..." for what the agent reports as one. */
static bool syntax_error(const char *lang, const char *text)
{
	static const char *const py[] = { "SyntaxError", "IndentationError", "TabError", NULL };
	static const char *const js[] = { "SyntaxError", NULL };
	for (const char *const *m = !strcmp(lang, "python") ? py : js; *m; m++)
		if (!strncmp(text, *m, strlen(*m)) && (text[strlen(*m)] == ':' || text[strlen(*m)] == '\0'))
			return true;
	return false;
}

/* A MIME type as a result's key: type/subtype of letters, digits and
 * + - . (no quoting needed anywhere it is shown). */
static bool mime_ok(const char *m)
{
	size_t n = strlen(m), slashes = 0;
	if (n < 3 || n > 100)
		return false;
	for (const char *c = m; *c; c++) {
		if (*c == '/')
			slashes++;
		else if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '+' || *c == '-' || *c == '.'))
			return false;
	}
	return slashes == 1 && m[0] != '/' && m[n - 1] != '/';
}

/* The reply's rich results (hostile: the agent runs the sandbox's code),
 * kept as JSON of what was checked: a list of objects whose keys are MIME
 * types and whose values are strings. The frame's own bound (16 MiB)
 * bounds their size; their number is bounded here. */
char *context_cell_results(json_t *reply)
{
	json_t *in = json_object_get(reply, "results"), *out = json_array();
	if (!out)
		return NULL;
	size_t i;
	json_t *b;
	json_array_foreach(json_is_array(in) ? in : NULL, i, b) {
		if (i >= 256 || !json_is_object(b))
			break;
		json_t *ok = json_object();
		const char *k;
		json_t *v;
		json_object_foreach(b, k, v)
			if (mime_ok(k) && json_is_string(v))
				json_object_set(ok, k, v);
		if (json_object_size(ok))
			json_array_append_new(out, ok);
		else
			json_decref(ok);
	}
	char *text = json_dumps(out, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(out);
	return text;
}

/* The reply of an agent that answered: its status, as a run's end. */
void context_cell_reply(const nsbox_context *c, json_t *reply, bool timed_out, uint64_t timeout_ms, cell_end *e)
{
	const char *st = json_string_value(json_object_get(reply, "status"));
	json_int_t code = json_integer_value(json_object_get(reply, "exit_code"));
	const char *said = json_string_value(json_object_get(reply, "error"));
	if (code < 0 || code > 255)
		code = 1;
	e->status = NSBOX_STATUS_EXITED;
	e->exit_code = (int) code;
	if (timed_out && !strcmp(st, "interrupted")) {
		char d[32];
		format_duration_ms(timeout_ms, d, sizeof(d));
		e->status = NSBOX_STATUS_TIMED_OUT;
		e->timed_out = true;
		e->signal = SIGINT;
		e->kind = "timeout";
		snprintf(e->message, sizeof(e->message), "Code execution timed out after %s", d);
	} else if (!strcmp(st, "interrupted")) {
		e->exit_code = 130;
		e->kind = "interrupted";
		snprintf(e->message, sizeof(e->message), "Execution interrupted: %s", said ? said : "KeyboardInterrupt");
	} else if (!strcmp(st, "error")) {
		bool syn = said && syntax_error(c->lang->name, said);
		e->kind = syn ? "syntax_error" : "runtime_error";
		snprintf(e->message, sizeof(e->message), "%s%s", syn ? (!strcmp(c->lang->name, "python")
		         ? "Python syntax error: " : "JavaScript syntax error: ") : "Execution failed: ",
		         said ? said : "the cell failed");
	} else if (!strcmp(st, "exit") && code != 0) {
		e->kind = "runtime_error";
		snprintf(e->message, sizeof(e->message), "Execution failed with exit code %d", (int) code);
	} else if (strcmp(st, "ok") && strcmp(st, "exit")) {
		e->exit_code = 1;
		e->kind = "runtime_error";
		snprintf(e->message, sizeof(e->message), "Execution failed: the context agent answered '%.40s'", st);
	}
}

/* No answer: the interpreter's own end says why (killed by the OOM killer,
 * by a signal, or it exited), and its state is lost. */
void context_cell_lost(const nsbox_context *c, const nsbox_result *ended, bool oom, bool timed_out,
                       uint64_t timeout_ms, uint64_t memory, cell_end *e)
{
	e->state_lost = true;
	char d[32];
	if (timed_out) {
		format_duration_ms(timeout_ms, d, sizeof(d));
		e->status = NSBOX_STATUS_TIMED_OUT;
		e->timed_out = true;
		e->signal = SIGKILL;
		e->kind = "timeout";
		snprintf(e->message, sizeof(e->message), "Code execution timed out after %s (the interpreter did not "
		         "stop and was restarted: its state is lost)", d);
	} else if (oom) {
		format_size(memory, d, sizeof(d));
		e->status = NSBOX_STATUS_OOM_KILLED;
		e->signal = SIGKILL;
		e->kind = "oom";
		snprintf(e->message, sizeof(e->message), "Code execution ran out of memory (limit %s; the interpreter "
		         "was killed and will be restarted: its state is lost)", d);
	} else if (ended && nsbox_result_status(ended) == NSBOX_STATUS_EXITED) {
		e->status = NSBOX_STATUS_EXITED;
		e->exit_code = nsbox_result_exit_code(ended);
		e->kind = "runtime_error";
		snprintf(e->message, sizeof(e->message), "Execution failed: the %s interpreter exited with code %d "
		         "(its state is lost)", c->lang->name, e->exit_code);
	} else {
		int sig = ended && nsbox_result_signal(ended) ? nsbox_result_signal(ended) : SIGKILL;
		e->status = NSBOX_STATUS_SIGNALED;
		e->signal = sig;
		e->kind = "signal";
		snprintf(e->message, sizeof(e->message), "Code execution was killed by signal %d (%s; the interpreter "
		         "ended: its state is lost)", sig, strsignal(sig));
	}
}

/* What every record of context c says, a cell's or a failed start's: the
 * sandbox, the context, its limits and isolation. */
static nsbox_result *context_record(const nsbox_context *c, unsigned cell)
{
	const nsbox_plan *p = c->sb->plan;
	nsbox_result *r = result_new(p->cfg);
	if (!r)
		return NULL;
	char label[32];
	snprintf(label, sizeof(label), "<cell %u>", cell);
	const char *argv[] = { c->lang->name, label, NULL };
	(void) nsbox_config_set_command(r->cfg, 2, argv, NULL);
	snprintf(r->sandbox_id, sizeof(r->sandbox_id), "%s", nsbox_sandbox_id(c->sb));
	context_describe(c, r);
	r->enforced_by = p->enforced_by;
	r->namespaces_json = strdup(p->namespaces_json);
	r->network = strdup(p->network);
	r->seccomp = p->seccomp_label ? strdup(p->seccomp_label) : NULL;
	return r;
}

/* The interpreter did not start: a setup failure of the next cell, which
 * takes `why`. */
nsbox_result *context_failed_record(const nsbox_context *c, nsbox_error *why)
{
	nsbox_result *r = context_record(c, c->cells + 1);
	if (r) {
		r->status = NSBOX_STATUS_SETUP_FAILED;
		r->error = why;
	}
	return r;
}

/* The cell's record: the library's, as for any run in the sandbox. */
nsbox_result *context_cell_record(const nsbox_context *c, unsigned cell, bool restarted, const cell_end *e,
                                  double ms, capture caps[2], bool captured, const cg_stats *base,
                                  uint64_t timeout_ms)
{
	nsbox_result *r = context_record(c, cell);
	if (!r)
		return NULL;
	if (r->cfg && timeout_ms)
		r->cfg->timeout_ms = timeout_ms;
	r->cell = cell;
	r->cell_restarted = restarted;
	r->cell_state_lost = e->state_lost;
	r->status = e->status;
	r->exit_code = e->status == NSBOX_STATUS_EXITED ? e->exit_code : -1;
	r->signal = e->status == NSBOX_STATUS_EXITED ? 0 : e->signal;
	r->timed_out = e->timed_out;
	r->duration_ms = ms;
	if (c->sb->cg) {
		cg_stats st;
		cgroup_stats(c->sb->cg, &st);
		double u = st.cpu_user_ms - base->cpu_user_ms, s = st.cpu_system_ms - base->cpu_system_ms;
		st.cpu_user_ms = u > 0 ? u : 0;
		st.cpu_system_ms = s > 0 ? s : 0;
		st.oom_kills = st.oom_kills > base->oom_kills ? st.oom_kills - base->oom_kills : 0;
		st.pids_max_events = st.pids_max_events > base->pids_max_events
			? st.pids_max_events - base->pids_max_events : 0;
		r->have_cg_stats = true;
		r->cg_stats = st;
		r->oom_killed = st.oom_kills > 0;
		r->pids_limit_hit = st.pids_max_events > 0;
	}
	r->captured = captured;
	for (int i = 0; captured && i < 2; i++) {
		r->out[i] = capture_text(&caps[i], &r->out_len[i], &r->out_truncated[i]);
		r->out_bytes[i] = caps[i].total;
	}
	if (e->kind)
		(void) code_error_set(r, e->kind, e->message);
	return r;
}
