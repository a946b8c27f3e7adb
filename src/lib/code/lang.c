/* The language table (lang.h): the one list every door uses. */
#include <errno.h>
#include <string.h>

#include "base/error.h"
#include "code/lang.h"
#include "config/conf.h"

static const char *const python_env[] = { "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1", NULL };
static const char *const no_env[] = { NULL };

static const code_lang langs[] = {
	{ "python", "/tmp/main.py", "python3", python_env, "-c", "context_python", "warm_python" },
	{ "node", "/tmp/main.js", "node", no_env, "-e", "context_node", "warm_node" },
	{ "bash", "/tmp/main.sh", "bash", no_env, "-c", NULL, NULL },
};

const code_lang *code_lang_find(const char *name)
{
	for (size_t i = 0; name && i < sizeof(langs) / sizeof(langs[0]); i++)
		if (!strcmp(langs[i].name, name))
			return &langs[i];
	return NULL;
}

const char *code_lang_names(void)
{
	return "python, node, bash";
}

const char *const *nsbox_code_languages(void)
{
	static const char *const names[] = { "python", "node", "bash", NULL };
	return names;
}

int code_config(const nsbox_config *base, const code_lang *l, const void *code, size_t len,
                nsbox_config **out, nsbox_error **err)
{
	*out = NULL;
	nsbox_config *c = NULL;
	if (config_copy(&c, base) < 0)
		return nsbox_err(err, ENOMEM, "code", "prepare the %s run", l->name);
	config_drop_file(c, l->file);
	int r = nsbox_config_add_file(c, l->file, code ? code : "", code ? len : 0, 0644, err);
	for (const char *const *e = l->env; r == 0 && *e; e++)
		r = nsbox_config_set(c, "environment.set", *e, "run-code", err);
	if (r == 0 && !c->workdir)
		r = nsbox_config_set(c, "workdir", "/tmp", "run-code", err);
	const char *argv[] = { l->interp, l->file, NULL };
	if (r == 0)
		r = nsbox_config_set_command(c, 2, argv, err);
	if (r < 0) {
		nsbox_config_free(c);
		return r;
	}
	*out = c;
	return 0;
}
