/* `nsbox image import NAME SOURCE`: a flat tar (docker export), a docker
 * save archive, an OCI image layout (directory or tar), or a directory.
 * Archives are hostile input: layers are read by import_layer.c; here every
 * file of an outer archive or layout (manifest.json, index.json, blobs,
 * layers) is opened beneath its directory with no symlink, as a regular
 * file, and read from the fd. No set-id bit, file capability or device node
 * is published (image_strip.c). The image is built in a private temporary
 * directory of the store and renamed into place, or removed whole. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "base/fsutil.h"
#include "base/buf.h"
#include "base/cleanup.h"
#include "base/error.h"
#include "image/image_owners.h"
#include "image/image_strip.h"
#include "image/images.h"
#include "image/import.h"
#include "image/import_module.h"
#include "base/json.h"
#include "base/sha256.h"
#include "base/syscalls.h"
#include "base/yaml_walk.h"

/* ---- image formats ---------------------------------------------------------- */

/* Parse a small JSON file (manifest.json, index.json, an OCI manifest). */
static int load_json(int dirfd, const char *rel, yaml_document_t *doc)
{
	int fd = layer_open(dirfd, rel);
	struct stat st;
	if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > (16 << 20)) {
		close(fd);
		return -EFBIG;
	}
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		return fd < 0 ? fd : -ENOMEM;
	}
	yaml_parser_t p;
	yaml_parser_initialize(&p);
	yaml_parser_set_input_file(&p, f);
	int ok = yaml_parser_load(&p, doc);
	yaml_parser_delete(&p);
	fclose(f);
	return ok ? 0 : -EINVAL;
}

static yaml_node_t *get(yaml_document_t *d, yaml_node_t *m, const char *key)
{
	if (!m || m->type != YAML_MAPPING_NODE)
		return NULL;
	yw_pairs(d, m, k, v)
		if (yw_scalar(k) && !strcmp(yw_scalar(k), key))
			return v;
	return NULL;
}

/* "sha256:abc..." -> blobs/sha256/abc..., opened beneath the layout. */
static int blob_path(const char *digest, char *out, size_t len)
{
	const char *colon = digest ? strchr(digest, ':') : NULL;
	if (!colon || colon == digest || strchr(digest, '/') || strstr(digest, ".."))
		return -EINVAL;
	import_path_fmt(out, len, "blobs/%.*s/%s", (int) (colon - digest), digest, colon + 1);
	return 0;
}

/* A JSON file's failure: refused (a symlink...), missing, or bad JSON. */
static int json_err(importer *im, nsbox_error **err, int r, const char *rel)
{
	return r == -EINVAL ? import_err(im, err, EINVAL, rel, "not valid JSON") : layer_open_err(im, err, r, rel);
}

/* docker save: manifest.json lists the layers, bottom first. */
static int import_docker_save(importer *im, int dir, nsbox_error **err)
{
	yaml_document_t doc;
	int r = load_json(dir, "manifest.json", &doc);
	if (r < 0)
		return json_err(im, err, r, "manifest.json");
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	yaml_node_t *first = root && root->type == YAML_SEQUENCE_NODE && root->data.sequence.items.start < root->data.sequence.items.top
		? yaml_document_get_node(&doc, *root->data.sequence.items.start) : NULL;
	yaml_node_t *layers = get(&doc, first, "Layers");
	if (!layers || layers->type != YAML_SEQUENCE_NODE)
		r = import_err(im, err, EINVAL, "manifest.json", "no Layers list in its first entry");
	else
		yw_items(&doc, layers, it) {
			const char *l = yw_scalar(it);
			if (r == 0 && (!l || strstr(l, "..") || l[0] == '/'))
				r = import_err(im, err, EXDEV, "manifest.json", "a layer path leaves the archive");
			if (r == 0)
				r = layer_apply(im, dir, l, err);
		}
	yaml_document_delete(&doc);
	return r;
}

/* A blob's content must be what its name says: a registry, or a layout
 * changed after the fact, may not hand over other bytes under a digest. */
