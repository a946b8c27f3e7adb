/* audit.c's line for fabricated results: a run without a policy (nulls, not
 * a crash), a killed run (exit_code null), denied syscalls and denied
 * workspace changes, the error's step and message, a line over 64 KiB
 * rendered again without the command (its digest kept), and the failures
 * of opening and writing the log. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "sandbox.h"
#include "sha256.h"
#include "unit.h"

static bool has(const char *line, const char *part)
{
	if (strstr(line, part))
		return true;
	fprintf(stderr, "missing %s in %.300s\n", part, line);
	return false;
}

START_TEST(test_line_without_policy)
{
	nsbox_result r = { .status = NSBOX_STATUS_SIGNALED, .signal = 9, .exit_code = -1 };
	snprintf(r.id, sizeof(r.id), "0123456789abcdef0123456789abcdef");
	denied_call calls[2] = { { .name = "ptrace", .count = 1 }, { .name = "mount", .count = 2 } };
	r.seccomp_log = true;
	r.denied = calls;
	r.n_denied = 2;
	ws_change ch[2] = { { .path = "a", .kind = "added" }, { .path = ".git/hooks/x", .kind = "added", .denied = true } };
	r.changes = ch;
	r.n_changes = 2;
	ck_assert_int_lt(nsbox_err(&r.error, EACCES, "mount", "bind '%s'", "/srv/\"x\""), 0);
	char *line = NULL;
	ck_assert_int_eq(nsbox_result_audit_json(&r, &line, NULL), 0);
	ck_assert(has(line, "\"id\":\"0123456789abcdef0123456789abcdef\""));
	ck_assert(has(line, "\"command\":null"));
	ck_assert(has(line, "\"code_sha256\":null"));
	ck_assert(has(line, "\"policy_sha256\":null"));
	ck_assert(has(line, "\"image\":null"));
	ck_assert(has(line, "\"status\":\"signaled\",\"exit_code\":null,\"signal\":9"));
	ck_assert(has(line, "\"changes\":2,\"changes_denied\":true"));
	ck_assert(has(line, "\"denied_syscalls\":[\"ptrace\",\"mount\"]"));
	ck_assert(has(line, "\"error\":{\"step\":\"mount\",\"message\":\"bind '/srv/\\\"x\\\"': Permission denied\"}"));
	ck_assert(has(line, "\"truncated\":false"));
	ck_assert_int_eq(line[strlen(line) - 1], '\n');
	ck_assert_ptr_eq(strchr(line, '\n'), line + strlen(line) - 1);   /* one line */
	free(line);
	nsbox_error_free(r.error);
}
END_TEST

/* A command of 70,000 bytes: the line would pass 64 KiB; it is written
 * without the command, marked truncated, the command's digest kept. */
START_TEST(test_line_too_long)
{
	nsbox_result r = { .status = NSBOX_STATUS_EXITED, .exit_code = 3 };
	snprintf(r.id, sizeof(r.id), "fedcba9876543210fedcba9876543210");
	ck_assert_int_eq(nsbox_config_new(&r.cfg, NULL), 0);
	static char big[70001];
	memset(big, 'a', sizeof(big) - 1);
	const char *argv[] = { "echo", big };
	ck_assert_int_eq(nsbox_config_set_command(r.cfg, 2, argv, NULL), 0);
	char *line = NULL;
	ck_assert_int_eq(nsbox_result_audit_json(&r, &line, NULL), 0);
	ck_assert_uint_lt(strlen(line), 64 * 1024);
	ck_assert(has(line, "\"command\":null"));
	ck_assert(has(line, "\"truncated\":true"));
	ck_assert(has(line, "\"status\":\"exited\",\"exit_code\":3"));
	ck_assert(has(line, "\"policy_sha256\":\""));
	/* The digest of the argument vector, NUL-terminated strings. */
	static char bytes[5 + 70001];
	memcpy(bytes, "echo", 5);
	memcpy(bytes + 5, big, sizeof(big));
	char hex[65], want[100];
	sha256_hex(bytes, sizeof(bytes), hex);
	snprintf(want, sizeof(want), "\"command_sha256\":\"%s\"", hex);
	ck_assert(has(line, want));
	free(line);
	/* A short command: all of it, not truncated. */
	const char *small[] = { "true" };
	ck_assert_int_eq(nsbox_config_set_command(r.cfg, 1, small, NULL), 0);
	ck_assert_int_eq(nsbox_result_audit_json(&r, &line, NULL), 0);
	ck_assert(has(line, "\"command\":[\"true\"]"));
	ck_assert(has(line, "\"truncated\":false"));
	free(line);
	nsbox_config_free(r.cfg);
}
END_TEST

START_TEST(test_log_errors)
{
	nsbox_result r = { .status = NSBOX_STATUS_EXITED };
	snprintf(r.id, sizeof(r.id), "00000000000000000000000000000000");
	int fd = -1;
	nsbox_error *e = NULL;
	ck_assert_int_eq(nsbox_audit_open(NULL, &fd, NULL), -EINVAL);
	ck_assert_int_eq(nsbox_audit_open("", &fd, NULL), -EINVAL);
	ck_assert_int_eq(nsbox_audit_open("/tmp/x", NULL, NULL), -EINVAL);
	ck_assert_int_eq(nsbox_result_audit_json(NULL, NULL, NULL), -EINVAL);
	ck_assert_int_eq(nsbox_audit_append(-1, &r, &e), -EINVAL);
	ck_assert_str_eq(nsbox_error_message(e), "write audit line: missing argument: Invalid argument");
	nsbox_error_free(e);
	/* A directory where the log goes; a log that cannot grow. */
	e = NULL;
	ck_assert_int_eq(nsbox_audit_open("/", &fd, &e), -EISDIR);
	ck_assert_ptr_nonnull(strstr(nsbox_error_message(e), "open audit log '/'"));
	nsbox_error_free(e);
	int full = open("/dev/full", O_WRONLY | O_CLOEXEC);
	if (full >= 0) {
		e = NULL;
		ck_assert_int_eq(nsbox_audit_append(full, &r, &e), -ENOSPC);
		ck_assert_ptr_nonnull(strstr(nsbox_error_message(e), "write audit line"));
		nsbox_error_free(e);
		close(full);
	}
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("audit_line");
	tcase_add_test(tc, test_line_without_policy);
	tcase_add_test(tc, test_line_too_long);
	tcase_add_test(tc, test_log_errors);
	return unit_run("audit_line", tc);
}
