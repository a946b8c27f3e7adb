/* docker images, pull and build: nsbox's image store and its commands
 * (`nsbox image ls`, `image pull`, `image build -f`). Docker's references
 * become image names as nsbox image pull names them (NAME, NAME-TAG). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "docker/docker.h"
#include "opts.h"

/* ---- images --------------------------------------------------------------------- */

enum { IM_QUIET = 1, IM_ALL, IM_NO_TRUNC, IM_HELP };
static const opt_def images_defs[] = {
	{ "quiet", 'q', OPT_BOOL, IM_QUIET, "only the image ids", NULL },
	{ "all", 'a', OPT_BOOL, IM_ALL, "accepted: nsbox keeps no intermediate images", NULL },
	{ "no-trunc", 0, OPT_BOOL, IM_NO_TRUNC, "whole ids", NULL },
	{ "help", 0, NULL, IM_HELP, "print this help", NULL },
	{ 0 },
};

static void size_text(uint64_t b, char *buf, size_t len)
{
	/* Docker's (go-units HumanSize): decimal units. */
	if (b >= 1000000000)
		snprintf(buf, len, "%.3gGB", (double) b / 1e9);
	else if (b >= 1000000)
		snprintf(buf, len, "%.3gMB", (double) b / 1e6);
	else if (b >= 1000)
		snprintf(buf, len, "%.3gkB", (double) b / 1e3);
	else
		snprintf(buf, len, "%lluB", (unsigned long long) b);
}

int docker_cmd_images(int argc, char **argv)
{
	opt_state st;
	opt_init(&st, images_defs, argc, argv, false);
	const char *v;
	const opt_def *d;
	char err[256];
	bool quiet = false, no_trunc = false;
	for (int id; (id = opt_next(&st, &v, &d, err, sizeof(err))) != OPT_DONE;) {
		int b = d && !opt_has_value(d) ? opt_bool(v) : 1;
		if (id == OPT_ERROR || b < 0 || id == OPT_OPERAND) {
			print_msg("docker images: %s", id == OPT_ERROR ? err
			                               : id == OPT_OPERAND ? "nsbox lists every image (no REPOSITORY filter)"
			                                                   : "invalid boolean");
			return DOCKER_EXIT_CMD;
		}
		if (id == IM_QUIET)
			quiet = b;
		else if (id == IM_NO_TRUNC)
			no_trunc = b;
		else if (id == IM_HELP) {
			fputs("Usage: nsbox docker images [OPTIONS]\nThe images of nsbox's store (nsbox image ls), as Docker "
			      "lists them: the\nimage's name is its REPOSITORY, its TAG is latest.\n\n", stdout);
			opt_help(stdout, images_defs);
			return 0;
		}
	}
	nsbox_image_info *im = NULL;
	size_t n = 0;
	nsbox_error *e = NULL;
	if (nsbox_image_list(&im, &n, &e) < 0) {
		print_error(e);
		nsbox_error_free(e);
		return DOCKER_EXIT_CMD;
	}
	if (!quiet)
		printf("%-20s %-10s %-14s %-16s %s\n", "REPOSITORY", "TAG", "IMAGE ID", "CREATED", "SIZE");
	for (size_t i = 0; i < n; i++) {
		const char *digest = im[i].digest ? im[i].digest + 7 : "-";
		char idbuf[80];
		snprintf(idbuf, sizeof(idbuf), "%s%.*s", no_trunc && im[i].digest ? "sha256:" : "", no_trunc ? 64 : 12, digest);
		if (quiet) {
			printf("%s\n", idbuf);
			continue;
		}
		char created[64] = "N/A", size[32];
		struct tm tm = { 0 };
		if (im[i].created && strptime(im[i].created, "%Y-%m-%dT%H:%M:%S", &tm)) {
			long long s = (long long) (time(NULL) - timegm(&tm));
			if (s < 3600)
				snprintf(created, sizeof(created), "%lld minutes ago", s / 60);
			else if (s < 48 * 3600)
				snprintf(created, sizeof(created), "%lld hours ago", s / 3600);
			else
				snprintf(created, sizeof(created), "%lld days ago", s / 86400);
		}
		size_text(im[i].size_bytes, size, sizeof(size));
		printf("%-20s %-10s %-14s %-16s %s\n", im[i].name, "latest", idbuf, created, size);
	}
	nsbox_image_list_free(im, n);
	return 0;
}

