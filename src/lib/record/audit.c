/* The audit log: one JSON line per run, appended with a single write(2) to a
 * file opened O_APPEND, so that concurrent runs (each its own process) never
 * interleave or lose lines. The line says what ran and how it ended, never
 * the code or the output: a digest stands for the code. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "config/conf.h"
#include "base/error.h"
#include "base/json.h"
#include "sandbox/sandbox.h"
#include "base/sha256.h"
#include "base/syscalls.h"
#include "record/caller_file.h"

/* A line longer than this is rendered again without the command and the
 * network lists: one write(2) of a bounded size per run. */
#define AUDIT_LINE_MAX (64 * 1024)

int nsbox_output_open(const char *path, int *fd, nsbox_error **err)
{
	if (!path || !*path || !fd)
		return nsbox_err(err, EINVAL, "output", "open output file: missing argument");
	int f = caller_file_open(path, O_TRUNC | CALLER_FILE_DEVICE, "output", "file", err);
	if (f < 0)
		return f;
	*fd = f;
	return 0;
}

int nsbox_audit_open(const char *path, int *fd, nsbox_error **err)
{
	if (!path || !*path || !fd)
		return nsbox_err(err, EINVAL, "audit", "open audit log: missing argument");
	/* O_APPEND: one write(2) per line, never interleaved. */
	int f = caller_file_open(path, O_APPEND, "audit", "audit log", err);
	if (f < 0)
		return f;
	*fd = f;
	return 0;
}

