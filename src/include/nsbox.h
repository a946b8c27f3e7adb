/* libnsbox: run a command in a sandbox built from Linux namespaces.
 *
 * Conventions for every function below:
 *  - Fallible functions return an int: >= 0 on success, -errno on failure.
 *    They never print and never exit the process.
 *  - The last argument `nsbox_error **err` may be NULL. On failure *err is set
 *    to a newly allocated error that the caller frees with nsbox_error_free().
 *    On success *err is left untouched.
 *  - Setters copy their arguments; the caller keeps ownership of what it passes.
 *  - Returned `const char *` strings are owned by the object they came from and
 *    stay valid until that object is freed or modified.
 *  - Objects are not internally locked: one object may be used by one thread at
 *    a time. Distinct objects may be used concurrently from different threads.
 *  - Every fd the library creates is close-on-exec.
 */
#ifndef NSBOX_H
#define NSBOX_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors ------------------------------------------------------------ */

typedef struct nsbox_error nsbox_error;

/* Human-readable message, e.g. "set up root filesystem '/srv/img': ...". */
const char *nsbox_error_message(const nsbox_error *e);
/* The errno behind the error (positive), or 0. */
int nsbox_error_errno(const nsbox_error *e);
/* The step that failed: one of the closed list in docs/architecture.md
 * ("Error steps"), e.g. "config", "policy", "mount", "exec", "code". */
const char *nsbox_error_step(const nsbox_error *e);
/* The remedy alone ("build it with 'sudo nsbox image build' ..."), or NULL.
 * The message ends with it too, as " (hint: ...)". */
const char *nsbox_error_hint(const nsbox_error *e);
void nsbox_error_free(nsbox_error *e);

/* ---- configuration ------------------------------------------------------ */

typedef struct nsbox_config nsbox_config;

/* A configuration holding the built-in defaults (nsbox(1), nsbox-policy(5)). */
int nsbox_config_new(nsbox_config **out, nsbox_error **err);
void nsbox_config_free(nsbox_config *cfg);

/* The wall-clock limit in milliseconds (0: none), as configured so far. */
uint64_t nsbox_config_timeout_ms(const nsbox_config *cfg);

/* Load a YAML policy file over the current values. Errors name file:line:col.
 * Lists in the policy replace the current lists. */
int nsbox_config_load_policy(nsbox_config *cfg, const char *path, nsbox_error **err);

/* Set one setting by its policy key, with the value as text, e.g.
 *   ("limits.memory", "512m"), ("network.mode", "none"), ("security.user", "1000:1000")
 * List keys ("filesystem.mounts" as "SRC:DST[:ro|rw]", "environment.set" as
 * "NAME=VALUE", "environment.pass", "network.allow") append one element.
 * `origin` names where the value came from for error messages ("--memory",
 * "NSBOX_TIMEOUT", ...); it may be NULL. */
int nsbox_config_set(nsbox_config *cfg, const char *key, const char *value,
                     const char *origin, nsbox_error **err);

/* The command to run (argv[0] is looked up in PATH inside the sandbox). */
int nsbox_config_set_command(nsbox_config *cfg, int argc, const char *const *argv,
                             nsbox_error **err);

/* Place a file inside the sandbox, written during setup (not through any
 * host path): `path` must lie in a writable tmpfs such as /tmp. The data is
 * copied. Used by `nsbox run-code` to hand over the code. */
int nsbox_config_add_file(nsbox_config *cfg, const char *path, const void *data, size_t len,
                          unsigned mode, nsbox_error **err);

/* Check the rules that join several keys (a session needs a workspace,
 * an allowlist needs network mode none, ...). nsbox_run() and nsbox_spawn()
 * call it before anything with a side effect; a door may call it early. */
int nsbox_config_validate(const nsbox_config *cfg, nsbox_error **err);

/* The NSBOX_* environment variables (NSBOX_TIMEOUT, NSBOX_MEMORY, ...), one
 * table for every door: set each one present in `envp` (NULL-terminated
 * NAME=VALUE strings) as its policy key. In precedence they come after the
 * policy and before explicit options. nsbox_env_policy() is NSBOX_POLICY's
 * value (a file or a shipped policy's name), or NULL; nsbox_env_setting()
 * lists the table (-ENOENT past its end). */
int nsbox_config_apply_env(nsbox_config *cfg, const char *const *envp, nsbox_error **err);
const char *nsbox_env_policy(const char *const *envp);
int nsbox_env_setting(size_t i, const char **var, const char **key);

/* Render the effective configuration as YAML (a valid policy file).
 * *out is malloc'ed; free it with free(). */
int nsbox_config_to_yaml(const nsbox_config *cfg, char **out, nsbox_error **err);

/* ---- running ------------------------------------------------------------ */

typedef struct nsbox_sandbox nsbox_sandbox;
typedef struct nsbox_result nsbox_result;

/* Capture stdout/stderr into bounded buffers instead of passing them through. */
#define NSBOX_SPAWN_CAPTURE  (1u << 0)
/* A long-lived sandbox: set it up and keep it, running no command; commands
 * then run in it with nsbox_sandbox_exec(). nsbox_spawn() returns once it is
 * ready (a setup failure is its error). It ends when it is freed or killed
 * (SIGKILL) or when the process that spawned it dies. The configuration's
 * command is ignored, its timeout is each exec's default. Not with
 * network.allow (the proxy is served only while a run is waited for). */
#define NSBOX_SPAWN_KEEP     (1u << 1)

/* Version 1 ends at stats_fd; version 2 adds on_output. Callers built
 * against an older header keep passing their version and work unchanged. */
#define NSBOX_SPAWN_OPTIONS_VERSION 2

typedef struct nsbox_spawn_options {
	uint32_t version;           /* NSBOX_SPAWN_OPTIONS_VERSION */
	uint32_t flags;             /* NSBOX_SPAWN_* */
	const nsbox_config *config; /* required; copied into the sandbox's plan */
	int stdin_fd;               /* relayed to the command; -1: /dev/null */
	int stdout_fd;              /* relayed to; -1: the caller's fd 1 */
	int stderr_fd;              /* relayed to; -1: the caller's fd 2 */
	/* A signalfd the supervisor reads while waiting, or -1. SIGINT, SIGTERM,
	 * SIGHUP and SIGQUIT read from it are forwarded to the payload; the
	 * sandbox is killed if it has not exited 5 seconds later or on a second
	 * signal. The caller keeps ownership. */
	int signal_fd;
	/* With stats_interval_ms > 0, a resource sample is written to stats_fd
	 * every interval while the sandbox runs, one JSON object per line:
	 * {"elapsed_ms":..,"memory_bytes":..,"cpu_ms":..,"pids":..}.
	 * The caller keeps ownership of stats_fd. */
	uint64_t stats_interval_ms;
	int stats_fd;
	/* Version 2. With NSBOX_SPAWN_CAPTURE, called with each chunk of
	 * output as the supervisor reads it (stream 1 or 2), before the chunk
	 * goes into the bounded capture; NULL: none. It runs in the thread
	 * that called nsbox_sandbox_wait(), which supervises nothing else
	 * while it runs (a slow callback delays the timeout and the reading
	 * of output); it may call nsbox_sandbox_kill(). */
	void (*on_output)(void *userdata, int stream, const char *data, size_t len);
	void *output_userdata;
} nsbox_spawn_options;