/* ---- pull, build: nsbox image pull / image build -f ------------------------------ */

enum { PL_QUIET = 1, PL_ALL_TAGS, PL_PLATFORM, PL_TRUST, PL_HELP };
static const opt_def pull_defs[] = {
	{ "quiet", 'q', OPT_BOOL, PL_QUIET, "accepted: nsbox shows no pull progress but on a terminal", NULL },
	{ "disable-content-trust", 0, OPT_BOOL, PL_TRUST, "accepted: every blob is checked against its digest", NULL },
	{ "help", 0, NULL, PL_HELP, "print this help", NULL },
	{ "all-tags", 'a', OPT_BOOL, PL_ALL_TAGS, NULL, NULL },
	{ "platform", 0, "P", PL_PLATFORM, NULL, NULL },
	{ 0 },
};

/* Docker takes a registry on the loopback (localhost, 127.0.0.0/8, ::1)
 * as insecure: plain HTTP is tried there. (Every blob is still checked
 * against its digest.) */
static bool loopback_registry(const char *ref)
{
	const char *slash = strchr(ref, '/');
	char host[256];
	if (!slash || (size_t) (slash - ref) >= sizeof(host))
		return false;
	snprintf(host, sizeof(host), "%.*s", (int) (slash - ref), ref);
	if (host[0] == '[')
		return !strncmp(host, "[::1]", 5);
	host[strcspn(host, ":")] = '\0';
	return !strcmp(host, "localhost") || !strncmp(host, "127.", 4);
}

int docker_cmd_pull(int argc, char **argv)
{
	opt_state st;
	opt_init(&st, pull_defs, argc, argv, false);
	const char *v, *ref = NULL;
	const opt_def *d;
	char err[256];
	for (int id; (id = opt_next(&st, &v, &d, err, sizeof(err))) != OPT_DONE;) {
		int b = id > 0 && !opt_has_value(d) ? opt_bool(v) : 1;
		switch (b < 0 ? OPT_ERROR : id) {
		case OPT_OPERAND:
			if (ref) {
				print_msg("docker pull: one image at a time ('%s' and '%s')", ref, v);
				return DOCKER_EXIT_CMD;
			}
			ref = v;
			break;
		case PL_QUIET: case PL_TRUST: break;
		case PL_HELP:
			fputs("Usage: nsbox docker pull [OPTIONS] REF\nnsbox image pull REF: the image, named as 'docker images' "
			      "shows it\n(python:3.12 -> python-3.12), for docker run.\n\n", stdout);
			opt_help(stdout, pull_defs);
			return 0;
		case PL_ALL_TAGS:
			if (!b)
				break;
			print_msg("docker pull: --all-tags: refused: nsbox pulls one reference at a time");
			return DOCKER_EXIT_CMD;
		case PL_PLATFORM:
			print_msg("docker pull: --platform: refused: nsbox pulls this machine's platform only");
			return DOCKER_EXIT_CMD;
		default:
			print_msg("docker pull: %s (see 'nsbox docker pull --help')", b < 0 ? "invalid boolean" : err);
			return DOCKER_EXIT_CMD;
		}
	}
	if (!ref) {
		print_msg("docker pull: usage: nsbox docker pull [OPTIONS] REF");
		return DOCKER_EXIT_CMD;
	}
	char *pv[] = { "image", "pull", loopback_registry(ref) ? "--tls-verify=false" : "--", (char *) ref, NULL };
	return cmd_image(4, pv) == 0 ? 0 : DOCKER_EXIT_CMD;
}

