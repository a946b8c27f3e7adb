/* Declarative builds' pure parts: the Dockerfile subset and the YAML image
 * file (steps, and errors at their exact positions), the step checks,
 * registry references and the names they give, the apt sources' hosts, and
 * the flattening of layers on fabricated trees (whiteouts, opaque
 * directories, symlinks that must not be followed). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/error.h"
#include "image/build.h"
#include "image/build_lookup.h"
#include "image/pull.h"
#include "unit.h"

static nsbox_image_spec *spec;
static nsbox_error *err;

static void setup(void)
{
	ck_assert_int_eq(nsbox_image_spec_new(&spec, NULL), 0);
	err = NULL;
}

static void teardown(void)
{
	nsbox_image_spec_free(spec);
	nsbox_error_free(err);
	spec = NULL;
	err = NULL;
}

static int df(const char *text)
{
	return spec_parse_dockerfile(spec, "Dockerfile", text, strlen(text), &err);
}

static int yml(const char *text)
{
	return spec_parse_yaml(spec, "img.yaml", text, strlen(text), &err);
}

/* Step i's kind and its arguments joined by '|'. */
static const char *step(size_t i)
{
	static char out[1024];
	ck_assert_uint_lt(i, spec->n_steps);
	snprintf(out, sizeof(out), "%s", build_kind_names[spec->steps[i].kind]);
	for (size_t k = 0; k < spec->steps[i].args.n; k++) {
		size_t n = strlen(out);
		snprintf(out + n, sizeof(out) - n, "|%s", spec->steps[i].args.v[k]);
	}
	return out;
}

static void expect_error(int r, const char *msg)
{
	ck_assert_int_lt(r, 0);
	ck_assert_ptr_nonnull(err);
	ck_assert_str_eq(nsbox_error_message(err), msg);
}

START_TEST(test_dockerfile)
{
	ck_assert_int_eq(df("# syntax comment\n"
	                    "from base\n"
	                    "\n"
	                    "ENV A=1 B=\"two words\" C='$lit' D=a\\ b\n"
	                    "ENV LEGACY value with spaces\n"
	                    "RUN apt-get update && \\\n"
	                    "  # a comment inside the continuation\n"
	                    "  make\n"
	                    "RUN [\"/bin/sh\", \"-c\", \"echo \\\"q\\\" \\u00e9\"]\n"
	                    "RUN [ -f /x ] && echo shell-form\n"
	                    "COPY [\"a b\", \"/dst dir/\"]\n"
	                    "COPY src other /opt/\r\n"
	                    "WORKDIR /srv\n"
	                    "USER sandbox:staff\n"), 0);
	ck_assert_str_eq(spec->from, "base");
	ck_assert_uint_eq(spec->n_steps, 9);
	ck_assert_str_eq(step(0), "env|A=1|B=two words|C=$lit|D=a b");
	ck_assert_str_eq(step(1), "env|LEGACY=value with spaces");
	ck_assert_str_eq(step(2), "run|apt-get update &&   make");
	ck_assert_str_eq(step(3), "exec|/bin/sh|-c|echo \"q\" \xc3\xa9");
	ck_assert_str_eq(step(4), "run|[ -f /x ] && echo shell-form");
	ck_assert_str_eq(step(5), "copy|a b|/dst dir/");
	ck_assert_str_eq(step(6), "copy|src|other|/opt/");
	ck_assert_str_eq(step(7), "workdir|/srv");
	ck_assert_str_eq(step(8), "user|sandbox:staff");
	ck_assert_str_eq(spec->steps[2].origin, "Dockerfile:6");
	char *t = build_step_text(&spec->steps[2]);
	ck_assert_str_eq(t, "RUN apt-get update &&   make");
	free(t);
}
END_TEST