/* Create the sandbox and start the command. Problems found before anything is
 * created (bad configuration, missing root filesystem) and failures to create
 * the namespaces are returned as errors. Failures in the sandbox's own setup
 * are reported by nsbox_sandbox_wait() as a result with status "setup_failed".
 * The caller must not be multi-threaded while this function runs only in the
 * sense that it forks: like fork(), only the calling thread is copied. */
int nsbox_spawn(const nsbox_spawn_options *opts, nsbox_sandbox **out, nsbox_error **err);

/* A warning about the run the caller should show, e.g. that limits are
 * enforced with rlimits because no cgroup could be used; NULL if none. */
const char *nsbox_sandbox_warning(const nsbox_sandbox *sb);
/* How the resource limits are enforced: "cgroup-v2", "cgroup-v1", "rlimit". */
const char *nsbox_sandbox_enforced_by(const nsbox_sandbox *sb);
/* A pidfd for the sandbox's init process (owned by the sandbox). */
int nsbox_sandbox_pidfd(const nsbox_sandbox *sb);
/* Send a signal to the payload (SIGKILL kills the whole sandbox).
 * Unlike the other functions on a sandbox, this one may be called from any
 * thread while another thread is in nsbox_sandbox_wait(), e.g. to cancel a
 * run; never once nsbox_sandbox_free() has begun. -ESRCH once it ended. */
int nsbox_sandbox_kill(nsbox_sandbox *sb, int sig);
/* Supervise until the sandbox has ended and nothing of it is left; then fill
 * *out with the result (owned by the caller). */
int nsbox_sandbox_wait(nsbox_sandbox *sb, nsbox_result **out, nsbox_error **err);
/* Kills the sandbox if it still runs, waits for it, releases everything. */
void nsbox_sandbox_free(nsbox_sandbox *sb);

/* ---- the caller's streams (issue 27) --------------------------------------
 * No fd of the caller's is handed into a sandbox: stdin_fd, stdout_fd and
 * stderr_fd (and the caller's own 1 and 2 when those are -1) are relayed by
 * the supervisor - while nsbox_sandbox_wait() runs - through pipes of the
 * library's own, so that the payload can neither read a terminal given as
 * its output, nor change its modes, nor keep any of them after the run or
 * exec. The exceptions are explicit: */

/* The payload gets a pseudo-terminal of its own as stdin, stdout and stderr
 * (its controlling terminal), relayed to stdout_fd (or 1) and from stdin_fd
 * (when >= 0; a terminal there is made raw for the run, its modes put back
 * after it whatever happened); nsbox_sandbox_kill(sb, SIGWINCH) copies the
 * caller's window size to it. Not with NSBOX_SPAWN_CAPTURE. Spawn and exec. */
#define NSBOX_SPAWN_TTY         (1u << 4)
/* The caller's own pipes or sockets, which it reads and writes itself
 * without nsbox_sandbox_wait() running (a code context's channel): handed in
 * as they are; -1 means /dev/null. A terminal is refused (EINVAL). */
#define NSBOX_SPAWN_DIRECT_FDS  (1u << 5)

/* Open (creating it 0600, emptying it) a file for a run's output at a path
 * the caller names - a result record, stats - as nsbox_audit_open() opens
 * the audit log: no symlink on the path, a directory of the caller's (or
 * root's) that others cannot write, a regular file of the caller's that
 * others cannot write with one name, or a character device (/dev/null).
 * *fd is O_CLOEXEC and the caller's to close. Thread-safe. */
int nsbox_output_open(const char *path, int *fd, nsbox_error **err);

/* ---- long-lived sandboxes ----------------------------------------------- */

#define NSBOX_EXEC_OPTIONS_VERSION 1
/* nsbox_exec_options.envp sets variables in the sandbox's environment
 * instead of replacing it (each entry NAME=VALUE, NAME not empty). */
#define NSBOX_EXEC_ENV_ADD   (1u << 2)

typedef struct nsbox_exec_options {
	uint32_t version;           /* NSBOX_EXEC_OPTIONS_VERSION */
	uint32_t flags;             /* NSBOX_SPAWN_CAPTURE, NSBOX_EXEC_ENV_ADD, NSBOX_SPAWN_TTY,
	                             * NSBOX_SPAWN_DIRECT_FDS */
	const char *const *argv;    /* required; argv[0] is looked up in PATH inside */
	const char *const *envp;    /* NULL: the sandbox's environment; else this one,
	                             * or with NSBOX_EXEC_ENV_ADD the sandbox's with
	                             * these NAME=VALUE set (replacing the same NAME) */
	const char *workdir;        /* NULL: the sandbox's; else absolute */
	int stdin_fd;               /* relayed to the command; -1: /dev/null */
	int stdout_fd;              /* relayed to; -1: the caller's fd 1 */
	int stderr_fd;              /* relayed to; -1: the caller's fd 2 */
	int fd3;                    /* -1, or an fd the command gets as its fd 3 */
	uint64_t timeout_ms;        /* 0: the configuration's timeout (0 there: none);
	                             * NSBOX_TIMEOUT_NONE: none */
	int signal_fd;              /* as in nsbox_spawn_options, or -1 */
	void (*on_output)(void *userdata, int stream, const char *data, size_t len);
	void *output_userdata;
} nsbox_exec_options;

/* Run a command in a long-lived sandbox (NSBOX_SPAWN_KEEP): in its
 * namespaces, root filesystem, cgroup (shared by every exec: the limits hold
 * across them), with the sandbox's credentials, seccomp filter and rlimits.
 * Each exec has a pid namespace of its own below the sandbox's: when its
 * command exits, whatever it started is killed. *exec is a sandbox handle
 * for that one command: nsbox_sandbox_wait() gives its result (the same
 * record as a run's; CPU time and OOM kills counted from the exec's start,
 * peak memory is the sandbox's), nsbox_sandbox_kill() signals it (SIGKILL
 * ends it and everything it started), nsbox_sandbox_free() releases it.
 * Several threads may exec in the same sandbox at once. -ESRCH when the
 * sandbox has ended. */
/* A long-lived sandbox's id (32 hex digits; "sandbox" in its execs'
 * records), or NULL for another sandbox. */
const char *nsbox_sandbox_id(const nsbox_sandbox *sb);
int nsbox_sandbox_exec(nsbox_sandbox *sb, const nsbox_exec_options *opts, nsbox_sandbox **exec,
                       nsbox_error **err);

/* Pause a long-lived sandbox: every process in it frozen by its cgroup's
 * freezer (its CPU time stops, its memory stays) until resumed. An exec
 * (and a file operation) in a paused sandbox fails with -EAGAIN; killing
 * it resumes it first. -ENOTSUP where limits are rlimits (no cgroup). */
int nsbox_sandbox_pause(nsbox_sandbox *sb, nsbox_error **err);
int nsbox_sandbox_resume(nsbox_sandbox *sb, nsbox_error **err);
bool nsbox_sandbox_paused(const nsbox_sandbox *sb);

/* ---- started sandboxes: named, shared between processes -------------------- */

