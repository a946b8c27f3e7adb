/* `nsbox image build | pull | import | ls | rm | prune`. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "image_cli.h"

static const char image_usage[] =
	"Usage: nsbox image build [NAME] [--recipe minimal|default|dev] [--rebuild] [--mirror URL] [--suite SUITE]\n"
	"       nsbox image build NAME --from BASE [STEP...] [--allow-host HOST] [--rebuild] [--json] [CONTEXT]\n"
	"       nsbox image build NAME -f Dockerfile|IMAGE.yaml [STEP...] [--rebuild] [--json] [CONTEXT]\n"
	"       nsbox image pull REF [NAME] [--tls-verify=false] [--authfile FILE] [--json]\n"
	"       nsbox image import NAME SOURCE   (tar, docker save, OCI layout, directory)\n"
	"       nsbox image ls\n"
	"       nsbox image rm NAME\n"
	"       nsbox image prune               (the cached layers of declarative builds)\n"
	"\n"
	"Debootstrap builds (root):\n"
	"  --recipe NAME       minimal: python3, nodejs, npm, git; default: that and numpy, pandas,\n"
	"                      requests, httpx, matplotlib, curl, procps; dev: that and build-essential,\n"
	"                      autoconf, pkg-config\n"
	"  --mirror URL        the Debian archive to build from (default: the host's apt source)\n"
	"  --suite SUITE       the Debian release (default: the host's)\n"
	"Declarative builds (steps in order, each in a sandbox; a step whose inputs are unchanged\n"
	"is not run again):\n"
	"  --from BASE         the image to build on\n"
	"  -f, --file PATH     a Dockerfile (FROM, RUN, COPY, ENV, WORKDIR, USER) or an image file\n"
	"                      (*.yaml); its steps come before the command line's\n"
	"  --apt PKGS          apt-get install PKGS (root only)\n"
	"  --pip ARGS          pip install ARGS\n"
	"  --npm ARGS          npm install -g ARGS\n"
	"  --copy SRC:DST      copy SRC of CONTEXT (default: the current directory) to DST\n"
	"  --run CMD           run a shell command\n"
	"  --env NAME=VALUE    a variable for the steps after it\n"
	"  --workdir DIR       make DIR; the steps after it run there\n"
	"  --user USER         the --run steps after it run as USER\n"
	"  --allow-host HOST   every step may reach HOST[:PORT] too (apt: the image's archives,\n"
	"                      pip: pypi.org, npm: registry.npmjs.org are allowed to their steps)\n"
	"Pulls:\n"
	"  --tls-verify=false  a plain-HTTP (or self-signed) registry\n"
	"  --authfile FILE     registry credentials (default: ~/.docker/config.json)\n"
	"Common:\n"
	"  --rebuild           build again even if the image is up to date; run every step\n"
	"  --json              print the image as JSON on stdout; no progress\n"
	"  -h, --help          print this help\n";

int image_describe(const char *name)
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

int image_print_json(const char *name, json_t *extra)
{
	nsbox_image_info *v = NULL;
	size_t n = 0;
	nsbox_error *e = NULL;
	json_t *o = NULL;
	if (nsbox_image_list(&v, &n, &e) < 0) {
		print_error(e);
		nsbox_error_free(e);
		json_decref(extra);
		return EXIT_SETUP;
	}
	for (size_t i = 0; i < n && !o; i++)
		if (!strcmp(v[i].name, name))
			o = json_pack("{s:s,s:s?,s:I,s:s?,s:s?,s:s?,s:s?}", "name", v[i].name, "digest", v[i].digest,
			              "size_bytes", (json_int_t) v[i].size_bytes, "created", v[i].created, "source",
			              v[i].source, "path", v[i].path, "stripped", v[i].stripped);
	nsbox_image_list_free(v, n);
	if (!o) {
		print_msg("image '%s': not found after it was made", name);
		json_decref(extra);
		return EXIT_SETUP;
	}
	if (extra)
		json_object_update(o, extra);
	json_decref(extra);
	char *text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!text)
		return EXIT_SETUP;
	puts(text);
	free(text);
	return 0;
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

static int pull(const char *ref, const char *name, bool tls_verify, const char *authfile, bool json)
{
	nsbox_error *e = NULL;
	char *derived = NULL;
	if (!name && nsbox_image_ref_name(ref, &derived, &e) < 0)
		return image_fail(e);
	nsbox_image_pull_options o = { .version = NSBOX_IMAGE_PULL_OPTIONS_VERSION, .ref = ref,
	                               .name = name ? name : derived, .tls_verify = tls_verify,
	                               .authfile = authfile, .log_fd = -1 };
	if (!json && isatty(2))
		print_msg("pulling '%s' into image '%s'", ref, o.name);
	int r = nsbox_image_pull(&o, &e);
	if (r < 0) {
		free(derived);
		return image_fail(e);
	}
	r = json ? image_print_json(o.name, NULL) : image_describe(o.name);
	free(derived);
	return r;
}

static int prune(void)
{
	uint64_t freed = 0;
	nsbox_error *e = NULL;
	if (nsbox_image_prune(&freed, &e) < 0)
		return image_fail(e);
	print_msg("removed the cached build layers: %.1f MiB", (double) freed / (1 << 20));
	return 0;
}

/* Which subcommand an option belongs to, for the error that names it. */
enum { FOR_BUILD = 1, FOR_RECIPE = 2, FOR_SPEC = 4, FOR_PULL = 8, FOR_JSON = 16 };