static int blob_verify(importer *im, int dir, const char *rel, const char *digest, nsbox_error **err)
{
	if (strncmp(digest, "sha256:", 7) || strlen(digest) != 71)
		return import_err(im, err, EINVAL, rel, "refused: not a sha256 digest");
	int fd = layer_open(dir, rel);
	if (fd < 0)
		return layer_open_err(im, err, fd, rel);
	sha256_ctx c;
	sha256_init(&c);
	char b[65536], hex[65];
	ssize_t n;
	while ((n = read(fd, b, sizeof(b))) > 0)
		sha256_update(&c, b, (size_t) n);
	int e = errno;
	close(fd);
	if (n < 0)
		return import_err(im, err, e, rel, strerror(e));
	sha256_final_hex(&c, hex);
	return strcmp(hex, digest + 7) ? import_err(im, err, EBADMSG, rel, "refused: its content does not match its digest") : 0;
}

/* OCI image layout: index.json -> (image index ->) manifest -> layers. */
static int import_oci(importer *im, int dir, nsbox_error **err)
{
	char path[PATH_MAX * 2] = "index.json";
	char digest[256] = "", cur[256] = "";
	for (int depth = 0; depth < 3 && !*digest; depth++) {
		yaml_document_t doc;
		int lr = *cur ? blob_verify(im, dir, path, cur, err) : 0;
		if (lr < 0)
			return lr;
		lr = load_json(dir, path, &doc);
		if (lr < 0)
			return json_err(im, err, lr, path);
		yaml_node_t *manifests = get(&doc, yaml_document_get_root_node(&doc), "manifests");
		const char *pick = NULL, *pick_type = NULL;
		if (manifests && manifests->type == YAML_SEQUENCE_NODE)
			yw_items(&doc, manifests, m) {
				yaml_node_t *plat = get(&doc, m, "platform");
				const char *arch = yw_scalar(get(&doc, plat, "architecture"));
				const char *os = yw_scalar(get(&doc, plat, "os"));
				bool ours = !plat || ((!arch || !strcmp(arch, "amd64")) && (!os || !strcmp(os, "linux")));
				if (!pick && ours) {
					pick = yw_scalar(get(&doc, m, "digest"));
					pick_type = yw_scalar(get(&doc, m, "mediaType"));
				}
			}
		bool nested = pick_type && strstr(pick_type, "index");
		int rr = pick ? blob_path(pick, path, sizeof(path)) : -ENOENT;
		if (pick)
			import_path_fmt(cur, sizeof(cur), "%s", pick);
		if (!nested && pick)
			import_path_fmt(digest, sizeof(digest), "%s", pick);
		yaml_document_delete(&doc);
		if (rr < 0)
			return import_err(im, err, EINVAL, "index.json", "no linux/amd64 manifest");
	}
	yaml_document_t doc;
	int lr = blob_verify(im, dir, path, digest, err);
	if (lr < 0)
		return lr;
	lr = load_json(dir, path, &doc);
	if (lr < 0)
		return json_err(im, err, lr, path);
	yaml_node_t *layers = get(&doc, yaml_document_get_root_node(&doc), "layers");
	int r = 0;
	if (!layers || layers->type != YAML_SEQUENCE_NODE)
		r = import_err(im, err, EINVAL, digest, "the manifest has no layers");
	else
		yw_items(&doc, layers, l) {
			char lp[PATH_MAX * 2];
			const char *d = yw_scalar(get(&doc, l, "digest"));
			if (r == 0 && blob_path(d, lp, sizeof(lp)) < 0)
				r = import_err(im, err, EINVAL, digest, "a layer digest is malformed");
			if (r == 0)
				r = blob_verify(im, dir, lp, d, err);
			if (r == 0)
				r = layer_apply(im, dir, lp, err);
		}
	yaml_document_delete(&doc);
	return r;
}

/* The outer archive of docker save / OCI tars is only blobs and JSON:
 * unpack it to a scratch directory (with the same checks) and read it as a
 * directory. */
