/* `nsbox image build`: a debootstrap recipe (root), or a declarative build
 * from an image with steps given here, in a YAML image file or in a
 * Dockerfile. Progress per step on a terminal; nothing of it with --json or
 * without a terminal (the tools' output always goes to a log file). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "image_cli.h"

/* The build's step lines ("nsbox: [N/6] ...") go to the terminal when
 * `show`; debootstrap's and apt's hundreds of lines go to the log file
 * only. A child sorts the recipe's output while the library waits for the
 * recipe. Returns its pid and the pipe's write end for the library, or -1. */
static pid_t start_sorter(int log, const char *log_path, const char *name, bool show, int *write_end)
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
			if (!told && show)
				print_msg("building image '%s'; the tools' output goes to %s", name, log_path);
			told = true;
			(void) !write(log, line, strlen(line));
			if (show && !strncmp(line, "nsbox: [", 8)) {
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

typedef struct progress {
	bool show;          /* step lines on the terminal */
	const char *name;
	const char *log_path;
	bool told;
	json_t *steps;      /* --json: the steps, or NULL */
} progress;

static void on_step(void *userdata, unsigned index, unsigned count, const char *what, bool cached)
{
	progress *p = userdata;
	if (p->show) {
		if (!p->told && p->log_path)
			print_msg("building image '%s'; the steps' output goes to %s", p->name, p->log_path);
		p->told = true;
		fprintf(stderr, "nsbox: [%u/%u] %s%s\n", index, count, what, cached ? " (cached)" : "");
		fflush(stderr);
	}
	if (p->steps) {
		json_t *s = json_pack("{s:i,s:s?,s:b}", "index", (json_int_t) index, "step", what, "cached", cached);
		if (s)
			json_array_append_new(p->steps, s);
	}
}

int image_build(nsbox_image_build_options o, bool json)
{
	const char *name = o.name ? o.name : "default";
	const char *tmpdir = getenv("TMPDIR");
	char log_path[4096];
	snprintf(log_path, sizeof(log_path), "%s/nsbox-image-build-XXXXXX.log",
	         tmpdir && tmpdir[0] == '/' ? tmpdir : "/tmp");
	/* Only root builds from a recipe: a user's attempt is refused before
	 * anything runs. */
	int log = geteuid() == 0 || o.spec ? mkostemps(log_path, 4, O_CLOEXEC) : -1;
	progress pr = { .show = !json && isatty(2), .name = name, .log_path = log >= 0 ? log_path : NULL,
	                .steps = json ? json_array() : NULL };
	pid_t sorter = -1;
	if (o.spec) {
		o.log_fd = log;
		o.on_step = on_step;
		o.step_userdata = &pr;
	} else if (log >= 0) {
		sorter = start_sorter(log, log_path, name, pr.show, &o.log_fd);
	}
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
		json_decref(pr.steps);
		return EXIT_SETUP;
	}
	bool kept_log = log >= 0 && lseek(log, 0, SEEK_END) > 0;
	if (log >= 0)
		close(log);
	/* Quiet and successful: nobody was told of the log; it goes. */
	if (kept_log && !pr.show && !json) {
		(void) unlink(log_path);
		kept_log = false;
	}
	if (r == 1 && !json)
		print_msg(o.spec ? "image '%s' is up to date (its base and steps are unchanged); kept (use --rebuild "
		                   "to build it again)"
		                 : "image '%s' exists; kept (use --rebuild to build it again)", name);
	if (json) {
		json_t *extra = json_pack("{s:b,s:s?}", "kept", r == 1, "log", kept_log ? log_path : NULL);
		if (extra && pr.steps)
			json_object_set_new(extra, "steps", pr.steps);
		else
			json_decref(pr.steps);
		return image_print_json(name, extra);
	}
	return image_describe(name);
}

/* ---- the command line's steps --------------------------------------------- */

/* A step from an option: its kind and text, added after the file's. */
typedef struct cli_step {
	const char *kind;
	const char *arg;
	const char *opt;
} cli_step;

static int add_cli_step(nsbox_image_spec *s, const cli_step *st, nsbox_error **e)
{
	if (!strcmp(st->kind, "copy")) {
		/* SRC:DST, split at the last ':' (an image path rarely has one). */
		const char *colon = strrchr(st->arg, ':');
		if (!colon || colon == st->arg || !colon[1]) {
			print_msg("image build: --copy '%s': expected SRC:DST", st->arg);
			return -EINVAL;
		}
		char *src = strndup(st->arg, (size_t) (colon - st->arg));
		const char *args[2] = { src, colon + 1 };
		int r = src ? nsbox_image_spec_add_step(s, "copy", args, 2, st->opt, e) : -ENOMEM;
		free(src);
		return r;
	}
	const char *args[1] = { st->arg };
	return nsbox_image_spec_add_step(s, st->kind, args, 1, st->opt, e);
}

int image_build_spec(image_build_cli *c)
{
	nsbox_image_spec *s = NULL;
	nsbox_error *e = NULL;
	int r = nsbox_image_spec_new(&s, &e);
	if (r == 0 && c->file)
		r = nsbox_image_spec_load(s, c->file, &e);
	if (r == 0 && c->from)
		r = nsbox_image_spec_set_from(s, c->from, &e);
	if (r == 0 && c->context)
		r = nsbox_image_spec_set_context(s, c->context, &e);
	for (size_t i = 0; r == 0 && i < c->n_allow; i++)
		r = nsbox_image_spec_allow_host(s, c->allow[i], &e);
	for (size_t i = 0; r == 0 && i < c->n_steps; i++)
		r = add_cli_step(s, &(cli_step){ c->steps[i].kind, c->steps[i].arg, c->steps[i].opt }, &e);
	if (r < 0) {
		if (e)
			print_error(e);
		nsbox_error_free(e);
		nsbox_image_spec_free(s);
		return EXIT_SETUP;
	}
	c->o.spec = s;
	r = image_build(c->o, c->json);
	nsbox_image_spec_free(s);
	return r;
}
