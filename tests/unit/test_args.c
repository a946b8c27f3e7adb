#include <check.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "unit.h"

static int parse(run_args *a, char *errbuf, char **env, ...)
{
	static char *argv[32];   /* a.argv points into it after we return */
	int argc = 0;
	va_list ap;
	va_start(ap, env);
	for (char *s; (s = va_arg(ap, char *)) && argc < 31;)
		argv[argc++] = s;
	va_end(ap);
	argv[argc] = NULL;
	return parse_run_args(argc, argv, env, a, errbuf, 256);
}

START_TEST(test_options_to_settings)
{
	run_args a;
	char err[256];
	char *env[] = { "NSBOX_TIMEOUT=5s", "OTHER=1", NULL };
	ck_assert_int_eq(parse(&a, err, env, "run", "-m", "1g", "--json", "-v", "/a:/b", "--timeout=9s",
	                       "echo", "-m", "x", NULL), 0);
	ck_assert(a.json);
	ck_assert_int_eq(a.argc, 3);
	ck_assert_str_eq(a.argv[0], "echo");
	ck_assert_str_eq(a.argv[1], "-m");      /* options after the command belong to it */
	ck_assert_uint_eq(a.n_settings, 4);
	ck_assert_str_eq(a.settings[0].key, "limits.timeout");   /* environment first */
	ck_assert_str_eq(a.settings[0].origin, "NSBOX_TIMEOUT");
	ck_assert_str_eq(a.settings[1].key, "limits.memory");
	ck_assert_str_eq(a.settings[1].value, "1g");
	ck_assert_str_eq(a.settings[2].key, "filesystem.mounts");
	ck_assert_str_eq(a.settings[3].value, "9s");
	ck_assert_str_eq(a.settings[3].origin, "--timeout");
	run_args_free(&a);
}
END_TEST

START_TEST(test_network_user_options)
{
	run_args a;
	char err[256];
	char *env[] = { "NSBOX_NETWORK_HELPER=slirp4netns", NULL };
	ck_assert_int_eq(parse(&a, err, env, "run", "--network", "user", "--allow-host-loopback", "true", NULL), 0);
	ck_assert_uint_eq(a.n_settings, 3);
	ck_assert_str_eq(a.settings[0].key, "network.helper");
	ck_assert_str_eq(a.settings[0].value, "slirp4netns");
	ck_assert_str_eq(a.settings[1].key, "network.mode");
	ck_assert_str_eq(a.settings[2].key, "network.allow_host_loopback");
	ck_assert_str_eq(a.settings[2].value, "true");
	ck_assert_str_eq(a.settings[2].origin, "--allow-host-loopback");
	ck_assert_int_eq(a.argc, 1);      /* a flag: "true" is the command */
	run_args_free(&a);
}
END_TEST

START_TEST(test_double_dash_and_policy)
{
	run_args a;
	char err[256];
	char *env[] = { "NSBOX_POLICY=/p.yaml", NULL };
	ck_assert_int_eq(parse(&a, err, env, "run", "--", "--weird-command", NULL), 0);
	ck_assert_str_eq(a.argv[0], "--weird-command");
	ck_assert_str_eq(a.policy, "/p.yaml");
	run_args_free(&a);
	ck_assert_int_eq(parse(&a, err, env, "run", "--policy", "/q.yaml", "--max-output", "1k", "true", NULL), 0);
	ck_assert_str_eq(a.policy, "/q.yaml");
	ck_assert(a.max_output);
	run_args_free(&a);
}
END_TEST

START_TEST(test_errors)
{
	run_args a;
	char err[256];
	char *env[] = { NULL };
	ck_assert_int_eq(parse(&a, err, env, "run", "--frob", "x", NULL), -1);
	ck_assert_str_eq(err, "unknown option '--frob'");
	run_args_free(&a);
	ck_assert_int_eq(parse(&a, err, env, "run", "-Z", "x", NULL), -1);
	ck_assert_str_eq(err, "unknown option '-Z'");
	run_args_free(&a);
	ck_assert_int_eq(parse(&a, err, env, "run", "--memory", NULL), -1);
	ck_assert_str_eq(err, "option '--memory' needs a value");
	run_args_free(&a);
	ck_assert_int_eq(parse(&a, err, env, "run", "--json", NULL), -1);
	ck_assert(strstr(err, "no command given") != NULL);
	run_args_free(&a);
	/* A value given to a flag (found by tests/fuzz: the message showed
	 * the option's internal number as a control character). */
	ck_assert_int_eq(parse(&a, err, env, "run", "--json=1", "x", NULL), -1);
	ck_assert_str_eq(err, "option '--json' takes no value");
	run_args_free(&a);
	ck_assert_int_eq(parse(&a, err, env, "run", "--sysfs=", "x", NULL), -1);
	ck_assert_str_eq(err, "option '--sysfs' takes no value");
	run_args_free(&a);
	ck_assert_int_eq(parse(&a, err, env, "run", "-h", NULL), 0);
	ck_assert(a.help);
	run_args_free(&a);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("args");
	tcase_add_test(tc, test_options_to_settings);
	tcase_add_test(tc, test_network_user_options);
	tcase_add_test(tc, test_double_dash_and_policy);
	tcase_add_test(tc, test_errors);
	return unit_run("args", tc);
}
