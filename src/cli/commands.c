/* Dispatch and the small subcommands (version, policy show). */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
	"Usage: nsbox COMMAND [OPTIONS]\n"
	"\n"
	"  run [OPTIONS] [--] COMMAND [ARG...]   run a command in a fresh sandbox\n"
	"  run-code --lang python|node|bash (-c CODE | FILE | -) [OPTIONS]\n"
	"                                        run a code snippet in a fresh sandbox\n"
	"  start [--name NAME] [--idle-timeout D] [--lifetime D] [RUN OPTIONS]\n"
	"                                        start a long-lived sandbox, print its name\n"
	"  exec NAME [--json] [--timeout D] [-i] [-w DIR] [--] COMMAND [ARG...]\n"
	"                                        run a command in a started sandbox\n"
	"  ps [--json] | stop NAME               list the started sandboxes | end one\n"
	"  mcp [RUN OPTIONS]                     serve run_code/run_command to an MCP client on stdio\n"
	"  image build [NAME] | ls | rm NAME     build (root) and manage root filesystem images\n"
	"  session ls | changes NAME | diff NAME | apply NAME [PATH...] | discard NAME\n"
	"                                        review and apply the workspace changes a run kept\n"
	"  check [--json]                        what isolation and limits work here, with remedies\n"
	"  policy show [--policy FILE]           print the effective configuration as YAML\n"
	"  version                               print the version\n"
	"\n"
	"'nsbox run --help' lists the run options; nsbox(1) has the details.\n";

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

static const char policy_usage[] =
	"Usage: nsbox policy show [--policy FILE|NAME]\n"
	"\n"
	"Print the effective configuration as YAML: the built-in defaults, then the\n"
	"policy (--policy, or NSBOX_POLICY), then the other NSBOX_* variables.\n"
	"\n"
	"  -p, --policy FILE|NAME  a policy file, or a shipped policy by name\n"
	"  -h, --help              print this help\n";

int cmd_policy(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "policy", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *policy = getenv("NSBOX_POLICY");
	int c;
	opterr = 0;
	optind = 0;   /* glibc: start afresh (options anywhere on the line) */
	while ((c = getopt_long(argc, argv, ":p:h", opts, NULL)) != -1)
		switch (c) {
		case 'p': policy = optarg; break;
		case 'h': fputs(policy_usage, stdout); return 0;
		case ':': print_msg("policy: option '%s' needs a value", argv[optind - 1]); return EXIT_SETUP;
		default: print_msg("policy: unknown option '%s' (see 'nsbox policy --help')", argv[optind - 1]); return EXIT_SETUP;
		}
	if (optind >= argc || strcmp(argv[optind], "show") != 0 || optind + 1 != argc) {
		if (optind < argc && strcmp(argv[optind], "show") != 0)
			print_msg("policy: unknown subcommand '%s' (see 'nsbox policy --help')", argv[optind]);
		else if (optind < argc)
			print_msg("policy show: unexpected argument '%s'", argv[optind + 1]);
		else
			fputs(policy_usage, stderr);
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

int cli_main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_SETUP : 0;
	}
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(argv[1], "mcp"))
		return cmd_mcp(argc - 1, argv + 1);
	if (!strcmp(argv[1], "run-code"))
		return cmd_run_code(argc - 1, argv + 1);
	if (!strcmp(argv[1], "start"))
		return cmd_start(argc - 1, argv + 1);
	if (!strcmp(argv[1], "exec"))
		return cmd_exec(argc - 1, argv + 1);
	if (!strcmp(argv[1], "ps"))
		return cmd_ps(argc - 1, argv + 1);
	if (!strcmp(argv[1], "stop"))
		return cmd_stop(argc - 1, argv + 1);
	if (!strcmp(argv[1], "session"))
		return cmd_session(argc - 1, argv + 1);
	if (!strcmp(argv[1], "image"))
		return cmd_image(argc - 1, argv + 1);
	if (!strcmp(argv[1], "check"))
		return cmd_check(argc - 1, argv + 1);
	if (!strcmp(argv[1], "policy"))
		return cmd_policy(argc - 1, argv + 1);
	if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
		printf("nsbox %s\n", nsbox_version());
		return 0;
	}
	print_msg("unknown command '%s' (see 'nsbox --help')", argv[1]);
	return EXIT_SETUP;
}
