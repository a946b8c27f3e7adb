/* The changes scan (ws_scan) of a workspace's overlay upper layer, which
 * the payload writes: the input is a script that builds an upper and a
 * lower layer in the scratch directory, one line per entry:
 *
 *   deny GLOB            a workspace.deny_changes rule
 *   LT PATH[\tARG]       L: u upper, l lower, b both
 *                        T: f file (ARG: content), d directory,
 *                           s symlink (ARG: target), w whiteout (0:0),
 *                           p fifo, o opaque directory,
 *                           m chmod (ARG: octal mode), h hard link (ARG:
 *                           the existing path), n ARG nested directories
 *
 * Parents are created as needed, never through a symlink. Then: every
 * change names a clean relative path that exists where its kind says, in
 * sorted order without duplicates; a path a deny rule matches is denied;
 * the JSON and the escaped form are well-formed; the tree can be removed. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <yaml.h>

#include "base/buf.h"
#include "fuzz.h"
#include "base/json.h"
#include "workspace/workspace.h"

/* Walk to the parent of `path` below `root`, creating directories; the
 * last component's name goes in *name. -1 when the path is unusable. */
static int parent_of(int root, char *path, char **name)
{
	int cur = fcntl(root, F_DUPFD_CLOEXEC, 3);
	char *p = path;
	for (;;) {
		while (*p == '/')
			p++;
		char *slash = strchr(p, '/');
		if (!*p || !strncmp(p, "./", 2) || !strcmp(p, ".") || !strncmp(p, "../", 3) || !strcmp(p, "..")) {
			close(cur);
			return -1;
		}
		if (!slash || !slash[strspn(slash, "/")]) {
			if (slash)
				*slash = '\0';
			*name = p;
			return cur;
		}
		*slash = '\0';
		(void) mkdirat(cur, p, 0755);
		int next = openat(cur, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(cur);
		if (next < 0)
			return -1;
		cur = next;
		p = slash + 1;
	}
}

static void make(int root, char type, char *path, const char *arg)
{
	char *name;
	int dir = parent_of(root, path, &name);
	if (dir < 0)
		return;
	int fd;
	switch (type) {
	case 'f':
		fd = openat(dir, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd >= 0) {
			(void) !write(fd, arg, strlen(arg));
			close(fd);
		}
		break;
	case 'd':
		(void) mkdirat(dir, name, 0755);
		break;
	case 'o':
		(void) mkdirat(dir, name, 0755);
		fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0) {
			(void) fsetxattr(fd, "user.overlay.opaque", "y", 1, 0);
			close(fd);
		}
		break;
	case 's':
		(void) symlinkat(*arg ? arg : "x", dir, name);
		break;
	case 'w':
		(void) mknodat(dir, name, S_IFCHR | 0000, makedev(0, 0));
		break;
	case 'p':
		(void) mkfifoat(dir, name, 0644);
		break;
	case 'm':
		(void) fchmodat(dir, name, (mode_t) strtoul(arg, NULL, 8) & 07777, 0);
		break;
	case 'h': {
		char src[4096];
		snprintf(src, sizeof(src), "%s", arg);
		char *sname;
		int sdir = parent_of(root, src, &sname);
		if (sdir >= 0) {
			(void) linkat(sdir, sname, dir, name, 0);
			close(sdir);
		}
		break;
	}
	case 'n': {
		/* A chain of directories: deeper than the scan goes. */
		long n = strtol(arg, NULL, 10);
		int cur = fcntl(dir, F_DUPFD_CLOEXEC, 3);
		const char *nm = name;
		for (long i = 0; i < n && i < 300 && cur >= 0; i++) {
			(void) mkdirat(cur, nm, 0755);
			int next = openat(cur, nm, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			close(cur);
			cur = next;
			nm = "d";
		}
		if (cur >= 0)
			close(cur);
		break;
	}
	}
	close(dir);
}

static bool clean_path(const char *p)
{
	if (!*p || *p == '/' || p[strlen(p) - 1] == '/' || strstr(p, "//"))
		return false;
	for (const char *c = p; *c;) {
		const char *e = strchrnul(c, '/');
		if ((e - c == 1 && c[0] == '.') || (e - c == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		c = *e ? e + 1 : e;
	}
	return true;
}

/* The change's JSON object as nsbox writes it: valid JSON (YAML's flow
 * style reads it), with the path that went in. */
static void check_json(const ws_change *c)
{
	buf b = { 0 };
	buf_puts(&b, "{\"path\":");
	json_cstr(&b, c->path);
	ws_change_json(&b, c);
	buf_puts(&b, "}");
	char *text = buf_steal(&b);
	FUZZ_CHECK(text);
	yaml_parser_t p;
	yaml_document_t doc;
	FUZZ_CHECK(yaml_parser_initialize(&p));
	yaml_parser_set_input_string(&p, (const unsigned char *) text, strlen(text));
	bool valid_utf8 = true;
	for (const unsigned char *s = (const unsigned char *) c->path; *s; s++)
		valid_utf8 &= *s < 0x80;   /* libyaml checks UTF-8; keep to ASCII */
	int ok = yaml_parser_load(&p, &doc);
	if (valid_utf8) {
		if (!ok)
			fprintf(stderr, "bad JSON: %s\n", text);
		FUZZ_CHECK(ok);
		yaml_node_t *root = yaml_document_get_root_node(&doc);
		FUZZ_CHECK(root && root->type == YAML_MAPPING_NODE);
		yaml_node_pair_t *first = root->data.mapping.pairs.start;
		yaml_node_t *v = yaml_document_get_node(&doc, first->value);
		FUZZ_CHECK(v->type == YAML_SCALAR_NODE && !strcmp((char *) v->data.scalar.value, c->path));
	}
	if (ok)
		yaml_document_delete(&doc);
	yaml_parser_delete(&p);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 16384)
		return 0;
	fuzz_scratch_reset();
	int top = open(fuzz_scratch_dir(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	FUZZ_CHECK(top >= 0 && mkdirat(top, "upper", 0755) == 0 && mkdirat(top, "lower", 0755) == 0);
	int up = openat(top, "upper", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int low = openat(top, "lower", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	FUZZ_CHECK(up >= 0 && low >= 0);
	char *script = fuzz_cstr(data, size);
	strv deny = { 0 };
	for (char *save = NULL, *line = strtok_r(script, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "deny ", 5)) {
			if (line[5] && deny.n < 8)
				FUZZ_CHECK(strv_push(&deny, line + 5) == 0);
			continue;
		}
		if (strlen(line) < 4 || line[2] != ' ')
			continue;
		char *tab = strchr(line + 3, '\t');
		if (tab)
			*tab = '\0';
		const char *arg = tab ? tab + 1 : "";
		char path[4096];
		if (line[0] == 'u' || line[0] == 'b') {
			snprintf(path, sizeof(path), "%s", line + 3);
			make(up, line[1], path, arg);
		}
		if (line[0] == 'l' || line[0] == 'b') {
			snprintf(path, sizeof(path), "%s", line + 3);
			make(low, line[1], path, arg);
		}
	}
	char upper[4200], lower[4200];
	snprintf(upper, sizeof(upper), "%s/upper", fuzz_scratch_dir());
	snprintf(lower, sizeof(lower), "%s/lower", fuzz_scratch_dir());
	ws_change *v = NULL;
	size_t n = 0;
	uint64_t bytes = 0;
	int r = ws_scan(upper, lower, &deny, &v, &n, &bytes);
	FUZZ_CHECK(r == 0 || r == -ENOMEM || r == -EMFILE);
	for (size_t i = 0; r == 0 && i < n; i++) {
		const ws_change *c = &v[i];
		if (!clean_path(c->path)) {
			fprintf(stderr, "bad path in the changes: '%s'\n", c->path);
			abort();
		}
		/* Sorted, one entry a path; a directory the scan could not go
		 * below has its own entry and the "error" one. */
		int order = i ? strcmp(v[i - 1].path, c->path) : -1;
		FUZZ_CHECK(order < 0 || (order == 0 && (!strcmp(c->kind, "error") || !strcmp(v[i - 1].kind, "error"))));
		FUZZ_CHECK(c->kind && c->detail);
		struct stat st;
		bool deleted = !strcmp(c->kind, "deleted");
		FUZZ_CHECK(deleted || !strcmp(c->kind, "added") || !strcmp(c->kind, "modified") ||
		           !strcmp(c->kind, "type_changed") || !strcmp(c->kind, "error"));
		if (deleted)
			FUZZ_CHECK(fstatat(low, c->path, &st, AT_SYMLINK_NOFOLLOW) == 0);
		else if (strcmp(c->kind, "error"))
			FUZZ_CHECK(fstatat(up, c->path, &st, AT_SYMLINK_NOFOLLOW) == 0 && (st.st_mode & S_IFMT) == (c->mode & S_IFMT));
		for (size_t k = 0; k < deny.n; k++)
			if (ws_glob_match(deny.v[k], c->path))
				FUZZ_CHECK(c->denied);
		char *esc = ws_escape(c->path);
		FUZZ_CHECK(esc);
		for (const unsigned char *s = (const unsigned char *) esc; *s; s++)
			FUZZ_CHECK(*s >= 0x20 && *s != 0x7f);
		free(esc);
		check_json(c);
	}
	if (r == 0)
		ws_changes_free(v, n);
	strv_clear(&deny);
	free(script);
	close(up);
	close(low);
	close(top);
	return 0;
}
