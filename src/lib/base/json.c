#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"

/* Length of the valid UTF-8 sequence at s (1-4), or 0 if invalid. Rejects
 * overlong forms, surrogates and code points above U+10FFFF (RFC 3629). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t len;
	uint32_t min, cp;
	if (c < 0x80)
		return 1;
	if ((c & 0xe0) == 0xc0) {
		len = 2; min = 0x80; cp = c & 0x1f;
	} else if ((c & 0xf0) == 0xe0) {
		len = 3; min = 0x800; cp = c & 0x0f;
	} else if ((c & 0xf8) == 0xf0) {
		len = 4; min = 0x10000; cp = c & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* The code point of a valid sequence of n bytes. */
static uint32_t code_point(const unsigned char *s, size_t n)
{
	uint32_t cp = n == 1 ? s[0] : s[0] & (0x7f >> n);
	for (size_t i = 1; i < n; i++)
		cp = (cp << 6) | (s[i] & 0x3f);
	return cp;
}

bool json_strn(buf *b, const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *) str;
	bool replaced = false;
	size_t run = 0;   /* start of a run of bytes copied verbatim */
	buf_append(b, "\"", 1);
	for (size_t i = 0; i < len;) {
		unsigned char c = s[i];
		const char *esc = NULL;
		char tmp[8];
		size_t n = 1;
		if (c == '"')
			esc = "\\\"";
		else if (c == '\\')
			esc = "\\\\";
		else if (c == '\n')
			esc = "\\n";
		else if (c == '\t')
			esc = "\\t";
		else if (c == '\r')
			esc = "\\r";
		else if (c < 0x20 || c == 0x7f) {
			snprintf(tmp, sizeof(tmp), "\\u%04x", c);
			esc = tmp;
		} else if (c >= 0x80) {
			n = utf8_seq(s + i, len - i);
			uint32_t cp = 0;
			if (n == 0) {
				esc = "\xef\xbf\xbd";   /* U+FFFD */
				replaced = true;
				n = 1;
			} else if ((cp = code_point(s + i, n)) <= 0x9f || cp == 0x2028 || cp == 0x2029 ||
			           cp == 0xfeff || cp == 0xfffe || cp == 0xffff) {
				/* C1 controls, line and paragraph separators, the BOM
				 * and non-characters: valid JSON as they are, but YAML
				 * (`nsbox policy show` writes these strings as its
				 * double-quoted scalars) folds NEL and the separators
				 * as line breaks and refuses the others. */
				snprintf(tmp, sizeof(tmp), "\\u%04x", (unsigned) cp);
				esc = tmp;
			}
		}
		if (esc) {
			buf_append(b, s + run, i - run);
			buf_puts(b, esc);
			run = i + n;
		}
		i += n;
	}
	buf_append(b, s + run, len - run);
	buf_append(b, "\"", 1);
	return replaced;
}

void json_cstr(buf *b, const char *s)
{
	if (!s)
		buf_puts(b, "null");
	else
		json_strn(b, s, strlen(s));
}
