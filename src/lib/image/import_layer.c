/* One tar layer of an image import (import.h): whiteouts applied beneath
 * the image's root fd, members extracted with libarchive's secure flags and
 * our own checks, set-id bits, capabilities and device nodes stripped. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/cleanup.h"
#include "image/image_strip.h"
#include "image/import.h"

/* snprintf for paths: truncation shows as an empty result that the next
 * system call rejects, instead of a silently shorter path. */
void import_path_fmt(char *out, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(out, len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t) n >= len)
		out[0] = '\0';
}

/* ---- one tar layer -------------------------------------------------------- */

/* An archive member name made relative and checked: no "..", no empty. */
static int clean_name(const char *in, char *out, size_t len)
{
	while (*in == '/' || (in[0] == '.' && in[1] == '/'))
		in += in[0] == '/' ? 1 : 2;
	if (!*in || !strcmp(in, "."))
		return 1;   /* the root itself */
	if (strlen(in) >= len)
		return -ENAMETOOLONG;
	for (const char *p = in; *p;) {
		const char *e = strchrnul(p, '/');
		if (e - p == 2 && p[0] == '.' && p[1] == '.')
			return -EXDEV;
		p = *e ? e + 1 : e;
	}
	import_path_fmt(out, len, "%s", in);
	size_t n = strlen(out);
	while (n > 1 && out[n - 1] == '/')
		out[--n] = '\0';
	return 0;
}

int import_err(importer *im, nsbox_error **err, int e, const char *member, const char *what)
{
	(void) nsbox_err_invalid(err, "image", "import '%s': %s%s%s%s", im->source, member ? "member '" : "",
	                         member ? member : "", member ? "': " : "", what);
	return -e;
}

/* A whiteout: remove `name` of directory `dir` of the layers below, or
 * (name NULL, an opaque marker) everything in it. The directory is opened
 * beneath the root with no symlink on the way: one planted by an earlier
 * layer ("evil -> /etc", then "evil/.wh.passwd") leads nowhere, which is also
 * what the layer means (a symlink has no entries to white out). */
static void whiteout(importer *im, const char *dir, const char *name)
{
	int dfd = open_beneath(im->root_fd, *dir ? dir : ".", O_RDONLY | O_DIRECTORY, BENEATH_NO_XDEV);
	if (dfd < 0)
		return;
	if (name) {
		(void) remove_beneath(dfd, name);
		close(dfd);
		return;
	}
	int lfd = dup(dfd);
	DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			(void) remove_beneath(dfd, e->d_name);
	if (d)
		closedir(d);
	else if (lfd >= 0)
		close(lfd);
	close(dfd);
}

/* A layer, blob or manifest, opened for reading beneath the archive's or
 * layout's directory `dirfd` with no symlink on the way. Never blocks (a
 * FIFO), and only a regular file is read. Returns an fd, -ENOENT, or -EPERM
 * when it is something else than a regular file there. */
