/* The changes scan (changes.c) on fabricated upper/lower layers, for what
 * test_changes.c leaves out: whiteouts (root: a 0/0 character device),
 * opaque directories (user.overlay.opaque, as a user's overlay writes it),
 * changed directory modes, retargeted links, special files, a directory
 * replaced by a file with a denied path deep below it, a missing lower
 * layer; single-star globs; escaping of malformed UTF-8. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/coverage.h"
#include "base/fsutil.h"
#include "base/strv.h"
#include "unit.h"
#include "workspace/workspace.h"

static char base[64], upper[96], lower[96];

static void sh(const char *dir, const char *script)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "cd '%s' && %s", dir, script);
	ck_assert_int_eq(system(cmd), 0);
}

static void setup(void)
{
	snprintf(base, sizeof(base), "/tmp/nsbox-unit-wsscan.XXXXXX");
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

/* The change at path is kind/detail (detail NULL: any). */
static void expect(const ws_change *v, size_t n, const char *path, const char *kind, const char *detail)
{
	const ws_change *c = find(v, n, path);
	if (!c)
		ck_abort_msg("no change for '%s'", path);
	ck_assert_msg(!strcmp(c->kind, kind), "'%s': kind %s, want %s", path, c->kind, kind);
	if (detail)
		ck_assert_msg(!strcmp(c->detail, detail), "'%s': detail %s, want %s", path, c->detail, detail);
}

static bool opaque(const char *dir)
{
	return setxattr(dir, "user.overlay.opaque", "y", 1, 0) == 0;
}

START_TEST(test_modified_kinds)
{
	sh(lower, "mkdir -p d && chmod 755 d && ln -s a link && ln -s same same-link && mkfifo fifo && echo 1 >f && echo abc >m");
	sh(upper, "mkdir -p d && chmod 700 d && ln -s b link && ln -s same same-link && mkfifo fifo && mkdir f && echo abc >m && chmod 600 m");
	ws_change *v = NULL;
	size_t n = 0;
	ck_assert_int_eq(ws_scan(upper, lower, NULL, &v, &n, NULL), 0);
	expect(v, n, "d", "modified", "mode");
	expect(v, n, "link", "modified", "symlink");
	ck_assert_str_eq(find(v, n, "link")->target, "b");
	ck_assert_ptr_null(find(v, n, "same-link"));   /* same target: no change */
	expect(v, n, "fifo", "modified", "fifo");
	expect(v, n, "f", "type_changed", "directory");
	expect(v, n, "m", "modified", "mode");          /* same content, other mode */
	ck_assert_uint_eq(n, 5);
	/* The JSON of a change: a deleted or error entry has no mode. */
	buf b = { 0 };
	ws_change_json(&b, find(v, n, "d"));
	ck_assert_ptr_nonnull(strstr(b.data, "\"mode\":\"0700\""));
	buf_free(&b);
	ws_change gone = { .path = "x", .kind = "deleted", .detail = "file" };
	ws_change_json(&b, &gone);
	ck_assert_ptr_nonnull(strstr(b.data, "\"mode\":null"));
	buf_free(&b);
	ws_changes_free(v, n);
}
END_TEST

/* A whiteout (character device 0/0) is a deletion of what the lower layer
 * had; one over nothing is not a change. */
START_TEST(test_whiteouts)
{
	if (geteuid() != 0) {
		fprintf(stderr, "test_whiteouts: skipped (mknod needs root)\n");
		return;
	}
	sh(lower, "mkdir -p dir/sub && echo x >dir/sub/f && echo y >file && ln -s t lnk");
	char p[200];
	snprintf(p, sizeof(p), "%s/dir", upper);
	ck_assert_int_eq(mknod(p, S_IFCHR | 0, makedev(0, 0)), 0);
	snprintf(p, sizeof(p), "%s/file", upper);
	ck_assert_int_eq(mknod(p, S_IFCHR | 0, makedev(0, 0)), 0);
	snprintf(p, sizeof(p), "%s/lnk", upper);
	ck_assert_int_eq(mknod(p, S_IFCHR | 0, makedev(0, 0)), 0);
	snprintf(p, sizeof(p), "%s/never", upper);
	ck_assert_int_eq(mknod(p, S_IFCHR | 0, makedev(0, 0)), 0);
	ws_change *v = NULL;
	size_t n = 0;
	ck_assert_int_eq(ws_scan(upper, lower, NULL, &v, &n, NULL), 0);
	expect(v, n, "dir", "deleted", "directory");
	expect(v, n, "file", "deleted", "file");
	expect(v, n, "lnk", "deleted", "symlink");
	ck_assert_ptr_null(find(v, n, "never"));
	ck_assert_uint_eq(n, 3);
	ws_changes_free(v, n);
}
END_TEST

