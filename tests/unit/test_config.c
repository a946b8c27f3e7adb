#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"
#include "error.h"
#include "unit.h"

static nsbox_config *fresh(void)
{
	nsbox_config *c = NULL;
	ck_assert_int_eq(nsbox_config_new(&c, NULL), 0);
	return c;
}

START_TEST(test_defaults)
{
	nsbox_config *c = fresh();
	ck_assert_str_eq(c->image, "default");
	ck_assert_uint_eq(c->memory, 512ull << 20);
	ck_assert(c->cpus == 1);
	ck_assert_uint_eq(c->pids, 64);
	ck_assert_uint_eq(c->timeout_ms, 60000);
	ck_assert_uint_eq(c->tmpfs, 100ull << 20);
	ck_assert_uint_eq(c->output, 10240);
	ck_assert_int_eq(c->net, NET_NONE);
	ck_assert_uint_eq(c->uid, 1000);
	ck_assert_uint_eq(c->gid, 1000);
	ck_assert(c->read_only_root);
	ck_assert_uint_eq(c->forbidden.n, 12);
	nsbox_config_free(c);
}
END_TEST

static const struct { const char *key, *value; bool ok; } sets[] = {
	{ "limits.memory", "1g", true }, { "limits.memory", "100k", false },
	{ "limits.memory", "lots", false }, { "limits.cpus", "0.5", true },
	{ "limits.cpus", "-1", false }, { "limits.pids", "4194304", true },
	{ "limits.pids", "0", false }, { "limits.timeout", "none", true },
	{ "limits.timeout", "5 min", false }, { "limits.tmpfs", "1k", false },
	{ "limits.output", "unlimited", true }, { "network.mode", "host", true },
	{ "network.mode", "bridge", false }, { "network.allow", "pypi.org", true },
	{ "network.allow", "*.pythonhosted.org:443", true }, { "network.allow", "a b", false },
	{ "network.allow", "x:99999", false }, { "hostname", "a.b-c", true },
	{ "hostname", "-bad", false }, { "hostname", "under_score", false },
	{ "workdir", "/w", true }, { "workdir", "w", false }, { "workdir", "/a/../b", false },
	{ "image", "py-3.12", true }, { "image", "../x", false },
	{ "security.user", "0", true }, { "security.user", "1000:100", true },
	{ "security.user", "70000", false }, { "security.user", "a:b", false },
	{ "environment.set", "A=1", true }, { "environment.set", "=1", false },
	{ "environment.set", "A", false }, { "environment.pass", "HOME", true },
	{ "environment.pass", "A-B", false }, { "filesystem.mounts", "/a:/b:ro", true },
	{ "filesystem.mounts", "/a:/b:rw", true }, { "filesystem.mounts", "/a", false },
	{ "filesystem.mounts", "/a:relative", false }, { "filesystem.mounts", "/a:/", false },
	{ "filesystem.mounts", "/a:/dev/x", false }, { "filesystem.forbidden", "~/.x", true },
	{ "filesystem.forbidden", "relative", false }, { "filesystem.read_only_root", "yes", true },
	{ "filesystem.sysfs", "maybe", false }, { "no.such.key", "1", false },
	{ "network.mode", "user", true }, { "network.allow_host_loopback", "true", true },
	{ "network.allow_host_loopback", "sometimes", false }, { "network.helper", "pasta", true },
	{ "network.helper", "slirp4netns", true }, { "network.helper", "auto", true },
	{ "network.helper", "vde", false },
};

START_TEST(test_set)
{
	nsbox_config *c = fresh();
	nsbox_error *e = NULL;
	int r = nsbox_config_set(c, sets[_i].key, sets[_i].value, "--opt", &e);
	ck_assert_msg((r == 0) == sets[_i].ok, "%s=%s: %d (%s)", sets[_i].key, sets[_i].value, r,
	              e ? nsbox_error_message(e) : "");
	if (r < 0) {
		ck_assert_ptr_nonnull(e);
		ck_assert_int_eq(nsbox_error_errno(e), EINVAL);
		ck_assert_msg(strstr(nsbox_error_message(e), "Invalid argument") == NULL,
		              "input errors carry no kernel words: %s", nsbox_error_message(e));
	}
	nsbox_error_free(e);
	nsbox_config_free(c);
}
END_TEST

START_TEST(test_env_replaces_and_mounts_parse)
{
	nsbox_config *c = fresh();
	ck_assert_int_eq(nsbox_config_set(c, "environment.set", "LANG=C", NULL, NULL), 0);
	ck_assert_uint_eq(c->env_set.n, 1);
	ck_assert_str_eq(c->env_set.v[0], "LANG=C");
	ck_assert_int_eq(nsbox_config_set(c, "filesystem.mounts", "/a:b:/c:ro", NULL, NULL), 0);
	ck_assert_str_eq(c->mounts[0].source, "/a:b");
	ck_assert_str_eq(c->mounts[0].target, "/c");
	ck_assert(c->mounts[0].read_only);
	ck_assert_int_eq(nsbox_config_set(c, "filesystem.mounts", "rel:/d", NULL, NULL), 0);
	ck_assert_msg(c->mounts[1].source[0] == '/', "relative sources become absolute");
	nsbox_config_free(c);
}
END_TEST

