/* The library's host-facing pieces that a run uses only inside the sandbox's
 * child (where no coverage is written) or only on failure: capability drop,
 * loopback up, the proxy's route lookup, cgroup v1 creation / attach / stats
 * / removal, seccomp install and the compiled-filter cache against tampered
 * files. Each test runs in Check's forked child, so namespaces, capability
 * drops and filters end with it. The tests that need root (new network and
 * mount namespaces, cgroups) say so and pass vacuously otherwise. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "plan/idmap.h"
#include "sandbox/janitor.h"
#include "nsbox.h"
#include "workspace/workspace.h"
#include "base/error.h"
#include "plan/plan.h"
#include "net/proxy.h"
#include "seccomp/seccomp.h"
#include "unit.h"

static bool need_root(const char *what)
{
	if (geteuid() == 0)
		return true;
	fprintf(stderr, "note: %s needs root; not tested\n", what);
	return false;
}

/* The hex value of `key:` in /proc/self/status. */
static unsigned long long status_hex(const char *key)
{
	FILE *f = fopen("/proc/self/status", "re");
	ck_assert_ptr_nonnull(f);
	char line[256];
	unsigned long long v = ~0ull;
	size_t n = strlen(key);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':')
			v = strtoull(line + n + 1, NULL, 16);
	fclose(f);
	return v;
}

static int sh(const char *cmd)
{
	int s = system(cmd);
	return WIFEXITED(s) ? WEXITSTATUS(s) : -1;
}

/* ---- caps.c ---------------------------------------------------------- */

START_TEST(test_caps_drop_and_clear)
{
	FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
	ck_assert_ptr_nonnull(f);
	int last = -1;
	ck_assert_int_eq(fscanf(f, "%d", &last), 1);
	fclose(f);
	ck_assert_int_eq(caps_last(), last);
	if (!need_root("dropping the bounding set")) {
		ck_assert_int_eq(caps_drop_bounding(last), -EPERM);
		return;
	}
	/* Without CAP_SETPCAP a set that is not empty cannot be touched: the
	 * error is the kernel's, not swallowed. */
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(caps_clear() == 0 && caps_drop_bounding(last) == -EPERM ? 0 : 1);
	int st = -1;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
	ck_assert_int_eq(caps_drop_bounding(last), 0);
	ck_assert_uint_eq(status_hex("CapBnd"), 0);
	ck_assert_uint_eq(status_hex("CapAmb"), 0);
	ck_assert_uint_ne(status_hex("CapEff"), 0);   /* the sets are cleared apart */
	ck_assert_int_eq(caps_clear(), 0);
	ck_assert_uint_eq(status_hex("CapEff"), 0);
	ck_assert_uint_eq(status_hex("CapPrm"), 0);
	ck_assert_uint_eq(status_hex("CapInh"), 0);
	/* Without CAP_SETPCAP the bounding set can no longer be touched:
	 * the error is the kernel's, not swallowed. */
	ck_assert_int_eq(caps_drop_bounding(last), -EPERM);
}
END_TEST

/* ---- net.c ----------------------------------------------------------- */

static bool lo_up(void)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(s, 0);
	struct ifreq ifr = { 0 };
	strcpy(ifr.ifr_name, "lo");
	ck_assert_int_eq(ioctl(s, SIOCGIFFLAGS, &ifr), 0);
	close(s);
	return ifr.ifr_flags & IFF_UP;
}

START_TEST(test_loopback_up)
{
	if (!need_root("a new network namespace"))
		return;
	nsbox_plan *p = calloc(1, sizeof(*p));
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(net_build_loopback_msg(p), 0);
	ck_assert_int_eq(unshare(CLONE_NEWNET), 0);
	ck_assert(!lo_up());
	ck_assert_int_eq(net_loopback_up(p), 0);
	ck_assert(lo_up());
	/* The kernel's refusal comes back through the acknowledgement: a
	 * process without CAP_NET_ADMIN over the namespace gets EPERM, not a
	 * silent success with lo still down. */
	ck_assert_int_eq(unshare(CLONE_NEWNET), 0);
	ck_assert_int_eq(caps_clear(), 0);   /* still uid 0: coverage can write */
	ck_assert_int_eq(net_loopback_up(p), -EPERM);
	ck_assert(!lo_up());
	free(p);
}
END_TEST

/* ---- proxy_route.c --------------------------------------------------- */

static const char *route4(const char *a)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	ck_assert_int_eq(inet_pton(AF_INET, a, &sin.sin_addr), 1);
	return proxy_addr_route((struct sockaddr *) &sin);
}

static const char *route6(const char *a)
{
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6 };
	ck_assert_int_eq(inet_pton(AF_INET6, a, &sin6.sin6_addr), 1);
	return proxy_addr_route((struct sockaddr *) &sin6);
}

START_TEST(test_route_classes)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	ck_assert_str_eq(proxy_addr_route((struct sockaddr *) &sun), "not an IP address");
	if (!need_root("a new network namespace"))
		return;
	ck_assert_int_eq(unshare(CLONE_NEWNET), 0);
	/* Nothing routed at all: connect() itself would fail; not refused. */
	ck_assert_ptr_null(route4("192.0.2.7"));
	ck_assert_int_eq(sh("ip link set lo up && ip link add covh0 type veth peer name covh1 && "
	                    "ip addr add 10.77.0.1/24 dev covh0 && ip link set covh0 up && ip link set covh1 up && "
	                    "ip route add blackhole 10.78.0.0/16 && ip route add default dev covh0"), 0);
	/* The host's own addresses, however they are written. */
	ck_assert_str_eq(route4("127.0.0.1"), "this host's own");
	ck_assert_str_eq(route4("10.77.0.1"), "this host's own");
	ck_assert_str_eq(route6("::ffff:10.77.0.1"), "this host's own");
	ck_assert_str_eq(route4("10.77.0.255"), "a broadcast or multicast address here");
	ck_assert_str_eq(route4("224.0.0.9"), "a broadcast or multicast address here");
	/* Off this host: a neighbour, and what the default route reaches. */
	ck_assert_ptr_null(route4("10.77.0.9"));
	ck_assert_ptr_null(route4("192.0.2.7"));
	ck_assert_ptr_null(route6("::ffff:192.0.2.7"));
	/* IPv6: loopback is ours; nothing routes 2001:db8::/32 here. */
	if (access("/proc/sys/net/ipv6", F_OK) == 0) {
		ck_assert_str_eq(route6("::1"), "this host's own");
		ck_assert_ptr_null(route6("2001:db8::1"));
	}
	/* A blackhole: the kernel refuses it itself. */
	const char *bh = route4("10.78.1.1");
	ck_assert_msg(bh == NULL || !strcmp(bh, "of unknown reach (the route lookup failed)"), "%s", bh);
}
END_TEST

