/* nsbox_artifacts_store through the public call on fabricated results: a
 * code file's name never takes the record's place (result.json,
 * policy.yaml, "..", a long name: numbered instead), on_error keeps code
 * only for a failed run, keep counts run directories only (a look-alike
 * name is left), and bad arguments are refused. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/sandbox.h"
#include "unit.h"

static char dir[64];
static char path[4096];

static const char *at(const char *rel)
{
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	return path;
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/nsbox-artifacts.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	(void) !system(cmd);
}

static char *slurp(const char *p)
{
	static char text[4096];
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	ssize_t n = read(fd, text, sizeof(text) - 1);
	close(fd);
	text[n > 0 ? n : 0] = '\0';
	return text;
}

static void result_with_files(nsbox_result *r, nsbox_status status, int code)
{
	*r = (nsbox_result){ .status = status, .exit_code = code };
	snprintf(r->id, sizeof(r->id), "0123456789abcdef0123456789abcdef");
	ck_assert_int_eq(nsbox_config_new(&r->cfg, NULL), 0);
	ck_assert_int_eq(nsbox_config_add_file(r->cfg, "/tmp/result.json", "FAKE RECORD", 11, 0644, NULL), 0);
	ck_assert_int_eq(nsbox_config_add_file(r->cfg, "/tmp/policy.yaml", "FAKE POLICY", 11, 0644, NULL), 0);
	ck_assert_int_eq(nsbox_config_add_file(r->cfg, "/tmp/main.py", "print(1)", 8, 0644, NULL), 0);
	char longname[80] = "/tmp/";
	memset(longname + 5, 'n', 60);
	ck_assert_int_eq(nsbox_config_add_file(r->cfg, longname, "L", 1, 0644, NULL), 0);
}

START_TEST(test_code_names)
{
	nsbox_result r;
	result_with_files(&r, NSBOX_STATUS_EXITED, 0);
	char *run = NULL;
	ck_assert_int_eq(nsbox_artifacts_store(at("art"), &r, "always", 0, &run, NULL), 0);
	ck_assert_ptr_nonnull(run);
	char p[4200];
	snprintf(p, sizeof(p), "%s/result.json", run);
	ck_assert_ptr_null(strstr(slurp(p), "FAKE"));             /* the record, not the code */
	ck_assert_ptr_nonnull(strstr(slurp(p), "\"status\""));
	snprintf(p, sizeof(p), "%s/policy.yaml", run);
	ck_assert_ptr_null(strstr(slurp(p), "FAKE"));
	snprintf(p, sizeof(p), "%s/code-0", run);
	ck_assert_str_eq(slurp(p), "FAKE RECORD");
	snprintf(p, sizeof(p), "%s/code-1", run);
	ck_assert_str_eq(slurp(p), "FAKE POLICY");
	snprintf(p, sizeof(p), "%s/code-main.py", run);
	ck_assert_str_eq(slurp(p), "print(1)");
	snprintf(p, sizeof(p), "%s/code-3", run);                 /* too long a name */
	ck_assert_str_eq(slurp(p), "L");
	free(run);
	/* on_error: a run that exited 0 keeps no code; one that failed does. */
	ck_assert_int_eq(nsbox_artifacts_store(at("oe"), &r, "on_error", 0, &run, NULL), 0);
	snprintf(p, sizeof(p), "%s/code-main.py", run);
	ck_assert_int_ne(access(p, F_OK), 0);
	free(run);
	/* Another run (its own id: a run directory is named by time and id). */
	r.exit_code = 2;
	r.id[0] = 'f';
	ck_assert_int_eq(nsbox_artifacts_store(at("oe"), &r, "on_error", 0, &run, NULL), 0);
	snprintf(p, sizeof(p), "%s/code-main.py", run);
	ck_assert_int_eq(access(p, F_OK), 0);
	free(run);
	ck_assert_int_eq(nsbox_artifacts_store(at("nv"), &r, "never", 0, &run, NULL), 0);
	snprintf(p, sizeof(p), "%s/code-main.py", run);
	ck_assert_int_ne(access(p, F_OK), 0);
	free(run);
	nsbox_config_free(r.cfg);
}
END_TEST

START_TEST(test_keep_and_args)
{
	nsbox_result r;
	result_with_files(&r, NSBOX_STATUS_EXITED, 0);
	ck_assert_int_eq(mkdir(at("art"), 0700), 0);
	/* Look-alikes: not run directories (a 'g' where hex goes, a name of
	 * another length): never removed by the retention. */
	ck_assert_int_eq(mkdir(at("art/20200101T000000.000Z-00000000000g"), 0700), 0);
	ck_assert_int_eq(mkdir(at("art/20200101T000000.000Z-0"), 0700), 0);
	ck_assert_int_eq(mkdir(at("art/20200101T000000.000Z-000000000000"), 0700), 0);   /* a real, old one */
	ck_assert_int_eq(nsbox_artifacts_store(at("art"), &r, "always", 1, NULL, NULL), 0);
	ck_assert_int_eq(access(at("art/20200101T000000.000Z-00000000000g"), F_OK), 0);
	ck_assert_int_eq(access(at("art/20200101T000000.000Z-0"), F_OK), 0);
	ck_assert_int_ne(access(at("art/20200101T000000.000Z-000000000000"), F_OK), 0);
	nsbox_error *e = NULL;
	ck_assert_int_eq(nsbox_artifacts_store(NULL, &r, "always", 0, NULL, NULL), -EINVAL);
	ck_assert_int_eq(nsbox_artifacts_store(at("art"), NULL, "always", 0, NULL, NULL), -EINVAL);
	ck_assert_int_eq(nsbox_artifacts_store(at("art"), &r, "sometimes", 0, NULL, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(nsbox_error_message(e), "missing or invalid argument"));
	nsbox_error_free(e);
	/* Its parent missing: not made (only the last level is). */
	e = NULL;
	ck_assert_int_eq(nsbox_artifacts_store(at("no/such"), &r, "always", 0, NULL, &e), -ENOENT);
	ck_assert_ptr_nonnull(strstr(nsbox_error_message(e), "create artifacts directory"));
	nsbox_error_free(e);
	nsbox_config_free(r.cfg);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("artifacts");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_code_names);
	tcase_add_test(tc, test_keep_and_args);
	return unit_run("artifacts", tc);
}
