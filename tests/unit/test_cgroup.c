#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "unit.h"

static char tmp[64];

static void put(const char *rel, const char *text)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static void dir(const char *rel)
{
	char path[512], cmd[600];
	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", path);
	ck_assert_int_eq(system(cmd), 0);
}

static void setup(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/nsbox-cgunit-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	(void) !system(cmd);
}

/* A mountinfo line for a cgroup mount at tmp/POINT with root ROOT. */
static void mountinfo(const char *lines)
{
	put("mountinfo", lines);
}

static void probe(cg_host *h)
{
	char mi[512], cg[512];
	snprintf(mi, sizeof(mi), "%s/mountinfo", tmp);
	snprintf(cg, sizeof(cg), "%s/cgroup", tmp);
	cgroup_probe_files(mi, cg, NULL, h);
}

START_TEST(test_v2_delegated)
{
	char lines[2048];
	snprintf(lines, sizeof(lines),
	         "30 1 0:26 / /proc rw - proc proc rw\n"
	         "31 23 0:27 / %s/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n", tmp);
	mountinfo(lines);
	put("cgroup", "0::/user.slice/app\n");
	dir("unified/user.slice/app");
	put("unified/user.slice/app/cgroup.controllers", "cpuset cpu io memory pids\n");
	cg_host h;
	probe(&h);
	ck_assert_int_eq(h.driver, CG_V2);
	char want[512];
	snprintf(want, sizeof(want), "%s/unified/user.slice/app", tmp);
	ck_assert_str_eq(h.parent[0], want);
	cgroup_host_free(&h);
}
END_TEST

START_TEST(test_v2_without_memory_falls_back_to_v1)
{
	char lines[4096];
	snprintf(lines, sizeof(lines),
	         "31 23 0:27 / %s/unified rw - cgroup2 cgroup2 rw\n"
	         "32 23 0:28 / %s/memory rw - cgroup cgroup rw,memory\n"
	         "33 23 0:29 / %s/pids rw - cgroup cgroup rw,pids\n"
	         "34 23 0:30 / %s/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n", tmp, tmp, tmp, tmp);
	mountinfo(lines);
	put("cgroup", "9:pids:/\n4:memory:/svc/x\n2:cpu,cpuacct:/\n0::/\n");
	dir("unified");
	put("unified/cgroup.controllers", "\n");
	dir("memory/svc/x");
	dir("pids");
	dir("cpu,cpuacct");
	cg_host h;
	probe(&h);
	ck_assert_int_eq(h.driver, CG_V1);
	char want[512];
	snprintf(want, sizeof(want), "%s/memory/svc/x", tmp);
	ck_assert_str_eq(h.parent[CG_MEMORY], want);
	snprintf(want, sizeof(want), "%s/cpu,cpuacct", tmp);
	ck_assert_str_eq(h.parent[CG_CPU], want);
	ck_assert_str_eq(h.parent[CG_CPUACCT], want);   /* co-mounted: one directory */
	cgroup_host_free(&h);
}
END_TEST

START_TEST(test_mount_root_is_stripped)
{
	/* A hierarchy mounted from a subtree (as in a container): our path
	 * "/svc/x" under a mount whose root is "/svc" lives at POINT/x. */
	char lines[4096];
	snprintf(lines, sizeof(lines),
	         "32 23 0:28 /svc %s/memory rw - cgroup cgroup rw,memory\n"
	         "33 23 0:29 / %s/pids rw - cgroup cgroup rw,pids\n"
	         "34 23 0:30 / %s/cpu rw - cgroup cgroup rw,cpu\n", tmp, tmp, tmp);
	mountinfo(lines);
	put("cgroup", "4:memory:/svc/x\n3:pids:/\n2:cpu:/\n");
	dir("memory/x");
	dir("pids");
	dir("cpu");
	cg_host h;
	probe(&h);
	ck_assert_int_eq(h.driver, CG_V1);
	char want[512];
	snprintf(want, sizeof(want), "%s/memory/x", tmp);
	ck_assert_str_eq(h.parent[CG_MEMORY], want);
	ck_assert_ptr_null(h.parent[CG_CPUACCT]);   /* not mounted: optional */
	cgroup_host_free(&h);
}
END_TEST

