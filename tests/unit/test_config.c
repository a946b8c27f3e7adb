#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/conf.h"
#include "base/error.h"
#include "base/strv.h"
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
	{ "hostname", "a..b", false }, { "hostname", ".a", false }, { "hostname", "a.", false },
	{ "hostname", "a-", false }, { "workdir", "/a//b", false }, { "workdir", "/a/./b", false },
	{ "workdir", "/a/b/", true }, { "network.allow", "[::1]:443", true },
	{ "network.allow", "[::1", false }, { "network.allow", "[::1]x", false },
	{ "network.allow", "[fe80::zz]", false }, { "network.allow", "2001:db8::1", false },
	{ "network.allow", "[1111:2222:3333:4444:5555:6666:7777:8888:9999:aaaa]", false },
	{ "network.allow", "*.", false }, { "network.allow", "a_b.org", false },
	{ "limits.fsize", "unlimited", true }, { "limits.fsize", "huge", false },
	{ "limits.require_cgroup", "maybe", false }, { "limits.fallback", "rlimit", true },
	{ "limits.fallback", "ignore", false }, { "limits.cgroup_parent", "/nsbox.slice", true },
	{ "limits.cgroup_parent", "nsbox.slice", false }, { "limits.nofile", "15", false },
	{ "rootfs", "", false }, { "rootfs", "/srv/root", true }, { "security.seccomp", "", false },
	{ "workspace.path", "", false }, { "workspace.mode", "rw", true }, { "workspace.mode", "cow", false },
	{ "workspace.session", "s-1", true }, { "workspace.session", "a/b", false },
	{ "workspace.max_size", "512k", false }, { "workspace.max_files", "99", false },
	{ "security.seccomp_log", "loud", false }, { "filesystem.allowed_roots", "~", true },
	{ "filesystem.allowed_roots", "~user/x", false }, { "workspace.deny_changes", "", false },
	{ "audit.on_error", "warn", true }, { "audit.on_error", "sometimes", false },
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
	{ "filesystem:\n  mounts:\n    - { [a]: /x }\n", ":3:9:", "mount keys must be scalars" },
	{ "filesystem:\n  mounts:\n    - { source: [a], target: /x }\n", ":3:17:", "'source' must be a scalar, not a list" },
	{ "filesystem:\n  mounts:\n    - { source: { a: b }, target: /x }\n", ":3:17:", "'source' must be a scalar, not a mapping" },
	{ "filesystem:\n  mounts:\n    - { source: /a, target: /x, read_only: yes }\n", ":3:44:",
	  "read_only must be true or false, not 'yes'" },
	{ "filesystem:\n  mounts:\n    - { source: /a, target: /x, mode: ro }\n", ":3:33:",
	  "unknown key 'mode' in a mount (expected source, target, read_only)" },
	{ "filesystem:\n  mounts:\n    - { source: relative-no-colon, target: x }\n", ":3:7:", "mount target 'x' must be an absolute path below '/' without '.' or '..'" },
	{ "environment:\n  set: { A: [1] }\n", ":2:13:", "'environment.set' entries must be scalars" },
	{ "environment:\n  set: [A=1]\n", ":2:8:", "'environment.set' must be a mapping of NAME: VALUE, not a list" },
	{ "network:\n  allow: [ [a] ]\n", ":2:12:", "'network.allow' entries must be scalars, not a list" },
	{ "network:\n  allow: example.org\n", ":2:10:", "'network.allow' must be a list, not a scalar" },
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

