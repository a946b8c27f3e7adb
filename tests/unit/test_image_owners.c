/* image_owners.c's shift_tree on fabricated trees (root only: it chowns):
 * image id N becomes base + N, an id already in the range stays, one beyond
 * it becomes the range's nobody and is counted; links are not followed; in
 * `replace` mode a file a host user owned, or one hard-linked, gets a fresh
 * copy (same content, mode and times) and the old inode keeps its owner;
 * a mount inside is left alone; a tree nested past the limit is refused. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plan/idmap.h"
#include "image/image_owners.h"
#include "unit.h"

#define BASE 200000u

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

static void put(const char *rel, const char *text, uid_t u, gid_t g)
{
	int fd = open(at(rel), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t) strlen(text));
	close(fd);
	ck_assert_int_eq(lchown(at(rel), u, g), 0);
}

static struct stat st_of(const char *rel)
{
	struct stat st;
	ck_assert_int_eq(lstat(at(rel), &st), 0);
	return st;
}

static bool root_or_skip(const char *what)
{
	if (geteuid() == 0)
		return true;
	fprintf(stderr, "%s: skipped (needs root to chown)\n", what);
	return false;
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/nsbox-owners.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	(void) !system(cmd);
}

static int open_dir(const char *rel)
{
	int fd = open(at(rel), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	return fd;
}

START_TEST(test_shift_ids)
{
	if (!root_or_skip("test_shift_ids"))
		return;
	ck_assert_int_eq(mkdir(at("img"), 0755), 0);
	ck_assert_int_eq(mkdir(at("img/home"), 0755), 0);
	ck_assert_int_eq(lchown(at("img/home"), 1000, 1000), 0);
	put("img/home/mine", "m", 1000, 100);
	put("img/in-range", "r", BASE + 5, BASE + 6);          /* shifted already */
	put("img/beyond", "b", 4000000, 70000);                /* no image id */
	ck_assert_int_eq(symlink("/etc/shadow", at("img/link")), 0);
	ck_assert_int_eq(lchown(at("img/link"), 33, 33), 0);
	put("outside", "o", 0, 0);
	ck_assert_int_eq(symlink(at2("outside"), at("img/out")), 0);
	int fd = open_dir("img");
	unsigned long overflow = 0;
	ck_assert_int_eq(shift_tree(fd, BASE, BASE + 10, false, &overflow), 0);
	ck_assert_uint_eq(st_of("img").st_uid, BASE);   /* the root too */
	ck_assert_uint_eq(st_of("img").st_gid, BASE + 10);
	ck_assert_uint_eq(st_of("img/home").st_uid, BASE + 1000);
	ck_assert_uint_eq(st_of("img/home/mine").st_uid, BASE + 1000);
	ck_assert_uint_eq(st_of("img/home/mine").st_gid, BASE + 10 + 100);
	ck_assert_uint_eq(st_of("img/in-range").st_uid, BASE + 5);
	/* gid BASE+6 is below the gid range (BASE+10...): an id beyond the image's. */
	ck_assert_uint_eq(st_of("img/in-range").st_gid, BASE + 10 + 65534);
	ck_assert_uint_eq(st_of("img/beyond").st_uid, BASE + 65534);
	ck_assert_uint_eq(st_of("img/beyond").st_gid, BASE + 10 + 65534);
	ck_assert_uint_eq(overflow, 3);
	ck_assert_uint_eq(st_of("img/link").st_uid, BASE + 33);   /* the link itself */
	ck_assert_uint_eq(st_of("outside").st_uid, 0);            /* not its target */
	ck_assert(image_owners_shifted(&(struct stat){ .st_uid = BASE, .st_gid = BASE + 10 }, BASE, BASE + 10));
	struct stat img = st_of("img");
	ck_assert(image_owners_shifted(&img, BASE, BASE + 10));
	ck_assert(!image_owners_shifted(&img, BASE + 70000, BASE + 10));
	ck_assert(!image_owners_shifted(&img, BASE, BASE + 70000));
	ck_assert(!image_owners_shifted(&(struct stat){ .st_uid = 0, .st_gid = 0 }, BASE, BASE));
	/* Again: nothing changes, nothing more is counted as new. */
	overflow = 0;
	ck_assert_int_eq(shift_tree(fd, BASE, BASE + 10, false, &overflow), 0);
	ck_assert_uint_eq(st_of("img/home/mine").st_uid, BASE + 1000);
	ck_assert_uint_eq(overflow, 0);
	close(fd);
}
END_TEST