START_TEST(test_nothing_usable_says_why)
{
	char lines[1024];
	snprintf(lines, sizeof(lines), "32 23 0:28 / %s/memory rw - cgroup cgroup rw,memory\n", tmp);
	mountinfo(lines);
	put("cgroup", "4:memory:/\n");
	dir("memory");
	cg_host h;
	probe(&h);
	ck_assert_int_eq(h.driver, CG_NONE);
	ck_assert_msg(strstr(h.reason, "cgroup v2 is not mounted") != NULL, "%s", h.reason);
	ck_assert_msg(strstr(h.reason, "the cgroup v1 pids hierarchy is not mounted") != NULL, "%s", h.reason);
	cgroup_host_free(&h);
}
END_TEST

START_TEST(test_read_keys)
{
	put("memory.events", "low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n");
	put("memory.max", "max\n");
	put("pids.current", "7\n");
	uint64_t v = 0;
	ck_assert_int_eq(cg_read_key(tmp, "memory.events", "oom_kill", &v), 0);
	ck_assert_uint_eq(v, 1);
	ck_assert_int_eq(cg_read_key(tmp, "memory.events", "oom", &v), 0);   /* not "oom_kill" */
	ck_assert_uint_eq(v, 2);
	ck_assert_int_eq(cg_read_key(tmp, "memory.events", "nope", &v), -ENOENT);
	ck_assert_int_eq(cg_read_u64(tmp, "memory.max", &v), 0);
	ck_assert_uint_eq(v, UINT64_MAX);
	ck_assert_int_eq(cg_read_u64(tmp, "pids.current", &v), 0);
	ck_assert_uint_eq(v, 7);
	ck_assert_int_eq(cg_read_u64(tmp, "missing", &v), -ENOENT);
	/* Two keys from one read: both must be there. */
	put("cpu.stat", "usage_usec 30\nuser_usec 20\nsystem_usec 10\n");
	uint64_t u = 0, s = 0;
	ck_assert_int_eq(cg_read_keys2(tmp, "cpu.stat", "user_usec", &u, "system_usec", &s), 0);
	ck_assert_uint_eq(u, 20);
	ck_assert_uint_eq(s, 10);
	ck_assert_int_eq(cg_read_keys2(tmp, "cpu.stat", "user_usec", &u, "nope", &s), -ENOENT);
	ck_assert_int_eq(cg_read_keys2(tmp, "missing", "a", &u, "b", &s), -ENOENT);
}
END_TEST

/* CPU time from a fabricated v1 cgroup: the exact total of cpuacct.usage,
 * split like the tick samples of cpuacct.stat (usage_user/usage_sys are
 * tick-based and ignored). */
