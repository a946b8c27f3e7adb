/* probe: a static program run inside sandboxes by the functional tests.
 * With no arguments it prints what it sees as key=value lines; other modes
 * act (write output, fork daemons, fill /tmp) so tests can watch nsbox react.
 * Built with -static: the test root filesystem has no libc. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <time.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static void status_field(const char *key, const char *name)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	size_t n = strlen(name);
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, name, n) && line[n] == ':') {
			char *v = line + n + 1;
			v += strspn(v, " \t");
			v[strcspn(v, "\n")] = '\0';
			printf("%s=%s\n", key, v);
		}
	if (f)
		fclose(f);
}

static void file_line(const char *key, const char *path)
{
	FILE *f = fopen(path, "r");
	char buf[512] = "";
	if (f) {
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		buf[n] = '\0';
		fclose(f);
		for (char *p = buf; *p; p++)
			if (*p == '\n')
				*p = (p[1] ? ';' : '\0');
		/* squeeze runs of blanks so maps read "1000 1000 1" */
		char *w = buf;
		for (char *r = buf; *r; r++)
			if (!(*r == ' ' && (w == buf || w[-1] == ' ' || w[-1] == ';')))
				*w++ = *r;
		*w = '\0';
		printf("%s=%s\n", key, buf);
	} else {
		printf("%s=error:%s\n", key, strerror(errno));
	}
}

static void list_pids(void)
{
	DIR *d = opendir("/proc");
	printf("pids=");
	int first = 1;
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (e->d_name[0] >= '0' && e->d_name[0] <= '9') {
			printf("%s%s", first ? "" : ",", e->d_name);
			first = 0;
		}
	printf("\n");
	if (d)
		closedir(d);
}

static void list_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int self = d ? dirfd(d) : -1;
	printf("fds=");
	int first = 1;
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.' && atoi(e->d_name) != self) {
			printf("%s%s", first ? "" : ",", e->d_name);
			first = 0;
		}
	printf("\n");
	if (d)
		closedir(d);
}

static void list_ifaces(void)
{
	FILE *f = fopen("/proc/net/dev", "r");
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	char line[512];
	printf("ifaces=");
	int first = 1;
	for (int i = 0; f && fgets(line, sizeof(line), f); i++) {
		char *colon = strchr(line, ':');
		if (i < 2 || !colon)
			continue;
		*colon = '\0';
		char *name = line + strspn(line, " ");
		struct ifreq ifr = { 0 };
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
		int up = s >= 0 && ioctl(s, SIOCGIFFLAGS, &ifr) == 0 && (ifr.ifr_flags & IFF_UP);
		printf("%s%s:%s", first ? "" : ",", name, up ? "up" : "down");
		first = 0;
	}
	printf("\n");
	if (f)
		fclose(f);
	if (s >= 0)
		close(s);
}

static void try_create(const char *key, const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd >= 0) {
		printf("%s=ok\n", key);
		close(fd);
		unlink(path);
	} else {
		printf("%s=%s\n", key, strerror(errno));
	}
}

static void try_read(const char *key, const char *path)
{
	int fd = open(path, O_RDONLY);
	char c;
	if (fd < 0) {
		printf("%s=%s\n", key, strerror(errno));
		return;
	}
	ssize_t n = read(fd, &c, 1);
	printf("%s=%s\n", key, n > 0 ? "readable" : n == 0 ? "empty" : strerror(errno));
	close(fd);
}

static void try_write(const char *key, const char *path)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0) {
		printf("%s=%s\n", key, strerror(errno));
		return;
	}
	printf("%s=%s\n", key, write(fd, "0", 1) == 1 ? "ok" : strerror(errno));
	close(fd);
}