static char *write_tmp(const char *yaml)
{
	char *path = strdup("/tmp/nsbox-unit-XXXXXX");
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, yaml, strlen(yaml)), (int) strlen(yaml));
	close(fd);
	return path;
}

static const struct { const char *yaml, *where, *what; } bad[] = {
	{ "limits:\n  memroy: 1g\n", ":2:3:", "unknown key 'limits.memroy'" },
	{ "limits:\n  pids: many\n", ":2:9:", "invalid value 'many'" },
	{ "network: none\n", ":1:10:", "'network' must be a mapping" },
	{ "environment:\n  set: [A]\n", ":2:8:", "must be a mapping of NAME: VALUE" },
	{ "filesystem:\n  mounts:\n    - { source: /a }\n", ":3:7:", "needs both 'source' and 'target'" },
	{ "image: [x\n", ":2:1:", "did not find expected" },
	{ "security: { user: 1:2, user: 3 }\n", ":1:24:", "duplicate key 'user'" },
};

START_TEST(test_policy_errors)
{
	nsbox_config *c = fresh();
	char *path = write_tmp(bad[_i].yaml);
	nsbox_error *e = NULL;
	ck_assert_int_lt(nsbox_config_load_policy(c, path, &e), 0);
	ck_assert_ptr_nonnull(e);
	const char *m = nsbox_error_message(e);
	char where[512];
	snprintf(where, sizeof(where), "%s%s", path, bad[_i].where);
	ck_assert_msg(strstr(m, where) != NULL, "'%s' lacks '%s'", m, where);
	ck_assert_msg(strstr(m, bad[_i].what) != NULL, "'%s' lacks '%s'", m, bad[_i].what);
	ck_assert_str_eq(nsbox_error_step(e), "policy");
	nsbox_error_free(e);
	unlink(path);
	free(path);
	nsbox_config_free(c);
}
END_TEST

START_TEST(test_policy_lists_replace)
{
	nsbox_config *c = fresh();
	char *path = write_tmp("filesystem:\n  forbidden: [\"/x\"]\nnetwork:\n  allow: [a.org, b.org]\n");
	ck_assert_int_eq(nsbox_config_load_policy(c, path, NULL), 0);
	ck_assert_uint_eq(c->forbidden.n, 1);
	ck_assert_str_eq(c->forbidden.v[0], "/x");
	ck_assert_uint_eq(c->allow.n, 2);
	unlink(path);
	free(path);
	nsbox_config_free(c);
}
END_TEST

START_TEST(test_standard_policy_is_the_defaults)
{
	nsbox_config *a = fresh(), *b = fresh();
	nsbox_error *e = NULL;
	ck_assert_msg(nsbox_config_load_policy(b, TOP_SRCDIR "/policies/standard.yaml", &e) == 0,
	              "%s", e ? nsbox_error_message(e) : "");
	char *ya = NULL, *yb = NULL;
	ck_assert_int_eq(nsbox_config_to_yaml(a, &ya, NULL), 0);
	ck_assert_int_eq(nsbox_config_to_yaml(b, &yb, NULL), 0);
	ck_assert_str_eq(ya, yb);
	/* and the rendering loads back to itself */
	char *path = write_tmp(ya);
	nsbox_config *c = fresh();
	ck_assert_int_eq(nsbox_config_set(c, "limits.memory", "2g", NULL, NULL), 0);
	ck_assert_int_eq(nsbox_config_load_policy(c, path, NULL), 0);
	char *yc = NULL;
	ck_assert_int_eq(nsbox_config_to_yaml(c, &yc, NULL), 0);
	ck_assert_str_eq(ya, yc);
	unlink(path);
	free(path);
	free(ya);
	free(yb);
	free(yc);
	nsbox_config_free(a);
	nsbox_config_free(b);
	nsbox_config_free(c);
}
END_TEST

START_TEST(test_command)
{
	nsbox_config *c = fresh();
	const char *argv[] = { "echo", "hi" };
	ck_assert_int_eq(nsbox_config_set_command(c, 2, argv, NULL), 0);
	ck_assert_uint_eq(c->command.n, 2);
	ck_assert_int_eq(nsbox_config_set_command(c, 0, argv, NULL), -EINVAL);
	const char *empty[] = { "" };
	ck_assert_int_eq(nsbox_config_set_command(c, 1, empty, NULL), -EINVAL);
	nsbox_config *copy = NULL;
	ck_assert_int_eq(config_copy(&copy, c), 0);
	ck_assert_str_eq(copy->command.v[1], "hi");
	nsbox_config_free(copy);
	nsbox_config_free(c);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("config");
	tcase_add_test(tc, test_defaults);
	tcase_add_loop_test(tc, test_set, 0, sizeof(sets) / sizeof(sets[0]));
	tcase_add_test(tc, test_env_replaces_and_mounts_parse);
	tcase_add_loop_test(tc, test_policy_errors, 0, sizeof(bad) / sizeof(bad[0]));
	tcase_add_test(tc, test_policy_lists_replace);
	tcase_add_test(tc, test_standard_policy_is_the_defaults);
	tcase_add_test(tc, test_command);
	return unit_run("config", tc);
}
