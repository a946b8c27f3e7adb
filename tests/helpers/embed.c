/* embed: use libnsbox as an embedding program would, through the public
 * header only. Usage: embed ROOTFS, or embed ROOTFS netuser URL (a
 * --network user run that fetches URL); prints what it checked, exits
 * non-zero on the first mismatch. */
#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nsbox.h"

static int failures;
static const char *net_mode;   /* network.mode for run(), or NULL */

#define EXPECT(cond, ...)                                   \
	do {                                                \
		if (cond) {                                 \
			printf("ok - " __VA_ARGS__);        \
		} else {                                    \
			printf("not ok - " __VA_ARGS__);    \
			failures++;                         \
		}                                           \
		printf("\n");                               \
	} while (0)

static nsbox_result *run(const char *rootfs, int argc, const char **argv, const char *timeout, const char *allow)
{
	nsbox_config *cfg = NULL;
	nsbox_error *e = NULL;
	nsbox_sandbox *sb = NULL;
	nsbox_result *r = NULL;
	if (nsbox_config_new(&cfg, &e) < 0 || nsbox_config_set(cfg, "rootfs", rootfs, NULL, &e) < 0 ||
	    nsbox_config_set(cfg, "limits.output", "64", NULL, &e) < 0 ||
	    (timeout && nsbox_config_set(cfg, "limits.timeout", timeout, NULL, &e) < 0) ||
	    (allow && nsbox_config_set(cfg, "network.allow", allow, NULL, &e) < 0) ||
	    (net_mode && nsbox_config_set(cfg, "network.mode", net_mode, NULL, &e) < 0) ||
	    nsbox_config_set_command(cfg, argc, argv, &e) < 0) {
		printf("not ok - configure: %s\n", nsbox_error_message(e));
		exit(1);
	}
	nsbox_spawn_options o = { .version = NSBOX_SPAWN_OPTIONS_VERSION, .flags = NSBOX_SPAWN_CAPTURE,
	                          .config = cfg, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1,
	                          .signal_fd = -1 };
	if (nsbox_spawn(&o, &sb, &e) < 0 || nsbox_sandbox_wait(sb, &r, &e) < 0) {
		printf("not ok - run: %s\n", nsbox_error_message(e));
		exit(1);
	}
	/* The configuration may be freed while the sandbox lives: it was copied. */
	nsbox_config_free(cfg);
	nsbox_sandbox_free(sb);
	return r;
}

/* The embedding program's open fds. */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	for (struct dirent *e; d && (e = readdir(d));)
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

/* --network user: the helper is our child too; once the sandbox is freed,
 * neither it nor any fd of it (pidfd, log, pipes) may be left. */
static int netuser(const char *rootfs, const char *url)
{
	int fds = count_fds();
	net_mode = "user";
	const char *a[] = { "wget", "-q", "-O-", url };
	nsbox_result *r = run(rootfs, 4, a, "20s", NULL);
	size_t len = 0;
	const char *out = nsbox_result_output(r, 1, &len);
	EXPECT(nsbox_result_exit_code(r) == 0 && out && len > 0, "--network user fetched %s (%.*s)", url,
	       (int) (out && len && out[len - 1] == '\n' ? len - 1 : len), out ? out : "");
	nsbox_result_free(r);
	EXPECT(count_fds() == fds, "no fd of the helper is left (%d before, %d after)", fds, count_fds());
	EXPECT(waitpid(-1, NULL, WNOHANG | __WALL) < 0 && errno == ECHILD, "the helper was reaped");
	printf("%d failed\n", failures);
	return failures ? 1 : 0;
}

/* ---- spawn options version 2 and threads ---- */

/* The output callback answers the payload's first line on its stdin, and
 * tells a killer thread (through a pipe) when it saw "started". */
struct stream_ctx {
	int answer_fd, tell_fd;
	char seen[256];
	size_t n;
};

