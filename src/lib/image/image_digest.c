/* An image's digest: SHA-256 over its root filesystem as a sandbox sees it,
 * computed once when the image is stored (import, build, re-strip) and kept
 * in meta.json, so that a run names exactly what it ran on without hashing
 * anything at launch.
 *
 * What it covers, entry by entry in a fixed order (names sorted bytewise,
 * depth first): the path, the type, the permission bits, the owner and group
 * relative to the owner of the image's root (so an image shifted into root's
 * sandbox range and the same image in a user's store digest alike), the size,
 * and the content's SHA-256 for a file or the target for a symbolic link.
 * Timestamps, extended attributes and hard-link identity are not covered.
 * The tree is the store's own (stripped) copy; it is still walked through
 * directory fds without following a link. */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/error.h"
#include "image/image_digest.h"
#include "base/sha256.h"

#define DIGEST_MAX_DEPTH 512

typedef struct walk {
	sha256_ctx all;
	uid_t uid0;
	gid_t gid0;
	char *io;           /* read buffer */
	nsbox_error **err;
} walk;

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

static void free_names(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* The entries of the directory fd, sorted; *n of them. */
static int list_names(int dfd, char ***out, size_t *n, const char *path, nsbox_error **err)
{
	*out = NULL;
	*n = 0;
	int fd = dup(dfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return nsbox_err(err, e, "image", "digest: read directory '%s'", path);
	}
	char **v = NULL;
	size_t len = 0, cap = 0;
	struct dirent *de;
	errno = 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (len == cap) {
			cap = cap ? cap * 2 : 32;
			char **nv = realloc(v, cap * sizeof(*v));
			if (!nv)
				goto nomem;
			v = nv;
		}
		if (!(v[len] = strdup(de->d_name)))
			goto nomem;
		len++;
		errno = 0;
	}
	if (errno) {
		int e = errno;
		closedir(d);
		free_names(v, len);
		return nsbox_err(err, e, "image", "digest: read directory '%s'", path);
	}
	closedir(d);
	if (len)
		qsort(v, len, sizeof(*v), cmp_names);
	*out = v;
	*n = len;
	return 0;
nomem:
	closedir(d);
	free_names(v, len);
	return nsbox_err(err, ENOMEM, "image", "digest: read directory '%s'", path);
}

static int file_sha(walk *w, int dfd, const char *name, const struct stat *st, const char *path, char hex[65])
{
	_cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct stat now;
	if (fd < 0 || fstat(fd, &now) < 0)
		return nsbox_err(w->err, errno, "image", "digest: open '%s'", path);
	if (!S_ISREG(now.st_mode) || now.st_ino != st->st_ino || now.st_dev != st->st_dev)
		return nsbox_err(w->err, EAGAIN, "image", "digest: '%s' changed while it was read", path);
	sha256_ctx c;
	sha256_init(&c);
	for (;;) {
		ssize_t got = read(fd, w->io, 65536);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return nsbox_err(w->err, errno, "image", "digest: read '%s'", path);
		if (got == 0)
			break;
		sha256_update(&c, w->io, (size_t) got);
	}
	sha256_final_hex(&c, hex);
	return 0;
}

