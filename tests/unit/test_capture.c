#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "record/capture.h"
#include "unit.h"

static char *text(capture *c, size_t *len, bool *trunc)
{
	char *t = capture_text(c, len, trunc);
	ck_assert_ptr_nonnull(t);
	return t;
}

START_TEST(test_under_cap_is_exact)
{
	capture c;
	capture_init(&c, 10);
	capture_feed(&c, "abc", 3);
	capture_feed(&c, "defgh", 5);
	size_t len;
	bool trunc;
	char *t = text(&c, &len, &trunc);
	ck_assert_str_eq(t, "abcdefgh");
	ck_assert(!trunc);
	ck_assert_uint_eq(c.total, 8);
	free(t);
	capture_free(&c);
}
END_TEST

START_TEST(test_exactly_cap_is_not_truncated)
{
	capture c;
	capture_init(&c, 10);
	capture_feed(&c, "0123456789", 10);
	size_t len;
	bool trunc;
	char *t = text(&c, &len, &trunc);
	ck_assert_str_eq(t, "0123456789");
	ck_assert(!trunc);
	free(t);
	capture_free(&c);
}
END_TEST

START_TEST(test_head_and_tail_kept)
{
	capture c;
	capture_init(&c, 10);
	/* many small writes wrap the ring several times */
	for (int i = 0; i < 1000; i++) {
		char ch = (char) ('a' + i % 26);
		capture_feed(&c, &ch, 1);
	}
	size_t len;
	bool trunc;
	char *t = text(&c, &len, &trunc);
	ck_assert(trunc);
	ck_assert_uint_eq(c.total, 1000);
	/* head: first 5 bytes; tail: last 5 (i = 995..999 -> h..l) */
	ck_assert_str_eq(t, "abcde\n... [nsbox: 990 bytes omitted] ...\nhijkl");
	free(t);
	capture_free(&c);
}
END_TEST

START_TEST(test_big_write_keeps_last_bytes)
{
	capture c;
	capture_init(&c, 8);
	char big[100];
	for (int i = 0; i < 100; i++)
		big[i] = (char) ('0' + i % 10);
	capture_feed(&c, big, 100);
	size_t len;
	bool trunc;
	char *t = text(&c, &len, &trunc);
	ck_assert_str_eq(t, "0123\n... [nsbox: 92 bytes omitted] ...\n6789");
	free(t);
	capture_free(&c);
}
END_TEST

START_TEST(test_cuts_on_utf8_boundaries)
{
	capture c;
	capture_init(&c, 8);
	/* "é" is 2 bytes: the head cut after 4 bytes splits the second é;
	 * the tail's first byte is a continuation byte. */
	const char *s = "a\xc3\xa9\xc3\xa9xxxxxxxxxx\xc3\xa9zzz";
	capture_feed(&c, s, strlen(s));
	size_t len;
	bool trunc;
	char *t = text(&c, &len, &trunc);
	ck_assert(trunc);
	ck_assert_str_eq(t, "a\xc3\xa9\n... [nsbox: 14 bytes omitted] ...\nzzz");
	free(t);
	capture_free(&c);
}
END_TEST

START_TEST(test_unlimited)
{
	capture c;
	capture_init(&c, 0);
	char block[4096];
	memset(block, 'q', sizeof(block));
	for (int i = 0; i < 100; i++)
		capture_feed(&c, block, sizeof(block));
	size_t len;
	bool trunc;
	char *t = text(&c, &len, &trunc);
	ck_assert(!trunc);
	ck_assert_uint_eq(len, 409600);
	free(t);
	capture_free(&c);
}
END_TEST

START_TEST(test_memory_is_bounded)
{
	capture c;
	capture_init(&c, 1000);
	char block[65536];
	memset(block, 'x', sizeof(block));
	for (int i = 0; i < 200; i++)
		capture_feed(&c, block, sizeof(block));
	ck_assert_uint_le(c.head.cap, 2048);   /* the head buffer never grows past its share */
	ck_assert_uint_eq(c.tail_cap, 500);
	ck_assert_uint_eq(c.total, 200ull * 65536);
	capture_free(&c);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("capture");
	tcase_add_test(tc, test_under_cap_is_exact);
	tcase_add_test(tc, test_exactly_cap_is_not_truncated);
	tcase_add_test(tc, test_head_and_tail_kept);
	tcase_add_test(tc, test_big_write_keeps_last_bytes);
	tcase_add_test(tc, test_cuts_on_utf8_boundaries);
	tcase_add_test(tc, test_unlimited);
	tcase_add_test(tc, test_memory_is_bounded);
	return unit_run("capture", tc);
}
