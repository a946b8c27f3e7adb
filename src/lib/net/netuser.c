/* --network user: user-mode NAT by pasta (preferred) or slirp4netns.
 *
 * The helper joins the sandbox's user and network namespaces, creates a tap
 * device there and translates its packets into ordinary sockets on the host
 * side: the sandbox gets a default route without any privilege on the host.
 *
 * We hand it the namespaces as inherited fds (paths /proc/self/fd/N), opened
 * by the supervisor right after the clone: the helper never has to pass the
 * ptrace check on /proc/PID/ns of a sandbox that is no longer dumpable, and
 * cannot be pointed at another process's namespaces by a reused pid. (A
 * helper attached by pid or by name can configure the wrong namespace, the
 * host's included.)
 *
 * Lifetime: a keeper process (see keeper_main) kills the helper when we
 * close its pipe at the end of the run, or when we die; the helper also dies
 * with the keeper (parent-death signal), and slirp4netns quits when its
 * --exit-fd closes. Readiness: slirp4netns writes to --ready-fd; pasta
 * writes its pid file, which we make a pipe, only once the interface is up. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/coverage.h"
#include "base/cleanup.h"
#include "sandbox/janitor.h"
#include "net/netuser.h"
#include "base/syscalls.h"

#define READY_TIMEOUT_MS 10000

/* The fds the helper finds open, by number (see helper_argv). */
enum { FD_USERNS = 3, FD_NETNS, FD_READY, FD_EXIT, FD__N };


const char *netuser_helper_name(enum net_helper kind)
{
	return config_net_helpers[kind == HELPER_SLIRP4NETNS ? HELPER_SLIRP4NETNS : HELPER_PASTA];
}

/* `name` in the caller's PATH (or the default one), as an absolute path.
 * Root searches only the system directories: a PATH that names a directory
 * someone else can write must not choose what root runs. */
static char *find_program(const char *name)
{
	const char *path = geteuid() == 0 ? NULL : getenv("PATH");
	if (!path || !*path)
		path = NSBOX_DEFAULT_PATH;
	for (const char *dir = path; dir;) {
		const char *end = strchrnul(dir, ':');
		char full[PATH_MAX];
		if (*dir == '/' && snprintf(full, sizeof(full), "%.*s/%s", (int) (end - dir), dir, name) <
		                   (int) sizeof(full) && access(full, X_OK) == 0)
			return strdup(full);
		dir = *end ? end + 1 : NULL;
	}
	return NULL;
}

static int check_tun(bool rootless, nsbox_error **err)
{
	/* The helper opens the device inside the sandbox's user namespace,
	 * where root's ownership of it means nothing: only its "other" bits
	 * count, which is what opening it as ourselves checks. */
	int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	int e = errno;
	if (e == EACCES || e == EPERM)
		return nsbox_err_hint(err, e, "network",
		                      rootless ? "the helper opens it unprivileged; stock Debian/Ubuntu udev rules make it "
		                                 "0666 (chmod 0666 /dev/net/tun), or use --network none / --allow-host"
		                               : "check the device's permissions and any device cgroup",
		                      "set up --network user: open '/dev/net/tun'");
	return nsbox_err_hint(err, e, "network", "load the tun module (modprobe tun), or use --network none",
	                      "set up --network user: open '/dev/net/tun'");
}

