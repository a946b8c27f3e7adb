/* Planning the mounts: the ops the child walks to build the sandbox's
 * root (child/mounts.c), in order: the home, /proc, /dev, /tmp, the
 * network files (resolv.conf, hosts), /sys, the caller's files, the
 * workspace and the volumes. Each op carries its description for a
 * failure's message and, for a bind, the source opened here and checked
 * (the child reopens it). Apart from plan.c, which plans the rest of the
 * run (root filesystem, ids, environment, namespaces), because this is
 * the longest part of a plan and the one a new mount changes. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/error.h"
#include "plan/plan.h"
#include "base/syscalls.h"
#include "config/volumes.h"

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
	} else if (op.data && plan_op_owns_data(op.kind)) {
		data = strdup(op.data);
	}
	char *src = op.src_path ? strdup(op.src_path) : NULL;
	if (!ops || !target || (op.data && plan_op_owns_data(op.kind) && !data) ||
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
	if (plan_op_owns_data(op.kind))
		op.data = data;
	p->ops[p->n_ops++] = op;
	return 0;
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
	                              .desc = plan_fmt("mount proc on '/proc'") }, err);
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(mask_files); i++)
		r = add_op(p, (mount_op){ .kind = OP_MASK_FILE, .src_fd = -1, .target = mask_files[i],
		                          .flags = OPF_OPTIONAL,
		                          .desc = plan_fmt("mask '/%s'", mask_files[i]) }, err);
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(mask_dirs); i++)
		r = add_op(p, (mount_op){ .kind = OP_MASK_DIR, .src_fd = -1, .target = mask_dirs[i],
		                          .flags = OPF_OPTIONAL, .desc = plan_fmt("mask '/%s'", mask_dirs[i]) }, err);
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(ro_dirs); i++)
		r = add_op(p, (mount_op){ .kind = OP_RDONLY, .src_fd = -1, .target = ro_dirs[i],
		                          .flags = OPF_OPTIONAL | OPF_RECURSIVE,
		                          .desc = plan_fmt("make '/%s' read-only", ro_dirs[i]) }, err);
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
	                              .desc = plan_fmt("mount sysfs on '/sys'") }, err);
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(masks); i++)
		r = add_op(p, (mount_op){ .kind = OP_MASK_DIR, .src_fd = -1, .target = masks[i],
		                          .flags = OPF_OPTIONAL, .desc = plan_fmt("mask '/%s'", masks[i]) }, err);
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
	                              .desc = plan_fmt("mount tmpfs on '/dev'") }, err);
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(nodes); i++) {
		char host[32], tgt[32];
		snprintf(host, sizeof(host), "/dev/%s", nodes[i]);
		snprintf(tgt, sizeof(tgt), "dev/%s", nodes[i]);
		int fd = open(host, O_PATH | O_CLOEXEC);
		if (fd < 0)
			return nsbox_err(err, errno, "plan", "open device '%s'", host);
		r = add_op(p, (mount_op){ .kind = OP_BIND, .src_fd = fd, .src_path = host, .target = tgt,
		                          .flags = OPF_MKPOINT | OPF_FILE | OPF_NOSUID | OPF_NOEXEC,
		                          .desc = plan_fmt("bind '%s' on '/%s'", host, tgt) }, err);
	}
	if (r == 0)
		r = add_op(p, (mount_op){ .kind = OP_MKDIR, .src_fd = -1, .target = "dev/pts", .mode = 0755,
		                          .desc = plan_fmt("create '/dev/pts'") }, err);
	if (r == 0)
		r = add_op(p, (mount_op){ .kind = OP_FS, .src_fd = -1, .target = "dev/pts", .fstype = "devpts",
		                          .data = "newinstance,ptmxmode=0666,mode=0620",
		                          .flags = OPF_NOSUID | OPF_NOEXEC,
		                          .desc = plan_fmt("mount devpts on '/dev/pts'") }, err);
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(links); i++)
		r = add_op(p, (mount_op){ .kind = OP_SYMLINK, .src_fd = -1, .target = links[i].name,
		                          .data = links[i].to,
		                          .desc = plan_fmt("create symlink '/%s'", links[i].name) }, err);
	if (r == 0)
		r = add_op(p, (mount_op){ .kind = OP_MKDIR, .src_fd = -1, .target = "dev/shm", .mode = 0755,
		                          .desc = plan_fmt("create '/dev/shm'") }, err);
	if (r == 0)
		r = add_op(p, (mount_op){ .kind = OP_FS, .src_fd = -1, .target = "dev/shm", .fstype = "tmpfs",
		                          .data = shm, .flags = OPF_NOSUID | OPF_NODEV,
		                          .desc = plan_fmt("mount tmpfs on '/dev/shm'") }, err);
	if (r == 0)
		r = add_op(p, (mount_op){ .kind = OP_RDONLY, .src_fd = -1, .target = "dev",
		                          .desc = plan_fmt("make '/dev' read-only") }, err);
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
		                             .desc = plan_fmt("mount the workspace overlay of '%s' on '/%s'", w->lower,
		                                         w->target) }, err);
	return add_op(p, (mount_op){ .kind = OP_BIND, .src_fd = fd, .src_path = w->lower, .target = w->target,
	                             .flags = OPF_RECURSIVE | OPF_NOSUID | OPF_NODEV | OPF_MKPOINT | OPF_WORKSPACE |
	                                      (w->mode == WS_RO ? OPF_RDONLY : 0),
	                             .desc = plan_fmt("bind workspace '%s' on '/%s'", w->lower, w->target) }, err);
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
		char *w = plan_fmt("%s%sthe image has no /etc/resolv.conf to replace, so names do not resolve inside "
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
	                             .desc = plan_fmt("bind the helper's resolver on '/etc/resolv.conf'") }, err);
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
	                             .desc = plan_fmt("bind the sandbox's host name on '/etc/hosts'") }, err);
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
	                             .desc = plan_fmt("mount a writable home on '%s'", ihome) }, err);
}

int plan_mounts(nsbox_plan *p, const nsbox_config *cfg, const char *home, const char *ihome,
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
	                          .desc = plan_fmt("mount tmpfs on '/tmp'") }, err);
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
			                          .desc = plan_fmt("make '/%s'", dir) }, err);
		}
		r = add_op(p, (mount_op){ .kind = OP_WRITE_FILE, .src_fd = -1, .target = f->path + 1,
		                          .data = f->data, .len = f->len, .mode = f->mode,
		                          .desc = plan_fmt("write '%s'", f->path) }, err);
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
		                          .desc = plan_fmt("bind '%s' on '%s'", canon, m->target) }, err);
	}
	return r;
}
