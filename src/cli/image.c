/* `nsbox image build [NAME] | ls | rm NAME`. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

static const char image_usage[] =
	"Usage: nsbox image build [NAME] [--rebuild] [--mirror URL] [--suite SUITE]\n"
	"       nsbox image import NAME SOURCE   (tar, docker save, OCI layout, directory)\n"
	"       nsbox image ls\n"
	"       nsbox image rm NAME\n"
	"\n"
	"  --rebuild       build again even if the image exists\n"
	"  --mirror URL    the Debian archive to build from (default: the host's apt source)\n"
	"  --suite SUITE   the Debian release (default: the host's)\n"
	"  -h, --help      print this help\n";

static int list_one(const char *name)
{
	nsbox_image_info *v = NULL;
	size_t n = 0;
	if (nsbox_image_list(&v, &n, NULL) == 0)
		for (size_t i = 0; i < n; i++)
			if (!strcmp(v[i].name, name))
				print_msg("image '%s': %s, %.1f MiB at %s%s%s%s", name, v[i].digest ? v[i].digest : "no digest",
				          (double) v[i].size_bytes / (1 << 20), v[i].path,
				          v[i].stripped ? " (stripped: " : "", v[i].stripped ? v[i].stripped : "",
				          v[i].stripped ? ")" : "");
	nsbox_image_list_free(v, n);
	return 0;
}

/* The build's step lines ("nsbox: [N/5] ...") go to the terminal;
 * debootstrap's and apt's hundreds of lines go to the log file only. A
 * child sorts the recipe's output while the library waits for the recipe.
 * Returns its pid and the pipe's write end for the library, or -1. */
static pid_t start_sorter(int log, const char *log_path, const char *name, int *write_end)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		close(p[1]);
		FILE *in = fdopen(p[0], "r");
		char line[4096];
		bool told = false;
		while (in && fgets(line, sizeof(line), in)) {
			/* Said once something runs: a kept image builds nothing. */
			if (!told)
				print_msg("building image '%s'; the tools' output goes to %s", name, log_path);
			told = true;
			(void) !write(log, line, strlen(line));
			if (!strncmp(line, "nsbox: [", 8)) {
				fputs(line, stderr);
				fflush(stderr);
			}
		}
		_exit(0);
	}
	close(p[0]);
	*write_end = p[1];
	return pid;
}

/* The log's last lines, after a failure. */
static void print_tail(int log, const char *path, int lines)
{
	char text[8192];
	off_t end = lseek(log, 0, SEEK_END);
	off_t from = end > (off_t) sizeof(text) - 1 ? end - (off_t) sizeof(text) + 1 : 0;
	ssize_t n = end > 0 ? pread(log, text, sizeof(text) - 1, from) : -1;
	if (n <= 0)
		return;
	text[n] = '\0';
	char *p = text + n;
	while (p > text && p[-1] == '\n')
		*--p = '\0';
	for (int seen = 0; p > text; p--)
		if (p[-1] == '\n' && ++seen == lines)
			break;
	print_msg("the last lines of %s:", path);
	fprintf(stderr, "%s\n", p);
}

