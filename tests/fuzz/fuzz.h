/* Shared by the fuzz harnesses (tests/fuzz/fuzz_*.c). Each harness is
 * built twice: with libFuzzer (`make fuzz`, clang), and with driver.c's
 * main(), which runs the inputs named on its command line once each
 * (`make check` replays the corpus that way, with the normal compiler). */
#ifndef NSBOX_FUZZ_H
#define NSBOX_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A harness's own assertion: a broken promise of the code under test is a
 * crash like any sanitizer report, so that libFuzzer keeps the input. */
#define FUZZ_CHECK(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* Set by driver.c: replaying known inputs, not fuzzing. */
extern bool fuzz_replaying;

/* A NUL-terminated copy of the input (aborts on allocation failure). */
char *fuzz_cstr(const uint8_t *data, size_t size);

/* The next piece of the input up to `sep` (or the end): its start and
 * length, and the input advanced past it. false when nothing is left. */
bool fuzz_next(const uint8_t **data, size_t *size, uint8_t sep, const uint8_t **piece, size_t *len);

/* Private scratch space for harnesses that need files, set up on the first
 * call: as root, a tmpfs over nsbox's system image store in a mount
 * namespace of our own (the store is where an import as root writes; a
 * harness must not touch the host's), with the rest of the file system
 * read-only while fuzzing except where libFuzzer writes (an extraction bug
 * must not reach the host); otherwise XDG_DATA_HOME in a temporary
 * directory. Returns the image store's path; fuzz_scratch_dir() is an
 * empty directory beside it for the harness's own files. */
const char *fuzz_store(void);
const char *fuzz_scratch_dir(void);
/* Remove everything in the scratch directory (the store is the harness's
 * to check and clean). */
void fuzz_scratch_reset(void);
/* Write a file below `dirfd` (parents created, nothing followed). */
int fuzz_write_file(int dirfd, const char *rel, const void *data, size_t len, unsigned mode);

#endif

/* Image import harnesses: import `source` as image `name` into fuzz_store()
 * through nsbox_image_import; on success check what the image may not
 * carry (device nodes, set-id bits, file capabilities, anything writable
 * by group or others) and remove it with nsbox_image_remove. Either way,
 * nothing but the scratch directory may be left in the store. */
void fuzz_import_check(const char *name, const char *source);
