/* Failures in the middle of a tree walk, made real with immutable inodes
 * (FS_IMMUTABLE_FL: even root may not change, chown, chmod, unlink or
 * rename over them): remove_tree, shift_tree and strip_tree stop with the
 * kernel's error instead of claiming success, and leave no temporary copy
 * behind. Root on a file system with inode flags (ext4 /tmp); skipped,
 * saying so, elsewhere. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "image/image_owners.h"
#include "image/image_strip.h"
#include "unit.h"

static char dir[64];
static char path[4096];

static const char *at(const char *rel)
{
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	return path;
}

static bool exists(const char *rel)
{
	struct stat st;
	return lstat(at(rel), &st) == 0;
}

static void touch(const char *rel, mode_t mode)
{
	int fd = open(at(rel), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "x", 1), 1);
	close(fd);
	ck_assert_int_eq(chmod(at(rel), mode), 0);
}

/* Set or clear the immutable flag; false when the file system has none. */
static bool immutable(const char *rel, bool on)
{
	int fd = open(at(rel), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return false;
	int flags = 0;
	bool ok = ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
	flags = on ? flags | FS_IMMUTABLE_FL : flags & ~FS_IMMUTABLE_FL;
	ok = ok && ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
	close(fd);
	return ok;
}

static const char *const marked[] = { "t/a/pinned", "t/a", "img/users", "img2/grp", "img2/suid", "m" };

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/nsbox-immutable.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	for (size_t i = 0; i < sizeof(marked) / sizeof(marked[0]); i++)
		if (exists(marked[i]))
			(void) immutable(marked[i], false);
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	(void) !system(cmd);
}

static bool usable(const char *test)
{
	if (geteuid() == 0) {
		touch("m", 0644);
		bool ok = immutable("m", true);
		(void) immutable("m", false);
		if (ok)
			return true;
	}
	fprintf(stderr, "%s: skipped (needs root and inode flags on /tmp)\n", test);
	return false;
}

START_TEST(test_remove_stops)
{
	if (!usable("test_remove_stops"))
		return;
	ck_assert_int_eq(mkdir_p(at("t/a/b"), 0755), 0);
	touch("t/a/b/f", 0644);
	touch("t/a/pinned", 0644);
	ck_assert(immutable("t/a/pinned", true));
	ck_assert_int_eq(remove_tree(at("t")), -EPERM);
	ck_assert(exists("t/a/pinned"));
	ck_assert(immutable("t/a/pinned", false));
	/* A directory that cannot lose its entries. */
	ck_assert_int_eq(mkdir_p(at("t/a/c"), 0755), 0);
	ck_assert(immutable("t/a", true));
	ck_assert_int_eq(remove_tree(at("t")), -EPERM);
	ck_assert(exists("t/a"));
	ck_assert(immutable("t/a", false));
	ck_assert_int_eq(remove_tree(at("t")), 0);
	ck_assert(!exists("t"));
}
END_TEST

START_TEST(test_shift_stops)
{
	if (!usable("test_shift_stops"))
		return;
	ck_assert_int_eq(mkdir(at("img"), 0755), 0);
	touch("img/users", 0644);
	ck_assert_int_eq(chown(at("img/users"), 1000, 1000), 0);
	ck_assert(immutable("img/users", true));
	int fd = open(at("img"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	unsigned long overflow = 0;
	/* In place: the chown fails. Replacing: the copy's rename over it
	 * fails, and the copy goes. */
	ck_assert_int_eq(shift_tree(fd, 300000, 300000, false, &overflow), -EPERM);
	ck_assert_int_eq(shift_tree(fd, 300000, 300000, true, &overflow), -EPERM);
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "ls -a '%s/img' | grep -q nsbox-shift", dir);
	ck_assert_int_ne(system(cmd), 0);
	struct stat st;
	ck_assert_int_eq(stat(at("img/users"), &st), 0);
	ck_assert_uint_eq(st.st_uid, 1000);
	struct stat root;
	ck_assert_int_eq(fstat(fd, &root), 0);
	ck_assert_uint_eq(root.st_uid, 0);   /* the root last: not reached */
	close(fd);
}
END_TEST

START_TEST(test_strip_stops)
{
	if (!usable("test_strip_stops"))
		return;
	ck_assert_int_eq(mkdir(at("img2"), 0755), 0);
	touch("img2/suid", 04755);
	ck_assert(immutable("img2/suid", true));
	int fd = open(at("img2"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	image_stripped s = { 0 };
	ck_assert_int_eq(strip_tree(fd, &s), -EPERM);   /* never "done" with a setuid file left */
	ck_assert(immutable("img2/suid", false));
	ck_assert_int_eq(unlink(at("img2/suid")), 0);
	/* A group-writable directory that cannot be closed. */
	ck_assert_int_eq(mkdir(at("img2/grp"), 0775), 0);
	ck_assert_int_eq(chmod(at("img2/grp"), 0775), 0);
	ck_assert(immutable("img2/grp", true));
	ck_assert_int_eq(strip_tree(fd, &s), -EPERM);
	close(fd);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("immutable");
	/* Once, in this process: the immutable flags are cleared and the tree
	 * removed even when a test fails (a forked test's teardown would not
	 * run then). */
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_remove_stops);
	tcase_add_test(tc, test_shift_stops);
	tcase_add_test(tc, test_strip_stops);
	return unit_run("immutable", tc);
}
