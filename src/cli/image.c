/* `nsbox image build [NAME] | ls | rm NAME`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char image_usage[] =
	"Usage: nsbox image build [NAME] [--rebuild] [--mirror URL] [--suite SUITE]\n"
	"       nsbox image import NAME SOURCE   (tar, docker save, OCI layout, directory)\n"
	"       nsbox image ls\n"
	"       nsbox image rm NAME\n";

static int list_one(const char *name)
{
	nsbox_image_info *v = NULL;
	size_t n = 0;
	if (nsbox_image_list(&v, &n, NULL) == 0)
		for (size_t i = 0; i < n; i++)
			if (!strcmp(v[i].name, name))
				print_msg("image '%s': %.1f MiB at %s", name, (double) v[i].size_bytes / (1 << 20), v[i].path);
	nsbox_image_list_free(v, n);
	return 0;
}

static int build(int argc, char **argv)
{
	nsbox_image_build_options o = { .version = NSBOX_IMAGE_BUILD_OPTIONS_VERSION, .log_fd = 2 };
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--rebuild"))
			o.rebuild = true;
		else if (!strcmp(argv[i], "--mirror") && i + 1 < argc)
			o.mirror = argv[++i];
		else if (!strcmp(argv[i], "--suite") && i + 1 < argc)
			o.suite = argv[++i];
		else if (argv[i][0] != '-' && !o.name)
			o.name = argv[i];
		else {
			print_msg("image build: unexpected argument '%s'\n%s", argv[i], image_usage);
			return EXIT_SETUP;
		}
	}
	nsbox_error *e = NULL;
	int r = nsbox_image_build(&o, &e);
	if (r < 0) {
		print_error(e);
		nsbox_error_free(e);
		return EXIT_SETUP;
	}
	const char *name = o.name ? o.name : "default";
	if (r == 1)
		print_msg("image '%s' exists; kept (use --rebuild to build it again)", name);
	return list_one(name);
}

static int list(void)
{
	nsbox_image_info *v = NULL;
	size_t n = 0;
	nsbox_error *e = NULL;
	if (nsbox_image_list(&v, &n, &e) < 0) {
		print_error(e);
		nsbox_error_free(e);
		return EXIT_SETUP;
	}
	printf("%-20s %10s  %-20s  %s\n", "NAME", "SIZE", "CREATED", "SOURCE");
	for (size_t i = 0; i < n; i++)
		printf("%-20s %9.1fM  %-20s  %s%s%s%s\n", v[i].name, (double) v[i].size_bytes / (1 << 20),
		       v[i].created ? v[i].created : "-", v[i].source ? v[i].source : v[i].path,
		       v[i].stripped ? " (stripped: " : "", v[i].stripped ? v[i].stripped : "", v[i].stripped ? ")" : "");
	nsbox_image_list_free(v, n);
	return 0;
}

int cmd_image(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "build"))
		return build(argc - 2, argv + 2);
	if (argc == 4 && !strcmp(argv[1], "import")) {
		nsbox_error *e = NULL;
		if (nsbox_image_import(argv[2], argv[3], &e) < 0) {
			print_error(e);
			nsbox_error_free(e);
			return EXIT_SETUP;
		}
		return list_one(argv[2]);
	}
	if (argc == 2 && !strcmp(argv[1], "ls"))
		return list();
	if (argc == 3 && !strcmp(argv[1], "rm")) {
		nsbox_error *e = NULL;
		if (nsbox_image_remove(argv[2], &e) < 0) {
			print_error(e);
			nsbox_error_free(e);
			return EXIT_SETUP;
		}
		return 0;
	}
	fputs(image_usage, argc >= 2 && !strcmp(argv[1], "--help") ? stdout : stderr);
	return argc >= 2 && !strcmp(argv[1], "--help") ? 0 : EXIT_SETUP;
}
