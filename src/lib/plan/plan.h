/* The immutable plan: everything the child needs, computed in the parent.
 * After clone the child only reads this structure and makes system calls:
 * no allocation, no stdio, no library that might take a lock. */
#ifndef NSBOX_PLAN_H
#define NSBOX_PLAN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <sched.h>

#include "cgroup/cgroup.h"
#include "seccomp/seccomp.h"
#include "workspace/workspace.h"
#include "config/conf.h"
#include "net/netuser.h"
#include "nsbox.h"
#include "base/trace.h"

/* The steps the child reports on failure; their names are in plan.c. */
enum step {
	STEP_SYNC = 1, STEP_SETUP_IDS, STEP_MOUNT_PRIVATE, STEP_ROOT, STEP_MOUNT_OP,
	STEP_PIVOT_ROOT, STEP_HOSTNAME, STEP_LOOPBACK, STEP_FORK, STEP_STDIO, STEP_SETSID,
	STEP_CAPS, STEP_SETGROUPS, STEP_SETGID, STEP_SETUID, STEP_NO_NEW_PRIVS, STEP_CHDIR,
	STEP_CLOSE_FDS, STEP_EXEC, STEP_SIGNALS, STEP_RLIMITS, STEP_AFFINITY, STEP_CGROUP, STEP_SECCOMP, STEP_WORKSPACE, STEP_PROXY,
	STEP_UCOUNTS, STEP_TTY, STEP__MAX
};

/* One mount operation, relative to the new root (bubblewrap's setup ops). */
enum mount_kind {
	OP_BIND,       /* src_fd onto target */
	OP_FS,         /* mount fstype (source "fstype") with data onto target */
	OP_RDONLY,     /* make the mount at target read-only (recursively) */
	OP_MKDIR,      /* create target directory (mode) */
	OP_SYMLINK,    /* create target as a symlink to `data` */
	OP_MASK_FILE,  /* bind /dev/null over target when it exists */
	OP_MASK_DIR,   /* mount an empty read-only tmpfs over target when it exists */
	OP_WRITE_FILE, /* create target with `data` (len bytes, mode) */
	OP_OVERLAY,    /* mount overlayfs on target with options `data` */
	OP_BIND_DATA,  /* bind a private read-only file holding `data` (len bytes) over target */
	OP_HOME,       /* the payload's writable home on target: an overlay of the image's
	                * directory with its upper layer on a tmpfs (options `data`) */
};

#define OPF_RDONLY    (1u << 0)
#define OPF_RECURSIVE (1u << 1)
#define OPF_NOSUID    (1u << 2)
#define OPF_NODEV     (1u << 3)
#define OPF_NOEXEC    (1u << 4)
#define OPF_OPTIONAL  (1u << 5)   /* a missing target is not an error */
#define OPF_MKPOINT   (1u << 6)   /* create a missing target (dir, or file if OPF_FILE) */
#define OPF_FILE      (1u << 7)
#define OPF_WORKSPACE (1u << 8)   /* root's idmapped workspace replaces the bind */

typedef struct mount_op {
	enum mount_kind kind;
	unsigned flags;
	int src_fd;            /* OP_BIND: what the parent checked; owned by the plan */
	char *src_path;        /* OP_BIND: its canonical path, reopened in the child */
	const char *target;    /* relative to the new root, no leading '/' */
	const char *fstype;    /* OP_FS */
	const char *data;      /* OP_FS options, OP_SYMLINK target */
	unsigned mode;         /* OP_MKDIR, OP_WRITE_FILE */
	size_t len;            /* OP_WRITE_FILE */
	char *desc;            /* for error messages, e.g. "bind '/home/u/data' on '/data'" */
} mount_op;