int layer_open(int dirfd, const char *rel)
{
	int fd = open_beneath(dirfd, rel, O_RDONLY | O_NONBLOCK, BENEATH_NO_XDEV);
	if (fd == -ELOOP || fd == -EXDEV || fd == -ENOTDIR)
		return -EPERM;
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

int layer_open_err(importer *im, nsbox_error **err, int r, const char *rel)
{
	return import_err(im, err, -r, rel,
	                  r == -EPERM ? "refused: not a regular file beneath the archive (a symlink, or a special file)"
	                              : strerror(-r));
}

struct archive *layer_reader(int fd)
{
	struct archive *a = archive_read_new();
	if (!a)
		return NULL;
	archive_read_support_filter_all(a);
	archive_read_support_format_tar(a);
	archive_read_support_format_gnutar(a);
	if (lseek(fd, 0, SEEK_SET) < 0 || archive_read_open_fd(a, fd, 65536) != ARCHIVE_OK) {
		archive_read_free(a);
		return NULL;
	}
	return a;
}

/* Pass 1 of a layer: apply its whiteouts and opaque markers to the layers
 * below it (they must not touch what this layer itself brings). */
static int apply_whiteouts(importer *im, int layer, nsbox_error **err)
{
	struct archive *a = layer_reader(layer);
	if (!a)
		return import_err(im, err, EINVAL, NULL, "a layer is not a readable tar archive");
	struct archive_entry *e;
	int r = 0, rr;
	while ((rr = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		char name[PATH_MAX];
		const char *raw = archive_entry_pathname(e);
		if (!raw || clean_name(raw, name, sizeof(name)) != 0)
			continue;   /* reported by pass 2 */
		char *base = strrchr(name, '/');
		char *b = base ? base + 1 : name;
		if (strncmp(b, ".wh.", 4))
			continue;
		char dir[PATH_MAX];
		import_path_fmt(dir, sizeof(dir), "%.*s", base ? (int) (base - name) : 0, name);
		whiteout(im, dir, strcmp(b, ".wh..wh..opq") ? b + 4 : NULL);
	}
	if (rr != ARCHIVE_EOF)
		r = import_err(im, err, EINVAL, NULL, archive_error_string(a) ? archive_error_string(a) : "a corrupt layer");
	archive_read_free(a);
	return r;
}

/* The directory a member goes in, when it exists, must be reached from the
 * root without a symlink (an earlier layer's "evil -> /etc", then
 * "evil/passwd"). libarchive's SECURE_SYMLINKS checks that too (and with
 * UNLINK would replace the symlink by a directory); this keeps the promise
 * ours rather than a library option's. A well-formed layer that replaces a
 * symlink by a directory carries the directory's own entry first, which
 * replaces the symlink before its members come. */
static int parent_beneath(importer *im, const char *name, nsbox_error **err)
{
	const char *slash = strrchr(name, '/');
	if (!slash)
		return 0;
	char dir[PATH_MAX];
	import_path_fmt(dir, sizeof(dir), "%.*s", (int) (slash - name), name);
	int fd = open_beneath(im->root_fd, dir, O_PATH | O_DIRECTORY, BENEATH_NO_XDEV);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (fd == -ENOENT)
		return 0;   /* libarchive creates it */
	return import_err(im, err, EXDEV, name, fd == -ELOOP || fd == -ENOTDIR
	                  ? "refused: its directory is reached through a symlink (or a file)"
	                  : "refused: its directory is not inside the image");
}

/* Pass 2: extract the layer's members, refusing anything unsafe. */
int layer_extract(importer *im, int layer, nsbox_error **err)
{
	struct archive *a = layer_reader(layer);
	if (!a)
		return import_err(im, err, EINVAL, NULL, "not a readable tar archive");
	struct archive *w = archive_write_disk_new();
	/* Names are cleaned above (relative, no "..") and then placed below
	 * the canonical root, so the paths libarchive sees are absolute by
	 * design: its SECURE_NOABSOLUTEPATHS would refuse them all. What it
	 * must still refuse is writing through a symlink, which only the
	 * image itself can have put there: the root's own path has none. */
	int flags = ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_UNLINK |
	            ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT;
	if (!im->rootless)
		flags |= ARCHIVE_EXTRACT_OWNER;
	archive_write_disk_set_options(w, flags);
	/* Owners by number only: an image's user names mean nothing on this
	 * host (uname "alice" must not make a file alice's). */
	struct archive_entry *e;
	int r = 0, rr;
	while (r == 0 && (rr = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		const char *raw = archive_entry_pathname(e);
		char name[PATH_MAX], full[PATH_MAX * 2];
		int c = raw ? clean_name(raw, name, sizeof(name)) : -EINVAL;
		if (c == 1)
			continue;   /* "./" itself */
		if (c < 0) {
			r = import_err(im, err, EXDEV, raw ? raw : "?", c == -EXDEV ? "refused: it leaves the image ('..')" : "refused: a bad name");
			break;
		}
		const char *base = strrchr(name, '/');
		if (!strncmp(base ? base + 1 : name, ".wh.", 4))
			continue;   /* applied in pass 1 */
		if (++im->entries > im->max_entries) {
			r = import_err(im, err, EFBIG, NULL, "refused: more members than allowed (NSBOX_IMPORT_MAX_ENTRIES)");
			break;
		}
		/* Device nodes are dropped, not refused: docker export tars
		 * carry dev/ entries, and the sandbox makes its own /dev. */
		if (strip_entry(e, &im->stripped))
			continue;
		if (im->root_fd >= 0 && (r = parent_beneath(im, name, err)) < 0)
			break;
		const char *hl = archive_entry_hardlink(e);
		if (hl) {
			char target[PATH_MAX], tfull[PATH_MAX * 2];
			if (clean_name(hl, target, sizeof(target)) != 0) {
				r = import_err(im, err, EXDEV, name, "refused: a hard link that leaves the image");
				break;
			}
			/* The target is named from the root with no symlink on
			 * the way (link(2) itself does not follow the last one),
			 * so the link is to a file of the image, never the host's. */
			int t = im->root_fd >= 0 ? open_beneath(im->root_fd, target, O_PATH, BENEATH_NO_XDEV) : 0;
			if (t < 0) {
				r = import_err(im, err, EXDEV, name, "refused: a hard link to nothing of the image (or through a symlink)");
				break;
			}
			if (im->root_fd >= 0)
				close(t);
			import_path_fmt(tfull, sizeof(tfull), "%s/%s", im->root, target);
			archive_entry_set_hardlink(e, tfull);
		}
		int64_t size = archive_entry_size(e);
		if (size < 0 || (uint64_t) size > im->max_bytes - im->bytes) {
			r = import_err(im, err, EFBIG, name, "refused: the image would exceed the size limit (NSBOX_IMPORT_MAX_BYTES)");
			break;
		}
		im->bytes += (uint64_t) size;
		import_path_fmt(full, sizeof(full), "%s/%s", im->root, name);
		archive_entry_set_pathname(e, full);
		if (archive_write_header(w, e) != ARCHIVE_OK) {
			r = import_err(im, err, EINVAL, name, archive_error_string(w) ? archive_error_string(w) : "cannot be written");
			break;
		}
		const void *blk;
		size_t len;
		la_int64_t off;
		while ((rr = archive_read_data_block(a, &blk, &len, &off)) == ARCHIVE_OK)
			if (archive_write_data_block(w, blk, len, off) != ARCHIVE_OK) {
				r = import_err(im, err, EIO, name, archive_error_string(w) ? archive_error_string(w) : "write failed");
				break;
			}
		if (r == 0 && rr != ARCHIVE_EOF)
			r = import_err(im, err, EINVAL, name, archive_error_string(a) ? archive_error_string(a) : "truncated data");
		if (r == 0 && archive_write_finish_entry(w) != ARCHIVE_OK)
			r = import_err(im, err, EIO, name, archive_error_string(w) ? archive_error_string(w) : "cannot be finished");
		rr = ARCHIVE_OK;
	}
	if (r == 0 && rr != ARCHIVE_EOF && rr != ARCHIVE_OK)
		r = import_err(im, err, EINVAL, NULL, archive_error_string(a) ? archive_error_string(a) : "a corrupt archive");
	archive_write_free(w);
	archive_read_free(a);
	return r;
}

int layer_apply_fd(importer *im, int fd, nsbox_error **err)
{
	int r = apply_whiteouts(im, fd, err);
	return r < 0 ? r : layer_extract(im, fd, err);
}

int layer_apply(importer *im, int dirfd, const char *rel, nsbox_error **err)
{
	_cleanup_close_ int fd = layer_open(dirfd, rel);
	return fd < 0 ? layer_open_err(im, err, fd, rel) : layer_apply_fd(im, fd, err);
}

