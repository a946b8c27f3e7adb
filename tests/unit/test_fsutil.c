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
#include <sys/wait.h>
#include <unistd.h>

#include "base/fsutil.h"
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

START_TEST(test_bad_fd)
{
	ck_assert_int_eq(empty_dir_at(-1), -EBADF);
	ck_assert_int_eq(remove_beneath(-1, "x"), -EBADF);
}
END_TEST

/* What the walk does where it may not go: run in a child that keeps uid 0
 * but drops every capability, so a directory of another owner with mode 000
 * is closed to it (and can't be opened up), as for an unprivileged user
 * removing a tree holding someone else's directory. Results come back over
 * a pipe. */
enum { NO_CAPS_N = 7 };

static void without_caps(int top, int res[NO_CAPS_N])
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	fflush(NULL);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (unit_drop_caps(~0ull) < 0)
			_exit(99);
		/* a tree holding another's locked directory */
		res[0] = remove_tree(at("t"));
		/* that directory itself, by path and beneath a directory fd */
		res[1] = remove_tree(at("t/locked"));
		res[2] = remove_beneath(top, "t");
		int t = open(at("t"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		res[5] = t < 0 ? -errno : remove_beneath(t, "locked");
		if (t >= 0)
			close(t);
		/* another's directory we may read but not write: its file stays */
		res[6] = remove_tree(at("w"));
		/* our own directory, opened and then made unreadable */
		int u = open(at("u"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		res[3] = u < 0 ? -errno : 0;
		if (u >= 0) {
			res[3] = chmod(at("u"), 0300) < 0 ? -errno : 0;
			res[4] = empty_dir_at(u);
			close(u);
		}
		exit(write(p[1], res, sizeof(int) * NO_CAPS_N) == (ssize_t) (sizeof(int) * NO_CAPS_N) ? 0 : 98);
	}
	close(p[1]);
	ck_assert_int_eq(read(p[0], res, sizeof(int) * NO_CAPS_N), (ssize_t) (sizeof(int) * NO_CAPS_N));
	close(p[0]);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
}

START_TEST(test_remove_denied)
{
	if (geteuid() != 0) {
		fprintf(stderr, "test_remove_denied: skipped (needs root to give a directory away)\n");
		return;
	}
	ck_assert_int_eq(mkdir_p(at("t/locked"), 0755), 0);
	touch("t/locked/inner");
	ck_assert_int_eq(chown(at("t/locked"), 1000, 1000), 0);
	ck_assert_int_eq(chmod(at("t/locked"), 0), 0);
	ck_assert_int_eq(mkdir(at("u"), 0755), 0);
	touch("u/f");
	ck_assert_int_eq(mkdir_p(at("w/ro"), 0755), 0);
	touch("w/ro/f");
	ck_assert_int_eq(chown(at("w/ro"), 1000, 1000), 0);
	ck_assert_int_eq(chmod(at("w/ro"), 0555), 0);
	int top = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(top, 0);
	int res[NO_CAPS_N] = { 0 };
	struct stat st;
	without_caps(top, res);
	close(top);
	ck_assert_int_eq(res[0], -EACCES);
	ck_assert_int_eq(res[1], -EACCES);
	ck_assert_int_eq(res[2], -EACCES);
	ck_assert_int_eq(res[3], 0);
	ck_assert_int_eq(res[4], -EACCES);
	ck_assert_int_eq(res[5], -EACCES);
	ck_assert_int_eq(res[6], -EACCES);
	ck_assert(exists("w/ro/f"));
	ck_assert_int_eq(lstat(at("w/ro"), &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0555);
	/* Nothing beyond the refusal was removed, and the mode stayed. */
	ck_assert_int_eq(lstat(at("t/locked"), &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0);
	ck_assert_uint_eq(st.st_uid, 1000);
	ck_assert(exists("t/locked/inner"));
	ck_assert(exists("u/f"));
	ck_assert_int_eq(chmod(at("u"), 0755), 0);
	ck_assert_int_eq(remove_tree(at("t")), 0);
	ck_assert(!exists("t"));
}
END_TEST

/* open_beneath: the one way into a hostile tree. */
START_TEST(test_open_beneath)
{
	ck_assert_int_eq(mkdir(at("root"), 0755), 0);
	ck_assert_int_eq(mkdir(at("root/d"), 0755), 0);
	touch("root/d/f");
	touch("secret");
	ck_assert_int_eq(symlink("d/f", at("root/in")), 0);          /* stays inside */
	ck_assert_int_eq(symlink("../secret", at("root/out")), 0);   /* leads out */
	ck_assert_int_eq(symlink("/etc", at("root/abs")), 0);
	ck_assert_int_eq(symlink("d", at("root/dl")), 0);
	int root = open(at("root"), O_PATH | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(root, 0);
	int fd = open_beneath(root, "d/f", O_RDONLY, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
	/* No symlink, last component or on the way, inside or not. */
	ck_assert_int_eq(open_beneath(root, "in", O_RDONLY, 0), -ELOOP);
	ck_assert_int_eq(open_beneath(root, "dl/f", O_RDONLY, 0), -ELOOP);
	ck_assert_int_eq(open_beneath(root, "out", O_RDONLY, 0), -ELOOP);
	/* Never above the root, by '..' or an absolute path. */
	ck_assert_int_eq(open_beneath(root, "../secret", O_RDONLY, 0), -EXDEV);
	ck_assert_int_eq(open_beneath(root, "d/../../secret", O_RDONLY, 0), -EXDEV);
	ck_assert_int_eq(open_beneath(root, "/etc/passwd", O_RDONLY, 0), -EXDEV);
	ck_assert_int_eq(open_beneath(root, "", O_RDONLY, 0), -ENOENT);
	/* Symlinks that stay inside, when asked; still never out. */
	fd = open_beneath(root, "in", O_RDONLY, BENEATH_SYMLINKS_INSIDE);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(open_beneath(root, "out", O_RDONLY, BENEATH_SYMLINKS_INSIDE), -EXDEV);
	ck_assert_int_eq(open_beneath(root, "abs/passwd", O_RDONLY, BENEATH_SYMLINKS_INSIDE), -EXDEV);
	close(root);
	/* BENEATH_NO_XDEV: not onto another mount (/proc is one under /). */
	root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(root, 0);
	fd = open_beneath(root, "proc", O_PATH, 0);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(open_beneath(root, "proc", O_PATH, BENEATH_NO_XDEV), -EXDEV);
	close(root);
}
END_TEST

static int count_visit(int parent, const char *name, const struct stat *st, int sub, void *ctx)
{
	(void) parent;
	int *n = ctx;
	n[0]++;
	if (S_ISDIR(st->st_mode))
		ck_assert_int_ge(sub, 0);
	else
		ck_assert_int_eq(sub, -1);
	return !strcmp(name, "skipme") ? TREE_SKIP : !strcmp(name, "stop") ? -ECANCELED : 0;
}

/* tree_walk: every entry once, no symlink followed, TREE_SKIP, -errno ends
 * it, too deep is -ELOOP; tree_usage counts what is there. */
START_TEST(test_tree_walk)
{
	ck_assert_int_eq(mkdir(at("t"), 0755), 0);
	ck_assert_int_eq(mkdir(at("t/a"), 0755), 0);
	ck_assert_int_eq(mkdir(at("t/a/b"), 0755), 0);
	ck_assert_int_eq(mkdir(at("t/skipme"), 0755), 0);
	touch("t/skipme/hidden");
	touch("t/a/b/f");
	ck_assert_int_eq(mkdir(at("big"), 0755), 0);
	int fd = open(at("big/data"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	static char block[1 << 20];
	memset(block, 'x', sizeof(block));
	ck_assert_int_eq(write(fd, block, sizeof(block)), (int) sizeof(block));
	close(fd);
	ck_assert_int_eq(symlink(at2("big"), at("t/link")), 0);
	int t = open(at("t"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(t, 0);
	int n[1] = { 0 };
	/* a, a/b, a/b/f, skipme, link: not skipme/hidden, nothing under link */
	ck_assert_int_eq(tree_walk(t, 0, count_visit, n), 0);
	ck_assert_int_eq(n[0], 5);
	/* The 1 MB beside the tree is not reached through the symlink. */
	ck_assert_uint_lt(tree_usage(t), 1 << 20);
	int b = open(at("big"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_uint_ge(tree_usage(b), 1 << 20);
	close(b);
	touch("t/a/stop");
	n[0] = 0;
	ck_assert_int_eq(tree_walk(t, 0, count_visit, n), -ECANCELED);
	close(t);
	/* Deeper than TREE_MAX_DEPTH: -ELOOP, or passed over when asked. */
	ck_assert_int_eq(mkdir(at("deep"), 0755), 0);
	int cur = open(at("deep"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int top = dup(cur);
	for (int i = 0; i < TREE_MAX_DEPTH + 2; i++) {
		ck_assert_int_eq(mkdirat(cur, "d", 0755), 0);
		int next = openat(cur, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		ck_assert_int_ge(next, 0);
		close(cur);
		cur = next;
	}
	close(cur);
	n[0] = 0;
	ck_assert_int_eq(tree_walk(top, 0, count_visit, n), -ELOOP);
	n[0] = 0;
	ck_assert_int_eq(tree_walk(top, TREE_KEEP_GOING, count_visit, n), 0);
	ck_assert_int_eq(n[0], TREE_MAX_DEPTH + 1);
	close(top);
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
	tcase_add_test(tc, test_bad_fd);
	tcase_add_test(tc, test_remove_denied);
	tcase_add_test(tc, test_open_beneath);
	tcase_add_test(tc, test_tree_walk);
	return unit_run("fsutil", tc);
}