typedef struct nsbox_plan {
	/* identity */
	bool rootless;
	bool root_range;           /* host root mapping an unprivileged range */
	bool use_newidmap;         /* rootless, with newuidmap/newgidmap */
	char *uid_map, *gid_map;   /* contents for /proc/PID/{u,g}id_map */
	char **newuidmap_argv, **newgidmap_argv;   /* without the pid (filled at spawn) */
	uid_t setup_uid, uid;
	gid_t setup_gid, gid;
	uid_t host_setup_uid;      /* the setup identity as the host sees it */
	gid_t host_setup_gid;
	bool may_setgroups;
	int cap_last;
	/* Capabilities a payload of uid 0 keeps (a build step's root: its
	 * package manager chowns, drops to _apt...); 0 for every run. */
	uint64_t keep_caps;

	/* filesystem */
	int rootfs_fd;             /* O_PATH directory */
	char *rootfs_path;
	char image_digest[72];     /* from the image's meta.json when audited, or "" */
	mount_op *ops;
	size_t n_ops;
	int devnull_fd;            /* O_PATH, for masks */
	/* the root an overlay of the image (child/mounts.c: nothing in
	 * mountinfo names the image store); NSBOX_TEST_NO_OVERLAY_ROOT=1 tries
	 * the fallback, the image bound as it is */
	bool overlay_root;
	int *child_fds;            /* scratch for the child: n_ops + 2 slots */

	/* process */
	char *hostname;
	char **argv;
	char **envp;
	const char *path_env;      /* PATH value inside, for the command lookup */
	char *workdir;
	bool keep;                 /* a long-lived sandbox: pid 1 waits for commands (keeper.c) */
	/* A keeper's exec: the keeper emptied the bounding and ambient sets and
	 * reset every signal disposition; only pid 1's own differ now. */
	bool keeper_exec;
	/* ...made ahead (keeper.c): pid 1 writes a byte on started_fd once its
	 * payload is started, and the keeper makes the next one only then;
	 * -1 otherwise. */
	int started_fd;
	bool pass_fd3;             /* an exec's payload keeps fd 3 open across execve */
	bool file_op;              /* an exec of the files API: argv is run by fileop_run() */
	bool tty;                  /* stdin is the sandbox's own terminal: the payload's controlling one */
	uint64_t clone_flags;
	bool net_none;             /* own network namespace, loopback only */
	bool net_user;             /* own network namespace, a helper's NAT */
	netuser_plan netuser;      /* ...which helper */
	bool proxy;                /* --allow-host: listen for the proxy inside */
	strv allow;                /* ...and what it lets through */
	/* RTM_NEWLINK setting lo up, built with libmnl (netlink headers need
	 * 4-byte alignment) */
	unsigned char nl_msg[256] __attribute__((aligned(8)));
	size_t nl_len;

	/* limits (limits.c) */
	cg_host cg_host;            /* where the run's cgroups go, or why not */
	cg_limits limits;
	const char *enforced_by;    /* "cgroup-v2", "cgroup-v1" or "rlimit" */
	char *warning;              /* for the caller to show, or NULL */
	/* soft: only the soft limit is set (the hard one is the caller's) */
	struct { int resource; uint64_t value; bool soft; } rlimits[8];
	size_t n_rlimits;
	/* The sandbox user namespace's own counts, /proc/sys/user/NAME = value,
	 * written by the child before anything of the payload's runs
	 * (child/ucounts.c): what the kernel charges to the namespace's owner
	 * on the host (inotify, fanotify, namespaces) stays a share of it. */
	struct { const char *name; char value[24]; } user_max[12];
	size_t n_user_max;
	bool pin_cpus;              /* rlimit mode: pin the payload to cpu_mask */
	cpu_set_t cpu_mask;
	int cpu_count;

	/* workspace */
	ws_plan ws;

	/* seccomp */
	sc_bpf seccomp;             /* n == 0: unconfined */
	char *seccomp_label;        /* for the record */
	bool seccomp_cached;
	sc_answers seccomp_answers;   /* --seccomp-log */

	/* what the result record reports */
	uint64_t timeout_ms;
	uint64_t output_cap;
	char *namespaces_json;
	char *network;
	nsbox_config *cfg;          /* a copy, for the result record */
	trace_page *trace;          /* NSBOX_TRACE=1, or NULL (owned by the sandbox) */
} nsbox_plan;

/* Build the plan from a validated configuration. */
int plan_build(const nsbox_config *cfg, nsbox_plan **out, nsbox_error **err);
void plan_free(nsbox_plan *p);
const char *plan_step_name(enum step s);
/* plan.c, for plan_mounts.c: a formatted string (malloc'ed, NULL when out
 * of memory). */
char *plan_fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
/* Whether an op of kind k owns its `data` (plan_free frees it). Inline, so
 * that the analyzers see who owns what in either file. */
static inline bool plan_op_owns_data(enum mount_kind k)
{
	return k == OP_FS || k == OP_BIND || k == OP_WRITE_FILE || k == OP_OVERLAY || k == OP_BIND_DATA ||
	       k == OP_HOME;
}
/* plan_mounts.c: the mount ops into p (home: the caller's HOME, for
 * volumes; ihome: the payload's home in the image, or NULL). */
int plan_mounts(nsbox_plan *p, const nsbox_config *cfg, const char *home, const char *ihome,
                nsbox_error **err);

/* Child-side helpers, implemented in their own files. */
/* Reopen the bind sources in the child's mount namespace (an fd from the
 * parent's namespace cannot be bound there) and check each is the object the
 * parent checked. Runs with the caller's credentials. */
int mounts_open_sources(const nsbox_plan *p, int *failed_op); /* mounts.c */
/* Build the new root and everything mounted in it; returns an fd of it.
 * `idmapped` is root's idmapped clone of the root filesystem, or -1. */
int mounts_build_root(const nsbox_plan *p, int idmapped, int *failed_op);
/* *root_fd may be replaced: a mount point missing at the top of a
 * read-only root is made in a mirror of the root, which becomes the root. */
int mounts_apply(const nsbox_plan *p, int *root_fd, int *failed_op);
int mounts_pivot(int root_fd);
/* Parent side (rootfs.c): root's root filesystem, idmapped into the user
 * namespace of sandbox `pid`, as a detached read-only tree; -errno when
 * rootless or where the filesystem cannot be idmapped. */
int rootfs_idmapped(const nsbox_plan *p, pid_t pid);
/* Root's idmapped workspace tree, received with the go-ahead. */
void mounts_set_workspace_fd(int fd);
int caps_last(void);                                       /* caps.c */
int caps_drop_bounding(int cap_last);                      /* caps.c */
int caps_clear(void);
int caps_drop_bounding_except(int cap_last, uint64_t keep);  /* caps.c */
int caps_set(uint64_t keep);
int net_loopback_up(const nsbox_plan *p);                  /* net.c */
int net_build_loopback_msg(nsbox_plan *p);                 /* net.c (parent) */
int limits_plan(nsbox_plan *p, const nsbox_config *cfg, nsbox_error **err);  /* limits.c */
int limits_apply(const nsbox_plan *p, enum step *failed);  /* limits.c (child) */
/* Write the user namespace's counts (the plan's user_max); the index of
 * the one that failed in *failed. Run with CAP_SYS_RESOURCE in it. */
int ucounts_apply(const nsbox_plan *p, int *failed);       /* ucounts.c (child) */
/* The first `want` CPUs of `allowed` from `here` on (wrapping round) into
 * *out; how many. */
int limits_pick_cpus(const cpu_set_t *allowed, int here, int want, cpu_set_t *out);  /* limits.c */

#endif
