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

#include "base/error.h"
#include "sandbox/sandbox.h"
#include "base/sha256.h"
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

/* ---- result.c: what a failed step and a failed run say ----------------- */

static void step_is(const nsbox_plan *p, int step, int index, int err, const char *id, const char *message)
{
	msg m = { .type = MSG_ERROR, .step = step, .index = index, .err = err };
	nsbox_error *e = NULL;
	ck_assert_int_eq(step_error(p, &m, &e), -err);
	ck_assert_str_eq(nsbox_error_step(e), id);
	ck_assert_str_eq(nsbox_error_message(e), message);
	ck_assert_int_eq(nsbox_error_errno(e), err);
	nsbox_error_free(e);
}

/* Each step names what it worked on, and the hints a user can act on come
 * only with the errors they explain. */
START_TEST(test_step_error)
{
	mount_op ops[2] = { { .target = "data", .desc = "bind '/srv/data' on '/data'", .flags = OPF_MKPOINT },
	                    { .target = "proc", .desc = "mount proc on '/proc'" } };
	char *argv[] = { "/bin/true", NULL };
	nsbox_plan p = { .ops = ops, .n_ops = 2, .rootfs_path = "/srv/img", .workdir = "/work",
	                 .argv = argv, .hostname = "box" };
	step_is(&p, STEP_ROOT, -1, EACCES, "rootfs",
	        "set up root filesystem '/srv/img': Permission denied (hint: the root filesystem must be "
	        "readable and searchable by other users (chmod 755))");
	step_is(&p, STEP_ROOT, -1, ENOENT, "rootfs", "set up root filesystem '/srv/img': No such file or directory");
	step_is(&p, STEP_MOUNT_OP, 0, EROFS, "mount",
	        "set up mounts: bind '/srv/data' on '/data': Read-only file system (hint: the mount point does "
	        "not exist in the read-only image: create it there, or mount below /tmp)");
	/* The same error on an op that does not create its mount point: no hint. */
	step_is(&p, STEP_MOUNT_OP, 1, EROFS, "mount", "set up mounts: mount proc on '/proc': Read-only file system");
	step_is(&p, STEP_MOUNT_OP, 1, EPERM, "mount",
	        "set up mounts: mount proc on '/proc': Operation not permitted (hint: mounting proc needs an "
	        "unobstructed /proc on the host; masked /proc paths in a container block it)");
	/* An index the plan does not have (a hostile or broken child): no
	 * op is read, the step is still named. */
	step_is(&p, STEP_MOUNT_OP, 2, EPERM, "mount", "set up mounts: Operation not permitted");
	step_is(&p, STEP_MOUNT_OP, -7, EROFS, "mount", "set up mounts: Read-only file system");
	step_is(&p, STEP_MOUNT_OP, 0, EXDEV, "mount",
	        "set up mounts: bind '/srv/data' on '/data': Invalid cross-device link (hint: the path was "
	        "replaced while the sandbox was set up; run again)");
	step_is(&p, STEP_CHDIR, -1, ENOENT, "chdir",
	        "change to the working directory '/work': No such file or directory (hint: the working "
	        "directory does not exist in the image)");
	step_is(&p, STEP_EXEC, -1, ENOENT, "exec", "execute the command '/bin/true': No such file or directory");
	step_is(&p, STEP_HOSTNAME, -1, EPERM, "hostname", "set hostname 'box': Operation not permitted");
	step_is(&p, STEP_SETUID, -1, EPERM, "setup", "set user id: Operation not permitted");
	/* A step number out of range: generic words, no read past the tables. */
	step_is(&p, STEP__MAX + 3, -1, EIO, "setup", "set up the sandbox: Input/output error");
	step_is(&p, -1, -1, EIO, "setup", "set up the sandbox: Input/output error");
}
END_TEST

START_TEST(test_result_new_failed)
{
	nsbox_error *why = NULL, *e = NULL;
	(void) nsbox_err(&why, ENOENT, "config", "read policy '%s'", "/p.yaml");
	ck_assert_int_eq(nsbox_result_new_failed(NULL, why, NULL, &e), -EINVAL);
	ck_assert_str_eq(nsbox_error_message(e), "build result: no output pointer: Invalid argument");
	nsbox_error_free(e);
	nsbox_result *r = NULL;
	ck_assert_int_eq(nsbox_result_new_failed(NULL, why, &r, NULL), 0);
	ck_assert_int_eq(nsbox_result_status(r), NSBOX_STATUS_SETUP_FAILED);
	ck_assert_int_eq(nsbox_result_exit_status(r), 125);
	ck_assert_int_eq(nsbox_result_exit_code(r), -1);
	ck_assert_str_eq(nsbox_error_message(nsbox_result_error(r)), "read policy '/p.yaml': No such file or directory");
	ck_assert_ptr_ne(nsbox_result_error(r), why);   /* a copy: the caller frees its own */
	ck_assert_uint_eq(strlen(r->id), 32);
	nsbox_error_free(why);
	/* A status outside the enum (a corrupted record) still maps to the
	 * setup-failure exit status, never to 0. */
	r->status = (nsbox_status) 42;
	ck_assert_int_eq(nsbox_result_exit_status(r), 125);
	ck_assert_str_eq(nsbox_status_name(r->status), "unknown");
	nsbox_result_free(r);
}
END_TEST

/* pid 1 ended without a payload exit, a kill or an error report: the run
 * is a setup failure with the reason, never "exited 0". */
START_TEST(test_result_init_died_silently)
{
	nsbox_plan plan = { .namespaces_json = "{}", .network = "none" };
	nsbox_sandbox sb = { .plan = &plan, .init_status = 3 };
	nsbox_result *r = NULL;
	ck_assert_int_eq(result_from_sandbox(&sb, &r, NULL), 0);
	ck_assert_int_eq(nsbox_result_status(r), NSBOX_STATUS_SETUP_FAILED);
	ck_assert_int_eq(nsbox_result_exit_status(r), 125);
	const nsbox_error *e = nsbox_result_error(r);
	ck_assert_str_eq(nsbox_error_step(e), "setup");
	ck_assert_int_eq(nsbox_error_errno(e), EPROTO);
	ck_assert_str_eq(nsbox_error_message(e),
	                 "supervise the sandbox: pid 1 exited with status 3 before reporting: Protocol error");
	nsbox_result_free(r);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("audit_line");
	tcase_add_test(tc, test_line_without_policy);
	tcase_add_test(tc, test_line_too_long);
	tcase_add_test(tc, test_log_errors);
	tcase_add_test(tc, test_step_error);
	tcase_add_test(tc, test_result_new_failed);
	tcase_add_test(tc, test_result_init_died_silently);
	return unit_run("audit_line", tc);
}