/* ---- cgroup_run.c ---------------------------------------------------- */

static void read_file(const char *dir, const char *file, char *out, size_t len)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	FILE *f = fopen(path, "re");
	ck_assert_msg(f != NULL, "open %s", path);
	if (!fgets(out, (int) len, f))
		out[0] = '\0';
	out[strcspn(out, "\n")] = '\0';
	fclose(f);
}

static bool v1_host(cg_host *h)
{
	if (!need_root("cgroup v1 directories"))
		return false;
	cgroup_probe(NULL, h);
	if (h->driver != CG_V1) {
		fprintf(stderr, "note: no cgroup v1 driver here (%s); tested in the cgroup v2 guest\n", h->reason);
		cgroup_host_free(h);
		return false;
	}
	return true;
}

START_TEST(test_cgroup_v1_lifecycle)
{
	cg_host h;
	if (!v1_host(&h))
		return;
	/* Named like a run's cgroup (nsbox-PID-8 hex digits): should an
	 * assertion end this test half-way, nsbox's stale collection removes
	 * it once this process is gone. */
	char name[64];
	snprintf(name, sizeof(name), "nsbox-%d-c0ffee00", (int) getpid());
	cg_limits l = { .memory = 64 << 20, .cpus = 0.5, .pids = 17 };
	cgroup *cg = NULL;
	nsbox_error *e = NULL;
	ck_assert_int_eq(cgroup_create(&h, name, &l, &cg, &e), 0);
	char v[128];
	read_file(cg->path[CG_MEMORY], "memory.limit_in_bytes", v, sizeof(v));
	ck_assert_str_eq(v, "67108864");
	read_file(cg->path[CG_PIDS], "pids.max", v, sizeof(v));
	ck_assert_str_eq(v, "17");
	read_file(cg->path[CG_CPU], "cpu.cfs_period_us", v, sizeof(v));
	ck_assert_str_eq(v, "100000");
	read_file(cg->path[CG_CPU], "cpu.cfs_quota_us", v, sizeof(v));
	ck_assert_str_eq(v, "50000");

	/* A process put in it is counted there, in every hierarchy. */
	int go[2], done[2];
	ck_assert_int_eq(pipe2(go, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(done, O_CLOEXEC), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char c;
		(void) prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);   /* not past a failed test */
		close(go[1]);
		if (read(go[0], &c, 1) == 1) {
			char *m = malloc(4 << 20);
			if (m)
				memset(m, 1, 4 << 20);
			for (volatile unsigned long i = 0; i < 20000000ul; i++)
				;
			(void) !write(done[1], "y", 1);
		}
		pause();
		_exit(0);
	}
	close(go[0]);
	ck_assert_int_eq(cgroup_attach(cg, pid, &e), 0);
	ck_assert_int_eq(write(go[1], "x", 1), 1);
	char c;
	close(done[1]);
	ck_assert_int_eq(read(done[0], &c, 1), 1);   /* it has used memory and CPU */
	close(done[0]);
	char procs[64], want[32];
	snprintf(want, sizeof(want), "%d", (int) pid);
	for (int i = 0; i < CG_N; i++)
		if (cg->path[i]) {
			read_file(cg->path[i], "cgroup.procs", procs, sizeof(procs));
			ck_assert_str_eq(procs, want);
		}
	cg_sample s;
	cgroup_sample(cg, &s);
	ck_assert_uint_eq(s.pids, 1);
	cg_stats st;
	cgroup_stats(cg, &st);
	ck_assert(st.have_memory);
	ck_assert_uint_gt(st.peak_memory, 0);
	ck_assert_uint_eq(st.oom_kills, 0);
	ck_assert_uint_eq(st.pids_max_events, 0);
	ck_assert(st.have_cpu == (cg->path[CG_CPUACCT] != NULL));

	/* A process that will not leave: removal gives up with EBUSY rather
	 * than waiting for ever, and says so. */
	char *paths[CG_N] = { 0 };
	for (int i = 0; i < CG_N; i++)
		paths[i] = cg->path[i] ? strdup(cg->path[i]) : NULL;
	ck_assert_int_eq(cgroup_destroy(cg), -EBUSY);
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
	close(go[1]);
	for (int i = CG_N - 1; i >= 0; i--) {
		if (paths[i])
			(void) rmdir(paths[i]);
		if (paths[i])
			ck_assert_int_eq(access(paths[i], F_OK), -1);
		free(paths[i]);
	}

	/* Without cpuacct (not mounted, or not ours): no such directory is
	 * made and the CPU figure is said to be missing. */
	free(h.parent[CG_CPUACCT]);
	h.parent[CG_CPUACCT] = NULL;
	ck_assert_int_eq(cgroup_create(&h, name, &l, &cg, &e), 0);
	ck_assert_ptr_null(cg->path[CG_CPUACCT]);
	cgroup_stats(cg, &st);
	ck_assert(!st.have_cpu);
	for (int i = 0; i < CG_N; i++)
		paths[i] = cg->path[i] ? strdup(cg->path[i]) : NULL;
	ck_assert_int_eq(cgroup_destroy(cg), 0);
	for (int i = 0; i < CG_N; i++) {
		if (paths[i])
			ck_assert_int_eq(access(paths[i], F_OK), -1);
		free(paths[i]);
	}
	cgroup_host_free(&h);
}
END_TEST

static char tmp[64];

static void tmp_setup(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/nsbox-hostlib-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
}

static void tmp_teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	(void) !system(cmd);
}

static void put_file(const char *rel, const char *text)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

