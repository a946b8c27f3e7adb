/* -t: the command's standard streams are a new pseudo-terminal, which this
 * door relays (a door marshals I/O; nothing here isolates). The sandbox
 * gets only the pseudo-terminal's slave side: never the caller's own
 * terminal. Its payload runs in a session of its own (setsid) with no
 * controlling terminal, and the seccomp filter refuses TIOCSTI, so the
 * terminal's interrupt keys cannot reach it through the line discipline:
 * the relay turns them into signals itself, as the pseudo-terminal's
 * settings say (ISIG, VINTR, VQUIT), the way the kernel would. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"
#include "docker/docker.h"

int tty_open(int *master, int *slave)
{
	*master = *slave = -1;
	char name[128];
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0 || ptsname_r(m, name, sizeof(name)) != 0) {
		print_msg("-t: allocate a pseudo-terminal: %s", strerror(errno));
		if (m >= 0)
			close(m);
		return -1;
	}
	int s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (s < 0) {
		print_msg("-t: open the pseudo-terminal '%s': %s", name, strerror(errno));
		close(m);
		return -1;
	}
	struct winsize ws;
	if (ioctl(1, TIOCGWINSZ, &ws) == 0 || ioctl(0, TIOCGWINSZ, &ws) == 0)
		(void) ioctl(s, TIOCSWINSZ, &ws);
	*master = m;
	*slave = s;
	return 0;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t) w;
	}
	return 0;
}

/* Our input to the pseudo-terminal; its interrupt characters (when its
 * settings make them signals) to the child as signals. */
static void relay_input(int master, pid_t child, const char *buf, size_t n)
{
	/* (The master's termios are the terminal's, as the command set them.) */
	struct termios t;
	bool isig = tcgetattr(master, &t) == 0 && (t.c_lflag & ISIG);
	size_t from = 0;
	for (size_t i = 0; isig && i < n; i++) {
		int sig = buf[i] == (char) t.c_cc[VINTR] ? SIGINT : buf[i] == (char) t.c_cc[VQUIT] ? SIGQUIT : 0;
		if (!sig)
			continue;
		(void) write_all(master, buf + from, i - from);
		from = i + 1;
		(void) kill(child, sig);
	}
	(void) write_all(master, buf + from, n - from);
}

/* Relay until the child has ended and the terminal has no one left: its
 * output to ours, our input to it, our signals to the child. The child's
 * status. */
static int relay(int master, pid_t pid, int sfd, bool input)
{
	int status = -1;
	bool in_open = input, out_open = true;
	while (out_open || status < 0) {
		struct pollfd p[3] = { { .fd = out_open ? master : -1, .events = POLLIN },
		                       { .fd = in_open ? 0 : -1, .events = POLLIN },
		                       { .fd = sfd, .events = POLLIN } };
		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		char buf[16384];
		if (p[0].revents) {
			ssize_t n = read(master, buf, sizeof(buf));
			if (n > 0)
				(void) write_all(1, buf, (size_t) n);
			else if (n == 0 || (errno != EINTR && errno != EAGAIN))
				out_open = false;   /* EIO: no one has the terminal open any more */
		}
		if (p[1].revents) {
			ssize_t n = read(0, buf, sizeof(buf));
			struct termios t;
			if (n > 0) {
				relay_input(master, pid, buf, (size_t) n);
			} else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
				/* The end of our input: the terminal's end-of-file. */
				in_open = false;
				if (tcgetattr(master, &t) == 0 && (t.c_lflag & ICANON))
					(void) write_all(master, (const char *) &t.c_cc[VEOF], 1);
			}
		}
		struct signalfd_siginfo si;
		while (p[2].revents && read(sfd, &si, sizeof(si)) == (ssize_t) sizeof(si)) {
			struct winsize ws;
			if (si.ssi_signo == SIGWINCH) {
				if (ioctl(1, TIOCGWINSZ, &ws) == 0 || ioctl(0, TIOCGWINSZ, &ws) == 0)
					(void) ioctl(master, TIOCSWINSZ, &ws);
			} else if (si.ssi_signo != SIGCHLD) {
				(void) kill(pid, (int) si.ssi_signo);
			}
		}
		int w;
		if (status < 0 && waitpid(pid, &w, WNOHANG) == pid)
			status = WIFEXITED(w) ? WEXITSTATUS(w) : 128 + WTERMSIG(w);
	}
	return status;
}

int tty_wrap(int (*fn)(void *, int), void *arg, bool input)
{
	int master, slave;
	if (tty_open(&master, &slave) < 0)
		return DOCKER_EXIT_RUN;
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	sigaddset(&set, SIGWINCH);
	sigaddset(&set, SIGCHLD);
	(void) sigprocmask(SIG_BLOCK, &set, &old);
	fflush(NULL);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		print_msg("-t: fork: %s", strerror(errno));
		close(master);
		close(slave);
		(void) sigprocmask(SIG_SETMASK, &old, NULL);
		return DOCKER_EXIT_RUN;
	}
	if (pid == 0) {
		/* The run, given the pseudo-terminal for the command's streams
		 * (stdin too: without -i nothing is typed into it); it dies
		 * with us. */
		(void) sigprocmask(SIG_SETMASK, &old, NULL);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
			_exit(DOCKER_EXIT_RUN);
		close(master);
		int rc = fn(arg, slave);
		fflush(NULL);
		_exit(rc);
	}
	/* The command's copies alone keep the terminal open: when the last
	 * is closed, what it wrote is read to the end, then EIO. */
	close(slave);
	int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	struct termios saved;
	bool raw = input && isatty(0) && tcgetattr(0, &saved) == 0;
	if (raw) {
		struct termios t = saved;
		cfmakeraw(&t);
		(void) tcsetattr(0, TCSANOW, &t);
	}
	int status = relay(master, pid, sfd, input);
	if (raw)
		(void) tcsetattr(0, TCSANOW, &saved);
	close(master);
	if (sfd >= 0)
		close(sfd);
	if (status < 0) {
		int w;
		status = waitpid(pid, &w, 0) == pid && WIFEXITED(w) ? WEXITSTATUS(w) : DOCKER_EXIT_RUN;
	}
	(void) sigprocmask(SIG_SETMASK, &old, NULL);
	return status;
}
