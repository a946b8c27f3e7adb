/* The in-memory configuration: defaults, validation and the key setter that
 * the policy loader, NSBOX_* variables and the CLI all go through. */
#ifndef NSBOX_CONF_H
#define NSBOX_CONF_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "nsbox.h"
#include "base/strv.h"

/* What to do when no cgroup can enforce the limits. */
enum limits_fallback { FALLBACK_WARN, FALLBACK_RLIMIT, FALLBACK_REFUSE };
enum net_mode { NET_NONE = 0, NET_USER, NET_HOST };
/* --network user: which user-mode network helper (auto: pasta, else slirp4netns) */
enum net_helper { HELPER_AUTO = 0, HELPER_PASTA, HELPER_SLIRP4NETNS };

typedef struct file_spec {
	char *path;       /* absolute, inside the sandbox */
	char *data;
	size_t len;
	unsigned mode;
} file_spec;

typedef struct mount_spec {
	char *source;     /* as given; made absolute against base_dir */
	char *target;
	bool read_only;
} mount_spec;

/* audit.* and code.* (config_audit.c): read by the caller, not the plan. */
typedef struct audit_conf {
	char *log;            /* audit.log */
	bool warn;            /* audit.on_error: warn */
	char *artifacts;      /* audit.artifacts */
	char *store_code;     /* audit.store_code; NULL: always */
	unsigned keep;        /* audit.keep; 0: all */
	uint64_t max_age_ms;  /* audit.max_age; 0: no limit */
	char *import_gate;    /* code.import_gate; NULL: off, or block with a list */
	strv blocked;         /* code.blocked_imports */
} audit_conf;

struct nsbox_config {
	char *image;
	char *rootfs;
	char *hostname;
	char *workdir;        /* NULL: default */
	char *seccomp;
	bool seccomp_log;     /* record denied system calls */
	uint64_t memory;
	double cpus;
	uint64_t pids;
	uint64_t timeout_ms;
	uint64_t tmpfs;
	uint64_t output;      /* per-stream cap when capturing; 0: unlimited */
	uint64_t nofile;      /* RLIMIT_NOFILE */
	uint64_t fsize;       /* RLIMIT_FSIZE, bytes */
	/* The sandbox user namespace's own kernel counts (its user.max_*):
	 * inotify and fanotify, and each kind of namespace. */
	uint64_t inotify_instances, inotify_watches, fanotify_groups, fanotify_marks, namespaces;
	enum limits_fallback fallback;  /* without a usable cgroup: warn, rlimit (acknowledged), refuse */
	char *cgroup_parent;  /* a delegated cgroup v2 directory, or NULL */
	enum net_mode net;
	strv allow;
	bool allow_host_loopback;   /* --network user: the host's loopback at the gateway */
	enum net_helper net_helper;
	bool read_only_root;
	bool sysfs;
	mount_spec *mounts;
	size_t n_mounts;
	strv forbidden;
	strv allowed_roots;
	strv deny_changes;
	strv env_set;         /* NAME=VALUE */
	strv env_pass;        /* NAME */
	uid_t uid;
	gid_t gid;
	strv command;
	char *workspace;      /* host directory for /workspace, or NULL */
	char *session;        /* keep the workspace changes under this name */
	char *workspace_target;   /* where it is mounted inside; NULL: /workspace */
	int workspace_git;    /* WS_GIT_APPLY, WS_GIT_DROP, WS_GIT_DENY (workspace.h) */
	enum { WS_OVERLAY = 0, WS_RO, WS_RW } workspace_mode;
	uint64_t workspace_max_size;   /* bytes the overlay's upper layer may use */
	uint64_t files_max_size;       /* the files API's bound on one file (files.max_size) */
	uint64_t workspace_max_files;  /* ...and entries (files, dirs, links) */
	file_spec *files;     /* written into the sandbox during setup */
	size_t n_files;
	audit_conf audit;
	/* Image builds (image/build_run.c) set these; no policy key does. */
	struct {
		/* "lowerdir=...,upperdir=...,workdir=...": the root filesystem
		 * is this overlay, writable (a build step's layer), and the
		 * payload gets no separate writable home; NULL: the image,
		 * read-only. */
		char *overlay;
		char *overlay_dir;   /* the overlay's paths are relative to it */
		uint64_t caps;       /* capabilities a payload of uid 0 keeps */
		bool single_idmap;   /* rootless: map the caller's id alone */
	} build;
};

/* The names of enum net_mode, enum net_helper and the workspace modes. */
extern const char *const config_net_modes[3];
extern const char *const config_net_helpers[3];
extern const char *const config_ws_modes[3];
extern const char *const config_fallbacks[3];
extern const char *const config_ws_git[3];

#define NSBOX_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* Empty a list-valued key before a policy replaces it. */
int config_clear_list(nsbox_config *cfg, const char *key);
/* Add a mount with an explicit target (the policy's mapping form). A relative
 * source is resolved against base_dir (NULL: the current directory). */
int config_add_mount(nsbox_config *cfg, const char *source, const char *target, bool ro,
                     const char *base_dir, const char *origin, nsbox_error **err);
/* Is `key` a list (replace-on-policy) key? */
bool config_key_is_list(const char *key);
/* Is `key` known at all? */
bool config_key_known(const char *key);
/* config_audit.c */
struct buf;
bool config_audit_known(const char *key);
bool config_audit_is_list(const char *key);
const char *config_audit_what(const char *key);
int config_audit_apply(nsbox_config *c, const char *key, const char *v);
void config_audit_clear_list(nsbox_config *c);
void config_audit_free(nsbox_config *c);
int config_audit_copy(nsbox_config *c, const nsbox_config *s);
void config_audit_yaml(struct buf *b, const nsbox_config *c);
/* config_defaults.c: a deep copy of src; -errno. */
int config_copy(nsbox_config **out, const nsbox_config *src);
/* config_defaults.c: replace *dst with a copy of s (NULL: none); -ENOMEM. */
int config_dup_str(char **dst, const char *s);
/* config_defaults.c: drop every mount (the mounts key emptied). */
void config_free_mounts(nsbox_config *c);
/* Remove the file to be placed at `path` (nsbox_config_add_file), if any. */
void config_drop_file(nsbox_config *c, const char *path);

#endif