/* A parent that is not a cgroup hierarchy (a stale --cgroup-parent, a
 * directory someone replaced): the first limit cannot be written, the
 * error names the file, and no directory is left behind. */
START_TEST(test_cgroup_v1_not_a_hierarchy)
{
	char d[CG_N][128];
	cg_host h = { .driver = CG_V1 };
	const char *sub[CG_N] = { "memory", "pids", "cpu", "cpuacct" };
	for (int i = 0; i < CG_N; i++) {
		snprintf(d[i], sizeof(d[i]), "%s/%s", tmp, sub[i]);
		ck_assert_int_eq(mkdir(d[i], 0755), 0);
		h.parent[i] = d[i];
	}
	h.parent[CG_CPUACCT] = d[CG_CPU];   /* cpu,cpuacct mounted together */
	cg_limits l = { .memory = 1 << 20, .cpus = 1, .pids = 8 };
	cgroup *cg = NULL;
	nsbox_error *e = NULL;
	ck_assert_int_eq(cgroup_create(&h, "run", &l, &cg, &e), -ENOENT);
	ck_assert_ptr_null(cg);
	char want[512];
	snprintf(want, sizeof(want), "open '%s/memory/run/memory.limit_in_bytes'", tmp);
	ck_assert_msg(strstr(nsbox_error_message(e), want), "%s", nsbox_error_message(e));
	nsbox_error_free(e);
	e = NULL;
	for (int i = 0; i < CG_N; i++) {
		char p[1024];
		snprintf(p, sizeof(p), "%s/run", d[i]);
		ck_assert_int_eq(access(p, F_OK), -1);
	}
	/* A parent that does not exist: the directory cannot be made. */
	snprintf(d[CG_PIDS], sizeof(d[CG_PIDS]), "%s/gone", tmp);
	ck_assert_int_eq(cgroup_create(&h, "run", &l, &cg, &e), -ENOENT);
	snprintf(want, sizeof(want), "create cgroup '%s/gone/run'", tmp);
	ck_assert_msg(strstr(nsbox_error_message(e), want), "%s", nsbox_error_message(e));
	nsbox_error_free(e);
	e = NULL;
	/* A cgroup removed under us: attaching says where it failed. */
	cgroup gone = { .driver = CG_V1, .path = { d[CG_MEMORY] }, .dirfd = -1 };
	ck_assert_int_eq(cgroup_attach(&gone, getpid(), &e), -ENOENT);
	snprintf(want, sizeof(want), "open '%s/cgroup.procs'", d[CG_MEMORY]);
	ck_assert_msg(strstr(nsbox_error_message(e), want), "%s", nsbox_error_message(e));
	nsbox_error_free(e);
	e = NULL;
	/* No driver at all. */
	cg_host none = { .driver = CG_NONE };
	ck_assert_int_eq(cgroup_create(&none, "run", &l, &cg, &e), -ENOTSUP);
	ck_assert_ptr_nonnull(strstr(nsbox_error_message(e), "no cgroup driver"));
	nsbox_error_free(e);
}
END_TEST

/* A cgroup v2 hierarchy without the controllers (this host's hybrid
 * "unified" mount, where memory/pids/cpu belong to v1): enabling them
 * fails with the kernel's word, and nothing is created. */
START_TEST(test_cgroup_v2_without_controllers)
{
	const char *u = "/sys/fs/cgroup/unified";
	char have[256] = "";
	struct stat st;
	if (!need_root("the cgroup v2 root") || stat(u, &st) < 0 || access("/sys/fs/cgroup/unified/cgroup.controllers", R_OK) < 0) {
		fprintf(stderr, "note: no hybrid unified mount; not tested\n");
		return;
	}
	read_file(u, "cgroup.controllers", have, sizeof(have));
	if (strstr(have, "memory")) {
		fprintf(stderr, "note: the unified hierarchy has memory here; not tested\n");
		return;
	}
	cg_host h = { .driver = CG_V2, .parent = { (char *) u } };
	cg_limits l = { .memory = 1 << 20, .cpus = 1, .pids = 8 };
	cgroup *cg = NULL;
	nsbox_error *e = NULL;
	char name[64];
	snprintf(name, sizeof(name), "covhost-unit-%d", (int) getpid());
	ck_assert_int_lt(cgroup_create(&h, name, &l, &cg, &e), 0);
	ck_assert_ptr_null(cg);
	ck_assert_msg(strstr(nsbox_error_message(e), "write '+memory +pids +cpu' to '/sys/fs/cgroup/unified/cgroup.subtree_control'"),
	              "%s", nsbox_error_message(e));
	nsbox_error_free(e);
	char p[128];
	snprintf(p, sizeof(p), "%s/%s", u, name);
	ck_assert_int_eq(access(p, F_OK), -1);
}
END_TEST

/* cgroup v2's counters as the kernel writes them. */
START_TEST(test_cgroup_v2_counters)
{
	put_file("memory.peak", "123456\n");
	put_file("memory.events", "low 0\nhigh 0\nmax 4\noom 2\noom_kill 1\n");
	put_file("pids.events", "max 3\n");
	put_file("pids.peak", "9\n");
	put_file("memory.current", "4096\n");
	put_file("pids.current", "2\n");
	put_file("cpu.stat", "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n");
	cgroup cg = { .driver = CG_V2, .path = { tmp }, .dirfd = -1 };
	cg_stats st;
	cgroup_stats(&cg, &st);
	ck_assert(st.have_memory);
	ck_assert_uint_eq(st.peak_memory, 123456);
	ck_assert_uint_eq(st.oom_kills, 1);
	ck_assert_uint_eq(st.pids_max_events, 3);
	ck_assert(st.have_pids_peak);
	ck_assert_uint_eq(st.pids_peak, 9);
	cg_sample s;
	cgroup_sample(&cg, &s);
	ck_assert_uint_eq(s.memory, 4096);
	ck_assert_uint_eq(s.pids, 2);
	ck_assert(s.have_cpu);
	ck_assert_double_eq_tol(s.cpu_ms, 1.5, 1e-9);
	/* A kernel without memory.peak (before 5.19): no peak, not zero. */
	char p[128];
	snprintf(p, sizeof(p), "%s/memory.peak", tmp);
	ck_assert_int_eq(unlink(p), 0);
	cgroup_stats(&cg, &st);
	ck_assert(!st.have_memory);
}
END_TEST

