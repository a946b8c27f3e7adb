/* `nsbox run-code --lang python|node|bash (-c CODE | FILE | -) [RUN OPTIONS]`:
 * the agent tool's job. The code is written into the sandbox's /tmp during
 * setup (never through a host path) and run by the language's interpreter,
 * with every `nsbox run` option available. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"


static int read_all(int fd, char **out, size_t *len)
{
	size_t cap = 65536, n = 0;
	char *b = malloc(cap);
	for (;;) {
		if (!b)
			return -ENOMEM;
		if (n == cap) {
			if (cap >= (64u << 20))
				return free(b), -EFBIG;
			char *nb = realloc(b, cap *= 2);
			if (!nb)
				return free(b), -ENOMEM;
			b = nb;
		}
		ssize_t r = read(fd, b + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			free(b);
			return -e;
		}
		if (r == 0)
			break;
		n += (size_t) r;
	}
	*out = b;
	*len = n;
	return 0;
}

static bool known_language(const char *l)
{
	for (const char *const *n = nsbox_code_languages(); *n; n++)
		if (!strcmp(*n, l))
			return true;
	return false;
}

int cmd_run_code(int argc, char **argv)
{
	const char *lang = NULL;
	const char *code = NULL, *source = NULL;
	/* Take out our own options; pass the rest to the run parser. */
	char **rest = calloc((size_t) argc + 1, sizeof(char *));
	if (!rest)
		return EXIT_SETUP;
	int n = 0;
	rest[n++] = "run-code";
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			run_code_help(stdout);
			free(rest);
			return 0;
		} else if ((!strcmp(a, "--lang") || !strcmp(a, "-c")) && i + 1 < argc) {
			if (a[1] == 'c')
				code = argv[++i];
			else
				lang = argv[++i];
		} else if (!strncmp(a, "--lang=", 7)) {
			lang = a + 7;
		} else if (a[0] == '-' && a[1] && !source) {
			rest[n++] = argv[i];
			if (run_option_takes_value(a) && i + 1 < argc)
				rest[n++] = argv[++i];
		} else if (!source) {
			source = a;
		} else {
			print_msg("run-code: unexpected argument '%s' (the code comes from -c, a FILE, or -)", a);
			free(rest);
			return EXIT_SETUP;
		}
	}
	if (lang && !known_language(lang)) {
		print_msg("run-code: unknown language '%s' (python, node, bash)", lang);
		free(rest);
		return EXIT_SETUP;
	}
	if (!lang || (!code && !source) || (code && source)) {
		print_msg("run-code: %s (usage: nsbox run-code --lang python|node|bash (-c CODE | FILE | -))",
		          !lang ? "--lang is required" : code ? "give the code once: -c CODE, a FILE, or -"
		                                               : "no code given");
		free(rest);
		return EXIT_SETUP;
	}
	char *text = NULL;
	size_t len = 0;
	if (code) {
		text = strdup(code);
		len = text ? strlen(text) : 0;
	} else {
		int fd = strcmp(source, "-") ? open(source, O_RDONLY | O_CLOEXEC) : 0;
		int r = fd < 0 ? -errno : read_all(fd, &text, &len);
		if (fd > 0)
			close(fd);
		if (r < 0) {
			print_msg("run-code: read '%s': %s", source, strerror(-r));
			free(rest);
			return EXIT_SETUP;
		}
	}
	run_extra extra = { .data = text ? text : "", .len = len, .lang = lang };
	int rc = run_with(n, rest, &extra);
	free(text);
	free(rest);
	return rc;
}
