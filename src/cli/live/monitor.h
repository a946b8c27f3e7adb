/* The monitor of a long-lived sandbox (`nsbox start`): the sandbox's
 * owner, serving `nsbox exec` and `stop` on NAME.sock (ctl.h). */
#ifndef NSBOX_CLI_MONITOR_H
#define NSBOX_CLI_MONITOR_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "args.h"
#include "live/context.h"
#include "nsbox.h"

typedef struct monitor {
	const char *name;
	char dir[PATH_MAX];
	int dirfd, lock_fd, listen_fd, sig_fd, timer_fd, ready_fd;
	int wake[2];            /* handlers -> main loop: 'w' (one ended), 's' (stop) */
	uint64_t idle_ms, lifetime_ms;
	struct timespec started;
	nsbox_sandbox *sb;
	pthread_mutex_t lock;   /* active, last */
	pthread_cond_t quiet;
	unsigned active;        /* connections being served */
	struct timespec last;
	pthread_mutex_t ctx_lock;
	context *contexts;
} monitor;

/* In the monitor's process (forked by `nsbox start`, which holds NAME.lock
 * and has the directory open in m): set the sandbox up, write 'O' (with a
 * warning) or 'E' and the error to ready_fd, serve until stopped, idle or
 * out of lifetime, and exit. */
__attribute__((noreturn)) void monitor_run(monitor *m, int ready_fd, const run_args *a, nsbox_config *cfg);

/* Start a long-lived sandbox as `nsbox start` does, from parsed run options
 * (a->name, or a generated name, is copied to name): check the name and the
 * configuration, take NAME.lock, fork the monitor and wait until the sandbox
 * is ready. 0 (*monitor_pid, if not NULL, the monitor's pid), 2 when the name
 * is taken, else EXIT_SETUP; the reason is printed. With
 * LIVE_DIE_WITH_PARENT the monitor stops when the caller dies. */
#define LIVE_DIE_WITH_PARENT 1u
int live_start(const run_args *a, unsigned flags, char *name, size_t name_len, pid_t *monitor_pid);

#endif
