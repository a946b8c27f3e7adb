/* Policy files (YAML): loaded over the defaults as `nsbox run --policy`
 * does. A policy that loads must render (`nsbox policy show`) to YAML that
 * loads again to the same configuration: the rendering is documented as a
 * valid policy file, and a round trip that drifts would change what a
 * shown policy means. */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "nsbox.h"

/* Load `text` as a policy from a memfd (the loader takes a path). */
static int load(const char *text, size_t len, nsbox_config **cfg, nsbox_error **err)
{
	int fd = memfd_create("fuzz-policy", MFD_CLOEXEC);
	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(len == 0 || write(fd, text, len) == (ssize_t) len);
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	FUZZ_CHECK(nsbox_config_new(cfg, NULL) == 0);
	int r = nsbox_config_load_policy(*cfg, path, err);
	close(fd);
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 65536)
		return 0;
	nsbox_config *cfg = NULL, *again = NULL;
	nsbox_error *err = NULL;
	char *y1 = NULL, *y2 = NULL;
	if (load((const char *) data, size, &cfg, &err) < 0) {
		FUZZ_CHECK(err && nsbox_error_message(err) && *nsbox_error_message(err));
		FUZZ_CHECK(nsbox_error_errno(err) > 0);
		goto out;
	}
	FUZZ_CHECK(nsbox_config_to_yaml(cfg, &y1, NULL) == 0);
	if (load(y1, strlen(y1), &again, &err) < 0) {
		fprintf(stderr, "the rendered policy does not load: %s\n---\n%s", nsbox_error_message(err), y1);
		abort();
	}
	FUZZ_CHECK(nsbox_config_to_yaml(again, &y2, NULL) == 0);
	if (strcmp(y1, y2)) {
		fprintf(stderr, "the rendered policy changes when loaded again:\n---\n%s---\n%s", y1, y2);
		abort();
	}
out:
	nsbox_error_free(err);
	nsbox_config_free(cfg);
	nsbox_config_free(again);
	free(y1);
	free(y2);
	return 0;
}
