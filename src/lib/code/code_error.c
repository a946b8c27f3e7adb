/* Classifying failed code runs (nsbox run-code) into one readable error,
 * the way an agent framework wants to show it to a model. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/strv.h"
#include "code/code_error.h"
#include "sandbox/sandbox.h"
#include "base/units.h"

/* The last non-empty line of the captured stderr, into out. */
static void last_line(const char *s, size_t len, char *out, size_t outlen)
{
	out[0] = '\0';
	len = text_trim_end(s, len);
	size_t start = len;
	while (start && s[start - 1] != '\n')
		start--;
	snprintf(out, outlen, "%.*s", (int) (len - start), s + start);
}

/* Node ends an uncaught exception's report with a blank line and its
 * version ("Node.js v18.20.4"): the line that says what went wrong is the
 * first that names an error ("TypeError: x is not a function"). */
static bool node_error_line(const char *s, size_t len, char *out, size_t outlen)
{
	for (size_t i = 0; i < len;) {
		size_t n = 0;
		while (i + n < len && s[i + n] != '\n')
			n++;
		size_t k = 0;
		while (k < n && ((s[i + k] >= 'A' && s[i + k] <= 'Z') || (s[i + k] >= 'a' && s[i + k] <= 'z')))
			k++;
		if (k >= 5 && k + 1 < n && s[i + k] == ':' && s[i + k + 1] == ' ' &&
		    (!memcmp(s + i + k - 5, "Error", 5) || (k >= 9 && !memcmp(s + i + k - 9, "Exception", 9)))) {
			snprintf(out, outlen, "%.*s", (int) n, s + i);
			return true;
		}
		i += n + 1;
	}
	return false;
}

/* The line that starts with one of `markers` (e.g. "SyntaxError:"), and the
 * nearest "line N" before it (Python) or ":N" after the file name (Node). */
static bool find_syntax(const char *s, size_t len, const char *const *markers, char *out,
                        size_t outlen, long *lineno)
{
	*lineno = 0;
	const char *end = s + len;
	for (const char *line = s; line < end;) {
		const char *nl = memchr(line, '\n', (size_t) (end - line));
		size_t l = nl ? (size_t) (nl - line) : (size_t) (end - line);
		const char *p;
		char text_line[256];
		snprintf(text_line, sizeof(text_line), "%.*s", (int) l, line);
		if ((p = strstr(text_line, ", line ")) && strstr(text_line, "File \""))
			*lineno = strtol(p + 7, NULL, 10);
		else if (!*lineno && (p = strstr(text_line, "/tmp/main.js:")))
			*lineno = strtol(p + 13, NULL, 10);
		for (const char *const *m = markers; *m; m++)
			if (!strncmp(text_line, *m, strlen(*m))) {
				snprintf(out, outlen, "%s", text_line);
				return true;
			}
		line = nl ? nl + 1 : end;
	}
	return false;
}

int nsbox_result_classify_code(nsbox_result *r, const char *lang, nsbox_error **err)
{
	if (!r || !lang)
		return nsbox_err(err, EINVAL, "code", "classify: missing argument");
	if (r->status == NSBOX_STATUS_SETUP_FAILED)
		return 0;   /* the setup error says it already */
	char message[600] = "", detail[400] = "";
	const char *kind = "runtime_error";
	const char *text = r->captured ? r->out[1] : NULL;
	size_t len = text ? r->out_len[1] : 0;
	if (r->exec_failed) {
		snprintf(message, sizeof(message), "Execution failed: the %s interpreter is not available in the image (%s)",
		         lang, strerror(r->exec_errno));
		kind = "interpreter_missing";
	} else if (r->status == NSBOX_STATUS_TIMED_OUT) {
		char d[32];
		format_duration_ms(r->cfg ? r->cfg->timeout_ms : 0, d, sizeof(d));
		snprintf(message, sizeof(message), "Code execution timed out after %s", d);
		kind = "timeout";
	} else if (r->status == NSBOX_STATUS_OOM_KILLED) {
		char m[32];
		format_size(r->cfg ? r->cfg->memory : 0, m, sizeof(m));
		snprintf(message, sizeof(message), "Code execution ran out of memory (limit %s)", m);
		kind = "oom";
	} else if (r->status == NSBOX_STATUS_SIGNALED) {
		snprintf(message, sizeof(message), "Code execution was killed by signal %d (%s)", r->signal,
		         strsignal(r->signal));
		kind = "signal";
	} else if (r->exit_code != 0) {
		static const char *const py[] = { "SyntaxError:", "IndentationError:", "TabError:", NULL };
		static const char *const js[] = { "SyntaxError:", NULL };
		long line = 0;
		const char *what = NULL;
		if (!strcmp(lang, "python") && find_syntax(text ? text : "", len, py, detail, sizeof(detail), &line))
			what = "Python syntax error";
		else if (!strcmp(lang, "node") && find_syntax(text ? text : "", len, js, detail, sizeof(detail), &line))
			what = "JavaScript syntax error";
		else if (!strcmp(lang, "bash") && text && strstr(text, "syntax error")) {
			last_line(text, len, detail, sizeof(detail));
			what = "Shell syntax error";
		}
		if (what)
			kind = "syntax_error";
		if (what && line > 0)
			snprintf(message, sizeof(message), "%s: %s (line %ld)", what, detail, line);
		else if (what)
			snprintf(message, sizeof(message), "%s: %s", what, detail);
		else {
			bool node = !strcmp(lang, "node");
			if (!node || !node_error_line(text ? text : "", len, detail, sizeof(detail)))
				last_line(text ? text : "", len, detail, sizeof(detail));
			if (node && !strncmp(detail, "Node.js v", 9)) {
				/* Not the error: what came before the version line. */
				const char *v = text ? strstr(text, "\nNode.js v") : NULL;
				last_line(text ? text : "", v ? (size_t) (v - text) : 0, detail, sizeof(detail));
			}
			if (*detail)
				snprintf(message, sizeof(message), "Execution failed: %s", detail);
			else
				snprintf(message, sizeof(message), "Execution failed with exit code %d", r->exit_code);
		}
	} else {
		return 0;   /* success */
	}
	return code_error_set(r, kind, message) < 0 ? nsbox_err(err, ENOMEM, "code", "classify") : 0;
}

int code_error_set(nsbox_result *r, const char *kind, const char *message)
{
	/* The process limit is the likeliest cause of a failure when it was
	 * hit: said first, the code's own last words after. */
	static const char failed[] = "Execution failed";
	bool limit = r->pids_limit_hit && !strcmp(kind, "runtime_error") && !strncmp(message, failed, sizeof(failed) - 1);
	nsbox_error *e = NULL;
	if (limit)
		(void) nsbox_err(&e, 0, "code", "%s (the process limit was reached)%s", failed, message + sizeof(failed) - 1);
	else
		(void) nsbox_err(&e, 0, "code", "%s", message);
	if (!e)
		return -ENOMEM;
	nsbox_error_free(r->error);
	r->error = e;
	r->code_error = true;
	r->error_kind = limit ? "pids_limit" : kind;
	return 0;
}