/* nsbox_live_start() starts a long-lived sandbox owned by a monitor process
 * of its own (nsbox-monitor, exec'd from pkglibexecdir, beside libnsbox, or
 * from NSBOX_MONITOR), listening on NAME.sock in the caller's private
 * directory of sandboxes (/var/lib/nsbox/state/sandboxes as root, else
 * $XDG_STATE_HOME/nsbox/sandboxes or ~/.local/state/nsbox/sandboxes). The
 * handle it returns is an nsbox_sandbox like NSBOX_SPAWN_KEEP's: nsbox_run
 * (commands, code, and cells of its contexts), the files, processes,
 * published ports, pause and contexts all work on it, each a request to
 * the monitor, which does it with this library there, governed by the
 * sandbox's configuration. Any process of the same user (in the same user
 * namespace) attaches by name with nsbox_live_connect(); `nsbox ps` lists
 * it. No daemon: the monitor ends with its sandbox.
 *
 * Unless NSBOX_LIVE_DETACHED, the calling process owns the sandbox: it
 * stops when the owner exits, and nsbox_sandbox_free() on the owner's
 * handle stops it; nsbox_live_detach() lets it outlive the owner. A handle
 * from nsbox_live_connect() owns nothing: its free only lets go. A sandbox
 * also stops after idle_timeout_ms with no request served and no
 * background process running (with NSBOX_LIVE_PAUSE_WHEN_IDLE it is paused
 * instead, and resumed by the next request), and after lifetime_ms. */
#define NSBOX_LIVE_DETACHED        (1u << 0)
#define NSBOX_LIVE_PAUSE_WHEN_IDLE (1u << 1)
#define NSBOX_LIVE_OPTIONS_VERSION 2
typedef struct nsbox_live_options {
	uint32_t version;             /* NSBOX_LIVE_OPTIONS_VERSION */
	uint32_t flags;               /* NSBOX_LIVE_* */
	const nsbox_config *config;   /* required; the command in it is not run */
	const char *name;             /* NULL: a generated one (sb-XXXXXXXX) */
	uint64_t idle_timeout_ms;     /* 0: none */
	uint64_t lifetime_ms;         /* 0: none */
	const char *const *publish;   /* NULL-terminated "[ADDR:]HOSTPORT:PORT" (loopback by default) */
	/* version 2: a snapshot (nsbox_live_snapshot) whose files the sandbox
	 * starts with; its configuration is nsbox_snapshot_policy()'s, which
	 * the caller loads (the config given here is the one used). */
	const char *from;
} nsbox_live_options;
/* -EEXIST when a sandbox of that name runs. */
int nsbox_live_start(const nsbox_live_options *o, nsbox_sandbox **out, nsbox_error **err);
/* -ESRCH when there is no such sandbox (of this user). */
int nsbox_live_connect(const char *name, nsbox_sandbox **out, nsbox_error **err);
/* The sandbox's name; NULL for a handle of nsbox_spawn(). */
const char *nsbox_live_name(const nsbox_sandbox *sb);
int nsbox_live_detach(nsbox_sandbox *sb, nsbox_error **err);
/* Stop NAME and wait until it, its cgroup and its files are gone. */
int nsbox_live_stop(const char *name, nsbox_error **err);
/* A directory of nsbox's state, LEAF ("sandboxes", "docker"): as root
 * /var/lib/nsbox/state/LEAF, else $XDG_STATE_HOME/nsbox/LEAF or
 * ~/.local/state/nsbox/LEAF, created 0700 with create, checked to be the
 * caller's own and private; its path in path. An fd, or -errno (-ENOENT
 * without create: none yet). */
int nsbox_state_dir(const char *leaf, char *path, size_t len, bool create, nsbox_error **err);
/* A name of a sandbox (or a container): letters, digits, '-', '_', '.';
 * at most 63; not starting with '.' or '-'. */
bool nsbox_name_ok(const char *name);
/* Snapshots: what a started sandbox wrote to its own writable filesystems
 * (/tmp and the writable home: files, packages installed with pip --user
 * or npm) and its configuration, kept as SNAP in the caller's private
 * store (nsbox_state_dir "snapshots"); process memory is not. The archive
 * is made and restored inside the sandboxes by their own tar (the image
 * needs one): the host keeps the bytes and never parses them. A snapshot
 * of that name is replaced whole. */
int nsbox_live_snapshot(nsbox_sandbox *sb, const char *snap, nsbox_error **err);
/* SNAP's configuration file (a policy: nsbox_config_load_policy). */
int nsbox_snapshot_policy(const char *snap, char *path, size_t len, nsbox_error **err);
/* A JSON array of {name, sandbox, id, created, size_bytes} (malloc'ed). */
int nsbox_snapshot_list(char **json, nsbox_error **err);
int nsbox_snapshot_remove(const char *snap, nsbox_error **err);
/* The caller's running sandboxes as a JSON array (malloc'ed) of objects:
 * name, id, monitor_pid, started, image, idle_timeout_ms, lifetime_ms,
 * paused, pause_when_idle, owned, warning, enforced_by, published
 * [{host, host_port, port}], contexts [{name, language}],
 * processes_running. */
int nsbox_live_list(char **json, nsbox_error **err);

/* ---- files in a long-lived sandbox ---------------------------------------- */

/* Each operation runs inside the sandbox (NSBOX_SPAWN_KEEP) as its user,
 * with its credentials, seccomp filter and root: a path resolves in the
 * sandbox's own root (a symlink to /etc/shadow is the sandbox's file, never
 * the host's), and a write lands only where the sandbox's user may write.
 * A relative path is relative to the sandbox's working directory. Data is
 * binary-exact, bounded by `max` (0: files.max_size, 256 MiB by default;
 * EFBIG past it), never by limits.output. -ESRCH once the sandbox ended;
 * other failures carry the sandbox's errno (ENOENT, EACCES, EISDIR ...).
 * Thread-safe as execs are. */
typedef struct nsbox_file_info {
	char *name;           /* the entry's name */
	char *path;           /* its absolute path inside */
	char type;            /* 'f' file, 'd' directory, 'l' symlink, 'o' other */
	unsigned mode;        /* permission bits */
	uint64_t size;
	int64_t mtime_ns;     /* modification time, ns since the epoch */
} nsbox_file_info;

/* The file at `path` to out_fd; *size (may be NULL) its length. On a
 * failure out_fd may have received a part of it. */
int nsbox_file_read(nsbox_sandbox *sb, const char *path, int out_fd, uint64_t max, uint64_t *size,
                    nsbox_error **err);
/* in_fd's data, to its end, as the file at `path` (mode, 0..0777): written
 * under a temporary name beside it and renamed into place, so that it is
 * whole or unchanged. */
int nsbox_file_write(nsbox_sandbox *sb, const char *path, int in_fd, unsigned mode, uint64_t max,
                     nsbox_error **err);
/* The entries of the directory at `path` (not . and ..); free the array
 * with nsbox_file_info_free(). */
int nsbox_file_list(nsbox_sandbox *sb, const char *path, nsbox_file_info **out, size_t *count,
                    nsbox_error **err);
/* What is at `path` (a symlink itself, not followed): -ENOENT when nothing.
 * Free out->name and out->path (or nsbox_file_info_free(out, 1) for a
 * malloc'ed one). */
int nsbox_file_stat(nsbox_sandbox *sb, const char *path, nsbox_file_info *out, nsbox_error **err);
/* Remove the file, link or empty directory at `path`; `recursive`: a
 * directory with all it holds. */
int nsbox_file_remove(nsbox_sandbox *sb, const char *path, bool recursive, nsbox_error **err);
/* Make the directory `path` and any parent it lacks. */
int nsbox_file_mkdir(nsbox_sandbox *sb, const char *path, unsigned mode, nsbox_error **err);
void nsbox_file_info_free(nsbox_file_info *v, size_t n);

/* ---- background processes in a long-lived sandbox ------------------------ */

