#include <check.h>
#include <errno.h>
#include <stdlib.h>

#include "base/units.h"
#include "unit.h"

static const struct { const char *in; int ret; uint64_t out; } sizes[] = {
	{ "512m", 0, 512ull << 20 }, { "1g", 0, 1ull << 30 }, { "100k", 0, 100ull << 10 },
	{ "4096", 0, 4096 }, { "1.5g", 0, 3ull << 29 }, { "512MB", 0, 512ull << 20 },
	{ "2GiB", 0, 2ull << 30 }, { "1t", 0, 1ull << 40 }, { "0", 0, 0 },
	{ "lots", -EINVAL, 0 }, { "", -EINVAL, 0 }, { "-1m", -EINVAL, 0 }, { "1x", -EINVAL, 0 },
	{ "0x10", -EINVAL, 0 }, { "1e3", -EINVAL, 0 }, { "1.5", -EINVAL, 0 }, { "m", -EINVAL, 0 },
	{ "99999999999t", -ERANGE, 0 },
};

START_TEST(test_sizes)
{
	uint64_t v = 12345;
	int r = parse_size(sizes[_i].in, &v);
	ck_assert_msg(r == sizes[_i].ret, "parse_size('%s') = %d, expected %d", sizes[_i].in, r, sizes[_i].ret);
	if (r == 0)
		ck_assert_uint_eq(v, sizes[_i].out);
}
END_TEST

static const struct { const char *in; int ret; uint64_t ms; } durations[] = {
	{ "30", 0, 30000 }, { "30s", 0, 30000 }, { "2m", 0, 120000 }, { "1h", 0, 3600000 },
	{ "250ms", 0, 250 }, { "1.5s", 0, 1500 }, { "0", 0, 0 }, { "10 years", -EINVAL, 0 },
	{ "s", -EINVAL, 0 }, { "-5s", -EINVAL, 0 }, { "5d", 0, 432000000 }, { "5w", -EINVAL, 0 }, { "", -EINVAL, 0 },
	{ "0.5d", 0, 43200000 },
};

START_TEST(test_durations)
{
	uint64_t v = 0;
	int r = parse_duration_ms(durations[_i].in, &v);
	ck_assert_msg(r == durations[_i].ret, "parse_duration_ms('%s') = %d", durations[_i].in, r);
	if (r == 0)
		ck_assert_uint_eq(v, durations[_i].ms);
}
END_TEST

START_TEST(test_cpus_and_uints)
{
	double c;
	ck_assert_int_eq(parse_cpus("0.5", &c), 0);
	ck_assert(c == 0.5);
	ck_assert_int_eq(parse_cpus("2", &c), 0);
	ck_assert_int_eq(parse_cpus("0", &c), -ERANGE);
	ck_assert_int_eq(parse_cpus("2000", &c), -ERANGE);
	ck_assert_int_eq(parse_cpus("one", &c), -EINVAL);
	uint64_t u;
	ck_assert_int_eq(parse_uint("64", 1, 100, &u), 0);
	ck_assert_uint_eq(u, 64);
	ck_assert_int_eq(parse_uint("0", 1, 100, &u), -ERANGE);
	ck_assert_int_eq(parse_uint("-1", 1, 100, &u), -EINVAL);
	ck_assert_int_eq(parse_uint("12a", 1, 100, &u), -EINVAL);
	ck_assert_int_eq(parse_uint("99999999999999999999999", 1, 100, &u), -ERANGE);
	bool b;
	ck_assert_int_eq(parse_bool("true", &b), 0);
	ck_assert(b);
	ck_assert_int_eq(parse_bool("off", &b), 0);
	ck_assert(!b);
	ck_assert_int_eq(parse_bool("maybe", &b), -EINVAL);
}
END_TEST

START_TEST(test_format_round_trip)
{
	static const uint64_t values[] = { 0, 1, 1023, 1024, 10240, 512ull << 20, 1ull << 30, 3ull << 29, 1ull << 40 };
	char buf[32];
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		uint64_t back;
		format_size(values[i], buf, sizeof(buf));
		ck_assert_int_eq(parse_size(buf, &back), 0);
		ck_assert_uint_eq(back, values[i]);
	}
	format_size(512ull << 20, buf, sizeof(buf));
	ck_assert_str_eq(buf, "512m");
	static const uint64_t ms[] = { 0, 1, 250, 1000, 1500, 60000, 90000, 3600000, 7200000 };
	for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
		uint64_t back;
		format_duration_ms(ms[i], buf, sizeof(buf));
		ck_assert_int_eq(parse_duration_ms(buf, &back), 0);
		ck_assert_uint_eq(back, ms[i]);
	}
	format_duration_ms(60000, buf, sizeof(buf));
	ck_assert_str_eq(buf, "1m");
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("units");
	tcase_add_loop_test(tc, test_sizes, 0, sizeof(sizes) / sizeof(sizes[0]));
	tcase_add_loop_test(tc, test_durations, 0, sizeof(durations) / sizeof(durations[0]));
	tcase_add_test(tc, test_cpus_and_uints);
	tcase_add_test(tc, test_format_round_trip);
	return unit_run("units", tc);
}
