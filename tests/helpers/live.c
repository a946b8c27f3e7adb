/* live: long-lived sandboxes (NSBOX_SPAWN_KEEP, nsbox_sandbox_exec) through
 * the public header, as an embedding program uses them.
 * Usage: live ROOTFS          checks (prints ok / not ok lines; exit 1 on a mismatch)
 *        live ROOTFS bench N  p50 and p95 of N execs of /bin/true (make bench) */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nsbox.h"

static int failures;

/* cond is evaluated once: it may be the call under test. */
#define EXPECT(cond, ...)                                   \
	do {                                                \
		bool ok_ = (cond);                          \
		printf(ok_ ? "ok - " : "not ok - ");        \
		failures += !ok_;                           \
		printf(__VA_ARGS__);                        \
		printf("\n");                               \
	} while (0)

static nsbox_sandbox *start(const char *rootfs, uint32_t flags)
{
	nsbox_config *cfg = NULL;
	nsbox_error *e = NULL;
	static const char *const cmd[] = { "true", NULL };
	if (nsbox_config_new(&cfg, &e) < 0 || nsbox_config_set(cfg, "rootfs", rootfs, "test", &e) < 0 ||
	    nsbox_config_set(cfg, "limits.pids", "64", "test", &e) < 0 || nsbox_config_set_command(cfg, 1, cmd, &e) < 0) {
		printf("# config: %s\n", nsbox_error_message(e));
		exit(1);
	}
	nsbox_spawn_options o = { .version = NSBOX_SPAWN_OPTIONS_VERSION, .flags = flags, .config = cfg,
	                          .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1, .signal_fd = -1, .stats_fd = -1 };
	nsbox_sandbox *sb = NULL;
	if (nsbox_spawn(&o, &sb, &e) < 0) {
		printf("# spawn: %s\n", nsbox_error_message(e));
		exit(1);
	}
	nsbox_config_free(cfg);
	return sb;
}

/* One exec, waited for; NULL (and *err_out the errno) when it could not run. */
static nsbox_result *run(nsbox_sandbox *sb, const char *const *argv, int fd3, int *err_out)
{
	nsbox_exec_options x = { .version = NSBOX_EXEC_OPTIONS_VERSION, .flags = NSBOX_SPAWN_CAPTURE, .argv = argv,
	                         .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1, .fd3 = fd3, .signal_fd = -1 };
	nsbox_sandbox *ex = NULL;
	nsbox_result *r = NULL;
	nsbox_error *e = NULL;
	if (nsbox_sandbox_exec(sb, &x, &ex, &e) < 0 || nsbox_sandbox_wait(ex, &r, &e) < 0) {
		if (err_out)
			*err_out = nsbox_error_errno(e);
		nsbox_error_free(e);
		r = NULL;
	}
	nsbox_sandbox_free(ex);
	return r;
}

static bool out_is(const nsbox_result *r, const char *want)
{
	size_t len = 0;
	const char *o = r ? nsbox_result_output(r, 1, &len) : NULL;
	return o && len == strlen(want) && !memcmp(o, want, len);
}

typedef struct {
	nsbox_sandbox *sb;
	int i;
	bool ok;
} job;

static void *worker(void *arg)
{
	job *j = arg;
	char n[16], want[24];
	snprintf(n, sizeof(n), "%d", j->i);
	snprintf(want, sizeof(want), "%d\n", j->i);
	const char *argv[] = { "echo", n, NULL };
	nsbox_result *r = run(j->sb, argv, -1, NULL);
	j->ok = out_is(r, want);
	nsbox_result_free(r);
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *) a, y = *(const double *) b;
	return x < y ? -1 : x > y;
}

