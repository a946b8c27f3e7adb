/* The state of one declarative build (build_steps.c), shared with
 * build_step.c, which plans and runs one of its steps. */
#ifndef NSBOX_IMAGE_BUILD_STEPS_H
#define NSBOX_IMAGE_BUILD_STEPS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/strv.h"
#include "image/build.h"
#include "image/image_digest.h"
#include "nsbox.h"

#define KEY_HEX 32

typedef struct builder {
	const nsbox_image_build_options *o;
	const nsbox_image_spec *spec;
	const char *name;
	bool rootless;
	char *store;
	char layers[PATH_MAX];
	char base[PATH_MAX];        /* the base image's rootfs */
	char base_rel[PATH_MAX];    /* ...relative to layers/ */
	char base_digest[IMAGE_DIGEST_LEN];
	int base_fd;
	int layers_fd;
	int context_fd;             /* O_PATH */
	uid_t host_uid;             /* the step's root as the host sees it */
	gid_t host_gid;
	/* per step */
	char (*key)[KEY_HEX + 1];
	bool *makes_layer;
	/* the layers made so far, top first: fds and names */
	int *upper_fds;
	size_t n_upper;
	/* the state ENV, WORKDIR and USER leave */
	strv env;
	char *workdir;
	char *user;
	nsbox_error **err;
} builder;

/* A COPY source beneath the context: never outside it, by '..' or a
 * symlink. O_PATH fd, or -errno with the error set. */
int build_copy_source(builder *b, const build_step *st, const char *src);
/* A path as WORKDIR `cur` (NULL: /) sees it; malloc'ed. */
char *build_join_workdir(const char *cur, const char *path);

/* build_step.c: run step i (`text`: its line, for errors) into a new
 * layer, named by its key once it succeeded. */
int build_run_step(builder *b, size_t i, const char *text);

#endif
