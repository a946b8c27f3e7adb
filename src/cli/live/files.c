/* `nsbox cp` and `nsbox ls`: files in and out of a started sandbox through
 * the library's files API (nsbox_file_*): binary-exact, bounded by
 * files.max_size, resolved inside the sandbox as its user. On the host, a
 * download is written to a new file beside its destination and renamed
 * over it only when whole (nothing half-written is left, nothing is lost on
 * a failure), with the mode the host gives new files: nothing set-id, no
 * device, no link crosses from the sandbox. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "live/live_cli.h"

/* NAME:PATH? (A local path with a colon is written ./a:b.) */
static bool remote_spec(const char *s, char *name, size_t len, const char **path)
{
	const char *colon = strchr(s, ':');
	if (!colon || colon == s || memchr(s, '/', (size_t) (colon - s)) || (size_t) (colon - s) >= len)
		return false;
	snprintf(name, len, "%.*s", (int) (colon - s), s);
	*path = colon + 1;
	return true;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

static int upload(nsbox_sandbox *sb, const char *src, const char *dst)
{
	int fd = strcmp(src, "-") ? open(src, O_RDONLY | O_CLOEXEC | O_NOCTTY) : 0;
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		print_msg("cp: open '%s': %s", src, strerror(errno));
		return EXIT_SETUP;
	}
	if (S_ISDIR(st.st_mode)) {
		print_msg("cp: '%s' is a directory: cp copies one file (a tree goes as an archive: "
		          "tar -c DIR | nsbox exec -i NAME -- tar -x -C DEST)", src);
		if (fd > 0)
			close(fd);
		return EXIT_SETUP;
	}
	/* Into a directory (DST/, or one that exists): the source's name. */
	char *target = NULL;
	nsbox_file_info fi = { 0 };
	bool into = dst[0] == '\0' || dst[strlen(dst) - 1] == '/' ||
	            (nsbox_file_stat(sb, dst, &fi, NULL) == 0 && fi.type == 'd');
	free(fi.name);
	free(fi.path);
	if (into && !strcmp(src, "-")) {
		print_msg("cp: '%s' is a directory: name the file for stdin", dst);
		return EXIT_SETUP;
	}
	if (into && asprintf(&target, "%s%s%s", dst, dst[0] && dst[strlen(dst) - 1] != '/' ? "/" : "",
	                     base_name(src)) < 0)
		return EXIT_SETUP;
	nsbox_error *e = NULL;
	unsigned mode = S_ISREG(st.st_mode) ? (st.st_mode & 0777) : 0644;
	int r = nsbox_file_write(sb, target ? target : dst, fd, mode, 0, &e);
	if (fd > 0)
		close(fd);
	free(target);
	if (r < 0) {
		print_error(e);
		nsbox_error_free(e);
		return EXIT_SETUP;
	}
	return 0;
}

static int download(nsbox_sandbox *sb, const char *src, const char *dst)
{
	nsbox_error *e = NULL;
	if (!strcmp(dst, "-")) {
		if (nsbox_file_read(sb, src, 1, 0, NULL, &e) < 0) {
			print_error(e);
			nsbox_error_free(e);
			return EXIT_SETUP;
		}
		return 0;
	}
	struct stat st;
	char *target = NULL;
	if (stat(dst, &st) == 0 && S_ISDIR(st.st_mode) &&
	    asprintf(&target, "%s/%s", dst, base_name(src)) < 0)
		return EXIT_SETUP;
	const char *to = target ? target : dst;
	/* A new file beside the destination, renamed over it when whole. */
	char tmp[PATH_MAX];
	unsigned char rnd[4] = { 0 };
	(void) getrandom(rnd, sizeof(rnd), GRND_NONBLOCK);
	const char *slash = strrchr(to, '/');
	int n = snprintf(tmp, sizeof(tmp), "%.*s.nsbox-cp-%02x%02x%02x%02x", slash ? (int) (slash - to + 1) : 0, to,
	                 rnd[0], rnd[1], rnd[2], rnd[3]);
	int fd = n > 0 && (size_t) n < sizeof(tmp) ? open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)
	                                           : -1;
	if (fd < 0) {
		print_msg("cp: create a file beside '%s': %s", to, strerror(errno));
		free(target);
		return EXIT_SETUP;
	}
	int r = nsbox_file_read(sb, src, fd, 0, NULL, &e);
	if (close(fd) < 0 && r == 0)
		r = -errno, print_msg("cp: write '%s': %s", to, strerror(errno));
	if (r == 0 && rename(tmp, to) < 0) {
		r = -errno;
		print_msg("cp: rename onto '%s': %s", to, strerror(errno));
	}
	if (r < 0) {
		(void) unlink(tmp);
		if (e)
			print_error(e);
	}
	nsbox_error_free(e);
	free(target);
	return r < 0 ? EXIT_SETUP : 0;
}

