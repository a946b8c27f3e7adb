/* Messages between the supervisor and the sandbox over a SOCK_SEQPACKET
 * socketpair: one fixed-size record each, so no framing is needed. */
#ifndef NSBOX_PROTO_H
#define NSBOX_PROTO_H

#include <stdint.h>

#include "plan.h"

enum msg_type {
	MSG_GO = 1,     /* supervisor -> child: id maps are written; `index` says which
	                 * trees travel with it (GO_*), as SCM_RIGHTS in that order */
	MSG_ERROR,      /* child -> supervisor: step, index, errno */
	MSG_EXIT,       /* init -> supervisor: the payload's wait status */
	MSG_LISTENER,   /* payload -> supervisor: the seccomp listener, as SCM_RIGHTS */
	MSG_PROXY_SOCKET,      /* child -> supervisor: the proxy's listening socket, as SCM_RIGHTS */
	MSG_NET_READY,  /* supervisor -> child: the --network user helper configured the interface */
};

enum { GO_WORKSPACE = 1, GO_ROOTFS = 2 };

typedef struct msg {
	uint32_t type;
	int32_t step;
	int32_t index;   /* mount op index, or -1 */
	int32_t err;     /* positive errno */
	int32_t status;  /* MSG_EXIT: the payload's wait status */
} msg;

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
/* child.c: the payload side of the fork; never returns. */
__attribute__((noreturn)) void payload_exec(const child_args *a);

#endif
