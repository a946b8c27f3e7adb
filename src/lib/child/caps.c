/* Dropping every capability set before exec. Plain prctl/capset calls so it
 * can run in the child (libcap's cap_t API allocates). */
#include <errno.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <stdint.h>
#include <unistd.h>

#include "plan/plan.h"

/* The highest capability this kernel knows, by asking the bounding set
 * (EINVAL past the end): what libcap's cap_max_bits() answers, without
 * linking libcap, whose constructor every launch would run for this alone. */
int caps_last(void)
{
	int lo = 0, hi = 63;   /* lo is known, hi+1 is not */
	if (prctl(PR_CAPBSET_READ, 0, 0, 0, 0) < 0)
		return CAP_LAST_CAP;
	while (lo < hi) {
		int mid = (lo + hi + 1) / 2;
		if (prctl(PR_CAPBSET_READ, mid, 0, 0, 0) >= 0)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

int caps_drop_bounding(int cap_last)
{
	return caps_drop_bounding_except(cap_last, 0);
}

int caps_drop_bounding_except(int cap_last, uint64_t keep)
{
	/* The bounding set first: dropping it needs CAP_SETPCAP, which the
	 * capset below removes. */
	for (int c = 0; c <= cap_last; c++)
		if (!(c < 64 && (keep >> c & 1)) && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
			return -errno;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return -errno;
	return 0;
}

/* Empty the effective, permitted and inheritable sets. */
int caps_clear(void)
{
	return caps_set(0);
}

/* Effective and permitted: `keep`; inheritable: empty. A build step's
 * root keeps what a package manager needs (plan.h's keep_caps); an exec
 * as uid 0 then gets exactly the bounding set, which is `keep` too. */
int caps_set(uint64_t keep)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = { { 0 } };
	data[0].effective = data[0].permitted = (uint32_t) keep;
	data[1].effective = data[1].permitted = (uint32_t) (keep >> 32);
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -errno;
	return 0;
}
