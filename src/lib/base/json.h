/* JSON string encoding. Invalid UTF-8 is replaced by U+FFFD and reported. */
#ifndef NSBOX_JSON_H
#define NSBOX_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"

/* Append `s` (len bytes, any content) as a quoted JSON string (not named
 * json_string: that is jansson's, and `nsbox mcp` links both). Returns true
 * when some bytes were not valid UTF-8 and were replaced. */
bool json_strn(buf *b, const char *s, size_t len);
void json_cstr(buf *b, const char *s);   /* NULL -> null */

#endif
