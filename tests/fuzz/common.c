/* Helpers shared by the fuzz harnesses (fuzz.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <dirent.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "fuzz.h"
#include "image/images.h"
#include "nsbox.h"
#include "base/syscalls.h"

bool fuzz_replaying;

static int saved_argc;
static char **saved_argv;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	saved_argc = *argc;
	saved_argv = *argv;
	return 0;
}

char *fuzz_cstr(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		abort();
	if (size)
		memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

bool fuzz_next(const uint8_t **data, size_t *size, uint8_t sep, const uint8_t **piece, size_t *len)
{
	if (!*size)
		return false;
	const uint8_t *end = memchr(*data, sep, *size);
	*piece = *data;
	*len = end ? (size_t) (end - *data) : *size;
	*data += *len + (end ? 1 : 0);
	*size -= *len + (end ? 1 : 0);
	return true;
}

static char store[PATH_MAX], scratch[PATH_MAX + 32], tmp_base[PATH_MAX - 64];

static void die(const char *what)
{
	fprintf(stderr, "fuzz: %s: %s\n", what, strerror(errno));
	abort();
}

static void remove_tmp_base(void)
{
	if (tmp_base[0])
		(void) remove_tree(tmp_base);
}

/* Bind `dir` on itself, so that it can stay writable when the rest of the
 * tree is made read-only. */
static void keep_writable(const char *dir, char binds[][PATH_MAX], int *n, int max)
{
	char real[PATH_MAX];
	struct stat st;
	if (*n >= max || !realpath(dir, real) || stat(real, &st) < 0 || !S_ISDIR(st.st_mode))
		return;
	if (mount(real, real, NULL, MS_BIND | MS_REC, NULL) < 0)
		die("bind a writable directory");
	snprintf(binds[(*n)++], PATH_MAX, "%s", real);
}

/* Fuzzing as root: where libFuzzer writes (the corpus directories given,
 * the artifact prefix, the current directory) stays writable, the rest of
 * the host's tree becomes read-only in our mount namespace. */
static void read_only_host(void)
{
	static char binds[16][PATH_MAX];
	int n = 0;
	keep_writable(".", binds, &n, 16);
	for (int i = 1; i < saved_argc; i++) {
		const char *a = saved_argv[i];
		if (a[0] != '-') {
			keep_writable(a, binds, &n, 16);
			continue;
		}
		const char *v = NULL;
		if (!strncmp(a, "-artifact_prefix=", 17))
			v = a + 17;
		else if (!strncmp(a, "-exact_artifact_path=", 21))
			v = a + 21;
		if (v) {
			char dir[PATH_MAX];
			snprintf(dir, sizeof(dir), "%s", v);
			char *slash = strrchr(dir, '/');
			if (slash)
				slash[slash == dir ? 1 : 0] = '\0';
			keep_writable(slash ? dir : ".", binds, &n, 16);
		}
	}
	struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY };
	if (sys_mount_setattr(AT_FDCWD, "/", AT_RECURSIVE, &ro) < 0)
		die("make the host's tree read-only");
	struct mount_attr rw = { .attr_clr = MOUNT_ATTR_RDONLY };
	for (int i = 0; i < n; i++)
		if (sys_mount_setattr(AT_FDCWD, binds[i], 0, &rw) < 0)
			die("keep a directory writable");
}

