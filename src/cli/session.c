/* `nsbox session ls | changes NAME | diff NAME | apply NAME [PATH...] | discard NAME`. */
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
	"       nsbox session changes NAME [--json]\n"
	"       nsbox session diff NAME\n"
	"       nsbox session apply NAME [PATH...] [--force] [--policy FILE]\n"
	"       nsbox session discard NAME\n";

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

static int changes(const char *name, bool json)
{
	nsbox_config *cfg = policy_config(NULL);
	nsbox_changes *c = NULL;
	nsbox_error *e = NULL;
	if (!cfg)
		return EXIT_SETUP;
	if (nsbox_session_changes(name, cfg, &c, &e) < 0) {
		nsbox_config_free(cfg);
		return fail(e);
	}
	if (json)
		fputs("[", stdout);
	for (size_t i = 0; i < nsbox_changes_count(c); i++) {
		const char *path, *kind, *detail;
		bool denied;
		(void) nsbox_changes_get(c, i, &path, &kind, &detail, &denied);
		if (json)
			printf("%s{\"path\":\"%s\",\"kind\":\"%s\",\"detail\":\"%s\",\"denied\":%s}", i ? "," : "",
			       path, kind, detail, denied ? "true" : "false");
		else
			printf("%-12s %-9s %s%s\n", kind, detail, path, denied ? "   (denied by workspace.deny_changes)" : "");
	}
	if (json)
		fputs("]\n", stdout);
	nsbox_changes_free(c);
	nsbox_config_free(cfg);
	return 0;
}

/* diff -u between the host version and the session's, for one path. */
static void diff_one(const char *a, const char *b, const char *label)
{
	char la[4200], lb[4200];
	snprintf(la, sizeof(la), "a/%s", label);
	snprintf(lb, sizeof(lb), "b/%s", label);
	char *argv[] = { "diff", "-u", "--label", la, "--label", lb, (char *) a, (char *) b, NULL };
	pid_t pid;
	if (posix_spawnp(&pid, "diff", NULL, NULL, argv, environ) != 0) {
		printf("--- a/%s\n+++ b/%s\n(diff is not installed: apt-get install diffutils)\n", label, label);
		return;
	}
	int st;
	fflush(stdout);
	waitpid(pid, &st, 0);
}

static int diff(const char *name)
{
	nsbox_changes *c = NULL;
	nsbox_error *e = NULL;
	char *ws = NULL, *up = NULL;
	if (nsbox_session_paths(name, &ws, &up, &e) < 0 || nsbox_session_changes(name, NULL, &c, &e) < 0) {
		free(ws);
		free(up);
		return fail(e);
	}
	for (size_t i = 0; i < nsbox_changes_count(c); i++) {
		const char *path, *kind, *detail;
		(void) nsbox_changes_get(c, i, &path, &kind, &detail, NULL);
		char host[4200], mine[4200];
		snprintf(host, sizeof(host), "%s/%s", ws, path);
		snprintf(mine, sizeof(mine), "%s/%s", up, path);
		struct stat hs, ms;
		bool h = lstat(host, &hs) == 0 && S_ISREG(hs.st_mode);
		bool m = lstat(mine, &ms) == 0 && S_ISREG(ms.st_mode);
		fflush(stdout);
		if (!strcmp(detail, "content") || (!strcmp(kind, "added") && m) || (!strcmp(kind, "deleted") && h))
			diff_one(h ? host : "/dev/null", m && strcmp(kind, "deleted") ? mine : "/dev/null", path);
		else if (!strcmp(detail, "mode"))
			printf("mode %s: %04o -> %04o\n", path, (unsigned) (hs.st_mode & 07777), (unsigned) (ms.st_mode & 07777));
		else
			printf("%s %s: %s\n", kind, path, detail);
	}
	fflush(stdout);
	nsbox_changes_free(c);
	free(ws);
	free(up);
	return 0;
}

int cmd_session(int argc, char **argv)
{
	nsbox_error *e = NULL;
	if (argc == 2 && !strcmp(argv[1], "ls")) {
		char **names = NULL;
		size_t n = 0;
		if (nsbox_session_list(&names, &n, &e) < 0)
			return fail(e);
		for (size_t i = 0; i < n; i++) {
			char *ws = NULL, *up = NULL;
			if (nsbox_session_paths(names[i], &ws, &up, NULL) == 0)
				printf("%-20s %s\n", names[i], ws);
			free(ws);
			free(up);
			free(names[i]);
		}
		free(names);
		return 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "changes"))
		return changes(argv[2], argc > 3 && !strcmp(argv[3], "--json"));
	if (argc == 3 && !strcmp(argv[1], "diff"))
		return diff(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "discard"))
		return nsbox_session_discard(argv[2], &e) < 0 ? fail(e) : 0;
	if (argc >= 3 && !strcmp(argv[1], "apply")) {
		bool force = false;
		const char *policy = NULL;
		const char **paths = calloc((size_t) argc, sizeof(char *));
		size_t n = 0;
		for (int i = 3; paths && i < argc; i++) {
			if (!strcmp(argv[i], "--force"))
				force = true;
			else if (!strcmp(argv[i], "--policy") && i + 1 < argc)
				policy = argv[++i];
			else
				paths[n++] = argv[i];
		}
		nsbox_config *cfg = paths ? policy_config(policy) : NULL;
		int rc = 0;
		if (!cfg)
			rc = EXIT_SETUP;
		else if (nsbox_session_apply(argv[2], cfg, paths, n, force, &e) < 0)
			rc = fail(e);
		nsbox_config_free(cfg);
		free(paths);
		return rc;
	}
	fputs(session_usage, stderr);
	return EXIT_SETUP;
}
