/* The result of a run and its JSON record (docs/result.schema.json). */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/syscalls.h"
#include "base/cleanup.h"
#include "base/json.h"
#include "sandbox/sandbox.h"

static const char *const status_names[] = {
	[NSBOX_STATUS_EXITED] = "exited",
	[NSBOX_STATUS_SIGNALED] = "signaled",
	[NSBOX_STATUS_TIMED_OUT] = "timed_out",
	[NSBOX_STATUS_OOM_KILLED] = "oom_killed",
	[NSBOX_STATUS_SETUP_FAILED] = "setup_failed",
};

const char *nsbox_status_name(nsbox_status s)
{
	return (unsigned) s < sizeof(status_names) / sizeof(status_names[0]) ? status_names[s] : "unknown";
}

static void new_id(char id[33])
{
	unsigned char raw[16] = { 0 };
	random_name_bytes(raw, sizeof(raw));
	for (int i = 0; i < 16; i++)
		snprintf(id + 2 * i, 3, "%02x", raw[i]);
}

static const char *step_hint(const nsbox_plan *p, const msg *m)
{
	const mount_op *op = (m->step == STEP_MOUNT_OP && m->index >= 0 && (size_t) m->index < p->n_ops)
		? &p->ops[m->index] : NULL;
	if (m->err == EXDEV)
		return "the path was replaced while the sandbox was set up; run again";
	if (op && (op->flags & OPF_MKPOINT) && m->err == E2BIG)
		return "the mount point is missing and the directory that would hold it has more than 4096 entries "
		       "to mirror: create the mount point in the image, or mount below /tmp";
	if (op && (op->flags & OPF_MKPOINT) && (m->err == EROFS || m->err == EACCES))
		return "the mount point does not exist in the read-only image: create it there, or mount below /tmp";
	if (m->step == STEP_ROOT && m->err == EACCES)
		return "the root filesystem must be readable and searchable by other users (chmod 755)";
	if (m->step == STEP_CHDIR && m->err == ENOENT)
		return "the working directory does not exist in the image";
	if (op && !strcmp(op->target, "proc") && m->err == EPERM)
		return "mounting proc needs an unobstructed /proc on the host; masked /proc paths in a container block it";
	return NULL;
}

/* Describe a failed step: "set up mounts: bind '/x' on '/y': No such file..." */
int step_error(const nsbox_plan *p, const msg *m, nsbox_error **err)
{
	const char *what = plan_step_name((enum step) m->step);
	char detail[PATH_MAX + 128] = "";
	if (m->step == STEP_MOUNT_OP && m->index >= 0 && (size_t) m->index < p->n_ops)
		snprintf(detail, sizeof(detail), ": %s", p->ops[m->index].desc);
	else if (m->step == STEP_ROOT)
		snprintf(detail, sizeof(detail), " '%s'", p->rootfs_path);
	else if (m->step == STEP_CHDIR)
		snprintf(detail, sizeof(detail), " '%s'", p->workdir);
	else if (m->step == STEP_EXEC)
		snprintf(detail, sizeof(detail), " '%s'", p->argv[0]);
	else if (m->step == STEP_HOSTNAME)
		snprintf(detail, sizeof(detail), " '%s'", p->hostname);
	else if (m->step == STEP_UCOUNTS && m->index >= 0 && (size_t) m->index < p->n_user_max)
		snprintf(detail, sizeof(detail), ": write '/proc/sys/user/%s'", p->user_max[m->index].name);
	static const char *const step_ids[STEP__MAX] = {
		[STEP_ROOT] = "rootfs", [STEP_MOUNT_OP] = "mount", [STEP_PIVOT_ROOT] = "pivot_root",
		[STEP_EXEC] = "exec", [STEP_CHDIR] = "chdir", [STEP_LOOPBACK] = "network",
		[STEP_HOSTNAME] = "hostname", [STEP_CAPS] = "capabilities",
	};
	const char *id = (m->step > 0 && m->step < STEP__MAX && step_ids[m->step]) ? step_ids[m->step] : "setup";
	const char *hint = step_hint(p, m);
	if (hint)
		return nsbox_err_hint(err, m->err, id, hint, "%s%s", what, detail);
	return nsbox_err(err, m->err, id, "%s%s", what, detail);
}

static int fill_common(nsbox_result *r, const nsbox_config *cfg, nsbox_error **err)
{
	new_id(r->id);
	r->exit_code = -1;
	if (cfg && config_copy(&r->cfg, cfg) < 0)
		return nsbox_err(err, ENOMEM, "result", "build result");
	r->rootless = geteuid() != 0;
	return 0;
}

