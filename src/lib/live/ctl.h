/* The control protocol of started sandboxes, between a client (remote.c:
 * every door, through the library) and a sandbox's monitor (monitor.c), and
 * where the monitors listen: NAME.sock in the caller's private directory
 * of sandboxes.
 *
 * A connection carries one request: a ctl_req header (sent with up to 4
 * fds), then `len` bytes of NUL-separated strings. The monitor answers with
 * frames: CTL_OUT/CTL_ERR chunks of a run's output (when the client asked
 * to have it streamed), then one CTL_REPLY, whose payload is a 4-byte
 * status (the exit status a run gives, or -errno for a refused request) and
 * then JSON (a record, the operation's data, or {"error": {...}}).
 * Meanwhile the client may send single bytes: a signal number to pass on;
 * its end closing cancels the run. Everything a peer sends is hostile:
 * bounded, parsed strictly. */
#ifndef NSBOX_LIVE_CTL_H
#define NSBOX_LIVE_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

#include "nsbox.h"

#define CTL_MAGIC 0x4e534279u   /* "NSBy": this framing's version */
#define CTL_MAX (256u * 1024)   /* a request's strings */
#define CTL_STRINGS_MAX 8192    /* ...and how many */
#define CTL_FRAME_MAX (1u << 20)
#define CTL_REPLY_MAX (64u << 20)

enum ctl_op {
	CTL_EXEC = 1,          /* strings: [WORKDIR] ARGV... [ENV...] | LANG CODE (CTL_CODE) */
	CTL_CELL,              /* strings: CONTEXT LANG CODE */
	CTL_STOP,
	CTL_INFO,
	CTL_FILE,              /* strings: OP PATH [ARG]; fd: the data (read: to write to; write: to read) */
	CTL_SPAWN,             /* strings: [WORKDIR] ARGV... [ENV...] */
	CTL_PROCS,
	CTL_LOGS,              /* strings: ID */
	CTL_KILL,              /* strings: ID SIGNAL */
	CTL_WAIT,              /* strings: ID; timeout_ms */
	CTL_PAUSE,
	CTL_RESUME,
	CTL_EXPOSE,            /* strings: PORT HOSTADDR HOSTPORT */
	CTL_CONTEXT_NEW,       /* strings: NAME LANG */
	CTL_CONTEXT_RESTART,   /* strings: NAME */
	CTL_CONTEXT_CLOSE,     /* strings: NAME */
	CTL_INTERRUPT,         /* strings: NAME */
	CTL_DETACH,            /* the sandbox outlives its owner from now on */
	CTL_CONFIG,            /* its configuration, as a policy (snapshots) */
	CTL_OP_MAX
};

enum {
	CTL_CAPTURE = 1,       /* the record keeps the output (bounded by limits.output) */
	CTL_STDIN = 2,         /* fds: stdin first */
	CTL_WORKDIR = 4,       /* strings: the working directory first */
	CTL_ENV = 8,           /* the environment: `env` strings after argv, replacing it */
	CTL_ENV_ADD = 16,      /* ...set over the sandbox's */
	CTL_TTY = 32,          /* a terminal of its own (exec -t) */
	CTL_STREAM = 64,       /* the output as frames while it runs */
	CTL_CODE = 128,        /* strings: LANG CODE (code in a fresh interpreter) */
	CTL_STDOUT = 256,      /* fds: stdout and stderr given (relayed to) */
	CTL_RECURSIVE = 512,   /* CTL_FILE remove */
	CTL_FLAGS_ALL = 1023,
};

typedef struct ctl_req {
	uint32_t magic, op, flags, argc, len, env;
	uint64_t timeout_ms;
	uint64_t arg;           /* CTL_SPAWN: log bytes a stream */
} ctl_req;

enum { CTL_OUT = 1, CTL_ERR = 2, CTL_REPLY = 3, CTL_WARN = 4 };
typedef struct ctl_frame {
	uint32_t type, len;
} ctl_frame;

/* The directory of nsbox's state LEAF ("sandboxes"; "docker"): as root
 * /var/lib/nsbox/state/LEAF, else $XDG_STATE_HOME/nsbox/LEAF or
 * ~/.local/state/nsbox/LEAF; its path in path (created 0700 with create),
 * checked to be the caller's own and private. An fd, or -errno (-ENOENT:
 * none yet, without create). */
int ctl_open_state_dir(const char *leaf, char *path, size_t len, bool create, nsbox_error **err);
int ctl_open_dir(char *path, size_t len, bool create, nsbox_error **err);
/* NAME.sock in the directory open as dirfd (through /proc/self/fd). */
void ctl_sock_path(struct sockaddr_un *sa, int dirfd, const char *name);
bool ctl_name_ok(const char *n);
int ctl_check_name(const char *n, nsbox_error **err);
/* Is the process at the other end of cfd the caller's own: its uid, and
 * its user namespace (a rootless sandbox's payload has the caller's uid)? */
bool ctl_peer_ok(int cfd);
/* Is the process at the other end of fd, a connection made to a monitor,
 * one of the caller's own: its uid, and its pid namespace (a sandbox's
 * payload is in one below)? */
bool ctl_server_ok(int fd);
/* Whether NAME's monitor is alive: it holds NAME.lock. */
bool ctl_alive(int dirfd, const char *name);
/* A connection to NAME's monitor (-ESRCH: no such sandbox). */
int ctl_connect(const char *name, nsbox_error **err);
int ctl_write_all(int fd, const void *p, size_t n);
int ctl_read_all(int fd, void *p, size_t n);
/* The request (its strings, NUL-separated, len bytes) and up to 4 fds. */
int ctl_send_req(int fd, const ctl_req *h, const char *body, const int *fds, int nfds);
int ctl_send_frame(int fd, uint32_t type, const void *data, size_t len);
/* The reply frame: status, then JSON (NULL: "{}"). */
int ctl_send_reply(int fd, int32_t status, const char *json);
/* An error as the reply's JSON: {"error": {step, message, hint, errno}}. */
char *ctl_error_json(const nsbox_error *e);
/* ...and back (NULL when json has none). */
nsbox_error *ctl_error_from_json(const char *json);

#endif