/* Removal kills first (cgroup.kill), then reports a directory that
 * would not go. */
START_TEST(test_cgroup_destroy_reports)
{
	char d[128];
	snprintf(d, sizeof(d), "%s/run", tmp);
	ck_assert_int_eq(mkdir(d, 0755), 0);
	put_file("run/cgroup.kill", "");
	cgroup *cg = calloc(1, sizeof(*cg));
	ck_assert_ptr_nonnull(cg);
	cg->driver = CG_V2;
	cg->path[0] = strdup(d);
	cg->dirfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(cg->dirfd, 0);
	ck_assert_int_eq(cgroup_destroy(cg), -ENOTEMPTY);
	char v[16];
	read_file(d, "cgroup.kill", v, sizeof(v));
	ck_assert_str_eq(v, "1");
	ck_assert_int_eq(cgroup_destroy(NULL), 0);
}
END_TEST

/* ---- seccomp.c / seccomp_cache.c ------------------------------------- */

/* The cache directory of root is /var/cache/nsbox/seccomp: give this test
 * a private one (a tmpfs in a mount namespace of its own). */
static bool private_cache(void)
{
	if (!need_root("a private /var/cache"))
		return false;
	ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	ck_assert_int_eq(mount("tmpfs", "/var/cache", "tmpfs", 0, "mode=0755"), 0);
	return true;
}

/* The one cache file there is. */
static void cache_file(char *out, size_t len)
{
	DIR *d = opendir("/var/cache/nsbox/seccomp");
	ck_assert_ptr_nonnull(d);
	struct dirent *de;
	int n = 0;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.') {
			snprintf(out, len, "/var/cache/nsbox/seccomp/%s", de->d_name);
			n++;
		}
	closedir(d);
	ck_assert_int_eq(n, 1);
}

static bool prepare(const char *spec, bool notify, sc_answers *ans)
{
	sc_bpf b;
	char *label = NULL;
	bool cached = true;
	nsbox_error *e = NULL;
	sc_answers none = { 0 };
	ck_assert_int_eq(sc_prepare(spec, notify, &b, &label, &cached, ans ? ans : &none, &e), 0);
	ck_assert_str_eq(label, spec);
	ck_assert_int_ge(b.n, 1);
	free(label);
	sc_bpf_free(&b);
	free(none.v);
	return cached;
}

static void patch(const char *path, off_t off, const void *bytes, size_t n)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, bytes, n, off), (ssize_t) n);
	close(fd);
}

