/* What a declarative build makes: the base image and the steps, given one
 * by one (the command line), or read from a YAML image file here or from a
 * Dockerfile (dockerfile.c). Every step is checked as it is added, so a bad
 * one is named where it was written, before anything runs.
 *
 * The YAML image file:
 *   from: default                   # an nsbox image (the caller's, or root's)
 *   allow: [ files.example.com ]    # hosts every step may reach (optional)
 *   steps:
 *     - apt: [ build-essential, pkg-config ]   # or one string "a b c"
 *     - pip: requests==2.31.0
 *     - npm: [ typescript ]
 *     - copy: [ src/, /opt/app/ ]     # SRC... DST, from the build context
 *     - run: make -C /opt/app        # a shell command; a list: exec form
 *     - env: { MODE: fast }          # or NAME=VALUE
 *     - workdir: /opt/app
 *     - user: sandbox */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/error.h"
#include "base/yaml_walk.h"
#include "image/build.h"
#include "image/images.h"

const char *const build_kind_names[BK__MAX] = {
	[BK_APT] = "apt", [BK_PIP] = "pip", [BK_NPM] = "npm", [BK_COPY] = "copy", [BK_RUN] = "run",
	[BK_EXEC] = "exec", [BK_ENV] = "env", [BK_WORKDIR] = "workdir", [BK_USER] = "user",
};

int nsbox_image_spec_new(nsbox_image_spec **out, nsbox_error **err)
{
	if (!out)
		return nsbox_err(err, EINVAL, "image", "new image spec: no place for it");
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : nsbox_err(err, ENOMEM, "image", "new image spec");
}

void nsbox_image_spec_free(nsbox_image_spec *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_steps; i++) {
		strv_clear(&s->steps[i].args);
		free(s->steps[i].origin);
	}
	free(s->steps);
	free(s->from);
	free(s->from_origin);
	free(s->context);
	strv_clear(&s->allow);
	free(s);
}

static int set_from(nsbox_image_spec *s, const char *image, const char *origin, nsbox_error **err)
{
	if (!image_name_valid(image))
		return nsbox_err_invalid(err, "image", "%s%sbuild from '%s': not an nsbox image name (letters, digits, "
		                         "'.', '_', '-'; pull registry images first with 'nsbox image pull')",
		                         origin ? origin : "", origin ? ": " : "", image ? image : "");
	char *f = strdup(image), *o = origin ? strdup(origin) : NULL;
	if (!f || (origin && !o)) {
		free(f);
		free(o);
		return nsbox_err(err, ENOMEM, "image", "build from '%s'", image);
	}
	free(s->from);
	free(s->from_origin);
	s->from = f;
	s->from_origin = o;
	return 0;
}

int nsbox_image_spec_set_from(nsbox_image_spec *s, const char *image, nsbox_error **err)
{
	if (!s)
		return nsbox_err(err, EINVAL, "image", "set the base image: no spec");
	return set_from(s, image, NULL, err);
}

int nsbox_image_spec_set_context(nsbox_image_spec *s, const char *dir, nsbox_error **err)
{
	if (!s || !dir || !*dir)
		return nsbox_err(err, EINVAL, "image", "set the build context: no directory");
	char *c = strdup(dir);
	if (!c)
		return nsbox_err(err, ENOMEM, "image", "set the build context");
	free(s->context);
	s->context = c;
	return 0;
}

int nsbox_image_spec_allow_host(nsbox_image_spec *s, const char *host, nsbox_error **err)
{
	if (!s || !host || !*host || strpbrk(host, " \t\n,/"))
		return nsbox_err_invalid(err, "image", "allow host '%s': not a HOST[:PORT]", host ? host : "");
	return strv_push(&s->allow, host) < 0 ? nsbox_err(err, ENOMEM, "image", "allow host '%s'", host) : 0;
}

/* Debian's package names (policy 5.6.1), with an optional =VERSION or
 * :ARCH or /RELEASE; never an option. */
static bool apt_name_ok(const char *s)
{
	if (!islower((unsigned char) s[0]) && !isdigit((unsigned char) s[0]))
		return false;
	for (const char *p = s; *p; p++)
		if (!islower((unsigned char) *p) && !isdigit((unsigned char) *p) && !strchr("+-.=:/~_", *p))
			return false;
	return true;
}

