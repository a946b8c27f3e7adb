/* Rendering the effective configuration as a policy file (`nsbox policy show`).
 * Strings are written as YAML double-quoted scalars, which accept JSON escapes. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "config/conf.h"
#include "base/error.h"
#include "base/json.h"
#include "base/units.h"

static void list(buf *b, const char *indent, const char *name, const strv *s)
{
	buf_printf(b, "%s%s:", indent, name);
	if (!s->n) {
		buf_puts(b, " []\n");
		return;
	}
	buf_puts(b, "\n");
	for (size_t i = 0; i < s->n; i++) {
		buf_printf(b, "%s  - ", indent);
		json_cstr(b, s->v[i]);
		buf_puts(b, "\n");
	}
}

static void kv(buf *b, const char *indent, const char *k, const char *v)
{
	buf_printf(b, "%s%s: ", indent, k);
	json_cstr(b, v);
	buf_puts(b, "\n");
}

int nsbox_config_to_yaml(const nsbox_config *c, char **out, nsbox_error **err)
{
	if (!c || !out)
		return nsbox_err(err, EINVAL, "config", "render configuration: missing argument");
	char tmp[64];
	buf b = { 0 };
	buf_puts(&b, "# effective nsbox configuration\n");
	kv(&b, "", "image", c->image);
	if (c->rootfs)
		kv(&b, "", "rootfs", c->rootfs);
	kv(&b, "", "hostname", c->hostname);
	if (c->workdir)
		kv(&b, "", "workdir", c->workdir);
	buf_puts(&b, "limits:\n");
	format_size(c->memory, tmp, sizeof(tmp));
	buf_printf(&b, "  memory: %s\n", tmp);
	buf_printf(&b, "  cpus: %g\n", c->cpus);
	buf_printf(&b, "  pids: %llu\n", (unsigned long long) c->pids);
	format_duration_ms(c->timeout_ms, tmp, sizeof(tmp));
	buf_printf(&b, "  timeout: %s\n", tmp);
	format_size(c->tmpfs, tmp, sizeof(tmp));
	buf_printf(&b, "  tmpfs: %s\n", tmp);
	format_size(c->output, tmp, sizeof(tmp));
	buf_printf(&b, "  output: %s\n", tmp);
	/* Every limit by name, its default too: "host" is the caller's own
	 * open-file limits, inherited. */
	if (c->nofile)
		buf_printf(&b, "  nofile: %llu\n", (unsigned long long) c->nofile);
	else
		buf_puts(&b, "  nofile: host\n");
	format_size(c->fsize, tmp, sizeof(tmp));
	buf_printf(&b, "  fsize: %s\n", c->fsize ? tmp : "unlimited");
	buf_printf(&b, "  inotify_instances: %llu\n", (unsigned long long) c->inotify_instances);
	buf_printf(&b, "  inotify_watches: %llu\n", (unsigned long long) c->inotify_watches);
	buf_printf(&b, "  fanotify_groups: %llu\n", (unsigned long long) c->fanotify_groups);
	buf_printf(&b, "  fanotify_marks: %llu\n", (unsigned long long) c->fanotify_marks);
	buf_printf(&b, "  namespaces: %llu\n", (unsigned long long) c->namespaces);
	buf_printf(&b, "  fallback: %s\n", config_fallbacks[c->fallback]);
	if (c->cgroup_parent)
		kv(&b, "  ", "cgroup_parent", c->cgroup_parent);
	buf_printf(&b, "network:\n  mode: %s\n", config_net_modes[c->net]);
	list(&b, "  ", "allow", &c->allow);
	buf_printf(&b, "  allow_host_loopback: %s\n", c->allow_host_loopback ? "true" : "false");
	buf_printf(&b, "  helper: %s\n", config_net_helpers[c->net_helper]);
	buf_puts(&b, "filesystem:\n");
	buf_printf(&b, "  read_only_root: %s\n", c->read_only_root ? "true" : "false");
	buf_printf(&b, "  sysfs: %s\n", c->sysfs ? "true" : "false");
	buf_printf(&b, "  mounts:%s\n", c->n_mounts ? "" : " []");
	for (size_t i = 0; i < c->n_mounts; i++) {
		buf_puts(&b, "    - { source: ");
		json_cstr(&b, c->mounts[i].source);
		buf_puts(&b, ", target: ");
		json_cstr(&b, c->mounts[i].target);
		buf_printf(&b, ", read_only: %s }\n", c->mounts[i].read_only ? "true" : "false");
	}
	list(&b, "  ", "forbidden", &c->forbidden);
	list(&b, "  ", "allowed_roots", &c->allowed_roots);
	buf_puts(&b, "workspace:\n");
	list(&b, "  ", "deny_changes", &c->deny_changes);
	buf_printf(&b, "  mode: %s\n", config_ws_modes[c->workspace_mode]);
	buf_printf(&b, "  git: %s\n", config_ws_git[c->workspace_git]);
	format_size(c->workspace_max_size, tmp, sizeof(tmp));
	buf_printf(&b, "  max_size: %s\n", tmp);
	buf_printf(&b, "  max_files: %llu\n", (unsigned long long) c->workspace_max_files);
	if (c->workspace)
		kv(&b, "  ", "path", c->workspace);
	if (c->workspace_target)
		kv(&b, "  ", "target", c->workspace_target);
	if (c->session)
		kv(&b, "  ", "session", c->session);
	format_size(c->files_max_size, tmp, sizeof(tmp));
	buf_printf(&b, "files:\n  max_size: %s\n", tmp);
	buf_puts(&b, "environment:\n  set:");
	buf_puts(&b, c->env_set.n ? "\n" : " {}\n");
	for (size_t i = 0; i < c->env_set.n; i++) {
		const char *e = c->env_set.v[i], *eq = strchr(e, '=');
		buf_printf(&b, "    %.*s: ", (int) (eq - e), e);
		json_cstr(&b, eq + 1);
		buf_puts(&b, "\n");
	}
	list(&b, "  ", "pass", &c->env_pass);
	buf_printf(&b, "security:\n  user: \"%u:%u\"\n", (unsigned) c->uid, (unsigned) c->gid);
	kv(&b, "  ", "seccomp", c->seccomp);
	buf_printf(&b, "  seccomp_log: %s\n", c->seccomp_log ? "true" : "false");
	config_audit_yaml(&b, c);
	*out = buf_steal(&b);
	if (!*out)
		return nsbox_err(err, ENOMEM, "config", "render configuration");
	return 0;
}