enum { B_FILE = 1, B_TAG, B_NO_CACHE, B_QUIET, B_IIDFILE, B_PULL, B_ACCEPT, B_HELP, B_REFUSED };
/* (A refused row holds its reason where a row holds its policy key.) */
static const opt_def build_defs[] = {
	{ "file", 'f', "FILE", B_FILE, "the Dockerfile (default: CONTEXT/Dockerfile)", NULL },
	{ "tag", 't', "NAME[:TAG]", B_TAG, "the image's name, as docker images shows it\n(NAME, or NAME-TAG)", NULL },
	{ "no-cache", 0, OPT_BOOL, B_NO_CACHE, "run every step again (nsbox image build --rebuild)", NULL },
	{ "quiet", 'q', OPT_BOOL, B_QUIET, "print only the image's id (its digest) on stdout", NULL },
	{ "iidfile", 0, "FILE", B_IIDFILE, "write the image's id to FILE", NULL },
	{ "pull", 0, OPT_BOOL, B_PULL, "false only: FROM names an image of nsbox's store", NULL },
	{ "rm", 0, OPT_BOOL, B_ACCEPT, "accepted: nsbox leaves no intermediate containers", NULL },
	{ "force-rm", 0, OPT_BOOL, B_ACCEPT, "accepted: nsbox leaves no intermediate containers", NULL },
	{ "progress", 0, "TYPE", B_ACCEPT, "accepted: nsbox prints its steps on stderr", NULL },
	{ "help", 0, NULL, B_HELP, "print this help", NULL },
	{ "build-arg", 0, "A", B_REFUSED, NULL, "nsbox's Dockerfiles have no ARG" },
	{ "target", 0, "T", B_REFUSED, NULL, "nsbox builds have one stage" },
	{ "platform", 0, "P", B_REFUSED, NULL, "nsbox builds for this machine's platform only" },
	{ "network", 0, "N", B_REFUSED, NULL, "each step's network is nsbox's (apt, pip and npm reach their indexes; "
	  "nsbox image build --allow-host for more)" },
	{ "add-host", 0, "H", B_REFUSED, NULL, "each step's network is nsbox's" },
	{ "secret", 0, "S", B_REFUSED, NULL, "nsbox builds take no secrets" },
	{ "ssh", 0, "S", B_REFUSED, NULL, "nsbox builds take no secrets" },
	{ "cache-from", 0, "C", B_REFUSED, NULL, "nsbox keeps each step's layer itself (nsbox image prune)" },
	{ "cache-to", 0, "C", B_REFUSED, NULL, "nsbox keeps each step's layer itself (nsbox image prune)" },
	{ "output", 'o', "O", B_REFUSED, NULL, "the image goes to nsbox's store" },
	{ "push", 0, OPT_BOOL, B_REFUSED, NULL, "the image goes to nsbox's store" },
	{ "label", 0, "L", B_REFUSED, NULL, "nsbox images have no labels" },
	{ "squash", 0, OPT_BOOL, B_REFUSED, NULL, "nsbox keeps the layers it builds" },
	{ 0 },
};

typedef struct build_opts {
	const char *file, *tag, *iidfile, *context;
	bool no_cache, quiet;
} build_opts;

static void build_help(void)
{
	fputs("Usage: nsbox docker build [OPTIONS] -t NAME[:TAG] CONTEXT\nnsbox image build NAME -f Dockerfile CONTEXT: "
	      "a declarative build on an image of\nnsbox's store (FROM, RUN, COPY, ENV, WORKDIR, USER).\n\n", stdout);
	opt_help(stdout, build_defs);
}