static int bench(const char *rootfs, int n)
{
	nsbox_sandbox *sb = start(rootfs, NSBOX_SPAWN_KEEP);
	double *t = calloc((size_t) n, sizeof(double));
	const char *const argv[] = { "/bin/true", NULL };
	for (int i = 0; i < n; i++) {
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		nsbox_exec_options x = { .version = NSBOX_EXEC_OPTIONS_VERSION, .argv = argv, .stdin_fd = -1,
		                         .stdout_fd = -1, .stderr_fd = -1, .fd3 = -1, .signal_fd = -1 };
		nsbox_sandbox *ex = NULL;
		nsbox_result *r = NULL;
		nsbox_error *e = NULL;
		if (nsbox_sandbox_exec(sb, &x, &ex, &e) < 0 || nsbox_sandbox_wait(ex, &r, &e) < 0) {
			printf("exec: %s\n", nsbox_error_message(e));
			return 1;
		}
		nsbox_result_free(r);
		nsbox_sandbox_free(ex);
		clock_gettime(CLOCK_MONOTONIC, &b);
		t[i] = (double) (b.tv_sec - a.tv_sec) * 1e3 + (double) (b.tv_nsec - a.tv_nsec) / 1e6;
	}
	qsort(t, (size_t) n, sizeof(double), cmp);
	printf("library exec /bin/true            p50 %7.2f ms  p95 %7.2f ms  (n=%d)\n", t[n / 2], t[n * 95 / 100], n);
	free(t);
	nsbox_sandbox_free(sb);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	if (argc == 4 && !strcmp(argv[2], "bench"))
		return bench(argv[1], atoi(argv[3]));

	/* Not a long-lived sandbox: exec is refused. */
	nsbox_sandbox *plain = start(argv[1], 0);
	const char *const echo[] = { "echo", "hi", NULL };
	int err = 0;
	nsbox_result *r = run(plain, echo, -1, &err);
	EXPECT(!r && err == EINVAL, "exec in a sandbox spawned without NSBOX_SPAWN_KEEP is refused (EINVAL)");
	EXPECT(nsbox_sandbox_id(plain) == NULL, "...and it has no long-lived id");
	nsbox_sandbox_free(plain);

	nsbox_sandbox *sb = start(argv[1], NSBOX_SPAWN_KEEP);
	const char *id = nsbox_sandbox_id(sb);
	EXPECT(id && strlen(id) == 32 && strspn(id, "0123456789abcdef") == 32, "a long-lived sandbox has a 32-hex id");
	r = run(sb, echo, -1, NULL);
	EXPECT(out_is(r, "hi\n"), "an exec's output is captured");
	EXPECT(r && nsbox_result_exit_status(r) == 0, "...and its status is the command's");
	nsbox_result_free(r);

	/* fd 3: what a code context's channel travels through. */
	int p[2];
	if (pipe(p) < 0)
		return 1;
	const char *const to3[] = { "sh", "-c", "echo via3 >&3; ls /proc/self/fd", NULL };
	r = run(sb, to3, p[1], NULL);
	close(p[1]);
	char buf[64] = "";
	ssize_t n = read(p[0], buf, sizeof(buf) - 1);
	close(p[0]);
	EXPECT(n == 5 && !strncmp(buf, "via3\n", 5), "fd3 reaches the command as its fd 3");
	EXPECT(r && nsbox_result_exit_status(r) == 0, "...and nothing else is open in it");
	nsbox_result_free(r);

	/* An environment of the exec's own, and PATH looked up in it. */
	const char *const env[] = { "FOO=bar", "PATH=/nowhere:/bin:/usr/bin", NULL };
	const char *const showenv[] = { "sh", "-c", "echo $FOO", NULL };
	nsbox_exec_options xe = { .version = NSBOX_EXEC_OPTIONS_VERSION, .flags = NSBOX_SPAWN_CAPTURE, .argv = showenv,
	                          .envp = env, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1, .fd3 = -1,
	                          .signal_fd = -1 };
	nsbox_sandbox *exe = NULL;
	nsbox_error *ee = NULL;
	r = NULL;
	if (nsbox_sandbox_exec(sb, &xe, &exe, &ee) == 0)
		(void) nsbox_sandbox_wait(exe, &r, &ee);
	EXPECT(out_is(r, "bar\n"), "an exec's own environment replaces the sandbox's, PATH included");
	nsbox_result_free(r);
	nsbox_sandbox_free(exe);
	nsbox_error_free(ee);
	/* NSBOX_EXEC_ENV_ADD: the sandbox's environment with these set. */
	const char *const add[] = { "FOO=added", "HOME=/tmp", NULL };
	const char *const penv[] = { "env", NULL };
	xe.argv = penv;
	xe.envp = add;
	xe.flags = NSBOX_SPAWN_CAPTURE | NSBOX_EXEC_ENV_ADD;
	exe = NULL;
	ee = NULL;
	r = NULL;
	if (nsbox_sandbox_exec(sb, &xe, &exe, &ee) == 0)
		(void) nsbox_sandbox_wait(exe, &r, &ee);
	size_t elen = 0;
	const char *eo = r ? nsbox_result_output(r, 1, &elen) : NULL;
	char *envs = eo ? strndup(eo, elen) : NULL;
	EXPECT(envs && strstr(envs, "FOO=added\n") && strstr(envs, "HOME=/tmp\n") && !strstr(envs, "HOME=/\n") &&
	           strstr(envs, "PATH=/usr/local/sbin:"),
	       "NSBOX_EXEC_ENV_ADD sets variables in the sandbox's environment, replacing the same names");
	free(envs);
	nsbox_result_free(r);
	nsbox_sandbox_free(exe);
	nsbox_error_free(ee);
	const char *const noname[] = { "=x", NULL };
	xe.envp = noname;
	ee = NULL;
	EXPECT(nsbox_sandbox_exec(sb, &xe, &exe, &ee) == -EINVAL, "...and refuses an entry without a name (EINVAL)");
	nsbox_error_free(ee);
	xe.flags = NSBOX_SPAWN_CAPTURE;
	/* Freed without a wait: killed, and nothing of it is left. */
	const char *const longsleep[] = { "sleep", "600", NULL };
	xe.argv = longsleep;
	xe.envp = NULL;
	exe = NULL;
	ee = NULL;
	EXPECT(nsbox_sandbox_exec(sb, &xe, &exe, &ee) == 0, "an exec starts");
	int pidfd = exe ? dup(nsbox_sandbox_pidfd(exe)) : -1;
	nsbox_sandbox_free(exe);
	struct pollfd pp = { .fd = pidfd, .events = POLLIN };
	EXPECT(pidfd >= 0 && poll(&pp, 1, 0) == 1, "freeing an exec without waiting kills it and all it started");
	if (pidfd >= 0)
		close(pidfd);
	nsbox_error_free(ee);

	/* Several threads at once. */
	job jobs[8];
	pthread_t th[8];
	for (int i = 0; i < 8; i++) {
		jobs[i] = (job){ sb, i, false };
		pthread_create(&th[i], NULL, worker, &jobs[i]);
	}
	bool all = true;
	for (int i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		all &= jobs[i].ok;
	}
	EXPECT(all, "8 threads exec at once, each gets its own command's output");

	/* Kill one exec: it is signaled, the sandbox lives on. */
	const char *const sleeper[] = { "sleep", "60", NULL };
	nsbox_exec_options x = { .version = NSBOX_EXEC_OPTIONS_VERSION, .argv = sleeper, .stdin_fd = -1,
	                         .stdout_fd = -1, .stderr_fd = -1, .fd3 = -1, .signal_fd = -1 };
	nsbox_sandbox *ex = NULL;
	nsbox_error *e = NULL;
	r = NULL;
	if (nsbox_sandbox_exec(sb, &x, &ex, &e) == 0) {
		EXPECT(nsbox_sandbox_kill(ex, SIGTERM) == 0, "an exec can be signalled");
		(void) nsbox_sandbox_wait(ex, &r, &e);
	}
	EXPECT(r && nsbox_result_signal(r) == SIGTERM, "...and its record says so (signal %d)", r ? nsbox_result_signal(r) : -1);
	nsbox_result_free(r);
	nsbox_sandbox_free(ex);
	r = run(sb, echo, -1, NULL);
	EXPECT(out_is(r, "hi\n"), "the sandbox serves after a killed exec");
	nsbox_result_free(r);

	/* A version the library does not know, and a relative directory. */
	nsbox_exec_options bad = x;
	bad.version = 99;
	EXPECT(nsbox_sandbox_exec(sb, &bad, &ex, &e) == -EINVAL, "an unknown options version is refused");
	nsbox_error_free(e);
	e = NULL;
	bad = x;
	bad.workdir = "tmp";
	EXPECT(nsbox_sandbox_exec(sb, &bad, &ex, &e) == -EINVAL, "a relative working directory is refused");
	nsbox_error_free(e);
	e = NULL;

	/* The sandbox killed: exec says it has ended. */
	(void) nsbox_sandbox_kill(sb, SIGKILL);
	usleep(100 * 1000);
	err = 0;
	r = run(sb, echo, -1, &err);
	EXPECT(!r && err == ESRCH, "exec in a sandbox that ended: ESRCH (%d)", err);
	nsbox_sandbox_free(sb);
	return failures ? 1 : 0;
}
