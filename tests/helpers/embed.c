/* embed: use libnsbox as an embedding program would, through the public
 * header only. Usage: embed ROOTFS, or embed ROOTFS netuser URL (a
 * --network user run that fetches URL); prints what it checked, exits
 * non-zero on the first mismatch. */
#include <dirent.h>
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
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
	EXPECT(nsbox_config_set(NULL, "x", "y", NULL, NULL) == -EINVAL, "config_set rejects NULL");

	/* No child of ours is left to reap. */
	EXPECT(waitpid(-1, NULL, WNOHANG | __WALL) < 0 && errno == ECHILD, "no child left behind");
	printf("%d failed\n", failures);
	return failures ? 1 : 0;
}
