#include <check.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "opts.h"
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

/* The option parser of every subcommand (opts.c), as a table: argv in,
 * the sequence of (id or operand, value) out, or the error. */
enum { T_FLAG = 1, T_VAL, T_SHORT, T_MORE, T_BOOL };
static const opt_def tdefs[] = {
	{ "tmpfs-size", 0, "SIZE", T_VAL, "x", NULL },
	{ "interactive", 'i', NULL, T_FLAG, "x", NULL },
	{ "tty", 't', NULL, T_MORE, "x", NULL },
	{ "memory", 'm', "SIZE", T_SHORT, "x", NULL },
	{ "rm", 'r', OPT_BOOL, T_BOOL, "x", NULL },
	{ 0 },
};

static const struct {
	bool stop;
	const char *argv[8];
	const char *expect;   /* "id=value ..." as parsed, or "!message" */
} opt_rows[] = {
	/* exact long names: a prefix is no option (Docker's --tmpfs) */
	{ false, { "--tmpfs", "/tmp:size=1m" }, "!unknown option '--tmpfs'" },
	{ false, { "--tmpfs-siz", "1m" }, "!unknown option '--tmpfs-siz'" },
	{ false, { "--tmpfs-size", "1m" }, "2=1m" },
	{ false, { "--tmpfs-size=1m" }, "2=1m" },
	{ false, { "--tmpfs-size=" }, "2=" },
	{ false, { "--tmpfs-size" }, "!option '--tmpfs-size' needs a value" },
	{ false, { "--interactive=yes" }, "!option '--interactive' takes no value" },
	/* short options: a value apart or attached, flags bundled */
	{ false, { "-m", "1g" }, "3=1g" },
	{ false, { "-m1g" }, "3=1g" },
	{ false, { "-it" }, "1= 4=" },
	{ false, { "-itm", "2g" }, "1= 4= 3=2g" },
	{ false, { "-itm2g" }, "1= 4= 3=2g" },
	{ false, { "-ix" }, "1= !unknown option '-x'" },
	{ false, { "-m" }, "!option '-m' needs a value" },
	/* operands between options, or the first one stops (a command) */
	{ false, { "a", "-i", "b" }, "op=a 1= op=b" },
	{ true, { "-i", "cmd", "-m", "1g" }, "1= end@2" },
	{ false, { "-i", "--", "-m" }, "1= end@3" },
	{ false, { "-" }, "op=-" },
	/* Docker's boolean flags: bare, or =VALUE (for opt_bool); never the
	 * next argument */
	{ false, { "--rm", "x" }, "5= op=x" },
	{ false, { "--rm=false", "x" }, "5=false op=x" },
	{ false, { "--rm=" }, "5=" },
	{ false, { "-r", "-ir" }, "5= 1= 5=" },
	{ false, { "--interactive=true" }, "!option '--interactive' takes no value" },
};

START_TEST(test_opt_parser)
{
	char *argv[10] = { "cmd" };
	int argc = 1;
	for (int k = 0; k < 8 && opt_rows[_i].argv[k]; k++)
		argv[argc++] = (char *) opt_rows[_i].argv[k];
	opt_state st;
	opt_init(&st, tdefs, argc, argv, opt_rows[_i].stop);
	char got[256] = "", err[128];
	for (int guard = 0; guard < 16; guard++) {
		const char *v;
		const opt_def *d;
		int id = opt_next(&st, &v, &d, err, sizeof(err));
		size_t n = strlen(got);
		if (id == OPT_DONE) {
			if (st.i < argc)
				snprintf(got + n, sizeof(got) - n, "%send@%d", n ? " " : "", st.i);
			break;
		}
		if (id == OPT_ERROR) {
			snprintf(got + n, sizeof(got) - n, "%s!%s", n ? " " : "", err);
			break;
		}
		if (id == OPT_OPERAND)
			snprintf(got + n, sizeof(got) - n, "%sop=%s", n ? " " : "", v);
		else
			snprintf(got + n, sizeof(got) - n, "%s%d=%s", n ? " " : "", id, v ? v : "");
	}
	ck_assert_msg(!strcmp(got, opt_rows[_i].expect), "row %d: got '%s', expected '%s'", _i, got,
	              opt_rows[_i].expect);
}
END_TEST

START_TEST(test_opt_takes_value)
{
	ck_assert(opt_takes_value(tdefs, "--tmpfs-size"));
	ck_assert(!opt_takes_value(tdefs, "--tmpfs-size=1"));
	ck_assert(!opt_takes_value(tdefs, "--tmpfs"));
	ck_assert(opt_takes_value(tdefs, "-m"));
	ck_assert(opt_takes_value(tdefs, "-itm"));
	ck_assert(!opt_takes_value(tdefs, "-m1g"));
	ck_assert(!opt_takes_value(tdefs, "-it"));
	ck_assert(!opt_takes_value(tdefs, "x"));
	ck_assert(!opt_takes_value(tdefs, "--rm"));
	ck_assert(!opt_takes_value(tdefs, "-r"));
	/* run's own table: what run-code passes through */
	ck_assert(run_option_takes_value("--memory"));
	ck_assert(!run_option_takes_value("--json"));
	/* and the help lists every row */
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	run_help(f);
	fclose(f);
	for (const opt_def *d = run_option_table(); d->name; d++) {
		char want[64];
		snprintf(want, sizeof(want), "--%s", d->name);
		ck_assert_msg(strstr(text, want) != NULL, "run --help lacks %s", want);
	}
	free(text);
}
END_TEST

START_TEST(test_opt_bool)
{
	ck_assert_int_eq(opt_bool(NULL), 1);
	static const char *const yes[] = { "1", "t", "T", "true", "TRUE", "True" };
	static const char *const no[] = { "0", "f", "F", "false", "FALSE", "False" };
	for (size_t i = 0; i < 6; i++) {
		ck_assert_int_eq(opt_bool(yes[i]), 1);
		ck_assert_int_eq(opt_bool(no[i]), 0);
	}
	ck_assert_int_eq(opt_bool(""), -1);
	ck_assert_int_eq(opt_bool("yes"), -1);
	ck_assert_int_eq(opt_bool("tRue"), -1);
	/* A boolean row's help shows no value. */
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	opt_help(f, tdefs);
	fclose(f);
	ck_assert_msg(strstr(text, "  -r, --rm  ") != NULL, "help: %s", text);
	free(text);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("args");
	tcase_add_loop_test(tc, test_opt_parser, 0, (int) (sizeof(opt_rows) / sizeof(opt_rows[0])));
	tcase_add_test(tc, test_opt_takes_value);
	tcase_add_test(tc, test_opt_bool);
	tcase_add_test(tc, test_options_to_settings);
	tcase_add_test(tc, test_network_user_options);
	tcase_add_test(tc, test_double_dash_and_policy);
	tcase_add_test(tc, test_errors);
	return unit_run("args", tc);
}
