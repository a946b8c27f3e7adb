/* Turning a configuration into the plan the child executes. The mount
 * ops are planned in plan_mounts.c. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/error.h"
#include "plan/idmap.h"
#include "image/image_digest.h"
#include "image/images.h"
#include "plan/plan.h"
#include "net/proxy.h"
#include "base/syscalls.h"
#include "base/units.h"

static const char *const step_names[STEP__MAX] = {
	[STEP_SYNC] = "synchronise with the supervisor",
	[STEP_SETUP_IDS] = "switch to the setup identity",
	[STEP_MOUNT_PRIVATE] = "make the mount namespace private",
	[STEP_ROOT] = "set up root filesystem",
	[STEP_MOUNT_OP] = "set up mounts",
	[STEP_PIVOT_ROOT] = "pivot_root into the root filesystem",
	[STEP_HOSTNAME] = "set hostname",
	[STEP_LOOPBACK] = "bring up loopback",
	[STEP_PROXY] = "open the allowlist proxy's port",
	[STEP_FORK] = "fork the payload",
	[STEP_STDIO] = "set up standard streams",
	[STEP_SETSID] = "start a new session",
	[STEP_CAPS] = "drop capabilities",
	[STEP_SETGROUPS] = "clear supplementary groups",
	[STEP_SETGID] = "set group id",
	[STEP_SETUID] = "set user id",
	[STEP_NO_NEW_PRIVS] = "set no_new_privs",
	[STEP_CHDIR] = "change to the working directory",
	[STEP_CLOSE_FDS] = "close inherited file descriptors",
	[STEP_EXEC] = "execute the command",
	[STEP_SIGNALS] = "set up signal handling",
	[STEP_RLIMITS] = "set resource limits",
	[STEP_AFFINITY] = "pin to the allowed CPUs",
	[STEP_CGROUP] = "join the run's cgroup",
	[STEP_SECCOMP] = "install the seccomp filter",
	[STEP_WORKSPACE] = "attach the idmapped workspace",
	[STEP_UCOUNTS] = "limit the sandbox's kernel counts (/proc/sys/user)",
	[STEP_TTY] = "make the terminal the controlling one",
};

const char *plan_step_name(enum step s)
{
	return (s > 0 && s < STEP__MAX && step_names[s]) ? step_names[s] : "set up the sandbox";
}

/* Ops whose `data` the plan owns (copied in add_op, plan_mounts.c). */

