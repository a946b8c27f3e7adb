/* `nsbox check`: try each kernel feature nsbox relies on, in short-lived
 * children, and say what is missing and how to get it. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/buf.h"
#include "cgroup/cgroup.h"
#include "base/cleanup.h"
#include "base/coverage.h"
#include "base/error.h"
#include "net/netuser.h"
#include "plan/idmap.h"
#include "base/json.h"
#include "base/syscalls.h"

typedef struct item {
	char *name, *detail, *remedy;
	nsbox_check_status status;
	bool required;   /* a default run needs it */
} item;

struct nsbox_check {
	item items[16];
	size_t n;
};

static void add(nsbox_check *c, const char *name, bool required, nsbox_check_status st,
                const char *remedy, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void add(nsbox_check *c, const char *name, bool required, nsbox_check_status st,
                const char *remedy, const char *fmt, ...)
{
	if (c->n >= ARRAY_SIZE(c->items))
		return;
	item *it = &c->items[c->n++];
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&it->detail, fmt, ap) < 0)
		it->detail = NULL;
	va_end(ap);
	it->name = strdup(name);
	it->remedy = remedy && st != NSBOX_CHECK_OK ? strdup(remedy) : NULL;
	it->status = st;
	it->required = required;
}

static void read_sysctl(const char *path, char *out, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, out, len - 1) : -1;
	if (fd >= 0)
		close(fd);
	out[n > 0 ? n : 0] = '\0';
	out[strcspn(out, "\n")] = '\0';
}

/* Run fn in a child created with `flags`; returns 0 or the errno. */
static int try_child(uint64_t flags, int (*fn)(void *), void *arg)
{
	int pidfd = -1;
	struct clone_args ca = { .flags = flags | CLONE_PIDFD, .pidfd = (uint64_t) (uintptr_t) &pidfd };
	bool dump = coverage_clone_may_dump();
	pid_t pid = (pid_t) sys_clone3(&ca);
	if (pid < 0)
		return errno;
	if (pid == 0) {
		int r = fn ? fn(arg) : 0;
		if (dump)
			coverage_dump();   /* a host-side probe: its lines count too */
		_exit(r);
	}
	siginfo_t si = { 0 };
	while (waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED | __WALL) < 0 && errno == EINTR)
		;
	close(pidfd);
	return si.si_code == CLD_EXITED ? si.si_status : EINTR;
}

static const char userns_remedy[] =
	"enable unprivileged user namespaces: sysctl kernel.unprivileged_userns_clone=1 and "
	"user.max_user_namespaces>0; on Ubuntu 24.04+ allow them in AppArmor "
	"(kernel.apparmor_restrict_unprivileged_userns=0 or a profile for nsbox)";

static void check_namespaces(nsbox_check *c)
{
	char clone_ok[16], max[32], aa[16];
	read_sysctl("/proc/sys/kernel/unprivileged_userns_clone", clone_ok, sizeof(clone_ok));
	read_sysctl("/proc/sys/user/max_user_namespaces", max, sizeof(max));
	read_sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", aa, sizeof(aa));
	int e = try_child(CLONE_NEWUSER, NULL, NULL);
	add(c, "user namespaces", true, e ? NSBOX_CHECK_MISSING : NSBOX_CHECK_OK, userns_remedy,
	    "%s (kernel.unprivileged_userns_clone=%s, user.max_user_namespaces=%s, apparmor_restrict_unprivileged_userns=%s)",
	    e ? strerror(e) : "can be created", *clone_ok ? clone_ok : "n/a", *max ? max : "n/a",
	    *aa ? aa : "n/a");
	e = try_child(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC |
	              CLONE_NEWUTS | CLONE_NEWCGROUP, NULL, NULL);
	add(c, "all namespaces", true, e ? NSBOX_CHECK_MISSING : NSBOX_CHECK_OK, userns_remedy,
	    "user, pid, mount, net, ipc, uts, cgroup: %s", e ? strerror(e) : "can be created together");
	long r = syscall(__NR_openat2, -1, NULL, NULL, 0);
	bool have_openat2 = !(r < 0 && errno == ENOSYS);
	r = syscall(__NR_mount_setattr, -1, NULL, 0, NULL, 0);
	bool have_setattr = !(r < 0 && errno == ENOSYS);
	add(c, "mount API", true, have_openat2 && have_setattr ? NSBOX_CHECK_OK : NSBOX_CHECK_MISSING,
	    "use Linux 5.12 or later", "openat2 %s, open_tree/move_mount/mount_setattr %s",
	    have_openat2 ? "yes" : "no", have_setattr ? "yes" : "no");
}

