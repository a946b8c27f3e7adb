/* fsutil.c: mkdir_p, and rm -rf of hostile trees (remove_tree,
 * remove_beneath) on real directories: files, links that must not be
 * followed, mode-000 directories, a tree deeper than the walk's first stack,
 * and a mount left inside, which stops the walk with -EXDEV (never entered,
 * never removed). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsutil.h"
#include "unit.h"

static char dir[64];
static char path[4096];

static const char *at(const char *rel)
{
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	return path;
}

/* A second buffer, for the other path of a link made with at(). */
static const char *at2(const char *rel)
{
	static char p2[4096];
	snprintf(p2, sizeof(p2), "%s/%s", dir, rel);
	return p2;
}

static void touch(const char *rel)
{
	int fd = open(at(rel), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
}

static bool exists(const char *rel)
{
	struct stat st;
	return lstat(at(rel), &st) == 0;
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/nsbox-fsutil.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	(void) !system(cmd);
}

START_TEST(test_mkdir_p)
{
	ck_assert_int_eq(mkdir_p(at("a/b/c"), 0750), 0);
	struct stat st;
	ck_assert_int_eq(stat(at("a/b/c"), &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_int_eq(mkdir_p(at("a/b/c"), 0750), 0);   /* there already: fine */
	ck_assert_int_eq(mkdir_p(at("a/b/c/"), 0750), 0);
	/* A file on the way, or as the last component. */
	touch("a/file");
	ck_assert_int_eq(mkdir_p(at("a/file/x/y"), 0755), -ENOTDIR);
	ck_assert_int_eq(mkdir_p(at("a/file/x"), 0755), -ENOTDIR);
	ck_assert(!exists("a/file/x"));
}
END_TEST

START_TEST(test_remove_tree)
{
	/* Absent: nothing to do. */
	ck_assert_int_eq(remove_tree(at("none")), 0);
	/* A file, and a link to a directory: removed themselves only. */
	ck_assert_int_eq(mkdir(at("keep"), 0755), 0);
	touch("keep/f");
	touch("file");
	ck_assert_int_eq(remove_tree(at("file")), 0);
	ck_assert(!exists("file"));
	ck_assert_int_eq(symlink(at2("keep"), at("link")), 0);
	ck_assert_int_eq(remove_tree(at("link")), 0);
	ck_assert(!exists("link"));
	ck_assert(exists("keep/f"));
	/* A tree with a mode-000 directory holding files and links out. */
	ck_assert_int_eq(mkdir_p(at("t/a/locked/deeper"), 0755), 0);
	touch("t/a/locked/deeper/f");
	touch("t/a/x");
	char target[4096];
	snprintf(target, sizeof(target), "%s/keep", dir);
	ck_assert_int_eq(symlink(target, at("t/a/locked/out")), 0);
	ck_assert_int_eq(chmod(at("t/a/locked"), 0), 0);
	ck_assert_int_eq(remove_tree(at("t")), 0);
	ck_assert(!exists("t"));
	ck_assert(exists("keep/f"));
}
END_TEST

/* Deeper than the walk's first stack (64 levels), beyond PATH_MAX as a
 * path: it goes all the same, one name at a time. */
START_TEST(test_remove_deep)
{
	ck_assert_int_eq(mkdir(at("deep"), 0755), 0);
	int fd = open(at("deep"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	char name[200];
	memset(name, 'd', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	for (int i = 0; i < 150; i++) {
		ck_assert_int_eq(mkdirat(fd, name, 0755), 0);
		int sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		ck_assert_int_ge(sub, 0);
		close(fd);
		fd = sub;
	}
	int f = openat(fd, "leaf", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ck_assert_int_ge(f, 0);
	close(f);
	close(fd);
	int top = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_eq(remove_beneath(top, "deep"), 0);
	ck_assert(!exists("deep"));
	close(top);
}
END_TEST

START_TEST(test_remove_beneath_names)
{
	int top = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_eq(remove_beneath(top, NULL), -EINVAL);
	ck_assert_int_eq(remove_beneath(top, ""), -EINVAL);
	ck_assert_int_eq(remove_beneath(top, "."), -EINVAL);
	ck_assert_int_eq(remove_beneath(top, "a/b"), -EINVAL);
	ck_assert_int_eq(remove_beneath(top, "none"), 0);
	touch("f");
	ck_assert_int_eq(remove_beneath(top, "f"), 0);
	ck_assert(!exists("f"));
	/* Not a directory fd: said, nothing removed. */
	touch("g");
	int g = open(at("g"), O_RDONLY | O_CLOEXEC);
	ck_assert_int_eq(remove_beneath(g, "x"), -ENOTDIR);
	close(g);
	close(top);
}
END_TEST

/* A mount left inside (a failed build's /proc): never entered. */
START_TEST(test_remove_stops_at_mount)
{
	if (geteuid() != 0 || unshare(CLONE_NEWNS) < 0) {
		fprintf(stderr, "test_remove_stops_at_mount: skipped (needs root to mount)\n");
		return;
	}
	/* Our own mount namespace (this test runs in a forked child). */
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	ck_assert_int_eq(mkdir_p(at("t/mnt"), 0755), 0);
	ck_assert_int_eq(mkdir_p(at("m"), 0755), 0);
	ck_assert_int_eq(mount("tmpfs", at("t/mnt"), "tmpfs", 0, "size=64k"), 0);
	touch("t/mnt/precious");
	ck_assert_int_eq(mount("tmpfs", at("m"), "tmpfs", 0, "size=64k"), 0);
	touch("m/precious");
	ck_assert_int_eq(remove_tree(at("t")), -EXDEV);
	ck_assert(exists("t/mnt/precious"));
	int top = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_eq(remove_beneath(top, "m"), -EXDEV);
	ck_assert(exists("m/precious"));
	ck_assert_int_eq(remove_beneath(top, "t"), -EXDEV);
	close(top);
	ck_assert_int_eq(umount(at("t/mnt")), 0);
	ck_assert_int_eq(umount(at("m")), 0);
	ck_assert_int_eq(remove_tree(at("t")), 0);
	ck_assert(!exists("t"));
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("fsutil");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_mkdir_p);
	tcase_add_test(tc, test_remove_tree);
	tcase_add_test(tc, test_remove_deep);
	tcase_add_test(tc, test_remove_beneath_names);
	tcase_add_test(tc, test_remove_stops_at_mount);
	return unit_run("fsutil", tc);
}
