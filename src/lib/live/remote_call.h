/* One request to a started sandbox's monitor, the client's side
 * (remote.c): its strings, the connection, its frames and its reply.
 * Shared with remote_files.c and remote_procs.c, the files and processes
 * operations built on it. */
#ifndef NSBOX_LIVE_REMOTE_CALL_H
#define NSBOX_LIVE_REMOTE_CALL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "live/ctl.h"
#include "sandbox/sandbox.h"

/* Where a request's output frames, warnings and signals go. */
typedef struct call_io {
	void (*on_output)(void *userdata, int stream, const char *data, size_t len);
	void *output_userdata;
	void (*on_warning)(void *userdata, const char *message);
	void *warning_userdata;
	int signal_fd;          /* forwarded as bytes, or -1 */
	nsbox_cancel *cancel;
} call_io;

/* The request's strings, built up. */
typedef struct strs {
	buf b;
	uint32_t n;
	bool bad;               /* a string held a NUL, or out of memory */
} strs;

/* Add a string of len bytes (s->bad if it holds a NUL) / a C string. */
void remote_add(strs *s, const char *v, size_t len);
void remote_adds(strs *s, const char *v);
/* Send the request, pass signals on while it runs, hand the output frames
 * to io, and return the reply: *status and *json (malloc'ed). */
int remote_call(nsbox_sandbox *sb, ctl_req *h, strs *s, const int *fds, int nfds, const call_io *io, int32_t *status,
                char **json, nsbox_error **err);
/* A request whose reply is data or an error: its JSON parsed (the caller
 * decrefs), or -errno with *err from the monitor's error. Frees s's
 * strings. */
int remote_call_json(nsbox_sandbox *sb, ctl_req *h, strs *s, const int *fds, int nfds, json_t **out,
                     nsbox_error **err);

#endif
