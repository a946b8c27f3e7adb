/* The changes scan on a fabricated overlay upper layer (no overlay needed:
 * whiteouts are not made here), the deny rules, and escaping. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/strv.h"
#include "unit.h"
#include "workspace/workspace.h"

static char base[64], upper[96], lower[96];

/* Run `script` in directory `dir`. */
static void sh(const char *dir, const char *script)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "cd '%s' && %s", dir, script);
	ck_assert_int_eq(system(cmd), 0);
}

static void setup(void)
{
	snprintf(base, sizeof(base), "/tmp/nsbox-unit-changes.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(base));
	snprintf(upper, sizeof(upper), "%s/upper", base);
	snprintf(lower, sizeof(lower), "%s/lower", base);
	sh(base, "mkdir -p upper lower");
}

static void teardown(void)
{
	ck_assert_int_eq(remove_tree(base), 0);
}

static const ws_change *find(const ws_change *v, size_t n, const char *path)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].path, path))
			return &v[i];
	return NULL;
}

START_TEST(test_modes_targets_denied)
{
	sh(lower, "mkdir -p .git conf/secret && echo x >.git/config && echo s >conf/secret/key && echo a >keep");
	sh(upper, "ln -s /etc .git && ln -s ../etc esc && touch su && chmod 4755 su && touch ww && chmod 666 ww");
	sh(upper, "printf 'gitdir: /x' >conf");
	strv deny = { 0 };
	ck_assert_int_eq(strv_push(&deny, "**/.git/**"), 0);
	ck_assert_int_eq(strv_push(&deny, "conf/secret/**"), 0);
	ws_change *v = NULL;
	size_t n = 0;
	uint64_t bytes = 0;
	ck_assert_int_eq(ws_scan(upper, lower, &deny, &v, &n, &bytes), 0);
	const ws_change *c = find(v, n, ".git");
	ck_assert_ptr_nonnull(c);
	ck_assert_str_eq(c->kind, "type_changed");
	ck_assert_str_eq(c->target, "/etc");
	ck_assert(c->denied);                            /* .git/config below it is denied */
	ck_assert((c = find(v, n, "conf")) && c->denied); /* a file over conf/secret/key */
	ck_assert((c = find(v, n, "esc")) && !c->denied && !strcmp(c->target, "../etc"));
	ck_assert((c = find(v, n, "su")) && (c->mode & 07777) == 04755);
	ck_assert((c = find(v, n, "ww")) && (c->mode & 07777) == 0666);
	ws_changes_free(v, n);
	strv_clear(&deny);
}
END_TEST