START_TEST(test_dockerfile_errors)
{
	expect_error(df("FROM a\nRUN x\nADD x /y\n"),
	             "Dockerfile:3:1: 'ADD' is not supported by nsbox image builds (FROM, RUN, COPY, ENV, WORKDIR, USER)");
	teardown(), setup();
	expect_error(df("RUN x\n"), "Dockerfile:1:1: RUN before FROM: the first instruction must be FROM");
	teardown(), setup();
	expect_error(df("FROM a\nFROM b\n"), "Dockerfile:2:1: a second FROM: multi-stage builds are not supported");
	teardown(), setup();
	expect_error(df("FROM a AS b\n"), "Dockerfile:1:1: FROM: expected one image name (no AS, no --platform): 'a AS b'");
	teardown(), setup();
	expect_error(df("FROM a\n\n\nCOPY --chown=1 x /y\n"),
	             "Dockerfile:4:1: COPY options (--chown, --from, --chmod, --link) are not supported: --chown=1 x /y");
	teardown(), setup();
	expect_error(df("FROM a\nENV A=$HOME\n"), "Dockerfile:2:1: ENV: variable substitution ('$') is not supported: A=$HOME");
	teardown(), setup();
	expect_error(df("FROM a\nENV A=\"open\n"), "Dockerfile:2:1: ENV: an unterminated quote");
	teardown(), setup();
	expect_error(df("FROM a\nFROBNICATE x\n"), "Dockerfile:2:1: unknown instruction 'FROBNICATE x'");
	teardown(), setup();
	expect_error(df("# nothing\n"), "Dockerfile:1:1: no FROM: the image to build on");
	teardown(), setup();
	expect_error(spec_parse_dockerfile(spec, "Dockerfile", "FROM a\0b", 8, &err), "Dockerfile:1:1: a NUL byte: not a Dockerfile");
	teardown(), setup();
	expect_error(df("FROM a\nCOPY *.py /app/\n"), "Dockerfile:2: copy step: wildcards in sources are not supported");
	teardown(), setup();
	expect_error(df("FROM ../etc\n"), "Dockerfile:1: build from '../etc': not an nsbox image name (letters, digits, "
	                                  "'.', '_', '-'; pull registry images first with 'nsbox image pull')");
	teardown(), setup();
	expect_error(df("FROM a\nUSER a b\n"), "Dockerfile:2: user step: it needs one user");
}
END_TEST

/* The exec form's JSON (escapes, surrogate pairs, what is not JSON and so
 * the shell form, as Docker has it), ENV's forms, continuation at the end,
 * and the refusals, each at its line: one row a Dockerfile. */
