/* The data of a file transfer between the monitor and a client's fd.
 *
 * A client passes the fd a file is read into or written from (ctl.h,
 * CTL_FILE); it is the client's, and the client may never drain it or never
 * close it (a pipe to a stopped reader, a terminal nobody types into). The
 * library's nsbox_file_read/write would block on it for ever, and with them
 * the monitor's stop, its lifetime and its idle timeout. So the library
 * gets a socket of ours, and a thread of ours copies between it and the
 * client's fd, waiting in poll() on the client's fd and on the monitor's
 * stop fd: a stop ends the transfer, as it ends a run. */
#ifndef NSBOX_LIVE_XFER_H
#define NSBOX_LIVE_XFER_H

#include <pthread.h>
#include <stdbool.h>

typedef struct xfer {
	int client;             /* the client's fd (not ours to close) */
	int ours;               /* our end of the socket pair */
	int stop_fd;            /* readable once the monitor stops */
	bool to_client;         /* a read: the file's bytes go to the client */
	int err;                /* 0, the errno of the client's fd, or ECANCELED (stopped) */
	pthread_t thread;
} xfer;

/* Start copying for client_fd; *lib_fd is the socket to give the library
 * (a read writes to it; a write reads it to its end). -errno. */
int xfer_start(xfer *r, int client_fd, bool to_client, int stop_fd, int *lib_fd);
/* Once the library has returned: close lib_fd, wait for the copier (a read's
 * last bytes reach the client first). Its err: a transfer the library
 * finished is whole only when this is 0. */
int xfer_finish(xfer *r, int lib_fd);

#endif
