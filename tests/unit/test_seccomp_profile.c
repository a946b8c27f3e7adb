/* Reading seccomp profiles (nsbox's YAML format) and --seccomp's value: each
 * malformed profile is refused with the position and a message that names
 * the problem; a valid one yields exactly the model it says; a profile file
 * is read only when it is a regular file of at most 1 MiB. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "seccomp/seccomp.h"
#include "seccomp/seccomp_profile.h"
#include <sys/syscall.h>
#include "unit.h"

static const struct { const char *text, *error; } bad[] = {
	{ "a: [\n", "bad.yaml:2:1: did not find expected node content" },
	{ "- read\n", "bad.yaml: a profile must be a mapping" },
	{ "", "bad.yaml: a profile must be a mapping" },
	{ "? [a]\n: 1\n", "bad.yaml:1:3: keys must be scalars" },
	{ "name: [a]\n", "bad.yaml:1:7: name must be a scalar" },
	{ "default: errno\n", "bad.yaml:1:10: default must be a mapping { action[, errno] }" },
	{ "default: { action: trace }\n", "bad.yaml:1:20: unknown action 'trace' (allow, errno, kill, log)" },
	{ "default: { action: [x] }\n", "unknown action '?'" },
	{ "default: { errno: EWHAT }\n", "bad.yaml:1:19: unknown errno 'EWHAT'" },
	{ "default: { errno: 4096 }\n", "unknown errno '4096'" },
	{ "default: { errno: 0 }\n", "unknown errno '0'" },
	{ "default: { whence: 1 }\n", "bad.yaml:1:12: unknown key 'whence' in default" },
	{ "architectures: x86_64\n", "bad.yaml:1:16: architectures must be a list" },
	{ "deny: 3\n", "bad.yaml:1:7: 'deny' must be a list of rules" },
	{ "allow: {}\n", "'allow' must be a list of rules" },
	{ "allow:\n  - read\n", "bad.yaml:2:5: a rule must be a mapping { syscalls, ... }" },
	{ "allow:\n  - ? [a]\n    : 1\n", "bad.yaml:2:7: rule keys must be scalars" },
	{ "allow:\n  - { args: [] }\n", "bad.yaml:2:5: a rule needs 'syscalls'" },
	{ "allow:\n  - { syscalls: read }\n", "bad.yaml:2:17: expected a list of system call names" },
	{ "allow:\n  - { syscalls: [read, ''] }\n", "bad.yaml:2:24: a system call name must be a non-empty scalar" },
	{ "allow:\n  - { syscalls: [read, [x]] }\n", "a system call name must be a non-empty scalar" },
	{ "deny:\n  - { syscalls: [mount], action: errno, errno: '-1' }\n", "unknown errno '-1'" },
	{ "deny:\n  - { syscalls: [mount], action: allow }\n", "a deny rule's action is errno, kill or log" },
	{ "deny:\n  - { syscalls: [mount], action: kill, frob: 1 }\n", "unknown key 'frob' in a deny rule" },
	{ "allow:\n  - { syscalls: [socket], errno: EPERM }\n", "unknown key 'errno' in an allow rule" },
	{ "allow:\n  - { syscalls: [socket], args: 1 }\n", "bad.yaml:2:33: args must be a list of conditions" },
	{ "allow:\n  - { syscalls: [socket], args: [ 5 ] }\n",
	  "an argument condition must be a mapping { index, op, value[, mask] }" },
	{ "allow:\n  - { syscalls: [socket], args: [ { index: [0] } ] }\n",
	  "argument condition keys and values must be scalars" },
	{ "allow:\n  - { syscalls: [socket], args: [ { index: 0, op: eq, value: 1, bogus: 2 } ] }\n",
	  "unknown key 'bogus' in an argument condition" },
	{ "allow:\n  - { syscalls: [socket], args: [ { index: 0, op: eq } ] }\n",
	  "an argument condition needs index, op and value" },
	{ "allow:\n  - { syscalls: [socket], args: [ { index: 0, op: eq, value: -1 } ] }\n",
	  "value must be a non-negative number, not '-1'" },
	{ "allow:\n  - { syscalls: [socket], args: [ { index: 0, op: eq, value: 12abc } ] }\n",
	  "value must be a non-negative number, not '12abc'" },
	{ "allow:\n  - { syscalls: [socket], args: [ { index: 0, op: eq, value: 1, mask: 3 } ] }\n",
	  "mask goes with op masked_eq, and only with it" },
	{ "allow:\n  - { syscalls: [socket], args: [ { index: 0, op: masked_eq, value: 1, mask: '' } ] }\n",
	  "mask must be a non-negative number, not ''" },
	{ "allow:\n  - syscalls: [socket]\n    args:\n"
	  "      - { index: 0, op: eq, value: 0 }\n      - { index: 1, op: eq, value: 0 }\n"
	  "      - { index: 2, op: eq, value: 0 }\n      - { index: 3, op: eq, value: 0 }\n"
	  "      - { index: 4, op: eq, value: 0 }\n      - { index: 5, op: eq, value: 0 }\n"
	  "      - { index: 0, op: ne, value: 1 }\n",
	  "bad.yaml:10:9: at most 6 argument conditions" },
};

START_TEST(test_bad)
{
	sc_profile *p = NULL;
	nsbox_error *e = NULL;
	ck_assert_int_eq(sc_profile_parse(bad[_i].text, strlen(bad[_i].text), "bad.yaml", &p, &e), -EINVAL);
	ck_assert_ptr_null(p);
	ck_assert_msg(strstr(nsbox_error_message(e), bad[_i].error) != NULL, "case %d: '%s' lacks '%s'", _i,
	              nsbox_error_message(e), bad[_i].error);
	nsbox_error_free(e);
}
END_TEST

START_TEST(test_model)
{
	static const char text[] =
		"name: mine\n"
		"default: { action: log, errno: 22 }\n"
		"architectures: [x86_64, x86]\n"
		"allow:\n"
		"  - { syscalls: [read, write] }\n"
		"  - { syscalls: [socket], args: [ { index: 0, op: masked_eq, value: 0x1, mask: 0xf },\n"
		"                                  { index: 2, op: le, value: 17 } ] }\n"
		"deny:\n"
		"  - { syscalls: [mount], action: kill }\n"
		"  - { syscalls: [umount2], action: errno, errno: 13 }\n"
		"  - { syscalls: [chroot], action: log }\n"
		"  - { syscalls: [acct], action: errno, errno: EROFS }\n";
	sc_profile *p = NULL;
	nsbox_error *e = NULL;
	ck_assert_msg(sc_profile_parse(text, strlen(text), "good.yaml", &p, &e) == 0, "%s", nsbox_error_message(e));
	ck_assert_str_eq(p->name, "mine");
	ck_assert_int_eq(p->default_action, SC_LOG);
	ck_assert_int_eq(p->default_errno, 22);
	ck_assert_uint_eq(p->n_arches, 2);
	ck_assert_uint_eq(p->n_allow, 2);
	ck_assert_str_eq(p->allow[0].syscalls[1], "write");
	ck_assert_ptr_null(p->allow[0].syscalls[2]);
	ck_assert_int_eq(p->allow[0].action, SC_ALLOW);
	ck_assert_uint_eq(p->allow[1].n_args, 2);
	ck_assert_int_eq(p->allow[1].args[0].op, SC_MASKED_EQ);
	ck_assert_uint_eq(p->allow[1].args[0].value, 1);
	ck_assert_uint_eq(p->allow[1].args[0].mask, 15);
	ck_assert_uint_eq(p->allow[1].args[1].index, 2);
	ck_assert_int_eq(p->allow[1].args[1].op, SC_LE);
	ck_assert_uint_eq(p->allow[1].args[1].value, 17);
	ck_assert_uint_eq(p->n_deny, 4);
	ck_assert_int_eq(p->deny[0].action, SC_KILL);
	ck_assert_int_eq(p->deny[1].action, SC_ERRNO);
	ck_assert_int_eq(p->deny[1].errnum, 13);
	ck_assert_int_eq(p->deny[2].action, SC_LOG);
	ck_assert_int_eq(p->deny[3].errnum, EROFS);
	sc_profile_free(p);
	/* Without a name, the origin names it; the default is EPERM. */
	ck_assert_int_eq(sc_profile_parse("allow: []\n", 10, "/etc/x.yaml", &p, &e), 0);
	ck_assert_str_eq(p->name, "/etc/x.yaml");
	ck_assert_int_eq(p->default_action, SC_ERRNO);
	ck_assert_int_eq(p->default_errno, EPERM);
	sc_profile_free(p);
	sc_profile_free(NULL);
}
END_TEST

