/* `nsbox image build | pull | import | ls | rm | prune`. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "image_cli.h"
#include "opts.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

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
	"A declarative build runs its steps in order, each in a sandbox; a step whose inputs are\n"
	"unchanged is not run again. Its STEPs: --apt, --pip, --npm, --copy, --run, --env,\n"
	"--workdir, --user (those of -f's file come first).\n"
	"\n";

/* Which subcommand an option belongs to, for the error that names it. */
enum { FOR_BUILD = 1, FOR_RECIPE = 2, FOR_SPEC = 4, FOR_PULL = 8, FOR_JSON = 16 };

enum {
	O_REBUILD = 1, O_MIRROR, O_SUITE, O_RECIPE, O_FROM, O_FILE, O_APT, O_PIP, O_NPM, O_COPY, O_RUN, O_ENV,
	O_WORKDIR, O_USER, O_ALLOW, O_JSON, O_TLS, O_AUTHFILE, O_HELP,
};

static const opt_def image_opts[] = {
	{ "recipe", 0, "NAME", O_RECIPE, "debootstrap builds (root): minimal (python3, nodejs, npm, git),\n"
	  "default (that and numpy, pandas, requests, httpx, matplotlib,\ncurl, procps), dev (that and "
	  "build-essential, autoconf,\npkg-config)", NULL },
	{ "mirror", 0, "URL", O_MIRROR, "the Debian archive to build from (default: the host's)", NULL },
	{ "suite", 0, "SUITE", O_SUITE, "the Debian release (default: the host's)", NULL },
	{ "from", 0, "BASE", O_FROM, "a declarative build on the image BASE", NULL },
	{ "file", 'f', "PATH", O_FILE, "a Dockerfile (FROM, RUN, COPY, ENV, WORKDIR, USER) or\nan image file (*.yaml)", NULL },
	{ "apt", 0, "PKGS", O_APT, "step: apt-get install PKGS (root only)", NULL },
	{ "pip", 0, "ARGS", O_PIP, "step: pip install ARGS", NULL },
	{ "npm", 0, "ARGS", O_NPM, "step: npm install -g ARGS", NULL },
	{ "copy", 0, "SRC:DST", O_COPY, "step: copy SRC of CONTEXT (default: .) to DST", NULL },
	{ "run", 0, "CMD", O_RUN, "step: run a shell command", NULL },
	{ "env", 0, "NAME=VALUE", O_ENV, "step: a variable for the steps after it", NULL },
	{ "workdir", 0, "DIR", O_WORKDIR, "step: make DIR; the steps after it run there", NULL },
	{ "user", 0, "USER", O_USER, "step: the --run steps after it run as USER", NULL },
	{ "allow-host", 0, "HOST", O_ALLOW, "every step may reach HOST[:PORT] too (apt: the image's\n"
	  "archives, pip: pypi.org, npm: registry.npmjs.org are\nallowed to their steps)", NULL },
	{ "rebuild", 0, NULL, O_REBUILD, "build again even if the image is up to date; run every step", NULL },
	{ "tls-verify", 0, "BOOL", O_TLS, "pull: false for a plain-HTTP (or self-signed) registry", NULL },
	{ "authfile", 0, "FILE", O_AUTHFILE, "pull: registry credentials (default: ~/.docker/config.json)", NULL },
	{ "json", 0, NULL, O_JSON, "build, pull: the image as JSON on stdout; no progress", NULL },
	{ "help", 'h', NULL, O_HELP, "print this help", NULL },
	{ 0 },
};

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
	static image_build_cli c;
	memset(&c, 0, sizeof(c));
	c.o = (nsbox_image_build_options){ .version = NSBOX_IMAGE_BUILD_OPTIONS_VERSION, .log_fd = 2 };
	bool tls_verify = true;
	const char *authfile = NULL;
	unsigned used = 0;
	char first[5][32] = { "" };   /* the first option of each kind, for errors */
	char *operands[IMAGE_CLI_MAX + 8];
	int n_ops = 0;
	opt_state os;
	opt_init(&os, image_opts, argc, argv, false);
	const char *v;
	const opt_def *d;
	char err[256];
	for (int id; (id = opt_next(&os, &v, &d, err, sizeof(err))) != OPT_DONE;) {
		unsigned kind = 0;
		bool ok = true;
		switch (id) {
		case OPT_ERROR: print_msg("image: %s (see 'nsbox image --help')", err); return EXIT_SETUP;
		case OPT_OPERAND: ok = n_ops < (int) ARRAY_LEN(operands); if (ok) operands[n_ops++] = (char *) v; break;
		case O_REBUILD: c.o.rebuild = true; kind = FOR_BUILD; break;
		case O_MIRROR: c.o.mirror = v; kind = FOR_RECIPE; break;
		case O_SUITE: c.o.suite = v; kind = FOR_RECIPE; break;
		case O_RECIPE: c.o.recipe = v; kind = FOR_RECIPE; break;
		case O_FROM: c.from = v; kind = FOR_SPEC; break;
		case O_FILE: c.file = v; kind = FOR_SPEC; break;
		case O_APT: ok = add_step(&c, "apt", v, "--apt"); kind = FOR_SPEC; break;
		case O_PIP: ok = add_step(&c, "pip", v, "--pip"); kind = FOR_SPEC; break;
		case O_NPM: ok = add_step(&c, "npm", v, "--npm"); kind = FOR_SPEC; break;
		case O_COPY: ok = add_step(&c, "copy", v, "--copy"); kind = FOR_SPEC; break;
		case O_RUN: ok = add_step(&c, "run", v, "--run"); kind = FOR_SPEC; break;
		case O_ENV: ok = add_step(&c, "env", v, "--env"); kind = FOR_SPEC; break;
		case O_WORKDIR: ok = add_step(&c, "workdir", v, "--workdir"); kind = FOR_SPEC; break;
		case O_USER: ok = add_step(&c, "user", v, "--user"); kind = FOR_SPEC; break;
		case O_ALLOW:
			ok = c.n_allow < IMAGE_CLI_MAX;
			if (ok)
				c.allow[c.n_allow++] = v;
			kind = FOR_SPEC;
			break;
		case O_JSON: c.json = true; kind = FOR_JSON; break;
		case O_TLS:
			if (strcmp(v, "true") && strcmp(v, "false")) {
				print_msg("image: --tls-verify takes true or false, not '%s'", v);
				return EXIT_SETUP;
			}
			tls_verify = !strcmp(v, "true");
			kind = FOR_PULL;
			break;
		case O_AUTHFILE: authfile = v; kind = FOR_PULL; break;
		case O_HELP:
			fputs(image_usage, stdout);
			opt_help(stdout, image_opts);
			return 0;
		}
		if (!ok) {
			print_msg("image: more than %d steps, hosts or arguments on the command line", IMAGE_CLI_MAX);
			return EXIT_SETUP;
		}
		for (unsigned b = 0; b < 5; b++)
			if ((kind >> b & 1) && !first[b][0])
				snprintf(first[b], sizeof(first[b]), "--%s", d->name);
		used |= kind;
	}
	/* After "--": operands only. */
	for (; os.i < argc && n_ops < (int) ARRAY_LEN(operands); os.i++)
		operands[n_ops++] = argv[os.i];
	const char *sub = n_ops ? operands[0] : NULL;
	int nargs = sub ? n_ops - 1 : 0;
	char **args = operands + 1;
	if (!sub) {
		fputs(image_usage, stderr);
		opt_help(stderr, image_opts);
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
			print_msg("image build: a build from an image takes NAME and an optional CONTEXT (see 'nsbox image --help')");
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
		print_msg("image %s: wrong number of arguments (see 'nsbox image --help')", sub);
	return EXIT_SETUP;
}