START_TEST(test_dockerfile_forms)
{
	static const struct { const char *text, *steps, *error; } rows[] = {
		{ "FROM a\nRUN [\"a\", \"\\u00e9\\u20ac\\ud83d\\ude00\"]\n", "exec|a|\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", NULL },
		{ "FROM a\nRUN [\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]\n", "exec|\"\\/\b\f\n\r\t", NULL },
		{ "FROM a\nRUN  [ \"a\" ,  \"b\" ]  \n", "exec|a|b", NULL },
		{ "FROM a\nRUN [\"a\"] and more\n", "run|[\"a\"] and more", NULL },
		{ "FROM a\nRUN [\"\\ud800\"]\n", "run|[\"\\ud800\"]", NULL },
		{ "FROM a\nRUN [\"\\ud800\\u0041\"]\n", "run|[\"\\ud800\\u0041\"]", NULL },
		{ "FROM a\nRUN [\"\\udc00\"]\n", "run|[\"\\udc00\"]", NULL },
		{ "FROM a\nRUN [\"\\u0000\"]\n", "run|[\"\\u0000\"]", NULL },
		{ "FROM a\nRUN [\"a\x01\"]\n", "run|[\"a\x01\"]", NULL },
		{ "FROM a\nRUN [\"\\q\"]\n", "run|[\"\\q\"]", NULL },
		{ "FROM a\nRUN [\"\\u12G4\"]\n", "run|[\"\\u12G4\"]", NULL },
		{ "FROM a\nRUN [\"a\" \"b\"]\n", "run|[\"a\" \"b\"]", NULL },
		{ "FROM a\nRUN [\"a\",]\n", "run|[\"a\",]", NULL },
		{ "FROM a\nRUN [\"a\"\n", "run|[\"a\"", NULL },
		{ "FROM a\nRUN [a]\n", "run|[a]", NULL },
		{ "FROM a\nCOPY [x /y\n", NULL, "Dockerfile:2: copy step: wildcards in sources are not supported" },
		{ "FROM a\nENV A=\"x\\\"y\" B='a b' C=d\\ e\n", "env|A=x\"y|B=a b|C=d e", NULL },
		{ "FROM a\nrun echo \\\n", "run|echo", NULL },
		{ "FROM a\n  RUN echo \\\n  # inside\n\n    two\n", "run|echo     two", NULL },
		{ "FROM a\nENV A\n", NULL, "Dockerfile:2:1: ENV A: no value" },
		{ "FROM a\nENV A $B\n", NULL, "Dockerfile:2:1: ENV: variable substitution ('$') is not supported: A $B" },
		{ "FROM a\nENV A=\"$B\"\n", NULL, "Dockerfile:2:1: ENV: variable substitution ('$') is not supported: A=\"$B\"" },
		{ "FROM a\nRUN --mount=type=cache x\n", NULL, "Dockerfile:2:1: RUN options are not supported: --mount=type=cache x" },
		{ "FROM a\n\nRUN\n", NULL, "Dockerfile:3:1: RUN: no arguments" },
		{ "FROM a\nWORKDIR $HOME/x\n", NULL, "Dockerfile:2:1: WORKDIR: variable substitution ('$') is not supported: $HOME/x" },
		{ "FROM a\nCOPY $X /y\n", NULL, "Dockerfile:2:1: COPY: variable substitution ('$') is not supported: $X /y" },
		{ "FROM --platform=x a\n", NULL, "Dockerfile:1:1: FROM: expected one image name (no AS, no --platform): '--platform=x a'" },
		{ "FROM a \\\n  AS b\n", NULL, "Dockerfile:1:1: FROM: expected one image name (no AS, no --platform): 'a   AS b'" },
		{ "FROM a\nMAINTAINER me\n", NULL, "Dockerfile:2:1: 'MAINTAINER' is not supported by nsbox image builds (FROM, RUN, COPY, ENV, WORKDIR, USER)" },
		{ "FROM a\nHEALTHCHECK NONE\n", NULL, "Dockerfile:2:1: 'HEALTHCHECK' is not supported by nsbox image builds (FROM, RUN, COPY, ENV, WORKDIR, USER)" },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
		teardown(), setup();
		int r = df(rows[i].text);
		if (rows[i].error) {
			ck_assert_msg(r < 0 && err, "row %zu: no error", i);
			ck_assert_msg(!strcmp(nsbox_error_message(err), rows[i].error), "row %zu: '%s'", i,
			              nsbox_error_message(err));
			continue;
		}
		ck_assert_msg(r == 0, "row %zu: %s", i, err ? nsbox_error_message(err) : "?");
		ck_assert_uint_eq(spec->n_steps, 1);
		ck_assert_msg(!strcmp(step(0), rows[i].steps), "row %zu: '%s'", i, step(0));
	}
}
END_TEST

START_TEST(test_yaml)
{
	ck_assert_int_eq(yml("from: base\n"
	                     "allow: [ files.example.com, 'idx.test:8080' ]\n"
	                     "steps:\n"
	                     "  - apt: build-essential, pkg-config\n"
	                     "  - pip: [ 'requests==2.31.0', --no-deps ]\n"
	                     "  - npm: typescript\n"
	                     "  - copy: src/ /opt/app/\n"
	                     "  - copy: [ 'a b', /x ]\n"
	                     "  - run: make\n"
	                     "  - run: [ /bin/true, arg ]\n"
	                     "  - env: { A: 1, B: two words }\n"
	                     "  - env: C=3\n"
	                     "  - workdir: /opt\n"
	                     "  - user: sandbox\n"), 0);
	ck_assert_str_eq(spec->from, "base");
	ck_assert_uint_eq(spec->allow.n, 2);
	ck_assert_str_eq(spec->allow.v[1], "idx.test:8080");
	ck_assert_uint_eq(spec->n_steps, 11);
	ck_assert_str_eq(step(0), "apt|build-essential|pkg-config");
	ck_assert_str_eq(step(1), "pip|requests==2.31.0|--no-deps");
	ck_assert_str_eq(step(2), "npm|typescript");
	ck_assert_str_eq(step(3), "copy|src/|/opt/app/");
	ck_assert_str_eq(step(4), "copy|a b|/x");
	ck_assert_str_eq(step(5), "run|make");
	ck_assert_str_eq(step(6), "exec|/bin/true|arg");
	ck_assert_str_eq(step(7), "env|A=1|B=two words");
	ck_assert_str_eq(step(8), "env|C=3");
	ck_assert_str_eq(step(9), "workdir|/opt");
	ck_assert_str_eq(step(10), "user|sandbox");
	ck_assert_str_eq(spec->steps[1].origin, "img.yaml:5:5");
}
END_TEST