static void on_output(void *userdata, int stream, const char *data, size_t len)
{
	struct stream_ctx *c = userdata;
	if (stream != 1)
		return;
	size_t k = len < sizeof(c->seen) - 1 - c->n ? len : sizeof(c->seen) - 1 - c->n;
	memcpy(c->seen + c->n, data, k);
	c->n += k;
	if (c->answer_fd >= 0 && strstr(c->seen, "first\n")) {
		(void) !write(c->answer_fd, "go\n", 3);
		c->answer_fd = -1;
	}
	if (c->tell_fd >= 0 && strstr(c->seen, "started\n")) {
		(void) !write(c->tell_fd, "k", 1);
		c->tell_fd = -1;
	}
}

static nsbox_sandbox *spawn2(const char *rootfs, const char *script, int stdin_fd, struct stream_ctx *ctx)
{
	nsbox_config *cfg = NULL;
	nsbox_sandbox *sb = NULL;
	nsbox_error *e = NULL;
	const char *av[] = { "sh", "-c", script };
	if (nsbox_config_new(&cfg, &e) < 0 || nsbox_config_set(cfg, "rootfs", rootfs, NULL, &e) < 0 ||
	    nsbox_config_set(cfg, "limits.timeout", "30s", NULL, &e) < 0 ||
	    nsbox_config_set_command(cfg, 3, av, &e) < 0) {
		printf("not ok - configure: %s\n", nsbox_error_message(e));
		exit(1);
	}
	nsbox_spawn_options o = { .version = NSBOX_SPAWN_OPTIONS_VERSION, .flags = NSBOX_SPAWN_CAPTURE,
	                          .config = cfg, .stdin_fd = stdin_fd, .stdout_fd = -1, .stderr_fd = -1,
	                          .signal_fd = -1, .stats_fd = -1, .on_output = on_output, .output_userdata = ctx };
	if (nsbox_spawn(&o, &sb, &e) < 0) {
		printf("not ok - spawn: %s\n", nsbox_error_message(e));
		exit(1);
	}
	nsbox_config_free(cfg);
	return sb;
}

struct killer {
	nsbox_sandbox *sb;
	int wait_fd;
};

static void *kill_when_told(void *arg)
{
	struct killer *k = arg;
	char c;
	if (read(k->wait_fd, &c, 1) == 1)
		(void) nsbox_sandbox_kill(k->sb, SIGKILL);
	return NULL;
}

struct runner {
	const char *rootfs;
	int ok;
};

static void *run_some(void *arg)
{
	struct runner *w = arg;
	for (int i = 0; i < 4; i++) {
		const char *a[] = { "echo", "t" };
		nsbox_result *r = run(w->rootfs, 2, a, "30s", NULL);
		size_t len = 0;
		const char *out = nsbox_result_output(r, 1, &len);
		w->ok += nsbox_result_status(r) == NSBOX_STATUS_EXITED && out && len == 2 && !memcmp(out, "t\n", 2);
		nsbox_result_free(r);
	}
	return NULL;
}

