/* The image store's small parts on real directories: which store a user
 * gets (XDG_DATA_HOME, HOME, neither), image names, strip_tree's limits (a
 * mount inside left alone, a tree too deep refused, a file its owner may
 * not read stripped all the same, group-writable directories closed), and
 * image_reap (a killed maker's directory goes, a live or locked one stays,
 * names that are not a maker's are left, a killed rebuild's previous image
 * goes back unless a newer one took its place). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "image/images.h"
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

static mode_t mode_of(const char *rel)
{
	struct stat st;
	ck_assert_int_eq(lstat(at(rel), &st), 0);
	return st.st_mode & 07777;
}

static void touch(const char *rel, mode_t mode)
{
	int fd = open(at(rel), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(chmod(at(rel), mode), 0);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/nsbox-store.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(chmod(dir, 0755), 0);
}

static void teardown(void)
{
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	(void) !system(cmd);
}

/* A pid that is surely gone: a child that exited and was reaped. */
static pid_t dead_pid(void)
{
	pid_t p = fork();
	if (p == 0)
		_exit(0);
	ck_assert_int_gt(p, 0);
	ck_assert_int_eq(waitpid(p, NULL, 0), p);
	return p;
}

/* Run fn as nobody in a child (the fixture's teardown stays root's):
 * fn's return value is the child's status, 0 when all held. */
