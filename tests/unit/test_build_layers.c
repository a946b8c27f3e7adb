/* build_layers.c: layers_flatten on real trees. A base and two layers as a
 * build's steps leave them (overlayfs upper directories: whiteouts, opaque
 * directories, replacements of one type by another), flattened into an
 * empty directory; then the result is read back entry by entry. Also: hard
 * links within the sources stay hard links, a file with extended
 * attributes is copied without them (its mode and times kept), a symlink
 * out of the tree is copied as a link and never followed, a FIFO is made
 * again, and a tree deeper than the walk allows is refused, naming where. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/error.h"
#include "image/build.h"
#include "unit.h"

static char dir[64];

static const char *at(const char *rel)
{
	static char p[2][4096];
	static int k;
	k ^= 1;
	snprintf(p[k], sizeof(p[k]), "%s/%s", dir, rel);
	return p[k];
}

static void put(const char *rel, const char *text)
{
	int fd = open(at(rel), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t) strlen(text));
	close(fd);
}

static void mk(const char *rel) { ck_assert_int_eq(mkdir(at(rel), 0755), 0); }

static char *get(const char *rel)
{
	static char b[256];
	int fd = open(at(rel), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	ssize_t n = read(fd, b, sizeof(b) - 1);
	close(fd);
	b[n < 0 ? 0 : n] = '\0';
	return b;
}

static char type_of(const char *rel)
{
	struct stat st;
	if (lstat(at(rel), &st) < 0)
		return '-';
	return S_ISREG(st.st_mode) ? 'f' : S_ISDIR(st.st_mode) ? 'd' : S_ISLNK(st.st_mode) ? 'l'
	       : S_ISFIFO(st.st_mode) ? 'p' : '?';
}

static int dfd(const char *rel)
{
	int fd = open(at(rel), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	return fd;
}

static bool whiteout(const char *rel)
{
	return mknod(at(rel), S_IFCHR | 0600, makedev(0, 0)) == 0;
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/nsbox-layers.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	mk("base");
	mk("l1");
	mk("l2");
	mk("dest");
}

static void teardown(void)
{
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_layers_applied)
{
	if (geteuid() != 0) {
		printf("# SKIP whiteouts are character devices 0/0: mknod needs root\n");
		return;
	}
	/* The base. */
	put("base/gone", "base");
	put("base/keep", "old");
	mk("base/opaque");
	put("base/opaque/hidden", "hidden");
	mk("base/merged");
	put("base/merged/a", "a");
	mk("base/becomes-file");
	put("base/becomes-file/inner", "x");
	put("base/becomes-dir", "x");
	ck_assert_int_eq(symlink("/etc/passwd", at("base/out")), 0);
	put("base/h1", "linked");
	ck_assert_int_eq(link(at("base/h1"), at("base/h2")), 0);
	ck_assert_int_eq(mkfifo(at("base/fifo"), 0600), 0);
	/* Layer 1: a whiteout, an opaque directory, replacements. */
	ck_assert(whiteout("l1/gone"));
	put("l1/keep", "new");
	mk("l1/opaque");
	ck_assert_int_eq(setxattr(at("l1/opaque"), "trusted.overlay.opaque", "y", 1, 0), 0);
	put("l1/opaque/shown", "shown");
	mk("l1/merged");
	put("l1/merged/b", "b");
	put("l1/becomes-file", "now a file");
	mk("l1/becomes-dir");
	put("l1/becomes-dir/inner", "now a dir");
	mk("l1/added");
	mk("l1/added/deep");
	put("l1/added/deep/f", "deep");
	/* Layer 2: a whiteout of what layer 1 added, a file below a merge. */
	ck_assert(whiteout("l2/added"));
	mk("l2/merged");
	put("l2/merged/c", "c");
	ck_assert(whiteout("l2/never-there"));

	int base = dfd("base"), ups[2] = { dfd("l1"), dfd("l2") }, dest = dfd("dest");
	nsbox_error *err = NULL;
	ck_assert_int_eq(layers_flatten(base, ups, 2, dest, true, &err), 0);
	ck_assert_ptr_null(err);
	close(base);
	close(ups[0]);
	close(ups[1]);
	close(dest);

	static const struct {
		const char *path;
		char type;
		const char *text;   /* a file's content, or NULL */
	} want[] = {
		{ "dest/gone", '-', NULL },            /* whiteout */
		{ "dest/keep", 'f', "new" },           /* replaced */
		{ "dest/opaque/hidden", '-', NULL },   /* opaque: the lower content hidden */
		{ "dest/opaque/shown", 'f', "shown" },
		{ "dest/merged/a", 'f', "a" },         /* merged across three trees */
		{ "dest/merged/b", 'f', "b" },
		{ "dest/merged/c", 'f', "c" },
		{ "dest/becomes-file", 'f', "now a file" },
		{ "dest/becomes-dir", 'd', NULL },
		{ "dest/becomes-dir/inner", 'f', "now a dir" },
		{ "dest/added", '-', NULL },           /* a later layer's whiteout */
		{ "dest/never-there", '-', NULL },     /* a whiteout of nothing is nothing */
		{ "dest/out", 'l', NULL },
		{ "dest/fifo", 'p', NULL },
		{ "dest/h1", 'f', "linked" },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		ck_assert_msg(type_of(want[i].path) == want[i].type, "%s: type %c, want %c", want[i].path,
		              type_of(want[i].path), want[i].type);
		if (want[i].text)
			ck_assert_str_eq(get(want[i].path), want[i].text);
	}
	/* The link out of the tree is a link, its target as it was. */
	char target[64] = { 0 };
	ck_assert_int_eq(readlink(at("dest/out"), target, sizeof(target) - 1), (ssize_t) strlen("/etc/passwd"));
	ck_assert_str_eq(target, "/etc/passwd");
	/* Hard links stay hard links. */
	struct stat a, b;
	ck_assert_int_eq(lstat(at("dest/h1"), &a), 0);
	ck_assert_int_eq(lstat(at("dest/h2"), &b), 0);
	ck_assert_int_eq(a.st_ino, b.st_ino);
}
END_TEST

