/* `nsbox docker COMMAND`: dispatch (Docker's `docker container X` and
 * `docker image X` spellings too), version, images, pull, build. The
 * command is also installed as nsbox-docker (main.c: a program named
 * nsbox-docker or docker is this door), so that a user may link it as
 * `docker` in their PATH. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "docker/docker.h"
#include "opts.h"

static int docker_cmd_version(int argc, char **argv)
{
	(void) argc;
	(void) argv;
	printf("nsbox %s (the Docker-compatible front door: nsbox docker)\n", nsbox_version());
	return 0;
}

/* ---- images --------------------------------------------------------------------- */

enum { IM_QUIET = 1, IM_ALL, IM_NO_TRUNC, IM_HELP };
static const opt_def images_defs[] = {
	{ "quiet", 'q', OPT_BOOL, IM_QUIET, "only the image ids", NULL },
	{ "all", 'a', OPT_BOOL, IM_ALL, "accepted: nsbox keeps no intermediate images", NULL },
	{ "no-trunc", 0, OPT_BOOL, IM_NO_TRUNC, "whole ids", NULL },
	{ "help", 0, NULL, IM_HELP, "print this help", NULL },
	{ 0 },
};

static void size_text(uint64_t b, char *buf, size_t len)
{
	/* Docker's (go-units HumanSize): decimal units. */
	if (b >= 1000000000)
		snprintf(buf, len, "%.3gGB", (double) b / 1e9);
	else if (b >= 1000000)
		snprintf(buf, len, "%.3gMB", (double) b / 1e6);
	else if (b >= 1000)
		snprintf(buf, len, "%.3gkB", (double) b / 1e3);
	else
		snprintf(buf, len, "%lluB", (unsigned long long) b);
}

static int docker_cmd_images(int argc, char **argv)
{
	opt_state st;
	opt_init(&st, images_defs, argc, argv, false);
	const char *v;
	const opt_def *d;
	char err[256];
	bool quiet = false, no_trunc = false;
	for (int id; (id = opt_next(&st, &v, &d, err, sizeof(err))) != OPT_DONE;) {
		int b = d && !opt_has_value(d) ? opt_bool(v) : 1;
		if (id == OPT_ERROR || b < 0 || id == OPT_OPERAND) {
			print_msg("docker images: %s", id == OPT_ERROR ? err
			                               : id == OPT_OPERAND ? "nsbox lists every image (no REPOSITORY filter)"
			                                                   : "invalid boolean");
			return DOCKER_EXIT_CMD;
		}
		if (id == IM_QUIET)
			quiet = b;
		else if (id == IM_NO_TRUNC)
			no_trunc = b;
		else if (id == IM_HELP) {
			fputs("Usage: nsbox docker images [OPTIONS]\nThe images of nsbox's store (nsbox image ls), as Docker "
			      "lists them: the\nimage's name is its REPOSITORY, its TAG is latest.\n\n", stdout);
			opt_help(stdout, images_defs);
			return 0;
		}
	}
	nsbox_image_info *im = NULL;
	size_t n = 0;
	nsbox_error *e = NULL;
	if (nsbox_image_list(&im, &n, &e) < 0) {
		print_error(e);
		nsbox_error_free(e);
		return DOCKER_EXIT_CMD;
	}
	if (!quiet)
		printf("%-20s %-10s %-14s %-16s %s\n", "REPOSITORY", "TAG", "IMAGE ID", "CREATED", "SIZE");
	for (size_t i = 0; i < n; i++) {
		const char *digest = im[i].digest ? im[i].digest + 7 : "-";
		char idbuf[80];
		snprintf(idbuf, sizeof(idbuf), "%s%.*s", no_trunc && im[i].digest ? "sha256:" : "", no_trunc ? 64 : 12, digest);
		if (quiet) {
			printf("%s\n", idbuf);
			continue;
		}
		char created[64] = "N/A", size[32];
		struct tm tm = { 0 };
		if (im[i].created && strptime(im[i].created, "%Y-%m-%dT%H:%M:%S", &tm)) {
			long long s = (long long) (time(NULL) - timegm(&tm));
			if (s < 3600)
				snprintf(created, sizeof(created), "%lld minutes ago", s / 60);
			else if (s < 48 * 3600)
				snprintf(created, sizeof(created), "%lld hours ago", s / 3600);
			else
				snprintf(created, sizeof(created), "%lld days ago", s / 86400);
		}
		size_text(im[i].size_bytes, size, sizeof(size));
		printf("%-20s %-10s %-14s %-16s %s\n", im[i].name, "latest", idbuf, created, size);
	}
	nsbox_image_list_free(im, n);
	return 0;
}

/* ---- pull, build: nsbox image pull / image build -f ------------------------------ */

/* nsbox image build -f and nsbox image pull are not in this nsbox yet:
 * say so precisely (tests/func/docker.test expects it). */
static int docker_cmd_pull(int argc, char **argv)
{
	if (argc == 2 && (!strcmp(argv[1], "--help"))) {
		puts("Usage: nsbox docker pull REF\nnsbox image pull REF (the image's name: nsbox image ls).");
		return 0;
	}
	print_msg("docker pull: refused: this nsbox has no registry pulls ('nsbox image pull' is not built in "
	          "nsbox %s); import an image with nsbox image import NAME SOURCE (docker save, OCI layout, tar)",
	          nsbox_version());
	return DOCKER_EXIT_CMD;
}

