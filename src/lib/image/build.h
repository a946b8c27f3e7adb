/* Declarative image builds: an image from another one and a list of steps
 * (image_spec.c reads them from the command line, a YAML image file or a
 * Dockerfile; build_steps.c runs each in a sandbox, caching the layers,
 * build_step.c one of them; build_layers.c makes the image of the
 * layers). */
#ifndef NSBOX_IMAGE_BUILD_H
#define NSBOX_IMAGE_BUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/strv.h"
#include "nsbox.h"

enum build_kind {
	BK_APT,       /* args: packages */
	BK_PIP,       /* args: pip install's arguments (packages, options) */
	BK_NPM,       /* args: npm install -g's arguments */
	BK_COPY,      /* args: SRC... DST */
	BK_RUN,       /* args: one shell command */
	BK_EXEC,      /* args: argv (a Dockerfile's exec form) */
	BK_ENV,       /* args: NAME=VALUE... (for the steps after it) */
	BK_WORKDIR,   /* args: an absolute directory (made, and the steps' cwd) */
	BK_USER,      /* args: USER[:GROUP] (the RUN steps' identity) */
	BK__MAX
};

typedef struct build_step {
	enum build_kind kind;
	strv args;
	char *origin;   /* where it was given: "--apt", "Dockerfile:7", "img.yaml:4:5" */
} build_step;

struct nsbox_image_spec {
	char *from;
	char *from_origin;
	char *context;    /* COPY's sources: relative to it, never outside */
	build_step *steps;
	size_t n_steps;
	strv allow;       /* hosts every step may reach besides its own */
};

extern const char *const build_kind_names[BK__MAX];

/* Steps from the text of a Dockerfile / a YAML image file named `origin`. */
int spec_parse_dockerfile(nsbox_image_spec *s, const char *origin, const char *text, size_t len,
                          nsbox_error **err);
int spec_parse_yaml(nsbox_image_spec *s, const char *origin, const char *text, size_t len,
                    nsbox_error **err);
int spec_add(nsbox_image_spec *s, enum build_kind kind, const strv *args, const char *origin,
             nsbox_error **err);
/* A step as a line for progress and errors ("RUN make", "apt-get install
 * gcc"); malloc'ed, NULL on allocation failure. */
char *build_step_text(const build_step *st);

/* build_steps.c: run a declarative build (nsbox_image_build with a spec). */
int build_from_spec(const nsbox_image_build_options *o, nsbox_error **err);

/* build_layers.c: the image's root filesystem at dest_fd (empty) from the
 * base's tree and the layers' upper directories, bottom first: copies, then
 * applies each layer's changes (overlayfs whiteouts and opaque
 * directories). Everything is read and written through directory fds,
 * never following a link. `keep_owners`: copy the owners (root's store). */
int layers_flatten(int base_fd, const int *upper_fds, size_t n, int dest_fd, bool keep_owners,
                   nsbox_error **err);

#endif
