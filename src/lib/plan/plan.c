/* Turning a configuration into the plan the child executes. */
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
#include "config/volumes.h"

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

/* Ops whose `data` the plan owns (copied in add_op). */
static bool owns_data(enum mount_kind k)
{
	return k == OP_FS || k == OP_BIND || k == OP_WRITE_FILE || k == OP_OVERLAY || k == OP_BIND_DATA ||
	       k == OP_HOME;
}

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
		if (owns_data(p->ops[i].kind))
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

/* Append an op; takes ownership of desc and of src_fd (even on failure). */
static int add_op(nsbox_plan *p, mount_op op, nsbox_error **err)
{
	mount_op *ops = realloc(p->ops, (p->n_ops + 1) * sizeof(*ops));
	char *target = op.target ? strdup(op.target) : NULL;
	char *data = NULL;
	if (op.data && (op.kind == OP_WRITE_FILE || op.kind == OP_BIND_DATA)) {
		data = malloc(op.len ? op.len : 1);
		if (data && op.len)
			memcpy(data, op.data, op.len);
	} else if (op.data && owns_data(op.kind)) {
		data = strdup(op.data);
	}
	char *src = op.src_path ? strdup(op.src_path) : NULL;
	if (!ops || !target || (op.data && owns_data(op.kind) && !data) ||
	    !op.desc || (op.src_path && !src)) {
		if (ops)
			p->ops = ops;
		free(target);
		free(data);
		free(src);
		free(op.desc);
		if (op.src_fd >= 0)
			close(op.src_fd);
		return nsbox_err(err, ENOMEM, "plan", "plan mounts");
	}
	p->ops = ops;
	op.target = target;
	op.src_path = src;
	if (owns_data(op.kind))
		op.data = data;
	p->ops[p->n_ops++] = op;
	return 0;
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
	char *s = NULL;
	va_list ap;
	va_start(ap, f);
	if (vasprintf(&s, f, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

static int plan_proc(nsbox_plan *p, nsbox_error **err)
{
	/* Docker's masked and read-only paths: kernel memory, keys, timers,
	 * scheduler internals and the sysrq trigger must not be readable or
	 * writable from inside. */
	static const char *mask_files[] = {
		"proc/kcore", "proc/keys", "proc/key-users", "proc/timer_list", "proc/timer_stats",
		"proc/sched_debug", "proc/latency_stats", "proc/sysrq-trigger", "proc/interrupts",
		"proc/kallsyms", "proc/kpagecount", "proc/kpageflags", "proc/kpagecgroup",
		"proc/config.gz", "proc/vmallocinfo", "proc/pagetypeinfo",
	};
	static const char *mask_dirs[] = { "proc/acpi", "proc/asound", "proc/scsi", "proc/driver" };
	static const char *ro_dirs[] = { "proc/sys", "proc/irq", "proc/bus", "proc/fs" };
	int r = add_op(p, (mount_op){ .kind = OP_FS, .src_fd = -1, .target = "proc", .fstype = "proc",
	                              .flags = OPF_NOSUID | OPF_NODEV | OPF_NOEXEC | OPF_MKPOINT,
	                              .desc = fmt("mount proc on '/proc'") }, err);
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(mask_files); i++)
		r = add_op(p, (mount_op){ .kind = OP_MASK_FILE, .src_fd = -1, .target = mask_files[i],
		                          .flags = OPF_OPTIONAL,
		                          .desc = fmt("mask '/%s'", mask_files[i]) }, err);
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(mask_dirs); i++)
		r = add_op(p, (mount_op){ .kind = OP_MASK_DIR, .src_fd = -1, .target = mask_dirs[i],
		                          .flags = OPF_OPTIONAL, .desc = fmt("mask '/%s'", mask_dirs[i]) }, err);
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(ro_dirs); i++)
		r = add_op(p, (mount_op){ .kind = OP_RDONLY, .src_fd = -1, .target = ro_dirs[i],
		                          .flags = OPF_OPTIONAL | OPF_RECURSIVE,
		                          .desc = fmt("make '/%s' read-only", ro_dirs[i]) }, err);
	return r;
}

/* --sysfs: a fresh, read-only sysfs of the sandbox's network namespace (no
 * submounts: securityfs, debugfs, cgroups stay out), with Docker's masked
 * paths: firmware tables and memory maps, and powercap's energy counters
 * (a power side channel, PLATYPUS). */
static int plan_sysfs(nsbox_plan *p, nsbox_error **err)
{
	static const char *masks[] = { "sys/firmware", "sys/devices/virtual/powercap" };
	int r = add_op(p, (mount_op){ .kind = OP_FS, .src_fd = -1, .target = "sys", .fstype = "sysfs",
	                              .flags = OPF_RDONLY | OPF_NOSUID | OPF_NODEV | OPF_NOEXEC,
	                              .desc = fmt("mount sysfs on '/sys'") }, err);
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(masks); i++)
		r = add_op(p, (mount_op){ .kind = OP_MASK_DIR, .src_fd = -1, .target = masks[i],
		                          .flags = OPF_OPTIONAL, .desc = fmt("mask '/%s'", masks[i]) }, err);
	return r;
}

