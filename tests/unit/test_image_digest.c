/* image_digest.c on fabricated trees: the digest covers path, type, mode,
 * owner relative to the root's, size, content and link target (so the same
 * image shifted into another range digests alike, and any change shows); a
 * tree nested past the walk's limit is refused; the digest read back from a
 * meta.json is checked, never trusted as it is. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "image/image_digest.h"
#include "unit.h"

static char dir[64];
static char path[4096];

static const char *at(const char *rel)
{
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	return path;
}

static void put(const char *rel, const char *text)
{
	int fd = open(at(rel), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t) strlen(text));
	close(fd);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/nsbox-digest.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	(void) !system(cmd);
}

/* A small image under <dir>/<top>: files, a link, a fifo, 40 entries in
 * one directory (more than the walk's first allocation). */
static void make_tree(const char *top)
{
	char rel[256];
	ck_assert_int_eq(mkdir(at(top), 0755), 0);
	snprintf(rel, sizeof(rel), "%s/etc", top);
	ck_assert_int_eq(mkdir(at(rel), 0755), 0);
	snprintf(rel, sizeof(rel), "%s/etc/hostname", top);
	put(rel, "box\n");
	snprintf(rel, sizeof(rel), "%s/etc/link", top);
	ck_assert_int_eq(symlink("hostname", at(rel)), 0);
	snprintf(rel, sizeof(rel), "%s/fifo", top);
	ck_assert_int_eq(mkfifo(at(rel), 0600), 0);
	for (int i = 0; i < 40; i++) {
		snprintf(rel, sizeof(rel), "%s/etc/f%02d", top, i);
		put(rel, "x");
	}
}

