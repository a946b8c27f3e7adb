/* pool: nsbox_pool through the public header, as an embedding program uses
 * it. Usage: pool ROOTFS (a busybox root filesystem). The payload is a shell
 * that reads its request from stdin and runs it. Prints what it checked,
 * exits non-zero on a mismatch. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nsbox.h"

static int failures;

#define EXPECT(cond, ...)                                   \
	do {                                                \
		printf((cond) ? "ok - " : "not ok - ");     \
		failures += !(cond);                        \
		printf(__VA_ARGS__);                        \
		printf("\n");                               \
	} while (0)

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static void wait_ready(nsbox_pool *p, uint32_t n)
{
	nsbox_pool_cost c;
	for (int i = 0; i < 6000 && nsbox_pool_cost_get(p, &c) == 0 && c.ready < n; i++)
		sleep_ms(10);
}

/* One request; the result (owned by the caller), or NULL. */
static nsbox_result *run(nsbox_pool *p, const char *req)
{
	nsbox_error *e = NULL;
	nsbox_sandbox *sb = NULL;
	nsbox_result *r = NULL;
	if (nsbox_pool_take(p, req, strlen(req), &sb, &e) < 0 || nsbox_sandbox_wait(sb, &r, &e) < 0) {
		printf("# take/wait: %s\n", nsbox_error_message(e));
		nsbox_error_free(e);
	}
	nsbox_sandbox_free(sb);
	return r;
}

static bool output_is(const nsbox_result *r, const char *want)
{
	size_t len = 0;
	const char *out = r ? nsbox_result_output(r, 1, &len) : NULL;
	return out && len == strlen(want) && memcmp(out, want, len) == 0;
}

