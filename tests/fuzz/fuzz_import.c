/* Image import of an archive: the input is written to a file in the
 * scratch directory and imported through nsbox_image_import, the real
 * path of `nsbox image import NAME FILE` (format detection, docker save and
 * OCI layouts unpacked from the outer tar, whiteouts, the secure
 * extraction, stripping, publishing). Sizes are bounded low so that a
 * compression bomb costs little (the limits are the same code). */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > (1 << 20))
		return 0;
	static bool init;
	if (!init) {
		setenv("NSBOX_IMPORT_MAX_BYTES", "33554432", 1);
		setenv("NSBOX_IMPORT_MAX_ENTRIES", "4096", 1);
		init = true;
	}
	fuzz_scratch_reset();
	int dir = open(fuzz_scratch_dir(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	FUZZ_CHECK(dir >= 0);
	FUZZ_CHECK(fuzz_write_file(dir, "input", data, size, 0644) == 0);
	close(dir);
	char source[4096];
	snprintf(source, sizeof(source), "%s/input", fuzz_scratch_dir());
	fuzz_import_check("fuzz", source);
	return 0;
}