START_TEST(test_deep_tree)
{
	/* Deeper than the scan goes and than PATH_MAX: an error entry, no
	 * crash, and removal works. */
	int fd = open(upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	for (int i = 0; i < 3000; i++) {
		ck_assert_int_eq(mkdirat(fd, "dddd", 0755), 0);
		int sub = openat(fd, "dddd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		ck_assert_int_ge(sub, 0);
		close(fd);
		fd = sub;
	}
	close(fd);
	ws_change *v = NULL;
	size_t n = 0;
	ck_assert_int_eq(ws_scan(upper, lower, NULL, &v, &n, NULL), 0);
	size_t errors = 0;
	for (size_t i = 0; i < n; i++)
		errors += !strcmp(v[i].kind, "error") && !strcmp(v[i].detail, "too deep");
	ck_assert_uint_eq(errors, 1);
	ck_assert_uint_eq(n, WS_MAX_DEPTH + 1);   /* each level, and the error */
	ws_changes_free(v, n);
	int top = open(upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ws_usage u;
	ws_du(top, &u);
	ck_assert_uint_gt(u.bytes, 3000 * 512);
	ck_assert(u.complete);
	close(top);
}
END_TEST

START_TEST(test_escape)
{
	char *e = ws_escape("a\033]0;x\007\\b\xff\xc2\x9b" "c\xe2\x80\xae" "d\xc3\xa9");
	ck_assert_str_eq(e, "a\\x1b]0;x\\x07\\\\b\\xff\\xc2\\x9bc\\xe2\\x80\\xaed\xc3\xa9");
	free(e);
}
END_TEST

START_TEST(test_glob)
{
	ck_assert(ws_glob_match("**/.git", ".git"));
	ck_assert(ws_glob_match("**/.git", "sub/.git"));
	ck_assert(ws_glob_match("**/.git/**", ".git/config"));
	ck_assert(!ws_glob_match("**/.git/**", ".gitignore"));
	ck_assert(!ws_glob_match("**/.git", ".github"));
	/* Many stars against a long name the sandbox chose backtrack
	 * exponentially (fuzzing found it): the budget ends the match as
	 * "matches", which denies the change (fail closed), instead of the
	 * check's timeout ending this test. */
	char name[200];
	memset(name, 'a', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	ck_assert(ws_glob_match("**a**a**a**a**a**a**a**a**a**a**a**a**b", name));
	ck_assert(!ws_glob_match("*a*b", "aaaa"));
}
END_TEST

/* workspace.git's rule as a table: {path, kind, detail, mode, apply, drop}. */
START_TEST(test_git_rule)
{
	static const struct {
		const char *path, *kind, *detail;
		mode_t mode;
		const char *apply, *drop;
	} rows[] = {
		{ ".git/index", "modified", "content", S_IFREG | 0644, "git", "dropped" },
		{ "sub/repo/.git/index", "modified", "content", S_IFREG | 0644, "git", "dropped" },
		{ ".git/HEAD", "modified", "content", S_IFREG | 0644, "git", "dropped" },
		{ ".git/ORIG_HEAD", "added", "file", S_IFREG | 0644, "git", "dropped" },
		{ ".git/COMMIT_EDITMSG", "modified", "content", S_IFREG | 0644, "git", "dropped" },
		{ ".git/refs/heads/main", "modified", "content", S_IFREG | 0644, "git", "dropped" },
		{ ".git/refs/heads/topic", "deleted", "file", 0, "git", "dropped" },
		{ ".git/refs/heads/a/b", "added", "directory", S_IFDIR | 0755, "git", "dropped" },
		{ ".git/logs/HEAD", "modified", "content", S_IFREG | 0644, "git", "dropped" },
		{ ".git/objects/ab", "added", "directory", S_IFDIR | 0755, "git", "dropped" },
		{ ".git/objects/ab/cdef0123", "added", "file", S_IFREG | 0444, "git", "dropped" },
		{ ".git/objects/pack/pack-1.pack", "deleted", "file", 0, "git", "dropped" },
		{ ".git/packed-refs", "added", "file", S_IFREG | 0644, "git", "dropped" },
		{ ".git/index.lock", "added", "file", S_IFREG | 0644, "dropped", "dropped" },
		{ ".git/refs/heads/main.lock", "added", "file", S_IFREG | 0644, "dropped", "dropped" },
		/* What can make the host run code: no rule (deny_changes decides). */
		{ ".git/config", "modified", "content", S_IFREG | 0644, NULL, NULL },
		{ ".git/hooks/pre-commit", "added", "file", S_IFREG | 0755, NULL, NULL },
		{ ".git/hooks", "added", "directory", S_IFDIR | 0755, NULL, NULL },
		{ ".git/info/attributes", "added", "file", S_IFREG | 0644, NULL, NULL },
		{ ".git/modules/lib/config", "modified", "content", S_IFREG | 0644, NULL, NULL },
		{ ".git/modules/lib/index", "modified", "content", S_IFREG | 0644, NULL, NULL },
		{ ".git/objects/info/alternates", "added", "file", S_IFREG | 0644, NULL, NULL },
		{ ".git/rebase-merge/git-rebase-todo", "added", "file", S_IFREG | 0644, NULL, NULL },
		{ ".git/worktrees/w/gitdir", "added", "file", S_IFREG | 0644, NULL, NULL },
		{ ".git/config.worktree", "added", "file", S_IFREG | 0644, NULL, NULL },
		{ ".git", "type_changed", "symlink", S_IFLNK | 0777, NULL, NULL },
		{ ".git", "modified", "mode", S_IFDIR | 0777, NULL, NULL },
		{ ".git/index", "type_changed", "symlink", S_IFLNK | 0777, NULL, NULL },
		{ ".git/refs/heads/main", "added", "symlink", S_IFLNK | 0777, NULL, NULL },
		{ ".gitignore", "modified", "content", S_IFREG | 0644, NULL, NULL },
		{ "src/.github/index", "added", "file", S_IFREG | 0644, NULL, NULL },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
		for (int m = 0; m < 3; m++) {
			const char *got = ws_git_rule(m, rows[i].path, rows[i].kind, rows[i].detail, rows[i].mode);
			const char *want = m == WS_GIT_APPLY ? rows[i].apply : m == WS_GIT_DROP ? rows[i].drop : NULL;
			ck_assert_msg(want ? got && !strcmp(got, want) : !got, "%s (%s %s), mode %d: got %s, want %s",
			              rows[i].path, rows[i].kind, rows[i].detail, m, got ? got : "none", want ? want : "none");
		}
	}
}
END_TEST

/* A scan with the rules: the default deny list and workspace.git, the
 * session's times. */
START_TEST(test_scan_rules_times)
{
	sh(lower, "mkdir -p .git/refs/heads && echo a >.git/index && echo c >.git/config && echo r >.git/refs/heads/main");
	sh(upper, "mkdir -p .git/refs/heads .git/hooks && echo b >.git/index && echo evil >.git/config && "
	          "echo s >.git/refs/heads/main && : >.git/index.lock && echo h >.git/hooks/post-checkout && "
	          "echo n >new && TZ=UTC touch -d '2001-01-01 00:00:00.123456789' new");
	strv deny = { 0 };
	ck_assert_int_eq(strv_push(&deny, "**/.git"), 0);
	ck_assert_int_eq(strv_push(&deny, "**/.git/**"), 0);
	ws_rules rules = { .deny = &deny, .git = WS_GIT_APPLY };
	ws_change *v = NULL;
	size_t n = 0;
	ck_assert_int_eq(ws_scan_rules(upper, lower, &rules, &v, &n, NULL), 0);
	const ws_change *c;
	ck_assert((c = find(v, n, ".git/index")) && !c->denied && !strcmp(c->rule, "git"));
	ck_assert((c = find(v, n, ".git/refs/heads/main")) && !c->denied && !strcmp(c->rule, "git"));
	ck_assert((c = find(v, n, ".git/config")) && c->denied && !strcmp(c->rule, "denied"));
	ck_assert((c = find(v, n, ".git/hooks/post-checkout")) && c->denied);
	ck_assert((c = find(v, n, ".git/index.lock")) && !c->denied && !strcmp(c->rule, "dropped"));
	ck_assert((c = find(v, n, "new")) && !strcmp(c->rule, "apply"));
	ck_assert_int_eq(c->mtime.tv_sec, 978307200);
	ck_assert_int_eq(c->mtime.tv_nsec, 123456789);
	char iso[64];
	ws_time_iso(iso, &c->mtime);
	ck_assert_str_eq(iso, "2001-01-01T00:00:00.123456789Z");
	ws_changes_free(v, n);
	rules.git = WS_GIT_DENY;
	ck_assert_int_eq(ws_scan_rules(upper, lower, &rules, &v, &n, NULL), 0);
	ck_assert((c = find(v, n, ".git/index")) && c->denied && !strcmp(c->rule, "denied"));
	ws_changes_free(v, n);
	strv_clear(&deny);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("changes");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_modes_targets_denied);
	tcase_add_test(tc, test_deep_tree);
	tcase_add_test(tc, test_escape);
	tcase_add_test(tc, test_glob);
	tcase_add_test(tc, test_git_rule);
	tcase_add_test(tc, test_scan_rules_times);
	return unit_run("changes", tc);
}