/* The check each kind of step gets; NULL when it is well formed. */
static const char *step_problem(enum build_kind kind, const strv *a)
{
	switch (kind) {
	case BK_APT:
		if (!a->n)
			return "no package named";
		for (size_t i = 0; i < a->n; i++)
			if (!apt_name_ok(a->v[i]))
				return "a package name is malformed (options are not taken)";
		return NULL;
	case BK_PIP:
	case BK_NPM:
		return a->n ? NULL : "no package named";
	case BK_COPY:
		if (a->n < 2)
			return "it needs a source and a destination";
		for (size_t i = 0; i + 1 < a->n; i++)
			if (strpbrk(a->v[i], "*?[") || !*a->v[i])
				return "wildcards in sources are not supported";
		return *a->v[a->n - 1] ? NULL : "the destination is empty";
	case BK_RUN:
		return a->n == 1 && *a->v[0] ? NULL : "it needs one command";
	case BK_EXEC:
		return a->n && *a->v[0] ? NULL : "it needs a command";
	case BK_ENV:
		if (!a->n)
			return "no variable given";
		for (size_t i = 0; i < a->n; i++) {
			const char *eq = strchr(a->v[i], '=');
			if (!eq || !env_name_ok(a->v[i], (size_t) (eq - a->v[i])))
				return "a variable is not NAME=VALUE";
		}
		return NULL;
	case BK_WORKDIR:
		return a->n == 1 && *a->v[0] ? NULL : "it needs one directory";
	case BK_USER:
		if (a->n != 1 || !*a->v[0])
			return "it needs one user";
		for (const char *p = a->v[0]; *p; p++)
			if (!isalnum((unsigned char) *p) && !strchr("._-:", *p))
				return "the user is not NAME|UID[:GROUP|GID]";
		return NULL;
	default:
		return "unknown kind of step";
	}
}

int spec_add(nsbox_image_spec *s, enum build_kind kind, const strv *args, const char *origin,
             nsbox_error **err)
{
	const char *why = (unsigned) kind < BK__MAX ? step_problem(kind, args) : "unknown kind of step";
	if (why)
		return nsbox_err_invalid(err, "image", "%s: %s step: %s", origin ? origin : "step",
		                         (unsigned) kind < BK__MAX ? build_kind_names[kind] : "?", why);
	build_step *v = realloc(s->steps, (s->n_steps + 1) * sizeof(*v));
	if (!v)
		return nsbox_err(err, ENOMEM, "image", "add a build step");
	s->steps = v;
	build_step *st = &v[s->n_steps];
	*st = (build_step){ .kind = kind, .origin = strdup(origin ? origin : "step") };
	if (!st->origin || strv_copy(&st->args, args) < 0) {
		free(st->origin);
		strv_clear(&st->args);
		return nsbox_err(err, ENOMEM, "image", "add a build step");
	}
	s->n_steps++;
	return 0;
}

/* Split a list given as one string at any of `seps`. */
static int split_at(const char *text, const char *seps, strv *out)
{
	for (const char *p = text; *p;) {
		p += strspn(p, seps);
		size_t n = strcspn(p, seps);
		if (!n)
			break;
		char *w = strndup(p, n);
		if (!w || strv_push_take(out, w) < 0)
			return -ENOMEM;
		p += n;
	}
	return 0;
}

/* A package list: blanks and commas separate. */
static int split_words(const char *text, strv *out)
{
	return split_at(text, " \t\n,", out);
}

int nsbox_image_spec_add_step(nsbox_image_spec *s, const char *kind, const char *const *args, size_t n,
                              const char *origin, nsbox_error **err)
{
	if (!s || !kind || (n && !args))
		return nsbox_err(err, EINVAL, "image", "add a build step: missing argument");
	int k = -1;
	for (int i = 0; i < BK__MAX; i++)
		if (!strcmp(kind, build_kind_names[i]))
			k = i;
	if (k < 0)
		return nsbox_err_invalid(err, "image", "%s: no kind of step '%s' (apt, pip, npm, copy, run, exec, env, "
		                         "workdir, user)", origin ? origin : "step", kind);
	strv a = { 0 };
	int r = 0;
	for (size_t i = 0; r == 0 && i < n; i++)
		/* A package list may come as one string ("gcc make"). */
		r = (k == BK_APT || k == BK_PIP || k == BK_NPM) ? split_words(args[i], &a) : strv_push(&a, args[i]);
	r = r < 0 ? nsbox_err(err, ENOMEM, "image", "add a build step") : spec_add(s, k, &a, origin, err);
	strv_clear(&a);
	return r;
}

