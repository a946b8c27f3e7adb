/* Launch helpers that replace library calls or fixed choices. Pinning
 * without a cgroup (--cpus N in rlimit mode): the CPUs are taken from the one
 * the supervisor runs on, not always from the first, so parallel sandboxes
 * spread over the machine and the payload need not migrate. The highest
 * capability, found without libcap. */
#include <check.h>
#include <sched.h>
#include <stdio.h>

#include "plan/plan.h"
#include "unit.h"

static cpu_set_t set_of(const int *cpus, int n)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	for (int i = 0; i < n; i++)
		CPU_SET(cpus[i], &s);
	return s;
}

START_TEST(test_from_the_current_cpu)
{
	cpu_set_t all = set_of((int[]){ 0, 1, 2, 3 }, 4), out;
	ck_assert_int_eq(limits_pick_cpus(&all, 2, 1, &out), 1);
	cpu_set_t want = set_of((int[]){ 2 }, 1);
	ck_assert(CPU_EQUAL(&out, &want));
	ck_assert_int_eq(limits_pick_cpus(&all, 3, 2, &out), 2);
	want = set_of((int[]){ 3, 0 }, 2);
	ck_assert(CPU_EQUAL(&out, &want));
}
END_TEST

START_TEST(test_only_allowed_cpus)
{
	cpu_set_t allowed = set_of((int[]){ 1, 5, 9 }, 3), out;
	ck_assert_int_eq(limits_pick_cpus(&allowed, 6, 2, &out), 2);
	cpu_set_t want = set_of((int[]){ 9, 1 }, 2);
	ck_assert(CPU_EQUAL(&out, &want));
	/* Unknown current CPU: from the first. */
	ck_assert_int_eq(limits_pick_cpus(&allowed, -1, 1, &out), 1);
	want = set_of((int[]){ 1 }, 1);
	ck_assert(CPU_EQUAL(&out, &want));
	/* Never more than allowed. */
	ck_assert_int_eq(limits_pick_cpus(&allowed, 0, 8, &out), 3);
	ck_assert(CPU_EQUAL(&out, &allowed));
}
END_TEST

START_TEST(test_caps_last_is_the_kernels)
{
	FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
	if (!f)
		return;   /* no /proc: nothing to compare with */
	int want = -1;
	ck_assert_int_eq(fscanf(f, "%d", &want), 1);
	fclose(f);
	ck_assert_int_eq(caps_last(), want);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("startup");
	tcase_add_test(tc, test_from_the_current_cpu);
	tcase_add_test(tc, test_only_allowed_cpus);
	tcase_add_test(tc, test_caps_last_is_the_kernels);
	return unit_run("startup", tc);
}