static void check_cgroups(nsbox_check *c)
{
	cg_host h;
	cgroup_probe(NULL, &h);
	static const char remedy[] =
		"run as root, or delegate a cgroup v2 subtree with the memory, pids and cpu controllers "
		"(systemd: Delegate=yes) and pass it with --cgroup-parent";
	if (h.driver == CG_V2)
		add(c, "cgroups", false, NSBOX_CHECK_OK, NULL,
		    "cgroup v2: run cgroups go below '%s' (memory, pids, cpu)", h.parent[0]);
	else if (h.driver == CG_V1)
		add(c, "cgroups", false, NSBOX_CHECK_OK, NULL,
		    "cgroup v1: run cgroups go below '%s' (memory), '%s' (pids), '%s' (cpu), '%s' (cpuacct)",
		    h.parent[CG_MEMORY], h.parent[CG_PIDS], h.parent[CG_CPU],
		    h.parent[CG_CPUACCT] ? h.parent[CG_CPUACCT] : "not used");
	else
		add(c, "cgroups", false, NSBOX_CHECK_WARN, remedy,
		    "none usable (%s): limits fall back to rlimits: memory per process (RLIMIT_DATA), not for the "
		    "sandbox as a whole, and an OOM kill is not detected (allocations fail instead); processes per "
		    "sandbox (RLIMIT_NPROC); CPU by pinning to whole CPUs (a fractional --cpus is refused). Every run "
		    "warns in one line unless a policy acknowledges it (limits.fallback: rlimit) or NSBOX_QUIET is "
		    "set; --require-cgroup (limits.fallback: refuse) refuses such runs", h.reason);
	cgroup_host_free(&h);
}

/* In a new user and mount namespace, mount an overlay with userxattr (what
 * workspaces need when rootless). */
static int overlay_child(void *arg)
{
	const char *dir = arg;
	char m[64], lower[PATH_MAX], upper[PATH_MAX], work[PATH_MAX], merged[PATH_MAX], opts[4 * PATH_MAX];
	uid_t uid = getuid();
	gid_t gid = getgid();
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
		return errno;
	int fd = open("/proc/self/setgroups", O_WRONLY);
	if (fd >= 0) {
		(void) !write(fd, "deny", 4);
		close(fd);
	}
	snprintf(m, sizeof(m), "0 %u 1", (unsigned) uid);
	fd = open("/proc/self/uid_map", O_WRONLY);
	if (fd < 0 || write(fd, m, strlen(m)) < 0)
		return errno;
	close(fd);
	snprintf(m, sizeof(m), "0 %u 1", (unsigned) gid);
	fd = open("/proc/self/gid_map", O_WRONLY);
	if (fd < 0 || write(fd, m, strlen(m)) < 0)
		return errno;
	close(fd);
	if (mount("tmpfs", dir, "tmpfs", 0, "size=64k") < 0)
		return errno;
	snprintf(lower, sizeof(lower), "%s/l", dir);
	snprintf(upper, sizeof(upper), "%s/u", dir);
	snprintf(work, sizeof(work), "%s/w", dir);
	snprintf(merged, sizeof(merged), "%s/m", dir);
	if (mkdir(lower, 0755) || mkdir(upper, 0755) || mkdir(work, 0755) || mkdir(merged, 0755))
		return errno;
	snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s,userxattr", lower, upper, work);
	if (mount("overlay", merged, "overlay", 0, opts) < 0)
		return errno;
	return 0;
}

