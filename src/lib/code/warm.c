/* The warm pool's configuration for a language: run-code's, plus the hook
 * (code/agents/warm_*) that makes the interpreter start, import what is
 * preloaded, and wait for the code on stdin before it runs the main script
 * (docs/python.md, "Warm pool"). The hook and its loaders live in /dev/shm,
 * a tmpfs of the sandbox's own: no host path is involved. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "code/lang.h"
#include "code/warm.h"
#include "config/conf.h"

#define WARM_BASE "/dev/shm/.nsbox-warm"

bool code_module_name_ok(const char *m)
{
	if (!m || !*m || strlen(m) > 200 || m[0] == '.')
		return false;
	for (const char *c = m; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
		      *c == '_' || *c == '.' || *c == '-' || *c == '@' || *c == '/'))
			return false;
	return !strstr(m, "..");
}

/* text with `from` replaced (once) by `to`, malloc'ed; NULL if absent. */
static char *replace(const char *text, const char *from, const char *to)
{
	const char *at = strstr(text, from);
	if (!at)
		return NULL;
	buf b = { 0 };
	buf_printf(&b, "%.*s%s%s", (int) (at - text), text, to, at + strlen(from));
	return buf_steal(&b);
}

/* The preload list as the language's literal: ('a', 'b',) or ["a","b"].
 * Names are checked (code_module_name_ok): no quoting can be broken. */
static char *preload_literal(bool python, const char *const *preload)
{
	buf b = { 0 };
	buf_puts(&b, python ? "(" : "[");
	for (size_t i = 0; preload && preload[i]; i++) {
		if (python)
			buf_printf(&b, "'%s', ", preload[i]);
		else
			buf_printf(&b, "%s\"%s\"", i ? "," : "", preload[i]);
	}
	buf_puts(&b, python ? ")" : "]");
	return buf_steal(&b);
}

static int set(nsbox_config *c, const char *key, const char *value, nsbox_error **err)
{
	return nsbox_config_set(c, key, value, "pool", err);
}

int code_warm_config(const nsbox_config *run_cfg, const code_lang *l, const char *const *preload,
                     nsbox_config **out, nsbox_error **err)
{
	*out = NULL;
	if (!l->warm_agent)
		return nsbox_err_invalid(err, "pool", "create pool: no warm pool for %s (python, node)", l->name);
	for (size_t i = 0; preload && preload[i]; i++)
		if (!code_module_name_ok(preload[i]))
			return nsbox_err_invalid(err, "pool", "create pool: '%s' is not a module name to preload",
			                         preload[i]);
	bool python = !strcmp(l->name, "python");
	nsbox_config *c = NULL;
	if (config_copy(&c, run_cfg) < 0)
		return nsbox_err(err, ENOMEM, "pool", "create pool");
	/* The hook's placeholders, each written once in its text. */
	char *lit = preload_literal(python, preload), from[64], to[64];
	const char *text = code_agent_text(l->warm_agent);
	char *hook = NULL;
	if (lit && python) {
		snprintf(to, sizeof(to), "warm('%s')", l->file);
		char *t1 = replace(text, "warm(TARGET)", to);
		snprintf(from, sizeof(from), "for module in PRELOAD:");
		char *lit_for = NULL;
		buf b = { 0 };
		buf_printf(&b, "for module in %s:", lit);
		lit_for = buf_steal(&b);
		hook = t1 && lit_for ? replace(t1, from, lit_for) : NULL;
		free(t1);
		free(lit_for);
	} else if (lit) {
		buf b = { 0 };
		buf_printf(&b, "})(\"%s\", %s);", l->file, lit);
		char *call = buf_steal(&b);
		hook = call ? replace(text, "})(TARGET, PRELOAD);", call) : NULL;
		free(call);
	}
	free(lit);
	int r = hook ? 0 : nsbox_err(err, ENOMEM, "pool", "create pool");
	if (r == 0 && hook && python) {
		r = nsbox_config_add_file(c, WARM_BASE "/hook.py", hook, strlen(hook), 0444, err);
		/* The .pth line runs the hook as site processes the user site;
		 * only the directory of the interpreter's own version is read. */
		static const char line[] = "import sys; exec(open('" WARM_BASE "/hook.py').read(), "
		                           "{'__name__': '__nsbox_warm__'})\n";
		for (int v = 8; r == 0 && v <= 15; v++) {
			char pth[128];
			snprintf(pth, sizeof(pth), WARM_BASE "/lib/python3.%d/site-packages/nsbox-warm.pth", v);
			r = nsbox_config_add_file(c, pth, line, sizeof(line) - 1, 0444, err);
		}
		r = r ?: set(c, "environment.set", "PYTHONUSERBASE=" WARM_BASE, err);
	} else if (r == 0 && hook) {
		r = nsbox_config_add_file(c, WARM_BASE "/hook.js", hook, strlen(hook), 0444, err);
		r = r ?: set(c, "environment.set", "NODE_OPTIONS=--require " WARM_BASE "/hook.js", err);
	}
	free(hook);
	if (r < 0) {
		nsbox_config_free(c);
		return r;
	}
	*out = c;
	return 0;
}