static int plan_dev(nsbox_plan *p, const nsbox_config *cfg, nsbox_error **err)
{
	static const char *nodes[] = { "null", "zero", "full", "random", "urandom", "tty" };
	static const struct { const char *name, *to; } links[] = {
		{ "dev/ptmx", "pts/ptmx" }, { "dev/fd", "/proc/self/fd" },
		{ "dev/stdin", "/proc/self/fd/0" }, { "dev/stdout", "/proc/self/fd/1" },
		{ "dev/stderr", "/proc/self/fd/2" },
	};
	char shm[64];
	snprintf(shm, sizeof(shm), "mode=1777,size=%llu", (unsigned long long) cfg->tmpfs);
	int r = add_op(p, (mount_op){ .kind = OP_FS, .src_fd = -1, .target = "dev", .fstype = "tmpfs",
	                              .data = "mode=755,size=65536,nr_inodes=64",
	                              .flags = OPF_NOSUID | OPF_NOEXEC | OPF_MKPOINT,
	                              .desc = fmt("mount tmpfs on '/dev'") }, err);
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(nodes); i++) {
		char host[32], tgt[32];
		snprintf(host, sizeof(host), "/dev/%s", nodes[i]);
		snprintf(tgt, sizeof(tgt), "dev/%s", nodes[i]);
		int fd = open(host, O_PATH | O_CLOEXEC);
		if (fd < 0)
			return nsbox_err(err, errno, "plan", "open device '%s'", host);
		r = add_op(p, (mount_op){ .kind = OP_BIND, .src_fd = fd, .src_path = host, .target = tgt,
		                          .flags = OPF_MKPOINT | OPF_FILE | OPF_NOSUID | OPF_NOEXEC,
		                          .desc = fmt("bind '%s' on '/%s'", host, tgt) }, err);
	}
	if (r == 0)
		r = add_op(p, (mount_op){ .kind = OP_MKDIR, .src_fd = -1, .target = "dev/pts", .mode = 0755,
		                          .desc = fmt("create '/dev/pts'") }, err);
	if (r == 0)
		r = add_op(p, (mount_op){ .kind = OP_FS, .src_fd = -1, .target = "dev/pts", .fstype = "devpts",
		                          .data = "newinstance,ptmxmode=0666,mode=0620",
		                          .flags = OPF_NOSUID | OPF_NOEXEC,
		                          .desc = fmt("mount devpts on '/dev/pts'") }, err);
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(links); i++)
		r = add_op(p, (mount_op){ .kind = OP_SYMLINK, .src_fd = -1, .target = links[i].name,
		                          .data = links[i].to,
		                          .desc = fmt("create symlink '/%s'", links[i].name) }, err);
	if (r == 0)
		r = add_op(p, (mount_op){ .kind = OP_MKDIR, .src_fd = -1, .target = "dev/shm", .mode = 0755,
		                          .desc = fmt("create '/dev/shm'") }, err);
	if (r == 0)
		r = add_op(p, (mount_op){ .kind = OP_FS, .src_fd = -1, .target = "dev/shm", .fstype = "tmpfs",
		                          .data = shm, .flags = OPF_NOSUID | OPF_NODEV,
		                          .desc = fmt("mount tmpfs on '/dev/shm'") }, err);
	if (r == 0)
		r = add_op(p, (mount_op){ .kind = OP_RDONLY, .src_fd = -1, .target = "dev",
		                          .desc = fmt("make '/dev' read-only") }, err);
	return r;
}

/* The workspace at its target (/workspace unless --workspace DIR:PATH):
 * the overlay (its lower layer, for root, idmapped and attached by the
 * child first), or a plain bind for ro and rw. A target the image lacks is
 * made in the sandbox's own root (OPF_MKPOINT, child/mountpoint.c). */
static int plan_workspace(nsbox_plan *p, nsbox_error **err)
{
	const ws_plan *w = &p->ws;
	int fd = dup(w->lower_fd);
	if (fd < 0)
		return nsbox_err(err, errno, "workspace", "use workspace '%s'", w->lower);
	if (w->mode == WS_OVERLAY)
		return add_op(p, (mount_op){ .kind = OP_OVERLAY, .src_fd = fd, .src_path = w->lower,
		                             .target = w->target, .data = w->opts,
		                             .flags = OPF_MKPOINT | OPF_NOSUID | OPF_NODEV,
		                             .desc = fmt("mount the workspace overlay of '%s' on '/%s'", w->lower,
		                                         w->target) }, err);
	return add_op(p, (mount_op){ .kind = OP_BIND, .src_fd = fd, .src_path = w->lower, .target = w->target,
	                             .flags = OPF_RECURSIVE | OPF_NOSUID | OPF_NODEV | OPF_MKPOINT | OPF_WORKSPACE |
	                                      (w->mode == WS_RO ? OPF_RDONLY : 0),
	                             .desc = fmt("bind workspace '%s' on '/%s'", w->lower, w->target) }, err);
}