static void threads_and_streams(const char *rootfs)
{
	/* Output reaches the callback while the payload runs: it waits for an
	 * answer the callback gives after seeing the first line. */
	int in[2], tell[2];
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(tell, O_CLOEXEC) < 0)
		exit(1);
	struct stream_ctx ctx = { .answer_fd = in[1], .tell_fd = -1 };
	nsbox_sandbox *sb = spawn2(rootfs, "echo first; read x; echo got $x", in[0], &ctx);
	nsbox_result *r = NULL;
	EXPECT(nsbox_sandbox_wait(sb, &r, NULL) == 0, "wait with an output callback");
	size_t len = 0;
	const char *out = nsbox_result_output(r, 1, &len);
	EXPECT(nsbox_result_status(r) == NSBOX_STATUS_EXITED && out && len == 13 && !memcmp(out, "first\ngot go\n", 13),
	       "the callback saw output during the run (status %s)", nsbox_status_name(nsbox_result_status(r)));
	EXPECT(ctx.n == 13 && !memcmp(ctx.seen, "first\ngot go\n", 13), "...and all of it");
	nsbox_result_free(r);
	nsbox_sandbox_free(sb);
	close(in[0]);
	close(in[1]);

	/* Another thread kills the sandbox while this one waits. */
	struct stream_ctx kctx = { .answer_fd = -1, .tell_fd = tell[1] };
	sb = spawn2(rootfs, "echo started; sleep 1000", -1, &kctx);
	struct killer k = { sb, tell[0] };
	pthread_t t;
	pthread_create(&t, NULL, kill_when_told, &k);
	r = NULL;
	EXPECT(nsbox_sandbox_wait(sb, &r, NULL) == 0, "wait while another thread kills");
	pthread_join(t, NULL);
	EXPECT(r && nsbox_result_status(r) == NSBOX_STATUS_SIGNALED && nsbox_result_signal(r) == SIGKILL,
	       "killed from another thread (status %s)", r ? nsbox_status_name(nsbox_result_status(r)) : "none");
	EXPECT(nsbox_sandbox_kill(sb, SIGKILL) == -ESRCH, "kill after the end: ESRCH");
	nsbox_result_free(r);
	nsbox_sandbox_free(sb);
	close(tell[0]);
	close(tell[1]);

	/* Sandboxes spawned from several threads at once (the child of a
	 * threaded program must not wait for threads it does not have). */
	struct runner w[4];
	pthread_t ts[4];
	for (int i = 0; i < 4; i++) {
		w[i] = (struct runner){ rootfs, 0 };
		pthread_create(&ts[i], NULL, run_some, &w[i]);
	}
	int ok = 0;
	for (int i = 0; i < 4; i++) {
		pthread_join(ts[i], NULL);
		ok += w[i].ok;
	}
	EXPECT(ok == 16, "16 runs from 4 threads at once all ran (%d)", ok);
}

