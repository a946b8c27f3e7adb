/* `nsbox snapshot`: keep a started sandbox's files and configuration
 * (nsbox_live_snapshot), list and remove snapshots; `nsbox start --from
 * SNAP` starts sandboxes with them (sandbox.c). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "live/live_cli.h"

static const char usage[] =
	"Usage: nsbox snapshot NAME SNAP     keep sandbox NAME's files and configuration as SNAP\n"
	"       nsbox snapshot ls [--json]   list your snapshots\n"
	"       nsbox snapshot rm SNAP       remove one\n"
	"A snapshot holds what the sandbox wrote to /tmp and its home (files, packages\n"
	"installed with pip --user or npm) and its configuration, not its processes'\n"
	"memory; nsbox start --from SNAP starts any number of sandboxes from it. The image\n"
	"needs tar. (nsbox snapshot create NAME SNAP: for a sandbox named ls or rm.)\n";

static int list(bool json)
{
	char *text = NULL;
	nsbox_error *e = NULL;
	if (nsbox_snapshot_list(&text, &e) < 0) {
		print_error(e);
		nsbox_error_free(e);
		return EXIT_SETUP;
	}
	if (json) {
		printf("%s\n", text);
		free(text);
		return 0;
	}
	json_t *a = json_loads(text, 0, NULL);
	free(text);
	printf("%-24s %-24s %-20s %12s\n", "SNAPSHOT", "FROM", "CREATED", "SIZE");
	size_t i;
	json_t *s;
	json_array_foreach(a, i, s) {
		char when[32] = "";
		time_t t = (time_t) json_integer_value(json_object_get(s, "created"));
		struct tm tm;
		if (gmtime_r(&t, &tm))
			strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		printf("%-24s %-24s %-20s %12lld\n", json_string_value(json_object_get(s, "name")),
		       json_string_value(json_object_get(s, "sandbox")) ?: "", when,
		       (long long) json_integer_value(json_object_get(s, "size_bytes")));
	}
	json_decref(a);
	return 0;
}

int cmd_snapshot(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(usage, stdout);
		return 0;
	}
	nsbox_error *e = NULL;
	int r;
	if (argc >= 2 && !strcmp(argv[1], "ls") && argc <= 3 && (argc == 2 || !strcmp(argv[2], "--json")))
		return list(argc == 3);
	if (argc == 3 && !strcmp(argv[1], "rm")) {
		r = nsbox_snapshot_remove(argv[2], &e);
	} else if (argc == 3 || (argc == 4 && !strcmp(argv[1], "create"))) {
		nsbox_sandbox *sb = live_cli_connect(argv[argc - 2]);
		if (!sb)
			return EXIT_SETUP;
		r = nsbox_live_snapshot(sb, argv[argc - 1], &e);
		nsbox_sandbox_free(sb);
	} else {
		fputs(usage, stderr);
		return EXIT_SETUP;
	}
	if (r < 0) {
		print_error(e);
		nsbox_error_free(e);
		return EXIT_SETUP;
	}
	return 0;
}
