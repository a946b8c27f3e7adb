/* The policy keys of the audit trail and the import gate (audit.*, code.*),
 * kept apart from config.c's table: their values are read by the caller
 * (the CLI, an embedder) through nsbox_config_audit() and
 * nsbox_config_import_gate(), not by the sandbox's plan. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "config/conf.h"
#include "base/error.h"
#include "base/json.h"
#include "base/units.h"

static const struct {
	const char *name, *what;
	bool list;
} ext_keys[] = {
	{ "audit.log", "a file path", false },
	{ "audit.on_error", "one of fail, warn", false },
	{ "audit.artifacts", "a directory path", false },
	{ "audit.store_code", "one of always, on_error, never", false },
	{ "audit.keep", "a whole number of run directories (0: all)", false },
	{ "audit.max_age", "a duration such as 7d or 12h (0: no limit)", false },
	{ "code.import_gate", "one of off, warn, block", false },
	{ "code.blocked_imports", "a module name such as os or os.path", true },
};

static int find(const char *key)
{
	for (size_t i = 0; key && i < sizeof(ext_keys) / sizeof(ext_keys[0]); i++)
		if (!strcmp(ext_keys[i].name, key))
			return (int) i;
	return -1;
}

bool config_audit_known(const char *key) { return find(key) >= 0; }
bool config_audit_is_list(const char *key) { int i = find(key); return i >= 0 && ext_keys[i].list; }
const char *config_audit_what(const char *key) { int i = find(key); return i >= 0 ? ext_keys[i].what : NULL; }

static bool one_of(const char *v, const char *a, const char *b, const char *c)
{
	return !strcmp(v, a) || !strcmp(v, b) || (c && !strcmp(v, c));
}

static bool module_ok(const char *v)
{
	size_t n = strlen(v);
	if (!n || n > 200 || v[0] == '.' || v[n - 1] == '.' || strstr(v, ".."))
		return false;
	return strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.") == n;
}

static int set_str(char **dst, const char *v)
{
	char *d = strdup(v);
	if (!d)
		return -ENOMEM;
	free(*dst);
	*dst = d;
	return 0;
}

/* 0, -EINVAL (bad value) or -ENOMEM; the key must be known. */
int config_audit_apply(nsbox_config *c, const char *key, const char *v)
{
	audit_conf *a = &c->audit;
	if (!strcmp(key, "audit.log"))
		return *v ? set_str(&a->log, v) : -EINVAL;
	if (!strcmp(key, "audit.on_error"))
		return one_of(v, "fail", "warn", NULL) ? (a->warn = !strcmp(v, "warn"), 0) : -EINVAL;
	if (!strcmp(key, "audit.artifacts"))
		return *v ? set_str(&a->artifacts, v) : -EINVAL;
	if (!strcmp(key, "audit.store_code"))
		return one_of(v, "always", "on_error", "never") ? set_str(&a->store_code, v) : -EINVAL;
	if (!strcmp(key, "audit.keep")) {
		char *end = NULL;
		errno = 0;
		unsigned long k = strtoul(v, &end, 10);
		if (errno || !*v || *end || v[0] == '-' || k > 1000000)
			return -EINVAL;
		a->keep = (unsigned) k;
		return 0;
	}
	if (!strcmp(key, "audit.max_age")) {
		uint64_t ms;
		if (parse_duration_ms(v, &ms) < 0)
			return -EINVAL;
		a->max_age_ms = ms;
		return 0;
	}
	if (!strcmp(key, "code.import_gate"))
		return one_of(v, "off", "warn", "block") ? set_str(&a->import_gate, v) : -EINVAL;
	if (!strcmp(key, "code.blocked_imports"))
		return module_ok(v) ? strv_push(&a->blocked, v) : -EINVAL;
	return -EINVAL;
}

void config_audit_clear_list(nsbox_config *c)
{
	strv_clear(&c->audit.blocked);
}

void config_audit_free(nsbox_config *c)
{
	free(c->audit.log);
	free(c->audit.artifacts);
	free(c->audit.store_code);
	free(c->audit.import_gate);
	strv_clear(&c->audit.blocked);
	c->audit = (audit_conf){ 0 };
}

int config_audit_copy(nsbox_config *c, const nsbox_config *s)
{
	c->audit = (audit_conf){ .warn = s->audit.warn, .keep = s->audit.keep, .max_age_ms = s->audit.max_age_ms };
	const char *const src[] = { s->audit.log, s->audit.artifacts, s->audit.store_code, s->audit.import_gate };
	char **dst[] = { &c->audit.log, &c->audit.artifacts, &c->audit.store_code, &c->audit.import_gate };
	for (size_t i = 0; i < 4; i++)
		if (src[i] && set_str(dst[i], src[i]) < 0)
			return -ENOMEM;
	return strv_copy(&c->audit.blocked, &s->audit.blocked);
}

void config_audit_yaml(buf *b, const nsbox_config *c)
{
	/* Unset paths are left out: YAML's null would read back as "null". */
	const audit_conf *a = &c->audit;
	buf_puts(b, "audit:\n");
	if (a->log) {
		buf_puts(b, "  log: ");
		json_cstr(b, a->log);
		buf_puts(b, "\n");
	}
	buf_printf(b, "  on_error: %s\n", a->warn ? "warn" : "fail");
	if (a->artifacts) {
		buf_puts(b, "  artifacts: ");
		json_cstr(b, a->artifacts);
		buf_puts(b, "\n");
	}
	char age[32];
	format_duration_ms(a->max_age_ms, age, sizeof(age));
	buf_printf(b, "  store_code: %s\n  keep: %u\n  max_age: %s\ncode:\n  import_gate: %s\n  blocked_imports:",
	           a->store_code ? a->store_code : "always", a->keep, a->max_age_ms ? age : "0",
	           a->import_gate ? a->import_gate : a->blocked.n ? "block" : "off");
	if (!a->blocked.n)
		buf_puts(b, " []");
	for (size_t i = 0; i < a->blocked.n; i++) {
		buf_puts(b, "\n    - ");
		json_cstr(b, a->blocked.v[i]);
	}
	buf_puts(b, "\n");
}

int nsbox_config_audit(const nsbox_config *c, const char **log, bool *warn, const char **artifacts,
                       const char **store_code, unsigned *keep)
{
	if (!c)
		return -EINVAL;
	if (log)
		*log = c->audit.log;
	if (warn)
		*warn = c->audit.warn;
	if (artifacts)
		*artifacts = c->audit.artifacts;
	if (store_code)
		*store_code = c->audit.store_code ? c->audit.store_code : "always";
	if (keep)
		*keep = c->audit.keep;
	return 0;
}

int nsbox_config_import_gate(const nsbox_config *c, const char **mode, const char *const **blocked, size_t *n)
{
	if (!c)
		return -EINVAL;
	if (mode)
		*mode = c->audit.import_gate ? c->audit.import_gate : c->audit.blocked.n ? "block" : "off";
	if (blocked)
		*blocked = (const char *const *) c->audit.blocked.v;
	if (n)
		*n = c->audit.blocked.n;
	return 0;
}