/* --network user: names resolve through the helper's DNS forwarder. The
 * root is read-only, so the image must have the file to bind over; without
 * it the run goes ahead with a warning (addresses work, names do not). */
static int plan_resolv_conf(nsbox_plan *p, nsbox_error **err)
{
	struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	int fd = sys_openat2(p->rootfs_fd, "etc/resolv.conf", &how);
	struct stat st;
	bool ok = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
	if (fd >= 0)
		close(fd);
	if (!ok) {
		char *w = fmt("%s%sthe image has no /etc/resolv.conf to replace, so names do not resolve inside "
		              "(the DNS forwarder is %s; create an empty /etc/resolv.conf in the image)",
		              p->warning ? p->warning : "", p->warning ? "; " : "", NETUSER_DNS);
		if (!w)
			return nsbox_err(err, ENOMEM, "plan", "plan the network");
		free(p->warning);
		p->warning = w;
		return 0;
	}
	static const char conf[] = NETUSER_RESOLV_CONF;
	return add_op(p, (mount_op){ .kind = OP_BIND_DATA, .src_fd = -1, .target = "etc/resolv.conf",
	                             .data = conf, .len = sizeof(conf) - 1, .mode = 0644,
	                             .flags = OPF_RDONLY | OPF_NOSUID | OPF_NODEV | OPF_NOEXEC,
	                             .desc = fmt("bind the helper's resolver on '/etc/resolv.conf'") }, err);
}

/* /etc/hosts with the sandbox's own host name first, so that it resolves
 * as a host's own name does (gethostbyname(gethostname()), which CPython's
 * test_socket and many servers ask), over the image's file, whose lines
 * follow. Only where the image has the file: making one would cost a
 * mirror of /etc on every run. */
static int plan_hosts(nsbox_plan *p, const nsbox_config *cfg, nsbox_error **err)
{
	struct open_how how = { .flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
	                        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	_cleanup_close_ int fd = sys_openat2(p->rootfs_fd, "etc/hosts", &how);
	struct stat st;
	/* (The file is made on a 16 KiB scratch tmpfs: a larger hosts file
	 * than that is left as it is.) */
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > 12288 || !strcmp(cfg->hostname, "localhost"))
		return 0;
	_cleanup_free_ char *text = NULL;
	int head = asprintf(&text, "127.0.1.1\t%s\n", cfg->hostname);
	char *grown = head < 0 ? NULL : realloc(text, (size_t) head + (size_t) st.st_size + 1);
	if (!grown)
		return nsbox_err(err, ENOMEM, "plan", "plan /etc/hosts");
	text = grown;
	size_t len = (size_t) head;
	for (ssize_t n; len < (size_t) head + (size_t) st.st_size; len += (size_t) n)
		if ((n = read(fd, text + len, (size_t) head + (size_t) st.st_size - len)) <= 0)
			break;
	return add_op(p, (mount_op){ .kind = OP_BIND_DATA, .src_fd = -1, .target = "etc/hosts",
	                             .data = text, .len = len, .mode = 0644,
	                             .flags = OPF_RDONLY | OPF_NOSUID | OPF_NODEV | OPF_NOEXEC,
	                             .desc = fmt("bind the sandbox's host name on '/etc/hosts'") }, err);
}

/* The payload's home (its passwd entry's), writable: tools keep caches and
 * configuration there (pip, npm, matplotlib, git) and `pip install --user`
 * installs there. The image's directory stays what the payload sees, with
 * its changes in an overlay whose upper layer is a tmpfs of the /tmp size;
 * they go with the sandbox. Only a real directory of the image qualifies:
 * no symlink on the way, not '/' nor a directory nsbox mounts its own
 * filesystems on (the op comes first, so those would still cover it). A
 * build step's root is writable already: no home of its own there. */
