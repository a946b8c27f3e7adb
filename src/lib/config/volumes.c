#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/cleanup.h"
#include "base/error.h"
#include "base/syscalls.h"
#include "config/volumes.h"
#include "workspace/workspace.h"

char *path_expand_home(const char *path, const char *home)
{
	char *out = NULL;
	if (path[0] == '~' && (path[1] == '\0' || path[1] == '/')) {
		if (!home || !*home)
			return NULL;
		if (asprintf(&out, "%s%s", home, path + 1) < 0)
			return NULL;
		return out;
	}
	return strdup(path);
}

static bool below(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	if (n == 1 && dir[0] == '/')
		return true;
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

bool path_forbidden_by(const char *src, const char *rule)
{
	if (strcmp(rule, "/") == 0)
		return strcmp(src, "/") == 0;
	return below(src, rule) || below(rule, src);
}

/* Canonical form of a policy entry; a missing path keeps its lexical form,
 * which is still compared (a forbidden path that does not exist yet must
 * stay forbidden if it appears). */
static char *canonical_rule(const char *rule, const char *home)
{
	_cleanup_free_ char *e = path_expand_home(rule, home);
	if (!e)
		return NULL;
	char real[PATH_MAX];
	if (realpath(e, real))
		return strdup(real);
	return TAKE_PTR(e);
}

int volume_open(const nsbox_config *cfg, const char *source, const char *home, char **canon,
                int *fd, nsbox_error **err)
{
	_cleanup_free_ char *expanded = path_expand_home(source, home);
	if (!expanded)
		return nsbox_err(err, ENOENT, "volume", "expand '%s': HOME is not set", source);
	char real[PATH_MAX];
	if (!realpath(expanded, real))
		return nsbox_err(err, errno, "volume", "resolve volume source '%s'", source);

	/* Two passes so the message names the most direct rule: first the
	 * rules the source is (or is inside), then those it contains. */
	for (size_t i = 0; i < 2 * cfg->forbidden.n; i++) {
		bool first_pass = i < cfg->forbidden.n;
		const char *entry = cfg->forbidden.v[first_pass ? i : i - cfg->forbidden.n];
		_cleanup_free_ char *rule = canonical_rule(entry, home);
		if (!rule)
			continue;   /* "~/..." without a HOME cannot match anything */
		if (first_pass ? (path_forbidden_by(real, rule) && !below(rule, real)) || !strcmp(real, rule)
		               : path_forbidden_by(real, rule)) {
			const char *how = strcmp(real, rule) == 0 ? "is" :
			                  below(real, rule) ? "is inside" : "contains";
			return nsbox_err(err, EACCES, "volume",
			                 "refuse volume source '%s': it %s the forbidden path '%s' (policy filesystem.forbidden)",
			                 real, how, entry);
		}
	}
	/* nsbox's own state (the control sockets of started sandboxes, whose
	 * monitors take commands from the caller; sessions; runs' upper
	 * layers) is never a volume, whatever the policy's list says. */
	_cleanup_free_ char *state = ws_state_dir();
	_cleanup_free_ char *state_rule = state ? canonical_rule(state, home) : NULL;
	if (state_rule && path_forbidden_by(real, state_rule))
		return nsbox_err(err, EACCES, "volume",
		                 "refuse volume source '%s': it %s nsbox's own state directory '%s' (the control sockets "
		                 "of started sandboxes, their snapshots, sessions' layers)", real,
		                 !strcmp(real, state_rule) ? "is" : below(real, state_rule) ? "is inside" : "contains",
		                 state_rule);
	if (cfg->allowed_roots.n) {
		bool ok = false;
		for (size_t i = 0; !ok && i < cfg->allowed_roots.n; i++) {
			_cleanup_free_ char *root = canonical_rule(cfg->allowed_roots.v[i], home);
			ok = root && below(real, root);
		}
		if (!ok)
			return nsbox_err(err, EACCES, "volume",
			                 "refuse volume source '%s': it is outside every allowed root (policy filesystem.allowed_roots)",
			                 real);
	}
	/* Open what we checked without following any symlink: if a component
	 * was swapped for a symlink since realpath(), this fails instead of
	 * binding wherever the link points. */
	struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS };
	int f = sys_openat2(AT_FDCWD, real, &how);
	if (f < 0)
		return nsbox_err(err, errno == ELOOP ? EXDEV : errno, "volume",
		                 "open volume source '%s'%s", real,
		                 errno == ELOOP ? " (it changed into a symlink while being checked)" : "");
	*canon = strdup(real);
	if (!*canon) {
		close(f);
		return nsbox_err(err, ENOMEM, "volume", "open volume source '%s'", real);
	}
	*fd = f;
	return 0;
}