/* Host names: at most 64 characters, labels of 1 to 63. */
START_TEST(test_hostname_limits)
{
	nsbox_config *c = fresh();
	char h[80];
	memset(h, 'a', 63);
	h[63] = '\0';
	ck_assert_int_eq(nsbox_config_set(c, "hostname", h, NULL, NULL), 0);
	ck_assert_str_eq(c->hostname, h);
	memset(h, 'a', 64);
	h[64] = '\0';   /* 64 characters, but one label of 64 */
	ck_assert_int_eq(nsbox_config_set(c, "hostname", h, NULL, NULL), -EINVAL);
	h[1] = '.';     /* labels of 1 and 62 */
	ck_assert_int_eq(nsbox_config_set(c, "hostname", h, NULL, NULL), 0);
	memset(h, 'a', 65);
	h[65] = '\0';
	h[30] = '.';    /* 65 characters */
	nsbox_error *e = NULL;
	ck_assert_int_eq(nsbox_config_set(c, "hostname", h, "--hostname", &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(nsbox_error_message(e), "--hostname: invalid value"));
	ck_assert_ptr_nonnull(strstr(nsbox_error_message(e), "(at most 64)"));
	nsbox_error_free(e);
	/* the last good value stays */
	ck_assert_uint_eq(strlen(c->hostname), 64);
	/* an allowed host name of 253 is the DNS limit */
	char host[300];
	memset(host, 'a', 253);
	host[253] = '\0';
	ck_assert_int_eq(nsbox_config_set(c, "network.allow", host, NULL, NULL), 0);
	strcat(host, "a");
	ck_assert_int_eq(nsbox_config_set(c, "network.allow", host, NULL, NULL), -EINVAL);
	ck_assert_uint_eq(c->allow.n, 1);
	nsbox_config_free(c);
}
END_TEST

/* The messages say where a value came from and what was expected. */
START_TEST(test_set_messages)
{
	nsbox_config *c = fresh();
	nsbox_error *e = NULL;
	ck_assert_int_eq(nsbox_config_set(NULL, "image", "x", NULL, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(nsbox_error_message(e), "set option: missing argument"));
	nsbox_error_free(e);
	e = NULL;
	ck_assert_int_eq(nsbox_config_set(c, "image", NULL, NULL, &e), -EINVAL);
	nsbox_error_free(e);
	e = NULL;
	ck_assert_int_eq(nsbox_config_set(c, "audit.on_error", "sometimes", "policy.yaml:3:4", &e), -EINVAL);
	ck_assert_str_eq(nsbox_error_message(e),
	                 "policy.yaml:3:4: invalid value 'sometimes' (expected one of fail, warn)");
	ck_assert_int_eq(nsbox_error_errno(e), EINVAL);
	nsbox_error_free(e);
	e = NULL;
	ck_assert_int_eq(nsbox_config_set(c, "limits.memroy", "1g", NULL, &e), -EINVAL);
	ck_assert_str_eq(nsbox_error_message(e), "limits.memroy: unknown setting 'limits.memroy'");
	nsbox_error_free(e);
	e = NULL;
	/* A mount's own message, not the generic one; origin defaults to the key. */
	ck_assert_int_eq(nsbox_config_set(c, "filesystem.mounts", "/a", NULL, &e), -EINVAL);
	ck_assert_str_eq(nsbox_error_message(e), "filesystem.mounts: '/a' is not SRC:DST[:ro|rw]");
	nsbox_error_free(e);
	e = NULL;
	ck_assert_int_eq(nsbox_config_set(c, "filesystem.mounts", "/a:/proc/sys", "--volume", &e), -EINVAL);
	ck_assert_str_eq(nsbox_error_message(e),
	                 "--volume: mount target '/proc/sys' is inside '/proc', which nsbox sets up itself");
	nsbox_error_free(e);
	/* and with nowhere to put it, the same refusal */
	ck_assert_int_eq(nsbox_config_set(c, "filesystem.mounts", ":/b", NULL, NULL), -EINVAL);
	ck_assert_int_eq(nsbox_config_set(c, "filesystem.mounts", "/a:", NULL, NULL), -EINVAL);
	ck_assert_uint_eq(c->n_mounts, 0);
	ck_assert_uint_eq(nsbox_config_timeout_ms(c), 60000);
	ck_assert_uint_eq(nsbox_config_timeout_ms(NULL), 0);
	nsbox_config_free(c);
}
END_TEST

/* require_cgroup is the older spelling of fallback: refuse; false undoes
 * only that. */
START_TEST(test_require_cgroup)
{
	nsbox_config *c = fresh();
	ck_assert_int_eq(nsbox_config_set(c, "limits.fallback", "rlimit", NULL, NULL), 0);
	ck_assert_int_eq(nsbox_config_set(c, "limits.require_cgroup", "false", NULL, NULL), 0);
	ck_assert_int_eq(c->fallback, FALLBACK_RLIMIT);
	ck_assert_int_eq(nsbox_config_set(c, "limits.require_cgroup", "true", NULL, NULL), 0);
	ck_assert_int_eq(c->fallback, FALLBACK_REFUSE);
	ck_assert_int_eq(nsbox_config_set(c, "limits.require_cgroup", "false", NULL, NULL), 0);
	ck_assert_int_eq(c->fallback, FALLBACK_WARN);
	nsbox_config_free(c);
}
END_TEST

START_TEST(test_new_and_clear)
{
	nsbox_error *e = NULL;
	ck_assert_int_eq(nsbox_config_new(NULL, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(nsbox_error_message(e), "no output pointer"));
	nsbox_error_free(e);
	nsbox_config_free(NULL);   /* nothing to free: fine */
	ck_assert_str_eq(nsbox_version(), PACKAGE_VERSION);
	nsbox_config *c = fresh();
	ck_assert_int_eq(nsbox_config_set(c, "network.allow", "a.org", NULL, NULL), 0);
	ck_assert_int_eq(nsbox_config_set(c, "filesystem.mounts", "/a:/b", NULL, NULL), 0);
	ck_assert_int_eq(nsbox_config_set(c, "environment.pass", "HOME", NULL, NULL), 0);
	ck_assert_int_eq(nsbox_config_set(c, "filesystem.allowed_roots", "/w", NULL, NULL), 0);
	ck_assert(config_key_is_list("network.allow"));
	ck_assert(!config_key_is_list("limits.memory"));
	ck_assert(config_key_known("audit.keep"));
	ck_assert(!config_key_known("audit.kept"));
	/* not a list, or not a key: refused, nothing cleared */
	ck_assert_int_eq(config_clear_list(c, "limits.memory"), -EINVAL);
	ck_assert_int_eq(config_clear_list(c, "network.alow"), -EINVAL);
	ck_assert_uint_eq(c->memory, 512ull << 20);
	ck_assert_uint_eq(c->allow.n, 1);
	const char *lists[] = { "network.allow", "filesystem.mounts", "filesystem.forbidden",
	                        "filesystem.allowed_roots", "workspace.deny_changes",
	                        "environment.set", "environment.pass" };
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
		ck_assert_int_eq(config_clear_list(c, lists[i]), 0);
	ck_assert_uint_eq(c->allow.n, 0);
	ck_assert_uint_eq(c->n_mounts, 0);
	ck_assert_ptr_null(c->mounts);
	ck_assert_uint_eq(c->forbidden.n, 0);
	ck_assert_uint_eq(c->allowed_roots.n, 0);
	ck_assert_uint_eq(c->deny_changes.n, 0);
	ck_assert_uint_eq(c->env_set.n, 0);
	ck_assert_uint_eq(c->env_pass.n, 0);
	nsbox_config_free(c);
}
END_TEST

START_TEST(test_add_mount)
{
	nsbox_config *c = fresh();
	nsbox_error *e = NULL;
	ck_assert_int_eq(config_add_mount(c, "", "/t", false, "/base", NULL, &e), -EINVAL);
	ck_assert_str_eq(nsbox_error_message(e), "filesystem.mounts: empty mount source");
	nsbox_error_free(e);
	ck_assert_int_eq(config_add_mount(c, NULL, "/t", false, "/base", "--volume", NULL), -EINVAL);
	ck_assert_uint_eq(c->n_mounts, 0);
	/* relative to the policy file's directory, or kept as given */
	ck_assert_int_eq(config_add_mount(c, "src", "/t", true, "/base", NULL, NULL), 0);
	ck_assert_int_eq(config_add_mount(c, "~/x", "/u", false, "/base", NULL, NULL), 0);
	ck_assert_uint_eq(c->n_mounts, 2);
	ck_assert_str_eq(c->mounts[0].source, "/base/src");
	ck_assert(c->mounts[0].read_only);
	ck_assert_str_eq(c->mounts[1].source, "~/x");
	ck_assert(!c->mounts[1].read_only);
	/* A relative source against a working directory that is gone: said,
	 * not a mount of some other place. (This test runs in a forked child.) */
	char d[] = "/tmp/nsbox-unit-cwd.XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(d));
	ck_assert_int_eq(chdir(d), 0);
	ck_assert_int_eq(rmdir(d), 0);
	e = NULL;
	ck_assert_int_eq(config_add_mount(c, "rel", "/t", false, NULL, "--volume", &e), -ENOENT);
	ck_assert_str_eq(nsbox_error_step(e), "config");
	ck_assert_ptr_nonnull(strstr(nsbox_error_message(e), "--volume: resolve relative source 'rel'"));
	nsbox_error_free(e);
	ck_assert_uint_eq(c->n_mounts, 2);
	nsbox_config_free(c);
}
END_TEST

START_TEST(test_add_file_and_copy)
{
	nsbox_config *c = fresh();
	nsbox_error *e = NULL;
	ck_assert_int_eq(nsbox_config_add_file(NULL, "/etc/x", "a", 1, 0644, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(nsbox_error_message(e), "add file: missing argument"));
	nsbox_error_free(e);
	ck_assert_int_eq(nsbox_config_add_file(c, NULL, "a", 1, 0644, NULL), -EINVAL);
	ck_assert_int_eq(nsbox_config_add_file(c, "/etc/x", NULL, 1, 0644, NULL), -EINVAL);
	const char *bad_paths[] = { "etc/x", "/", "/etc/../x", "/etc//x", "" };
	for (size_t i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++) {
		e = NULL;
		ck_assert_int_eq(nsbox_config_add_file(c, bad_paths[i], "a", 1, 0644, &e), -EINVAL);
		char want[128];
		snprintf(want, sizeof(want), "add file '%s': not an absolute path below '/'", bad_paths[i]);
		ck_assert_msg(strstr(nsbox_error_message(e), want), "%s", nsbox_error_message(e));
		nsbox_error_free(e);
	}
	ck_assert_int_eq(nsbox_config_add_file(c, "/etc/x", "a", 1, 010000, NULL), -EINVAL);
	/* Over 64 MiB is refused before a byte is read. */
	e = NULL;
	ck_assert_int_eq(nsbox_config_add_file(c, "/big", "a", (64u << 20) + 1, 0644, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(nsbox_error_message(e), "add file '/big': 67108865 bytes is more than 64 MiB"));
	nsbox_error_free(e);
	ck_assert_uint_eq(c->n_files, 0);
	ck_assert_int_eq(nsbox_config_add_file(c, "/etc/empty", NULL, 0, 0600, NULL), 0);
	ck_assert_int_eq(nsbox_config_add_file(c, "/etc/motd", "hello", 5, 04755, NULL), 0);
	ck_assert_int_eq(nsbox_config_set(c, "filesystem.mounts", "/a:/b:ro", NULL, NULL), 0);
	/* A copy is deep: its own strings, the same contents. */
	nsbox_config *d = NULL;
	ck_assert_int_eq(config_copy(&d, c), 0);
	ck_assert_uint_eq(d->n_files, 2);
	ck_assert_str_eq(d->files[1].path, "/etc/motd");
	ck_assert_uint_eq(d->files[1].len, 5);
	ck_assert_int_eq(memcmp(d->files[1].data, "hello", 5), 0);
	ck_assert_uint_eq(d->files[1].mode, 04755);
	ck_assert_ptr_ne(d->files[1].data, c->files[1].data);
	ck_assert_uint_eq(d->files[0].len, 0);
	ck_assert_uint_eq(d->n_mounts, 1);
	ck_assert_str_eq(d->mounts[0].source, "/a");
	ck_assert_str_eq(d->mounts[0].target, "/b");
	ck_assert(d->mounts[0].read_only);
	ck_assert_ptr_ne(d->mounts[0].source, c->mounts[0].source);
	nsbox_config_free(c);
	ck_assert_str_eq(d->mounts[0].target, "/b");   /* still there once the original is gone */
	nsbox_config_free(d);
}
END_TEST

/* A NULL inside argv: refused, and no half command left. */
START_TEST(test_command_with_hole)
{
	nsbox_config *c = fresh();
	const char *good[] = { "echo", "hi" };
	ck_assert_int_eq(nsbox_config_set_command(c, 2, good, NULL), 0);
	const char *holed[] = { "echo", NULL, "x" };
	nsbox_error *e = NULL;
	ck_assert_int_eq(nsbox_config_set_command(c, 3, holed, &e), -EINVAL);
	ck_assert_str_eq(nsbox_error_step(e), "config");
	nsbox_error_free(e);
	ck_assert_uint_eq(c->command.n, 0);
	ck_assert_int_eq(nsbox_config_set_command(c, 1, NULL, NULL), -EINVAL);
	ck_assert_int_eq(nsbox_config_set_command(NULL, 1, good, NULL), -EINVAL);
	nsbox_config_free(c);
}
END_TEST

/* Variable names, as environment.set, --env-pass and an image's ENV take
 * them (one check: base/strv.c). */
static const struct { const char *in; size_t n; bool ok; } env_names[] = {
	{ "PATH", 4, true }, { "_x1", 3, true }, { "a", 1, true }, { "A_B_C9", 6, true },
	{ "", 0, false }, { "1A", 2, false }, { "A-B", 3, false }, { "A B", 3, false }, { "A=B", 3, false },
	{ "Ä", 2, false }, { "AB=x", 2, true },   /* (the name only: the length stops at '=') */
};

START_TEST(test_env_names)
{
	ck_assert_msg(env_name_ok(env_names[_i].in, env_names[_i].n) == env_names[_i].ok, "env_name_ok('%.*s') != %d",
	              (int) env_names[_i].n, env_names[_i].in, env_names[_i].ok);
}
END_TEST

/* The NSBOX_* variables through the one table every door reads: each
 * applies its key, the first match of a name wins as getenv's would, names
 * that merely start like one do not count, a bad value is the variable's
 * error, and every row of the table names a key the configuration knows. */
START_TEST(test_apply_env)
{
	nsbox_config *c = fresh();
	nsbox_error *e = NULL;
	const char *envp[] = { "NSBOX_MEMORYX=1g", "NSBOX_MEMORY=256m", "NSBOX_MEMORY=1g", "NSBOX_CPUS=0.5",
		               "NSBOX_PIDS_LIMIT=12", "NSBOX_TIMEOUT=90s", "NSBOX_HOSTNAME=envhost", "PATH=/bin",
		               "NSBOX_NETWORK=host", NULL };
	ck_assert_int_eq(nsbox_config_apply_env(c, envp, &e), 0);
	ck_assert_uint_eq(c->memory, 256ull << 20);
	ck_assert(c->cpus == 0.5);
	ck_assert_uint_eq(c->pids, 12);
	ck_assert_uint_eq(c->timeout_ms, 90000);
	ck_assert_str_eq(c->hostname, "envhost");
	ck_assert_int_eq(c->net, NET_HOST);
	/* No NSBOX_* at all, or no environment: nothing changes. */
	const char *none[] = { "HOME=/x", NULL };
	ck_assert_int_eq(nsbox_config_apply_env(c, none, &e), 0);
	ck_assert_int_eq(nsbox_config_apply_env(c, NULL, &e), 0);
	ck_assert_uint_eq(c->memory, 256ull << 20);
	/* A bad value: the variable is named. */
	const char *wrong[] = { "NSBOX_PIDS_LIMIT=many", NULL };
	ck_assert_int_lt(nsbox_config_apply_env(c, wrong, &e), 0);
	ck_assert_ptr_nonnull(strstr(nsbox_error_message(e), "NSBOX_PIDS_LIMIT"));
	nsbox_error_free(e);
	e = NULL;
	ck_assert_int_lt(nsbox_config_apply_env(NULL, envp, &e), 0);
	ck_assert_str_eq(nsbox_error_message(e), "apply NSBOX_* variables: no configuration");
	nsbox_error_free(e);
	/* Every row names a key that nsbox_config_set takes. */
	const char *var, *key;
	size_t n = 0;
	for (size_t i = 0; nsbox_env_setting(i, &var, &key) == 0; i++, n++) {
		ck_assert_msg(!strncmp(var, "NSBOX_", 6), "%s", var);
		nsbox_error *ke = NULL;
		int r = nsbox_config_set(c, key, "", var, &ke);
		/* An empty value may be refused, but never as an unknown key. */
		ck_assert_msg(r == 0 || !strstr(nsbox_error_message(ke), "unknown"), "%s -> %s: %s", var, key,
		              nsbox_error_message(ke));
		nsbox_error_free(ke);
	}
	ck_assert_uint_ge(n, 18);
	ck_assert_int_eq(nsbox_env_setting(n, &var, &key), -ENOENT);
	nsbox_config_free(c);
}
END_TEST

/* text_trim_end: a message's trailing newlines, returns and spaces go;
 * what is inside stays. */
START_TEST(test_text_trim_end)
{
	static const struct { const char *in; size_t want; } rows[] = {
		{ "", 0 }, { "\n", 0 }, { " \r\n \n", 0 }, { "tar: x\n", 6 }, { "a b \r\n", 3 },
		{ "line\nnext\n\n", 9 }, { "tab\t", 4 }, { "x", 1 },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++)
		ck_assert_msg(text_trim_end(rows[i].in, strlen(rows[i].in)) == rows[i].want, "row %zu: '%s'", i, rows[i].in);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("config");
	tcase_add_loop_test(tc, test_env_names, 0, sizeof(env_names) / sizeof(env_names[0]));
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_text_trim_end);
	tcase_add_test(tc, test_apply_env);
	tcase_add_loop_test(tc, test_set, 0, sizeof(sets) / sizeof(sets[0]));
	tcase_add_test(tc, test_env_replaces_and_mounts_parse);
	tcase_add_loop_test(tc, test_policy_errors, 0, sizeof(bad) / sizeof(bad[0]));
	tcase_add_test(tc, test_policy_lists_replace);
	tcase_add_test(tc, test_standard_policy_is_the_defaults);
	tcase_add_test(tc, test_command);
	tcase_add_test(tc, test_hostname_limits);
	tcase_add_test(tc, test_set_messages);
	tcase_add_test(tc, test_require_cgroup);
	tcase_add_test(tc, test_new_and_clear);
	tcase_add_test(tc, test_add_mount);
	tcase_add_test(tc, test_add_file_and_copy);
	tcase_add_test(tc, test_command_with_hole);
	return unit_run("config", tc);
}
