/* Image manifests: docker save's manifest.json and an OCI layout's
 * index.json with the (nested) index and manifest it points to, as a
 * directory imported through nsbox_image_import. The input: a mode byte
 * ('d' docker save, anything else OCI), then NUL-separated pieces:
 *   docker: manifest.json
 *   OCI:    index.json, blobs/sha256/m1, blobs/sha256/m2
 * Beside them the harness lays out layers a manifest may name: valid tars
 * (layer.tar, blobs/sha256/l1), a symlink to a host file (sym.tar,
 * blobs/sha256/l2), a FIFO (fifo.tar, blobs/sha256/l3) and a directory. */
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

/* A small valid layer: etc/hostname and bin/sh -> busybox. */
static void *layer;
static size_t layer_len;

static void make_layer(void)
{
	static char mem[16384];
	struct archive *a = archive_write_new();
	FUZZ_CHECK(a && archive_write_set_format_pax_restricted(a) == ARCHIVE_OK);
	FUZZ_CHECK(archive_write_open_memory(a, mem, sizeof(mem), &layer_len) == ARCHIVE_OK);
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, "etc/hostname");
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, 5);
	FUZZ_CHECK(archive_write_header(a, e) == ARCHIVE_OK && archive_write_data(a, "fuzz\n", 5) == 5);
	archive_entry_clear(e);
	archive_entry_set_pathname(e, "bin/sh");
	archive_entry_set_filetype(e, AE_IFLNK);
	archive_entry_set_perm(e, 0777);
	archive_entry_set_symlink(e, "busybox");
	FUZZ_CHECK(archive_write_header(a, e) == ARCHIVE_OK);
	archive_entry_free(e);
	FUZZ_CHECK(archive_write_close(a) == ARCHIVE_OK);
	archive_write_free(a);
	layer = mem;
}

static void lay_out(int dir, bool docker)
{
	const char *valid = docker ? "layer.tar" : "blobs/sha256/l1";
	const char *sym = docker ? "sym.tar" : "blobs/sha256/l2";
	const char *fifo = docker ? "fifo.tar" : "blobs/sha256/l3";
	FUZZ_CHECK(fuzz_write_file(dir, valid, layer, layer_len, 0644) == 0);
	FUZZ_CHECK(fuzz_write_file(dir, docker ? "sub/layer.tar" : "blobs/sha256/l4", layer, layer_len, 0644) == 0);
	FUZZ_CHECK(symlinkat("/etc/passwd", dir, sym) == 0);
	FUZZ_CHECK(mkfifoat(dir, fifo, 0644) == 0);
	FUZZ_CHECK(mkdirat(dir, docker ? "dir.tar" : "blobs/sha256/l5", 0755) == 0);
	if (!docker)
		FUZZ_CHECK(fuzz_write_file(dir, "oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}", 30, 0644) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 65536)
		return 0;
	if (!layer)
		make_layer();
	bool docker = data[0] == 'd';
	fuzz_scratch_reset();
	int dir = open(fuzz_scratch_dir(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	FUZZ_CHECK(dir >= 0);
	FUZZ_CHECK(mkdirat(dir, "layout", 0755) == 0);
	int lay = openat(dir, "layout", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	FUZZ_CHECK(lay >= 0);
	FUZZ_CHECK(fuzz_write_file(lay, docker ? "blobs/.keep" : "blobs/sha256/.keep", "", 0, 0644) == 0);
	lay_out(lay, docker);
	static const char *const docker_files[] = { "manifest.json" };
	static const char *const oci_files[] = { "index.json", "blobs/sha256/m1", "blobs/sha256/m2" };
	const char *const *files = docker ? docker_files : oci_files;
	size_t n_files = docker ? 1 : 3;
	const uint8_t *rest = data + 1, *piece;
	size_t left = size - 1, len;
	for (size_t i = 0; i < n_files && fuzz_next(&rest, &left, 0, &piece, &len); i++)
		FUZZ_CHECK(fuzz_write_file(lay, files[i], piece, len, 0644) == 0);
	close(lay);
	close(dir);
	char source[4096];
	snprintf(source, sizeof(source), "%s/layout", fuzz_scratch_dir());
	fuzz_import_check("fuzz", source);
	return 0;
}