static void setup(void)
{
	if (geteuid() == 0) {
		/* Root imports into the system store: give it a private one. */
		snprintf(store, sizeof(store), "%s", NSBOX_SYSTEM_STORE);
		if (mkdir_p(store, 0755) < 0 || unshare(CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			die("make a private mount namespace");
		if (!fuzz_replaying)
			read_only_host();
		if (mount("nsbox-fuzz", store, "tmpfs", MS_NOSUID | MS_NODEV, "size=512m,mode=0755") < 0)
			die("mount a tmpfs over the image store");
		snprintf(scratch, sizeof(scratch), "%s/.fuzz-scratch", store);
	} else {
		const char *t = getenv("TMPDIR");
		snprintf(tmp_base, sizeof(tmp_base), "%s/nsbox-fuzz.XXXXXX", t && *t == '/' ? t : "/tmp");
		if (!mkdtemp(tmp_base))
			die("create a temporary directory");
		atexit(remove_tmp_base);
		char data[PATH_MAX - 32];
		snprintf(data, sizeof(data), "%s/data", tmp_base);
		setenv("XDG_DATA_HOME", data, 1);
		snprintf(store, sizeof(store), "%s/nsbox/images", data);
		if (mkdir_p(store, 0755) < 0)
			die("create the image store");
		snprintf(scratch, sizeof(scratch), "%s/scratch", tmp_base);
	}
	if (mkdir(scratch, 0700) < 0)
		die("create the scratch directory");
}

const char *fuzz_store(void)
{
	if (!store[0])
		setup();
	return store;
}

const char *fuzz_scratch_dir(void)
{
	(void) fuzz_store();
	return scratch;
}

void fuzz_scratch_reset(void)
{
	int fd = open(fuzz_scratch_dir(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || empty_dir_at(fd) < 0)
		die("empty the scratch directory");
	close(fd);
}

int fuzz_write_file(int dirfd, const char *rel, const void *data, size_t len, unsigned mode)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s", rel) >= (int) sizeof(path))
		return -ENAMETOOLONG;
	int cur = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	char *p = path;
	for (;;) {
		char *slash = strchr(p, '/');
		if (slash)
			*slash = '\0';
		if (!*p || !strcmp(p, ".") || !strcmp(p, "..")) {
			close(cur);
			return -EINVAL;
		}
		if (!slash)
			break;
		(void) mkdirat(cur, p, 0755);
		int next = openat(cur, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(cur);
		if (next < 0)
			return -errno;
		cur = next;
		p = slash + 1;
	}
	int fd = openat(cur, p, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
	int e = errno;
	close(cur);
	if (fd < 0)
		return -e;
	const char *d = data;
	while (len) {
		ssize_t w = write(fd, d, len);
		if (w <= 0) {
			e = errno;
			close(fd);
			return -e;
		}
		d += w;
		len -= (size_t) w;
	}
	close(fd);
	return 0;
}

/* Every entry of the published tree, iteratively (an image chooses its
 * depth), one directory fd per level. */
static void check_tree(int top)
{
	enum { MAX = 600 };
	DIR **stack = calloc(MAX, sizeof(*stack));
	FUZZ_CHECK(stack);
	int fd = openat(top, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	FUZZ_CHECK(fd >= 0 && (stack[0] = fdopendir(fd)));
	int depth = 0;
	while (depth >= 0) {
		struct dirent *e = readdir(stack[depth]);
		if (!e) {
			closedir(stack[depth--]);
			continue;
		}
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		int dfd = dirfd(stack[depth]);
		struct stat st;
		FUZZ_CHECK(fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0);
		FUZZ_CHECK(!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode));
		if (S_ISLNK(st.st_mode))
			continue;
		FUZZ_CHECK(!(st.st_mode & 022));
		if (S_ISREG(st.st_mode)) {
			FUZZ_CHECK(!(st.st_mode & 06000));
			int f = openat(dfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
			FUZZ_CHECK(f >= 0);
			FUZZ_CHECK(fgetxattr(f, "security.capability", NULL, 0) < 0);
			close(f);
		}
		if (!S_ISDIR(st.st_mode))
			continue;
		FUZZ_CHECK(depth + 1 < MAX);
		int sub = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		FUZZ_CHECK(sub >= 0 && (stack[depth + 1] = fdopendir(sub)));
		depth++;
	}
	free(stack);
}

/* The store holds the scratch directory and, at most, `name`. */
static bool store_holds_only(const char *name)
{
	DIR *d = opendir(fuzz_store());
	FUZZ_CHECK(d);
	struct dirent *e;
	bool ok = true;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, ".fuzz-scratch") &&
		    (!name || strcmp(e->d_name, name))) {
			fprintf(stderr, "left in the image store: '%s'\n", e->d_name);
			ok = false;
		}
	closedir(d);
	return ok;
}

void fuzz_import_check(const char *name, const char *source)
{
	nsbox_error *err = NULL;
	int r = nsbox_image_import(name, source, &err);
	if (r < 0) {
		FUZZ_CHECK(err && *nsbox_error_message(err) && nsbox_error_errno(err) > 0);
		nsbox_error_free(err);
		FUZZ_CHECK(store_holds_only(NULL));
		return;
	}
	FUZZ_CHECK(store_holds_only(name));
	char root[PATH_MAX];
	snprintf(root, sizeof(root), "%s/%s/rootfs", fuzz_store(), name);
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	FUZZ_CHECK(fd >= 0);
	check_tree(fd);
	close(fd);
	FUZZ_CHECK(nsbox_image_remove(name, NULL) == 0);
	FUZZ_CHECK(store_holds_only(NULL));
}