/* A command that runs in the background (a server, a watcher): a governed
 * run like an exec (the same record and audit line when it ends), in a
 * thread of the library's, its output kept meanwhile in a bounded ring per
 * stream (the last log_bytes). It outlives the call that started it and
 * ends with the sandbox, or by nsbox_process_kill(). Free every process
 * before its sandbox. Thread-safe. */
typedef struct nsbox_process nsbox_process;
#define NSBOX_PROCESS_OPTIONS_VERSION 1
typedef struct nsbox_process_options {
	uint32_t version;           /* NSBOX_PROCESS_OPTIONS_VERSION */
	uint32_t flags;             /* NSBOX_EXEC_ENV_ADD */
	const char *const *argv;    /* required */
	const char *const *envp;    /* as nsbox_exec_options */
	const char *workdir;
	uint64_t timeout_ms;        /* 0: none (it runs until it ends or is killed) */
	uint64_t log_bytes;         /* per stream; 0: 1 MiB */
} nsbox_process_options;
int nsbox_process_start(nsbox_sandbox *sb, const nsbox_process_options *o, nsbox_process **out, nsbox_error **err);
/* 16 hex digits, unique in practice. */
const char *nsbox_process_id(const nsbox_process *p);
bool nsbox_process_running(nsbox_process *p);
/* The last bytes of stream 1 or 2 (malloc'ed, NUL-terminated; *len its
 * length) and *total (may be NULL) every byte it wrote. */
int nsbox_process_logs(nsbox_process *p, int stream, char **out, size_t *len, uint64_t *total, nsbox_error **err);
/* Signal it (SIGKILL: it and all it started); -ESRCH once it ended. */
int nsbox_process_kill(nsbox_process *p, int sig);
/* Wait for its end (timeout_ms 0: for ever; -ETIMEDOUT): *out (may be
 * NULL) a copy of its record. */
int nsbox_process_wait(nsbox_process *p, uint64_t timeout_ms, nsbox_result **out, nsbox_error **err);
/* Kills it if it runs, waits, releases it. */
void nsbox_process_free(nsbox_process *p);
/* A started sandbox's processes (nsbox_live_start), which outlive the
 * handles that started them: a handle of process `id` (-ENOENT: none), and
 * the list as a JSON array of {id, running, stdout_bytes, stderr_bytes}
 * (malloc'ed). -ENOTSUP for a sandbox of nsbox_spawn(), whose processes
 * are its caller's handles. */
int nsbox_process_attach(nsbox_sandbox *sb, const char *id, nsbox_process **out, nsbox_error **err);
int nsbox_process_list(nsbox_sandbox *sb, char **json, nsbox_error **err);

/* ---- published ports of a long-lived sandbox ------------------------------ */

/* Accept TCP connections on host_addr:host_port (host_addr NULL: 127.0.0.1;
 * host_port 0: a free port, *bound says which) and relay each to `port` on
 * the sandbox's own loopback: a server started inside can be reached while
 * the sandbox keeps network mode none. The inner connection is made inside,
 * as the sandbox's user; one to a port nothing listens on is closed at
 * once. Free every forward before its sandbox. */
typedef struct nsbox_forward nsbox_forward;
int nsbox_forward_start(nsbox_sandbox *sb, const char *host_addr, uint16_t host_port, uint16_t port,
                        nsbox_forward **out, uint16_t *bound, nsbox_error **err);
uint16_t nsbox_forward_host_port(const nsbox_forward *f);
uint16_t nsbox_forward_port(const nsbox_forward *f);
void nsbox_forward_free(nsbox_forward *f);

/* ---- the governed run: one entry point for every door ------------------- */

/* Code contexts: a persistent interpreter in a long-lived sandbox whose
 * variables outlive each cell (docs/contexts-protocol.md). Cells run with
 * nsbox_run() (.context, .code). One cell at a time per context (a second
 * caller waits); nsbox_context_interrupt() may be called from any thread. */
typedef struct nsbox_context nsbox_context;
/* Start a `lang` ("python", "node") interpreter in `sb` (NSBOX_SPAWN_KEEP)
 * now; `name` labels its records (NULL: the language). Free every context
 * before its sandbox. */
int nsbox_context_new(nsbox_sandbox *sb, const char *lang, const char *name, nsbox_context **out,
                      nsbox_error **err);
/* A fresh interpreter: every variable is gone (the next cell says so). */
int nsbox_context_restart(nsbox_context *c, nsbox_error **err);
/* KeyboardInterrupt (Node: an interrupt) in the running cell; the state
 * survives. Nothing between cells. */
void nsbox_context_interrupt(nsbox_context *c);
const char *nsbox_context_language(const nsbox_context *c);
const char *nsbox_context_name(const nsbox_context *c);
void nsbox_context_free(nsbox_context *c);

/* A handle to cancel one run from another thread. Fire it before the run
 * starts and nsbox_run() returns -ECANCELED without starting anything;
 * while it runs, a command is killed (SIGKILL: all it started with it) and
 * a context's cell is interrupted (its context survives); afterwards it
 * does nothing. nsbox_cancel_signal() sends `sig` to the running command
 * (SIGINT and the like interrupt a cell), -ESRCH when none runs. Both are
 * thread-safe; a handle serves one run at a time. */
typedef struct nsbox_cancel nsbox_cancel;
typedef struct nsbox_pool nsbox_pool;   /* below: the warm pool */
int nsbox_cancel_new(nsbox_cancel **out, nsbox_error **err);
void nsbox_cancel_fire(nsbox_cancel *c);
int nsbox_cancel_signal(nsbox_cancel *c, int sig);
bool nsbox_cancel_fired(const nsbox_cancel *c);
void nsbox_cancel_free(nsbox_cancel *c);

/* The process is not dumpable (nor ptrace-able) while the sandbox runs,
 * and as before afterwards: for a process that runs one sandbox at a time
 * (the nsbox command), not for threaded embedders. */
#define NSBOX_RUN_UNDUMPABLE (1u << 3)
/* The caller exits as soon as nsbox_run() returns and the record is out
 * (the nsbox command), and no other thread of it waits for children: a
 * fresh run's cgroups are still removed before the return, but the
 * janitor process that guarded them is woken and not waited for; it
 * exits on its own (nothing is left for it) and the caller's parent's
 * reaper collects it once the caller is gone. Not for long-lived
 * embedders: each run would leave a zombie child until they exit. */
#define NSBOX_RUN_EXITING (1u << 6)

#define NSBOX_RUN_OPTIONS_VERSION 1
/* A run's (or an exec's) timeout_ms meaning none at all, whatever the
 * configuration says. */
#define NSBOX_TIMEOUT_NONE UINT64_MAX

