/* Shared runner for the Check unit tests. */
#ifndef NSBOX_UNIT_H
#define NSBOX_UNIT_H

#include <check.h>
#include <stdlib.h>

/* Add `tc` to a suite called `name`, run it, and turn failures into the
 * process exit status that automake reads. */
static inline int unit_run(const char *name, TCase *tc)
{
	Suite *s = suite_create(name);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