/* Converting a published store: host uid 1000 may hold its file open for
 * writing, or have hard-linked a host file in. */
START_TEST(test_shift_replace)
{
	if (!root_or_skip("test_shift_replace"))
		return;
	ck_assert_int_eq(mkdir(at("img"), 0755), 0);
	put("img/users", "user data\n", 1000, 1000);
	ck_assert_int_eq(chmod(at("img/users"), 0604), 0);
	struct timespec old[2] = { { .tv_sec = 1000000000 }, { .tv_sec = 1000000000 } };
	ck_assert_int_eq(utimensat(AT_FDCWD, at("img/users"), old, 0), 0);
	put("hostfile", "host secret\n", 0, 0);
	ck_assert_int_eq(link(at2("hostfile"), at("img/linked")), 0);
	put("img/roots", "root's\n", 0, 0);
	/* The writer's descriptor, opened while uid 1000 owned the file. */
	int writer = open(at("img/users"), O_WRONLY | O_APPEND | O_CLOEXEC);
	ck_assert_int_ge(writer, 0);
	struct stat before = st_of("img/users"), roots = st_of("img/roots");
	int fd = open_dir("img");
	unsigned long overflow = 0;
	ck_assert_int_eq(shift_tree(fd, BASE, BASE, true, &overflow), 0);
	struct stat after = st_of("img/users");
	ck_assert_uint_ne(after.st_ino, before.st_ino);   /* a fresh copy */
	ck_assert_uint_eq(after.st_uid, BASE + 1000);
	ck_assert_uint_eq(after.st_mode & 07777, 0604);
	ck_assert_int_eq(after.st_mtim.tv_sec, 1000000000);
	char buf[64] = "";
	int r = open(at("img/users"), O_RDONLY | O_CLOEXEC);
	ck_assert_int_eq(read(r, buf, sizeof(buf) - 1), 10);
	close(r);
	ck_assert_str_eq(buf, "user data\n");
	/* What the old writer writes now goes nowhere near the image. */
	ck_assert_int_eq(write(writer, "evil\n", 5), 5);
	close(writer);
	ck_assert_uint_eq(st_of("img/users").st_size, 10);
	/* The hard link: the image gets a copy, the host file keeps root. */
	ck_assert_uint_eq(st_of("img/linked").st_uid, BASE);
	ck_assert_uint_eq(st_of("img/linked").st_nlink, 1);
	ck_assert_uint_eq(st_of("hostfile").st_uid, 0);
	/* Root's own file with one link: chowned in place. */
	ck_assert_uint_eq(st_of("img/roots").st_ino, roots.st_ino);
	ck_assert_uint_eq(st_of("img/roots").st_uid, BASE);
	/* No temporary copy is left. */
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "ls -a '%s/img' | grep -q nsbox-shift", dir);
	ck_assert_int_ne(system(cmd), 0);
	close(fd);
}
END_TEST

/* A mount inside is not the image's (left alone); too deep is refused. */
START_TEST(test_shift_limits)
{
	if (!root_or_skip("test_shift_limits"))
		return;
	ck_assert_int_eq(mkdir(at("img"), 0755), 0);
	ck_assert_int_eq(mkdir(at("img/proc"), 0755), 0);
	if (unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0) {
		ck_assert_int_eq(mount("tmpfs", at("img/proc"), "tmpfs", 0, "size=64k"), 0);
		put("img/proc/host", "h", 7, 7);
		int fd = open_dir("img");
		unsigned long overflow = 0;
		ck_assert_int_eq(shift_tree(fd, BASE, BASE, false, &overflow), 0);
		ck_assert_uint_eq(st_of("img/proc/host").st_uid, 7);
		ck_assert_uint_eq(st_of("img").st_uid, BASE);
		close(fd);
		ck_assert_int_eq(umount(at("img/proc")), 0);
	}
	ck_assert_int_eq(mkdir(at("deep"), 0755), 0);
	int top = open_dir("deep");
	int fd = dup(top);
	for (int i = 0; i < 514; i++) {
		ck_assert_int_eq(mkdirat(fd, "d", 0755), 0);
		int sub = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		close(fd);
		fd = sub;
	}
	close(fd);
	unsigned long overflow = 0;
	ck_assert_int_eq(shift_tree(top, BASE, BASE, false, &overflow), -ELOOP);
	ck_assert_uint_eq(st_of("deep").st_uid, 0);   /* the root last: not reached */
	close(top);
}
END_TEST

