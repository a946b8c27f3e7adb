/* The control protocol between `nsbox exec`/`stop` and a long-lived
 * sandbox's monitor, and where the monitors listen: NAME.sock in the
 * caller's directory of sandboxes (0700, the caller's own). */
#ifndef NSBOX_CLI_CTL_H
#define NSBOX_CLI_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

#define CTL_MAGIC 0x4e534278u   /* "NSBx" */
#define CTL_MAX (256 * 1024)
enum { CTL_EXEC = 1, CTL_STOP = 2 };
/* CTL_RECORD: the output passes through (as without CTL_JSON), and the
 * answer carries the record too (a detached container's exit code and OOM
 * kill, src/cli/docker/). */
enum { CTL_JSON = 1, CTL_STDIN = 2, CTL_WORKDIR = 4, CTL_CONTEXT = 8, CTL_RESTART = 16, CTL_ENV = 32, CTL_RECORD = 64 };

/* A request: this header, then `len` bytes of NUL-terminated strings (the
 * working directory with CTL_WORKDIR, then argc arguments, then with
 * CTL_ENV the NAME=VALUE entries to set, up to the end). */
typedef struct ctl_req {
	uint32_t magic, op, flags, argc, len;
	uint64_t timeout_ms;
} ctl_req;

/* The answer: the exit status nsbox run would have given, and the record's
 * length (then the record) with CTL_JSON or CTL_RECORD. */
typedef struct ctl_reply {
	int32_t status;
	uint32_t len;
} ctl_reply;

/* The directory of sandboxes, its path in path (created 0700 with create),
 * checked to be the caller's own and private; an fd, or -1 (said why). */
int ctl_open_dir(char *path, size_t len, bool create);
/* The same for another directory of nsbox's state beside it ("docker":
 * the Docker front door's containers). */
int ctl_open_state_dir(const char *leaf, char *path, size_t len, bool create);
/* NAME.sock in the directory open as dirfd. */
void ctl_sock_path(struct sockaddr_un *sa, int dirfd, const char *name);
bool ctl_name_ok(const char *n);
/* ctl_name_ok, or -1 having said why. */
int ctl_check_name(const char *n);
/* A connection to NAME's monitor, or -1 having said why. */
int ctl_connect(const char *name);
int ctl_write_all(int fd, const void *p, size_t n);
int ctl_read_all(int fd, void *p, size_t n);
/* The request and up to 3 fds, then its body. */
int ctl_send_req(int fd, const ctl_req *h, const char *body, const int *fds, int nfds);

#endif
