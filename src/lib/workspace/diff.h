/* The unified-diff writer behind `nsbox session diff` and Session.diff():
 * the line diff (diff_lines.c) and the session's patch (diff.c). */
#ifndef NSBOX_DIFF_H
#define NSBOX_DIFF_H

#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"

/* Lines of context around a change, as diff -u and git write. */
#define DIFF_CONTEXT 3

/* Append the hunks ("@@ -l,s +l,s @@" and their lines) that turn the text
 * `a` (alen bytes) into `b`, as GNU patch applies them: a last line without
 * a newline is followed by "\ No newline at end of file". With `escape`,
 * control characters in the lines (but tab) are shown as \xNN, for a
 * terminal; the hunks then no longer apply byte for byte. Texts that differ
 * a great deal get a correct but longer diff rather than an unbounded
 * search. Returns 0 or -ENOMEM. */
int diff_hunks(buf *out, const char *a, size_t alen, const char *b, size_t blen, bool escape);

/* Append `s` as a terminal may show it: C0 controls (but tab), DEL and C1
 * controls as \xNN. */
void diff_escape_line(buf *out, const char *s, size_t len);

/* Append prefix + name as git writes a path in a patch: as is, or quoted
 * ("a/\033x") with C escapes and octal for control characters, '"', '\\'
 * and every byte >= 0x80 (what git's core.quotePath does, and GNU patch
 * reads), so that a name can neither drive a terminal nor break a line. */
void diff_quote_name(buf *out, const char *prefix, const char *name);

#endif