/* An opaque directory hides all the lower one had: each such entry is
 * deleted, unless the upper one has it again. */
START_TEST(test_opaque)
{
	sh(lower, "mkdir -p d/sub && echo a >d/a && echo b >d/b && ln -s x d/l && echo top >top");
	sh(upper, "mkdir -p d && echo b >d/b && echo c >d/c");
	char p[200];
	snprintf(p, sizeof(p), "%s/d", upper);
	if (!opaque(p)) {
		fprintf(stderr, "test_opaque: skipped (no user xattrs on /tmp: %s)\n", strerror(errno));
		return;
	}
	ws_change *v = NULL;
	size_t n = 0;
	ck_assert_int_eq(ws_scan(upper, lower, NULL, &v, &n, NULL), 0);
	expect(v, n, "d/a", "deleted", "file");
	expect(v, n, "d/sub", "deleted", "directory");
	expect(v, n, "d/l", "deleted", "symlink");
	expect(v, n, "d/c", "added", "file");
	ck_assert_ptr_null(find(v, n, "d/b"));   /* there again, the same */
	ck_assert_ptr_null(find(v, n, "top"));
	ws_changes_free(v, n);
	/* The upper layer's root itself opaque: all of the lower one is gone. */
	ck_assert(opaque(upper));
	ck_assert_int_eq(ws_scan(upper, lower, NULL, &v, &n, NULL), 0);
	expect(v, n, "top", "deleted", "file");
	ws_changes_free(v, n);
}
END_TEST

/* A lower directory replaced by a file: denied when a rule matches
 * anything that was below it, however deep; not when none does. */
START_TEST(test_replaced_dir_denied_below)
{
	sh(lower, "mkdir -p proj/a/b/c/d/e && echo k >proj/a/b/c/d/e/secret.key && mkdir -p other/x && echo o >other/x/y");
	sh(upper, "echo file >proj && echo file >other");
	strv deny = { 0 };
	ck_assert_int_eq(strv_push(&deny, "**/*.key"), 0);
	ws_change *v = NULL;
	size_t n = 0;
	ck_assert_int_eq(ws_scan(upper, lower, &deny, &v, &n, NULL), 0);
	expect(v, n, "proj", "type_changed", "file");
	ck_assert(find(v, n, "proj")->denied);
	expect(v, n, "other", "type_changed", "file");
	ck_assert(!find(v, n, "other")->denied);
	ws_changes_free(v, n);
	strv_clear(&deny);
}
END_TEST

/* No lower layer (a new workspace): everything is added; no upper layer:
 * an error, nothing returned. */
START_TEST(test_missing_layers)
{
	sh(upper, "mkdir -p a/b && echo x >a/b/f");
	char none[200];
	snprintf(none, sizeof(none), "%s/none", base);
	ws_change *v = NULL;
	size_t n = 0;
	uint64_t bytes = 0;
	ck_assert_int_eq(ws_scan(upper, none, NULL, &v, &n, &bytes), 0);
	expect(v, n, "a", "added", "directory");
	expect(v, n, "a/b", "added", "directory");
	expect(v, n, "a/b/f", "added", "file");
	ck_assert_uint_gt(bytes, 0);
	ws_changes_free(v, n);
	v = NULL;
	ck_assert_int_eq(ws_scan(none, lower, NULL, &v, &n, NULL), -ENOENT);
	ck_assert_ptr_null(v);
}
END_TEST

START_TEST(test_glob_star)
{
	ck_assert(ws_glob_match("*.pem", "key.pem"));
	ck_assert(!ws_glob_match("*.pem", "dir/key.pem"));   /* one star stays in its name */
	ck_assert(ws_glob_match("src/*/main.c", "src/a/main.c"));
	ck_assert(!ws_glob_match("src/*/main.c", "src/a/b/main.c"));
	ck_assert(ws_glob_match("*", "anything"));
	ck_assert(!ws_glob_match("*", "a/b"));
	ck_assert(ws_glob_match("a?c", "abc"));
	ck_assert(!ws_glob_match("a?c", "a/c"));
	ck_assert(ws_glob_match("build/**", "build/x/y"));
	ck_assert(ws_glob_match("**.log", "a/b.log"));
	ck_assert(!ws_glob_match("**.log", "a/b.txt"));
	ck_assert(!ws_glob_match("abc", "ab"));
}
END_TEST