typedef struct nsbox_run_options {
	uint32_t version;           /* NSBOX_RUN_OPTIONS_VERSION */
	uint32_t flags;             /* NSBOX_SPAWN_CAPTURE, NSBOX_EXEC_ENV_ADD, NSBOX_RUN_UNDUMPABLE,
	                             * NSBOX_SPAWN_TTY (a command's) */
	/* Where it runs: exactly one of
	 *   config   a fresh sandbox from this configuration (copied);
	 *   sandbox  an exec in this long-lived sandbox (NSBOX_SPAWN_KEEP);
	 *   context  the next cell of this context (.code);
	 *   pool     a warm sandbox from this pool of code runs (.code). A call
	 *            the warm sandbox cannot serve exactly as a cold run (its own
	 *            timeout, stdin, workdir, environment, stats) runs cold from
	 *            the pool's configuration; the record's "pool" says which. */
	const nsbox_config *config;
	nsbox_sandbox *sandbox;
	nsbox_context *context;
	nsbox_pool *pool;
	/* What runs: a command (NULL with config: the configuration's), or code
	 * in `lang` ("python", "node", "bash"), placed as `nsbox run-code`
	 * places it (an exec: on the interpreter's command line). */
	const char *const *argv;
	const char *lang;
	const void *code;
	size_t code_len;
	/* This run's own settings (0/NULL: the configuration's). envp replaces
	 * the environment of an exec (with NSBOX_EXEC_ENV_ADD: is set over it). */
	const char *const *envp;
	const char *workdir;
	uint64_t timeout_ms;
	/* I/O, as in nsbox_spawn_options. Captured output (NSBOX_SPAWN_CAPTURE)
	 * is bounded by limits.output, for every kind of run. */
	int stdin_fd;               /* relayed to the command; -1: /dev/null */
	int stdout_fd;              /* relayed to; -1: the caller's fd 1 */
	int stderr_fd;
	int signal_fd;              /* -1, or a signalfd forwarded to the payload (SIGWINCH:
	                             * with NSBOX_SPAWN_TTY, the window size) */
	uint64_t stats_interval_ms; /* fresh runs only */
	int stats_fd;
	void (*on_output)(void *userdata, int stream, const char *data, size_t len);
	void *output_userdata;
	/* A warning the caller should show (limits enforced by rlimits, an
	 * audit line that could not be written under audit.on_error warn, an
	 * import that the gate's warn mode found ...), as it arises, in the
	 * calling thread; NULL: none shown. */
	void (*on_warning)(void *userdata, const char *message);
	void *warning_userdata;
	nsbox_cancel *cancel;       /* NULL: none */
} nsbox_run_options;

/* Run, governed: the configuration checked (nsbox_config_validate), the
 * audit log opened before anything starts (a run that could not be audited
 * does not start), the Python import gate for Python code, the run
 * supervised to its end, its failure classified for code runs, then the
 * gate's verdict, the audit line and the artifacts. libnsbox writes the
 * record of every kind of run this way.
 *
 * Returns 0 with *out the run's record, whatever happened to the payload,
 * including a run that could not start (status "setup_failed", the reason
 * in nsbox_result_error()). Returns -ECANCELED (cancelled before it
 * started), or another -errno for invalid options, with *out NULL. Returns
 * -errno with *out set when the run ended but its audit line could not be
 * written (audit.on_error fail): the caller shows the record and fails. */
int nsbox_run(const nsbox_run_options *o, nsbox_result **out, nsbox_error **err);

/* The languages of code runs: "python", "node", "bash", NULL. */
const char *const *nsbox_code_languages(void);

/* ---- results ------------------------------------------------------------ */

typedef enum nsbox_status {
	NSBOX_STATUS_EXITED = 0,
	NSBOX_STATUS_SIGNALED,
	NSBOX_STATUS_TIMED_OUT,
	NSBOX_STATUS_OOM_KILLED,
	NSBOX_STATUS_SETUP_FAILED,
} nsbox_status;

/* A result for a run that failed before the sandbox existed (for --json). */
int nsbox_result_new_failed(const nsbox_config *cfg, const nsbox_error *why,
                            nsbox_result **out, nsbox_error **err);
void nsbox_result_free(nsbox_result *r);

nsbox_status nsbox_result_status(const nsbox_result *r);
const char *nsbox_status_name(nsbox_status s);
/* The payload's exit code, or -1 when it did not exit normally. */
int nsbox_result_exit_code(const nsbox_result *r);
/* The signal that ended the payload, or 0. */
int nsbox_result_signal(const nsbox_result *r);
/* The exit status `nsbox run` uses (see nsbox(1)): the payload's own code,
 * 128+N for signal N, 124 timeout, 125 setup failure, 126 cannot execute,
 * 127 not found. */
int nsbox_result_exit_status(const nsbox_result *r);
/* The setup error of a "setup_failed" result, or NULL. */
const nsbox_error *nsbox_result_error(const nsbox_result *r);
/* Captured output (NULL when not captured). With truncation the text holds
 * the head, a marker line, and the tail. *len receives the length. */
const char *nsbox_result_output(const nsbox_result *r, int stream, size_t *len);
/* Total bytes the payload wrote to stream 1 or 2 (captured mode). */
uint64_t nsbox_result_output_bytes(const nsbox_result *r, int stream);
bool nsbox_result_output_truncated(const nsbox_result *r, int stream);
double nsbox_result_duration_ms(const nsbox_result *r);

/* For code runs (`nsbox run-code`): classify a failed run and set the
 * record's error, e.g. "Code execution timed out after 30s", "Python
 * syntax error: ...", "Execution failed: <last stderr line>". `lang` is
 * "python", "node" or "bash". Needs captured output for the details. */
int nsbox_result_classify_code(nsbox_result *r, const char *lang, nsbox_error **err);

/* The result record as one line of JSON (docs/result.schema.json, nsbox(1) RESULT RECORD); *out is malloc'ed. */
int nsbox_result_to_json(const nsbox_result *r, char **out, nsbox_error **err);

/* ---- artifacts --------------------------------------------------------- */

/* Keep a run's artifacts in a new directory <dir>/<UTC time>-<digest>
 * (created 0700; dir is created 0700 when missing and must be owned by the
 * caller and not writable by others): result.json (the record),
 * policy.yaml (the effective configuration) and, by store_code ("always",
 * "on_error": only when the run failed, "never"), the code as code-<name>.
 * Files are 0600. keep > 0: only the newest `keep` run directories stay.
 * *path (if not NULL) is the new directory, malloc'ed. Thread-safe. */
int nsbox_artifacts_store(const char *dir, const nsbox_result *r, const char *store_code, unsigned keep,
                          char **path, nsbox_error **err);

/* The audit.* policy keys (NULL, false, "always", 0 when unset): what the
 * caller should do around a run. Pointers live as long as cfg. */
int nsbox_config_audit(const nsbox_config *cfg, const char **log, bool *warn, const char **artifacts,
                       const char **store_code, unsigned *keep);
/* code.import_gate ("off", "warn", "block"; "block" when only a list is
 * given) and code.blocked_imports (may be empty: the caller's default). */
int nsbox_config_import_gate(const nsbox_config *cfg, const char **mode, const char *const **blocked,
                             size_t *n);

/* ---- the Python import gate ------------------------------------------ */

/* The modules that the Python `code` imports (`import x`, `from x import y`
 * as "x" and "x.y", `__import__("x")`, `importlib.import_module("x")` with
 * literal names), found by Python's ast module in a short first sandbox
 * with cfg's image or rootfs, no network, the strict seccomp profile and
 * small limits. The code is never parsed on the host. Any failure of the
 * checker (a hostile snippet that exhausts its limits, no python3 in the
 * image) is an error: callers that block must then refuse the run.
 * *imports is a NULL-terminated array (NULL when *count is 0); free each
 * string and the array. Defence in depth, not a boundary. */
int nsbox_import_gate_scan(const nsbox_config *cfg, const char *code, size_t len, char ***imports,
                           size_t *count, nsbox_error **err);
/* Scan as above and match against `blocked` (module or submodule). 0: no
 * blocked import. -EACCES: *hits lists the blocked imports found (free as
 * above) and *err says "Security policy blocked import: os". Other errors:
 * the scan failed (fail closed when blocking). */
int nsbox_import_gate_check(const nsbox_config *cfg, const char *code, size_t len, const char *const *blocked,
                            size_t n_blocked, char ***hits, size_t *n_hits, nsbox_error **err);
