/* A configuration's life: the defaults every run starts from (the shipped
 * standard policy's values), the deep copy a long-lived sandbox or a
 * context keeps, and freeing it. Apart from config.c, which checks and
 * sets each key: a new field that owns memory is freed and copied here,
 * in two functions best read side by side. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "config/conf.h"
#include "base/error.h"

int nsbox_config_new(nsbox_config **out, nsbox_error **err)
{
	if (!out)
		return nsbox_err_invalid(err, "config", "create configuration: no output pointer");
	nsbox_config *c = calloc(1, sizeof(*c));
	if (!c)
		return nsbox_err(err, ENOMEM, "config", "create configuration");
	/* These values are the shipped standard policy (policies/standard.yaml);
	 * tests/func/policy.test keeps the two identical. */
	static const char *forbidden[] = {
		"~/.ssh", "~/.aws", "~/.gnupg", "~/.config", "/var/run/docker.sock",
		"/run/docker.sock", "/etc/shadow", "/proc", "/sys", "/dev", "/root", "/",
	};
	/* .git whole: its config alone runs commands (core.fsmonitor, core.hooksPath,
	 * aliases, filters) at the next git status on the host; .git itself, as a
	 * symlink or a gitdir: file, points git elsewhere. */
	static const char *deny[] = { "**/.git", "**/.git/**", "**/.env" };
	int r = 0;
	c->image = strdup("default");
	c->hostname = strdup("nsbox");
	c->seccomp = strdup("default");
	if (!c->image || !c->hostname || !c->seccomp)
		r = -ENOMEM;
	c->memory = 512ull << 20;
	c->cpus = 1;
	c->pids = 64;
	c->timeout_ms = 60000;
	c->tmpfs = 100ull << 20;
	c->output = 10ull << 10;
	/* No quiet limits that change how software behaves: open files as
	 * the caller has them (its soft and hard limits), no file size limit
	 * unless one is asked for. */
	c->nofile = 0;
	c->fsize = 0;
	/* A small share of a user's default (128 inotify and fanotify groups,
	 * some 100000 watches and marks): a sandbox exhausts its own, never
	 * its owner's. A long-lived sandbox needs a pid namespace per exec. */
	c->inotify_instances = 16;
	c->inotify_watches = 16384;
	c->fanotify_groups = 16;
	c->fanotify_marks = 16384;
	c->namespaces = 64;
	c->workspace_max_size = 1ull << 30;
	c->workspace_max_files = 500000;
	c->files_max_size = 256ull << 20;
	c->net = NET_NONE;
	c->read_only_root = true;
	c->uid = 1000;
	c->gid = 1000;
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(forbidden); i++)
		r = strv_push(&c->forbidden, forbidden[i]);
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(deny); i++)
		r = strv_push(&c->deny_changes, deny[i]);
	if (r == 0)
		r = strv_push(&c->env_set, "LANG=C.UTF-8");
	if (r < 0) {
		nsbox_config_free(c);
		return nsbox_err(err, ENOMEM, "config", "create configuration");
	}
	*out = c;
	return 0;
}

void config_free_mounts(nsbox_config *c)
{
	for (size_t i = 0; i < c->n_mounts; i++) {
		free(c->mounts[i].source);
		free(c->mounts[i].target);
	}
	free(c->mounts);
	c->mounts = NULL;
	c->n_mounts = 0;
}

static void free_files(nsbox_config *c)
{
	for (size_t i = 0; i < c->n_files; i++) {
		free(c->files[i].path);
		free(c->files[i].data);
	}
	free(c->files);
	c->files = NULL;
	c->n_files = 0;
}

void nsbox_config_free(nsbox_config *c)
{
	if (!c)
		return;
	free_files(c);
	free(c->image);
	free(c->rootfs);
	free(c->hostname);
	free(c->workdir);
	free(c->seccomp);
	free(c->cgroup_parent);
	free(c->workspace);
	free(c->session);
	free(c->workspace_target);
	strv_clear(&c->allow);
	config_free_mounts(c);
	strv_clear(&c->forbidden);
	strv_clear(&c->allowed_roots);
	strv_clear(&c->deny_changes);
	strv_clear(&c->env_set);
	strv_clear(&c->env_pass);
	strv_clear(&c->command);
	config_audit_free(c);
	free(c->build.overlay);
	free(c->build.overlay_dir);
	free(c);
}

int config_dup_str(char **dst, const char *s)
{
	char *d = s ? strdup(s) : NULL;
	if (s && !d)
		return -ENOMEM;
	free(*dst);
	*dst = d;
	return 0;
}

int config_copy(nsbox_config **out, const nsbox_config *s)
{
	nsbox_config *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	*c = *s;
	c->image = c->rootfs = c->hostname = c->workdir = c->seccomp = c->cgroup_parent = NULL;
	c->workspace = c->session = c->build.overlay = c->build.overlay_dir = c->workspace_target = NULL;
	c->allow = c->forbidden = c->allowed_roots = c->deny_changes = (strv){ 0 };
	c->env_set = c->env_pass = c->command = (strv){ 0 };
	c->mounts = NULL;
	c->n_mounts = 0;
	c->files = NULL;
	c->n_files = 0;
	int r = config_audit_copy(c, s);
	r = r ?: config_dup_str(&c->image, s->image);
	r = r ?: config_dup_str(&c->rootfs, s->rootfs);
	r = r ?: config_dup_str(&c->hostname, s->hostname);
	r = r ?: config_dup_str(&c->workdir, s->workdir);
	r = r ?: config_dup_str(&c->seccomp, s->seccomp);
	r = r ?: config_dup_str(&c->cgroup_parent, s->cgroup_parent);
	r = r ?: config_dup_str(&c->workspace, s->workspace);
	r = r ?: config_dup_str(&c->session, s->session);
	r = r ?: config_dup_str(&c->build.overlay, s->build.overlay);
	r = r ?: config_dup_str(&c->build.overlay_dir, s->build.overlay_dir);
	r = r ?: config_dup_str(&c->workspace_target, s->workspace_target);
	r = r ?: strv_copy(&c->allow, &s->allow);
	r = r ?: strv_copy(&c->forbidden, &s->forbidden);
	r = r ?: strv_copy(&c->allowed_roots, &s->allowed_roots);
	r = r ?: strv_copy(&c->deny_changes, &s->deny_changes);
	r = r ?: strv_copy(&c->env_set, &s->env_set);
	r = r ?: strv_copy(&c->env_pass, &s->env_pass);
	r = r ?: strv_copy(&c->command, &s->command);
	if (r == 0 && s->n_mounts) {
		c->mounts = calloc(s->n_mounts, sizeof(*c->mounts));
		if (!c->mounts)
			r = -ENOMEM;
		for (size_t i = 0; r == 0 && i < s->n_mounts; i++) {
			c->n_mounts++;
			c->mounts[i].read_only = s->mounts[i].read_only;
			r = config_dup_str(&c->mounts[i].source, s->mounts[i].source);
			r = r ?: config_dup_str(&c->mounts[i].target, s->mounts[i].target);
		}
	}
	for (size_t i = 0; r == 0 && i < s->n_files; i++)
		r = nsbox_config_add_file(c, s->files[i].path, s->files[i].data, s->files[i].len,
		                          s->files[i].mode, NULL);
	if (r < 0) {
		nsbox_config_free(c);
		return r;
	}
	*out = c;
	return 0;
}