char *build_step_text(const build_step *st)
{
	static const char *const verb[BK__MAX] = {
		[BK_APT] = "apt-get install", [BK_PIP] = "pip install", [BK_NPM] = "npm install -g",
		[BK_COPY] = "COPY", [BK_RUN] = "RUN", [BK_EXEC] = "RUN", [BK_ENV] = "ENV",
		[BK_WORKDIR] = "WORKDIR", [BK_USER] = "USER",
	};
	buf b = { 0 };
	buf_puts(&b, verb[st->kind]);
	for (size_t i = 0; i < st->args.n; i++) {
		/* One line, whatever a command holds. */
		buf_puts(&b, " ");
		for (const char *p = st->args.v[i]; *p; p++)
			buf_append(&b, (*p == '\n' || *p == '\r' || *p == '\t') ? " " : p, 1);
	}
	return buf_steal(&b);
}

/* ---- YAML image files ---------------------------------------------------- */

/* A scalar, or a sequence of scalars, into out; the error names the node. */
static int yaml_words(yaml_document_t *d, yaml_node_t *n, bool split, strv *out, const char *origin,
                      nsbox_error **err)
{
	if (yw_scalar(n))
		return (split ? split_words(yw_scalar(n), out) : strv_push(out, yw_scalar(n))) < 0
			? nsbox_err(err, ENOMEM, "image", "read '%s'", origin) : 0;
	if (n->type != YAML_SEQUENCE_NODE)
		return yw_err(err, "image", origin, n, "expected a string or a list of strings");
	yw_items(d, n, it) {
		if (!yw_scalar(it))
			return yw_err(err, "image", origin, it, "expected a string");
		if (strv_push(out, yw_scalar(it)) < 0)
			return nsbox_err(err, ENOMEM, "image", "read '%s'", origin);
	}
	return 0;
}

static int yaml_step(nsbox_image_spec *s, yaml_document_t *d, yaml_node_t *item, const char *origin,
                     nsbox_error **err)
{
	if (item->type != YAML_MAPPING_NODE || item->data.mapping.pairs.top - item->data.mapping.pairs.start != 1)
		return yw_err(err, "image", origin, item, "a step is a mapping of one key (apt, pip, npm, copy, run, env, "
		              "workdir, user)");
	yaml_node_t *k = yaml_document_get_node(d, item->data.mapping.pairs.start->key);
	yaml_node_t *v = yaml_document_get_node(d, item->data.mapping.pairs.start->value);
	const char *key = yw_scalar(k);
	int kind = -1;
	for (int i = 0; key && i < BK__MAX; i++)
		if (i != BK_EXEC && !strcmp(key, build_kind_names[i]))
			kind = i;
	if (kind < 0)
		return yw_err(err, "image", origin, k, "unknown step '%s' (apt, pip, npm, copy, run, env, workdir, user)",
		              key ? key : "?");
	char where[4200];
	snprintf(where, sizeof(where), "%.4000s:%zu:%zu", origin, (size_t) k->start_mark.line + 1,
	         (size_t) k->start_mark.column + 1);
	strv a = { 0 };
	int r = 0;
	if (kind == BK_ENV && v->type == YAML_MAPPING_NODE) {
		yw_pairs(d, v, ek, ev) {
			char *kv = NULL;
			if (r == 0 && (!yw_scalar(ek) || !yw_scalar(ev)))
				r = yw_err(err, "image", origin, ek, "expected NAME: VALUE");
			if (r == 0 && (asprintf(&kv, "%s=%s", yw_scalar(ek), yw_scalar(ev)) < 0 || strv_push_take(&a, kv) < 0))
				r = nsbox_err(err, ENOMEM, "image", "read '%s'", origin);
		}
	} else {
		bool split = kind == BK_APT || kind == BK_PIP || kind == BK_NPM;
		if (kind == BK_COPY && yw_scalar(v))
			r = split_at(yw_scalar(v), " \t\n", &a) < 0 ? nsbox_err(err, ENOMEM, "image", "read '%s'", origin) : 0;
		else
			r = yaml_words(d, v, split, &a, origin, err);
		if (r == 0 && kind == BK_RUN && v->type == YAML_SEQUENCE_NODE)
			kind = BK_EXEC;
	}
	r = r ?: spec_add(s, kind, &a, where, err);
	strv_clear(&a);
	return r;
}