START_TEST(test_cache_refuses_tampered_files)
{
	if (!private_cache())
		return;
	ck_assert(!prepare("strict", false, NULL));   /* compiled, stored */
	ck_assert(prepare("strict", false, NULL));    /* then loaded */
	char f[512];
	cache_file(f, sizeof(f));
	struct stat st;
	ck_assert_int_eq(stat(f, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	/* Writable by others: a filter anyone could have replaced. */
	ck_assert_int_eq(chmod(f, 0666), 0);
	ck_assert(!prepare("strict", false, NULL));
	ck_assert_int_eq(stat(f, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);   /* replaced by a fresh one */
	ck_assert(prepare("strict", false, NULL));
	/* Another user's file. */
	ck_assert_int_eq(chown(f, 65534, 65534), 0);
	ck_assert(!prepare("strict", false, NULL));
	ck_assert(prepare("strict", false, NULL));
	/* Not our format. */
	patch(f, 0, "evil", 4);
	ck_assert(!prepare("strict", false, NULL));
	ck_assert(prepare("strict", false, NULL));
	/* The text it claims to be compiled from differs (a collision). */
	ck_assert_int_eq(stat(f, &st), 0);
	patch(f, 12 + 8, "\x01", 1);
	ck_assert(!prepare("strict", false, NULL));
	ck_assert(prepare("strict", false, NULL));
	/* A layer count no filter has, and a truncated layer. */
	ck_assert_int_eq(stat(f, &st), 0);
	size_t tlen;
	FILE *fp = fopen(f, "re");
	ck_assert_ptr_nonnull(fp);
	uint64_t t64;
	ck_assert_int_eq(fseek(fp, 12, SEEK_SET), 0);
	ck_assert_int_eq(fread(&t64, sizeof(t64), 1, fp), 1);
	fclose(fp);
	tlen = (size_t) t64;
	uint32_t three = 3;
	patch(f, (off_t) (12 + 8 + tlen), &three, sizeof(three));
	ck_assert(!prepare("strict", false, NULL));
	ck_assert(prepare("strict", false, NULL));
	ck_assert_int_eq(truncate(f, st.st_size - 3), 0);
	ck_assert(!prepare("strict", false, NULL));
	ck_assert(prepare("strict", false, NULL));
	ck_assert_int_eq(truncate(f, (off_t) (12 + 8 + tlen + 4 + 1)), 0);
	ck_assert(!prepare("strict", false, NULL));
	/* A symlink in its place is not followed. */
	ck_assert_int_eq(unlink(f), 0);
	ck_assert_int_eq(symlink("/etc/passwd", f), 0);
	ck_assert(!prepare("strict", false, NULL));
	ck_assert_int_eq(unlink(f), 0);
	/* A cache directory others may write is not used at all. */
	ck_assert_int_eq(chmod("/var/cache/nsbox/seccomp", 0777), 0);
	ck_assert(!prepare("strict", false, NULL));
	ck_assert(!prepare("strict", false, NULL));
	DIR *d = opendir("/var/cache/nsbox/seccomp");
	ck_assert_ptr_nonnull(d);
	struct dirent *de;
	while ((de = readdir(d)))
		ck_assert_msg(de->d_name[0] == '.', "stored in an untrusted directory: %s", de->d_name);
	closedir(d);
}
END_TEST

/* An unprivileged caller's cache: $XDG_CACHE_HOME, else $HOME/.cache;
 * neither (or a relative one): no cache, still a filter. */
START_TEST(test_cache_dir_of_a_user)
{
	/* As nobody (the saved uid stays root, to write coverage counts at
	 * the end). */
	bool root = geteuid() == 0;
	if (root) {
		ck_assert_int_eq(chown(tmp, 65534, 65534), 0);
		ck_assert_int_eq(syscall(SYS_setresgid, 65534, 65534, 0), 0);
		ck_assert_int_eq(syscall(SYS_setresuid, 65534, 65534, 0), 0);
	}
	char x[128], h[128], p[256];
	snprintf(x, sizeof(x), "%s/xdg", tmp);
	snprintf(h, sizeof(h), "%s/home", tmp);
	setenv("XDG_CACHE_HOME", x, 1);
	setenv("HOME", h, 1);
	ck_assert(!prepare("strict", false, NULL));
	ck_assert(prepare("strict", false, NULL));
	snprintf(p, sizeof(p), "%s/nsbox/seccomp", x);
	struct stat st;
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0700);
	setenv("XDG_CACHE_HOME", "relative", 1);
	ck_assert(!prepare("strict", false, NULL));
	ck_assert(prepare("strict", false, NULL));
	snprintf(p, sizeof(p), "%s/.cache/nsbox/seccomp", h);
	ck_assert_int_eq(stat(p, &st), 0);
	unsetenv("XDG_CACHE_HOME");
	unsetenv("HOME");
	ck_assert(!prepare("strict", false, NULL));
	ck_assert(!prepare("strict", false, NULL));
	if (root) {
		ck_assert_int_eq(syscall(SYS_setresuid, 0, 0, 0), 0);
		ck_assert_int_eq(syscall(SYS_setresgid, 0, 0, 0), 0);
	}
}
END_TEST

/* The filter as a run installs it: the profile's answer, not the kernel's
 * (root could unshare), and --seccomp-log's listener and answers. */
START_TEST(test_install_denies)
{
	sc_bpf b;
	char *label = NULL;
	bool cached;
	sc_answers ans = { 0 };
	nsbox_error *e = NULL;
	setenv("NSBOX_SECCOMP_NO_CACHE", "1", 1);
	ck_assert_int_eq(sc_prepare("default", true, &b, &label, &cached, &ans, &e), 0);
	ck_assert(!cached || b.notify);
	ck_assert_int_eq(sc_answer_for(&ans, SYS_unshare), EPERM);
	ck_assert_int_eq(sc_answer_for(&ans, SYS_getpid), ans.default_errno);
	free(ans.v);
	free(label);
	sc_bpf_free(&b);
	ck_assert_int_eq(sc_prepare("default", false, &b, &label, &cached, &ans, &e), 0);
	ck_assert(!cached);
	ck_assert_int_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	ck_assert_int_eq(sc_install(&b, &(int){ -1 }), 0);
	errno = 0;
	ck_assert_int_eq(unshare(CLONE_NEWUTS), -1);
	ck_assert_int_eq(errno, EPERM);
	ck_assert_int_eq(getppid() > 0, 1);
	free(label);
	sc_bpf_free(&b);
}
END_TEST

START_TEST(test_install_listener)
{
	sc_bpf b;
	char *label = NULL;
	bool cached;
	sc_answers ans = { 0 };
	nsbox_error *e = NULL;
	setenv("NSBOX_SECCOMP_NO_CACHE", "1", 1);
	/* A profile that allows what this process does after the test (exit,
	 * coverage and sanitizer bookkeeping): a notified call would wait
	 * for a listener nobody reads. */
	put_file("log.yaml", "default: { action: allow }\ndeny:\n  - { syscalls: [acct], action: errno, errno: EPERM }\n");
	char spec[128];
	snprintf(spec, sizeof(spec), "%s/log.yaml", tmp);
	ck_assert_int_eq(sc_prepare(spec, true, &b, &label, &cached, &ans, &e), 0);
	ck_assert(b.notify);
	ck_assert_int_eq(sc_answer_for(&ans, SYS_acct), EPERM);
	ck_assert_int_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	int listener = -1;
	ck_assert_int_eq(sc_install(&b, &listener), 0);
	ck_assert_int_ge(listener, 0);
	ck_assert_int_ne(fcntl(listener, F_GETFD), -1);
	/* A layer the kernel rejects: its errno comes back, not success. */
	sc_bpf bad = { .n = 1 };
	struct sock_filter junk = { 0xffff, 0, 0, 0 };
	bad.layers[0].insns = &junk;
	bad.layers[0].len = 1;
	ck_assert_int_eq(sc_install(&bad, &listener), -EINVAL);
	free(ans.v);
	free(label);
	sc_bpf_free(&b);
}
END_TEST


/* ---- limits.c -------------------------------------------------------- */

START_TEST(test_limits_apply)
{
	nsbox_plan *p = calloc(1, sizeof(*p));
	ck_assert_ptr_nonnull(p);
	cpu_set_t allowed, got;
	ck_assert_int_eq(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
	/* A CPU number past the set: counted from the first. */
	ck_assert_int_eq(limits_pick_cpus(&allowed, -1, 1, &p->cpu_mask), 1);
	ck_assert_int_eq(limits_pick_cpus(&allowed, CPU_SETSIZE + 5, 1, &got), 1);
	ck_assert(CPU_EQUAL(&got, &p->cpu_mask));
	p->pin_cpus = true;
	p->rlimits[0].resource = RLIMIT_NOFILE;
	p->rlimits[0].value = 64;
	p->rlimits[1].resource = RLIMIT_FSIZE;
	p->rlimits[1].value = 1 << 20;
	p->n_rlimits = 2;
	enum step failed = STEP__MAX;
	ck_assert_int_eq(limits_apply(p, &failed), 0);
	struct rlimit rl;
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	ck_assert_uint_eq(rl.rlim_cur, 64);
	ck_assert_uint_eq(rl.rlim_max, 64);
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &rl), 0);
	ck_assert_uint_eq(rl.rlim_max, 1 << 20);
	ck_assert_int_eq(sched_getaffinity(0, sizeof(got), &got), 0);
	ck_assert(CPU_EQUAL(&got, &p->cpu_mask));
	ck_assert_int_eq(CPU_COUNT(&got), 1);
	/* A limit above the hard one (lowered just now): the kernel says no,
	 * and the step is named. */
	p->rlimits[0].value = 65;
	ck_assert_int_eq(limits_apply(p, &failed), -EPERM);
	ck_assert_int_eq(failed, STEP_RLIMITS);
	/* Only CPUs that are not there. */
	p->n_rlimits = 0;
	CPU_ZERO(&p->cpu_mask);
	CPU_SET(CPU_SETSIZE - 1, &p->cpu_mask);
	failed = STEP__MAX;
	ck_assert_int_eq(limits_apply(p, &failed), -EINVAL);
	ck_assert_int_eq(failed, STEP_AFFINITY);
	free(p);
}
END_TEST

/* A workspace overlay's max_size bounds each file when it is below
 * --max-file-size (or there is none). */
START_TEST(test_limits_plan_fsize)
{
	nsbox_config cfg = { .memory = 1 << 30, .cpus = 64, .pids = 100, .fsize = 1 << 30,
	                     .workspace = (char *) "/tmp", .workspace_mode = WS_OVERLAY,
	                     .workspace_max_size = 1 << 20, .fallback = FALLBACK_RLIMIT };
	nsbox_plan *p = calloc(1, sizeof(*p));
	ck_assert_ptr_nonnull(p);
	nsbox_error *e = NULL;
	ck_assert_int_eq(limits_plan(p, &cfg, &e), 0);
	bool found = false;
	for (size_t i = 0; i < p->n_rlimits; i++)
		if (p->rlimits[i].resource == RLIMIT_FSIZE) {
			ck_assert_uint_eq(p->rlimits[i].value, 1 << 20);
			found = true;
		}
	ck_assert(found);
	cgroup_host_free(&p->cg_host);
	free(p->warning);
	free(p);
}
END_TEST

/* ---- ws_nosuid.c ----------------------------------------------------- */

START_TEST(test_ws_nosuid_install)
{
	ws_plan w = { 0 };
	ck_assert_int_eq(ws_nosuid_install(&w), 0);   /* no rw workspace: nothing */
	nsbox_error *e = NULL;
	ck_assert_int_eq(ws_nosuid_filter(&w, &e), 0);
	ck_assert_uint_gt(w.nosuid_len, 0);
	char f[128], d[128];
	snprintf(f, sizeof(f), "%s/file", tmp);
	snprintf(d, sizeof(d), "%s/dir", tmp);
	int fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	ck_assert_int_eq(ws_nosuid_install(&w), 0);
	/* Set-id bits, by every call that sets a mode: EPERM. */
	errno = 0;
	ck_assert_int_eq(chmod(f, 04755), -1);
	ck_assert_int_eq(errno, EPERM);
	ck_assert_int_eq(fchmod(fd, 02755), -1);
	ck_assert_int_eq(fchmodat(AT_FDCWD, f, 06755, 0), -1);
	ck_assert_int_eq(mkdir(d, 02755), -1);
	ck_assert_int_eq(errno, EPERM);
	ck_assert_int_eq(open(d, O_WRONLY | O_CREAT | O_CLOEXEC, 04755), -1);
	ck_assert_int_eq(errno, EPERM);
	/* openat2 hides its mode from the filter: refused as missing. */
	ck_assert_int_eq(syscall(SYS_openat2, AT_FDCWD, f, NULL, 0), -1);
	ck_assert_int_eq(errno, ENOSYS);
	ck_assert_int_eq(syscall(SYS_io_uring_setup, 1, NULL), -1);
	ck_assert_int_eq(errno, EPERM);
	/* Plain modes pass; the file kept its mode. */
	ck_assert_int_eq(chmod(f, 0755), 0);
	ck_assert_int_eq(mkdir(d, 0755), 0);
	struct stat st;
	ck_assert_int_eq(stat(f, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0755);
	close(fd);
	free(w.nosuid);
}
END_TEST

/* ---- janitor.c ------------------------------------------------------- */

/* Woken by the last write end closing, the janitor removes the run's
 * directories in each hierarchy (once for hierarchies mounted together,
 * none for a missing cpuacct). */
START_TEST(test_janitor_removes)
{
	char d[CG_N][128], run[CG_N][160];
	const char *sub[CG_N] = { "memory", "pids", "cpu", "cpuacct" };
	cg_host h = { .driver = CG_V1 };
	for (int i = 0; i < CG_N; i++) {
		snprintf(d[i], sizeof(d[i]), "%s/%s", tmp, sub[i]);
		ck_assert_int_eq(mkdir(d[i], 0755), 0);
		snprintf(run[i], sizeof(run[i]), "%s/run", d[i]);
		ck_assert_int_eq(mkdir(run[i], 0755), 0);
		h.parent[i] = d[i];
	}
	h.parent[CG_PIDS] = d[CG_MEMORY];
	h.parent[CG_CPUACCT] = NULL;
	janitor j;
	nsbox_error *e = NULL;
	ck_assert_int_eq(janitor_start(&h, "run", &j, &e), 0);
	ck_assert_int_gt(j.pid, 0);
	ck_assert_int_eq(access(run[CG_MEMORY], F_OK), 0);   /* asleep until woken */
	janitor_finish(&j);
	ck_assert_int_eq(j.pidfd, -1);
	ck_assert_int_eq(access(run[CG_MEMORY], F_OK), -1);
	ck_assert_int_eq(access(run[CG_CPU], F_OK), -1);
	ck_assert_int_eq(access(run[CG_PIDS], F_OK), 0);      /* not its hierarchy */
	ck_assert_int_eq(access(run[CG_CPUACCT], F_OK), 0);   /* cpuacct not used */
	/* cgroup v2: it kills what is left (cgroup.kill) before removing. */
	char v2[128];
	snprintf(v2, sizeof(v2), "%s/v2", tmp);
	ck_assert_int_eq(mkdir(v2, 0755), 0);
	char r2[160];
	snprintf(r2, sizeof(r2), "%s/v2/r", tmp);
	ck_assert_int_eq(mkdir(r2, 0755), 0);
	put_file("v2/r/cgroup.kill", "");
	cg_host h2 = { .driver = CG_V2, .parent = { v2 } };
	ck_assert_int_eq(janitor_start(&h2, "r", &j, &e), 0);
	janitor_finish(&j);
	char k[64];
	read_file(r2, "cgroup.kill", k, sizeof(k));
	ck_assert_str_eq(k, "1");
}
END_TEST

/* ---- check.c: the public API's edges ------------------------------------ */

START_TEST(test_check_api)
{
	nsbox_error *e = NULL;
	ck_assert_int_eq(nsbox_check_run(NULL, &e), -EINVAL);
	ck_assert_str_eq(nsbox_error_message(e), "check the host: no output pointer: Invalid argument");
	nsbox_error_free(e);
	e = NULL;
	ck_assert_uint_eq(nsbox_check_count(NULL), 0);
	ck_assert(!nsbox_check_default_run_works(NULL));
	char *out = NULL;
	ck_assert_int_eq(nsbox_check_to_json(NULL, &out, &e), -EINVAL);
	nsbox_error_free(e);
	e = NULL;
	nsbox_check *c = NULL;
	ck_assert_int_eq(nsbox_check_run(&c, &e), 0);
	size_t n = nsbox_check_count(c);
	ck_assert_uint_eq(n, 9);
	const char *name = NULL;
	ck_assert_int_eq(nsbox_check_item(c, n, &name, NULL, NULL, NULL), -EINVAL);
	ck_assert_ptr_null(name);
	ck_assert_int_eq(nsbox_check_item(NULL, 0, &name, NULL, NULL, NULL), -EINVAL);
	ck_assert_int_eq(nsbox_check_item(c, 0, NULL, NULL, NULL, NULL), 0);   /* all optional */
	ck_assert_int_eq(nsbox_check_item(c, 0, &name, NULL, NULL, NULL), 0);
	ck_assert_str_eq(name, "user namespaces");
	ck_assert_int_eq(nsbox_check_to_json(c, NULL, &e), -EINVAL);
	nsbox_error_free(e);
	nsbox_check_free(c);
	nsbox_check_free(NULL);
}
END_TEST

/* Allow no new file descriptor (the limit at the lowest free one); the
 * old limit in *old. */
static void no_fds_left(struct rlimit *old)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, old), 0);
	struct rlimit lim = *old;
	lim.rlim_cur = (rlim_t) fd;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &lim), 0);
}

