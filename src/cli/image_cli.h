/* `nsbox image`: shared between image.c and image_build.c. */
#ifndef NSBOX_IMAGE_CLI_H
#define NSBOX_IMAGE_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "nsbox.h"

#define IMAGE_CLI_MAX 256

/* What `nsbox image build` was given for a declarative build. */
typedef struct image_build_cli {
	nsbox_image_build_options o;
	bool json;
	const char *from;
	const char *file;
	const char *context;
	const char *allow[IMAGE_CLI_MAX];
	size_t n_allow;
	struct {
		const char *kind, *arg, *opt;
	} steps[IMAGE_CLI_MAX];
	size_t n_steps;
} image_build_cli;

/* A debootstrap build (o.spec NULL) or one from a spec; the exit status. */
int image_build(nsbox_image_build_options o, bool json);
int image_build_spec(image_build_cli *c);
/* "nsbox: image 'NAME': sha256:..., N MiB at PATH" on stderr. */
int image_describe(const char *name);
/* The image as one JSON object on stdout, with `extra`'s members (taken). */
int image_print_json(const char *name, json_t *extra);

#endif