static int walk_dir(walk *w, int dfd, const char *path, int depth)
{
	if (depth > DIGEST_MAX_DEPTH)
		return nsbox_err(w->err, ELOOP, "image", "digest: '%s' is nested too deeply", path);
	char **names;
	size_t n;
	int r = list_names(dfd, &names, &n, path, w->err);
	for (size_t i = 0; r == 0 && i < n; i++) {
		_cleanup_free_ char *sub = NULL;
		if (asprintf(&sub, "%s/%s", path, names[i]) < 0) {
			sub = NULL;
			r = nsbox_err(w->err, ENOMEM, "image", "digest");
			break;
		}
		struct stat st;
		if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = nsbox_err(w->err, errno, "image", "digest: stat '%s'", sub);
			break;
		}
		char type = S_ISREG(st.st_mode) ? 'f' : S_ISDIR(st.st_mode) ? 'd' : S_ISLNK(st.st_mode) ? 'l' :
		            S_ISFIFO(st.st_mode) ? 'p' : S_ISSOCK(st.st_mode) ? 's' : S_ISCHR(st.st_mode) ? 'c' : 'b';
		char head[128];
		int hl = snprintf(head, sizeof(head), "%c %04o %u %u %llu", type, (unsigned) (st.st_mode & 07777),
		                  (unsigned) (st.st_uid - w->uid0), (unsigned) (st.st_gid - w->gid0),
		                  type == 'f' || type == 'l' ? (unsigned long long) st.st_size : 0ULL);
		sha256_update(&w->all, sub, strlen(sub) + 1);
		sha256_update(&w->all, head, (size_t) hl + 1);
		if (type == 'f') {
			char hex[65];
			r = file_sha(w, dfd, names[i], &st, sub, hex);
			if (r == 0)
				sha256_update(&w->all, hex, 64);
		} else if (type == 'l') {
			char target[4097];
			ssize_t tl = readlinkat(dfd, names[i], target, sizeof(target) - 1);
			if (tl < 0)
				r = nsbox_err(w->err, errno, "image", "digest: read link '%s'", sub);
			else
				sha256_update(&w->all, target, (size_t) tl);
		} else if (type == 'c' || type == 'b') {
			char dev[32];
			int dl = snprintf(dev, sizeof(dev), "%llu", (unsigned long long) st.st_rdev);
			sha256_update(&w->all, dev, (size_t) dl);
		}
		sha256_update(&w->all, "\n", 1);
		if (r == 0 && type == 'd') {
			_cleanup_close_ int cfd = openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cfd < 0)
				r = nsbox_err(w->err, errno, "image", "digest: open directory '%s'", sub);
			else
				r = walk_dir(w, cfd, sub, depth + 1);
		}
	}
	free_names(names, n);
	return r;
}

int image_tree_digest(int root_fd, char out[IMAGE_DIGEST_LEN], nsbox_error **err)
{
	struct stat st;
	if (fstat(root_fd, &st) < 0)
		return nsbox_err(err, errno, "image", "digest: the root filesystem");
	_cleanup_free_ char *io = malloc(65536);
	if (!io)
		return nsbox_err(err, ENOMEM, "image", "digest");
	walk w = { .uid0 = st.st_uid, .gid0 = st.st_gid, .io = io, .err = err };
	sha256_init(&w.all);
	char head[64];
	int hl = snprintf(head, sizeof(head), "nsbox-image-digest-1\n. %04o\n", (unsigned) (st.st_mode & 07777));
	sha256_update(&w.all, head, (size_t) hl);
	int r = walk_dir(&w, root_fd, "", 0);
	if (r < 0)
		return r;
	char hex[65];
	sha256_final_hex(&w.all, hex);
	snprintf(out, IMAGE_DIGEST_LEN, "sha256:%s", hex);
	return 0;
}

bool image_digest_valid(const char *s)
{
	if (strncmp(s, "sha256:", 7) || strlen(s) != IMAGE_DIGEST_LEN - 1)
		return false;
	for (const char *p = s + 7; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

bool image_meta_digest_of(const char *meta, char out[IMAGE_DIGEST_LEN])
{
	json_t *j = json_loads(meta, JSON_REJECT_DUPLICATES, NULL);
	const char *d = json_string_value(json_object_get(j, "digest"));
	bool ok = d && strlen(d) == IMAGE_DIGEST_LEN - 1;
	if (ok)
		memcpy(out, d, IMAGE_DIGEST_LEN);
	json_decref(j);
	return ok && image_digest_valid(out);
}

bool image_digest_beside(int rootfs_fd, char out[IMAGE_DIGEST_LEN])
{
	/* <image>/meta.json beside <image>/rootfs; our own small file. */
	_cleanup_close_ int dir = openat(rootfs_fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int fd = dir < 0 ? -1 : openat(dir, "meta.json", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return false;
	char text[4096];
	ssize_t n = read(fd, text, sizeof(text) - 1);
	if (n <= 0)
		return false;
	text[n] = '\0';
	return image_meta_digest_of(text, out);
}