static int as_nobody(int (*fn)(void))
{
	pid_t p = fork();
	if (p == 0)
		_exit(setgid(65534) == 0 && setuid(65534) == 0 ? fn() : 99);
	int st = -1;
	ck_assert_int_eq(waitpid(p, &st, 0), p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int same(char *got, const char *want)
{
	int ok = got && want ? !strcmp(got, want) : got == want;
	free(got);
	return ok;
}

static int user_stores(void)
{
	char *s = image_store(true);
	if (!same(s, NSBOX_SYSTEM_STORE))
		return 1;
	setenv("XDG_DATA_HOME", "/data", 1);
	setenv("HOME", "/home/u", 1);
	if (!same(image_store(false), "/data/nsbox/images"))
		return 2;
	setenv("XDG_DATA_HOME", "relative", 1);   /* not absolute: ignored, as the spec says */
	if (!same(image_store(false), "/home/u/.local/share/nsbox/images"))
		return 3;
	unsetenv("XDG_DATA_HOME");
	setenv("HOME", "rel", 1);
	if (!same(image_store(false), NULL))   /* no store rather than one relative to the cwd */
		return 4;
	unsetenv("HOME");
	if (!same(image_store(false), NULL))
		return 5;
	return 0;
}

START_TEST(test_store_of_user)
{
	if (geteuid() != 0) {
		ck_assert_int_eq(user_stores(), 0);
		return;
	}
	char *s = image_store(false);
	ck_assert_str_eq(s, NSBOX_SYSTEM_STORE);   /* root's own is the system's */
	free(s);
	ck_assert_int_eq(as_nobody(user_stores), 0);
}
END_TEST

START_TEST(test_names)
{
	ck_assert(image_name_valid("default"));
	ck_assert(image_name_valid("py3.12_slim-x"));
	ck_assert(!image_name_valid(NULL));
	ck_assert(!image_name_valid(""));
	ck_assert(!image_name_valid(".hidden"));
	ck_assert(!image_name_valid("-opt"));
	ck_assert(!image_name_valid("a/b"));
	ck_assert(!image_name_valid("a b"));
	char longname[130];
	memset(longname, 'a', sizeof(longname) - 1);
	longname[129] = '\0';
	ck_assert(!image_name_valid(longname));
	longname[128] = '\0';
	ck_assert(image_name_valid(longname));
}
END_TEST

START_TEST(test_strip_limits)
{
	ck_assert_int_eq(mkdir(at("root"), 0755), 0);
	ck_assert_int_eq(mkdir(at("root/shared"), 0777), 0);
	ck_assert_int_eq(chmod(at("root/shared"), 0777), 0);
	touch("root/shared/gw", 0664);
	int fd = open(at("root"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	image_stripped s = { 0 };
	ck_assert_int_eq(strip_tree(fd, &s), 0);
	ck_assert_uint_eq(mode_of("root/shared"), 0755);   /* nobody else may add to it */
	ck_assert_uint_eq(mode_of("root/shared/gw"), 0644);
	ck_assert_uint_eq(s.setid, 0);
	close(fd);
	/* Too deep: refused, not walked by recursion without end. */
	ck_assert_int_eq(mkdir(at("deep"), 0755), 0);
	int top = open(at("deep"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int cur = dup(top);
	for (int i = 0; i < 514; i++) {
		ck_assert_int_eq(mkdirat(cur, "d", 0755), 0);
		int sub = openat(cur, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		close(cur);
		cur = sub;
	}
	close(cur);
	ck_assert_int_eq(strip_tree(top, &s), -ELOOP);
	close(top);
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_eq(strip_tree(null, &s), -ENOTDIR);
	close(null);
}
END_TEST

/* root: a mount left inside (a build's /proc) is not the image's. */
START_TEST(test_strip_mount_inside)
{
	if (geteuid() != 0 || unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		fprintf(stderr, "test_strip_mount_inside: skipped (needs root to mount)\n");
		return;
	}
	ck_assert_int_eq(mkdir(at("root"), 0755), 0);
	ck_assert_int_eq(mkdir(at("root/proc"), 0755), 0);
	ck_assert_int_eq(mount("tmpfs", at("root/proc"), "tmpfs", 0, "size=64k"), 0);
	touch("root/proc/suid", 04755);
	ck_assert_int_eq(mknod(at("root/proc/null"), S_IFCHR | 0666, makedev(1, 3)), 0);
	touch("root/suid", 04755);
	int fd = open(at("root"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	image_stripped s = { 0 };
	ck_assert_int_eq(strip_tree(fd, &s), 0);
	close(fd);
	ck_assert_uint_eq(s.setid, 1);
	ck_assert_uint_eq(mode_of("root/suid"), 0755);
	ck_assert_uint_eq(mode_of("root/proc/suid"), 04755);   /* not entered */
	ck_assert(exists("root/proc/null"));
	ck_assert_int_eq(umount(at("root/proc")), 0);
}
END_TEST

/* A user's import of a setuid file its owner may not read: stripped
 * through its name (an unreadable file carries no capability). */
static int strip_as_owner(void)
{
	int fd = open(at("root"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	image_stripped s = { 0 };
	if (fd < 0 || strip_tree(fd, &s) != 0)
		return 1;
	close(fd);
	return s.setid == 1 ? 0 : 2;
}

START_TEST(test_strip_unreadable)
{
	if (geteuid() != 0) {
		fprintf(stderr, "test_strip_unreadable: skipped (needs root to become another user)\n");
		return;
	}
	ck_assert_int_eq(mkdir(at("root"), 0755), 0);
	touch("root/wx", 0311);
	ck_assert_int_eq(chown(at("root"), 65534, 65534), 0);
	ck_assert_int_eq(chown(at("root/wx"), 65534, 65534), 0);
	ck_assert_int_eq(chmod(at("root/wx"), 04311), 0);   /* after chown, which clears it */
	ck_assert_int_eq(as_nobody(strip_as_owner), 0);
	ck_assert_uint_eq(mode_of("root/wx"), 0311);
}
END_TEST

START_TEST(test_reap)
{
	char n[200];
	pid_t dead = dead_pid();
	ck_assert_int_eq(mkdir(at("store"), 0755), 0);
	/* A killed import's directory, with content: gone. */
	snprintf(n, sizeof(n), "store/.import-a-%d", (int) dead);
	ck_assert_int_eq(mkdir(at(n), 0755), 0);
	snprintf(n, sizeof(n), "store/.import-a-%d/f", (int) dead);
	touch(n, 0644);
	/* A live maker's (our own pid): stays. Names that are no maker's
	 * (no pid, pid 0, trailing junk), and a file: stay. */
	snprintf(n, sizeof(n), "store/.build-b-%d", (int) getpid());
	ck_assert_int_eq(mkdir(at(n), 0755), 0);
	ck_assert_int_eq(mkdir(at("store/.import-c-abc"), 0755), 0);
	ck_assert_int_eq(mkdir(at("store/.import-c-0"), 0755), 0);
	snprintf(n, sizeof(n), "store/.import-c-%dx", (int) dead);
	ck_assert_int_eq(mkdir(at(n), 0755), 0);
	snprintf(n, sizeof(n), "store/.build-file-%d", (int) dead);
	touch(n, 0644);
	ck_assert_int_eq(mkdir(at("store/keep"), 0755), 0);
	/* A killed rebuild's previous image: back in place... */
	snprintf(n, sizeof(n), "store/.old-back-%d", (int) dead);
	ck_assert_int_eq(mkdir(at(n), 0755), 0);
	/* ...unless a newer one is there: then it goes. */
	ck_assert_int_eq(mkdir(at("store/newer"), 0755), 0);
	touch("store/newer/mark", 0644);
	snprintf(n, sizeof(n), "store/.old-newer-%d", (int) dead);
	ck_assert_int_eq(mkdir(at(n), 0755), 0);
	/* A killed maker's directory still locked (its lock passed on): stays. */
	snprintf(n, sizeof(n), "store/.import-held-%d", (int) dead);
	ck_assert_int_eq(mkdir(at(n), 0755), 0);
	int lock = image_tmp_lock(at(n));
	ck_assert_int_ge(lock, 0);
	ck_assert_int_eq(image_tmp_lock(at(n)), -EWOULDBLOCK);   /* one maker at a time */

	image_reap(at("store"));

	snprintf(n, sizeof(n), "store/.import-a-%d", (int) dead);
	ck_assert(!exists(n));
	snprintf(n, sizeof(n), "store/.build-b-%d", (int) getpid());
	ck_assert(exists(n));
	ck_assert(exists("store/.import-c-abc"));
	ck_assert(exists("store/.import-c-0"));
	snprintf(n, sizeof(n), "store/.import-c-%dx", (int) dead);
	ck_assert(exists(n));
	snprintf(n, sizeof(n), "store/.build-file-%d", (int) dead);
	ck_assert(exists(n));
	ck_assert(exists("store/keep"));
	ck_assert(exists("store/back"));
	snprintf(n, sizeof(n), "store/.old-back-%d", (int) dead);
	ck_assert(!exists(n));
	ck_assert(exists("store/newer/mark"));
	snprintf(n, sizeof(n), "store/.old-newer-%d", (int) dead);
	ck_assert(!exists(n));
	snprintf(n, sizeof(n), "store/.import-held-%d", (int) dead);
	ck_assert(exists(n));
	close(lock);
	/* No store, or a file for one: nothing happens. */
	image_reap(at("none"));
	snprintf(n, sizeof(n), "store/.build-file-%d", (int) dead);
	image_reap(at(n));
	ck_assert_int_eq(image_tmp_lock(at("none")), -ENOENT);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("image_store");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_store_of_user);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_strip_limits);
	tcase_add_test(tc, test_strip_mount_inside);
	tcase_add_test(tc, test_strip_unreadable);
	tcase_add_test(tc, test_reap);
	return unit_run("image_store", tc);
}