/* A name the replace pass needs for its copy is taken by a directory (an
 * interrupted pass cannot leave one; a hostile owner could): the pass stops
 * with -EEXIST and the file keeps its owner and content, never chowned in
 * place. */
START_TEST(test_shift_replace_name_taken)
{
	if (!root_or_skip("test_shift_replace_name_taken"))
		return;
	ck_assert_int_eq(mkdir(at("img"), 0755), 0);
	put("img/f", "payload", 1000, 1000);
	char tmp[80];
	snprintf(tmp, sizeof(tmp), "img/.nsbox-shift-%d", (int) getpid());
	ck_assert_int_eq(mkdir(at(tmp), 0755), 0);
	int fd = open_dir("img");
	unsigned long overflow = 0;
	ck_assert_int_eq(shift_tree(fd, BASE, BASE, true, &overflow), -EEXIST);
	close(fd);
	struct stat st = st_of("img/f");
	ck_assert_uint_eq(st.st_uid, 1000);
	ck_assert_uint_eq(st.st_size, 7);
	ck_assert(S_ISDIR(st_of(tmp).st_mode));
	ck_assert_uint_eq(st_of("img").st_uid, 0);   /* the root last: not reached */
}
END_TEST

/* A directory that cannot be chowned (a read-only mount) stops the walk
 * before anything in it is touched, and the image root stays unshifted. */
START_TEST(test_shift_read_only)
{
	if (!root_or_skip("test_shift_read_only"))
		return;
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		fprintf(stderr, "test_shift_read_only: skipped (no mount namespace)\n");
		return;
	}
	ck_assert_int_eq(mkdir(at("img"), 0755), 0);
	ck_assert_int_eq(mount("tmpfs", at("img"), "tmpfs", 0, "size=64k,mode=0755"), 0);
	ck_assert_int_eq(mkdir(at("img/d"), 0755), 0);
	ck_assert_int_eq(lchown(at("img/d"), 1000, 1000), 0);
	put("img/d/f", "x", 1000, 1000);
	ck_assert_int_eq(mount(NULL, at("img"), NULL, MS_REMOUNT | MS_RDONLY, NULL), 0);
	int fd = open_dir("img");
	unsigned long overflow = 0;
	ck_assert_int_eq(shift_tree(fd, BASE, BASE, false, &overflow), -EROFS);
	close(fd);
	ck_assert_uint_eq(st_of("img/d").st_uid, 1000);
	ck_assert_uint_eq(st_of("img/d/f").st_uid, 1000);
	ck_assert_uint_eq(st_of("img").st_uid, 0);
	ck_assert_int_eq(umount(at("img")), 0);
}
END_TEST

START_TEST(test_shift_bad_fd)
{
	unsigned long overflow = 0;
	ck_assert_int_eq(shift_tree(-1, BASE, BASE, false, &overflow), -EBADF);
	ck_assert_uint_eq(overflow, 0);
	/* The store's wrapper says which image and which step. */
	root_ids ri;
	ck_assert_int_eq(idmap_root_ids("/etc/subuid", "/etc/subgid", &ri, NULL), 0);
	if (ri.conflict_file) {
		fprintf(stderr, "test_shift_bad_fd: wrapper part skipped (range conflict in %s)\n", ri.conflict_file);
		return;
	}
	nsbox_error *e = NULL;
	ck_assert_int_eq(image_shift_owners(-1, false, "image 'x'", &e), -EBADF);
	ck_assert_int_eq(nsbox_error_errno(e), EBADF);
	ck_assert_str_eq(nsbox_error_step(e), "image");
	ck_assert_ptr_nonnull(strstr(nsbox_error_message(e), "image 'x': shift the owners into root's sandbox range"));
	nsbox_error_free(e);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("image_owners");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_shift_ids);
	tcase_add_test(tc, test_shift_replace);
	tcase_add_test(tc, test_shift_limits);
	tcase_add_test(tc, test_shift_replace_name_taken);
	tcase_add_test(tc, test_shift_read_only);
	tcase_add_test(tc, test_shift_bad_fd);
	return unit_run("image_owners", tc);
}