int netuser_prepare(netuser_plan *np, const nsbox_config *cfg, bool rootless, nsbox_error **err)
{
	*np = (netuser_plan){ .host_loopback = cfg->allow_host_loopback, .as_root = !rootless };
	enum net_helper order[2] = { HELPER_PASTA, HELPER_SLIRP4NETNS };
	size_t n = 2;
	if (cfg->net_helper != HELPER_AUTO) {
		order[0] = cfg->net_helper;
		n = 1;
	}
	for (size_t i = 0; i < n && !np->path; i++) {
		np->path = find_program(netuser_helper_name(order[i]));
		np->kind = order[i];
	}
	if (!np->path) {
		if (n == 1)
			return nsbox_err_hint(err, ENOENT, "network",
			                      np->kind == HELPER_PASTA ? "install the package 'passt'" : "install the package 'slirp4netns'",
			                      "set up --network user: the helper '%s' (network.helper) is not in PATH",
			                      netuser_helper_name(np->kind));
		return nsbox_err_hint(err, ENOENT, "network",
		                      "install the package 'passt' (for pasta) or 'slirp4netns', or use --network none / --allow-host",
		                      "set up --network user: no helper found: neither 'pasta' nor 'slirp4netns' is in PATH");
	}
	return check_tun(rootless, err);
}

void netuser_plan_free(netuser_plan *np)
{
	free(np->path);
	np->path = NULL;
}

/* argv for the helper; the strings are static or owned by np. */
static void helper_argv(const netuser_plan *np, const char **argv)
{
	size_t n = 0;
	argv[n++] = np->path;
	if (np->kind == HELPER_PASTA) {
		static const char *const fixed[] = {
			"--quiet", "--foreground", "--pid", "/proc/self/fd/5",
			"--userns", "/proc/self/fd/3", "--netns", "/proc/self/fd/4",
			"--config-net", "--ns-ifname", "tap0",
			"--address", NETUSER_ADDRESS, "--netmask", "24", "--gateway", NETUSER_GATEWAY,
			"--dns-forward", NETUSER_DNS,
			/* no port forwarding either way: in particular -T/-U
			 * "auto" would let the sandbox's loopback reach the
			 * host's */
			"--tcp-ports", "none", "--udp-ports", "none", "--tcp-ns", "none", "--udp-ns", "none",
		};
		for (size_t i = 0; i < ARRAY_SIZE(fixed); i++)
			argv[n++] = fixed[i];
		if (!np->host_loopback)
			argv[n++] = "--no-map-gw";
		/* pasta drops to nobody by default, who may not enter a user
		 * namespace that root owns; uid 0 with capabilities only in the
		 * sandbox's namespace is what the rootless helper has too. */
		if (np->as_root) {
			argv[n++] = "--runas";
			argv[n++] = "0";
		}
	} else {
		static const char *const fixed[] = {
			"--configure", "--mtu", "65520", "--ready-fd", "5", "--exit-fd", "6",
			"--userns-path=/proc/self/fd/3", "--netns-type=path", "--enable-seccomp",
		};
		for (size_t i = 0; i < ARRAY_SIZE(fixed); i++)
			argv[n++] = fixed[i];
		if (!np->host_loopback)
			argv[n++] = "--disable-host-loopback";
		/* Its sandbox (a new mount namespace, capabilities dropped)
		 * needs real root; rootless it has no privilege to drop. */
		if (np->as_root)
			argv[n++] = "--enable-sandbox";
		argv[n++] = "/proc/self/fd/4";
		argv[n++] = "tap0";
	}
	argv[n] = NULL;
}

/* In the cloned helper: only async-signal-safe calls (the library may be
 * embedded in a threaded program). src[i] goes to fd i. */
__attribute__((noreturn)) static void helper_exec(const char *path, const char *const *argv,
                                                  int src[FD__N], pid_t keeper)
{
	sigset_t none;
	sigemptyset(&none);
	(void) sigprocmask(SIG_SETMASK, &none, NULL);
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	(void) sigaction(SIGPIPE, &dfl, NULL);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != keeper)
		_exit(127);
	/* Move every source above the targets first, then into place. */
	for (int i = 0; i < FD__N; i++)
		if (src[i] >= 0 && (src[i] = fcntl(src[i], F_DUPFD_CLOEXEC, FD__N + 16)) < 0)
			_exit(127);
	for (int i = 0; i < FD__N; i++)
		if (src[i] >= 0 && dup2(src[i], i) < 0)
			_exit(127);
	(void) sys_close_range(FD__N, ~0U, 0);
	static char *const envp[] = { "PATH=" NSBOX_DEFAULT_PATH, NULL };
	execve(path, (char *const *) argv, envp);
	_exit(127);
}

