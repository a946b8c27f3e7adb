/* image_strip.c on a fabricated tree like debootstrap's output: set-id
 * bits, file capabilities and device nodes go, nothing is followed out of
 * the tree, and remove_beneath removes a link, never what it points to. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "image/image_strip.h"
#include "unit.h"

static char dir[] = "/tmp/nsbox-strip.XXXXXX";
static char path[4096];

static const char *at(const char *rel)
{
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	return path;
}

static void touch(const char *rel, mode_t mode)
{
	int fd = open(at(rel), O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "x", 1), 1);
	close(fd);
	ck_assert_int_eq(chmod(at(rel), mode), 0);
}

/* A second buffer, for the target of a symlink made with at(). */
static const char *at2(const char *rel)
{
	static char p2[4096];
	snprintf(p2, sizeof(p2), "%s/%s", dir, rel);
	return p2;
}

static mode_t mode_of(const char *rel)
{
	struct stat st;
	ck_assert_int_eq(lstat(at(rel), &st), 0);
	return st.st_mode & 07777;
}

START_TEST(test_strip_tree)
{
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(mkdir(at("root"), 0755), 0);
	ck_assert_int_eq(mkdir(at("root/usr"), 0755), 0);
	ck_assert_int_eq(mkdir(at("root/dev"), 0755), 0);
	ck_assert_int_eq(mkdir(at("root/staff"), 02775), 0);
	ck_assert_int_eq(chmod(at("root/staff"), 02775), 0);
	touch("root/usr/passwd", 04755);
	touch("root/usr/wall", 02755);
	touch("root/usr/plain", 0755);
	touch("outside", 04755);   /* a host file the tree links to */
	ck_assert_int_eq(symlink(at2("outside"), at("root/usr/link")), 0);
	unsigned long want_caps = 0, want_devs = 0;
	if (geteuid() == 0) {
		static const unsigned char cap[20] = { 1, 0, 0, 2, 0, 0x20 };
		touch("root/usr/ping", 0755);
		ck_assert_int_eq(setxattr(at("root/usr/ping"), "security.capability", cap, sizeof(cap), 0), 0);
		ck_assert_int_eq(mknod(at("root/dev/null"), S_IFCHR | 0666, makedev(1, 3)), 0);
		want_caps = want_devs = 1;
	}
	int fd = open(at("root"), O_RDONLY | O_DIRECTORY);
	image_stripped s = { 0 };
	ck_assert_int_eq(strip_tree(fd, &s), 0);
	ck_assert_uint_eq(s.setid, 2);
	ck_assert_uint_eq(s.caps, want_caps);
	ck_assert_uint_eq(s.devices, want_devs);
	ck_assert_uint_eq(mode_of("root/usr/passwd"), 0755);
	ck_assert_uint_eq(mode_of("root/usr/wall"), 0755);
	ck_assert_uint_eq(mode_of("root/usr/plain"), 0755);
	ck_assert_uint_eq(mode_of("root/staff"), 02755);   /* setgid directory kept, group write not */
	ck_assert_uint_eq(mode_of("outside"), 04755);      /* the link was not followed */
	ck_assert_int_eq(access(at("root/dev/null"), F_OK), -1);
	if (geteuid() == 0)
		ck_assert_int_lt(getxattr(at("root/usr/ping"), "security.capability", NULL, 0), 0);

	/* remove_beneath: a symlink to a directory goes, its target stays */
	ck_assert_int_eq(mkdir(at("victim"), 0755), 0);
	touch("victim/file", 0644);
	ck_assert_int_eq(symlink(at2("victim"), at("root/evil")), 0);
	ck_assert_int_eq(remove_beneath(fd, "evil"), 0);
	ck_assert_int_eq(access(at("victim/file"), F_OK), 0);
	ck_assert_int_eq(remove_beneath(fd, ".."), -EINVAL);
	ck_assert_int_eq(remove_beneath(fd, "usr"), 0);
	ck_assert_int_eq(access(at("root/usr"), F_OK), -1);
	ck_assert_int_eq(access(at("outside"), F_OK), 0);
	/* open_beneath refuses a symlink on the way, and the way out */
	ck_assert_int_eq(symlink(at2("victim"), at("root/evil")), 0);
	ck_assert_int_eq(open_beneath(fd, "evil/file", O_RDONLY, BENEATH_NO_XDEV), -ELOOP);
	ck_assert_int_eq(open_beneath(fd, "../victim/file", O_RDONLY, BENEATH_NO_XDEV), -EXDEV);
	close(fd);
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("image_strip");
	tcase_add_test(tc, test_strip_tree);
	return unit_run("image_strip", tc);
}
