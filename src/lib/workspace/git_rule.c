/* workspace.git's rule: which changes under a .git directory are git's
 * own housekeeping (applied, or dropped, though workspace.deny_changes
 * denies .git), and which stay for deny_changes to decide. */
#include <string.h>
#include <sys/stat.h>

#include "base/cleanup.h"
#include "workspace/workspace.h"

/* Git's own housekeeping, relative to a .git directory: what git status,
 * add, commit, fetch and gc write. Nothing here makes the host run code
 * (config, hooks, info/attributes, modules/, worktrees/, rebase and
 * sequencer state with their exec lines, objects/info/alternates stay
 * out). A readable list: nsbox-policy(5) prints it. */
static const char *const git_files[] = {
	"index", "HEAD", "ORIG_HEAD", "FETCH_HEAD", "MERGE_HEAD", "MERGE_MSG", "MERGE_MODE",
	"CHERRY_PICK_HEAD", "REVERT_HEAD", "REBASE_HEAD", "AUTO_MERGE", "COMMIT_EDITMSG", "TAG_EDITMSG",
	"packed-refs", "logs/**", "refs/**", "objects/?" "?/*", "objects/pack/*", "objects/info/packs",
	"objects/info/commit-graph", "objects/info/commit-graphs/*",
};
static const char *const git_dirs[] = {
	"logs", "logs/**", "refs", "refs/**", "objects", "objects/??", "objects/pack", "objects/info",
	"objects/info/commit-graphs",
};

static bool any_of(const char *const *globs, size_t n, const char *path)
{
	for (size_t i = 0; i < n; i++)
		if (ws_glob_match(globs[i], path))
			return true;
	return false;
}

const char *ws_git_rule(int git, const char *path, const char *kind, const char *detail, mode_t mode)
{
	if (git == WS_GIT_DENY || !path || !kind)
		return NULL;
	/* Below the first ".git" of the path (a submodule's repository,
	 * .git/modules/..., is not housekeeping: its name says nothing). */
	const char *rest = NULL;
	for (const char *p = path;;) {
		const char *e = strchrnul(p, '/');
		if (e - p == 4 && !memcmp(p, ".git", 4)) {
			rest = *e ? e + 1 : "";
			break;
		}
		if (!*e)
			break;
		p = e + 1;
	}
	if (!rest || !*rest || !strcmp(kind, "type_changed") || !strcmp(kind, "error"))
		return NULL;
	bool deleted = !strcmp(kind, "deleted");
	bool file = deleted ? detail && !strcmp(detail, "file") : S_ISREG(mode);
	bool dir = deleted ? detail && !strcmp(detail, "directory") : S_ISDIR(mode);
	size_t n = strlen(rest);
	/* A lock left behind (a git killed mid-write) would stop git on the
	 * host: never applied, whatever the mode. */
	if (file && ((n > 5 && !strcmp(rest + n - 5, ".lock")) || !strcmp(rest, "gc.pid") || !strcmp(rest, "gc.log")))
		return "dropped";
	if (!(file && any_of(git_files, ARRAY_SIZE(git_files), rest)) &&
	    !(dir && any_of(git_dirs, ARRAY_SIZE(git_dirs), rest)))
		return NULL;
	return git == WS_GIT_DROP ? "dropped" : "git";
}