static bool add_step(image_build_cli *c, const char *kind, const char *arg, const char *opt)
{
	if (c->n_steps == IMAGE_CLI_MAX)
		return false;
	c->steps[c->n_steps].kind = kind;
	c->steps[c->n_steps].arg = arg;
	c->steps[c->n_steps++].opt = opt;
	return true;
}

/* Options anywhere on the line, as for `nsbox run`; each subcommand takes
 * only its own. */
int cmd_image(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "rebuild", no_argument, NULL, 'r' },
		{ "mirror", required_argument, NULL, 'm' },
		{ "suite", required_argument, NULL, 's' },
		{ "recipe", required_argument, NULL, 'R' },
		{ "from", required_argument, NULL, 'F' },
		{ "file", required_argument, NULL, 'f' },
		{ "apt", required_argument, NULL, 'A' },
		{ "pip", required_argument, NULL, 'P' },
		{ "npm", required_argument, NULL, 'N' },
		{ "copy", required_argument, NULL, 'C' },
		{ "run", required_argument, NULL, 'X' },
		{ "env", required_argument, NULL, 'E' },
		{ "workdir", required_argument, NULL, 'W' },
		{ "user", required_argument, NULL, 'U' },
		{ "allow-host", required_argument, NULL, 'H' },
		{ "json", no_argument, NULL, 'j' },
		{ "tls-verify", required_argument, NULL, 'T' },
		{ "authfile", required_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	static image_build_cli c;
	memset(&c, 0, sizeof(c));
	c.o = (nsbox_image_build_options){ .version = NSBOX_IMAGE_BUILD_OPTIONS_VERSION, .log_fd = 2 };
	bool tls_verify = true;
	const char *authfile = NULL;
	unsigned used = 0;
	char first[5][32] = { "" };   /* the first option of each kind, for errors */
	int ch, li;
	opterr = 0;
	optind = 0;   /* glibc: start afresh, permuting */
	for (;;) {
		li = -1;
		if ((ch = getopt_long(argc, argv, ":hf:", opts, &li)) == -1)
			break;
		char opt[32];
		if (li >= 0)
			snprintf(opt, sizeof(opt), "--%s", opts[li].name);
		else
			snprintf(opt, sizeof(opt), "-%c", ch);
		unsigned kind = 0;
		bool ok = true;
		switch (ch) {
		case 'r': c.o.rebuild = true; kind = FOR_BUILD; break;
		case 'm': c.o.mirror = optarg; kind = FOR_RECIPE; break;
		case 's': c.o.suite = optarg; kind = FOR_RECIPE; break;
		case 'R': c.o.recipe = optarg; kind = FOR_RECIPE; break;
		case 'F': c.from = optarg; kind = FOR_SPEC; break;
		case 'f': c.file = optarg; kind = FOR_SPEC; break;
		case 'A': ok = add_step(&c, "apt", optarg, "--apt"); kind = FOR_SPEC; break;
		case 'P': ok = add_step(&c, "pip", optarg, "--pip"); kind = FOR_SPEC; break;
		case 'N': ok = add_step(&c, "npm", optarg, "--npm"); kind = FOR_SPEC; break;
		case 'C': ok = add_step(&c, "copy", optarg, "--copy"); kind = FOR_SPEC; break;
		case 'X': ok = add_step(&c, "run", optarg, "--run"); kind = FOR_SPEC; break;
		case 'E': ok = add_step(&c, "env", optarg, "--env"); kind = FOR_SPEC; break;
		case 'W': ok = add_step(&c, "workdir", optarg, "--workdir"); kind = FOR_SPEC; break;
		case 'U': ok = add_step(&c, "user", optarg, "--user"); kind = FOR_SPEC; break;
		case 'H':
			ok = c.n_allow < IMAGE_CLI_MAX;
			if (ok)
				c.allow[c.n_allow++] = optarg;
			kind = FOR_SPEC;
			break;
		case 'j': c.json = true; kind = FOR_JSON; break;
		case 'T':
			if (strcmp(optarg, "true") && strcmp(optarg, "false")) {
				print_msg("image: --tls-verify takes true or false, not '%s'", optarg);
				return EXIT_SETUP;
			}
			tls_verify = !strcmp(optarg, "true");
			kind = FOR_PULL;
			break;
		case 'a': authfile = optarg; kind = FOR_PULL; break;
		case 'h': fputs(image_usage, stdout); return 0;
		case ':': print_msg("image: option '%s' needs a value", argv[optind - 1]); return EXIT_SETUP;
		default: print_msg("image: unknown option '%s' (see 'nsbox image --help')", argv[optind - 1]); return EXIT_SETUP;
		}
		if (!ok) {
			print_msg("image build: more than %d steps or hosts on the command line", IMAGE_CLI_MAX);
			return EXIT_SETUP;
		}
		for (unsigned b = 0; b < 5; b++)
			if ((kind >> b & 1) && !first[b][0])
				snprintf(first[b], sizeof(first[b]), "%s", opt);
		used |= kind;
	}
	const char *sub = optind < argc ? argv[optind] : NULL;
	int nargs = sub ? argc - optind - 1 : 0;
	char **args = argv + optind + 1;
	if (!sub) {
		fputs(image_usage, stderr);
		return EXIT_SETUP;
	}
	bool build = !strcmp(sub, "build"), is_pull = !strcmp(sub, "pull");
	/* The first option that does not belong to the subcommand. */
	unsigned allowed = build ? FOR_BUILD | FOR_RECIPE | FOR_SPEC | FOR_JSON : is_pull ? FOR_PULL | FOR_JSON : 0;
	for (unsigned b = 0; b < 5; b++)
		if ((used >> b & 1) && !(allowed >> b & 1)) {
			print_msg("image %s: '%s' is an option of 'image %s'", sub, first[b],
			          (1u << b) == FOR_PULL ? "pull" : (1u << b) == FOR_JSON ? "build' and 'image pull" : "build");
			return EXIT_SETUP;
		}
	if (build && (used & FOR_RECIPE) && (used & FOR_SPEC)) {
		print_msg("image build: '%s' is for debootstrap builds, '%s' for builds from an image: not both",
		          first[1], first[2]);
		return EXIT_SETUP;
	}
	nsbox_error *e = NULL;
	if (build && (used & FOR_SPEC)) {
		if (nargs < 1 || nargs > 2) {
			print_msg("image build: a build from an image takes NAME and an optional CONTEXT\n%s", image_usage);
			return EXIT_SETUP;
		}
		if (!c.from && !c.file) {
			print_msg("image build: steps need an image to build on (--from BASE, or -f FILE)");
			return EXIT_SETUP;
		}
		if (c.from && c.file) {
			print_msg("image build: --from and -f both name the base: give it in one place");
			return EXIT_SETUP;
		}
		c.o.name = args[0];
		c.context = nargs == 2 ? args[1] : NULL;
		return image_build_spec(&c);
	}
	if (build && nargs <= 1) {
		c.o.name = nargs ? args[0] : NULL;
		return image_build(c.o, c.json);
	}
	if (is_pull && (nargs == 1 || nargs == 2))
		return pull(args[0], nargs == 2 ? args[1] : NULL, tls_verify, authfile, c.json);
	if (!strcmp(sub, "import") && nargs == 2)
		return nsbox_image_import(args[0], args[1], &e) < 0 ? image_fail(e) : image_describe(args[0]);
	if (!strcmp(sub, "ls") && nargs == 0)
		return list();
	if (!strcmp(sub, "rm") && nargs == 1)
		return nsbox_image_remove(args[0], &e) < 0 ? image_fail(e) : 0;
	if (!strcmp(sub, "prune") && nargs == 0)
		return prune();
	if (!build && !is_pull && strcmp(sub, "import") && strcmp(sub, "ls") && strcmp(sub, "rm") && strcmp(sub, "prune"))
		print_msg("image: unknown subcommand '%s' (see 'nsbox image --help')", sub);
	else
		print_msg("image %s: wrong number of arguments\n%s", sub, image_usage);
	return EXIT_SETUP;
}