static const char *check_detail(const nsbox_check *c, const char *name, nsbox_check_status *st)
{
	for (size_t i = 0; i < nsbox_check_count(c); i++) {
		const char *n = NULL, *d = NULL;
		ck_assert_int_eq(nsbox_check_item(c, i, &n, st, &d, NULL), 0);
		if (!strcmp(n, name))
			return d;
	}
	ck_abort_msg("no check item '%s'", name);
	return NULL;
}

/* Probes that cannot run (no descriptor for a pidfd, a sysctl or a file)
 * are reported missing with the reason, never as working, and a default
 * run is not said to work. */
START_TEST(test_check_without_fds)
{
	struct rlimit old;
	no_fds_left(&old);
	nsbox_check *c = NULL;
	int r = nsbox_check_run(&c, NULL);
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
	ck_assert_int_eq(r, 0);
	nsbox_check_status st = NSBOX_CHECK_OK;
	ck_assert_str_eq(check_detail(c, "user namespaces", &st),
	                 "Too many open files (kernel.unprivileged_userns_clone=n/a, user.max_user_namespaces=n/a, "
	                 "apparmor_restrict_unprivileged_userns=n/a)");
	ck_assert_int_eq(st, NSBOX_CHECK_MISSING);
	ck_assert_str_eq(check_detail(c, "all namespaces", &st),
	                 "user, pid, mount, net, ipc, uts, cgroup: Too many open files");
	ck_assert_int_eq(st, NSBOX_CHECK_MISSING);
	ck_assert_str_eq(check_detail(c, "overlay in a user namespace", &st), "Too many open files");
	ck_assert_int_eq(st, NSBOX_CHECK_MISSING);
	ck_assert(!nsbox_check_default_run_works(c));
	char *json = NULL;
	ck_assert_int_eq(nsbox_check_to_json(c, &json, NULL), 0);
	ck_assert_ptr_nonnull(strstr(json, "{\"default_run_works\":false,"));
	ck_assert_ptr_nonnull(strstr(json, "\"name\":\"overlay in a user namespace\",\"status\":\"missing\""));
	free(json);
	nsbox_check_free(c);
}
END_TEST