static char tmp[64];

static void setup(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/nsbox-scprof-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	(void) !system(cmd);
}

START_TEST(test_load_text)
{
	char *text = NULL, *origin = NULL, path[256], want[512];
	size_t len = 0;
	nsbox_error *e = NULL;
	/* unconfined: no text at all. */
	ck_assert_int_eq(sc_profile_load_text("unconfined", &text, &len, &origin, &e), 0);
	ck_assert_ptr_null(text);
	/* A built-in name. */
	ck_assert_int_eq(sc_profile_load_text("strict", &text, &len, &origin, &e), 0);
	ck_assert_str_eq(origin, "built-in profile 'strict'");
	ck_assert_uint_eq(len, strlen(text));
	free(text);
	free(origin);
	ck_assert_int_eq(sc_profile_load_text("lenient", &text, &len, &origin, &e), -EINVAL);
	ck_assert_str_eq(nsbox_error_message(e),
	                 "unknown seccomp profile 'lenient' (built in: default, strict; or a file, or unconfined)");
	nsbox_error_free(e);
	e = NULL;
	/* A file: read whole, named by its path. */
	snprintf(path, sizeof(path), "%s/mine.yaml", tmp);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("default: { action: allow }\n", f);
	fclose(f);
	ck_assert_int_eq(sc_profile_load_text(path, &text, &len, &origin, &e), 0);
	ck_assert_str_eq(text, "default: { action: allow }\n");
	ck_assert_uint_eq(len, 27);
	ck_assert_str_eq(origin, path);
	free(text);
	free(origin);
	/* Missing, a directory, past 1 MiB. */
	snprintf(path, sizeof(path), "%s/none.yaml", tmp);
	ck_assert_int_eq(sc_profile_load_text(path, &text, &len, &origin, &e), -ENOENT);
	snprintf(want, sizeof(want), "open seccomp profile '%s'", path);
	ck_assert_ptr_nonnull(strstr(nsbox_error_message(e), want));
	nsbox_error_free(e);
	e = NULL;
	ck_assert_int_eq(sc_profile_load_text(tmp, &text, &len, &origin, &e), -EINVAL);
	snprintf(want, sizeof(want), "read seccomp profile '%s': not a regular file of at most 1 MiB", tmp);
	ck_assert_str_eq(nsbox_error_message(e), want);
	nsbox_error_free(e);
	e = NULL;
	snprintf(path, sizeof(path), "%s/big.json", tmp);
	ck_assert_int_eq(truncate(path, 0) == 0 || errno == ENOENT, 1);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	ck_assert_int_eq(truncate(path, (1 << 20) + 1), 0);
	ck_assert_int_eq(sc_profile_load_text(path, &text, &len, &origin, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(nsbox_error_message(e), "not a regular file of at most 1 MiB"));
	nsbox_error_free(e);
	e = NULL;
	/* Exactly 1 MiB is read. */
	ck_assert_int_eq(truncate(path, 1 << 20), 0);
	ck_assert_int_eq(sc_profile_load_text(path, &text, &len, &origin, &e), 0);
	ck_assert_uint_eq(len, 1 << 20);
	free(text);
	free(origin);
	/* A regular file whose read fails (a sysfs attribute loopback has no
	 * value for): the read's error, not an empty profile. */
	const char *unreadable = "/sys/class/net/lo/speed";
	if (access(unreadable, R_OK) == 0) {
		text = origin = NULL;
		ck_assert_int_eq(sc_profile_load_text(unreadable, &text, &len, &origin, &e), -EINVAL);
		ck_assert_str_eq(nsbox_error_message(e), "read seccomp profile '/sys/class/net/lo/speed': Invalid argument");
		ck_assert_ptr_null(text);
		ck_assert_ptr_null(origin);
		nsbox_error_free(e);
		e = NULL;
	} else {
		fprintf(stderr, "skipped: no %s to fail a read\n", unreadable);
	}
}
END_TEST

/* --seccomp-log answers for layer 0 itself: only unconditional errno
 * denials have an answer of their own (a kill rule or one with argument
 * conditions falls to the default errno), names this libseccomp does not
 * know are skipped; "unconfined" is no filter at all. */
START_TEST(test_answers)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/log.yaml", tmp);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("default: { action: errno, errno: EPERM }\n"
	      "allow:\n  - { syscalls: [read, write, exit_group, chroot, mount, socket] }\n"
	      "deny:\n"
	      "  - { syscalls: [mount], action: kill }\n"
	      "  - { syscalls: [socket], action: errno, errno: EACCES, args: [ { index: 0, op: eq, value: 40 } ] }\n"
	      "  - { syscalls: [nosuchcall, chroot], action: errno, errno: EROFS }\n", f);
	fclose(f);
	setenv("NSBOX_SECCOMP_NO_CACHE", "1", 1);
	sc_bpf b;
	char *label = NULL;
	bool cached = true;
	sc_answers a = { 0 };
	nsbox_error *e = NULL;
	ck_assert_msg(sc_prepare(path, true, &b, &label, &cached, &a, &e) == 0, "%s", nsbox_error_message(e));
	ck_assert_str_eq(label, path);
	ck_assert(b.notify);
	ck_assert_uint_eq(a.n, 1);
	ck_assert_int_eq(sc_answer_for(&a, SYS_chroot), EROFS);
	ck_assert_int_eq(sc_answer_for(&a, SYS_mount), EPERM);
	ck_assert_int_eq(sc_answer_for(&a, SYS_socket), EPERM);
	free(a.v);
	free(label);
	sc_bpf_free(&b);
	ck_assert_int_eq(sc_prepare("unconfined", false, &b, &label, &cached, &a, &e), 0);
	ck_assert_str_eq(label, "unconfined");
	ck_assert_int_eq(b.n, 0);
	ck_assert(!cached);
	free(label);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("seccomp_profile");
	tcase_add_loop_test(tc, test_bad, 0, sizeof(bad) / sizeof(bad[0]));
	tcase_add_test(tc, test_model);
	TCase *tf = tcase_create("seccomp_profile_files");
	tcase_add_checked_fixture(tf, setup, teardown);
	tcase_add_test(tf, test_load_text);
	tcase_add_test(tf, test_answers);
	Suite *s = suite_create("seccomp_profile");
	suite_add_tcase(s, tc);
	suite_add_tcase(s, tf);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
