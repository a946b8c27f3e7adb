/* `nsbox check [--json]`: what works on this host, and remedies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cmd_check(int argc, char **argv)
{
	bool json = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs("Usage: nsbox check [--json]\n\n"
			      "Report what isolation and limits work on this host, with a remedy for what\n"
			      "does not. Exits 0 when a default run can work here, 1 otherwise.\n\n"
			      "      --json  the report as one JSON object\n"
			      "  -h, --help  print this help\n", stdout);
			return 0;
		} else {
			print_msg("check: unknown argument '%s' (usage: nsbox check [--json])", argv[i]);
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