START_TEST(test_yaml_errors)
{
	expect_error(yml("from: a\nsteps:\n  - run: x\n  - bogus: 1\n"),
	             "img.yaml:4:5: unknown step 'bogus' (apt, pip, npm, copy, run, env, workdir, user)");
	teardown(), setup();
	expect_error(yml("from: a\nsteps:\n  - { run: x, apt: y }\n"),
	             "img.yaml:3:5: a step is a mapping of one key (apt, pip, npm, copy, run, env, workdir, user)");
	teardown(), setup();
	expect_error(yml("steps: []\n"), "img.yaml:1:1: no 'from': the image to build on");
	teardown(), setup();
	expect_error(yml("from: a\nsteps: x\n"), "img.yaml:2:8: steps: expected a list");
	teardown(), setup();
	expect_error(yml("from: a\nsteps:\n  - apt: [ { x: 1 } ]\n"), "img.yaml:3:12: expected a string");
	teardown(), setup();
	expect_error(yml("from: a\nfrm: b\n"), "img.yaml:2:1: unknown key 'frm' (from, allow, steps)");
	teardown(), setup();
	expect_error(yml("from: a\nsteps:\n  - apt: '-oAPT::x=1'\n"),
	             "img.yaml:3:5: apt step: a package name is malformed (options are not taken)");
	teardown(), setup();
	expect_error(yml("from: [a\n"), "img.yaml:2:1: did not find expected ',' or ']'");
	teardown(), setup();
	expect_error(yml(""), "img.yaml:1:1: the image file is empty");
}
END_TEST

/* More of the image file's refusals, each at its node, and the API's
 * answers to missing arguments and to files that are not image files. */
START_TEST(test_yaml_refusals)
{
	static const struct { const char *text, *error; } rows[] = {
		{ "from: a\nsteps:\n  - apt: []\n", "img.yaml:3:5: apt step: no package named" },
		{ "from: a\nsteps:\n  - pip: []\n", "img.yaml:3:5: pip step: no package named" },
		{ "from: a\nsteps:\n  - env: []\n", "img.yaml:3:5: env step: no variable given" },
		{ "from: a\nsteps:\n  - apt: { x: 1 }\n", "img.yaml:3:10: expected a string or a list of strings" },
		{ "from: a\nsteps:\n  - env: { A: [1] }\n", "img.yaml:3:12: expected NAME: VALUE" },
		{ "from: a\nsteps:\n  - copy: [ only ]\n", "img.yaml:3:5: copy step: it needs a source and a destination" },
		{ "from: a\nsteps:\n  - copy: [ a, '' ]\n", "img.yaml:3:5: copy step: the destination is empty" },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
		teardown(), setup();
		int r = yml(rows[i].text);
		ck_assert_msg(r < 0 && err, "row %zu: no error", i);
		ck_assert_msg(!strcmp(nsbox_error_message(err), rows[i].error), "row %zu: '%s'", i, nsbox_error_message(err));
	}
	/* Missing arguments: said, never a crash. */
	teardown(), setup();
	ck_assert_int_lt(nsbox_image_spec_set_from(NULL, "a", &err), 0);
	ck_assert_str_eq(nsbox_error_message(err), "set the base image: no spec: Invalid argument");
	teardown(), setup();
	ck_assert_int_lt(nsbox_image_spec_set_context(spec, NULL, &err), 0);
	ck_assert_str_eq(nsbox_error_message(err), "set the build context: no directory: Invalid argument");
	teardown(), setup();
	ck_assert_int_lt(nsbox_image_spec_load(spec, NULL, &err), 0);
	ck_assert_str_eq(nsbox_error_message(err), "load an image file: missing argument: Invalid argument");
	/* A directory, and a file over 1 MiB, are not image files. */
	teardown(), setup();
	ck_assert_int_lt(nsbox_image_spec_load(spec, "/", &err), 0);
	ck_assert_str_eq(nsbox_error_message(err), "read '/': not a regular file of at most 1 MiB");
	char big[] = "/tmp/nsbox-unit-spec-XXXXXX";
	int fd = mkstemp(big);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (1 << 20) + 1), 0);
	close(fd);
	teardown(), setup();
	ck_assert_int_lt(nsbox_image_spec_load(spec, big, &err), 0);
	char want[128];
	snprintf(want, sizeof(want), "read '%s': not a regular file of at most 1 MiB", big);
	ck_assert_str_eq(nsbox_error_message(err), want);
	unlink(big);
	teardown(), setup();
	ck_assert_int_lt(nsbox_image_spec_load(spec, "/nonexistent/img.yaml", &err), 0);
	ck_assert_str_eq(nsbox_error_message(err), "read '/nonexistent/img.yaml': No such file or directory");
}
END_TEST