/* Record the gate's verdict in r as "code": {"import_gate": mode,
 * "blocked_imports": [...]}. */
int nsbox_result_set_imports(nsbox_result *r, const char *mode, const char *const *blocked, size_t n,
                             nsbox_error **err);
/* Is `module` the module `blocked` or one of its submodules? */
bool nsbox_import_gate_matches(const char *module, const char *blocked);

/* ---- audit log ---------------------------------------------------------- */

/* Open (creating it 0600) an audit log for appending. A symlink, FIFO,
 * device or directory at `path` is refused, as is a symlink anywhere on the
 * path, a file not owned by the caller, writable by others or with a second
 * name, and a directory owned by neither the caller nor root or writable by
 * others (another user could make the file first). *fd is O_APPEND|O_CLOEXEC and
 * the caller's to close. Open it before spawning so that a run that could
 * not be audited never starts. Thread-safe. */
int nsbox_audit_open(const char *path, int *fd, nsbox_error **err);
/* The audit line of a run (one line of JSON, at most 64 KiB, newline
 * included): time, host uid, id, command and digests of the command, the
 * code (files given with nsbox_config_add_file) and the effective policy,
 * image, limits, network mode, allowlist and destinations, status, exit
 * status, duration, resources, denied system calls, the number of changes
 * and whether any was denied. Never the code or the output. *out is
 * malloc'ed. */
int nsbox_result_audit_json(const nsbox_result *r, char **out, nsbox_error **err);
/* Append the audit line of `r` to `fd` with a single write(2), so that
 * concurrent writers never interleave. A short write is an error. */
int nsbox_audit_append(int fd, const nsbox_result *r, nsbox_error **err);

/* ---- governance: the audit.* and code.* duties around a run ------------- */

/* What the configuration's audit.* and code.* keys ask of a caller, done
 * the same way by nsbox run and run-code, the Python SDK and any embedder.
 * Call begin before nsbox_spawn: it opens audit.log (a run that could not
 * be audited must not start: -errno, *out NULL, unless audit.on_error is
 * warn) and, for Python code (lang "python" and the code's text), runs the
 * import gate. A gate in block mode that finds a blocked import (or cannot
 * check: fail closed) returns -EACCES (or the checker's error) with *err
 * saying "Security policy blocked import: os", *out set, and *refused the
 * failed run's record, already audited and kept. Otherwise 0: spawn, then
 * pass the result (or one from nsbox_result_new_failed for a failed start)
 * to end, which records the gate's verdict in it, appends its audit line
 * (an error, unless warn, when that fails: the caller should fail the run)
 * and keeps the artifacts. Warnings (warn modes, artifacts that could not
 * be kept) are collected for the caller to show. */
typedef struct nsbox_governor nsbox_governor;
int nsbox_governor_begin(const nsbox_config *cfg, const char *lang, const void *code, size_t len,
                         nsbox_governor **out, nsbox_result **refused, nsbox_error **err);
int nsbox_governor_end(nsbox_governor *g, nsbox_result *r, nsbox_error **err);
/* Newline-separated warnings so far, or NULL. */
const char *nsbox_governor_warnings(const nsbox_governor *g);
void nsbox_governor_free(nsbox_governor *g);

/* ---- images ------------------------------------------------------------ */

/* Version 1 ends at log_fd; version 2 adds recipe, spec and on_step.
 * Callers built against an older header keep passing their version. */
#define NSBOX_IMAGE_BUILD_OPTIONS_VERSION 2

/* ---- declarative image builds (image/image_spec.c, image/build_*.c) ----- */

/* What a declarative build makes: a base image (FROM) and steps, from the
 * command line, a YAML image file or a Dockerfile (nsbox(1), IMAGES). */
typedef struct nsbox_image_spec nsbox_image_spec;
int nsbox_image_spec_new(nsbox_image_spec **out, nsbox_error **err);
void nsbox_image_spec_free(nsbox_image_spec *s);
/* The image to build on: an image of the caller's store (root: root's). */
int nsbox_image_spec_set_from(nsbox_image_spec *s, const char *image, nsbox_error **err);
/* The directory COPY takes its sources from (NULL: the current one);
 * nothing outside it is copied, through '..' or a symlink. */
int nsbox_image_spec_set_context(nsbox_image_spec *s, const char *dir, nsbox_error **err);
/* Append a step. kind: "apt" (packages), "pip" / "npm" (install's
 * arguments), "copy" (SRC... DST), "run" (one shell command), "exec"
 * (argv), "env" (NAME=VALUE...), "workdir" (a directory), "user"
 * (NAME|UID[:GROUP|GID]). A package list may come as one string of names
 * separated by blanks or commas. origin names it in errors ("--apt"). */
int nsbox_image_spec_add_step(nsbox_image_spec *s, const char *kind, const char *const *args, size_t n,
                              const char *origin, nsbox_error **err);
/* A host every step may reach (HOST[:PORT]) besides its own: apt the
 * image's archives, pip pypi.org and files.pythonhosted.org, npm
 * registry.npmjs.org. */
int nsbox_image_spec_allow_host(nsbox_image_spec *s, const char *host, nsbox_error **err);
/* Read a YAML image file (*.yaml, *.yml) or a Dockerfile (anything else)
 * into s: FROM and the steps. Errors name file:line[:column]. */
int nsbox_image_spec_load(nsbox_image_spec *s, const char *path, nsbox_error **err);

typedef struct nsbox_image_build_options {
	uint32_t version;     /* NSBOX_IMAGE_BUILD_OPTIONS_VERSION */
	const char *name;     /* NULL: "default" */
	const char *mirror;   /* NULL: the archive the host's apt uses */
	const char *suite;    /* NULL: the host's release */
	bool rebuild;         /* replace an existing image; run every step again */
	int log_fd;           /* progress and the tools' output; -1: discarded */
	/* Version 2. A debootstrap build's recipe: "minimal", "default"
	 * (NULL), "dev" (rootfs/debootstrap.sh says what each holds). */
	const char *recipe;
	/* A declarative build instead (root, or a user from an image of their
	 * own without apt steps), or NULL. */
	const nsbox_image_spec *spec;
	/* Called as each step of a declarative build starts (index from 1;
	 * cached: its layer exists and it does not run); NULL: none. */
	void (*on_step)(void *userdata, unsigned index, unsigned count, const char *what, bool cached);
	void *step_userdata;
} nsbox_image_build_options;

/* Build an image: with debootstrap from a recipe (root only), or from a
 * spec. Returns 0 when built, 1 when the image existed and was kept (a
 * declarative build: made of exactly these inputs). Nothing is left behind
 * on failure but a declarative build's layers of the steps that succeeded
 * (cached for the next build; nsbox_image_prune removes them). */
int nsbox_image_build(const nsbox_image_build_options *o, nsbox_error **err);
/* Remove the cached layers of declarative builds from the caller's store
 * (not while a build runs: -EBUSY); *freed (may be NULL): bytes. */
int nsbox_image_prune(uint64_t *freed, nsbox_error **err);

/* ---- registry pulls (image/pull.c) --------------------------------------- */

#define NSBOX_IMAGE_PULL_OPTIONS_VERSION 1

