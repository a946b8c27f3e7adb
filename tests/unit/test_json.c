#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "unit.h"

static char *enc(const char *s, size_t n, bool *replaced)
{
	buf b = { 0 };
	*replaced = json_strn(&b, s, n);
	return buf_steal(&b);
}

static const struct { const char *in; size_t len; const char *out; bool replaced; } cases[] = {
	{ "plain", 5, "\"plain\"", false },
	{ "q\"b\\", 4, "\"q\\\"b\\\\\"", false },
	{ "a\nb\tc\r", 6, "\"a\\nb\\tc\\r\"", false },
	{ "\x01\x1f\x7f", 3, "\"\\u0001\\u001f\\u007f\"", false },
	{ "nul\0x", 5, "\"nul\\u0000x\"", false },
	{ "caf\xc3\xa9", 5, "\"caf\xc3\xa9\"", false },
	{ "\xf0\x9f\x98\x80", 4, "\"\xf0\x9f\x98\x80\"", false },
	{ "bad\xff", 4, "\"bad\xef\xbf\xbd\"", true },
	{ "\xc0\xaf", 2, "\"\xef\xbf\xbd\xef\xbf\xbd\"", true },           /* overlong '/' */
	{ "\xed\xa0\x80", 3, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"", true },   /* surrogate */
	{ "\xc3", 1, "\"\xef\xbf\xbd\"", true },                           /* truncated */
	{ "\xf4\x90\x80\x80", 4, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"", true },
	/* Line breaks to YAML (NEL, LS, PS), C1 controls and non-characters:
	 * escaped, or a policy shown by 'nsbox policy show' (YAML
	 * double-quoted scalars) would not read back the same (tests/fuzz). */
	{ "a\xc2\x85" "b\xe2\x80\xa8" "c\xe2\x80\xa9", 11, "\"a\\u0085b\\u2028c\\u2029\"", false },
	{ "\xc2\x80\xc2\x9f\xc2\xa0", 6, "\"\\u0080\\u009f\xc2\xa0\"", false },
	{ "\xef\xbb\xbf\xef\xbf\xbe\xef\xbf\xbf", 9, "\"\\ufeff\\ufffe\\uffff\"", false },
};

START_TEST(test_encoding)
{
	bool replaced;
	char *out = enc(cases[_i].in, cases[_i].len, &replaced);
	ck_assert_str_eq(out, cases[_i].out);
	ck_assert(replaced == cases[_i].replaced);
	free(out);
}
END_TEST

START_TEST(test_null)
{
	buf b = { 0 };
	json_cstr(&b, NULL);
	char *s = buf_steal(&b);
	ck_assert_str_eq(s, "null");
	free(s);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("json");
	tcase_add_loop_test(tc, test_encoding, 0, sizeof(cases) / sizeof(cases[0]));
	tcase_add_test(tc, test_null);
	return unit_run("json", tc);
}
