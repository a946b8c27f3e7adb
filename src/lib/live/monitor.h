/* The monitor of a started sandbox (nsbox-monitor): its state, and the
 * parts that serve requests (serve_run.c: commands, cells, contexts;
 * serve_ops.c: files, processes, ports, information, one connection) and
 * run it (monitor.c: the main loop, its life). */
#ifndef NSBOX_LIVE_MONITOR_H
#define NSBOX_LIVE_MONITOR_H

#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "live/ctl.h"
#include "nsbox.h"

#define MAX_CONTEXTS 64
#define MAX_PROCESSES 64
#define MAX_FORWARDS 64
/* A client has this long to send its whole request: its thread counts as
 * active, and one that never sent it would keep the sandbox from idling
 * out and nsbox stop from returning. */
#define REQUEST_MS 10000

typedef struct ctx_ent {
	char name[64];
	pthread_mutex_t start;  /* one starter per context */
	nsbox_context *ctx;     /* NULL until its interpreter started */
	unsigned users;         /* requests using it (under the monitor's lock) */
	bool closed;            /* off the list: freed by its last user */
	struct ctx_ent *next;
} ctx_ent;

typedef struct proc_ent {
	nsbox_process *p;
	unsigned users;         /* requests using it: not evicted meanwhile */
	struct proc_ent *next;
} proc_ent;

typedef struct fwd_ent {
	nsbox_forward *f;
	char addr[64];
	struct fwd_ent *next;
} fwd_ent;

struct conn;

typedef struct monitor {
	char name[64];
	char *image;
	int dirfd, lock_fd, listen_fd, sig_fd, timer_fd, ready_fd, owner_fd;
	int stop_fd;            /* eventfd, readable once the monitor stops: transfers end (xfer.h) */
	int wake[2];            /* handlers -> main loop: 'w' (one ended), 's' (stop), 'i' (info changed) */
	uint64_t idle_ms, lifetime_ms;
	bool pause_when_idle, idle_paused;
	struct timespec started, last;
	time_t started_wall;
	nsbox_config *cfg;
	nsbox_sandbox *sb;
	pthread_mutex_t lock;   /* everything below, and the two above */
	pthread_cond_t quiet;
	unsigned active;        /* connections being served */
	struct conn *conns;     /* ...which a stop shuts down if they outlast it (monitor.c) */
	ctx_ent *contexts;
	unsigned n_contexts;
	proc_ent *procs;
	unsigned n_procs;
	fwd_ent *forwards;
	unsigned n_forwards;
} monitor;

double since_ms(const struct timespec *t);

/* Answers: an error's JSON (status -errno), a refusal of our own, data. */
int reply_error(int cfd, const nsbox_error *e, int fallback);
int refuse(int cfd, int errnum, const char *step, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int reply_json(int cfd, json_t *j);

/* A run's output as frames to the client. */
typedef struct stream_ctx {
	int fd;
	bool broken;
} stream_ctx;
void send_output(void *userdata, int stream, const char *data, size_t len);

/* argv (and envp) of an exec or a spawn: [WORKDIR] ARGV... ENV... in v. */
typedef struct command {
	const char *workdir;
	char **argv, **envp;
	char *store;            /* argv, its NULL, envp, its NULL */
} command;
int command_of(const ctl_req *h, char **v, command *c);

int serve_exec(monitor *m, int cfd, const ctl_req *h, char **v, const int *fds, int nfds);
int serve_cell(monitor *m, int cfd, const ctl_req *h, char **v, const int *fds);
int serve_context(monitor *m, int cfd, const ctl_req *h, char **v);

/* Publish a port (registered, NAME.json rewritten). */
int publish(monitor *m, const char *addr, unsigned host_port, unsigned port, uint16_t *bound, nsbox_error **err);
json_t *info(monitor *m);
/* NAME.json, what `nsbox ps` and nsbox_live_list() read: replaced whole. */
void write_info(monitor *m);
/* One connection: its request, served. */
void serve(monitor *m, int cfd);

#endif
