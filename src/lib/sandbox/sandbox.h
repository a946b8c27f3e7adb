/* The running sandbox (supervisor side) and the result it produces. */
#ifndef NSBOX_SANDBOX_H
#define NSBOX_SANDBOX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "record/capture.h"
#include "cgroup/cgroup.h"
#include "sandbox/janitor.h"
#include "workspace/workspace.h"
#include "nsbox.h"
#include "plan/plan.h"
#include "sandbox/proto.h"
#include "net/proxy.h"

typedef struct denied_call {
	char *name;
	uint64_t count;
	int errnum;           /* what the filter answered */
} denied_call;

struct relay;

struct nsbox_sandbox {
	/* A started sandbox seen from another process (live/remote.h): every
	 * other field is unused, and each operation is a request to its
	 * monitor. */
	struct live_remote *remote;
	nsbox_plan *plan;
	pid_t pid;            /* init, in our pid namespace */
	int pidfd;
	int sync_fd;
	int out_fd[2];        /* read ends of the capture pipes, or -1 */
	int signal_fd;        /* the caller's, not owned */
	bool capture;
	capture streams[2];
	struct relay *relay;  /* the streams relayed to the caller's fds (relay.c), or NULL */
	/* the caller's output callback (spawn options version 2), or NULL */
	void (*on_output)(void *userdata, int stream, const char *data, size_t len);
	void *output_userdata;
	struct timespec start;
	bool reaped;          /* set atomically: nsbox_sandbox_kill() may read it from another thread */
	bool paused;          /* a long-lived sandbox frozen by nsbox_sandbox_pause() (atomic too) */
	/* what happened */
	double duration_ms;
	bool timed_out;
	bool killed;          /* SIGKILLed by the supervisor after a forwarded signal */
	bool have_exit;
	int payload_status;   /* wait status reported by init */
	int init_status;      /* si_code/si_status of init */
	msg error;            /* first MSG_ERROR, type 0 if none */
	struct rusage rusage;
	/* limits */
	cgroup *cg;           /* NULL in rlimit mode */
	janitor jan;          /* removes the cgroup if we are killed */
	char cg_name[64];
	bool have_cg_stats;
	cg_stats cg_stats;
	uint64_t stats_interval_ms;
	int stats_fd;
	uint64_t pids_seen;   /* highest sampled process count (rlimit mode) */
	int notify_fd;        /* --seccomp-log listener, or -1 */
	denied_call *denied;
	size_t n_denied;
	ws_change *changes;   /* read after the run (workspace overlay) */
	size_t n_changes;
	int changes_err;      /* -errno if they could not be read */
	uint64_t upper_bytes; /* the workspace's upper layer, on disk */
	bool ws_limit_hit;    /* it passed workspace.max_size or max_files: killed */
	const char *ws_limit; /* ...which: "max_size", "max_files", "unreadable" */
	netuser net;          /* --network user: the helper */
	proxy *proxy;         /* --allow-host, once the child passed its socket */
	struct keep_proxy *keep_proxy;   /* ...a long-lived sandbox's, served by a thread (keep_proxy.c) */
	proxy_log net_allowed, net_denied;   /* what it let through and refused */
	proxy_log net_base_allowed, net_base_denied;   /* an exec's: the sandbox's proxy's logs at its start */
	trace_page *trace;    /* NSBOX_TRACE=1, or NULL */
	dev_t pidns_dev;      /* the sandbox's pid namespace, for /proc sampling */
	ino_t pidns_ino;
	/* pool.c: the cgroup's CPU time when a warm sandbox got its request,
	 * taken off the record's (the run counts from there) */
	bool have_cpu_base;
	double cpu_base_user_ms, cpu_base_system_ms;
	/* ...and taken from a pool: its wait leaves the cgroup's removal and
	 * the janitor's end to the free (nsbox_pool_release: the pool's thread) */
	bool pooled;
	/* run.c: NSBOX_RUN_EXITING, the caller exits once the record is out:
	 * when the wait removed the cgroups, it wakes the janitor and leaves
	 * it to the reaper that inherits it, without waiting for its exit. */
	bool exiting;
	/* exec.c: an exec in a long-lived sandbox. Its plan is a shallow copy
	 * of the sandbox's with the exec's own argv, environment, directory,
	 * timeout and record configuration (exec_own); the cgroup is the
	 * sandbox's (exec_cg, not owned), its counters taken at the start. */
	nsbox_sandbox *exec_of;
	char keep_id[33];     /* a long-lived sandbox's id, in its execs' records */
	cgroup *exec_cg;
	uint64_t oom_base, pids_events_base;
	struct exec_own *exec_own;
};