static int unpack_outer(importer *im, int archive_fd, const char *scratch, int scratch_fd, nsbox_error **err)
{
	importer outer = *im;
	outer.root_fd = scratch_fd;
	import_path_fmt(outer.root, sizeof(outer.root), "%s", scratch);
	outer.rootless = true;   /* the scratch copy is ours, not the image's owners' */
	outer.entries = outer.bytes = 0;
	return layer_extract(&outer, archive_fd, err);
}

/* A plain directory: copied member by member through libarchive, with the
 * same checks as an archive (links stay links, nothing is followed). */
static int import_dir(importer *im, int src_fd, const char *source, nsbox_error **err)
{
	struct archive *rd = archive_read_disk_new();
	struct archive *w = archive_write_disk_new();
	if (!rd || !w) {
		archive_read_free(rd);
		archive_write_free(w);
		return nsbox_err(err, ENOMEM, "image", "import '%s'", source);
	}
	archive_read_disk_set_symlink_physical(rd);
	archive_read_disk_set_standard_lookup(rd);
	int flags = ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
	            ARCHIVE_EXTRACT_SECURE_NODOTDOT | (im->rootless ? 0 : ARCHIVE_EXTRACT_OWNER);
	archive_write_disk_set_options(w, flags);
	int r = archive_read_disk_open(rd, source) == ARCHIVE_OK ? 0
		: import_err(im, err, EINVAL, NULL, archive_error_string(rd) ? archive_error_string(rd) : "cannot be read");
	size_t prefix = strlen(source);
	struct archive_entry *e = archive_entry_new();
	int rr = ARCHIVE_EOF;
	while (r == 0 && (rr = archive_read_next_header2(rd, e)) == ARCHIVE_OK) {
		archive_read_disk_descend(rd);
		/* A copy: set_pathname below frees the entry's own string. */
		char p[PATH_MAX * 2];
		import_path_fmt(p, sizeof(p), "%s", archive_entry_pathname(e) ? archive_entry_pathname(e) : "");
		const char *rel = p + (strncmp(p, source, prefix) == 0 ? prefix : 0);
		while (*rel == '/')
			rel++;
		if (!*rel)
			continue;
		mode_t type = archive_entry_filetype(e);
		if (strip_entry(e, &im->stripped))
			continue;   /* a device node: see layer_extract */
		/* Content bytes, as for a tar layer: a directory's st_size (4096
		 * and up, by its entries) is not content, and counted it made a
		 * small limit refuse the first directory, named as too big. */
		uint64_t size = type == AE_IFREG ? (uint64_t) archive_entry_size(e) : 0;
		if (++im->entries > im->max_entries || size > im->max_bytes - im->bytes) {
			r = import_err(im, err, EFBIG, rel, "refused: the image would exceed the size limits");
			break;
		}
		im->bytes += size;
		char full[PATH_MAX * 2];
		import_path_fmt(full, sizeof(full), "%s/%s", im->root, rel);
		archive_entry_set_pathname(e, full);
		if (archive_write_header(w, e) != ARCHIVE_OK) {
			r = import_err(im, err, EIO, rel, archive_error_string(w) ? archive_error_string(w) : "cannot be written");
			break;
		}
		if (type == AE_IFREG && archive_entry_size(e) > 0) {
			/* Beneath the source with no symlink, O_NONBLOCK and
			 * fstat: a file swapped since it was listed (for a
			 * symlink out, or a FIFO) is neither followed nor waited
			 * on. The source itself is the user's chosen location. */
			int fd = open_beneath(src_fd, rel, O_RDONLY | O_NONBLOCK, 0);
			struct stat fst;
			if (fd >= 0 && (fstat(fd, &fst) < 0 || !S_ISREG(fst.st_mode))) {
				close(fd);
				fd = -1;
				errno = EPERM;
			}
			char chunk[65536];
			ssize_t n;
			while (fd >= 0 && (n = read(fd, chunk, sizeof(chunk))) > 0)
				if (archive_write_data(w, chunk, (size_t) n) < 0)
					break;
			if (fd < 0)
				r = import_err(im, err, errno, rel, "cannot be read");
			else
				close(fd);
		}
		(void) archive_write_finish_entry(w);
	}
	/* The walk ends at EOF, or where libarchive could not go on (a
	 * directory the caller cannot read): a partial copy is no image. */
	if (r == 0 && rr != ARCHIVE_EOF)
		r = import_err(im, err, EACCES, NULL, archive_error_string(rd) ? archive_error_string(rd) : "cannot be read");
	archive_entry_free(e);
	archive_read_free(rd);
	archive_write_free(w);
	return r;
}