int cmd_cp(int argc, char **argv)
{
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("Usage: nsbox cp SRC NAME:DST    (a file into sandbox NAME; SRC - is stdin)\n"
		       "   or: nsbox cp NAME:SRC DST    (a file out of it; DST - is stdout)\n"
		       "Binary-exact, up to files.max_size (256 MiB by default). Paths inside resolve\n"
		       "in the sandbox's root as its user; a relative one is from its working\n"
		       "directory. A local path with a colon is written ./a:b.\n");
		return 0;
	}
	if (argc != 3) {
		print_msg("cp: usage: nsbox cp SRC NAME:DST | NAME:SRC DST");
		return EXIT_SETUP;
	}
	char n1[64], n2[64];
	const char *p1, *p2;
	bool r1 = remote_spec(argv[1], n1, sizeof(n1), &p1), r2 = remote_spec(argv[2], n2, sizeof(n2), &p2);
	if (r1 == r2) {
		print_msg("cp: one of SRC and DST is NAME:PATH, inside a sandbox (the other a local path or -)");
		return EXIT_SETUP;
	}
	nsbox_sandbox *sb = live_cli_connect(r1 ? n1 : n2);
	if (!sb)
		return EXIT_SETUP;
	int rc = r1 ? download(sb, p1, argv[2]) : upload(sb, argv[1], p2);
	nsbox_sandbox_free(sb);
	return rc;
}

int cmd_ls(int argc, char **argv)
{
	bool json = argc > 1 && !strcmp(argv[argc - 1], "--json");
	int nargs = argc - json;
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("Usage: nsbox ls NAME [PATH] [--json]\nList a directory inside sandbox NAME (its working "
		       "directory by default): type, mode, size, time, name.\n");
		return 0;
	}
	if (nargs < 2 || nargs > 3) {
		print_msg("ls: usage: nsbox ls NAME [PATH] [--json]");
		return EXIT_SETUP;
	}
	nsbox_sandbox *sb = live_cli_connect(argv[1]);
	if (!sb)
		return EXIT_SETUP;
	nsbox_file_info *v = NULL;
	size_t n = 0;
	nsbox_error *e = NULL;
	int rc = 0;
	if (nsbox_file_list(sb, nargs == 3 ? argv[2] : ".", &v, &n, &e) < 0) {
		print_error(e);
		nsbox_error_free(e);
		nsbox_sandbox_free(sb);
		return EXIT_SETUP;
	}
	json_t *a = json ? json_array() : NULL;
	for (size_t i = 0; i < n; i++) {
		if (json) {
			/* A name that is not UTF-8 is given escaped (\xHH). */
			char *en = nsbox_escape(v[i].name), *ep = nsbox_escape(v[i].path);
			json_t *jn = json_string(v[i].name), *jp = json_string(v[i].path);
			char t[2] = { v[i].type, 0 };
			json_array_append_new(a, json_pack("{s:o, s:o, s:s, s:i, s:I, s:I}", "name",
			                                   jn ? jn : json_string(en ? en : "?"), "path",
			                                   jp ? jp : json_string(ep ? ep : "?"), "type", t, "mode",
			                                   (int) v[i].mode, "size", (json_int_t) v[i].size, "mtime_ns",
			                                   (json_int_t) v[i].mtime_ns));
			free(en);
			free(ep);
			continue;
		}
		char when[32] = "";
		time_t t = (time_t) (v[i].mtime_ns / 1000000000);
		struct tm tm;
		if (gmtime_r(&t, &tm))
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M", &tm);
		/* A name from the sandbox, shown to a person: escaped. */
		char *name = nsbox_escape(v[i].name);
		printf("%c%04o %12" PRIu64 " %s %s\n", v[i].type == 'f' ? '-' : v[i].type, v[i].mode, v[i].size, when,
		       name ? name : "?");
		free(name);
	}
	if (json) {
		char *text = json_dumps(a, JSON_COMPACT);
		if (text)
			printf("%s\n", text);
		else
			rc = EXIT_SETUP;
		free(text);
		json_decref(a);
	}
	nsbox_file_info_free(v, n);
	nsbox_sandbox_free(sb);
	return rc;
}
