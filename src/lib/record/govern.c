/* What a policy's audit.* and code.* keys ask around a run, done the same
 * way for every caller (the CLI, the Python SDK, programs embedding
 * libnsbox): the audit log opened before anything starts (a run that could
 * not be audited never begins, unless audit.on_error is warn), the Python
 * import gate before a code run, and after the run (or a failed start) the
 * gate's verdict in the record, the audit line and the artifacts. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "config/conf.h"
#include "base/error.h"
#include "nsbox.h"
#include "sandbox/sandbox.h"

struct nsbox_governor {
	const char *log, *artifacts, *store_code, *gate;
	bool warn;
	unsigned keep;
	uint64_t max_age_ms;
	int audit_fd;
	char **hits;
	size_t n_hits;
	buf warnings;
};

/* code.blocked_imports when the policy turns the gate on without a list. */
static const char *const default_blocked[] = { "os", "subprocess", "shutil", "socket", "pathlib" };

static void warn(nsbox_governor *g, const char *what, const nsbox_error *e)
{
	buf_printf(&g->warnings, "%s%s%s", g->warnings.len ? "\n" : "", what, e ? nsbox_error_message(e) : "");
}

static void free_hits(nsbox_governor *g)
{
	for (size_t i = 0; i < g->n_hits; i++)
		free(g->hits[i]);
	free(g->hits);
	g->hits = NULL;
	g->n_hits = 0;
}

void nsbox_governor_free(nsbox_governor *g)
{
	if (!g)
		return;
	if (g->audit_fd >= 0)
		close(g->audit_fd);
	free_hits(g);
	buf_free(&g->warnings);
	free(g);
}

const char *nsbox_governor_warnings(const nsbox_governor *g)
{
	return g && g->warnings.len ? g->warnings.data : NULL;
}

/* Record, audit and keep: the duties after any run or failed start. A line
 * that cannot be written is an error unless audit.on_error is warn. */
int nsbox_governor_end(nsbox_governor *g, nsbox_result *r, nsbox_error **err)
{
	if (!g || !r)
		return nsbox_err(err, EINVAL, "audit", "governor: missing argument");
	if (strcmp(g->gate, "off"))
		(void) nsbox_result_set_imports(r, g->gate, (const char *const *) g->hits, g->n_hits, NULL);
	int rc = 0;
	if (g->audit_fd >= 0) {
		nsbox_error *e = NULL;
		int a = nsbox_audit_append(g->audit_fd, r, &e);
		if (a < 0 && g->warn)
			warn(g, "", e);
		else if (a < 0 && err)
			*err = e, e = NULL, rc = a;
		nsbox_error_free(e);
	}
	if (g->artifacts) {
		/* A record for later, not a gate: a failure is a warning. */
		nsbox_error *e = NULL;
		if (artifacts_store(g->artifacts, r, g->store_code, g->keep, g->max_age_ms, NULL, &e) < 0)
			warn(g, "", e);
		nsbox_error_free(e);
	}
	return rc;
}

int nsbox_governor_begin(const nsbox_config *cfg, const char *lang, const void *code, size_t len,
                         nsbox_governor **out, nsbox_result **refused, nsbox_error **err)
{
	*out = NULL;
	if (refused)
		*refused = NULL;
	if (!cfg)
		return nsbox_err(err, EINVAL, "audit", "governor: missing configuration");
	nsbox_governor *g = calloc(1, sizeof(*g));
	if (!g)
		return nsbox_err(err, ENOMEM, "audit", "governor");
	g->audit_fd = -1;
	const char *const *blocked = NULL;
	size_t n_blocked = 0;
	(void) nsbox_config_audit(cfg, &g->log, &g->warn, &g->artifacts, &g->store_code, &g->keep);
	(void) nsbox_config_import_gate(cfg, &g->gate, &blocked, &n_blocked);
	g->max_age_ms = cfg->audit.max_age_ms;
	if (!g->store_code)
		g->store_code = "always";
	if (!g->gate)
		g->gate = "off";
	if (g->log) {
		nsbox_error *e = NULL;
		int r = nsbox_audit_open(g->log, &g->audit_fd, &e);
		if (r < 0 && !g->warn) {
			nsbox_governor_free(g);
			if (err)
				*err = e;
			else
				nsbox_error_free(e);
			return r;
		}
		if (r < 0)
			warn(g, "running without an audit line: ", e);
		nsbox_error_free(e);
	}
	if (lang && !strcmp(lang, "python") && code && strcmp(g->gate, "off")) {
		if (!n_blocked) {
			blocked = default_blocked;
			n_blocked = sizeof(default_blocked) / sizeof(*default_blocked);
		}
		nsbox_error *e = NULL;
		int r = nsbox_import_gate_check(cfg, code, len, blocked, n_blocked, &g->hits, &g->n_hits, &e);
		if (r < 0 && strcmp(g->gate, "block")) {
			/* warn: a blocked import, or a checker that failed, is
			 * said and the run goes on. */
			warn(g, "", e);
		} else if (r < 0) {
			/* block: refused, also when the checker itself failed
			 * (fail closed); the refusal is a run's record too. */
			nsbox_result *res = NULL;
			if (nsbox_result_new_failed(cfg, e, &res, NULL) == 0) {
				nsbox_error *ae = NULL;
				if (nsbox_governor_end(g, res, &ae) < 0)
					warn(g, "", ae);
				nsbox_error_free(ae);
				if (refused)
					*refused = res;
				else
					nsbox_result_free(res);
			}
			*out = g;
			if (err)
				*err = e;
			else
				nsbox_error_free(e);
			return r;
		}
		nsbox_error_free(e);
	}
	*out = g;
	return 0;
}
