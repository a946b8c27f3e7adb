/* The compiled-filter cache: one file per profile text, in a directory only
 * the caller can write (a filter another user could replace would be a hole,
 * so ownership and mode are checked before a file is trusted). Each file
 * holds the whole profile text it was compiled from, compared on load: a
 * hash collision cannot hand back another profile's filter. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/cleanup.h"
#include "seccomp/seccomp.h"

#define MAGIC "nsbox-bpf-1\n"

uint64_t sc_cache_key(const char *text, size_t len, bool notify)
{
	/* FNV-1a over the text, what the filter depends on besides it (the
	 * libseccomp version that compiled it, the notify mode) and the
	 * native architecture. */
	const struct scmp_version *v = seccomp_version();
	char extra[96];
	snprintf(extra, sizeof(extra), "|%u.%u.%u|%d|%u", v ? v->major : 0, v ? v->minor : 0,
	         v ? v->micro : 0, notify, seccomp_arch_native());
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char) text[i]) * 1099511628211ull;
	for (const char *p = extra; *p; p++)
		h = (h ^ (unsigned char) *p) * 1099511628211ull;
	return h;
}

/* The cache directory, created 0700 if missing; NULL if it cannot be
 * trusted (not ours, or writable by others). */
static char *cache_dir(void)
{
	char *dir = NULL;
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	if (geteuid() == 0)
		dir = strdup("/var/cache/nsbox/seccomp");
	else if (xdg && *xdg == '/')
		(void) !asprintf(&dir, "%s/nsbox/seccomp", xdg);
	else if (home && *home == '/')
		(void) !asprintf(&dir, "%s/.cache/nsbox/seccomp", home);
	if (!dir)
		return NULL;
	(void) mkdir_p(dir, 0700);   /* each component created private; checked below */
	struct stat st;
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022)) {
		free(dir);
		return NULL;
	}
	return dir;
}

static char *entry_path(uint64_t key)
{
	_cleanup_free_ char *dir = cache_dir();
	char *path = NULL;
	if (dir && asprintf(&path, "%s/%016llx.bpf", dir, (unsigned long long) key) < 0)
		path = NULL;
	return path;
}

int sc_cache_load(uint64_t key, const char *text, size_t len, sc_bpf *out)
{
	_cleanup_free_ char *path = entry_path(key);
	if (!path)
		return -ENOENT;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 022) || st.st_size > (8 << 20))
		return -ENOENT;
	_cleanup_free_ char *data = malloc((size_t) st.st_size);
	if (!data || read(fd, data, (size_t) st.st_size) != st.st_size)
		return -EIO;
	/* MAGIC, text length, text, layer count, then per layer: length, insns */
	size_t off = sizeof(MAGIC) - 1, size = (size_t) st.st_size;
	uint64_t tlen;
	uint32_t n;
	if (size < off + sizeof(tlen) || memcmp(data, MAGIC, off))
		return -EINVAL;
	memcpy(&tlen, data + off, sizeof(tlen));
	off += sizeof(tlen);
	if (tlen != len || size < off + len + sizeof(n) || memcmp(data + off, text, len))
		return -ENOENT;
	off += len;
	memcpy(&n, data + off, sizeof(n));
	off += sizeof(n);
	if (n < 1 || n > 2)
		return -EINVAL;
	sc_bpf b = { .n = 0 };
	for (uint32_t i = 0; i < n; i++) {
		uint16_t l;
		if (size < off + sizeof(l))
			break;
		memcpy(&l, data + off, sizeof(l));
		off += sizeof(l);
		size_t bytes = (size_t) l * sizeof(struct sock_filter);
		if (!l || size < off + bytes)
			break;
		b.layers[i].insns = malloc(bytes);
		if (!b.layers[i].insns)
			break;
		memcpy(b.layers[i].insns, data + off, bytes);
		b.layers[i].len = l;
		off += bytes;
		b.n++;
	}
	if ((uint32_t) b.n != n || off != size) {
		sc_bpf_free(&b);
		return -EINVAL;
	}
	*out = b;
	return 0;
}

void sc_cache_store(uint64_t key, const char *text, size_t len, const sc_bpf *b)
{
	_cleanup_free_ char *path = entry_path(key);
	_cleanup_free_ char *tmp = NULL;
	if (!path || asprintf(&tmp, "%s.%d.tmp", path, (int) getpid()) < 0)
		return;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return;
	uint64_t tlen = len;
	uint32_t n = (uint32_t) b->n;
	bool ok = write(fd, MAGIC, sizeof(MAGIC) - 1) == (ssize_t) (sizeof(MAGIC) - 1) &&
	          write(fd, &tlen, sizeof(tlen)) == (ssize_t) sizeof(tlen) &&
	          write(fd, text, len) == (ssize_t) len && write(fd, &n, sizeof(n)) == (ssize_t) sizeof(n);
	for (int i = 0; ok && i < b->n; i++) {
		uint16_t l = b->layers[i].len;
		size_t bytes = (size_t) l * sizeof(struct sock_filter);
		ok = write(fd, &l, sizeof(l)) == (ssize_t) sizeof(l) &&
		     write(fd, b->layers[i].insns, bytes) == (ssize_t) bytes;
	}
	ok = close(fd) == 0 && ok;
	/* Atomic: a concurrent run sees the old file or the new one. */
	if (!ok || rename(tmp, path) < 0)
		(void) unlink(tmp);
}