/* The keeper: started through an intermediate that exits at once, so that
 * neither it nor the helper is our child and we never wait for them. It
 * starts the helper, tells us its pid, and waits for `life` to close - we
 * stopped it, or died - to kill the helper, reap it and report how it
 * ended. The helper's own exit is slow (closing the tap device unregisters
 * it, which waits for RCU grace periods: 10-40 ms here); nobody waits for it
 * but the keeper. Until then an early-dead helper stays a zombie, so its
 * pid cannot be reused before we have a pidfd for it. */
__attribute__((noreturn)) static void keeper_main(const char *path, const char *const *argv, int src[FD__N],
                                                  int life, int report, bool dump)
{
	background_init("nsbox-netkeeper");
	/* Out of the way of the standard streams we replace below (an
	 * embedding program may have closed its own). */
	if (life < 3)
		life = fcntl(life, F_DUPFD_CLOEXEC, 3);
	if (report < 3)
		report = fcntl(report, F_DUPFD_CLOEXEC, 3);
	if (life < 0 || report < 0)
		_exit(1);
	/* The embedding program may ignore SIGCHLD, which would reap the
	 * helper behind our back. */
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	(void) sigaction(SIGCHLD, &dfl, NULL);
	pid_t self = getpid();
	struct clone_args ca = { .exit_signal = SIGCHLD };
	pid_t helper = (pid_t) sys_clone3(&ca);
	if (helper == 0)
		helper_exec(path, argv, src, self);
	int32_t word = helper;
	if (helper < 0 || write(report, &word, sizeof(word)) != sizeof(word))
		_exit(1);
	/* Only what we need from here: life and report; and not the caller's
	 * standard streams, whose readers wait for every writer to close. */
	for (int i = 0; i < 3; i++)
		(void) dup2(src[0], i);
	int lo = life < report ? life : report, hi = life < report ? report : life;
	if (lo > 3)
		(void) sys_close_range(3, (unsigned) lo - 1, 0);
	if (hi > lo + 1)
		(void) sys_close_range((unsigned) lo + 1, (unsigned) hi - 1, 0);
	(void) sys_close_range((unsigned) hi + 1, ~0U, 0);
	char c;
	while (read(life, &c, 1) < 0 && errno == EINTR)
		;
	(void) kill(helper, SIGKILL);
	int status = 0;
	while (waitpid(helper, &status, 0) < 0 && errno == EINTR)
		;
	word = status;
	(void) !write(report, &word, sizeof(word));
	if (dump)
		coverage_dump();
	_exit(0);
}

/* The last line the helper wrote to stderr, for the error message. */
static void last_words(int log_fd, char *out, size_t len)
{
	out[0] = '\0';
	char buf[2048];
	off_t size = lseek(log_fd, 0, SEEK_END);
	off_t from = size > (off_t) sizeof(buf) - 1 ? size - (off_t) sizeof(buf) + 1 : 0;
	ssize_t n = pread(log_fd, buf, sizeof(buf) - 1, from);
	if (n <= 0)
		return;
	buf[n] = '\0';
	/* Drop trailing newlines and syslog noise; keep the last real line. */
	char *line = NULL, *save = NULL;   /* strtok_r: the caller may be threaded */
	for (char *s = strtok_r(buf, "\n", &save); s; s = strtok_r(NULL, "\n", &save))
		if (*s && !strstr(s, "Failed to send") && !strstr(s, "WARNING: Support for seccomp"))
			line = s;
	if (line)
		snprintf(out, len, "%s", line);
}