int result_from_sandbox(nsbox_sandbox *sb, nsbox_result **out, nsbox_error **err)
{
	nsbox_result *r = calloc(1, sizeof(*r));
	if (!r || fill_common(r, sb->plan->cfg, err) < 0) {
		nsbox_result_free(r);
		return nsbox_err(err, ENOMEM, "result", "build result");
	}
	r->duration_ms = sb->duration_ms;
	if (sb->exec_of)
		memcpy(r->sandbox_id, sb->exec_of->keep_id, sizeof(r->sandbox_id));
	r->timed_out = sb->timed_out;
	r->have_rusage = true;
	r->rusage = sb->rusage;
	r->enforced_by = sb->plan->enforced_by;
	r->seccomp_log = sb->plan->seccomp.notify;
	r->have_workspace = sb->plan->ws.active && sb->plan->ws.mode == WS_OVERLAY && !sb->exec_of;
	r->changes = TAKE_PTR(sb->changes);
	r->n_changes = sb->n_changes;
	sb->n_changes = 0;
	r->changes_err = sb->changes_err;
	r->upper_bytes = sb->upper_bytes;
	r->max_bytes = sb->plan->ws.max_bytes;
	r->max_files = sb->plan->ws.max_files;
	r->ws_limit_hit = sb->ws_limit_hit;
	r->ws_limit = sb->ws_limit;
	r->session = sb->plan->ws.session ? strdup(sb->plan->ws.session) : NULL;
	r->proxy = sb->plan->proxy;
	r->net_allowed = sb->net_allowed;
	sb->net_allowed = (proxy_log){ 0 };
	r->net_denied = sb->net_denied;
	sb->net_denied = (proxy_log){ 0 };
	r->denied = TAKE_PTR(sb->denied);
	r->n_denied = sb->n_denied;
	sb->n_denied = 0;
	r->seccomp = sb->plan->seccomp_label ? strdup(sb->plan->seccomp_label) : NULL;
	r->image_digest = sb->plan->image_digest[0] ? strdup(sb->plan->image_digest) : NULL;
	r->have_cg_stats = sb->have_cg_stats;
	r->cg_stats = sb->cg_stats;
	r->oom_killed = sb->have_cg_stats && sb->cg_stats.oom_kills > 0;
	r->pids_limit_hit = sb->have_cg_stats && sb->cg_stats.pids_max_events > 0;
	r->namespaces_json = strdup(sb->plan->namespaces_json);
	r->network = strdup(sb->plan->network);
	if (sb->plan->net_user) {
		r->net_helper = netuser_helper_name(sb->plan->netuser.kind);
		r->host_loopback = sb->plan->netuser.host_loopback;
	}
	r->captured = sb->capture;
	for (int i = 0; sb->capture && i < 2; i++) {
		r->out[i] = capture_text(&sb->streams[i], &r->out_len[i], &r->out_truncated[i]);
		r->out_bytes[i] = sb->streams[i].total;
	}
	bool setup_failed = sb->error.type == MSG_ERROR && sb->error.step != STEP_EXEC;
	if (sb->error.type == MSG_ERROR)
		(void) step_error(sb->plan, &sb->error, &r->error);
	if (sb->error.step == STEP_EXEC) {
		r->exec_failed = true;
		r->exec_errno = sb->error.err;
	}
	if (setup_failed) {
		r->status = NSBOX_STATUS_SETUP_FAILED;
	} else if (sb->timed_out) {
		r->status = NSBOX_STATUS_TIMED_OUT;
		r->signal = SIGKILL;
	} else if (sb->have_exit && WIFEXITED(sb->payload_status)) {
		r->status = NSBOX_STATUS_EXITED;
		r->exit_code = WEXITSTATUS(sb->payload_status);
	} else if (sb->have_exit && WIFSIGNALED(sb->payload_status)) {
		r->signal = WTERMSIG(sb->payload_status);
		/* The kernel's OOM killer sends SIGKILL; the cgroup counted it. */
		r->status = (r->signal == SIGKILL && r->oom_killed) ? NSBOX_STATUS_OOM_KILLED
		                                                   : NSBOX_STATUS_SIGNALED;
	} else if (sb->killed || sb->init_status < 0) {
		/* pid 1 itself was killed: by us after a forwarded signal, or by
		 * someone with the right to (SIGKILL from the host). */
		r->signal = sb->init_status < 0 ? -sb->init_status : SIGKILL;
		/* Not by us, with the cgroup's OOM counter up: the kernel's OOM
		 * killer took pid 1 (seen under memory pressure from outside
		 * the sandbox), and that is why the run ended. */
		r->status = !sb->killed && r->signal == SIGKILL && r->oom_killed ? NSBOX_STATUS_OOM_KILLED
		                                                                  : NSBOX_STATUS_SIGNALED;
	} else {
		r->status = NSBOX_STATUS_SETUP_FAILED;
		(void) nsbox_err(&r->error, EPROTO, "setup",
		                 "supervise the sandbox: pid 1 exited with status %d before reporting",
		                 sb->init_status);
	}
	/* A limit the kernel enforces by a signal: name it. */
	if (r->status == NSBOX_STATUS_SIGNALED && r->signal == SIGXFSZ && !r->error && r->cfg)
		(void) nsbox_err(&r->error, EFBIG, "limits", "the payload passed the file size limit: %llu bytes (%s)",
		                 (unsigned long long) r->cfg->fsize,
		                 r->cfg->fsize == sb->plan->ws.max_bytes && sb->plan->ws.active ? "workspace.max_size"
		                                                                                : "limits.fsize");
	else if (r->status == NSBOX_STATUS_SIGNALED && r->signal == SIGXCPU && !r->error)
		(void) nsbox_err(&r->error, ETIME, "limits",
		                 "the payload used its CPU time (RLIMIT_CPU, the rlimit backstop of limits.timeout)");
	/* Killed by the supervisor for the workspace's size (or found over it
	 * at the end): say so where a reader looks for why. */
	if (sb->ws_limit_hit && !r->error && sb->ws_limit && !strcmp(sb->ws_limit, "max_files"))
		(void) nsbox_err(&r->error, EDQUOT, "workspace",
		                 "the workspace's changes passed workspace.max_files (%llu files, directories and links)",
		                 (unsigned long long) sb->plan->ws.max_files);
	else if (sb->ws_limit_hit && !r->error && sb->ws_limit && !strcmp(sb->ws_limit, "unreadable"))
		(void) nsbox_err(&r->error, EFBIG, "workspace",
		                 "the workspace's changes grew near workspace.max_size (%llu bytes) and hold a "
		                 "directory the size count cannot read: taken as over",
		                 (unsigned long long) sb->plan->ws.max_bytes);
	else if (sb->ws_limit_hit && !r->error)
		(void) nsbox_err(&r->error, EFBIG, "workspace",
		                 "the workspace's changes (%llu bytes) passed workspace.max_size (%llu bytes)",
		                 (unsigned long long) sb->upper_bytes, (unsigned long long) sb->plan->ws.max_bytes);
	*out = r;
	return 0;
}