static void utc_now(buf *b)
{
	struct timespec ts;
	struct tm tm;
	(void) clock_gettime(CLOCK_REALTIME, &ts);
	(void) gmtime_r(&ts.tv_sec, &tm);
	buf_printf(b, "\"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ\"", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
	           tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
}

/* What the run was given to execute: the command, and a digest of the files
 * written into the sandbox (run-code's code). */
static void what_ran(buf *b, const nsbox_config *c, bool compact)
{
	if (compact || !c) {
		buf_puts(b, ",\"command\":null");
	} else {
		buf_puts(b, ",\"command\":[");
		for (size_t i = 0; i < c->command.n; i++) {
			if (i)
				buf_puts(b, ",");
			json_cstr(b, c->command.v[i]);
		}
		buf_puts(b, "]");
	}
	buf argv_bytes = { 0 };
	for (size_t i = 0; c && i < c->command.n; i++)
		buf_append(&argv_bytes, c->command.v[i], strlen(c->command.v[i]) + 1);
	char hex[65];
	sha256_hex(argv_bytes.data ? argv_bytes.data : "", argv_bytes.len, hex);
	buf_free(&argv_bytes);
	buf_printf(b, ",\"command_sha256\":\"%s\"", hex);
	if (!c || !c->n_files) {
		buf_puts(b, ",\"code_sha256\":null");
		return;
	}
	/* One file is the usual case (run-code); several are hashed in order. */
	buf all = { 0 };
	for (size_t i = 0; i < c->n_files; i++)
		buf_append(&all, c->files[i].data, c->files[i].len);
	size_t len = all.len;
	sha256_hex(all.data ? all.data : "", len, hex);
	buf_free(&all);
	buf_printf(b, ",\"code_sha256\":\"%s\",\"code_bytes\":%zu", hex, len);
}

static void policy_digest(buf *b, const nsbox_config *c)
{
	char *yaml = NULL;
	if (!c || nsbox_config_to_yaml(c, &yaml, NULL) < 0) {
		buf_puts(b, ",\"policy_sha256\":null");
		return;
	}
	char hex[65];
	sha256_hex(yaml, strlen(yaml), hex);
	free(yaml);
	buf_printf(b, ",\"policy_sha256\":\"%s\"", hex);
}

static void outcome(buf *b, const nsbox_result *r)
{
	buf_printf(b, ",\"status\":\"%s\"", nsbox_status_name(r->status));
	if (r->status == NSBOX_STATUS_EXITED)
		buf_printf(b, ",\"exit_code\":%d", r->exit_code);
	else
		buf_puts(b, ",\"exit_code\":null");
	buf_printf(b, ",\"signal\":%d,\"exit_status\":%d,\"timed_out\":%s,\"oom_killed\":%s,\"duration_ms\":%.3f",
	           r->signal, nsbox_result_exit_status(r), r->timed_out ? "true" : "false",
	           r->oom_killed ? "true" : "false", r->duration_ms);
	bool denied = false;
	for (size_t i = 0; i < r->n_changes; i++)
		denied |= r->changes[i].denied;
	buf_printf(b, ",\"changes\":%zu,\"changes_denied\":%s", r->n_changes, denied ? "true" : "false");
	if (r->seccomp_log) {
		buf_puts(b, ",\"denied_syscalls\":[");
		for (size_t i = 0; i < r->n_denied; i++) {
			if (i)
				buf_puts(b, ",");
			json_cstr(b, r->denied[i].name);
		}
		buf_puts(b, "]");
	} else {
		buf_puts(b, ",\"denied_syscalls\":null");
	}
	if (r->error) {
		buf_puts(b, ",\"error\":{\"step\":");
		json_cstr(b, r->error->step);
		buf_puts(b, ",\"message\":");
		json_cstr(b, r->error->message);
		buf_puts(b, "}");
	} else {
		buf_puts(b, ",\"error\":null");
	}
}

static char *render(const nsbox_result *r, bool compact)
{
	const nsbox_config *c = r->cfg;
	buf b = { 0 };
	buf_puts(&b, "{\"version\":1,\"time\":");
	utc_now(&b);
	buf_printf(&b, ",\"host_uid\":%u,\"host_gid\":%u,\"pid\":%d,\"id\":\"%s\"", (unsigned) getuid(),
	           (unsigned) getgid(), (int) getpid(), r->id);
	what_ran(&b, c, compact);
	buf_puts(&b, ",\"image\":");
	json_cstr(&b, c && !c->rootfs ? c->image : NULL);
	/* What the image was, as stored (null: --rootfs, or an image stored
	 * by an older nsbox; `nsbox image build NAME` gives root's one). */
	buf_puts(&b, ",\"image_digest\":");
	json_cstr(&b, r->image_digest);
	buf_puts(&b, ",\"rootfs\":");
	json_cstr(&b, c ? c->rootfs : NULL);
	policy_digest(&b, c);
	outcome(&b, r);
	if (compact) {
		buf_puts(&b, ",\"network\":{\"mode\":");
		json_cstr(&b, r->network);
		buf_puts(&b, "},\"truncated\":true");
	} else {
		result_json_audit_parts(&b, r);
		buf_puts(&b, ",\"truncated\":false");
	}
	buf_puts(&b, "}\n");
	return buf_steal(&b);
}

int nsbox_result_audit_json(const nsbox_result *r, char **out, nsbox_error **err)
{
	if (!r || !out)
		return nsbox_err(err, EINVAL, "audit", "render audit line: missing argument");
	char *line = render(r, false);
	if (line && strlen(line) > AUDIT_LINE_MAX) {
		free(line);
		line = render(r, true);
	}
	if (!line)
		return nsbox_err(err, ENOMEM, "audit", "render audit line");
	*out = line;
	return 0;
}

int nsbox_audit_append(int fd, const nsbox_result *r, nsbox_error **err)
{
	if (fd < 0 || !r)
		return nsbox_err(err, EINVAL, "audit", "write audit line: missing argument");
	char *line = NULL;
	int ret = nsbox_result_audit_json(r, &line, err);
	if (ret < 0)
		return ret;
	size_t n = strlen(line);
	/* One write: with O_APPEND the kernel moves to the end and writes
	 * under the inode lock, so lines of concurrent runs do not mix. A
	 * retry after a short write could interleave, so it is an error. */
	ssize_t w;
	do
		w = write(fd, line, n);
	while (w < 0 && errno == EINTR);
	int e = w < 0 ? errno : EIO;
	free(line);
	if (w == (ssize_t) n)
		return 0;
	return nsbox_err(err, e, "audit", "write audit line%s", w >= 0 ? ": short write" : "");
}