/* The id-map helper cannot be started (no descriptor for its pidfd): the
 * error names it, and nothing was run. */
START_TEST(test_idmap_helper_cannot_start)
{
	char pu[24] = "", pg[24] = "";
	char *ua[] = { (char *) "/usr/bin/newuidmap", pu, (char *) "0", (char *) "1073741824", (char *) "1", NULL };
	char *ga[] = { (char *) "/usr/bin/newgidmap", pg, (char *) "0", (char *) "1073741824", (char *) "1", NULL };
	nsbox_plan p = { .use_newidmap = true, .newuidmap_argv = ua, .newgidmap_argv = ga };
	nsbox_error *e = NULL;
	struct rlimit old;
	no_fds_left(&old);
	int r = idmap_write(&p, getpid(), &e);
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
	ck_assert_int_eq(r, -EMFILE);
	ck_assert_str_eq(nsbox_error_message(e), "start '/usr/bin/newuidmap': Too many open files");
	ck_assert_str_eq(nsbox_error_step(e), "idmap");
	nsbox_error_free(e);
	/* No child is left to reap. */
	ck_assert_int_eq(waitpid(-1, NULL, WNOHANG | __WALL), -1);
	ck_assert_int_eq(errno, ECHILD);
}
END_TEST

/* ---- idmap.c: writing the maps ----------------------------------------- */

/* A child in a new user namespace, waiting for `go` to close. */
static pid_t userns_child(int *go_w)
{
	int go[2], ready[2];
	ck_assert_int_eq(pipe2(go, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char c;
		(void) prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);   /* not past a failed test */
		close(go[1]);
		close(ready[0]);
		if (unshare(CLONE_NEWUSER) < 0)
			_exit(1);
		(void) !write(ready[1], "r", 1);
		(void) !read(go[0], &c, 1);
		_exit(0);
	}
	close(go[0]);
	close(ready[1]);
	char c;
	ck_assert_int_eq(read(ready[0], &c, 1), 1);
	close(ready[0]);
	*go_w = go[1];
	return pid;
}