/* Malformed UTF-8 (overlong, surrogate, beyond U+10FFFF, cut short) is
 * escaped byte by byte; valid 3- and 4-byte sequences are kept. */
START_TEST(test_escape_utf8)
{
	char *e = ws_escape("\xc0\x80|\xed\xa0\x80|\xf4\x90\x80\x80|\xe2\x82|\xe2\x82\xac|\xf0\x9f\x98\x80|\x7f");
	ck_assert_str_eq(e, "\\xc0\\x80|\\xed\\xa0\\x80|\\xf4\\x90\\x80\\x80|\\xe2\\x82|\xe2\x82\xac|\xf0\x9f\x98\x80|\\x7f");
	free(e);
	e = ws_escape("");
	ck_assert_str_eq(e, "");
	free(e);
	e = ws_escape(NULL);
	ck_assert_str_eq(e, "");
	free(e);
	e = ws_escape("\xe2\x81\xa6x\xe2\x81\xa9");   /* bidi isolates */
	ck_assert_str_eq(e, "\\xe2\\x81\\xa6x\\xe2\\x81\\xa9");
	free(e);
}
END_TEST

/* A chain of `depth` directories named d under dir/name. */
static void chain(const char *dir, const char *name, int depth)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(mkdirat(fd, name, 0755), 0);
	int sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(sub, 0);
	close(fd);
	fd = sub;
	for (int i = 0; i < depth; i++) {
		ck_assert_int_eq(mkdirat(fd, "d", 0755), 0);
		sub = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		ck_assert_int_ge(sub, 0);
		close(fd);
		fd = sub;
	}
	close(fd);
}

/* A lower directory deeper than the scan reads, replaced by a file: what
 * is below it is unknown, so with deny rules the change is denied (fail
 * closed); a shallow one no rule matches is not. */
START_TEST(test_replaced_deep_dir_denied)
{
	chain(lower, "deep", WS_MAX_DEPTH + 4);
	sh(lower, "mkdir -p shallow/a/b && echo x >shallow/a/b/f");
	sh(upper, "echo file >deep && echo file >shallow");
	strv deny = { 0 };
	ck_assert_int_eq(strv_push(&deny, "**/*.key"), 0);
	ws_change *v = NULL;
	size_t n = 0;
	ck_assert_int_eq(ws_scan(upper, lower, &deny, &v, &n, NULL), 0);
	ck_assert_uint_eq(n, 2);
	expect(v, n, "deep", "type_changed", "file");
	ck_assert(find(v, n, "deep")->denied);
	expect(v, n, "shallow", "type_changed", "file");
	ck_assert(!find(v, n, "shallow")->denied);
	ws_changes_free(v, n);
	strv_clear(&deny);
}
END_TEST

/* The same too-deep tree in both layers: the scan says where it stopped
 * (one error), and reports nothing above it as changed. */
START_TEST(test_too_deep_in_both_layers)
{
	chain(lower, "deep", WS_MAX_DEPTH + 4);
	chain(upper, "deep", WS_MAX_DEPTH + 4);
	ws_change *v = NULL;
	size_t n = 0;
	ck_assert_int_eq(ws_scan(upper, lower, NULL, &v, &n, NULL), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(v[0].kind, "error");
	ck_assert_str_eq(v[0].detail, "too deep");
	ck_assert_uint_eq(strlen(v[0].path), strlen("deep") + 2 * (WS_MAX_DEPTH - 1));
	ws_changes_free(v, n);
}
END_TEST

/* No descriptor left to read the upper layer with: the scan fails with
 * EMFILE and returns nothing, rather than an empty list of changes (which
 * would read as "nothing changed"). */
START_TEST(test_no_fds_left)
{
	sh(upper, "echo new >f");
	/* ws_scan opens the upper and the lower layer (the two lowest free
	 * descriptors); allow no third one. */
	int a = open("/dev/null", O_RDONLY | O_CLOEXEC), b = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(a, 0);
	ck_assert_int_gt(b, a);
	close(a);
	close(b);
	struct rlimit old, lim;
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	lim = old;
	lim.rlim_cur = (rlim_t) b + 1;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &lim), 0);
	ws_change *v = NULL;
	size_t n = 7;
	int r = ws_scan(upper, lower, NULL, &v, &n, NULL);
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
	ck_assert_int_eq(r, -EMFILE);
	ck_assert_ptr_null(v);
	ck_assert_uint_eq(n, 7);
}
END_TEST