/* A file with extended attributes is copied (not linked) without them, its
 * mode and times kept; its hard links point at the copy. */
START_TEST(test_xattr_file_copied)
{
	put("base/x1", "with an xattr");
	if (setxattr(at("base/x1"), "user.nsbox-test", "1", 1, 0) < 0) {
		printf("# SKIP no user extended attributes on %s: %s\n", dir, strerror(errno));
		return;
	}
	ck_assert_int_eq(link(at("base/x1"), at("base/x2")), 0);
	ck_assert_int_eq(chmod(at("base/x1"), 0640), 0);
	struct timespec t[2] = { { 1000000000, 5 }, { 1200000000, 7 } };
	ck_assert_int_eq(utimensat(AT_FDCWD, at("base/x1"), t, 0), 0);
	int base = dfd("base"), dest = dfd("dest");
	nsbox_error *err = NULL;
	ck_assert_int_eq(layers_flatten(base, NULL, 0, dest, false, &err), 0);
	close(base);
	close(dest);
	struct stat src, c1, c2;
	ck_assert_int_eq(lstat(at("base/x1"), &src), 0);
	ck_assert_int_eq(lstat(at("dest/x1"), &c1), 0);
	ck_assert_int_eq(lstat(at("dest/x2"), &c2), 0);
	ck_assert_int_ne(c1.st_ino, src.st_ino);
	ck_assert_int_eq(c1.st_ino, c2.st_ino);
	ck_assert_int_eq(c1.st_mode & 07777, 0640);
	ck_assert_int_eq(c1.st_mtim.tv_sec, 1200000000);
	ck_assert_int_eq(c1.st_mtim.tv_nsec, 7);
	ck_assert_str_eq(get("dest/x1"), "with an xattr");
	ck_assert_int_eq(listxattr(at("dest/x1"), NULL, 0), 0);
}
END_TEST

/* Deeper than the walk goes: refused, naming the path. */
START_TEST(test_too_deep)
{
	char rel[4096] = "base";
	for (int i = 0; i < 520; i++) {
		strcat(rel, "/d");
		ck_assert_int_eq(mkdir(at(rel), 0755), 0);
	}
	int base = dfd("base"), dest = dfd("dest");
	nsbox_error *err = NULL;
	ck_assert_int_lt(layers_flatten(base, NULL, 0, dest, false, &err), 0);
	ck_assert_ptr_nonnull(err);
	ck_assert_int_eq(nsbox_error_errno(err), ELOOP);
	ck_assert_str_eq(nsbox_error_step(err), "image");
	ck_assert_ptr_nonnull(strstr(nsbox_error_message(err), "walk below '/d/d/d"));
	nsbox_error_free(err);
	close(base);
	close(dest);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("build_layers");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_layers_applied);
	tcase_add_test(tc, test_xattr_file_copied);
	tcase_add_test(tc, test_too_deep);
	return unit_run("build_layers", tc);
}
