/* --seccomp-log, supervisor side: every call the filter's allow layer
 * refuses arrives here as a user notification; we answer it with the errno
 * the profile gives (so the filter is not weakened: the call still fails)
 * and count it by name for the result record. Should we die, the kernel
 * fails the pending and later calls with ENOSYS. */
#include <errno.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/sandbox.h"

static void count(nsbox_sandbox *sb, const char *name, int errnum)
{
	for (size_t i = 0; i < sb->n_denied; i++)
		if (!strcmp(sb->denied[i].name, name)) {
			sb->denied[i].count++;
			return;
		}
	denied_call *v = realloc(sb->denied, (sb->n_denied + 1) * sizeof(*v));
	if (!v)
		return;
	sb->denied = v;
	v[sb->n_denied].name = strdup(name);
	v[sb->n_denied].count = v[sb->n_denied].name ? 1 : 0;
	v[sb->n_denied].errnum = errnum;
	if (v[sb->n_denied].name)
		sb->n_denied++;
}

/* Handle what is pending on the listener; false once it is finished. */
bool notify_handle(nsbox_sandbox *sb)
{
	struct seccomp_notif_sizes sizes = { 0 };
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) < 0)
		return false;
	size_t req_size = sizes.seccomp_notif > sizeof(struct seccomp_notif) ? sizes.seccomp_notif : sizeof(struct seccomp_notif);
	size_t resp_size = sizes.seccomp_notif_resp > sizeof(struct seccomp_notif_resp) ? sizes.seccomp_notif_resp : sizeof(struct seccomp_notif_resp);
	struct seccomp_notif *req = calloc(1, req_size);
	struct seccomp_notif_resp *resp = calloc(1, resp_size);
	bool alive = req && resp;
	if (alive) {
		if (ioctl(sb->notify_fd, SECCOMP_IOCTL_NOTIF_RECV, req) < 0) {
			/* ENOENT: the caller died meanwhile; anything else: done */
			alive = errno == ENOENT || errno == EINTR;
		} else {
			char *name = seccomp_syscall_resolve_num_arch(req->data.arch, req->data.nr);
			int errnum = sc_answer_for(&sb->plan->seccomp_answers, req->data.nr);
			count(sb, name ? name : "?", errnum);
			free(name);
			resp->id = req->id;
			resp->error = -errnum;
			resp->val = 0;
			resp->flags = 0;
			/* ENOENT here too just means the caller is gone. */
			(void) ioctl(sb->notify_fd, SECCOMP_IOCTL_NOTIF_SEND, resp);
		}
	}
	free(req);
	free(resp);
	return alive;
}
