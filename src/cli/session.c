/* `nsbox session ls | changes NAME | diff NAME | apply NAME [PATH...] | discard NAME`. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

extern char **environ;

static const char session_usage[] =
	"Usage: nsbox session ls\n"
	"       nsbox session changes [--json] [--policy FILE] NAME\n"
	"       nsbox session diff NAME\n"
	"       nsbox session apply [--force] [--policy FILE] NAME [PATH...]\n"
	"       nsbox session discard NAME\n"
	"Options may come anywhere on the line; '--' ends them.\n";
static int fail(nsbox_error *e)
{
	print_error(e);
	nsbox_error_free(e);
	return EXIT_SETUP;
}

/* The policy, for workspace.deny_changes. */
static nsbox_config *policy_config(const char *policy)
{
	nsbox_config *cfg = NULL;
	nsbox_error *e = NULL;
	if (config_with_policy(policy ? policy : getenv("NSBOX_POLICY"), &cfg, &e) < 0) {
		print_error(e);
		nsbox_error_free(e);
		nsbox_config_free(cfg);
		return NULL;
	}
	return cfg;
}

static int changes(const char *name, bool json, const char *policy)
{
	nsbox_config *cfg = policy_config(policy);
	nsbox_changes *c = NULL;
	nsbox_error *e = NULL;
	if (!cfg)
		return EXIT_SETUP;
	if (nsbox_session_changes(name, cfg, &c, &e) < 0) {
		nsbox_config_free(cfg);
		return fail(e);
	}
	int rc = 0;
	if (json) {
		/* Through the library's one JSON writer: a path is any bytes
		 * the payload chose. */
		char *text = NULL;
		if (nsbox_changes_json(c, &text) < 0)
			rc = EXIT_SETUP;
		else
			fputs(text, stdout);
		free(text);
	}
	for (size_t i = 0; !json && i < nsbox_changes_count(c); i++) {
		const char *path, *kind, *detail, *target;
		unsigned mode;
		bool denied;
		(void) nsbox_changes_get(c, i, &path, &kind, &detail, &denied);
		(void) nsbox_changes_get_mode(c, i, &mode, &target);
		char *p = nsbox_escape(path), *t = target ? nsbox_escape(target) : NULL;
		printf("%-12s %-9s %s", kind, detail, p ? p : "?");
		if (t)
			printf(" -> %s", t);
		if (mode)
			printf("   mode %04o", mode & 07777);
		printf("%s\n", denied ? "   (denied by workspace.deny_changes)" : "");
		free(p);
		free(t);
	}
	nsbox_changes_free(c);
	nsbox_config_free(cfg);
	return rc;
}

/* Copy diff's output from `fd` to stdout with control characters (but
 * tab and newline) escaped as \xNN: the payload wrote those lines, and a
 * review must not let them drive the terminal. */
static void relay_escaped(int fd)
{
	unsigned char in[8192];
	ssize_t n;
	bool c2 = false;   /* the previous byte began a C1 control (0xc2) */
	while ((n = read(fd, in, sizeof(in))) > 0 || (n < 0 && errno == EINTR)) {
		for (ssize_t i = 0; i < n; i++) {
			unsigned char ch = in[i];
			if (c2 && ch >= 0x80 && ch <= 0x9f) {
				printf("\\xc2\\x%02x", ch);
			} else {
				if (c2)
					putchar(0xc2);
				if (ch == 0xc2) {
					c2 = true;
					continue;
				}
				if ((ch < 0x20 && ch != '\t' && ch != '\n') || ch == 0x7f)
					printf("\\x%02x", ch);
				else
					putchar(ch);
			}
			c2 = false;
		}
	}
	if (c2)
		putchar(0xc2);
}

/* diff -u between the host version and the session's, for one path: the
 * files are opened by the library (beneath each side, no symlink followed)
 * and handed to diff as /dev/fd/3 and /dev/fd/4. */
static void diff_one(int a, int b, const char *label)
{
	char la[4200], lb[4200];
	snprintf(la, sizeof(la), "a/%s", label);
	snprintf(lb, sizeof(lb), "b/%s", label);
	char *argv[] = { "diff", "-u", "--label", la, "--label", lb, "/dev/fd/3", "/dev/fd/4", NULL };
	/* Out of the way of 3 and 4 first, so that neither dup2 clobbers
	 * the other's source. */
	int hi[2] = { a >= 0 ? fcntl(a, F_DUPFD_CLOEXEC, 10) : -1, b >= 0 ? fcntl(b, F_DUPFD_CLOEXEC, 10) : -1 };
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	for (int i = 0; i < 2; i++) {
		if (hi[i] >= 0)
			posix_spawn_file_actions_adddup2(&fa, hi[i], 3 + i);
		else
			posix_spawn_file_actions_addopen(&fa, 3 + i, "/dev/null", O_RDONLY, 0);
	}
	int out[2] = { -1, -1 };
	if (pipe2(out, O_CLOEXEC) == 0)
		posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	pid_t pid;
	fflush(stdout);
	if (out[0] < 0 || posix_spawnp(&pid, "diff", &fa, NULL, argv, environ) != 0) {
		printf("--- a/%s\n+++ b/%s\n(diff is not installed: apt-get install diffutils)\n", label, label);
	} else {
		close(out[1]);
		out[1] = -1;
		relay_escaped(out[0]);
		fflush(stdout);
		int st;
		waitpid(pid, &st, 0);
	}
	for (int i = 0; i < 2; i++)
		if (out[i] >= 0)
			close(out[i]);
	posix_spawn_file_actions_destroy(&fa);
	for (int i = 0; i < 2; i++)
		if (hi[i] >= 0)
			close(hi[i]);
}