static void free_strv(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

void plan_free(nsbox_plan *p)
{
	if (!p)
		return;
	free(p->uid_map);
	free(p->gid_map);
	strv_clear(&p->allow);
	free_strv(p->newuidmap_argv);
	free_strv(p->newgidmap_argv);
	if (p->rootfs_fd >= 0)
		close(p->rootfs_fd);
	if (p->devnull_fd >= 0)
		close(p->devnull_fd);
	free(p->rootfs_path);
	for (size_t i = 0; i < p->n_ops; i++) {
		if (p->ops[i].src_fd >= 0)
			close(p->ops[i].src_fd);
		free(p->ops[i].desc);
		free(p->ops[i].src_path);
		if (plan_op_owns_data(p->ops[i].kind))
			free((char *) p->ops[i].data);
		free((char *) p->ops[i].target);
	}
	free(p->ops);
	free(p->child_fds);
	free(p->hostname);
	free_strv(p->argv);
	free_strv(p->envp);
	free(p->workdir);
	free(p->namespaces_json);
	free(p->warning);
	ws_plan_free(&p->ws);
	sc_bpf_free(&p->seccomp);
	free(p->seccomp_answers.v);
	free(p->seccomp_label);
	cgroup_host_free(&p->cg_host);
	free(p->network);
	netuser_plan_free(&p->netuser);
	nsbox_config_free(p->cfg);
	free(p);
}

char *plan_fmt(const char *f, ...)
{
	char *s = NULL;
	va_list ap;
	va_start(ap, f);
	if (vasprintf(&s, f, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

/* The home directory of `uid` in the image's /etc/passwd, read without
 * leaving the image (a hostile image may make /etc a symlink). */
static char *image_home(int rootfs_fd, uid_t uid)
{
	/* Image content, read before the timer is armed: a FIFO (or a device)
	 * there must not block the supervisor, so O_NONBLOCK and only a
	 * regular file of sane size is read. */
	struct open_how how = { .flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
	                        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	int fd = sys_openat2(rootfs_fd, "etc/passwd", &how);
	if (fd < 0)
		return NULL;
	struct stat st;
	FILE *f = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= (4 << 20) ? fdopen(fd, "r") : NULL;
	if (!f) {
		close(fd);
		return NULL;
	}
	char line[1024], *home = NULL;
	while (!home && fgets(line, sizeof(line), f)) {
		char *fields[7] = { 0 }, *s = line;
		for (int i = 0; i < 7 && s; i++) {
			fields[i] = s;
			s = strchr(s, ':');
			if (s)
				*s++ = '\0';
		}
		if (fields[5] && fields[2] && strtoul(fields[2], NULL, 10) == uid && fields[5][0] == '/')
			home = strdup(fields[5]);
	}
	fclose(f);
	return home;
}

static int plan_env(nsbox_plan *p, const nsbox_config *cfg, const char *home, nsbox_error **err)
{
	strv env = { 0 };
	_cleanup_free_ char *home_kv = plan_fmt("HOME=%s", home ? home : "/");
	int r = strv_push(&env, "PATH=" NSBOX_DEFAULT_PATH);
	r = r ?: home_kv ? strv_push(&env, home_kv) : -ENOMEM;
	/* --allow-host: the proxy, for the tools that read these (curl, wget,
	 * pip, and npm through its npm_config_* variables). */
	static const char *const proxy_env[] = {
		"http_proxy=" PROXY_URL, "https_proxy=" PROXY_URL, "HTTP_PROXY=" PROXY_URL, "HTTPS_PROXY=" PROXY_URL,
		"npm_config_proxy=" PROXY_URL, "npm_config_https_proxy=" PROXY_URL,
		"no_proxy=localhost,127.0.0.1,::1", "NO_PROXY=localhost,127.0.0.1,::1",
	};
	for (size_t i = 0; r == 0 && cfg->allow.n && i < sizeof(proxy_env) / sizeof(*proxy_env); i++)
		r = strv_push(&env, proxy_env[i]);
	for (size_t i = 0; r == 0 && i < cfg->env_set.n; i++)
		r = strv_set_env_take(&env, strdup(cfg->env_set.v[i]));
	for (size_t i = 0; r == 0 && i < cfg->env_pass.n; i++) {
		const char *v = getenv(cfg->env_pass.v[i]);
		if (v)
			r = strv_set_env_take(&env, plan_fmt("%s=%s", cfg->env_pass.v[i], v));
	}
	if (r < 0) {
		strv_clear(&env);
		return nsbox_err(err, ENOMEM, "plan", "plan environment");
	}
	long at = strv_find_env(&env, "PATH", 4);
	p->path_env = env.v[at] + 5;
	p->envp = env.v;
	return 0;
}

/* An image's root filesystem: the caller's store first, then (for users
 * other than root) the system store, which root's `nsbox image build` fills. */
static char *image_rootfs(const char *name)
{
	for (int system = 0; system < 2; system++) {
		_cleanup_free_ char *store = image_store(system);
		char *path = store ? plan_fmt("%s/%s/rootfs", store, name) : NULL;
		if (path && (system || access(path, F_OK) == 0 || geteuid() == 0))
			return path;
		free(path);
	}
	return NULL;
}

static int plan_rootfs(nsbox_plan *p, const nsbox_config *cfg, nsbox_error **err)
{
	_cleanup_free_ char *given = cfg->rootfs ? strdup(cfg->rootfs) : image_rootfs(cfg->image);
	if (!given)
		return nsbox_err(err, ENOENT, "rootfs", "locate image '%s': HOME is not set", cfg->image);
	/* The child reopens the root by this canonical path (see mount_op). */
	_cleanup_free_ char *path = realpath(given, NULL);
	if (!path)
		path = TAKE_PTR(given);
	p->rootfs_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (p->rootfs_fd < 0) {
		if (cfg->rootfs)
			return nsbox_err(err, errno, "rootfs", "open root filesystem '%s'", path);
		return nsbox_err_hint(err, errno, "rootfs",
		                      "build it with 'sudo nsbox image build', or pass --rootfs DIR",
		                      "open image '%s' at '%s'", cfg->image, path);
	}
	/* With root's id range, nothing in the sandbox owns the image: it must
	 * be searchable by others, or every mount in it fails later. */
	struct stat st;
	if (geteuid() == 0 && fstat(p->rootfs_fd, &st) == 0 && !(st.st_mode & S_IXOTH))
		return nsbox_err_hint(err, EACCES, "rootfs", "chmod 755 it",
		                      "use root filesystem '%s': it is not searchable by the sandbox's users (mode %04o)",
		                      path, (unsigned) (st.st_mode & 07777));
	p->rootfs_path = TAKE_PTR(path);
	/* An audited run names the image's digest (recorded when the image
	 * was stored; nothing is hashed here). */
	if (!cfg->rootfs && (cfg->audit.log || cfg->audit.artifacts) &&
	    !image_digest_beside(p->rootfs_fd, p->image_digest))
		p->image_digest[0] = '\0';
	return 0;
}

int plan_build(const nsbox_config *cfg, nsbox_plan **out, nsbox_error **err)
{
	if (!cfg->command.n)
		return nsbox_err_invalid(err, "config", "plan the sandbox: no command given");
	int r = nsbox_config_validate(cfg, err);
	if (r < 0)
		return r;
	nsbox_plan *p = calloc(1, sizeof(*p));
	if (!p)
		return nsbox_err(err, ENOMEM, "plan", "plan the sandbox");
	p->rootfs_fd = p->devnull_fd = p->started_fd = -1;
	p->ws = (ws_plan){ .lower_fd = -1, .lock_fd = -1, .upper_fd = -1 };
	const char *home = getenv("HOME");
	_cleanup_free_ char *ihome = NULL;   /* the payload's, from the image */
	r = config_copy(&p->cfg, cfg) < 0 ? nsbox_err(err, ENOMEM, "plan", "copy configuration") : 0;
	r = r ?: plan_rootfs(p, cfg, err);
	if (r == 0)
		ihome = image_home(p->rootfs_fd, cfg->uid);
	p->overlay_root = !getenv("NSBOX_TEST_NO_OVERLAY_ROOT");
	r = r ?: idmap_plan(p, cfg, err);
	if (r == 0 && cfg->net == NET_USER)
		r = netuser_prepare(&p->netuser, cfg, p->rootless, err);
	r = r ?: ws_prepare(&p->ws, cfg, p->rootless, p->host_setup_uid, p->host_setup_gid, err);
	r = r ?: limits_plan(p, cfg, err);
	r = r ?: sc_prepare(cfg->seccomp, cfg->seccomp_log, &p->seccomp, &p->seccomp_label,
	                    &p->seccomp_cached, &p->seccomp_answers, err);
	r = r ?: plan_mounts(p, cfg, home, ihome, err);
	r = r ?: plan_env(p, cfg, ihome, err);
	if (r == 0) {
		p->child_fds = calloc(p->n_ops + 2, sizeof(*p->child_fds));
		if (!p->child_fds)
			r = nsbox_err(err, ENOMEM, "plan", "plan the sandbox");
	}
	if (r == 0) {
		p->devnull_fd = open("/dev/null", O_PATH | O_CLOEXEC);
		if (p->devnull_fd < 0)
			r = nsbox_err(err, errno, "plan", "open '/dev/null'");
	}
	if (r == 0) {
		strv argv = { 0 };
		if (strv_copy(&argv, &cfg->command) < 0)
			r = nsbox_err(err, ENOMEM, "plan", "plan command");
		p->argv = argv.v;
		p->hostname = strdup(cfg->hostname);
		p->workdir = cfg->workdir ? strdup(cfg->workdir) : p->ws.active ? plan_fmt("/%s", p->ws.target) : strdup("/");
		p->cap_last = caps_last();
		p->keep_caps = cfg->uid == 0 ? cfg->build.caps : 0;
		p->timeout_ms = cfg->timeout_ms;
		p->output_cap = cfg->output;
		p->net_none = cfg->net == NET_NONE;
		p->net_user = cfg->net == NET_USER;
		bool own_netns = p->net_none || p->net_user;
		p->proxy = p->net_none && cfg->allow.n;
		if (p->proxy && strv_copy(&p->allow, &cfg->allow) < 0)
			r = nsbox_err(err, ENOMEM, "plan", "plan the allowlist");
		p->clone_flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC |
		                 CLONE_NEWUTS | CLONE_NEWCGROUP | (own_netns ? CLONE_NEWNET : 0);
		p->namespaces_json = strdup(own_netns
			? "[\"user\",\"pid\",\"mount\",\"net\",\"ipc\",\"uts\",\"cgroup\"]"
			: "[\"user\",\"pid\",\"mount\",\"ipc\",\"uts\",\"cgroup\"]");
		p->network = strdup(p->proxy ? "allowlist" : p->net_none ? "none" : p->net_user ? "user" : "host");
		if (!r && (!p->hostname || !p->workdir || !p->namespaces_json || !p->network))
			r = nsbox_err(err, ENOMEM, "plan", "plan the sandbox");
	}
	if (r == 0 && (p->net_none || p->net_user))
		r = net_build_loopback_msg(p) < 0 ? nsbox_err(err, ENOMEM, "plan", "build netlink message") : 0;
	if (r < 0) {
		ws_finish(&p->ws);
		plan_free(p);
		return r;
	}
	*out = p;
	return 0;
}