static int report(void)
{
	char host[256] = "", cwd[PATH_MAX] = "";
	gethostname(host, sizeof(host));
	printf("uid=%d\ngid=%d\n", (int) getuid(), (int) getgid());
	printf("euid=%d\n", (int) geteuid());
	file_line("uid_map", "/proc/self/uid_map");
	file_line("gid_map", "/proc/self/gid_map");
	status_field("cap_inh", "CapInh");
	status_field("cap_prm", "CapPrm");
	status_field("cap_eff", "CapEff");
	status_field("cap_bnd", "CapBnd");
	status_field("cap_amb", "CapAmb");
	status_field("no_new_privs", "NoNewPrivs");
	status_field("seccomp", "Seccomp");
	printf("hostname=%s\n", host);
	printf("pid=%d\n", (int) getpid());
	printf("session_leader=%d\n", getsid(0) == getpid());
	int tty = open("/dev/tty", O_RDWR);
	printf("controlling_tty=%s\n", tty >= 0 ? "yes" : "no");
	if (tty >= 0)
		close(tty);
	printf("cwd=%s\n", getcwd(cwd, sizeof(cwd)) ? cwd : "?");
	list_pids();
	list_fds();
	list_ifaces();
	try_create("root_write", "/probe-write-test");
	try_create("tmp_write", "/tmp/probe-write-test");
	try_create("dev_write", "/dev/probe-write-test");
	try_read("kcore", "/proc/kcore");
	try_read("keys", "/proc/keys");
	try_read("timer_list", "/proc/timer_list");
	try_write("proc_sys_write", "/proc/sys/kernel/hostname");
	try_read("sys", "/sys/kernel/uevent_seqnum");
	try_read("devnull", "/dev/null");
	try_read("urandom", "/dev/urandom");
	struct stat st;
	printf("ptmx=%s\n", stat("/dev/pts/ptmx", &st) == 0 ? "yes" : "no");
	printf("shm=%s\n", stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "yes" : "no");
	return 0;
}

/* Write `n` bytes of a recognisable pattern: line numbers, then 'x'. */
static int spew(long long n, int fd)
{
	char buf[65536];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (char) ('a' + i % 26);
	while (n > 0) {
		size_t k = n < (long long) sizeof(buf) ? (size_t) n : sizeof(buf);
		ssize_t w = write(fd, buf, k);
		if (w <= 0)
			return 1;
		n -= w;
	}
	return 0;
}

/* Fork a grandchild that ignores SIGTERM and sleeps, then exit or wait. */
static int daemonize(int wait_after)
{
	pid_t p = fork();
	if (p == 0) {
		if (fork() == 0) {
			signal(SIGTERM, SIG_IGN);
			setsid();
			printf("daemon=%d\n", (int) getpid());
			fflush(stdout);
			for (;;)
				pause();
		}
		_exit(0);
	}
	while (wait_after)
		pause();
	sleep(1);
	return 0;
}

static long long fill(const char *path)
{
	signal(SIGXFSZ, SIG_IGN);   /* see EFBIG instead of dying at RLIMIT_FSIZE */
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return -1;
	char buf[65536];
	memset(buf, 'z', sizeof(buf));
	long long total = 0;
	for (;;) {
		ssize_t w = write(fd, buf, sizeof(buf));
		if (w <= 0)
			break;
		total += w;
	}
	printf("fill_errno=%s\n", strerror(errno));
	close(fd);
	unlink(path);
	return total;
}

/* Allocate and touch `want` bytes in 1 MiB steps. */
static int hog(long long want)
{
	long long got = 0;
	while (got < want) {
		char *p = malloc(1 << 20);
		if (!p) {
			printf("hog_failed_at=%lld\n", got);
			return 3;
		}
		memset(p, 1, 1 << 20);
		got += 1 << 20;
	}
	printf("hog_reached=%lld\n", got);
	return 0;
}

/* Fork sleeping children until fork fails; report how many. */
static int forkbomb(int max)
{
	int n = 0;
	for (; n < max; n++) {
		pid_t p = fork();
		if (p < 0) {
			printf("forks=%d\nfork_errno=%s\n", n, strerror(errno));
			return 0;
		}
		if (p == 0) {
			pause();
			_exit(0);
		}
	}
	printf("forks=%d\nfork_errno=none\n", n);
	return 0;
}

