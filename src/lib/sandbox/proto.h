/* Messages between the supervisor and the sandbox over a SOCK_SEQPACKET
 * socketpair: one fixed-size record each, so no framing is needed. */
#ifndef NSBOX_PROTO_H
#define NSBOX_PROTO_H

#include <stdint.h>

#include "plan/plan.h"

enum msg_type {
	MSG_GO = 1,     /* supervisor -> child: id maps are written; `index` says which
	                 * trees travel with it (GO_*), as SCM_RIGHTS in that order */
	MSG_ERROR,      /* child -> supervisor: step, index, errno */
	MSG_EXIT,       /* init -> supervisor: the payload's wait status */
	MSG_LISTENER,   /* payload -> supervisor: the seccomp listener, as SCM_RIGHTS */
	MSG_PROXY_SOCKET,      /* child -> supervisor: the proxy's listening socket, as SCM_RIGHTS */
	MSG_NET_READY,  /* supervisor -> child: the --network user helper configured the interface */
	MSG_READY,      /* keeper -> supervisor: a long-lived sandbox is set up and takes commands */
	MSG_EXEC,       /* supervisor -> keeper: run a command (an exec_req), fds as SCM_RIGHTS */
	MSG_PIDFD,      /* an exec's pid 1 -> supervisor: its pidfd, as SCM_RIGHTS */
};

enum { GO_WORKSPACE = 1, GO_ROOTFS = 2 };

typedef struct msg {
	uint32_t type;
	int32_t step;
	int32_t index;   /* mount op index, or -1 */
	int32_t err;     /* positive errno */
	int32_t status;  /* MSG_EXIT: the payload's wait status */
	/* MSG_EXIT from an exec's pid 1: what its children used (the host
	 * cannot wait for a process it did not fork) */
	int64_t utime_us, stime_us, maxrss_kb;
} msg;

/* A command for a long-lived sandbox's keeper (keeper.c), one SEQPACKET
 * message: this header, then `len` bytes of NUL-terminated strings (the
 * working directory if EXEC_WORKDIR, argv, then the environment if
 * EXEC_ENV). SCM_RIGHTS carries the exec's own socket, its stdin, stdout
 * and stderr (the library's own: relay.c), and with EXEC_FD3 the fd it gets
 * as fd 3. EXEC_TTY: stdin is a terminal the command makes its controlling
 * one. */
enum { EXEC_WORKDIR = 1, EXEC_ENV = 2, EXEC_FD3 = 4,
       EXEC_FILE = 8,    /* argv is a file operation (child/fileop.c), run instead of execve */
       EXEC_TTY = 16 };
#define EXEC_REQ_MAX (128 * 1024)
#define EXEC_ARGS_MAX 4096
typedef struct exec_req {
	uint32_t type;   /* MSG_EXEC */
	uint32_t flags;  /* EXEC_* */
	uint32_t argc, envc;
	uint32_t len;
} exec_req;

typedef struct child_args {
	const nsbox_plan *plan;
	int sync_fd;
	int stdio[3];
	/* cgroup v1: the run's `tasks` files, opened by the parent. The child
	 * moves itself in by writing "0": a thread moving itself skips the
	 * global lock (and its RCU grace period) that moving another process
	 * takes, which made the supervisor's own write cost milliseconds. */
	int cg_tasks_fd[CG_N];
	bool unshare_cgroupns;   /* create the cgroup namespace after moving */
} child_args;

/* child.c: runs in the cloned child, never returns. */
__attribute__((noreturn)) void child_main(const child_args *a);
/* init.c: pid 1's loop after setup, never returns. */
__attribute__((noreturn)) void init_run(const child_args *a);
/* child.c: report a failed step to the supervisor. */
void child_report(int sync_fd, enum step step, int index, int err);
/* child.c: (re)arm SIGKILL on the supervisor's death; exits if it is gone. */
void child_arm_parent_death(const child_args *a);
/* init.c: install the handlers that forward signals to the payload (a
 * namespace's init drops a signal whose handler is SIG_DFL when it is sent). */
int init_forwarders(void);
/* init.c: discard the forwarded signals that are pending (blocked) here. */
void init_drop_forwarded(void);
/* init.c: set signal dispositions back to SIG_DFL: every one, or (`few`)
 * only those pid 1 itself changes (its forwarders' and SIGCHLD's). */
void init_default_signals(bool few);
/* keeper.c: pid 1 of a long-lived sandbox; never returns. */
__attribute__((noreturn)) void keeper_run(const child_args *a);
/* child.c: send a message of `type` carrying `fd` (SCM_RIGHTS). */
int child_send_fd(int sync_fd, enum msg_type type, int fd);
/* child.c: the payload side of the fork; never returns. */
__attribute__((noreturn)) void payload_exec(const child_args *a);

#endif