/* Is there an entry of that name (of any kind: opening it says more)? */
static bool has(int dirfd, const char *file)
{
	struct stat st;
	return fstatat(dirfd, file, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* A layout in directory `dir`: OCI or docker save; 1 when neither. */
static int import_layout(importer *im, int dir, bool tar, const char **kind, nsbox_error **err)
{
	if (has(dir, "oci-layout") && has(dir, "index.json")) {
		*kind = tar ? "OCI layout (tar)" : "OCI layout (directory)";
		return import_oci(im, dir, err);
	}
	if (has(dir, "manifest.json")) {
		*kind = tar ? "docker save" : "docker save (directory)";
		return import_docker_save(im, dir, err);
	}
	return 1;
}

/* Is this tar an image archive (manifest.json / oci-layout at its top)? */
static int is_image_archive(int fd)
{
	struct archive *a = layer_reader(fd);
	if (!a)
		return -EINVAL;
	struct archive_entry *e;
	bool image = false;
	while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
		const char *n = archive_entry_pathname(e);
		n += n && n[0] == '.' && n[1] == '/' ? 2 : 0;
		image |= n && (!strcmp(n, "manifest.json") || !strcmp(n, "oci-layout"));
	}
	archive_read_free(a);
	return image;
}

/* What kind of source is it? Sets *kind. The source path is the user's
 * choice of location and is opened as given; everything inside it (or
 * inside the outer archive) is opened beneath it, without symlinks. */
static int import_any(importer *im, const char *source, const char *scratch, const char **kind,
                      nsbox_error **err)
{
	_cleanup_close_ int src = open(source, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (src < 0 || fstat(src, &st) < 0)
		return nsbox_err(err, errno, "image", "import '%s'", source);
	if (S_ISDIR(st.st_mode)) {
		int r = import_layout(im, src, false, kind, err);
		if (r <= 0)
			return r;
		*kind = "directory";
		return import_dir(im, src, source, err);
	}
	if (!S_ISREG(st.st_mode))
		return import_err(im, err, EINVAL, NULL, "not a directory nor a regular file");
	int image = is_image_archive(src);
	if (image < 0)
		return import_err(im, err, EINVAL, NULL, "not a directory nor a tar archive (plain or compressed)");
	if (!image) {
		*kind = "tar (docker export)";
		return layer_apply_fd(im, src, err);
	}
	_cleanup_close_ int sfd = open(scratch, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0)
		return nsbox_err(err, errno, "image", "import '%s': open '%s'", source, scratch);
	int r = unpack_outer(im, src, scratch, sfd, err);
	r = r ?: import_layout(im, sfd, true, kind, err);
	return r == 1 ? import_err(im, err, EINVAL, NULL, "an image archive without a usable manifest") : r;
}

/* Docker binds /etc/resolv.conf into its containers at run time, so image
 * layers rarely carry one; --network user needs a file to bind its resolver
 * over (the root is read-only). Add an empty one where /etc is a real
 * directory with nothing of that name (a symlink is the image's choice). */
static void add_resolv_conf(int root_fd)
{
	int dir = open_beneath(root_fd, "etc", O_PATH | O_DIRECTORY, BENEATH_NO_XDEV);
	if (dir < 0)
		return;
	int f = openat(dir, "resolv.conf", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (f >= 0) {
		(void) fchmod(f, 0644);
		close(f);
	}
	close(dir);
}

static uint64_t env_u64(const char *name, uint64_t def)
{
	const char *v = getenv(name);
	char *e;
	uint64_t n = v ? strtoull(v, &e, 10) : 0;
	return v && !*e && n ? n : def;
}

int nsbox_image_import(const char *name, const char *source, nsbox_error **err)
{
	return image_import_as(name, source, NULL, err);
}

int image_import_as(const char *name, const char *source, const char *label, nsbox_error **err)
{
	if (!image_name_valid(name))
		return nsbox_err_invalid(err, "image", "import: '%s' is not an image name (letters, digits, '.', '_', '-')", name ? name : "");
	if (!source)
		return nsbox_err(err, EINVAL, "image", "import: no source");
	_cleanup_free_ char *store = image_store(false);
	if (!store)
		return nsbox_err(err, ENOENT, "image", "import: no image store (HOME is not set)");
	(void) mkdir_p(store, 0755);   /* failures show at realpath below */
	/* No symlink above the image: see layer_extract. */
	char canon[PATH_MAX];
	if (!realpath(store, canon))
		return nsbox_err(err, errno, "image", "resolve the image store '%s'", store);
	free(store);
	store = strdup(canon);
	if (!store)
		return nsbox_err(err, ENOMEM, "image", "import '%s'", source);
	image_reap(store);
	char final[PATH_MAX * 2], tmp[PATH_MAX], scratch[PATH_MAX * 2];
	import_path_fmt(final, sizeof(final), "%s/%s", store, name);
	if (access(final, F_OK) == 0)
		return nsbox_err_hint(err, EEXIST, "image", "remove it first with 'nsbox image rm NAME'",
		                      "import '%s': image '%s' exists", source, name);
	import_path_fmt(tmp, sizeof(tmp), "%s/.import-%s-%d", store, name, (int) getpid());
	import_path_fmt(scratch, sizeof(scratch), "%s/scratch", tmp);
	importer im = { .source = source, .root_fd = -1, .rootless = geteuid() != 0,
	                .max_bytes = env_u64("NSBOX_IMPORT_MAX_BYTES", 16ull << 30),
	                .max_entries = env_u64("NSBOX_IMPORT_MAX_ENTRIES", 2000000) };
	import_path_fmt(im.root, sizeof(im.root), "%s/rootfs", tmp);
	(void) remove_tree(tmp);
	/* Private until installed: nobody else may reach a half-made image. */
	int r = mkdir(tmp, 0700) < 0 ? nsbox_err(err, errno, "image", "create '%s'", tmp) : 0;
	/* Ours while we work: image_reap leaves a locked one alone. */
	_cleanup_close_ int lock = r == 0 ? image_tmp_lock(tmp) : -1;
	if (r == 0 && lock < 0)
		r = nsbox_err(err, -lock, "image", "lock '%s'", tmp);
	if (r == 0 && (mkdir(im.root, 0755) < 0 || mkdir(scratch, 0700) < 0))
		r = nsbox_err(err, errno, "image", "create '%s'", tmp);
	if (r == 0 && (im.root_fd = open(im.root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		r = nsbox_err(err, errno, "image", "open '%s'", im.root);
	const char *kind = "?";
	r = r ?: import_any(&im, source, scratch, &kind, err);
	(void) remove_tree(scratch);
	/* A last pass over what is on disk, whatever wrote it. */
	int sr = r == 0 ? strip_tree(im.root_fd, &im.stripped) : 0;
	if (sr < 0)
		r = nsbox_err(err, -sr, "image", "import '%s': strip set-id bits and device nodes", source);
	if (r == 0)
		add_resolv_conf(im.root_fd);
	/* Root's store: no host user may own a file of it. */
	if (r == 0 && !im.rootless)
		r = image_shift_owners(im.root_fd, false, source, err);
	if (r == 0) {
		char src[PATH_MAX + 64];
		if (label)
			import_path_fmt(src, sizeof(src), "%.3900s", label);
		else
			import_path_fmt(src, sizeof(src), "import of %s %.3900s", kind, source);
		r = image_write_meta(tmp, name, src, &im.stripped, err);
	}
	if (r == 0 && chmod(tmp, 0755) < 0)
		r = nsbox_err(err, errno, "image", "import '%s': chmod '%s'", source, tmp);
	r = r ?: image_install(store, name, tmp, false, err);
	if (im.root_fd >= 0)
		close(im.root_fd);
	if (r < 0)
		(void) remove_tree(tmp);
	return r;
}
