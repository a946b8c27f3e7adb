/* Thin wrappers for system calls that glibc 2.36 does not wrap (or wraps only
 * recently). Each is a plain syscall: safe to use in the child after clone. */
#ifndef NSBOX_SYSCALLS_H
#define NSBOX_SYSCALLS_H

#include <linux/mount.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* The identity calls as plain system calls. glibc's wrappers broadcast the
 * change to every thread it knows of (setxid): in a child cloned from a
 * threaded embedder that list names threads that were not copied, and the
 * wrapper waits for them forever. The child has one thread; the kernel's
 * per-thread call is what it needs. */
static inline int sys_setgroups0(void)
{
	return (int) syscall(SYS_setgroups, 0, NULL);
}

static inline int sys_setresuid(uid_t r, uid_t e, uid_t s)
{
	return (int) syscall(SYS_setresuid, r, e, s);
}

static inline int sys_setresgid(gid_t r, gid_t e, gid_t s)
{
	return (int) syscall(SYS_setresgid, r, e, s);
}

static inline long sys_clone3(struct clone_args *args)
{
	return syscall(__NR_clone3, args, sizeof(*args));
}

static inline int sys_openat2(int dirfd, const char *path, struct open_how *how)
{
	return (int) syscall(__NR_openat2, dirfd, path, how, sizeof(*how));
}

static inline int sys_open_tree(int dirfd, const char *path, unsigned flags)
{
	return (int) syscall(__NR_open_tree, dirfd, path, flags);
}

static inline int sys_move_mount(int from_dirfd, const char *from, int to_dirfd, const char *to,
                                 unsigned flags)
{
	return (int) syscall(__NR_move_mount, from_dirfd, from, to_dirfd, to, flags);
}

static inline int sys_mount_setattr(int dirfd, const char *path, unsigned flags,
                                    struct mount_attr *attr)
{
	return (int) syscall(__NR_mount_setattr, dirfd, path, flags, attr, sizeof(*attr));
}

/* The filesystem-context calls (Linux 5.2, like open_tree and move_mount):
 * a new mount as an fd, attached where the caller says. */
static inline int sys_fsopen(const char *fstype, unsigned flags)
{
	return (int) syscall(__NR_fsopen, fstype, flags);
}

static inline int sys_fsconfig(int fd, unsigned cmd, const char *key, const void *value, int aux)
{
	return (int) syscall(__NR_fsconfig, fd, cmd, key, value, aux);
}

static inline int sys_fsmount(int fd, unsigned flags, unsigned attr_flags)
{
	return (int) syscall(__NR_fsmount, fd, flags, attr_flags);
}

static inline int sys_pidfd_send_signal(int pidfd, int sig)
{
	return (int) syscall(__NR_pidfd_send_signal, pidfd, sig, NULL, 0);
}

static inline int sys_pivot_root(const char *new_root, const char *put_old)
{
	return (int) syscall(__NR_pivot_root, new_root, put_old);
}

static inline int sys_close_range(unsigned first, unsigned last, unsigned flags)
{
	return (int) syscall(__NR_close_range, first, last, flags);
}

/* Random bytes for names (run ids, cgroup and state directories), not
 * keys: never block, even early in boot before the kernel's generator is
 * seeded (a fresh VM or CI guest would otherwise wait on it). */
#ifndef GRND_INSECURE
#define GRND_INSECURE 0x0004
#endif
static inline void random_name_bytes(void *out, size_t n)
{
	if (getrandom(out, n, GRND_INSECURE) == (ssize_t) n || getrandom(out, n, GRND_NONBLOCK) == (ssize_t) n)
		return;
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	unsigned long long mix = (unsigned long long) t.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (unsigned long long) getpid();
	for (size_t i = 0; i < n; i++, mix = mix * 6364136223846793005ULL + 1442695040888963407ULL)
		((unsigned char *) out)[i] = (unsigned char) (mix >> 56);
}

#endif
