/* The payload's standard streams, and the relay between them and the
 * caller's (relay.c): no fd of the caller's - a person's terminal, a
 * client's pipe - is ever handed into a sandbox. */
#ifndef NSBOX_RELAY_H
#define NSBOX_RELAY_H

#include <stdbool.h>
#include <stdint.h>

#include "nsbox.h"

struct nsbox_sandbox;
typedef struct relay relay;

/* The command's streams for the child (child_stdio[0..2]; what the caller
 * closes once the child has them in close_after[]): capture pipes with
 * NSBOX_SPAWN_CAPTURE, pipes (or with NSBOX_SPAWN_TTY a pseudo-terminal) of
 * our own relayed to the caller's stdin_fd/stdout_fd/stderr_fd (-1: none
 * for stdin, the caller's 1 and 2 for the others), /dev/null for what is
 * not given; with NSBOX_SPAWN_DIRECT_FDS the given fds themselves (never a
 * terminal). Sets up sb->relay and sb->out_fd. */
int spawn_open_streams(struct nsbox_sandbox *sb, int stdin_fd, int stdout_fd, int stderr_fd, uint32_t flags,
                       int child_stdio[3], int close_after[4], nsbox_error **err);

/* Register the relay's fds with the supervisor's epoll set; their tags are
 * base and up. */
int relay_watch(relay *r, int ep, uint64_t base);
/* An event on tag base + k. */
void relay_event(relay *r, int ep, uint64_t k);
/* The sandbox has ended: pass on what the payload left in the pipes (all
 * of it, waiting for the caller's end, unless `abandon`: then only what it
 * takes at once), stop relaying, give the caller's terminal back its modes. */
void relay_finish(relay *r, bool abandon);
/* With a pseudo-terminal: copy the caller's window size to it (the kernel
 * tells the payload with SIGWINCH). -ENOTTY without one. */
int relay_winch(relay *r);
/* Close everything, the caller's terminal modes back; NULL is fine. */
void relay_free(relay *r);

#endif