/* An errno for what the helper said, when it says one. */
static int helper_errno(const char *words)
{
	static const int known[] = { EACCES, EPERM, ENODEV, ENOENT, ENXIO, EBUSY, EINVAL };
	for (size_t i = 0; i < ARRAY_SIZE(known); i++)
		if (strstr(words, strerror(known[i])))
			return known[i];
	return EPROTO;
}

/* How the helper ended, from the keeper, once life is closed. */
static int helper_status(netuser *h)
{
	if (h->life_fd >= 0) {
		close(h->life_fd);
		h->life_fd = -1;
	}
	int32_t word;
	struct pollfd pfd = { .fd = h->report_fd, .events = POLLIN };
	if (poll(&pfd, 1, 2000) == 1 && read(h->report_fd, &word, sizeof(word)) == sizeof(word))
		return word;
	return -1;
}

static int wait_ready(const netuser_plan *np, netuser *h, int ready_fd, nsbox_error **err)
{
	const char *name = netuser_helper_name(np->kind);
	struct pollfd pfd[2] = { { .fd = ready_fd, .events = POLLIN }, { .fd = h->pidfd, .events = POLLIN } };
	int n;
	do
		n = poll(pfd, 2, READY_TIMEOUT_MS);
	while (n < 0 && errno == EINTR);
	char c;
	if (n > 0 && (pfd[0].revents & POLLIN) && read(ready_fd, &c, 1) == 1)
		return 0;
	if (n == 0)
		return nsbox_err_hint(err, ETIMEDOUT, "network", "see 'nsbox check'; or use --network none",
		                      "set up --network user: '%s' did not configure the interface within %d s",
		                      np->path, READY_TIMEOUT_MS / 1000);
	/* It exited (or closed the pipe, which it only does by exiting). */
	int st = helper_status(h);
	char words[512], status[64] = "exited";
	last_words(h->log_fd, words, sizeof(words));
	if (st >= 0 && WIFEXITED(st))
		snprintf(status, sizeof(status), "exited with status %d", WEXITSTATUS(st));
	else if (st >= 0 && WIFSIGNALED(st))
		snprintf(status, sizeof(status), "was killed by signal %d", WTERMSIG(st));
	if (st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 127 && !words[0])
		return nsbox_err_hint(err, ENOEXEC, "network", "reinstall the package", "set up --network user: run '%s'",
		                      np->path);
	/* The error ends with the errno's text: not twice when the helper's
	 * line already does ("...: Permission denied: Permission denied"). */
	int e = helper_errno(words);
	size_t wl = strlen(words), el = strlen(strerror(e));
	if (e != EPROTO && wl >= el + 2 && !strcmp(words + wl - el, strerror(e)) && words[wl - el - 2] == ':')
		words[wl - el - 2] = '\0';
	return nsbox_err_hint(err, e, "network",
	                      np->kind == HELPER_PASTA ? "try NSBOX_NETWORK_HELPER=slirp4netns, or --network none"
	                                               : "try NSBOX_NETWORK_HELPER=pasta, or --network none",
	                      "set up --network user: %s %s%s%s", name, status, words[0] ? ": " : "", words);
}

/* Start the keeper (through an intermediate we reap at once); returns the
 * helper's pid, or -errno. */
static pid_t start_keeper(const char *path, const char *const *argv, int src[FD__N], int life, int report_w,
                          int report_r)
{
	int pidfd = -1;
	bool dump = coverage_clone_may_dump();
	struct clone_args ca = { .flags = CLONE_PIDFD, .pidfd = (uint64_t) (uintptr_t) &pidfd };
	pid_t mid = (pid_t) sys_clone3(&ca);
	if (mid == 0) {
		struct clone_args kc = { .exit_signal = SIGCHLD };
		pid_t k = (pid_t) sys_clone3(&kc);
		if (k == 0)
			keeper_main(path, argv, src, life, report_w, dump);
		_exit(k < 0 ? 1 : 0);
	}
	if (mid < 0)
		return -errno;
	siginfo_t si = { 0 };
	while (waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED | __WALL) < 0 && errno == EINTR)
		;
	close(pidfd);
	if (si.si_code != CLD_EXITED || si.si_status != 0)
		return -ECHILD;
	int32_t word;
	struct pollfd pfd = { .fd = report_r, .events = POLLIN };
	if (poll(&pfd, 1, 5000) != 1 || read(report_r, &word, sizeof(word)) != sizeof(word))
		return -ECHILD;
	return (pid_t) word;
}