START_TEST(test_add_step)
{
	const char *pk[] = { "gcc make", "pkg-config" };
	ck_assert_int_eq(nsbox_image_spec_add_step(spec, "apt", pk, 2, "--apt", &err), 0);
	ck_assert_str_eq(step(0), "apt|gcc|make|pkg-config");
	const char *run[] = { "echo a\nb" };
	ck_assert_int_eq(nsbox_image_spec_add_step(spec, "run", run, 1, "--run", &err), 0);
	char *t = build_step_text(&spec->steps[1]);
	ck_assert_str_eq(t, "RUN echo a b");   /* one line, whatever the command holds */
	free(t);
	const char *one[] = { "x" };
	expect_error(nsbox_image_spec_add_step(spec, "frob", one, 1, "--frob", &err),
	             "--frob: no kind of step 'frob' (apt, pip, npm, copy, run, exec, env, workdir, user)");
	teardown(), setup();
	expect_error(nsbox_image_spec_add_step(spec, "copy", one, 1, "--copy", &err),
	             "--copy: copy step: it needs a source and a destination");
	teardown(), setup();
	const char *env[] = { "1A=x" };
	expect_error(nsbox_image_spec_add_step(spec, "env", env, 1, "--env", &err), "--env: env step: a variable is not NAME=VALUE");
	teardown(), setup();
	const char *user[] = { "a;b" };
	expect_error(nsbox_image_spec_add_step(spec, "user", user, 1, "--user", &err),
	             "--user: user step: the user is not NAME|UID[:GROUP|GID]");
	teardown(), setup();
	expect_error(nsbox_image_spec_allow_host(spec, "a b", &err), "allow host 'a b': not a HOST[:PORT]");
}
END_TEST