static void end_child(pid_t pid, int go_w)
{
	close(go_w);
	ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
}

START_TEST(test_idmap_write)
{
	if (!need_root("writing another process's id maps"))
		return;
	int go;
	pid_t pid = userns_child(&go);
	nsbox_plan *p = calloc(1, sizeof(*p));
	ck_assert_ptr_nonnull(p);
	p->uid_map = (char *) "0 1073741824 65536\n";
	p->gid_map = (char *) "0 1073741824 65536\n";
	nsbox_error *e = NULL;
	ck_assert_int_eq(idmap_write(p, pid, &e), 0);
	char path[64], v[128];
	snprintf(path, sizeof(path), "/proc/%d", (int) pid);
	read_file(path, "uid_map", v, sizeof(v));
	ck_assert_ptr_nonnull(strstr(v, "1073741824"));
	/* A map is written once: the second time the kernel refuses, and
	 * the error names the file and the map, with a hint. */
	char want[128];
	ck_assert_int_eq(idmap_write(p, pid, &e), -EPERM);
	snprintf(want, sizeof(want), "write '/proc/%d/uid_map' with '0 1073741824 65536'", (int) pid);
	ck_assert_msg(strstr(nsbox_error_message(e), want), "%s", nsbox_error_message(e));
	ck_assert_ptr_nonnull(strstr(nsbox_error_message(e), "Operation not permitted"));
	nsbox_error_free(e);
	e = NULL;
	/* Rootless: setgroups is denied first; after gid_map it cannot be. */
	p->rootless = true;
	ck_assert_int_eq(idmap_write(p, pid, &e), -EPERM);
	snprintf(want, sizeof(want), "write '/proc/%d/setgroups' with 'deny'", (int) pid);
	ck_assert_msg(strstr(nsbox_error_message(e), want), "%s", nsbox_error_message(e));
	nsbox_error_free(e);
	e = NULL;
	p->rootless = false;
	/* newuidmap refusing (a range not granted, a map already set): its
	 * failure, named, with both helpers reaped. */
	if (access("/usr/bin/newuidmap", X_OK) == 0 && access("/usr/bin/newgidmap", X_OK) == 0) {
		char pu[24] = "", pg[24] = "";
		char *ua[] = { (char *) "/usr/bin/newuidmap", pu, (char *) "0", (char *) "1073741824", (char *) "1", NULL };
		char *ga[] = { (char *) "/usr/bin/newgidmap", pg, (char *) "0", (char *) "1073741824", (char *) "1", NULL };
		p->use_newidmap = true;
		p->newuidmap_argv = ua;
		p->newgidmap_argv = ga;
		ck_assert_int_eq(idmap_write(p, pid, &e), -EPERM);
		snprintf(want, sizeof(want), "run '/usr/bin/newuidmap' for pid %d: it failed", (int) pid);
		ck_assert_msg(strstr(nsbox_error_message(e), want), "%s", nsbox_error_message(e));
		nsbox_error_free(e);
		e = NULL;
		p->use_newidmap = false;
	}
	end_child(pid, go);
	/* The process is gone. */
	ck_assert_int_eq(idmap_write(p, pid, &e), -ENOENT);
	snprintf(want, sizeof(want), "open '/proc/%d/uid_map'", (int) pid);
	ck_assert_msg(strstr(nsbox_error_message(e), want), "%s", nsbox_error_message(e));
	nsbox_error_free(e);
	free(p);
}
END_TEST

/* /etc/subuid that cannot be read (here: a directory) is an error naming
 * it, not "no entries"; a malformed count is no entry. */
START_TEST(test_subid_unreadable)
{
	root_ids ri;
	nsbox_error *e = NULL;
	char f[128];
	snprintf(f, sizeof(f), "%s/subgid", tmp);
	put_file("subgid", "nsbox:1073807360:65536\nalice:100000:6553x\nbob:200000:65536\n");
	ck_assert_int_lt(idmap_root_ids(tmp, f, &ri, &e), 0);
	char want[128];
	snprintf(want, sizeof(want), "read '%s'", tmp);
	ck_assert_msg(strstr(nsbox_error_message(e), want), "%s", nsbox_error_message(e));
	nsbox_error_free(e);
	subid_range r;
	ck_assert_int_eq(subid_lookup(f, "alice", (unsigned long) -1, &r), 0);
	ck_assert_int_eq(subid_lookup(f, "bob", (unsigned long) -1, &r), 1);
	ck_assert_uint_eq(subid_free_start(tmp, f, "nsbox", 65536, 65536), 0);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("hostlib");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_caps_drop_and_clear);
	tcase_add_test(tc, test_loopback_up);
	tcase_add_test(tc, test_route_classes);
	tcase_add_test(tc, test_cgroup_v1_lifecycle);
	tcase_add_test(tc, test_cgroup_v2_without_controllers);
	tcase_add_test(tc, test_cache_refuses_tampered_files);
	tcase_add_test(tc, test_install_denies);
	TCase *tt = tcase_create("hostlib-tmp");
	tcase_add_checked_fixture(tt, tmp_setup, tmp_teardown);
	tcase_add_test(tt, test_cgroup_v1_not_a_hierarchy);
	tcase_add_test(tt, test_cgroup_v2_counters);
	tcase_add_test(tt, test_cgroup_destroy_reports);
	tcase_add_test(tt, test_cache_dir_of_a_user);
	tcase_add_test(tt, test_ws_nosuid_install);
	tcase_add_test(tt, test_install_listener);
	tcase_add_test(tt, test_janitor_removes);
	tcase_add_test(tt, test_subid_unreadable);
	tcase_add_test(tc, test_limits_apply);
	tcase_add_test(tc, test_check_api);
	tcase_add_test(tc, test_check_without_fds);
	tcase_add_test(tc, test_idmap_helper_cannot_start);
	tcase_add_test(tc, test_idmap_write);
	tcase_add_test(tc, test_limits_plan_fsize);
	Suite *s = suite_create("hostlib");
	suite_add_tcase(s, tc);
	suite_add_tcase(s, tt);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
