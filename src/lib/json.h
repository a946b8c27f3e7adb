/* JSON string encoding. Invalid UTF-8 is replaced by U+FFFD and reported. */
#ifndef NSBOX_JSON_H
#define NSBOX_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

/* Append `s` (len bytes, any content) as a quoted JSON string. Returns true
 * when some bytes were not valid UTF-8 and were replaced. */
bool json_string(buf *b, const char *s, size_t len);
void json_cstr(buf *b, const char *s);   /* NULL -> null */

#endif
