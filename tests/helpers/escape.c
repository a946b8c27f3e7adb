/* escape: one attack per subcommand, run inside a sandbox by the security
 * suite. Each exits 0 only when the attack was blocked, 1 when it worked,
 * and prints what happened. Static: the test root filesystem has no libc. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "live/ctl.h"

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

/* Blocked means refused for lack of permission (by seccomp, capabilities,
 * or a read-only or hidden path): any other answer means the call reached
 * the code it targets, and counts as an escape. */
static int blocked(const char *what, long ret)
{
	int e = errno;
	if (ret < 0 && (e == EPERM || e == EACCES || e == ENOSYS || e == EROFS || e == EAFNOSUPPORT)) {
		printf("blocked: %s: %s\n", what, strerror(e));
		return 0;
	}
	if (ret < 0)
		printf("ESCAPED: %s reached the kernel (%s)\n", what, strerror(e));
	else
		printf("ESCAPED: %s succeeded (%ld)\n", what, ret);
	return 1;
}

static int try_open(const char *path, int flags)
{
	int fd = open(path, flags);
	char what[256];
	snprintf(what, sizeof(what), "open %s (%s)", path, (flags & O_ACCMODE) == O_RDONLY ? "read" : "write");
	if (fd < 0 && errno == ENOENT) {
		printf("blocked: %s: not there\n", what);
		return 0;
	}
	struct stat st;
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)) {
		printf("blocked: %s: masked by /dev/null\n", what);
		close(fd);
		return 0;
	}
	if (fd >= 0 && (flags & O_ACCMODE) != O_RDONLY) {
		/* Opening can succeed on a masked path; the write must not. */
		ssize_t n = write(fd, "1", 1);
		close(fd);
		return blocked(what, n);
	}
	if (fd >= 0) {
		char c;
		ssize_t n = read(fd, &c, 1);
		close(fd);
		/* A masked file reads as empty (/dev/null). */
		if (n <= 0) {
			printf("blocked: %s: reads nothing\n", what);
			return 0;
		}
	}
	return blocked(what, fd);
}

static int nested_userns(void)
{
	int r = blocked("unshare(CLONE_NEWUSER)", unshare(CLONE_NEWUSER));
	return r | blocked("clone(CLONE_NEWUSER)", syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0) == 0 ? (_exit(0), 0) : -1);
}

static int ptrace_outside(void)
{
	/* Nothing outside is visible; pid 1 is ours but non-dumpable. */
	int r = blocked("ptrace(ATTACH, 1)", ptrace(PTRACE_ATTACH, 1, 0, 0));
	return r | try_open("/proc/1/mem", O_RDONLY);
}

static int supervisor_exe(void)
{
	/* CVE-2019-5736: overwrite the runtime's binary through /proc/PID/exe.
	 * pid 1 runs nsbox's code: its exe must be out of reach. */
	int r = try_open("/proc/1/exe", O_WRONLY);
	r |= try_open("/proc/1/exe", O_RDONLY);
	char link[256];
	ssize_t n = readlink("/proc/1/exe", link, sizeof(link) - 1);
	return r | blocked("readlink /proc/1/exe", n);
}

static int inherited_fds(void)
{
	/* CVE-2024-21626: a leaked directory fd (or cwd) reaching the host. */
	int r = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (atoi(e->d_name) > 2 && atoi(e->d_name) != dirfd(d)) {
			printf("ESCAPED: inherited fd %s\n", e->d_name);
			r = 1;
		}
	if (d)
		closedir(d);
	char cwd[4096];
	if (!getcwd(cwd, sizeof(cwd)) || cwd[0] != '/') {
		printf("ESCAPED: the working directory is outside the root\n");
		r = 1;
	}
	r |= try_open("/proc/1/fd/3", O_RDONLY);
	if (!r)
		printf("blocked: no fd above 2, cwd inside the root, pid 1's fds unreachable\n");
	return r;
}

static int setuid_binary(const char *path)
{
	/* Exec a setuid-root copy of ourselves: with no_new_privs and nosuid
	 * it runs with our ids. */
	pid_t p = fork();
	if (p == 0) {
		execl(path, path, "euid", (char *) NULL);
		_exit(127);
	}
	int st;
	waitpid(p, &st, 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		printf("blocked: the setuid binary ran without privilege\n");
		return 0;
	}
	printf("ESCAPED: setuid binary gained ids (status %d)\n", WEXITSTATUS(st));
	return 1;
}