static int build(nsbox_image_build_options o)
{
	const char *name = o.name ? o.name : "default";
	const char *tmpdir = getenv("TMPDIR");
	char log_path[4096];
	snprintf(log_path, sizeof(log_path), "%s/nsbox-image-build-XXXXXX.log",
	         tmpdir && tmpdir[0] == '/' ? tmpdir : "/tmp");
	int log = geteuid() == 0 ? mkostemps(log_path, 4, O_CLOEXEC) : -1;
	pid_t sorter = log >= 0 ? start_sorter(log, log_path, name, &o.log_fd) : -1;
	nsbox_error *e = NULL;
	int r = nsbox_image_build(&o, &e);
	if (sorter > 0) {
		close(o.log_fd);   /* the sorter sees the end of the output */
		while (waitpid(sorter, NULL, 0) < 0 && errno == EINTR)
			;
	}
	if (log >= 0 && lseek(log, 0, SEEK_END) == 0)
		(void) unlink(log_path);   /* nothing ran: no log to keep */
	if (r < 0) {
		print_error(e);
		nsbox_error_free(e);
		if (log >= 0 && lseek(log, 0, SEEK_END) > 0)
			print_tail(log, log_path, 15);
		if (log >= 0)
			close(log);
		return EXIT_SETUP;
	}
	if (log >= 0)
		close(log);
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
	/* DIGEST: the first 12 hex digits, as image ids are shown elsewhere. */
	printf("%-20s %-12s %10s  %-20s  %s\n", "NAME", "DIGEST", "SIZE", "CREATED", "SOURCE");
	for (size_t i = 0; i < n; i++)
		printf("%-20s %-12.12s %9.1fM  %-20s  %s%s%s%s\n", v[i].name, v[i].digest ? v[i].digest + 7 : "-",
		       (double) v[i].size_bytes / (1 << 20),
		       v[i].created ? v[i].created : "-", v[i].source ? v[i].source : v[i].path,
		       v[i].stripped ? " (stripped: " : "", v[i].stripped ? v[i].stripped : "", v[i].stripped ? ")" : "");
	nsbox_image_list_free(v, n);
	return 0;
}

static int image_fail(nsbox_error *e)
{
	print_error(e);
	nsbox_error_free(e);
	return EXIT_SETUP;
}

/* Options anywhere on the line, as for `nsbox run`; each subcommand takes
 * only its own. */
int cmd_image(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "rebuild", no_argument, NULL, 'r' },
		{ "mirror", required_argument, NULL, 'm' },
		{ "suite", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	nsbox_image_build_options o = { .version = NSBOX_IMAGE_BUILD_OPTIONS_VERSION, .log_fd = 2 };
	const char *build_only = NULL;
	int c;
	opterr = 0;
	optind = 0;   /* glibc: start afresh, permuting */
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1)
		switch (c) {
		case 'r': o.rebuild = true; build_only = "--rebuild"; break;
		case 'm': o.mirror = optarg; build_only = "--mirror"; break;
		case 's': o.suite = optarg; build_only = "--suite"; break;
		case 'h': fputs(image_usage, stdout); return 0;
		case ':': print_msg("image: option '%s' needs a value", argv[optind - 1]); return EXIT_SETUP;
		default: print_msg("image: unknown option '%s' (see 'nsbox image --help')", argv[optind - 1]); return EXIT_SETUP;
		}
	const char *sub = optind < argc ? argv[optind] : NULL;
	int nargs = sub ? argc - optind - 1 : 0;
	char **args = argv + optind + 1;
	if (!sub) {
		fputs(image_usage, stderr);
		return EXIT_SETUP;
	}
	if (build_only && strcmp(sub, "build") != 0) {
		print_msg("image %s: '%s' is an option of 'image build'", sub, build_only);
		return EXIT_SETUP;
	}
	nsbox_error *e = NULL;
	if (!strcmp(sub, "build") && nargs <= 1) {
		o.name = nargs ? args[0] : NULL;
		return build(o);
	}
	if (!strcmp(sub, "import") && nargs == 2)
		return nsbox_image_import(args[0], args[1], &e) < 0 ? image_fail(e) : list_one(args[0]);
	if (!strcmp(sub, "ls") && nargs == 0)
		return list();
	if (!strcmp(sub, "rm") && nargs == 1)
		return nsbox_image_remove(args[0], &e) < 0 ? image_fail(e) : 0;
	if (strcmp(sub, "build") && strcmp(sub, "import") && strcmp(sub, "ls") && strcmp(sub, "rm"))
		print_msg("image: unknown subcommand '%s' (see 'nsbox image --help')", sub);
	else
		print_msg("image %s: wrong number of arguments\n%s", sub, image_usage);
	return EXIT_SETUP;
}
