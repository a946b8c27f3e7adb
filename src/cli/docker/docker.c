/* `nsbox docker COMMAND`: dispatch (Docker's `docker container X` and
 * `docker image X` spellings too) and version. The
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
	{ "port", docker_cmd_port, "container", "port CONTAINER [PORT[/tcp]]", "where its ports are published" },
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