static int plan_home(nsbox_plan *p, const nsbox_config *cfg, const char *ihome, nsbox_error **err)
{
	static const char *const own[] = { "proc", "dev", "sys", "tmp" };
	if (!ihome || cfg->build.overlay)
		return 0;
	const char *rel = ihome + strspn(ihome, "/");
	if (!*rel || strstr(ihome, "/.") || strstr(ihome, "//"))
		return 0;
	for (size_t i = 0; i < ARRAY_SIZE(own); i++) {
		size_t n = strlen(own[i]);
		if (!strncmp(rel, own[i], n) && (rel[n] == '\0' || rel[n] == '/'))
			return 0;
	}
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
	                        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	int fd = sys_openat2(p->rootfs_fd, rel, &how);
	if (fd < 0)
		return 0;   /* no such directory in the image: HOME stays read-only */
	close(fd);
	char opts[64];
	snprintf(opts, sizeof(opts), "mode=0755,size=%llu", (unsigned long long) cfg->tmpfs);
	return add_op(p, (mount_op){ .kind = OP_HOME, .src_fd = -1, .target = rel, .data = opts,
	                             .flags = OPF_NOSUID | OPF_NODEV,
	                             .desc = fmt("mount a writable home on '%s'", ihome) }, err);
}

static int plan_mounts(nsbox_plan *p, const nsbox_config *cfg, const char *home, const char *ihome,
                       nsbox_error **err)
{
	int r = plan_home(p, cfg, ihome, err);
	r = r ?: plan_proc(p, err);
	if (r == 0)
		r = plan_dev(p, cfg, err);
	if (r < 0)
		return r;
	char tmp[64];
	snprintf(tmp, sizeof(tmp), "mode=1777,size=%llu", (unsigned long long) cfg->tmpfs);
	/* (A missing mount point of these is made in the sandbox's root, as
	 * for a volume: an image without /tmp still gets its tmpfs.) */
	r = add_op(p, (mount_op){ .kind = OP_FS, .src_fd = -1, .target = "tmp", .fstype = "tmpfs",
	                          .data = tmp, .flags = OPF_NOSUID | OPF_NODEV | OPF_MKPOINT,
	                          .desc = fmt("mount tmpfs on '/tmp'") }, err);
	if (r == 0 && cfg->net == NET_USER)
		r = plan_resolv_conf(p, err);
	if (r == 0)
		r = plan_hosts(p, cfg, err);
	if (r == 0 && cfg->sysfs)
		r = plan_sysfs(p, err);
	/* Files handed in by the caller (run-code's program), after /tmp. */
	for (size_t i = 0; r == 0 && i < cfg->n_files; i++) {
		const file_spec *f = &cfg->files[i];
		/* Its parents below the top level, made where missing (the warm
		 * pool's hooks); a file directly in /tmp needs none. */
		const char *top = strchr(f->path + 1, '/');
		for (const char *sl = top ? strchr(top + 1, '/') : NULL; r == 0 && sl; sl = strchr(sl + 1, '/')) {
			char dir[PATH_MAX];
			snprintf(dir, sizeof(dir), "%.*s", (int) (sl - f->path - 1), f->path + 1);
			r = add_op(p, (mount_op){ .kind = OP_MKDIR, .src_fd = -1, .target = dir, .mode = 0755,
			                          .desc = fmt("make '/%s'", dir) }, err);
		}
		r = add_op(p, (mount_op){ .kind = OP_WRITE_FILE, .src_fd = -1, .target = f->path + 1,
		                          .data = f->data, .len = f->len, .mode = f->mode,
		                          .desc = fmt("write '%s'", f->path) }, err);
	}
	if (r == 0 && p->ws.active)
		r = plan_workspace(p, err);
	for (size_t i = 0; r == 0 && i < cfg->n_mounts; i++) {
		const mount_spec *m = &cfg->mounts[i];
		_cleanup_free_ char *canon = NULL;
		int fd = -1;
		r = volume_open(cfg, m->source, home, &canon, &fd, err);
		if (r < 0)
			return r;
		struct stat st;
		if (fstat(fd, &st) < 0) {
			close(fd);
			return nsbox_err(err, errno, "volume", "stat volume source '%s'", canon);
		}
		unsigned flags = OPF_RECURSIVE | OPF_NOSUID | OPF_NODEV | OPF_MKPOINT |
		                 (m->read_only ? OPF_RDONLY : 0) | (S_ISDIR(st.st_mode) ? 0 : OPF_FILE);
		r = add_op(p, (mount_op){ .kind = OP_BIND, .src_fd = fd, .src_path = canon,
		                          .target = m->target + 1,
		                          .flags = flags,
		                          .desc = fmt("bind '%s' on '%s'", canon, m->target) }, err);
	}
	return r;
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
	_cleanup_free_ char *home_kv = fmt("HOME=%s", home ? home : "/");
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
			r = strv_set_env_take(&env, fmt("%s=%s", cfg->env_pass.v[i], v));
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
		char *path = store ? fmt("%s/%s/rootfs", store, name) : NULL;
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
		p->workdir = cfg->workdir ? strdup(cfg->workdir) : p->ws.active ? fmt("/%s", p->ws.target) : strdup("/");
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
