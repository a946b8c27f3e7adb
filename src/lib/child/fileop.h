/* The files API's operations inside a long-lived sandbox (fileop.c) and
 * the records they write, read by the host side (sandbox/files.c). */
#ifndef NSBOX_CHILD_FILEOP_H
#define NSBOX_CHILD_FILEOP_H

#include <stdint.h>

#define FILEOP_NAME_MAX 4096

/* One directory entry (list, stat), followed by name_len bytes of name. */
typedef struct fileop_entry {
	uint32_t mode;          /* st_mode: type and permissions */
	uint16_t name_len;
	uint16_t pad;
	uint64_t size;
	int64_t mtime_sec;
	uint32_t mtime_nsec;
	uint32_t pad2;
} fileop_entry;

/* Run argv (OP PATH [ARGS]) in the payload, after its setup, instead of
 * execve: 0, or the errno of the failure (the exec's exit status). */
int fileop_run(char *const *argv);

#endif
