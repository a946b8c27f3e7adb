/* What an image may not carry onto the host, and fd-anchored file
 * operations beneath an image's root (image_strip.c). */
#ifndef NSBOX_IMAGE_STRIP_H
#define NSBOX_IMAGE_STRIP_H

#include <stdbool.h>

struct archive_entry;

/* What was removed from an image before it was published. */
typedef struct image_stripped {
	unsigned long setid;         /* setuid/setgid bits on non-directories */
	unsigned long caps;          /* security.capability attributes */
	unsigned long devices;       /* character and block device nodes */
	bool keep_whiteouts;         /* a build's layer: its overlayfs whiteouts
	                              * (character devices 0/0) stay */
} image_stripped;

/* An archive member about to be written: clears its setuid/setgid bits and
 * every extended attribute, counting. True when it is a device node, which
 * the caller drops (the sandbox makes its own /dev). In the import module
 * (image_strip_entry.c), with libarchive. */
bool strip_entry(struct archive_entry *e, image_stripped *s);
/* The same on a tree already on disk (debootstrap's output; and a last pass
 * over every import): beneath `dirfd`, never following a link nor leaving
 * its filesystem. 0 or -errno. */
int strip_tree(int dirfd, image_stripped *s);

#endif
