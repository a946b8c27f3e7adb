/* Passing file descriptors over a Unix socket (SCM_RIGHTS): the one pair
 * every site uses. Neither allocates, so the child may call them too. */
#ifndef NSBOX_BASE_FDPASS_H
#define NSBOX_BASE_FDPASS_H

#include <stddef.h>
#include <sys/types.h>

#define FDPASS_MAX 8

/* Send len bytes (at least 1) with nfds fds (0..FDPASS_MAX) in one
 * sendmsg; len bytes sent, or -errno (a short send is -EMSGSIZE). */
ssize_t fd_send(int sock, const void *data, size_t len, const int *fds, int nfds);

/* Receive up to len bytes and up to maxfds fds (close-on-exec) in one
 * recvmsg with these flags (MSG_DONTWAIT...). Fds beyond maxfds, or a
 * truncated control message, are closed and the call fails with -EBADMSG
 * (having closed what it received): a peer cannot leave fds with us. The
 * bytes read (0 at EOF), or -errno. */
ssize_t fd_recv(int sock, void *data, size_t len, int *fds, int maxfds, int *nfds, int flags);

#endif