int netuser_start(const netuser_plan *np, pid_t child, netuser *h, nsbox_error **err)
{
	*h = NETUSER_INIT;
	const char *argv[48];
	helper_argv(np, argv);
	int src[FD__N] = { -1, -1, -1, -1, -1, -1, -1 };
	_cleanup_close_ int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0)
		return nsbox_err(err, errno, "network", "set up --network user: open '/dev/null'");
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int) child);
	_cleanup_close_ int userns = open(path, O_RDONLY | O_CLOEXEC);
	if (userns >= 0)
		snprintf(path, sizeof(path), "/proc/%d/ns/net", (int) child);
	_cleanup_close_ int netns = userns < 0 ? -1 : open(path, O_RDONLY | O_CLOEXEC);
	if (netns < 0)
		return nsbox_err(err, errno, "network", "set up --network user: open the sandbox's namespace '%s'", path);
	int ready[2] = { -1, -1 }, quit[2] = { -1, -1 }, life[2] = { -1, -1 }, report[2] = { -1, -1 };
	int r = 0;
	h->log_fd = memfd_create("nsbox-net-helper", MFD_CLOEXEC);
	if (h->log_fd < 0 || pipe2(ready, O_CLOEXEC) < 0 || pipe2(life, O_CLOEXEC) < 0 ||
	    pipe2(report, O_CLOEXEC) < 0 || (np->kind == HELPER_SLIRP4NETNS && pipe2(quit, O_CLOEXEC) < 0))
		r = nsbox_err(err, errno, "network", "set up --network user: create the helper's pipes");
	h->exit_fd = quit[1];
	h->life_fd = life[1];
	h->report_fd = report[0];
	pid_t pid = -1;
	if (r == 0) {
		src[0] = src[1] = devnull;
		src[2] = h->log_fd;
		src[FD_USERNS] = userns;
		src[FD_NETNS] = netns;
		src[FD_READY] = ready[1];
		src[FD_EXIT] = quit[0];
		pid = start_keeper(np->path, argv, src, life[0], report[1], report[0]);
		if (pid < 0)
			r = nsbox_err(err, -pid, "network", "set up --network user: start '%s'", np->path);
	}
	int ends[] = { ready[1], quit[0], life[0], report[1] };
	for (size_t i = 0; i < ARRAY_SIZE(ends); i++)
		if (ends[i] >= 0)
			close(ends[i]);
	if (r == 0) {
		h->pid = pid;
		/* Not our child: a pidfd to see it exit, safe from pid reuse
		 * because the keeper does not reap it before we say so. */
		h->pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
		if (h->pidfd < 0)
			r = nsbox_err(err, errno, "network", "set up --network user: watch '%s'", np->path);
	}
	h->ready_fd = ready[0];
	if (r < 0)
		netuser_stop(h);
	return r;
}

int netuser_wait(const netuser_plan *np, netuser *h, nsbox_error **err)
{
	int r = wait_ready(np, h, h->ready_fd, err);
	close(h->ready_fd);
	h->ready_fd = -1;
	if (r < 0)
		netuser_stop(h);
	return r;
}

void netuser_stop(netuser *h)
{
	/* Closing life tells the keeper to kill the helper (the sandbox is
	 * gone: nothing to drain) and reap it; slirp4netns also quits when
	 * its exit fd closes. We do not wait for either. */
	int fds[] = { h->life_fd, h->exit_fd, h->pidfd, h->log_fd, h->report_fd, h->ready_fd };
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	*h = NETUSER_INIT;
}
