/* Shared runner for the Check unit tests. */
#ifndef NSBOX_UNIT_H
#define NSBOX_UNIT_H

#include <check.h>
#include <linux/capability.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

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

/* Take `caps` (a mask of 1 << CAP_*) out of this process's effective set:
 * how a forked child acts as a caller without them while keeping its uid
 * (so that its coverage counts can still be written). 0, or -1. */
static inline int unit_drop_caps(uint64_t caps)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];
	if (syscall(SYS_capget, &h, d) < 0)
		return -1;
	d[0].effective &= ~(uint32_t) caps;
	d[1].effective &= ~(uint32_t) (caps >> 32);
	return syscall(SYS_capset, &h, d) < 0 ? -1 : 0;
}

#endif