int main(int argc, char **argv)
{
	if (argc != 2 && !(argc == 4 && !strcmp(argv[2], "netuser"))) {
		fprintf(stderr, "usage: embed ROOTFS [netuser URL]\n");
		return 2;
	}
	/* An embedding program's own SIGCHLD handling must not see the sandbox. */
	signal(SIGCHLD, SIG_IGN);
	if (argc == 4)
		return netuser(argv[1], argv[3]);

	threads_and_streams(argv[1]);

	const char *a1[] = { "sh", "-c", "echo out; echo err >&2; exit 3" };
	nsbox_result *r = run(argv[1], 3, a1, NULL, NULL);
	EXPECT(nsbox_result_status(r) == NSBOX_STATUS_EXITED, "status exited (%s)", nsbox_status_name(nsbox_result_status(r)));
	EXPECT(nsbox_result_exit_code(r) == 3, "exit code 3 (%d)", nsbox_result_exit_code(r));
	size_t len = 0;
	const char *out = nsbox_result_output(r, 1, &len);
	EXPECT(out && len == 4 && !memcmp(out, "out\n", 4), "stdout captured");
	out = nsbox_result_output(r, 2, &len);
	EXPECT(out && len == 4 && !memcmp(out, "err\n", 4), "stderr captured");
	char *json = NULL;
	EXPECT(nsbox_result_to_json(r, &json, NULL) == 0 && strstr(json, "\"exit_code\":3"), "JSON record");
	free(json);
	nsbox_result_free(r);

	const char *a2[] = { "probe", "spew", "1000" };
	r = run(argv[1], 3, a2, NULL, NULL);
	EXPECT(nsbox_result_output_bytes(r, 1) == 1000, "all bytes counted");
	EXPECT(nsbox_result_output_truncated(r, 1), "truncated at the cap");
	nsbox_result_free(r);

	const char *a3[] = { "sleep", "30" };
	r = run(argv[1], 2, a3, "200ms", NULL);
	EXPECT(nsbox_result_status(r) == NSBOX_STATUS_TIMED_OUT, "timeout");
	EXPECT(nsbox_result_exit_status(r) == 124, "timeout exit status 124");
	nsbox_result_free(r);

	const char *a4[] = { "no-such-program" };
	r = run(argv[1], 1, a4, NULL, NULL);
	EXPECT(nsbox_result_exit_status(r) == 127, "not found is 127");
	const nsbox_error *why = nsbox_result_error(r);
	EXPECT(why && !strcmp(nsbox_error_step(why), "exec") && nsbox_error_errno(why) == ENOENT,
	       "exec error carries step and errno");
	nsbox_result_free(r);

	/* The allowlist proxy lives in the caller's process: when the sandbox
	 * is killed with a tunnel still open to a server that never closes
	 * (a socket of ours that never accepts: the kernel completes the
	 * connection from its backlog), every socket, timer and epoll set of
	 * the proxy is gone once the sandbox is waited for and freed. */
	int fds = count_fds();
	int srv = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	if (srv < 0 || bind(srv, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(srv, 8) < 0 ||
	    getsockname(srv, (struct sockaddr *) &sa, &sl) < 0) {
		printf("not ok - a test server: %s\n", strerror(errno));
		return 1;
	}
	char allow[64], script[512];
	/* The server is on the loopback: allowed as that very address. */
	snprintf(allow, sizeof(allow), "127.0.0.1:%u", (unsigned) ntohs(sa.sin_port));
	snprintf(script, sizeof(script),
	         "(printf 'CONNECT %s HTTP/1.1\\r\\n\\r\\n'; sleep 30) | nc 127.0.0.1 3128 & "
	         "printf 'GET http://denied.invalid/ HTTP/1.1\\r\\nHost: denied.invalid\\r\\n\\r\\n' | nc 127.0.0.1 3128; sleep 30", allow);
	const char *a5[] = { "sh", "-c", script };
	r = run(argv[1], 3, a5, "2s", allow);
	EXPECT(nsbox_result_status(r) == NSBOX_STATUS_TIMED_OUT, "allowlist run timed out");
	EXPECT(nsbox_result_to_json(r, &json, NULL) == 0 &&
	       strstr(json, "\"denied\":[{\"destination\":\"denied.invalid:80\",\"count\":1,\"reason\":\"not allowed\"}]") &&
	       strstr(json, "\"allowed\":[{\"destination\":\"127.0.0.1:"),
	       "the record counts the tunnel and the refusal");
	free(json);
	nsbox_result_free(r);
	close(srv);
	EXPECT(count_fds() == fds, "no fd of the proxy is left (%d before, %d after)", fds, count_fds());

	/* Arguments are checked, not asserted. */
	nsbox_sandbox *sb = NULL;
	nsbox_error *e = NULL;
	EXPECT(nsbox_spawn(NULL, &sb, &e) == -EINVAL && e, "spawn rejects NULL options");
	nsbox_error_free(e);
	nsbox_spawn_options bad = { .version = 99 };
	EXPECT(nsbox_spawn(&bad, &sb, NULL) == -EINVAL, "spawn rejects an unknown options version");
	{
		/* A caller built against the version 1 header: its struct ends
		 * at stats_fd, and the library reads nothing beyond. */
		struct { uint32_t version, flags; const nsbox_config *config; int stdin_fd, stdout_fd, stderr_fd,
		         signal_fd; uint64_t stats_interval_ms; int stats_fd; } *v1 = malloc(sizeof(*v1));
		nsbox_config *cfg = NULL;
		const char *av[] = { "true" };
		nsbox_result *res = NULL;
		(void) nsbox_config_new(&cfg, NULL);
		(void) nsbox_config_set(cfg, "rootfs", argv[1], NULL, NULL);
		(void) nsbox_config_set_command(cfg, 1, av, NULL);
		*v1 = (typeof(*v1)){ 1, NSBOX_SPAWN_CAPTURE, cfg, -1, -1, -1, -1, 0, -1 };
		int ok = nsbox_spawn((const nsbox_spawn_options *) v1, &sb, NULL) == 0 &&
		         nsbox_sandbox_wait(sb, &res, NULL) == 0 && nsbox_result_exit_code(res) == 0;
		EXPECT(ok, "spawn options version 1 still work");
		nsbox_result_free(res);
		nsbox_sandbox_free(sb);
		nsbox_config_free(cfg);
		free(v1);
		sb = NULL;
	}
	EXPECT(nsbox_config_set(NULL, "x", "y", NULL, NULL) == -EINVAL, "config_set rejects NULL");

	/* No child of ours is left to reap. */
	EXPECT(waitpid(-1, NULL, WNOHANG | __WALL) < 0 && errno == ECHILD, "no child left behind");
	printf("%d failed\n", failures);
	return failures ? 1 : 0;
}