typedef struct nsbox_image_pull_options {
	uint32_t version;        /* NSBOX_IMAGE_PULL_OPTIONS_VERSION */
	/* A registry reference: NAME[:TAG][@DIGEST] on Docker Hub ("alpine",
	 * "user/app:1"), or REGISTRY/PATH[:TAG][@DIGEST] ("ghcr.io/o/app",
	 * "localhost:5000/app"). */
	const char *ref;
	const char *name;        /* the image's name here; NULL: nsbox_image_ref_name */
	bool tls_verify;         /* false: a plain-HTTP (or self-signed) registry */
	/* Credentials: a Docker config file; NULL: $DOCKER_CONFIG/config.json
	 * or ~/.docker/config.json, as docker login writes them. */
	const char *authfile;
	int log_fd;              /* skopeo's output; -1: discarded */
} nsbox_image_pull_options;

/* Fetch the image with skopeo (verifying every blob's digest, and the
 * manifest's when the reference pins one) and import it like
 * nsbox_image_import, with all its checks. */
int nsbox_image_pull(const nsbox_image_pull_options *o, nsbox_error **err);
/* The image name a reference gets by default: its last path component,
 * and the tag unless it is "latest" ("ghcr.io/o/app:1.2" -> "app-1.2");
 * malloc'ed into *name. -EINVAL for a malformed reference. */
int nsbox_image_ref_name(const char *ref, char **name, nsbox_error **err);

typedef struct nsbox_image_info {
	char *name;
	char *path;           /* its root filesystem */
	uint64_t size_bytes;
	char *created;        /* ISO 8601, or NULL */
	char *source;         /* how it was made, or NULL */
	char *stripped;       /* what import/build removed (set-id bits, file
	                       * capabilities, device nodes), or NULL */
	char *digest;         /* "sha256:..." of the root filesystem as a
	                       * sandbox sees it (paths, types, modes, owners,
	                       * contents, link targets), or NULL for an image
	                       * stored by an older nsbox */
} nsbox_image_info;

/* Import an image into the caller's store from a flat tar (docker export),
 * a docker save archive, an OCI image layout (directory or tar) or a
 * directory. Hostile input is refused with the member named; nothing is
 * left behind on failure. Limits: NSBOX_IMPORT_MAX_BYTES (16 GiB) and
 * NSBOX_IMPORT_MAX_ENTRIES (2 million). */
int nsbox_image_import(const char *name, const char *source, nsbox_error **err);

/* The caller's images, then root's system images it may use. */
int nsbox_image_list(nsbox_image_info **out, size_t *count, nsbox_error **err);
void nsbox_image_list_free(nsbox_image_info *v, size_t count);
int nsbox_image_remove(const char *name, nsbox_error **err);

/* ---- workspace sessions ------------------------------------------------- */

/* The kept changes of a workspace run with a session name (see nsbox(1),
 * `nsbox session`). `cfg` supplies workspace.deny_changes and workspace.git
 * (NULL: no denials, git: apply). nsbox_session_list: the caller's sessions,
 * as nsbox_session_list_with(0, ...) below. */
typedef struct nsbox_changes nsbox_changes;
int nsbox_session_list(char ***names, size_t *count, nsbox_error **err);
int nsbox_session_changes(const char *name, const nsbox_config *cfg, nsbox_changes **out,
                          nsbox_error **err);
size_t nsbox_changes_count(const nsbox_changes *c);
/* kind: "added", "modified", "deleted", "type_changed", "error" (the scan
 * stopped below path, e.g. detail "too deep"); detail: "file", "directory",
 * "symlink", "fifo", "socket", "device", "content", "mode", ...
 * Paths are raw bytes from the sandbox: escape them (nsbox_escape) before
 * showing them to a person. */
int nsbox_changes_get(const nsbox_changes *c, size_t i, const char **path, const char **kind,
                      const char **detail, bool *denied);
/* The entry's type and permission bits (st_mode; 0 when deleted) and, for a
 * symlink, its target as written in the sandbox (else NULL). */
int nsbox_changes_get_mode(const nsbox_changes *c, size_t i, unsigned *mode, const char **target);
/* All of them as a JSON array (malloc'ed text, newline-terminated). */
int nsbox_changes_json(const nsbox_changes *c, char **out);
void nsbox_changes_free(nsbox_changes *c);
/* `s` for a person to read (malloc'ed): control characters, bidirectional
 * overrides, backslashes and bytes that are not UTF-8 as \xNN. */
char *nsbox_escape(const char *s);
/* Regular-file fds of `path` (relative) on the host and in the session,
 * opened beneath each side without following any symlink; -1 for a side
 * that has no regular file there. The caller closes them. */
int nsbox_session_open_pair(const char *name, const char *path, int *host_fd, int *session_fd,
                            nsbox_error **err);
/* The host workspace and the upper layer holding the new versions. */
int nsbox_session_paths(const char *name, char **workspace, char **upper, nsbox_error **err);
/* Write the changes (all, or those at or below `paths`) into the host
 * workspace, all or nothing: everything is checked, then every file staged,
 * then renamed into place. Modes are at most 0777 (never setuid/setgid).
 * Refuses, unless `force`, denied changes, files that changed on the host
 * since the session started, world-writable modes, symlinks that are
 * absolute or climb out of the workspace, and fifos, sockets and devices
 * (with `force` those are left out); always refuses a path reached through
 * a symlink on the host and a tree the scan could not read to the end.
 * Keeps the session; nsbox_session_apply_with() below has every option. */
int nsbox_session_apply(const char *name, const nsbox_config *cfg, const char *const *paths,
                        size_t n_paths, bool force, nsbox_error **err);
int nsbox_session_discard(const char *name, nsbox_error **err);

/* ---- workspace review: the diff, times, rules, apply's options --------- */

/* Write the session's changes to `fd` as one patch in git's format (what
 * `nsbox session diff` and Python's Session.diff() print): `patch -p1` (GNU
 * patch 2.7 or later) or `git apply` in the workspace reproduces the
 * session's files byte for byte, with their permission bits, new, deleted
 * and empty files, symlinks and files without a final newline. Binary
 * files and files over 64 MiB are named, not dumped; directories, fifos,
 * sockets and devices are said on "# nsbox: ..." lines, which patch skips.
 * Names are quoted as git quotes them (control characters and bytes >= 0x80
 * as octal escapes), so they can neither drive a terminal nor break a line.
 * With NSBOX_DIFF_ESCAPE, control characters in the content are written as
 * \xNN too: for a terminal, the patch then no longer applies byte for byte.
 * The caller keeps `fd`. Thread-safe. */
#define NSBOX_DIFF_ESCAPE (1u << 0)
int nsbox_session_diff(const char *name, unsigned flags, int fd, nsbox_error **err);

/* Change i's modification and access times in the session (what apply
 * gives the host's copy, to the nanosecond); zeros for a deletion. */
int nsbox_changes_get_times(const nsbox_changes *c, size_t i, int64_t *mtime_sec, long *mtime_nsec,
                            int64_t *atime_sec, long *atime_nsec);
/* The rule that decides change i: "apply" (nothing stops it), "denied"
 * (workspace.deny_changes: refused unless forced or skipped), "git" (git's
 * own housekeeping under a .git directory, applied by workspace.git: apply),
 * "dropped" (housekeeping left out: lock files always, all of it with
 * workspace.git: drop). NULL when i is out of range. */
const char *nsbox_changes_rule(const nsbox_changes *c, size_t i);
/* In the list of what apply left out: why change i was (a phrase after the
 * path, e.g. "is world-writable"); NULL elsewhere. */
const char *nsbox_changes_why(const nsbox_changes *c, size_t i);