static int docker_cmd_build(int argc, char **argv)
{
	if (argc == 2 && (!strcmp(argv[1], "--help"))) {
		puts("Usage: nsbox docker build -f Dockerfile -t NAME CONTEXT\nnsbox image build NAME -f Dockerfile CONTEXT.");
		return 0;
	}
	print_msg("docker build: refused: this nsbox has no Dockerfile builds ('nsbox image build -f' is not built in "
	          "nsbox %s); build the root filesystem elsewhere and import it with nsbox image import NAME SOURCE",
	          nsbox_version());
	return DOCKER_EXIT_CMD;
}

/* ---- dispatch ------------------------------------------------------------------------ */

static const struct dcmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *group;   /* Docker's management command it also lives under */
	const char *synopsis, *summary;
} dcmds[] = {
	{ "run", docker_cmd_run, "container", "run [OPTIONS] IMAGE [COMMAND] [ARG...]",
	  "run a command in a fresh sandbox (-d: in the background)" },
	{ "exec", docker_cmd_exec, "container", "exec [OPTIONS] CONTAINER COMMAND [ARG...]",
	  "run a command in a running container" },
	{ "ps", docker_cmd_ps, "container", "ps [-a] [-q] [--filter K=V] [--format T]", "list the containers" },
	{ "ls", docker_cmd_ps, "container", NULL, NULL },
	{ "stop", docker_cmd_stop, "container", "stop [-t SECONDS] CONTAINER...", "stop: the stop signal, then kill" },
	{ "kill", docker_cmd_kill, "container", "kill [-s SIGNAL] CONTAINER...", "kill, or send a signal" },
	{ "wait", docker_cmd_wait, "container", "wait CONTAINER...", "wait for the end; print the exit code" },
	{ "rm", docker_cmd_rm, "container", "rm [-f] CONTAINER...", "remove containers (-f: running ones too)" },
	{ "logs", docker_cmd_logs, "container", "logs [-f] [--tail N] CONTAINER", "a detached container's output" },
	{ "inspect", docker_cmd_inspect, "container", "inspect [-f TEMPLATE] CONTAINER...", "containers as JSON" },
	{ "images", docker_cmd_images, "image", "images [-q]", "the images of nsbox's store" },
	{ "pull", docker_cmd_pull, "image", "pull REF", "an image from a registry (nsbox image pull)" },
	{ "build", docker_cmd_build, "image", "build -f Dockerfile -t NAME CONTEXT", "build an image (nsbox image build -f)" },
	{ "version", docker_cmd_version, NULL, "version", "print the version" },
};

static void docker_usage(FILE *f)
{
	fputs("Usage: nsbox docker COMMAND [OPTIONS]\n"
	      "Docker's command line for the commands sandbox users run, each mapped onto\n"
	      "nsbox's own (no daemon; nothing of Docker is used). Installed as nsbox-docker too:\n"
	      "link that as 'docker' in your PATH to run existing scripts unchanged.\n\n", f);
	for (size_t i = 0; i < sizeof(dcmds) / sizeof(dcmds[0]); i++)
		if (dcmds[i].synopsis)
			fprintf(f, "  %-42s%s\n", dcmds[i].synopsis, dcmds[i].summary);
	fputs("\nAlso as 'container run', 'container ls', 'image ls' .... 'nsbox docker COMMAND\n"
	      "--help' lists a command's options; nsbox(1) and docs/guide.md have the details.\n", f);
}

static int dispatch(const char *group, int argc, char **argv)
{
	const char *name = argv[0];
	if (group && !strcmp(group, "image") && !strcmp(name, "ls"))
		return docker_cmd_images(argc, argv);
	for (size_t i = 0; i < sizeof(dcmds) / sizeof(dcmds[0]); i++) {
		const struct dcmd *c = &dcmds[i];
		if (strcmp(c->name, name))
			continue;
		if (group ? !c->group || strcmp(c->group, group) || !strcmp(name, "images") : !strcmp(name, "ls"))
			break;
		return c->fn(argc, argv);
	}
	print_msg("docker: unknown command '%s%s%s' (see 'nsbox docker --help')", group ? group : "", group ? " " : "",
	          name);
	return DOCKER_EXIT_CMD;
}

int cmd_docker(int argc, char **argv)
{
	if (argc < 2) {
		docker_usage(stderr);
		return DOCKER_EXIT_CMD;
	}
	const char *a = argv[1];
	if (!strcmp(a, "--help") || !strcmp(a, "-h") || !strcmp(a, "help")) {
		docker_usage(stdout);
		return 0;
	}
	if (!strcmp(a, "--version") || !strcmp(a, "-v"))
		return docker_cmd_version(argc - 1, argv + 1);
	if (a[0] == '-') {
		/* -H, --context, --config ...: there is no daemon to choose. */
		print_msg("docker: option '%s': refused: nsbox has no daemon, contexts or client configuration (see "
		          "'nsbox docker --help')", a);
		return DOCKER_EXIT_CMD;
	}
	if ((!strcmp(a, "container") || !strcmp(a, "image")) && argc >= 3)
		return dispatch(a, argc - 2, argv + 2);
	return dispatch(NULL, argc - 1, argv + 1);
}
