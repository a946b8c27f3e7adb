/* A main() for the harnesses without libFuzzer: each argument is an input
 * file, or a directory whose files are inputs (in name order), run once
 * through LLVMFuzzerTestOneInput. `make check` replays the corpus with it,
 * so every input kept there (the seeds, and each crash found and fixed)
 * stays a deterministic regression test under the normal build. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

static int run_file(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "replay: open '%s': %s\n", path, strerror(errno));
		return -1;
	}
	size_t size = (size_t) st.st_size;
	uint8_t *data = malloc(size ? size : 1);
	size_t got = 0;
	while (data && got < size) {
		ssize_t n = read(fd, data + got, size - got);
		if (n <= 0)
			break;
		got += (size_t) n;
	}
	close(fd);
	if (!data || got != size) {
		fprintf(stderr, "replay: read '%s' failed\n", path);
		free(data);
		return -1;
	}
	if (getenv("FUZZ_REPLAY_VERBOSE"))
		fprintf(stderr, "replay: %s\n", path);
	(void) LLVMFuzzerTestOneInput(data, size);
	free(data);
	return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
	fuzz_replaying = true;
	(void) LLVMFuzzerInitialize(&argc, &argv);
	int n = 0, failed = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "replay: '%s': %s\n", argv[i], strerror(errno));
			failed++;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			failed += run_file(argv[i]) < 0;
			n++;
			continue;
		}
		struct dirent **list;
		int m = scandir(argv[i], &list, NULL, by_name);
		if (m < 0) {
			fprintf(stderr, "replay: list '%s': %s\n", argv[i], strerror(errno));
			failed++;
			continue;
		}
		for (int k = 0; k < m; k++) {
			char path[4096];
			snprintf(path, sizeof(path), "%s/%s", argv[i], list[k]->d_name);
			if (list[k]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
				failed += run_file(path) < 0;
				n++;
			}
			free(list[k]);
		}
		free(list);
	}
	printf("%s: replayed %d inputs%s\n", argv[0], n, failed ? " (some could not be read)" : "");
	return failed ? 1 : 0;
}