static void check_overlay(nsbox_check *c)
{
	char dir[] = "/tmp/nsbox-check-XXXXXX";
	if (!mkdtemp(dir)) {
		add(c, "overlay in a user namespace", false, NSBOX_CHECK_WARN, NULL,
		    "could not create a temporary directory: %s", strerror(errno));
		return;
	}
	int e = try_child(0, overlay_child, dir);
	(void) rmdir(dir);
	add(c, "overlay in a user namespace", false, e ? NSBOX_CHECK_MISSING : NSBOX_CHECK_OK,
	    "use Linux 5.11 or later (overlayfs with userxattr in user namespaces)",
	    "%s", e ? strerror(e) : "overlayfs mounts with userxattr");
}

static void check_seccomp(nsbox_check *c)
{
	int mode = prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
	unsigned action = SECCOMP_RET_USER_NOTIF;
	bool notif = syscall(__NR_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0;
	action = SECCOMP_RET_LOG;
	bool log = syscall(__NR_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0;
	add(c, "seccomp", false, mode >= 0 ? NSBOX_CHECK_OK : NSBOX_CHECK_MISSING,
	    "build the kernel with CONFIG_SECCOMP_FILTER",
	    "%s (user notification %s, log action %s)",
	    mode < 0 ? strerror(errno) : mode == 0 ? "available" : "available (nsbox itself is filtered)",
	    notif ? "yes" : "no", log ? "yes" : "no");
}

/* Root's host range must be its own: no other user's subordinate ids in it. */
static void check_root_ids(nsbox_check *c)
{
	root_ids ri;
	nsbox_error *e = NULL;
	if (idmap_root_ids("/etc/subuid", "/etc/subgid", &ri, &e) < 0) {
		add(c, "id mapping", true, NSBOX_CHECK_MISSING,
		    "give the 'nsbox' entries of /etc/subuid and /etc/subgid 65536 ids no other entry uses",
		    "root: %s", e ? nsbox_error_message(e) : "cannot read /etc/subuid or /etc/subgid");
		nsbox_error_free(e);
		return;
	}
	if (ri.conflict_file) {
		_cleanup_free_ char *detail = NULL, *hint = NULL;
		if (idmap_root_conflict(&ri, "/etc/subuid", "/etc/subgid", &detail, &hint) == 0)
			add(c, "id mapping", true, NSBOX_CHECK_MISSING, hint, "root: cannot %s", detail);
		return;
	}
	add(c, "id mapping", true, NSBOX_CHECK_OK, NULL,
	    "root: sandboxes map to host ids %llu-%llu and group ids %llu-%llu (%s), which no other entry "
	    "of /etc/subuid or /etc/subgid overlaps",
	    (unsigned long long) ri.uid.start, (unsigned long long) (ri.uid.start + NSBOX_RANGE_COUNT - 1),
	    (unsigned long long) ri.gid.start, (unsigned long long) (ri.gid.start + NSBOX_RANGE_COUNT - 1),
	    ri.own_uid && ri.own_gid ? "the 'nsbox' entries"
	    : ri.own_uid || ri.own_gid ? "an 'nsbox' entry and the built-in range" : "the built-in range");
}

static void check_helpers(nsbox_check *c)
{
	/* none, host and the allowlist proxy need nothing from the host;
	 * user-mode NAT needs a helper and a tun device it may open. */
	nsbox_config cfg = { .net = NET_USER, .net_helper = HELPER_AUTO };
	netuser_plan np;
	nsbox_error *e = NULL;
	bool user = netuser_prepare(&np, &cfg, geteuid() != 0, &e) == 0;
	if (user)
		add(c, "network", false, NSBOX_CHECK_OK, NULL,
		    "none, host, --allow-host (the built-in filtering proxy) and user (NAT through %s, %s) work",
		    netuser_helper_name(np.kind), np.path);
	else
		add(c, "network", false, NSBOX_CHECK_WARN, NULL,
		    "none, host and --allow-host (the built-in filtering proxy) work; --network user does not: %s",
		    e ? nsbox_error_message(e) : "unknown error");
	netuser_plan_free(&np);
	nsbox_error_free(e);
	if (geteuid() == 0) {
		check_root_ids(c);
		return;
	}
	subid_range su;
	struct passwd *pw = getpwuid(geteuid());
	bool sub = subid_lookup("/etc/subuid", pw ? pw->pw_name : NULL, geteuid(), &su) == 1 &&
	           su.count >= NSBOX_RANGE_COUNT - 1;
	bool helpers = access("/usr/bin/newuidmap", X_OK) == 0 && access("/usr/bin/newgidmap", X_OK) == 0;
	add(c, "id mapping", true, sub && helpers ? NSBOX_CHECK_OK : NSBOX_CHECK_WARN,
	    "apt-get install uidmap and add a range of 65536 ids for this user to /etc/subuid and /etc/subgid (usermod --add-subuids)",
	    "rootless: %s", sub && helpers ? "newuidmap and subordinate ids: a full id range"
	                                   : "only your own id can be mapped into the sandbox");
}

static void check_image(nsbox_check *c)
{
	nsbox_image_info *v = NULL;
	size_t n = 0;
	const nsbox_image_info *found = NULL;
	if (nsbox_image_list(&v, &n, NULL) == 0)
		for (size_t i = 0; i < n; i++)
			if (!strcmp(v[i].name, "default"))
				found = &v[i];
	add(c, "default image", true, found ? NSBOX_CHECK_OK : NSBOX_CHECK_MISSING,
	    "build it with 'sudo nsbox image build', or pass --rootfs DIR / --image NAME",
	    "%s", found ? found->path : "no image named 'default'");
	nsbox_image_list_free(v, n);
}

int nsbox_check_run(nsbox_check **out, nsbox_error **err)
{
	if (!out)
		return nsbox_err(err, EINVAL, "check", "check the host: no output pointer");
	nsbox_check *c = calloc(1, sizeof(*c));
	if (!c)
		return nsbox_err(err, ENOMEM, "check", "check the host");
	check_namespaces(c);
	check_cgroups(c);
	check_overlay(c);
	check_seccomp(c);
	check_helpers(c);
	check_image(c);
	*out = c;
	return 0;
}

size_t nsbox_check_count(const nsbox_check *c) { return c ? c->n : 0; }

int nsbox_check_item(const nsbox_check *c, size_t i, const char **name, nsbox_check_status *status,
                     const char **detail, const char **remedy)
{
	if (!c || i >= c->n)
		return -EINVAL;
	const item *it = &c->items[i];
	if (name)
		*name = it->name;
	if (status)
		*status = it->status;
	if (detail)
		*detail = it->detail;
	if (remedy)
		*remedy = it->remedy;
	return 0;
}

bool nsbox_check_default_run_works(const nsbox_check *c)
{
	for (size_t i = 0; c && i < c->n; i++)
		if (c->items[i].required && c->items[i].status == NSBOX_CHECK_MISSING)
			return false;
	return c != NULL;
}

int nsbox_check_to_json(const nsbox_check *c, char **out, nsbox_error **err)
{
	static const char *const names[] = { "ok", "warning", "missing" };
	if (!c || !out)
		return nsbox_err(err, EINVAL, "check", "render check: missing argument");
	buf b = { 0 };
	buf_printf(&b, "{\"default_run_works\":%s,\"items\":[",
	           nsbox_check_default_run_works(c) ? "true" : "false");
	for (size_t i = 0; i < c->n; i++) {
		const item *it = &c->items[i];
		buf_puts(&b, i ? ",{\"name\":" : "{\"name\":");
		json_cstr(&b, it->name);
		buf_printf(&b, ",\"status\":\"%s\",\"required\":%s,\"detail\":", names[it->status],
		           it->required ? "true" : "false");
		json_cstr(&b, it->detail);
		buf_puts(&b, ",\"remedy\":");
		json_cstr(&b, it->remedy);
		buf_puts(&b, "}");
	}
	buf_puts(&b, "]}\n");
	*out = buf_steal(&b);
	return *out ? 0 : nsbox_err(err, ENOMEM, "check", "render check");
}

void nsbox_check_free(nsbox_check *c)
{
	for (size_t i = 0; c && i < c->n; i++) {
		free(c->items[i].name);
		free(c->items[i].detail);
		free(c->items[i].remedy);
	}
	free(c);
}