struct nsbox_result {
	nsbox_status status;
	int exit_code;        /* -1 unless exited */
	int signal;
	bool timed_out;
	double duration_ms;
	bool captured;
	char *out[2];
	size_t out_len[2];
	uint64_t out_bytes[2];
	bool out_truncated[2];
	nsbox_error *error;
	bool exec_failed;
	int exec_errno;
	bool have_rusage;
	struct rusage rusage;
	char id[33];
	char sandbox_id[33];  /* an exec's long-lived sandbox, or "" */
	nsbox_config *cfg;    /* owned copy */
	bool rootless;
	char *namespaces_json;
	char *network;
	const char *enforced_by;  /* static string */
	char *seccomp;            /* profile label, or NULL */
	char *image_digest;       /* when audited: the image's digest, or NULL */
	bool have_cg_stats;
	cg_stats cg_stats;
	bool pids_limit_hit;
	bool oom_killed;
	bool seccomp_log;
	bool code_error;      /* error set by nsbox_result_classify_code */
	bool have_workspace;
	ws_change *changes;   /* owned */
	size_t n_changes;
	int changes_err;
	uint64_t upper_bytes, max_bytes, max_files;
	bool ws_limit_hit;
	const char *ws_limit;
	char *session;
	denied_call *denied;  /* owned */
	size_t n_denied;
	bool proxy;
	const char *net_helper;   /* --network user: static name, or NULL */
	bool host_loopback;
	proxy_log net_allowed, net_denied;   /* owned */
	char *code_json;      /* the import gate's "code" object, or NULL */
	const char *error_kind;   /* static: what kind of failure the error is (record_error_kind) */
	/* A context's cell (code/context.c): which, and what became of its
	 * interpreter. */
	bool is_cell;
	char cell_context[64];
	char cell_lang[8];
	unsigned cell;
	bool cell_restarted;  /* this cell started a fresh interpreter */
	bool cell_state_lost; /* the interpreter did not survive this cell */
	char *results_json;   /* its rich results, checked JSON (a list of MIME bundles), or NULL */
	char *raw_json;       /* a record read back (result_from_json): nsbox_result_to_json gives it */
	/* A pool's run (run/run.c): POOL_RUN_WARM or POOL_RUN_COLD (with the
	 * reason, static), and what the pool preloads, as a JSON array. */
	enum { POOL_RUN_NONE = 0, POOL_RUN_WARM, POOL_RUN_COLD } pool_run;
	const char *cold_reason;
	char *preloaded_json;
};

/* owner.c: the calling thread takes the euid that will own root's sandbox
 * user namespace (its range's first id) for the length of the clone;
 * nothing to do rootless. */
typedef struct owner_saved {
	bool active, kept_caps;
	int dumpable, securebits;
} owner_saved;
int owner_become(const nsbox_plan *p, owner_saved *s);
void owner_restore(owner_saved *s);

/* exec.c: a long-lived sandbox's configuration (its audit.* and code.*
 * govern its execs and cells), or NULL for any other handle. */
const nsbox_config *sandbox_config(const nsbox_sandbox *sb);
/* exec.c: an exec of the files API (child/fileop.c): argv is OP PATH
 * [ARGS]; its stdout and stderr are stdout_fd. */
int sandbox_exec_file(nsbox_sandbox *sb, const char *const *argv, int stdin_fd, int stdout_fd, nsbox_sandbox **out,
                      nsbox_error **err);
/* files.c: a TCP connection to `port` on the sandbox's loopback, made
 * inside as its user (child/fileop.c); *fd its host end. */
int sandbox_connect_port(nsbox_sandbox *sb, uint16_t port, int *fd, nsbox_error **err);
/* exec.c: release what an exec owns (its plan copy). */
void exec_release(nsbox_sandbox *sb);
/* exec.c: a long-lived sandbox's setup: wait until its keeper is ready. */
int keep_wait_ready(nsbox_sandbox *sb, nsbox_error **err);

/* keep_proxy.c: serve a long-lived sandbox's proxy on listen_fd (taken)
 * from a thread of its own; copies of its logs so far; stop it, handing
 * over its logs (NULL: freed). 0 or -errno. */
typedef struct keep_proxy keep_proxy;
int keep_proxy_start(nsbox_sandbox *sb, int listen_fd);
void keep_proxy_logs(nsbox_sandbox *sb, proxy_log *allowed, proxy_log *denied);
void keep_proxy_stop(nsbox_sandbox *sb, proxy_log *allowed, proxy_log *denied);

/* seccomp_notify.c: serve the --seccomp-log listener; false when it is done. */
bool notify_handle(nsbox_sandbox *sb);

/* result.c: turn what the supervisor saw into a result. */
int result_from_sandbox(nsbox_sandbox *sb, nsbox_result **out, nsbox_error **err);
/* nsbox_artifacts_store with audit.max_age: run directories older than
 * max_age_ms (by the time in their names; 0: any age) are removed too. */
int artifacts_store(const char *dir, const nsbox_result *r, const char *store_code, unsigned keep,
                    uint64_t max_age_ms, char **path, nsbox_error **err);
/* The error a child reported for a failed setup step, described. */
int step_error(const nsbox_plan *p, const msg *m, nsbox_error **err);

/* result_parse.c: a result from its record's JSON, which it keeps. */
int result_from_json(const char *text, nsbox_result **out, nsbox_error **err);
/* result.c: a new result with an id and a copy of cfg (may be NULL). */
nsbox_result *result_new(const nsbox_config *cfg);
/* The error's kind for the record: "timeout", "oom", "signal",
 * "syntax_error", "interpreter_missing", "runtime_error", "exec" or the
 * step of a setup error. */
const char *record_error_kind(const nsbox_result *r);

/* pool.c: what a pool of code runs is (run/run.c). */
struct code_lang;
const struct code_lang *pool_lang(const nsbox_pool *p);
const nsbox_config *pool_run_config(const nsbox_pool *p);
const strv *pool_preload(const nsbox_pool *p);

/* result_json.c: resources, limits and network, as in the record (for audit.c). */
struct buf;
void result_json_audit_parts(struct buf *b, const nsbox_result *r);

#endif
