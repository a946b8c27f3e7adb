#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "idmap.h"
#include "unit.h"

START_TEST(test_keep_id_middle)
{
	subid_range r = { 100000, 65536 };
	char *m = NULL;
	ck_assert_int_eq(idmap_keep_id(1000, 1001, &r, &m), 0);
	ck_assert_str_eq(m, "0 100000 1000\n1000 1001 1\n1001 101000 64535\n");
	free(m);
}
END_TEST

START_TEST(test_keep_id_edges)
{
	subid_range r = { 200000, 65536 };
	char *m = NULL;
	ck_assert_int_eq(idmap_keep_id(0, 1001, &r, &m), 0);
	ck_assert_str_eq(m, "0 1001 1\n1 200000 65535\n");
	free(m);
	ck_assert_int_eq(idmap_keep_id(65535, 1001, &r, &m), 0);
	ck_assert_str_eq(m, "0 200000 65535\n65535 1001 1\n");
	free(m);
	subid_range small = { 200000, 100 };
	ck_assert_int_eq(idmap_keep_id(1000, 1001, &small, &m), -ERANGE);
}
END_TEST

START_TEST(test_subid_lookup)
{
	char path[] = "/tmp/nsbox-subid-XXXXXX";
	int fd = mkstemp(path);
	const char *text = "alice:100000:65536\n# junk\nbroken\n1002:300000:65536\nbob:x:1\nnsbox:400000:65536\n";
	ck_assert_int_eq(write(fd, text, strlen(text)), (int) strlen(text));
	close(fd);
	subid_range r;
	ck_assert_int_eq(subid_lookup(path, "alice", 1001, &r), 1);
	ck_assert_uint_eq(r.start, 100000);
	ck_assert_int_eq(subid_lookup(path, "carol", 1002, &r), 1);   /* by uid */
	ck_assert_uint_eq(r.start, 300000);
	ck_assert_int_eq(subid_lookup(path, "bob", 5, &r), 0);        /* malformed entry */
	ck_assert_int_eq(subid_lookup(path, "dave", 7, &r), 0);
	ck_assert_int_eq(subid_lookup("/nonexistent/subuid", "alice", 1, &r), 0);
	unlink(path);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("idmap");
	tcase_add_test(tc, test_keep_id_middle);
	tcase_add_test(tc, test_keep_id_edges);
	tcase_add_test(tc, test_subid_lookup);
	return unit_run("idmap", tc);
}
