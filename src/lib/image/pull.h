/* Registry references (pull.c). */
#ifndef NSBOX_IMAGE_PULL_H
#define NSBOX_IMAGE_PULL_H

typedef struct image_ref {
	char repo[512];       /* the reference as skopeo's docker:// takes it */
	char registry[256];   /* "" for Docker Hub */
	char path[512];       /* "library/alpine", "o/app" */
	char tag[129];        /* "" when none */
	char digest[72];      /* "sha256:..." or "" */
} image_ref;

/* [docker://][REGISTRY/]PATH[:TAG][@sha256:HEX]: 0, or -EINVAL. */
int image_ref_parse(const char *in, image_ref *out);

#endif