nsbox_result *result_new(const nsbox_config *cfg)
{
	nsbox_result *r = calloc(1, sizeof(*r));
	if (!r || fill_common(r, cfg, NULL) < 0) {
		nsbox_result_free(r);
		return NULL;
	}
	return r;
}

int nsbox_result_new_failed(const nsbox_config *cfg, const nsbox_error *why, nsbox_result **out,
                            nsbox_error **err)
{
	if (!out)
		return nsbox_err(err, EINVAL, "result", "build result: no output pointer");
	nsbox_result *r = result_new(cfg);
	if (!r)
		return nsbox_err(err, ENOMEM, "result", "build result");
	r->status = NSBOX_STATUS_SETUP_FAILED;
	r->error = nsbox_error_dup(why);
	*out = r;
	return 0;
}

void nsbox_result_free(nsbox_result *r)
{
	if (!r)
		return;
	free(r->out[0]);
	free(r->out[1]);
	nsbox_error_free(r->error);
	nsbox_config_free(r->cfg);
	free(r->namespaces_json);
	free(r->code_json);
	free(r->preloaded_json);
	free(r->results_json);
	free(r->raw_json);
	free(r->network);
	free(r->seccomp);
	free(r->image_digest);
	free(r->session);
	ws_changes_free(r->changes, r->n_changes);
	proxy_log_free(&r->net_allowed);
	proxy_log_free(&r->net_denied);
	for (size_t i = 0; i < r->n_denied; i++)
		free(r->denied[i].name);
	free(r->denied);
	free(r);
}

nsbox_status nsbox_result_status(const nsbox_result *r) { return r->status; }
int nsbox_result_exit_code(const nsbox_result *r) { return r->exit_code; }
int nsbox_result_signal(const nsbox_result *r) { return r->signal; }
const nsbox_error *nsbox_result_error(const nsbox_result *r)
{
	return r->status == NSBOX_STATUS_SETUP_FAILED || r->exec_failed || r->code_error ? r->error : NULL;
}
double nsbox_result_duration_ms(const nsbox_result *r) { return r->duration_ms; }

static int stream_index(int stream) { return stream == 2 ? 1 : stream == 1 ? 0 : -1; }

const char *nsbox_result_output(const nsbox_result *r, int stream, size_t *len)
{
	int i = stream_index(stream);
	if (i < 0 || !r->captured)
		return NULL;
	if (len)
		*len = r->out_len[i];
	return r->out[i];
}

uint64_t nsbox_result_output_bytes(const nsbox_result *r, int stream)
{
	int i = stream_index(stream);
	return i < 0 ? 0 : r->out_bytes[i];
}

bool nsbox_result_output_truncated(const nsbox_result *r, int stream)
{
	int i = stream_index(stream);
	return i >= 0 && r->out_truncated[i];
}

const char *record_error_kind(const nsbox_result *r)
{
	if (!r->error)
		return NULL;
	if (r->error_kind)
		return r->error_kind;
	if (r->exec_failed)
		return "exec";
	return r->error->step && *r->error->step ? r->error->step : "setup";
}

int nsbox_result_exit_status(const nsbox_result *r)
{
	switch (r->status) {
	case NSBOX_STATUS_EXITED: return r->exit_code;
	case NSBOX_STATUS_SIGNALED: return 128 + r->signal;
	case NSBOX_STATUS_TIMED_OUT: return 124;
	case NSBOX_STATUS_OOM_KILLED: return 128 + 9;
	case NSBOX_STATUS_SETUP_FAILED: return 125;
	}
	return 125;
}
