#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan/idmap.h"
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

/* A temporary subordinate-id file with `text`; the caller unlinks it. */
static void fake(char path[32], const char *text)
{
	strcpy(path, "/tmp/nsbox-subid-XXXXXX");
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (int) strlen(text));
	close(fd);
}

START_TEST(test_subid_overlap)
{
	char path[32];
	fake(path, "nsbox:1073741824:65536\nalice:100000:65536\nbob:-5:10\nbob:5:0\n"
	           "carol:1073807359:1:extra\ndave:1073807359:1\n");
	subid_entry e;
	/* nsbox's own entry is not a conflict; alice's range is elsewhere;
	 * malformed entries (a sign, an empty range, a fourth field) are skipped. */
	ck_assert_int_eq(subid_overlap(path, "nsbox", 1073741824, 65535, &e), 0);
	ck_assert_int_eq(subid_overlap(path, "nsbox", 1073741824, 65536, &e), 1);   /* dave: the last id */
	ck_assert_str_eq(e.owner, "dave");
	ck_assert_uint_eq(e.start, 1073807359);
	ck_assert_uint_eq(e.count, 1);
	ck_assert_int_eq(subid_overlap(path, "nsbox", 165535, 1, &e), 1);           /* alice's last id */
	ck_assert_str_eq(e.owner, "alice");
	ck_assert_int_eq(subid_overlap(path, "nsbox", 165536, 100, &e), 0);         /* just past it */
	ck_assert_int_eq(subid_overlap(path, "nsbox", 99999, 1, &e), 0);            /* just before it */
	ck_assert_int_eq(subid_overlap(path, "alice", 100000, 65536, &e), 0);       /* her own */
	ck_assert_int_eq(subid_overlap("/nonexistent/subuid", "nsbox", 0, 1, &e), 0);
	unlink(path);
}
END_TEST

START_TEST(test_subid_free_start)
{
	char u[32], g[32];
	fake(u, "alice:1073741824:65536\nbob:1073807360:10\nnsbox:1073872896:65536\n");
	fake(g, "carol:1073872896:70000\n");
	/* 2^30 is alice's, the next block bob's, the next two carol's (in the
	 * group file; nsbox's own entry does not count). */
	ck_assert_uint_eq(subid_free_start(u, g, "nsbox", 1073741824, 65536), 1073741824ull + 4 * 65536);
	ck_assert_uint_eq(subid_free_start(u, g, "nsbox", 1, 65536), 65536);
	unlink(g);
	fake(g, "everyone:65536:4294901759\n");   /* up to 2^32 - 1 */
	ck_assert_uint_eq(subid_free_start(u, g, "nsbox", 1073741824, 65536), 0);
	unlink(u);
	unlink(g);
}
END_TEST

START_TEST(test_root_ids)
{
	char u[32], g[32];
	root_ids ri;
	nsbox_error *e = NULL;
	/* Nothing in the way: the built-in range. */
	fake(u, "nsbox-test:100000:65536\n");
	fake(g, "nsbox-test:100000:65536\n");
	ck_assert_int_eq(idmap_root_ids(u, g, &ri, &e), 0);
	ck_assert_ptr_null(ri.conflict_file);
	ck_assert_uint_eq(ri.uid.start, NSBOX_ROOT_RANGE_BASE);
	ck_assert(!ri.own_uid && !ri.own_gid);
	unlink(u);
	unlink(g);

	/* Another user's subgids overlap the built-in range. */
	fake(u, "alice:1073741823:1\n");
	fake(g, "alice:1073700000:50000\n");
	ck_assert_int_eq(idmap_root_ids(u, g, &ri, &e), 0);
	ck_assert_ptr_eq(ri.conflict_file, g);
	ck_assert(ri.conflict_gid);
	ck_assert_str_eq(ri.other.owner, "alice");
	ck_assert_uint_eq(ri.free_start, 1073807360);
	char *detail = NULL, *hint = NULL;
	ck_assert_int_eq(idmap_root_conflict(&ri, u, g, &detail, &hint), 0);
	char want[512];
	snprintf(want, sizeof(want), "use host group ids 1073741824-1073807359 (the built-in range) for root's "
	         "sandboxes: 'alice' (1073700000-1073749999) in %s overlaps them", g);
	ck_assert_str_eq(detail, want);
	snprintf(want, sizeof(want), "reserve ids no one else uses for nsbox: add the line 'nsbox:1073807360:65536' "
	         "to %s and %s (for a user named nsbox: usermod --add-subuids 1073807360-1073872895 "
	         "--add-subgids 1073807360-1073872895 nsbox)", u, g);
	ck_assert_str_eq(hint, want);
	free(detail);
	free(hint);
	unlink(u);
	unlink(g);

	/* An 'nsbox' entry is used, and checked the same way. */
	fake(u, "nsbox:200000:65536\nbob:265535:5\n");
	fake(g, "nsbox:300000:65536\n");
	ck_assert_int_eq(idmap_root_ids(u, g, &ri, &e), 0);
	ck_assert(ri.own_uid && ri.own_gid);
	ck_assert_uint_eq(ri.gid.start, 300000);
	ck_assert_ptr_eq(ri.conflict_file, u);
	ck_assert_str_eq(ri.other.owner, "bob");
	ck_assert_int_eq(idmap_root_conflict(&ri, u, g, &detail, &hint), 0);
	ck_assert_msg(strstr(detail, "ids 200000-265535 (the 'nsbox' entry)") != NULL, "%s", detail);
	ck_assert_msg(strstr(hint, "make the line 'nsbox:1073741824:65536' the 'nsbox' entry of") != NULL, "%s", hint);
	free(detail);
	free(hint);
	unlink(u);
	unlink(g);

	/* Too small, or past the last id: errors. */
	fake(u, "nsbox:200000:100\n");
	fake(g, "");
	ck_assert_int_eq(idmap_root_ids(u, g, &ri, &e), -ERANGE);
	ck_assert_msg(strstr(nsbox_error_message(e), "fewer than 65536 ids") != NULL, "%s", nsbox_error_message(e));
	nsbox_error_free(e);
	e = NULL;
	unlink(u);
	fake(u, "nsbox:4294967000:65536\n");
	ck_assert_int_eq(idmap_root_ids(u, g, &ri, &e), -ERANGE);
	nsbox_error_free(e);
	unlink(u);
	unlink(g);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("idmap");
	tcase_add_test(tc, test_keep_id_middle);
	tcase_add_test(tc, test_keep_id_edges);
	tcase_add_test(tc, test_subid_lookup);
	tcase_add_test(tc, test_subid_overlap);
	tcase_add_test(tc, test_subid_free_start);
	tcase_add_test(tc, test_root_ids);
	return unit_run("idmap", tc);
}
