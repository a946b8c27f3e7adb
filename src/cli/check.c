/* `nsbox check [--json]`: what works on this host, and remedies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "opts.h"

enum { C_JSON = 1, C_HELP };
static const opt_def check_opts[] = {
	{ "json", 0, NULL, C_JSON, "the report as one JSON object", NULL },
	{ "help", 'h', NULL, C_HELP, "print this help", NULL },
	{ 0 },
};

int cmd_check(int argc, char **argv)
{
	bool json = false;
	opt_state os;
	opt_init(&os, check_opts, argc, argv, false);
	const char *v;
	const opt_def *d;
	char err[256];
	for (int c; (c = opt_next(&os, &v, &d, err, sizeof(err))) != OPT_DONE;) {
		if (c == C_JSON) {
			json = true;
		} else if (c == C_HELP) {
			fputs("Usage: nsbox check [--json]\n\n"
			      "Report what isolation and limits work on this host, with a remedy for what\n"
			      "does not. Exits 0 when a default run can work here, 1 otherwise.\n\n", stdout);
			opt_help(stdout, check_opts);
			return 0;
		} else {
			print_msg("check: %s (usage: nsbox check [--json])",
			          c == OPT_OPERAND ? "unexpected argument" : err);
			return EXIT_SETUP;
		}
	}
	nsbox_check *c = NULL;
	nsbox_error *e = NULL;
	if (nsbox_check_run(&c, &e) < 0) {
		print_error(e);
		nsbox_error_free(e);
		return EXIT_SETUP;
	}
	if (json) {
		char *out = NULL;
		if (nsbox_check_to_json(c, &out, &e) < 0) {
			print_error(e);
			nsbox_error_free(e);
			nsbox_check_free(c);
			return EXIT_SETUP;
		}
		fputs(out, stdout);
		free(out);
	} else {
		static const char *const marks[] = { "ok", "warning", "MISSING" };
		for (size_t i = 0; i < nsbox_check_count(c); i++) {
			const char *name, *detail, *remedy;
			nsbox_check_status st;
			(void) nsbox_check_item(c, i, &name, &st, &detail, &remedy);
			printf("%-28s %-8s %s\n", name, marks[st], detail ? detail : "");
			if (remedy)
				printf("%-28s %-8s remedy: %s\n", "", "", remedy);
		}
		printf("\na default 'nsbox run' %s work here\n",
		       nsbox_check_default_run_works(c) ? "would" : "would NOT");
	}
	int rc = nsbox_check_default_run_works(c) ? 0 : 1;
	nsbox_check_free(c);
	return rc;
}