START_TEST(test_refs)
{
	static const struct { const char *ref, *registry, *path, *tag, *name; } ok[] = {
		{ "alpine", "", "alpine", "", "alpine" },
		{ "alpine:latest", "", "alpine", "latest", "alpine" },
		{ "library/python:3.12-slim", "", "library/python", "3.12-slim", "python-3.12-slim" },
		{ "docker://user/app:1", "", "user/app", "1", "app-1" },
		{ "ghcr.io/owner/tool:v1.2", "ghcr.io", "owner/tool", "v1.2", "tool-v1.2" },
		{ "localhost:5000/x", "localhost:5000", "x", "", "x" },
		{ "localhost/x", "localhost", "x", "", "x" },
		{ "[::1]:5000/a/b_c", "[::1]:5000", "a/b_c", "", "b_c" },
		{ "reg.example:443/a-b/c.d:T_1", "reg.example:443", "a-b/c.d", "T_1", "c.d-T_1" },
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(*ok); i++) {
		image_ref r;
		ck_assert_msg(image_ref_parse(ok[i].ref, &r) == 0, "'%s' refused", ok[i].ref);
		ck_assert_str_eq(r.registry, ok[i].registry);
		ck_assert_str_eq(r.path, ok[i].path);
		ck_assert_str_eq(r.tag, ok[i].tag);
		char *name = NULL;
		ck_assert_int_eq(nsbox_image_ref_name(ok[i].ref, &name, NULL), 0);
		ck_assert_str_eq(name, ok[i].name);
		free(name);
	}
	image_ref r;
	const char *dig = "app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	ck_assert_int_eq(image_ref_parse(dig, &r), 0);
	ck_assert_str_eq(r.digest, "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
	ck_assert_str_eq(r.tag, "");
	static const char *const bad[] = { "", "Upper", "a b", "-x", "/x", "x/", "a//b", "x:", "reg:port/x",
	                                   "x@sha256:12", "x@md5:00", "oci:/tmp/x", "docker://", "x/.y", "x/y-",
	                                   "reg.example:/x", "[zz]:1/x", "x:-tag" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		ck_assert_msg(image_ref_parse(bad[i], &r) == -EINVAL, "'%s' taken", bad[i]);
}
END_TEST

/* ---- trees ----------------------------------------------------------------- */

static char dir[64];

static char *make_dir(void)
{
	strcpy(dir, "/tmp/nsbox-spec.XXXXXX");
	return mkdtemp(dir);
}

static const char *at(const char *rel)
{
	static char p[4][4096];
	static int k;
	k = (k + 1) % 4;
	snprintf(p[k], sizeof(p[k]), "%s/%s", dir, rel);
	return p[k];
}

static void put(const char *rel, const char *text)
{
	FILE *f = fopen(at(rel), "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static char *get(const char *rel)
{
	static char b[256];
	FILE *f = fopen(at(rel), "r");
	if (!f)
		return NULL;
	size_t n = fread(b, 1, sizeof(b) - 1, f);
	fclose(f);
	b[n] = '\0';
	return b;
}

static int opendir_at(const char *rel)
{
	int fd = open(at(rel), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	return fd;
}

START_TEST(test_apt_hosts)
{
	ck_assert_ptr_nonnull(make_dir());
	ck_assert_int_eq(system(strcat(strcpy((char[4200]){ 0 }, "mkdir -p "), at("b/etc/apt/sources.list.d"))), 0);
	put("b/etc/apt/sources.list", "# comment\ndeb [signed-by=/k.gpg] http://deb.example.org/debian bookworm main\n"
	                              "deb-src https://user:pw@src.example.org:8443/d bookworm main\n"
	                              "deb file:/local bookworm main\n");
	put("b/etc/apt/sources.list.d/x.sources", "Types: deb\nURIs: http://a.example http://deb.example.org/other\n"
	                                          "Suites: x\n");
	put("b/etc/apt/sources.list.d/ignored.txt", "deb http://ignored.example/ x y\n");
	int b = opendir_at("b");
	strv hosts = { 0 };
	ck_assert_int_eq(lookup_apt_hosts(&b, 1, &hosts, &err), 0);
	ck_assert_uint_eq(hosts.n, 3);
	ck_assert_str_eq(hosts.v[0], "deb.example.org");
	ck_assert_str_eq(hosts.v[1], "src.example.org:8443");
	ck_assert_str_eq(hosts.v[2], "a.example");
	strv_clear(&hosts);
	/* A layer above that replaces sources.list. */
	ck_assert_int_eq(system(strcat(strcpy((char[4200]){ 0 }, "mkdir -p "), at("u/etc/apt"))), 0);
	put("u/etc/apt/sources.list", "deb http://mirror.example/debian x main\n");
	int dirs[2] = { opendir_at("u"), b };
	char *text = NULL;
	ck_assert_int_eq(lookup_read(dirs, 2, "etc/apt/sources.list", &text), 0);
	ck_assert_str_eq(text, "deb http://mirror.example/debian x main\n");
	free(text);
	uid_t u;
	gid_t g;
	put("b/etc/passwd", "root:x:0:0::/root:/bin/sh\nsandbox:x:1000:1001::/home/sandbox:/bin/sh\n");
	put("b/etc/group", "root:x:0:\nstaff:x:50:\n");
	ck_assert_int_eq(lookup_user(dirs, 2, "sandbox", &u, &g, &err), 0);
	ck_assert_uint_eq(u, 1000);
	ck_assert_uint_eq(g, 1001);
	ck_assert_int_eq(lookup_user(dirs, 2, "sandbox:staff", &u, &g, &err), 0);
	ck_assert_uint_eq(g, 50);
	ck_assert_int_eq(lookup_user(dirs, 2, "4242", &u, &g, &err), 0);
	ck_assert_uint_eq(u + g, 8484);
	expect_error(lookup_user(dirs, 2, "nobody-here", &u, &g, &err),
	             "USER 'nobody-here': no such user in the image's /etc/passwd (or not below 65536)");
	/* A symlink in a layer is not followed out of it. */
	ck_assert_int_eq(symlink("/etc", at("u/etc2")), 0);
	ck_assert_int_eq(lookup_read(dirs, 1, "etc2/passwd", &text), -ELOOP);
	close(dirs[0]);
	close(b);
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(test_flatten)
{
	ck_assert_ptr_nonnull(make_dir());
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "cd '%s' && mkdir -p base/etc base/keep base/opq/sub base/lnk-target out victim "
	         "l1/etc l1/opq l2 && echo secret > victim/file", dir);
	ck_assert_int_eq(system(cmd), 0);
	put("base/etc/a", "base a\n");
	put("base/etc/gone", "base gone\n");
	put("base/keep/k", "kept\n");
	put("base/opq/old", "old\n");
	put("base/opq/sub/old2", "old2\n");
	put("base/hard1", "linked\n");
	ck_assert_int_eq(link(at("base/hard1"), at("base/hard2")), 0);
	ck_assert_int_eq(symlink("/nonexistent", at("base/dangling")), 0);
	ck_assert_int_eq(symlink(at("victim"), at("base/evil")), 0);   /* a link out, copied as a link */
	/* layer 1: a changed file, a new one, an opaque directory */
	put("l1/etc/a", "layer a\n");
	put("l1/etc/new", "new\n");
	put("l1/opq/fresh", "fresh\n");
	bool opaque = setxattr(at("l1/opq"), "user.overlay.opaque", "y", 1, 0) == 0;
	/* layer 2: a directory where the base had a symlink out (replaced,
	 * never entered), a symlink where a directory was */
	ck_assert_int_eq(mkdir(at("l2/evil"), 0755), 0);
	put("l2/evil/file", "inside\n");
	ck_assert_int_eq(symlink("/etc", at("l2/keep")), 0);
	bool whiteout = mknod(at("l2/hard1"), S_IFCHR | 0, makedev(0, 0)) == 0;
	if (whiteout)
		ck_assert_int_eq(mknod(at("l1/etc/gone"), S_IFCHR | 0, makedev(0, 0)), 0);
	int base = opendir_at("base"), out = opendir_at("out");
	int uppers[2] = { opendir_at("l1"), opendir_at("l2") };
	ck_assert_int_eq(layers_flatten(base, uppers, 2, out, geteuid() == 0, &err), 0);
	ck_assert_str_eq(get("out/etc/a"), "layer a\n");
	ck_assert_str_eq(get("out/etc/new"), "new\n");
	ck_assert_str_eq(get("out/opq/fresh"), "fresh\n");
	if (opaque)
		ck_assert_int_eq(access(at("out/opq/old"), F_OK), -1);
	ck_assert_str_eq(get("out/evil/file"), "inside\n");
	ck_assert_str_eq(get("victim/file"), "secret\n");   /* the base's link was not followed */
	struct stat st;
	ck_assert_int_eq(lstat(at("out/keep"), &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	ck_assert_int_eq(lstat(at("out/dangling"), &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	if (whiteout) {
		ck_assert_int_eq(access(at("out/etc/gone"), F_OK), -1);
		ck_assert_int_eq(access(at("out/hard1"), F_OK), -1);
		ck_assert_str_eq(get("out/hard2"), "linked\n");
	} else {
		struct stat a, b;
		ck_assert_int_eq(stat(at("out/hard1"), &a), 0);
		ck_assert_int_eq(stat(at("out/hard2"), &b), 0);
		ck_assert_uint_eq(a.st_ino, b.st_ino);   /* a hard link stays one */
	}
	for (int i = 0; i < 2; i++)
		close(uppers[i]);
	close(base);
	close(out);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("image_spec");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_dockerfile);
	tcase_add_test(tc, test_dockerfile_errors);
	tcase_add_test(tc, test_dockerfile_forms);
	tcase_add_test(tc, test_yaml);
	tcase_add_test(tc, test_yaml_errors);
	tcase_add_test(tc, test_yaml_refusals);
	tcase_add_test(tc, test_add_step);
	tcase_add_test(tc, test_refs);
	tcase_add_test(tc, test_apt_hosts);
	tcase_add_test(tc, test_flatten);
	return unit_run("image_spec", tc);
}