#define NSBOX_APPLY_OPTIONS_VERSION 1
/* Apply what is refused too (denied changes, files changed on the host
 * since the session started, world-writable modes, symlinks out); fifos,
 * sockets and devices are left out. */
#define NSBOX_APPLY_FORCE       (1u << 0)
/* Leave what is refused out and apply the rest (what was left: *left). */
#define NSBOX_APPLY_SKIP_DENIED (1u << 1)
/* Keep the session after a successful apply (by default it is removed). */
#define NSBOX_APPLY_KEEP        (1u << 2)

typedef struct nsbox_apply_options {
	uint32_t version;             /* NSBOX_APPLY_OPTIONS_VERSION */
	uint32_t flags;               /* NSBOX_APPLY_* */
	const nsbox_config *config;   /* workspace.deny_changes and .git; NULL: none, git: apply */
	const char *const *paths;     /* n_paths paths: only changes at or below them */
	size_t n_paths;
} nsbox_apply_options;

/* Apply a session as nsbox_session_apply() does, with the options above,
 * keeping every file's and directory's modification and access times. When
 * `left` is not NULL, *left lists what this apply left out (changes that
 * were refused and skipped, git housekeeping dropped; empty when none); the
 * caller frees it with nsbox_changes_free(). After a successful apply of the
 * whole session (no paths) the session is removed, unless NSBOX_APPLY_KEEP
 * (what was skipped goes with it: keep the session to review it again); an
 * apply of some paths keeps it, the rest being still to review. Returns 1
 * when the session was removed, 0 when it was kept. */
int nsbox_session_apply_with(const char *name, const nsbox_apply_options *o, nsbox_changes **left,
                             nsbox_error **err);

/* The sessions of the caller: for root, those made by the same login
 * (the audit login uid, which sudo keeps), unless NSBOX_SESSION_LIST_ALL
 * (nsbox_session_list() is this with flags 0). */
#define NSBOX_SESSION_LIST_ALL (1u << 0)
int nsbox_session_list_with(unsigned flags, char ***names, size_t *count, nsbox_error **err);

/* ---- host check --------------------------------------------------------- */

typedef enum nsbox_check_status {
	NSBOX_CHECK_OK = 0,
	NSBOX_CHECK_WARN,     /* works, with less than the best (e.g. rlimits) */
	NSBOX_CHECK_MISSING,  /* not available here */
} nsbox_check_status;

typedef struct nsbox_check nsbox_check;

/* Probe this host for what nsbox needs: namespaces, cgroups, overlay in a
 * user namespace, seccomp, user-mode networking helpers, id mapping, the
 * default image. Forks short-lived children to try things. */
int nsbox_check_run(nsbox_check **out, nsbox_error **err);
size_t nsbox_check_count(const nsbox_check *c);
/* Item i: its name, status, what was found, and a remedy (NULL when ok). */
int nsbox_check_item(const nsbox_check *c, size_t i, const char **name, nsbox_check_status *status,
                     const char **detail, const char **remedy);
/* Would `nsbox run` with the default configuration work here? */
bool nsbox_check_default_run_works(const nsbox_check *c);
/* The report as one JSON object; *out is malloc'ed. */
int nsbox_check_to_json(const nsbox_check *c, char **out, nsbox_error **err);
void nsbox_check_free(nsbox_check *c);

/* Parse the value syntax of options and policies: durations ("30", "30s",
 * "2m", "500ms") into milliseconds and sizes ("512m", "1g") into bytes.
 * Return 0, or -EINVAL / -ERANGE. */
int nsbox_parse_duration_ms(const char *s, uint64_t *ms);
int nsbox_parse_size(const char *s, uint64_t *bytes);

const char *nsbox_version(void);

/* ---- warm pool ---------------------------------------------------------- */

/* Sandboxes spawned ahead of demand, each used for one run then destroyed.
 * A pooled sandbox's payload is started with its stdin connected to the
 * pool: it gets ready (e.g. an interpreter that has started) and then
 * reads its request from stdin until end of file; stdin is the pool's
 * channel, nothing else. A background thread of the pool keeps `size`
 * sandboxes ready; it is their parent (they die with it, and with the
 * owner process: PR_SET_PDEATHSIG, the janitor). */
typedef struct nsbox_pool nsbox_pool;

#define NSBOX_POOL_OPTIONS_VERSION 2
#define NSBOX_POOL_MAX_SIZE 64

typedef struct nsbox_pool_options {
	uint32_t version;            /* NSBOX_POOL_OPTIONS_VERSION */
	uint32_t size;               /* sandboxes kept ready, 1..NSBOX_POOL_MAX_SIZE */
	/* Required; copied. Each sandbox is spawned with NSBOX_SPAWN_CAPTURE
	 * from it. */
	const nsbox_config *config;
	/* Version 2: a pool of code runs. Each sandbox runs `config` as
	 * `nsbox run-code --lang LANG` would, with the interpreter started and
	 * waiting for the code; nsbox_run() with .pool and .code serves a run
	 * from it. `preload` (NULL-terminated, may be NULL): modules imported
	 * before the wait (Python: import; Node: require); the record says so. */
	const char *lang;           /* "python", "node"; NULL: a pool of the command */
	const char *const *preload;
} nsbox_pool_options;

/* Create the pool and start filling it in the background. */
int nsbox_pool_new(const nsbox_pool_options *o, nsbox_pool **out, nsbox_error **err);
/* Take a ready sandbox (waiting for one if none is), hand it `data` on its
 * stdin and close that: the run starts now. Its duration, its timeout (from
 * nsbox_sandbox_wait(), to be called at once) and the CPU time in the record
 * count from here, not from the spawn. The caller owns *out (wait, free) and
 * the pool spawns a replacement. Fails with the last spawn's error when the
 * pool could not make a sandbox, -ESHUTDOWN once freed. */
int nsbox_pool_take(nsbox_pool *p, const void *data, size_t len, nsbox_sandbox **out, nsbox_error **err);
/* Instead of nsbox_sandbox_free() on a taken sandbox, once it was waited
 * for: the pool's thread frees it in the background, so that the caller
 * does not wait for its teardown (the pid namespace's, the cgroup's, the
 * janitor's); nsbox_pool_free() frees whatever is still queued. After a
 * successful wait its processes are all gone already (pid 1 exited); after
 * a failed one the free kills them. With no pool, or when the queue cannot
 * grow, it frees `sb` at once. Call it before nsbox_pool_free(p). While
 * sandboxes are still ready, the pool waits for taken runs to be given back
 * (and 5 ms more, 50 ms at most) before it spawns their replacements: a
 * spawn would compete with the run for the CPUs. */
void nsbox_pool_release(nsbox_pool *p, nsbox_sandbox *sb);

typedef struct nsbox_pool_cost {
	uint32_t ready;        /* sandboxes ready now */
	uint32_t processes;    /* their processes (payloads, inits, janitors) */
	uint64_t memory_bytes; /* their cgroups' memory (0 in rlimit mode) */
	uint64_t spawned;      /* sandboxes made since the pool was created */
	uint64_t taken;        /* ...and handed out */
} nsbox_pool_cost;
/* What the idle pool costs now. */
int nsbox_pool_cost_get(nsbox_pool *p, nsbox_pool_cost *c);
/* Stop the thread, kill every ready sandbox, wait until nothing of them is
 * left. Call it only once the sandboxes taken from the pool were waited for:
 * the pool's thread is their parent too, and they die with it. */
void nsbox_pool_free(nsbox_pool *p);

#ifdef __cplusplus
}
#endif
#endif
