/* --workspace-mode rw writes the host directory itself, and no mount
 * option can keep a set-id bit off the host's disk (nosuid only governs
 * exec through that mount). A payload that owns its files there (through
 * root's idmapping, or as the caller's own id when rootless) could
 * `chmod u+s` and leave a setuid binary for the next person on the host.
 * So a run with a rw workspace gets one more seccomp layer, whatever its
 * profile (even unconfined): every system call that sets a mode fails with
 * EPERM when that mode has S_ISUID or S_ISGID, openat2 (whose mode is in a
 * struct the filter cannot read) fails with ENOSYS so that callers fall
 * back to openat, and io_uring is refused. */
#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <linux/seccomp.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/error.h"
#include "workspace/workspace.h"

#ifndef __O_TMPFILE
#define __O_TMPFILE 020000000
#endif

/* name, index of the mode argument, index of the flags argument (-1: the
 * mode always applies: chmod, mkdir, mknod ...). */
static const struct { const char *name; int nr; unsigned mode; int flags; } mode_calls[] = {
	{ "chmod", 0, 1, -1 },   { "fchmod", 0, 1, -1 },  { "fchmodat", 0, 2, -1 },
	{ "fchmodat2", 452, 2, -1 }, { "creat", 0, 1, -1 }, { "mkdir", 0, 1, -1 },
	{ "mkdirat", 0, 2, -1 }, { "mknod", 0, 1, -1 },   { "mknodat", 0, 2, -1 },
	{ "open", 0, 2, 1 },     { "openat", 0, 3, 2 },
};

static int add(scmp_filter_ctx ctx, uint32_t action, int nr, unsigned n, const struct scmp_arg_cmp *cmp)
{
	int r = seccomp_rule_add_array(ctx, action, nr, n, cmp);
	/* -EACCES: nothing to add; -EDOM/-EFAULT: not on this architecture. */
	return r == -EACCES || r == -EDOM || r == -EFAULT ? 0 : r;
}

static int rules(scmp_filter_ctx ctx)
{
	int r = 0;
	static const uint64_t bits[] = { S_ISUID, S_ISGID };
	static const uint64_t creating[] = { O_CREAT, __O_TMPFILE };
	for (size_t i = 0; r == 0 && i < sizeof(mode_calls) / sizeof(mode_calls[0]); i++) {
		int nr = seccomp_syscall_resolve_name(mode_calls[i].name);
		if (nr == __NR_SCMP_ERROR)
			nr = mode_calls[i].nr;   /* newer than libseccomp: its number */
		if (nr <= 0)
			continue;
		for (size_t b = 0; r == 0 && b < 2; b++) {
			struct scmp_arg_cmp cmp[2] = { { mode_calls[i].mode, SCMP_CMP_MASKED_EQ, bits[b], bits[b] } };
			if (mode_calls[i].flags < 0) {
				r = add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1, cmp);
				continue;
			}
			/* open/openat read the mode only when creating. */
			for (size_t c = 0; r == 0 && c < 2; c++) {
				cmp[1] = (struct scmp_arg_cmp){ (unsigned) mode_calls[i].flags, SCMP_CMP_MASKED_EQ, creating[c],
				                                creating[c] };
				r = add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 2, cmp);
			}
		}
	}
	int nr = seccomp_syscall_resolve_name("openat2");
	if (r == 0)
		r = add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr == __NR_SCMP_ERROR ? 437 : nr, 0, NULL);
	nr = seccomp_syscall_resolve_name("io_uring_setup");
	if (r == 0)
		r = add(ctx, SCMP_ACT_ERRNO(EPERM), nr == __NR_SCMP_ERROR ? 425 : nr, 0, NULL);
	return r;
}

int ws_nosuid_filter(ws_plan *w, nsbox_error **err)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return nsbox_err(err, ENOMEM, "workspace", "compile the rw workspace's filter");
	int r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);   /* the child sets it */
	r = r ?: rules(ctx);
	_cleanup_close_ int fd = r == 0 ? memfd_create("nsbox-ws-bpf", MFD_CLOEXEC) : -1;
	if (r == 0 && fd < 0)
		r = -errno;
	r = r ?: seccomp_export_bpf(ctx, fd);
	seccomp_release(ctx);
	off_t size = r == 0 ? lseek(fd, 0, SEEK_END) : 0;
	if (r == 0 && (size <= 0 || size % (off_t) sizeof(struct sock_filter) || size > 4096 * (off_t) sizeof(struct sock_filter)))
		r = -EINVAL;
	if (r == 0 && !(w->nosuid = malloc((size_t) size)))
		r = -ENOMEM;
	if (r == 0 && pread(fd, w->nosuid, (size_t) size, 0) != size)
		r = -EIO;
	if (r < 0)
		return nsbox_err(err, -r, "workspace", "compile the rw workspace's filter");
	w->nosuid_len = (unsigned short) (size / (off_t) sizeof(struct sock_filter));
	return 0;
}

int ws_nosuid_install(const ws_plan *w)
{
	if (!w->nosuid_len)
		return 0;
	struct sock_fprog prog = { .len = w->nosuid_len, .filter = w->nosuid };
	return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0 ? -errno : 0;
}