static int release_agent(void)
{
	/* CVE-2022-0492: mount a cgroup v1 hierarchy to reach release_agent. */
	mkdir("/tmp/cg", 0700);
	int r = blocked("mount cgroup v1", mount("cgroup", "/tmp/cg", "cgroup", 0, "rdma"));
	r |= blocked("mount cgroup2", mount("cgroup2", "/tmp/cg", "cgroup2", 0, NULL));
	return r | try_open("/sys/fs/cgroup/release_agent", O_WRONLY);
}

/* Drive a started sandbox's monitor through its control socket (bound in
 * from the caller's directory of sandboxes): ask it to write FILE.
 * Blocked when the monitor drops us unserved. */
static int drive_monitor(const char *sock, const char *file)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
		printf("blocked: connect %s: %s\n", sock, strerror(errno));
		return 0;
	}
	char body[512];
	int len = snprintf(body, sizeof(body), "sh%c-c%cecho pwned >%s", '\0', '\0', file) + 1;
	ctl_req h = { .magic = CTL_MAGIC, .op = CTL_EXEC, .flags = CTL_STDOUT, .argc = 3, .len = (uint32_t) len };
	int fds[2] = { 1, 2 };
	char cbuf[CMSG_SPACE(sizeof(fds))];
	memset(cbuf, 0, sizeof(cbuf));
	struct iovec iov = { &h, sizeof(h) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	if (sendmsg(fd, &mh, MSG_NOSIGNAL) != (ssize_t) sizeof(h) || send(fd, body, (size_t) len, MSG_NOSIGNAL) != len) {
		int e = errno;
		printf("blocked: %s: send the request: %s\n",
		       e == EPIPE || e == ECONNRESET ? "the monitor dropped the connection unserved" : "no monitor",
		       strerror(e));
		return e == EPIPE || e == ECONNRESET ? 0 : 1;
	}
	/* The monitor answers within its request deadline, or drops us: its
	 * frames end with a CTL_REPLY whose payload starts with the status. */
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ctl_frame f;
		ssize_t n = poll(&p, 1, 30000) == 1 ? recv(fd, &f, sizeof(f), MSG_WAITALL) : -1;
		if (n != (ssize_t) sizeof(f)) {
			printf("blocked: the monitor dropped the connection unserved (%s)\n",
			       n < 0 ? strerror(errno) : "EOF");
			return 0;
		}
		if (f.type == CTL_REPLY) {
			int32_t status = 0;
			if (f.len >= sizeof(status))
				(void) recv(fd, &status, sizeof(status), MSG_WAITALL);
			printf("ESCAPED: the monitor answered our request (status %d)\n", (int) status);
			return 1;
		}
		char skip[4096];
		for (uint32_t left = f.len; left > 0;) {
			ssize_t k = recv(fd, skip, left < sizeof(skip) ? left : sizeof(skip), MSG_WAITALL);
			if (k <= 0)
				break;
			left -= (uint32_t) k;
		}
	}
}

/* Take every inotify instance the kernel lets us have, say how many, and
 * hold them until killed. */
__attribute__((noreturn)) static int hold_inotify(void)
{
	int n = 0, e = 0;
	for (;;) {
		if (syscall(SYS_inotify_init1, O_CLOEXEC) < 0) {
			e = errno;
			break;
		}
		if (++n >= 1000000)
			break;
	}
	printf("held %d inotify instances, then: %s\n", n, e ? strerror(e) : "stopped");
	fflush(stdout);
	for (;;)
		pause();
}

/* The terminal a payload may have been handed as fd 0, 1 or 2: change its
 * modes (echo off) and read what is typed on it within 20 s. */
static int steal_terminal(void)
{
	int r = 0;
	for (int fd = 0; fd < 3; fd++) {
		struct termios t;
		if (tcgetattr(fd, &t) < 0) {
			printf("blocked: fd %d is no terminal (%s)\n", fd, strerror(errno));
			continue;
		}
		t.c_lflag &= ~(tcflag_t) ECHO;
		if (tcsetattr(fd, TCSANOW, &t) == 0) {
			printf("ESCAPED: turned echo off on the terminal at fd %d\n", fd);
			r = 1;
		}
	}
	printf("reading\n");
	fflush(stdout);
	for (int fd = 0; fd < 3; fd++) {
		if (!isatty(fd))
			continue;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		char buf[256];
		ssize_t n = poll(&p, 1, 20000) == 1 ? read(fd, buf, sizeof(buf) - 1) : -1;
		if (n > 0) {
			buf[n] = '\0';
			printf("ESCAPED: read '%s' typed at the terminal (fd %d)\n", strtok(buf, "\r\n"), fd);
			r = 1;
		}
	}
	return r;
}

