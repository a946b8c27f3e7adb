/* The archive half of image_strip.h: a member is stripped before it is
 * written. Part of the import module (libnsbox-import), the only code that
 * links libarchive; strip_tree stays in libnsbox for built images. */
#include <string.h>

#include <archive.h>
#include <archive_entry.h>

#include "image/image_strip.h"

bool strip_entry(struct archive_entry *e, image_stripped *s)
{
	mode_t type = archive_entry_filetype(e);
	if (type == AE_IFCHR || type == AE_IFBLK) {
		s->devices++;
		return true;
	}
	/* A setgid directory only makes new files inherit its group: kept. */
	mode_t perm = archive_entry_perm(e);
	if (type != AE_IFDIR && (perm & 06000)) {
		s->setid++;
		perm &= ~(mode_t) 06000;
	}
	/* The store is traversable by every local user: nothing in it may be
	 * writable by group or others (an image's 1777 /var/tmp would be a
	 * shared drop box). The root is read-only inside, so nothing is lost. */
	if (type != AE_IFLNK)
		perm &= ~(mode_t) 022;
	archive_entry_set_perm(e, perm);
	const char *name;
	const void *value;
	size_t size;
	archive_entry_xattr_reset(e);
	while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK)
		if (!strcmp(name, "security.capability"))
			s->caps++;
	/* We never ask libarchive to restore extended attributes either
	 * (no ARCHIVE_EXTRACT_XATTR): this keeps them out even if one does. */
	archive_entry_xattr_clear(e);
	return false;
}