/* Our children: the pool's sandboxes and their janitors. */
static int children(void)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int) getpid());
	DIR *d = opendir(path);
	int n = 0;
	struct dirent *t;
	while (d && (t = readdir(d))) {
		if (t->d_name[0] == '.')
			continue;
		char f[384], buf[4096];
		snprintf(f, sizeof(f), "%s/%s/children", path, t->d_name);
		FILE *fp = fopen(f, "re");
		if (fp && fgets(buf, sizeof(buf), fp))
			for (char *s = strtok(buf, " \n"); s; s = strtok(NULL, " \n"))
				n++;
		if (fp)
			fclose(fp);
	}
	if (d)
		closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: pool ROOTFS\n");
		return 2;
	}
	const char *cmd[] = { "/bin/sh", "-c", "req=$(cat); eval \"$req\"" };
	nsbox_config *cfg = NULL;
	nsbox_error *e = NULL;
	if (nsbox_config_new(&cfg, &e) < 0 || nsbox_config_set(cfg, "rootfs", argv[1], NULL, &e) < 0 ||
	    nsbox_config_set(cfg, "limits.timeout", "1s", NULL, &e) < 0 ||
	    nsbox_config_set_command(cfg, 3, cmd, &e) < 0 ||
	    /* below directories that setup makes (as the pool's hooks are) */
	    nsbox_config_add_file(cfg, "/dev/shm/a/b/hello", "hi\n", 3, 0444, &e) < 0) {
		printf("not ok - configure: %s\n", nsbox_error_message(e));
		return 1;
	}
	nsbox_pool *p = NULL;
	nsbox_pool_options bad = { .version = NSBOX_POOL_OPTIONS_VERSION, .size = 0, .config = cfg };
	EXPECT(nsbox_pool_new(&bad, &p, &e) == -EINVAL && !p, "size 0 is refused");
	nsbox_error_free(e);
	e = NULL;
	bad.size = NSBOX_POOL_MAX_SIZE + 1;
	EXPECT(nsbox_pool_new(&bad, &p, NULL) == -EINVAL, "a size above the maximum is refused");

	int before = children();
	nsbox_pool_options o = { .version = NSBOX_POOL_OPTIONS_VERSION, .size = 2, .config = cfg };
	if (nsbox_pool_new(&o, &p, &e) < 0) {
		printf("not ok - create the pool: %s\n", nsbox_error_message(e));
		return 1;
	}
	wait_ready(p, 2);
	nsbox_pool_cost c;
	EXPECT(nsbox_pool_cost_get(p, &c) == 0 && c.ready == 2 && c.spawned == 2 && c.taken == 0 &&
	       c.processes >= 2, "the pool fills up (ready %u, processes %u)", c.ready, c.processes);
	EXPECT(children() >= before + 2, "the ready sandboxes are our children");

	nsbox_result *r = run(p, "echo one; cat; echo end");
	EXPECT(r && nsbox_result_status(r) == NSBOX_STATUS_EXITED && output_is(r, "one\nend\n"),
	       "a request runs, its stdin then at end of file");
	nsbox_result_free(r);

	r = run(p, "cat /dev/shm/a/b/hello; stat -c '%a' /dev/shm/a/b /dev/shm/a/b/hello");
	EXPECT(r && output_is(r, "hi\n755\n444\n"), "a file placed below directories made for it");
	nsbox_result_free(r);

	/* Each sandbox serves one request: a mark left by one is never seen. */
	bool fresh = true;
	for (int i = 0; i < 4; i++) {
		r = run(p, "cat /tmp/mark 2>/dev/null; echo used >/tmp/mark");
		fresh &= output_is(r, "");
		nsbox_result_free(r);
	}
	EXPECT(fresh, "no sandbox serves twice");

	/* The timeout counts from the request: a sandbox older than it runs. */
	wait_ready(p, 2);
	sleep_ms(1500);
	r = run(p, "sleep 0.3; echo ok");
	EXPECT(r && nsbox_result_status(r) == NSBOX_STATUS_EXITED && output_is(r, "ok\n") &&
	       nsbox_result_duration_ms(r) < 1500, "the timeout and the duration count from the request");
	nsbox_result_free(r);
	r = run(p, "while :; do :; done");
	EXPECT(r && nsbox_result_status(r) == NSBOX_STATUS_TIMED_OUT, "a request that overruns times out");
	nsbox_result_free(r);

	EXPECT(nsbox_pool_cost_get(p, &c) == 0 && c.taken == 8, "eight taken");

	/* Given back instead of freed: the pool's thread frees each, and
	 * nothing of them stays (their pid 1 and janitor are our children). */
	wait_ready(p, 2);
	int full = children();
	bool served = true;
	for (int i = 0; i < 3; i++) {
		nsbox_sandbox *sb = NULL;
		r = NULL;
		served &= nsbox_pool_take(p, "echo x", 6, &sb, NULL) == 0 && nsbox_sandbox_wait(sb, &r, NULL) == 0 &&
		          output_is(r, "x\n");
		nsbox_result_free(r);
		nsbox_pool_release(p, sb);
	}
	EXPECT(served, "runs given back with nsbox_pool_release serve as others");
	wait_ready(p, 2);
	for (int i = 0; i < 1000 && children() != full; i++)
		sleep_ms(10);
	EXPECT(children() == full, "...and the pool frees them (%d children, %d when it was full)", children(), full);
	/* One still queued when the pool goes is freed with it. */
	nsbox_sandbox *last = NULL;
	r = NULL;
	bool last_ok = nsbox_pool_take(p, "echo y", 6, &last, NULL) == 0 && nsbox_sandbox_wait(last, &r, NULL) == 0 &&
	               output_is(r, "y\n");   /* (EXPECT evaluates its condition twice) */
	EXPECT(last_ok, "a last run");
	nsbox_result_free(r);
	nsbox_pool_release(p, last);
	nsbox_pool_free(p);
	EXPECT(children() == before, "nothing of the ready sandboxes is left after free (%d children)",
	       children());
	nsbox_config_free(cfg);
	return failures ? 1 : 0;
}
