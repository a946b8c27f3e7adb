/* Dispatch and the small subcommands (version, policy show). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "opts.h"
#include "live/live_cli.h"

void print_msg(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("nsbox: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

void print_error(const nsbox_error *e)
{
	print_msg("%s", e ? nsbox_error_message(e) : "unknown error");
}

int config_with_policy(const char *policy, nsbox_config **out, nsbox_error **err)
{
	int r = nsbox_config_new(out, err);
	if (r == 0 && policy)
		r = nsbox_config_load_policy(*out, policy, err);
	return r;
}

enum { P_POLICY = 1, P_HELP };
static const opt_def policy_opts[] = {
	{ "policy", 'p', "FILE|NAME", P_POLICY, "a policy file, or a shipped policy by name", NULL },
	{ "help", 'h', NULL, P_HELP, "print this help", NULL },
	{ 0 },
};

static void policy_help(FILE *f)
{
	fputs("Usage: nsbox policy show [--policy FILE|NAME]\n"
	      "\n"
	      "Print the effective configuration as YAML: the built-in defaults, then the\n"
	      "policy (--policy, or NSBOX_POLICY), then the other NSBOX_* variables.\n"
	      "\n", f);
	opt_help(f, policy_opts);
}

int cmd_policy(int argc, char **argv)
{
	const char *policy = getenv("NSBOX_POLICY"), *sub = NULL, *v;
	const opt_def *d;
	char err[256];
	opt_state st;
	opt_init(&st, policy_opts, argc, argv, false);
	for (int c; (c = opt_next(&st, &v, &d, err, sizeof(err))) != OPT_DONE;)
		switch (c) {
		case P_POLICY: policy = v; break;
		case P_HELP: policy_help(stdout); return 0;
		case OPT_OPERAND:
			if (!sub) {
				sub = v;
				break;
			}
			print_msg("policy show: unexpected argument '%s'", v);
			return EXIT_SETUP;
		default: print_msg("policy: %s (see 'nsbox policy --help')", err); return EXIT_SETUP;
		}
	if (!sub || strcmp(sub, "show")) {
		if (sub)
			print_msg("policy: unknown subcommand '%s' (see 'nsbox policy --help')", sub);
		else
			policy_help(stderr);
		return EXIT_SETUP;
	}
	nsbox_config *cfg = NULL;
	nsbox_error *e = NULL;
	char *yaml = NULL;
	int rc = 0;
	if (config_with_policy(policy, &cfg, &e) < 0 || nsbox_config_to_yaml(cfg, &yaml, &e) < 0) {
		print_error(e);
		nsbox_error_free(e);
		rc = EXIT_SETUP;
	} else {
		fputs(yaml, stdout);
	}
	free(yaml);
	nsbox_config_free(cfg);
	return rc;
}

static int cmd_version(int argc, char **argv)
{
	(void) argc;
	(void) argv;
	printf("nsbox %s\n", nsbox_version());
	return 0;
}

/* Every subcommand, once: dispatch and the top-level help. */
static const struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *synopsis, *summary;
} commands[] = {
	{ "run", cmd_run, "run [OPTIONS] [--] COMMAND [ARG...]", "run a command in a fresh sandbox" },
	{ "run-code", cmd_run_code, "run-code --lang python|node|bash (-c CODE | FILE | -) [OPTIONS]",
	  "run a code snippet in a fresh sandbox" },
	{ "start", cmd_start, "start [--name NAME] [--idle-timeout D] [--lifetime D] [-p PORTS] [RUN OPTIONS]",
	  "start a long-lived sandbox, print its name" },
	{ "exec", cmd_exec, "exec NAME [OPTIONS] [--] COMMAND [ARG...]", "run a command (or a cell) in a started sandbox" },
	{ "cp", cmd_cp, "cp SRC NAME:DST | NAME:SRC DST", "copy a file into or out of a started sandbox" },
	{ "ls", cmd_ls, "ls NAME [PATH] [--json]", "list a directory inside a started sandbox" },
	{ "process", cmd_process, "process ls|logs|kill|wait NAME [ID]", "its background processes (exec --detach)" },
	{ "ps", cmd_ps, "ps [--json]", "list the started sandboxes" },
	{ "pause", cmd_pause, "pause NAME", "freeze a started sandbox (CPU stops, memory stays)" },
	{ "resume", cmd_resume, "resume NAME", "thaw a paused sandbox" },
	{ "stop", cmd_stop, "stop NAME", "end a started sandbox" },
	{ "snapshot", cmd_snapshot, "snapshot NAME SNAP | ls | rm SNAP", "keep a started sandbox's files (start --from)" },
	{ "mcp", cmd_mcp, "mcp [RUN OPTIONS]", "serve the sandbox's tools to an MCP client on stdio" },
	{ "docker", cmd_docker, "docker run|exec|ps|stop|rm|logs|inspect|images ...",
	  "Docker's command line, mapped onto nsbox (also: nsbox-docker)" },
	{ "image", cmd_image, "image build | pull | import | ls | rm | prune", "build, pull and manage root filesystem images" },
	{ "session", cmd_session, "session ls | changes NAME | diff NAME | apply NAME | discard NAME",
	  "review and apply the workspace changes a run kept" },
	{ "check", cmd_check, "check [--json]", "what isolation and limits work here, with remedies" },
	{ "policy", cmd_policy, "policy show [--policy FILE]", "print the effective configuration as YAML" },
	{ "version", cmd_version, "version", "print the version" },
};

static void usage(FILE *f)
{
	fputs("Usage: nsbox COMMAND [OPTIONS]\n\n", f);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		const struct command *c = &commands[i];
		if (strlen(c->synopsis) < 38)
			fprintf(f, "  %-38s%s\n", c->synopsis, c->summary);
		else
			fprintf(f, "  %s\n  %-38s%s\n", c->synopsis, "", c->summary);
	}
	fputs("\n'nsbox COMMAND --help' lists a command's options; nsbox(1) has the details.\n", f);
}

int cli_main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_SETUP : 0;
	}
	if (!strcmp(argv[1], "--version"))
		return cmd_version(argc - 1, argv + 1);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	print_msg("unknown command '%s' (see 'nsbox --help')", argv[1]);
	return EXIT_SETUP;
}