/* Spin for `seconds` of wall-clock time (spin) or of CPU time (burn, which
 * takes longer when the CPU is shared but always uses that much). */
static int spin(double seconds, clockid_t clock)
{
	struct timespec a, b;
	clock_gettime(clock, &a);
	volatile unsigned long x = 0;
	do {
		for (int i = 0; i < 100000; i++)
			x += (unsigned long) i;
		clock_gettime(clock, &b);
	} while ((double) (b.tv_sec - a.tv_sec) + (double) (b.tv_nsec - a.tv_nsec) / 1e9 < seconds);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2)
		return report();
	const char *mode = argv[1];
	if (!strcmp(mode, "exit") && argc > 2)
		return atoi(argv[2]);
	if (!strcmp(mode, "kill") && argc > 2) {
		signal(atoi(argv[2]), SIG_DFL);
		kill(getpid(), atoi(argv[2]));
		return 99;
	}
	if (!strcmp(mode, "spew") && argc > 2)
		return spew(atoll(argv[2]), argc > 3 ? atoi(argv[3]) : 1);
	if (!strcmp(mode, "daemon"))
		return daemonize(argc > 2 && !strcmp(argv[2], "wait"));
	if (!strcmp(mode, "ignore-term")) {
		signal(SIGTERM, SIG_IGN);
		for (;;)
			pause();
	}
	if (!strcmp(mode, "fill") && argc > 2) {
		printf("filled=%lld\n", fill(argv[2]));
		return 0;
	}
	if (!strcmp(mode, "hog") && argc > 2)
		return hog(atoll(argv[2]) << 20);
	if (!strcmp(mode, "forkbomb"))
		return forkbomb(argc > 2 ? atoi(argv[2]) : 10000);
	if (!strcmp(mode, "spin") && argc > 2)
		return spin(atof(argv[2]), CLOCK_MONOTONIC);
	if (!strcmp(mode, "burn") && argc > 2)
		return spin(atof(argv[2]), CLOCK_PROCESS_CPUTIME_ID);
	if (!strcmp(mode, "cpus")) {
		cpu_set_t set;
		CPU_ZERO(&set);
		sched_getaffinity(0, sizeof(set), &set);
		printf("cpus=%d\n", CPU_COUNT(&set));
		return 0;
	}
	if (!strcmp(mode, "deny-loop") && argc > 2) {
		/* time N calls of keyctl, which the default profile refuses */
		int n = atoi(argv[2]);
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (int i = 0; i < n; i++)
			syscall(SYS_keyctl, 0, -3, 0);
		clock_gettime(CLOCK_MONOTONIC, &b);
		printf("ns_per_call=%lld\n", ((long long) (b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec)) / (n ? n : 1));
		return 0;
	}
	if (!strcmp(mode, "runas") && argc > 4) {
		/* probe runas UID GID CMD...: drop to UID:GID (the cgroup v2 guest
		 * has no setpriv) */
		gid_t g = (gid_t) atoi(argv[3]);
		if (setgroups(1, &g) < 0 || setgid(g) < 0 || setuid((uid_t) atoi(argv[2])) < 0) {
			perror("probe runas");
			return 125;
		}
		execvp(argv[4], argv + 4);
		perror("probe runas: exec");
		return 127;
	}
	if (!strcmp(mode, "env")) {
		extern char **environ;
		for (char **e = environ; *e; e++)
			printf("%s\n", *e);
		return 0;
	}
	if (!strcmp(mode, "exists") && argc > 2) {
		struct stat st;
		printf("exists=%s\n", lstat(argv[2], &st) == 0 ? "yes" : strerror(errno));
		return 0;
	}
	if (!strcmp(mode, "read") && argc > 2) {
		try_read("read", argv[2]);
		return 0;
	}
	if (!strcmp(mode, "write") && argc > 2) {
		try_create("write", argv[2]);
		return 0;
	}
	fprintf(stderr, "probe: unknown mode '%s'\n", mode);
	return 2;
}