/* fdsend SOCK: hand our fds 0-2 to whoever listens on SOCK. */
static int send_fds(const char *sock)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
		printf("fdsend: connect %s: %s\n", sock, strerror(errno));
		return 2;
	}
	int fds[3] = { 0, 1, 2 };
	char c = 'x', cbuf[CMSG_SPACE(sizeof(fds))];
	memset(cbuf, 0, sizeof(cbuf));
	struct iovec iov = { &c, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(cm), fds, sizeof(fds));
	if (sendmsg(fd, &mh, 0) != 1) {
		printf("fdsend: %s\n", strerror(errno));
		return 2;
	}
	/* Until the other side has them. */
	(void) read(fd, &c, 1);
	return 0;
}

/* fdrecv SOCK: take another process's fds 0-2 (fdsend), and once that one
 * has ended, read what is typed on its stdin and write on its stdout. */
static int recv_fds(const char *sock)
{
	int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	(void) unlink(sock);
	if (l < 0 || bind(l, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(l, 1) < 0) {
		printf("fdrecv: listen %s: %s\n", sock, strerror(errno));
		return 2;
	}
	int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	int fds[3] = { -1, -1, -1 };
	char b, cbuf[CMSG_SPACE(sizeof(fds))];
	struct iovec iov = { &b, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	if (c < 0 || recvmsg(c, &mh, MSG_CMSG_CLOEXEC) != 1 || !CMSG_FIRSTHDR(&mh)) {
		printf("fdrecv: no fds: %s\n", strerror(errno));
		return 2;
	}
	memcpy(fds, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof(fds));
	printf("fdrecv: holding the other exec's fds\n");
	fflush(stdout);
	(void) write(c, "k", 1);
	/* The sender's exec ends; what is typed afterwards would reach us. */
	char buf[256];
	ssize_t n;
	while ((n = read(fds[0], buf, sizeof(buf) - 1)) < 0 && errno == EINTR)
		;
	int r = 0;
	if (n > 0) {
		buf[n] = '\0';
		printf("ESCAPED: read '%s' typed after the exec that owned the terminal ended\n", strtok(buf, "\r\n"));
		r = 1;
	} else {
		printf("blocked: its stdin after it ended: %s\n", n == 0 ? "end of file" : strerror(errno));
	}
	signal(SIGPIPE, SIG_IGN);
	if (write(fds[1], "INJECTED\n", 9) == 9) {
		printf("ESCAPED: wrote on its stdout after it ended\n");
		r = 1;
	} else {
		printf("blocked: its stdout after it ended: %s\n", strerror(errno));
	}
	return r;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *a = argc > 1 ? argv[1] : "";
	char c = 'x';
	struct timespec ts = { 0, 0 };
	if (!strcmp(a, "euid"))
		return geteuid() == getuid() ? 0 : 1;
	if (!strcmp(a, "userns"))
		return nested_userns();
	if (!strcmp(a, "mount"))
		return blocked("mount tmpfs", mount("tmpfs", "/tmp", "tmpfs", 0, NULL)) |
		       blocked("umount /proc", umount2("/proc", MNT_DETACH)) |
		       blocked("open_tree", syscall(SYS_open_tree, AT_FDCWD, "/", 1));
	if (!strcmp(a, "setns")) {
		int fd = open("/proc/1/ns/net", O_RDONLY);
		return blocked("setns into pid 1's net namespace", fd < 0 ? -1 : setns(fd, 0));
	}
	if (!strcmp(a, "ptrace"))
		return ptrace_outside();
	if (!strcmp(a, "keyctl"))
		return blocked("keyctl", syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3, 0)) |
		       blocked("add_key", syscall(SYS_add_key, "user", "x", "y", 1, -3));
	if (!strcmp(a, "bpf"))
		return blocked("bpf", syscall(SYS_bpf, 0, NULL, 0));
	if (!strcmp(a, "perf"))
		return blocked("perf_event_open", syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
	if (!strcmp(a, "userfaultfd"))
		return blocked("userfaultfd", syscall(SYS_userfaultfd, 0));
	if (!strcmp(a, "io_uring")) {
		char params[120] = { 0 };
		return blocked("io_uring_setup", syscall(SYS_io_uring_setup, 4, params));
	}
	if (!strcmp(a, "tiocsti")) {
		/* A terminal of our own: pushing input into it needs it to be our
		 * controlling terminal, and the caller's never is. */
		int m = posix_openpt(O_RDWR | O_NOCTTY);
		if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0) {
			printf("blocked: no pseudo-terminal: %s\n", strerror(errno));
			return 0;
		}
		int t = open(ptsname(m), O_RDWR | O_NOCTTY);
		return blocked("ioctl(pty, TIOCSTI)", ioctl(t, TIOCSTI, &c)) |
		       blocked("ioctl(pty, TIOCSTI high bits)", syscall(SYS_ioctl, t, 0xffffffff00000000ul | TIOCSTI, &c)) |
		       blocked("ioctl(pty, TIOCLINUX)", ioctl(t, TIOCLINUX, &c));
	}
	if (!strcmp(a, "raw"))
		return blocked("socket(AF_INET, SOCK_RAW)", socket(AF_INET, SOCK_RAW, 1)) |
		       blocked("socket(AF_INET6, SOCK_RAW)", socket(AF_INET6, SOCK_RAW, 58));
	if (!strcmp(a, "packet"))
		return blocked("socket(AF_PACKET)", socket(AF_PACKET, SOCK_RAW, 0));
	if (!strcmp(a, "vsock"))
		return blocked("socket(AF_VSOCK)", socket(AF_VSOCK, SOCK_STREAM, 0));
	if (!strcmp(a, "handle"))
		return blocked("open_by_handle_at", syscall(SYS_open_by_handle_at, AT_FDCWD, &c, O_RDONLY)) |
		       blocked("name_to_handle_at", syscall(SYS_name_to_handle_at, AT_FDCWD, "/", &c, &c, 0));
	if (!strcmp(a, "procsys"))
		return try_open("/proc/sys/kernel/hostname", O_WRONLY) |
		       try_open("/proc/sys/kernel/core_pattern", O_WRONLY) |
		       try_open("/proc/sysrq-trigger", O_WRONLY);
	if (!strcmp(a, "masked"))
		return try_open("/proc/kcore", O_RDONLY) | try_open("/proc/keys", O_RDONLY) |
		       try_open("/proc/timer_list", O_RDONLY) | try_open("/proc/kallsyms", O_RDONLY);
	if (!strcmp(a, "exe"))
		return supervisor_exe();
	if (!strcmp(a, "fds"))
		return inherited_fds();
	if (!strcmp(a, "setuid") && argc > 2)
		return setuid_binary(argv[2]);
	if (!strcmp(a, "mknod"))
		return blocked("mknod /tmp/null", mknod("/tmp/null", S_IFCHR | 0666, makedev(1, 3))) |
		       blocked("mknod /tmp/sda", mknod("/tmp/sda", S_IFBLK | 0666, makedev(8, 0)));
	if (!strcmp(a, "devices"))
		return try_open("/dev/sda", O_RDONLY) | try_open("/dev/mem", O_RDONLY) |
		       try_open("/dev/kmsg", O_RDONLY);
	if (!strcmp(a, "clock")) {
		/* Set the clock to what it already says: harmless, were it allowed. */
		struct timeval tv;
		clock_gettime(CLOCK_REALTIME, &ts);
		gettimeofday(&tv, NULL);
		return blocked("clock_settime", clock_settime(CLOCK_REALTIME, &ts)) |
		       blocked("settimeofday", syscall(SYS_settimeofday, &tv, NULL)) |
		       blocked("adjtimex(set)", syscall(SYS_clock_adjtime, CLOCK_REALTIME, &(struct { unsigned modes; long pad[40]; }){ 0x2000, { 0 } }));
	}
	if (!strcmp(a, "kernel"))
		/* LINUX_REBOOT_CMD_CAD_OFF: harmless, were it allowed */
		return blocked("reboot", syscall(SYS_reboot, 0xfee1dead, 0x28121969, 0, NULL)) |
		       blocked("swapon", syscall(SYS_swapon, "/tmp/swap", 0)) |
		       blocked("acct", syscall(SYS_acct, "/tmp/acct")) |
		       blocked("init_module", syscall(SYS_init_module, &c, 1, "")) |
		       blocked("delete_module", syscall(SYS_delete_module, "nsbox_no_such_module", 0)) |
		       blocked("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0));
	if (!strcmp(a, "hostname"))
		return blocked("sethostname", sethostname("pwned", 5));
	if (!strcmp(a, "release_agent"))
		return release_agent();
	if (!strcmp(a, "ctl") && argc > 3)
		return drive_monitor(argv[2], argv[3]);
	if (!strcmp(a, "inotify"))
		return hold_inotify();
	if (!strcmp(a, "terminal"))
		return steal_terminal();
	if (!strcmp(a, "fdsend") && argc > 2)
		return send_fds(argv[2]);
	if (!strcmp(a, "fdrecv") && argc > 2)
		return recv_fds(argv[2]);
	fprintf(stderr, "escape: unknown attack '%s'\n", a);
	return 2;
}
