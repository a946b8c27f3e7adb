/* Sizes, durations, CPU counts, integers and booleans: the values of
 * options, NSBOX_* variables and policy keys. What is accepted must come
 * back unchanged through its own rendering (`nsbox policy show` writes
 * these, and its output must load as the same policy). */
#include <string.h>

#include "fuzz.h"
#include "nsbox.h"
#include "base/units.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 512)
		return 0;
	char *s = fuzz_cstr(data, size);
	char out[64];
	uint64_t v, w;
	double d;
	bool b;
	if (parse_size(s, &v) == 0) {
		format_size(v, out, sizeof(out));
		FUZZ_CHECK(parse_size(out, &w) == 0 && w == v);
		FUZZ_CHECK(nsbox_parse_size(s, &w) == 0 && w == v);
	}
	if (parse_duration_ms(s, &v) == 0) {
		FUZZ_CHECK(v <= 1000000000000000ull);
		format_duration_ms(v, out, sizeof(out));
		FUZZ_CHECK(parse_duration_ms(out, &w) == 0 && w == v);
		FUZZ_CHECK(nsbox_parse_duration_ms(s, &w) == 0 && w == v);
	}
	if (parse_cpus(s, &d) == 0)
		FUZZ_CHECK(d > 0 && d <= 1024);
	if (parse_uint(s, 16, 1048576, &v) == 0)
		FUZZ_CHECK(v >= 16 && v <= 1048576);
	if (parse_uint(s, 0, UINT64_MAX, &v) == 0) {
		snprintf(out, sizeof(out), "%llu", (unsigned long long) v);
		FUZZ_CHECK(strspn(s, "0123456789") == strlen(s));
	}
	if (parse_bool(s, &b) == 0)
		FUZZ_CHECK(strlen(s) <= 5);
	free(s);
	return 0;
}