static void digest_of(const char *top, char out[IMAGE_DIGEST_LEN])
{
	int fd = open(at(top), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	nsbox_error *e = NULL;
	ck_assert_int_eq(image_tree_digest(fd, out, &e), 0);
	ck_assert_ptr_null(e);
	ck_assert(image_digest_valid(out));
	close(fd);
}

START_TEST(test_digest_covers)
{
	char a[IMAGE_DIGEST_LEN], b[IMAGE_DIGEST_LEN], c[IMAGE_DIGEST_LEN];
	make_tree("a");
	make_tree("b");
	digest_of("a", a);
	digest_of("b", b);
	ck_assert_str_eq(a, b);   /* times and inode numbers differ: not covered */
	/* Content, mode, link target, a new entry: each changes it. */
	put("b/etc/hostname", "boy\n");
	digest_of("b", c);
	ck_assert_str_ne(a, c);
	put("b/etc/hostname", "box\n");
	digest_of("b", c);
	ck_assert_str_eq(a, c);
	ck_assert_int_eq(chmod(at("b/etc/hostname"), 0600), 0);
	digest_of("b", c);
	ck_assert_str_ne(a, c);
	ck_assert_int_eq(chmod(at("b/etc/hostname"), 0644), 0);
	ck_assert_int_eq(unlink(at("b/etc/link")), 0);
	ck_assert_int_eq(symlink("f00", at("b/etc/link")), 0);
	digest_of("b", c);
	ck_assert_str_ne(a, c);
	ck_assert_int_eq(unlink(at("b/etc/link")), 0);
	ck_assert_int_eq(symlink("hostname", at("b/etc/link")), 0);
	ck_assert_int_eq(unlink(at("b/fifo")), 0);
	put("b/fifo", "");   /* same name, other type */
	ck_assert_int_eq(chmod(at("b/fifo"), 0600), 0);
	digest_of("b", c);
	ck_assert_str_ne(a, c);
	ck_assert_int_eq(unlink(at("b/fifo")), 0);
	ck_assert_int_eq(mkfifo(at("b/fifo"), 0600), 0);
	digest_of("b", c);
	ck_assert_str_eq(a, c);
	if (geteuid() == 0) {
		/* Owners count relative to the root's: a whole tree shifted by
		 * 100000 digests alike, one file's owner changed does not. */
		char cmd[300];
		snprintf(cmd, sizeof(cmd), "chown -hR 100000:100000 '%s/b'", dir);
		ck_assert_int_eq(system(cmd), 0);
		digest_of("b", c);
		ck_assert_str_eq(a, c);
		ck_assert_int_eq(lchown(at("b/etc/hostname"), 101000, 100000), 0);
		digest_of("b", c);
		ck_assert_str_ne(a, c);
		ck_assert_int_eq(lchown(at("b/etc/hostname"), 100000, 100000), 0);
		/* Device nodes: their numbers count. */
		ck_assert_int_eq(mknod(at("a/null"), S_IFCHR | 0666, makedev(1, 3)), 0);
		ck_assert_int_eq(mknod(at("b/null"), S_IFCHR | 0666, makedev(1, 5)), 0);
		ck_assert_int_eq(lchown(at("b/null"), 100000, 100000), 0);
		digest_of("a", a);
		digest_of("b", c);
		ck_assert_str_ne(a, c);
		ck_assert_int_eq(unlink(at("b/null")), 0);
		ck_assert_int_eq(mknod(at("b/null"), S_IFBLK | 0666, makedev(1, 3)), 0);
		ck_assert_int_eq(lchown(at("b/null"), 100000, 100000), 0);
		digest_of("b", c);
		ck_assert_str_ne(a, c);
	}
}
END_TEST

/* Nested past the walk's limit (512): refused with ELOOP, said where. */
START_TEST(test_digest_too_deep)
{
	ck_assert_int_eq(mkdir(at("deep"), 0755), 0);
	int root = open(at("deep"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int fd = dup(root);
	for (int i = 0; i < 514; i++) {
		ck_assert_int_eq(mkdirat(fd, "d", 0755), 0);
		int sub = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		ck_assert_int_ge(sub, 0);
		close(fd);
		fd = sub;
	}
	close(fd);
	char out[IMAGE_DIGEST_LEN];
	nsbox_error *e = NULL;
	ck_assert_int_eq(image_tree_digest(root, out, &e), -ELOOP);
	ck_assert_ptr_nonnull(e);
	ck_assert_ptr_nonnull(strstr(nsbox_error_message(e), "is nested too deeply"));
	ck_assert_ptr_nonnull(strstr(nsbox_error_message(e), "/d/d/d/"));
	nsbox_error_free(e);
	/* Not a directory at all: said, no digest. */
	int bad = open("/dev/null", O_RDONLY | O_CLOEXEC);
	e = NULL;
	ck_assert_int_eq(image_tree_digest(bad, out, &e), -ENOTDIR);
	ck_assert_ptr_nonnull(e);
	nsbox_error_free(e);
	close(bad);
	close(root);
}
END_TEST

START_TEST(test_digest_strings)
{
	static const char good[] = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	char out[IMAGE_DIGEST_LEN];
	ck_assert(image_digest_valid(good));
	ck_assert(!image_digest_valid("sha256:0123"));
	ck_assert(!image_digest_valid("sha512:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));
	ck_assert(!image_digest_valid("sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"));
	ck_assert(!image_digest_valid("sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeg"));
	char meta[200];
	snprintf(meta, sizeof(meta), "{\"name\":\"x\",\"digest\":\"%s\",\"source\":\"y\"}", good);
	ck_assert(image_meta_digest_of(meta, out));
	ck_assert_str_eq(out, good);
	ck_assert(!image_meta_digest_of("{\"name\":\"x\"}", out));
	ck_assert(!image_meta_digest_of("{\"digest\":\"sha256:abc\"}", out));
	snprintf(meta, sizeof(meta), "{\"digest\":\"%s", good);   /* unterminated */
	ck_assert(!image_meta_digest_of(meta, out));
	snprintf(meta, sizeof(meta), "{\"digest\":\"%.70sX\"}", good);   /* not hex */
	ck_assert(!image_meta_digest_of(meta, out));
}
END_TEST

/* The digest in <image>/meta.json beside <image>/rootfs. */
START_TEST(test_digest_beside)
{
	static const char good[] = "sha256:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
	char out[IMAGE_DIGEST_LEN];
	ck_assert_int_eq(mkdir(at("rootfs"), 0755), 0);
	int fd = open(at("rootfs"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert(!image_digest_beside(fd, out));   /* none */
	put("meta.json", "");
	ck_assert(!image_digest_beside(fd, out));   /* empty */
	char meta[200];
	snprintf(meta, sizeof(meta), "{\"digest\":\"%s\"}\n", good);
	put("real.json", meta);
	ck_assert_int_eq(unlink(at("meta.json")), 0);
	ck_assert_int_eq(symlink("real.json", at("meta.json")), 0);
	ck_assert(!image_digest_beside(fd, out));   /* a link: not followed */
	ck_assert_int_eq(unlink(at("meta.json")), 0);
	ck_assert_int_eq(mkdir(at("meta.json"), 0755), 0);
	ck_assert(!image_digest_beside(fd, out));   /* not a file */
	ck_assert_int_eq(rmdir(at("meta.json")), 0);
	put("meta.json", meta);
	ck_assert(image_digest_beside(fd, out));
	ck_assert_str_eq(out, good);
	close(fd);
}
END_TEST

/* What a walk that cannot read part of the tree gives: the errno and the
 * path, and no digest. Run in a child that keeps uid 0 but drops every
 * capability, so that mode 000 is closed to it (and its coverage data can
 * still be written at exit). */
typedef struct outcome { int r; char msg[240]; char out[IMAGE_DIGEST_LEN]; } outcome;

static void digest_without_caps(const int *fds, outcome *res, int n)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	fflush(NULL);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (unit_drop_caps(~0ull) < 0)
			_exit(99);
		for (int i = 0; i < n; i++) {
			nsbox_error *e = NULL;
			memset(&res[i], 0, sizeof(res[i]));
			res[i].r = image_tree_digest(fds[i], res[i].out, &e);
			snprintf(res[i].msg, sizeof(res[i].msg), "%s", e ? nsbox_error_message(e) : "");
			nsbox_error_free(e);
		}
		exit(write(p[1], res, sizeof(*res) * (size_t) n) == (ssize_t) (sizeof(*res) * (size_t) n) ? 0 : 98);
	}
	close(p[1]);
	ck_assert_int_eq(read(p[0], res, sizeof(*res) * (size_t) n), (ssize_t) (sizeof(*res) * (size_t) n));
	close(p[0]);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

START_TEST(test_digest_unreadable)
{
	if (geteuid() != 0) {
		fprintf(stderr, "test_digest_unreadable: skipped (needs root, for files it cannot open)\n");
		return;
	}
	ck_assert_int_eq(mkdir(at("x"), 0755), 0);
	ck_assert_int_eq(mkdir(at("x/a"), 0755), 0);
	ck_assert_int_eq(mkdir(at("x/a/locked"), 0), 0);
	ck_assert_int_eq(mkdir(at("y"), 0755), 0);
	put("y/secret", "s");
	ck_assert_int_eq(chmod(at("y/secret"), 0), 0);
	int fds[2] = { open(at("x"), O_RDONLY | O_DIRECTORY | O_CLOEXEC), open(at("y"), O_RDONLY | O_DIRECTORY | O_CLOEXEC) };
	ck_assert_int_ge(fds[0], 0);
	ck_assert_int_ge(fds[1], 0);
	outcome res[2];
	digest_without_caps(fds, res, 2);
	ck_assert_int_eq(res[0].r, -EACCES);
	ck_assert_msg(strstr(res[0].msg, "digest: open directory '/a/locked'"), "%s", res[0].msg);
	ck_assert_str_eq(res[0].out, "");
	ck_assert_int_eq(res[1].r, -EACCES);
	ck_assert_msg(strstr(res[1].msg, "digest: open '/secret'"), "%s", res[1].msg);
	ck_assert_str_eq(res[1].out, "");
	close(fds[0]);
	close(fds[1]);
}
END_TEST

START_TEST(test_digest_bad_fd)
{
	char out[IMAGE_DIGEST_LEN] = "";
	nsbox_error *e = NULL;
	ck_assert_int_eq(image_tree_digest(-1, out, &e), -EBADF);
	ck_assert_ptr_nonnull(strstr(nsbox_error_message(e), "digest: the root filesystem"));
	ck_assert_str_eq(nsbox_error_step(e), "image");
	nsbox_error_free(e);
	ck_assert_str_eq(out, "");
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("image_digest");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_digest_covers);
	tcase_add_test(tc, test_digest_too_deep);
	tcase_add_test(tc, test_digest_strings);
	tcase_add_test(tc, test_digest_beside);
	tcase_add_test(tc, test_digest_unreadable);
	tcase_add_test(tc, test_digest_bad_fd);
	return unit_run("image_digest", tc);
}
