/* A started sandbox seen from another process: the nsbox_sandbox handle a
 * door gets from nsbox_live_start() or nsbox_live_connect(). Every
 * operation on it is a request to the sandbox's monitor (ctl.h), which
 * does it with the library there; the public functions dispatch here when
 * their handle is remote. */
#ifndef NSBOX_LIVE_REMOTE_H
#define NSBOX_LIVE_REMOTE_H

#include <stdbool.h>
#include <stdint.h>

#include "nsbox.h"

typedef struct live_remote {
	char name[64];
	char id[33];
	char *warning;
	char *enforced_by;
	bool owner;       /* this handle's process owns it: nsbox_sandbox_free() stops it */
} live_remote;

/* A new remote handle for NAME (its monitor answered INFO). */
int remote_open(const char *name, bool owner, nsbox_sandbox **out, nsbox_error **err);
void remote_free(nsbox_sandbox *sb);
int remote_stop(nsbox_sandbox *sb);
/* live.c: stop NAME, only if its id is id (NULL: whatever it is); waits
 * until it is gone. 0, or -errno (-ESTALE: another sandbox has the name). */
int live_stop_id(const char *name, const char *id, nsbox_error **err);

int remote_run(const nsbox_run_options *o, nsbox_sandbox *sb, nsbox_context *ctx, nsbox_result **out,
               nsbox_error **err);

int remote_file_read(nsbox_sandbox *sb, const char *path, int out_fd, uint64_t max, uint64_t *size,
                     nsbox_error **err);
int remote_file_write(nsbox_sandbox *sb, const char *path, int in_fd, unsigned mode, uint64_t max,
                      nsbox_error **err);
int remote_file_list(nsbox_sandbox *sb, const char *path, nsbox_file_info **out, size_t *count, nsbox_error **err);
int remote_file_stat(nsbox_sandbox *sb, const char *path, nsbox_file_info *out, nsbox_error **err);
int remote_file_remove(nsbox_sandbox *sb, const char *path, bool recursive, nsbox_error **err);
int remote_file_mkdir(nsbox_sandbox *sb, const char *path, unsigned mode, nsbox_error **err);

int remote_pause(nsbox_sandbox *sb, bool pause, nsbox_error **err);
/* The sandbox's configuration as YAML (malloc'ed). */
int remote_config(nsbox_sandbox *sb, char **yaml, nsbox_error **err);
/* snapshot.c: SNAP's files into the started sandbox sb. */
int snapshot_restore(nsbox_sandbox *sb, const char *snap, nsbox_error **err);
bool remote_paused(nsbox_sandbox *sb);
int remote_expose(nsbox_sandbox *sb, const char *host_addr, uint16_t host_port, uint16_t port, uint16_t *bound,
                  nsbox_error **err);

/* Processes: the id names the monitor's. */
int remote_process_start(nsbox_sandbox *sb, const nsbox_process_options *o, char id[17], nsbox_error **err);
/* -ENOENT: no such process there. */
int remote_process_state(nsbox_sandbox *sb, const char *id, bool *running);
int remote_process_list(nsbox_sandbox *sb, char **json, nsbox_error **err);
int remote_process_logs(nsbox_sandbox *sb, const char *id, int stream, char **out, size_t *len, uint64_t *total,
                        nsbox_error **err);
int remote_process_kill(nsbox_sandbox *sb, const char *id, int sig);
int remote_process_wait(nsbox_sandbox *sb, const char *id, uint64_t timeout_ms, nsbox_result **out,
                        nsbox_error **err);

/* Contexts: by name; *created when the monitor made it now. */
int remote_context_new(nsbox_sandbox *sb, const char *lang, const char *name, bool *created, nsbox_error **err);
int remote_context_op(nsbox_sandbox *sb, int op, const char *name, nsbox_error **err);

/* nsbox_cancel on a remote run (run.c): firing it closes the request's
 * writing side (the monitor cancels), a signal is one byte. */
void cancel_attach_remote(nsbox_cancel *c, int fd);
void cancel_detach_remote(nsbox_cancel *c);

#endif