/* Without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (what a rootless
 * caller lacks; root keeps its uid, so its coverage counts can still be
 * written): scan, and exit with a bit set for each expectation met, 100 if
 * the scan failed. */
static int scan_without_dac(const strv *deny)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (unit_drop_caps((1ull << CAP_DAC_OVERRIDE) | (1ull << CAP_DAC_READ_SEARCH)) < 0)
			_exit(101);
		ws_change *v = NULL;
		size_t n = 0;
		int bits = 100;
		if (ws_scan(upper, lower, deny, &v, &n, NULL) == 0) {
			const ws_change *c;
			bits = (c = find(v, n, "secret")) && !strcmp(c->kind, "type_changed") && c->denied ? 1 : 0;
			bits |= (c = find(v, n, "proj")) && !strcmp(c->kind, "type_changed") && c->denied ? 2 : 0;
			bits |= (c = find(v, n, "plain")) && !strcmp(c->kind, "type_changed") && !c->denied ? 4 : 0;
			for (size_t i = 0; i < n; i++)   /* its mode change is reported too */
				bits |= !strcmp(v[i].path, "shared") && !strcmp(v[i].kind, "error") &&
				        !strcmp(v[i].detail, "unreadable") ? 8 : 0;
			for (size_t i = 0; i < n; i++)
				fprintf(stderr, "%s %s %s denied=%d\n", v[i].path, v[i].kind, v[i].detail, v[i].denied);
			ws_changes_free(v, n);
		}
		coverage_dump();
		_exit(bits);
	}
	int st = 0;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* A lower directory the scan cannot read (mode 000 in the project), or
 * one below it that it cannot read, replaced by a file: a rule could match
 * what it held, so the change is denied (fail closed), while a readable
 * directory that holds nothing denied is not. An upper directory it cannot
 * read (the payload's chmod 000) over a lower one is an "unreadable" error,
 * not skipped as unchanged. */
START_TEST(test_unreadable_lower_dir_denied)
{
	sh(lower, "mkdir -p secret proj/locked plain/x && echo k >secret/id.key && echo k >proj/locked/id.key && "
	          "echo p >plain/x/readme && mkdir shared && chmod 000 secret proj/locked");
	sh(upper, "echo file >secret && echo file >proj && echo file >plain && mkdir shared && chmod 000 shared");
	strv deny = { 0 };
	ck_assert_int_eq(strv_push(&deny, "**/*.key"), 0);
	int bits = scan_without_dac(&deny);
	sh(lower, "chmod 755 secret proj/locked");
	sh(upper, "chmod 755 shared");
	ck_assert_int_eq(bits, 15);
	strv_clear(&deny);
}
END_TEST

/* A lower layer that exists but cannot be read (mode 000, a caller without
 * CAP_DAC_OVERRIDE): the scan fails with EACCES instead of taking it as a
 * new workspace, where deletions and replaced denied paths are not seen. */
START_TEST(test_unreadable_lower_layer)
{
	sh(upper, "echo new >f");
	ck_assert_int_eq(chmod(lower, 0), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (unit_drop_caps((1ull << CAP_DAC_OVERRIDE) | (1ull << CAP_DAC_READ_SEARCH)) < 0)
			_exit(101);
		ws_change *v = NULL;
		size_t n = 0;
		int r = ws_scan(upper, lower, NULL, &v, &n, NULL);
		if (r == 0)
			ws_changes_free(v, n);
		coverage_dump();
		_exit(r == 0 ? 0 : r == -EACCES && !v ? 1 : 2);
	}
	int st = 0;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_int_eq(chmod(lower, 0755), 0);
	ck_assert(WIFEXITED(st));
	ck_assert_int_eq(WEXITSTATUS(st), 1);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("ws_scan");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_modified_kinds);
	tcase_add_test(tc, test_whiteouts);
	tcase_add_test(tc, test_opaque);
	tcase_add_test(tc, test_replaced_dir_denied_below);
	tcase_add_test(tc, test_missing_layers);
	tcase_add_test(tc, test_glob_star);
	tcase_add_test(tc, test_escape_utf8);
	tcase_add_test(tc, test_replaced_deep_dir_denied);
	tcase_add_test(tc, test_too_deep_in_both_layers);
	tcase_add_test(tc, test_no_fds_left);
	tcase_add_test(tc, test_unreadable_lower_dir_denied);
	tcase_add_test(tc, test_unreadable_lower_layer);
	return unit_run("ws_scan", tc);
}