/* 1: --help was printed; 0; -1 having said why. */
static int parse_build(int argc, char **argv, build_opts *b)
{
	opt_state st;
	opt_init(&st, build_defs, argc, argv, false);
	const char *v;
	const opt_def *d;
	char err[256];
	for (int id; (id = opt_next(&st, &v, &d, err, sizeof(err))) != OPT_DONE;) {
		int on = id > 0 && !opt_has_value(d) ? opt_bool(v) : 1;
		switch (on < 0 ? OPT_ERROR : id) {
		case OPT_OPERAND:
			if (b->context) {
				print_msg("docker build: one context ('%s' and '%s')", b->context, v);
				return -1;
			}
			b->context = v;
			break;
		case B_FILE: b->file = v; break;
		case B_TAG:
			if (b->tag) {
				print_msg("docker build: one --tag (nsbox names an image once)");
				return -1;
			}
			b->tag = v;
			break;
		case B_NO_CACHE: b->no_cache = on; break;
		case B_QUIET: b->quiet = on; break;
		case B_IIDFILE: b->iidfile = v; break;
		case B_PULL:
			if (!on)
				break;
			print_msg("docker build: --pull: refused: FROM names an image of nsbox's store (nsbox docker pull first)");
			return -1;
		case B_ACCEPT: break;
		case B_HELP: build_help(); return 1;
		case B_REFUSED:
			if (!opt_has_value(d) && !on)
				break;
			print_msg("docker build: --%s: refused: %s", d->name, d->key);
			return -1;
		default:
			print_msg("docker build: %s (see 'nsbox docker build --help')", on < 0 ? "invalid boolean" : err);
			return -1;
		}
	}
	if (!b->context || !strcmp(b->context, "-") || strstr(b->context, "://") || !strncmp(b->context, "git@", 4)) {
		print_msg("docker build: %s: nsbox builds from a local directory (docker build -t NAME DIR)",
		          b->context ? "a context from stdin or a URL" : "no context given");
		return -1;
	}
	if (!b->tag) {
		print_msg("docker build: give the image a name (-t NAME): nsbox's images are known by name");
		return -1;
	}
	return 0;
}

/* The image's id, as Docker prints it: sha256:DIGEST. */
static int image_id(const char *name, char *out, size_t len)
{
	nsbox_image_info *v = NULL;
	size_t n = 0;
	int r = -1;
	if (nsbox_image_list(&v, &n, NULL) == 0)
		for (size_t i = 0; i < n && r < 0; i++)
			if (!strcmp(v[i].name, name) && v[i].digest)
				r = snprintf(out, len, "%s", v[i].digest) < (int) len ? 0 : -1;
	nsbox_image_list_free(v, n);
	return r;
}

int docker_cmd_build(int argc, char **argv)
{
	build_opts b = { 0 };
	int p = parse_build(argc, argv, &b);
	if (p)
		return p > 0 ? 0 : DOCKER_EXIT_CMD;
	char name[256], err[512], file[4096];
	if (!docker_image_name(b.tag, name, sizeof(name), err, sizeof(err))) {
		print_msg("docker build: --tag: %s", err);
		return DOCKER_EXIT_CMD;
	}
	if (!b.file)
		snprintf(file, sizeof(file), "%s/Dockerfile", b.context);
	char *bv[] = { "image", "build", name, "-f", (char *) (b.file ? b.file : file), b.no_cache ? "--rebuild" : "--",
	               (char *) b.context, NULL };
	if (cmd_image(7, bv) != 0)
		return DOCKER_EXIT_CMD;
	char id[128];
	if (image_id(name, id, sizeof(id)) < 0) {
		print_msg("docker build: image '%s' has no digest", name);
		return DOCKER_EXIT_CMD;
	}
	if (b.quiet)
		printf("%s\n", id);
	if (b.iidfile) {
		int fd = open(b.iidfile, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0 || write(fd, id, strlen(id)) != (ssize_t) strlen(id)) {
			print_msg("docker build: --iidfile '%s': %s", b.iidfile, strerror(errno));
			if (fd >= 0)
				close(fd);
			return DOCKER_EXIT_CMD;
		}
		close(fd);
	}
	return 0;
}