int spec_parse_yaml(nsbox_image_spec *s, const char *origin, const char *text, size_t len, nsbox_error **err)
{
	yaml_parser_t p;
	yaml_document_t doc;
	yaml_parser_initialize(&p);
	yaml_parser_set_input_string(&p, (const unsigned char *) text, len);
	if (!yaml_parser_load(&p, &doc)) {
		int r = nsbox_err_at(err, "image", origin, p.problem_mark.line + 1, p.problem_mark.column + 1, "%s",
		                     p.problem ? p.problem : "not valid YAML");
		yaml_parser_delete(&p);
		return r;
	}
	yaml_parser_delete(&p);
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	int r = 0;
	if (!root || root->type != YAML_MAPPING_NODE)
		r = root ? yw_err(err, "image", origin, root, "an image file is a mapping (from, allow, steps)")
		         : nsbox_err_at(err, "image", origin, 1, 1, "the image file is empty");
	bool have_from = false;
	if (r == 0 && root)
		yw_pairs(&doc, root, k, v) {
			const char *key = yw_scalar(k);
			if (r < 0)
				break;
			if (key && !strcmp(key, "from")) {
				char where[4200];
				snprintf(where, sizeof(where), "%.4000s:%zu:%zu", origin, (size_t) v->start_mark.line + 1,
				         (size_t) v->start_mark.column + 1);
				r = yw_scalar(v) ? set_from(s, yw_scalar(v), where, err)
				                 : yw_err(err, "image", origin, v, "from: expected an image name");
				have_from = true;
			} else if (key && !strcmp(key, "allow")) {
				strv hosts = { 0 };
				r = yaml_words(&doc, v, true, &hosts, origin, err);
				for (size_t i = 0; r == 0 && i < hosts.n; i++)
					r = nsbox_image_spec_allow_host(s, hosts.v[i], err);
				strv_clear(&hosts);
			} else if (key && !strcmp(key, "steps")) {
				if (v->type != YAML_SEQUENCE_NODE) {
					r = yw_err(err, "image", origin, v, "steps: expected a list");
					break;
				}
				yw_items(&doc, v, it) if (r == 0) r = yaml_step(s, &doc, it, origin, err);
			} else {
				r = yw_err(err, "image", origin, k, "unknown key '%s' (from, allow, steps)", key ? key : "?");
			}
		}
	if (r == 0 && root && !have_from)
		r = yw_err(err, "image", origin, root, "no 'from': the image to build on");
	yaml_document_delete(&doc);
	return r;
}

/* ---- loading a file --------------------------------------------------------- */

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && !strcmp(s + a - b, suffix);
}

int nsbox_image_spec_load(nsbox_image_spec *s, const char *path, nsbox_error **err)
{
	enum { MAX_FILE = 1 << 20 };
	if (!s || !path)
		return nsbox_err(err, EINVAL, "image", "load an image file: missing argument");
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return nsbox_err(err, errno, "image", "read '%s'", path);
	if (!S_ISREG(st.st_mode) || st.st_size > MAX_FILE)
		return nsbox_err_invalid(err, "image", "read '%s': not a regular file of at most 1 MiB", path);
	_cleanup_free_ char *text = malloc((size_t) st.st_size + 1);
	size_t len = 0;
	while (text && len < (size_t) st.st_size) {
		ssize_t n = read(fd, text + len, (size_t) st.st_size - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t) n;
	}
	if (!text)
		return nsbox_err(err, ENOMEM, "image", "read '%s'", path);
	text[len] = '\0';
	if (ends_with(path, ".yaml") || ends_with(path, ".yml"))
		return spec_parse_yaml(s, path, text, len, err);
	return spec_parse_dockerfile(s, path, text, len, err);
}