START_TEST(test_v1_cpu_from_cpuacct)
{
	dir("mem");
	dir("acct");
	put("mem/memory.max_usage_in_bytes", "4096\n");
	put("acct/cpuacct.usage", "800000000\n");
	put("acct/cpuacct.stat", "user 3\nsystem 1\n");
	put("acct/cpuacct.usage_user", "0\n");
	put("acct/cpuacct.usage_sys", "0\n");
	char mem[512], acct[512];
	snprintf(mem, sizeof(mem), "%s/mem", tmp);
	snprintf(acct, sizeof(acct), "%s/acct", tmp);
	cgroup cg = { .driver = CG_V1, .path = { [CG_MEMORY] = mem, [CG_PIDS] = mem, [CG_CPU] = mem,
	                                        [CG_CPUACCT] = acct }, .dirfd = -1 };
	cg_stats st;
	cgroup_stats(&cg, &st);
	ck_assert(st.have_cpu);
	ck_assert_double_eq_tol(st.cpu_user_ms, 600.0, 1e-6);
	ck_assert_double_eq_tol(st.cpu_system_ms, 200.0, 1e-6);
	ck_assert(st.have_memory);
	ck_assert_uint_eq(st.peak_memory, 4096);
	/* The counters alone (an exec's base): the CPU time, not the peak. */
	put("mem/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
	cgroup_counters(&cg, &st);
	ck_assert(st.have_cpu);
	ck_assert_double_eq_tol(st.cpu_user_ms, 600.0, 1e-6);
	ck_assert_uint_eq(st.oom_kills, 2);
	ck_assert(!st.have_memory);
	cg_sample s;
	cgroup_sample(&cg, &s);
	ck_assert(s.have_cpu);
	ck_assert_double_eq_tol(s.cpu_ms, 800.0, 1e-6);
	/* Without cpuacct the cgroup has no CPU figure (the record then says
	 * it comes from rusage, and live samples read /proc). */
	cg.path[CG_CPUACCT] = NULL;
	cgroup_stats(&cg, &st);
	ck_assert(!st.have_cpu);
	cgroup_sample(&cg, &s);
	ck_assert(!s.have_cpu);
}
END_TEST

START_TEST(test_cpu_split)
{
	double u, s;
	cg_cpu_split(2000000, 0, 0, &u, &s);   /* shorter than a tick: all user */
	ck_assert_double_eq_tol(u, 2.0, 1e-9);
	ck_assert_double_eq_tol(s, 0.0, 1e-9);
	cg_cpu_split(1000000000, 0, 5, &u, &s);
	ck_assert_double_eq_tol(u, 0.0, 1e-9);
	ck_assert_double_eq_tol(s, 1000.0, 1e-9);
	cg_cpu_split(UINT64_MAX / 2, UINT64_MAX / 2, UINT64_MAX / 2, &u, &s);
	ck_assert_double_eq_tol(u + s, (double) (UINT64_MAX / 2) / 1e6, 1.0);
}
END_TEST

START_TEST(test_v2_cpu_from_cpu_stat)
{
	put("cpu.stat", "usage_usec 750000\nuser_usec 500000\nsystem_usec 250000\nnr_periods 3\n");
	char d[512];
	snprintf(d, sizeof(d), "%s", tmp);
	cgroup cg = { .driver = CG_V2, .path = { d }, .dirfd = -1 };
	cg_stats st;
	cgroup_stats(&cg, &st);
	ck_assert(st.have_cpu);
	ck_assert_double_eq_tol(st.cpu_user_ms, 500.0, 1e-6);
	ck_assert_double_eq_tol(st.cpu_system_ms, 250.0, 1e-6);
	put("memory.peak", "8192\n");
	put("pids.peak", "3\n");
	cgroup_counters(&cg, &st);
	ck_assert(st.have_cpu && !st.have_memory && !st.have_pids_peak);
	ck_assert_double_eq_tol(st.cpu_system_ms, 250.0, 1e-6);
	cgroup_stats(&cg, &st);
	ck_assert(st.have_memory && st.have_pids_peak);
	ck_assert_uint_eq(st.peak_memory, 8192);
}
END_TEST

START_TEST(test_name_owner)
{
	pid_t pid;
	uint64_t ns;
	ck_assert(cgroup_name_owner("nsbox-123-0badc0de-effffffc", &pid, &ns));
	ck_assert_int_eq(pid, 123);
	ck_assert_uint_eq(ns, 0xeffffffcu);
	/* Older names: no namespace, judged as before. */
	ck_assert(cgroup_name_owner("nsbox-77-deadbeef", &pid, &ns));
	ck_assert_int_eq(pid, 77);
	ck_assert_uint_eq(ns, 0);
	ck_assert(cgroup_name_owner("nsbox-supervisor-9-4026531836", &pid, &ns));
	ck_assert_int_eq(pid, 9);
	ck_assert_uint_eq(ns, 0x4026531836ull);
	ck_assert(cgroup_name_owner("nsbox-supervisor-9", &pid, &ns));
	ck_assert_uint_eq(ns, 0);
	/* Not ours, or malformed: never judged. */
	ck_assert(!cgroup_name_owner("nsbox-0-deadbeef", &pid, &ns));
	ck_assert(!cgroup_name_owner("nsbox-12x-deadbeef", &pid, &ns));
	ck_assert(!cgroup_name_owner("nsbox-12-dead", &pid, &ns));
	ck_assert(!cgroup_name_owner("nsbox-12-deadbeef-", &pid, &ns));
	ck_assert(!cgroup_name_owner("nsbox-12-deadbeef-0", &pid, &ns));
	ck_assert(!cgroup_name_owner("nsbox-12-deadbeef-zz", &pid, &ns));
	ck_assert(!cgroup_name_owner("nsbox-99999999999-deadbeef", &pid, &ns));
	ck_assert(!cgroup_name_owner("user.slice", &pid, &ns));
	ck_assert(!cgroup_name_owner("nsbox-", &pid, &ns));
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("cgroup");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_v2_delegated);
	tcase_add_test(tc, test_v2_without_memory_falls_back_to_v1);
	tcase_add_test(tc, test_mount_root_is_stripped);
	tcase_add_test(tc, test_nothing_usable_says_why);
	tcase_add_test(tc, test_read_keys);
	tcase_add_test(tc, test_v1_cpu_from_cpuacct);
	tcase_add_test(tc, test_cpu_split);
	tcase_add_test(tc, test_v2_cpu_from_cpu_stat);
	tcase_add_test(tc, test_name_owner);
	return unit_run("cgroup", tc);
}