static int diff(const char *name)
{
	nsbox_changes *c = NULL;
	nsbox_error *e = NULL;
	if (nsbox_session_changes(name, NULL, &c, &e) < 0)
		return fail(e);
	for (size_t i = 0; i < nsbox_changes_count(c); i++) {
		const char *path, *kind, *detail;
		(void) nsbox_changes_get(c, i, &path, &kind, &detail, NULL);
		int h = -1, m = -1;
		if (nsbox_session_open_pair(name, path, &h, &m, &e) < 0) {
			nsbox_changes_free(c);
			return fail(e);
		}
		char *label = nsbox_escape(path);
		struct stat hs = { 0 }, ms = { 0 };
		if (h >= 0)
			(void) fstat(h, &hs);
		if (m >= 0)
			(void) fstat(m, &ms);
		fflush(stdout);
		if (!strcmp(detail, "content") || (!strcmp(kind, "added") && m >= 0) || (!strcmp(kind, "deleted") && h >= 0))
			diff_one(h, strcmp(kind, "deleted") ? m : -1, label ? label : "?");
		else if (!strcmp(detail, "mode"))
			printf("mode %s: %04o -> %04o\n", label ? label : "?", (unsigned) (hs.st_mode & 07777),
			       (unsigned) (ms.st_mode & 07777));
		else
			printf("%s %s: %s\n", kind, label ? label : "?", detail);
		free(label);
		if (h >= 0)
			close(h);
		if (m >= 0)
			close(m);
	}
	fflush(stdout);
	nsbox_changes_free(c);
	return 0;
}

static int list(void)
{
	nsbox_error *e = NULL;
	char **names = NULL;
	size_t n = 0;
	if (nsbox_session_list(&names, &n, &e) < 0)
		return fail(e);
	for (size_t i = 0; i < n; i++) {
		char *ws = NULL, *up = NULL;
		if (nsbox_session_paths(names[i], &ws, &up, NULL) == 0) {
			char *nm = nsbox_escape(names[i]), *w = nsbox_escape(ws);
			printf("%-20s %s\n", nm ? nm : "?", w ? w : "?");
			free(nm);
			free(w);
		}
		free(ws);
		free(up);
		free(names[i]);
	}
	free(names);
	return 0;
}

int cmd_session(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "force", no_argument, NULL, 'f' },
		{ "policy", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool json = false, force = false;
	const char *policy = NULL;
	int c;
	optind = 0;   /* a fresh scan, whatever parsed before */
	opterr = 0;
	/* Options anywhere on the line (`apply --force NAME`, `apply NAME
	 * --force`); argv[1] is the subcommand. */
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': json = true; break;
		case 'f': force = true; break;
		case 'p': policy = optarg; break;
		case 'h': fputs(session_usage, stdout); return 0;
		default:
			fprintf(stderr, "nsbox: session: %s '%s'\n", c == ':' ? "missing value for" : "unknown option",
			        argv[optind - 1]);
			fputs(session_usage, stderr);
			return EXIT_SETUP;
		}
	}
	/* After getopt's permutation: the subcommand, then the operands. */
	char **rest = argv + optind;
	int n = argc - optind;
	const char *sub = n > 0 ? rest[0] : "";
	nsbox_error *e = NULL;
	if (n == 1 && !strcmp(sub, "ls"))
		return list();
	if (n == 2 && !strcmp(sub, "changes"))
		return changes(rest[1], json, policy);
	if (n == 2 && !strcmp(sub, "diff"))
		return diff(rest[1]);
	if (n == 2 && !strcmp(sub, "discard"))
		return nsbox_session_discard(rest[1], &e) < 0 ? fail(e) : 0;
	if (n >= 2 && !strcmp(sub, "apply")) {
		nsbox_config *cfg = policy_config(policy);
		int rc = 0;
		if (!cfg)
			rc = EXIT_SETUP;
		else if (nsbox_session_apply(rest[1], cfg, (const char *const *) rest + 2, (size_t) (n - 2), force, &e) < 0)
			rc = fail(e);
		nsbox_config_free(cfg);
		return rc;
	}
	fputs(session_usage, stderr);
	return EXIT_SETUP;
}
