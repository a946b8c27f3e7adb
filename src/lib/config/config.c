/* The configuration's keys: each value checked as it is set (the
 * validators, the key table, nsbox_config_set), the mounts, variables and
 * files added to it. Making, copying and freeing a configuration is in
 * config_defaults.c. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "config/conf.h"
#include "base/error.h"
#include "image/images.h"
#include "net/proxy.h"
#include "base/units.h"

const char *nsbox_version(void) { return PACKAGE_VERSION; }

/* ---- validators --------------------------------------------------------- */

static bool valid_hostname(const char *s)
{
	size_t n = strlen(s), label = 0;
	if (n == 0 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '.') {
			if (label == 0)
				return false;
			label = 0;
		} else if (isalnum((unsigned char) s[i]) || (s[i] == '-' && label > 0)) {
			if (++label > 63)
				return false;
		} else {
			return false;
		}
	}
	return label > 0 && s[n - 1] != '-';
}

/* An absolute path with no "." or ".." components and no empty ones. */
static bool valid_abs_path(const char *s)
{
	if (s[0] != '/' || strlen(s) >= PATH_MAX)
		return false;
	for (const char *p = s + 1; *p;) {
		const char *e = strchrnul(p, '/');
		size_t n = (size_t) (e - p);
		if (n == 0 && *e)
			return false;
		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p = *e ? e + 1 : e;
	}
	return true;
}

static bool under(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static int check_target(const char *t, const char *origin, nsbox_error **err)
{
	if (!valid_abs_path(t) || strcmp(t, "/") == 0)
		return nsbox_err_invalid(err, "config", "%s: mount target '%s' must be an absolute path below '/' without '.' or '..'",
		                 origin, t);
	static const char *managed[] = { "/proc", "/dev", "/sys" };
	for (size_t i = 0; i < ARRAY_SIZE(managed); i++)
		if (under(t, managed[i]))
			return nsbox_err_invalid(err, "config", "%s: mount target '%s' is inside '%s', which nsbox sets up itself",
			                 origin, t, managed[i]);
	return 0;
}

/* HOST[:PORT], *.SUFFIX[:PORT], or [IPV6][:PORT] (the proxy's syntax,
 * proxy_entry_split). */
static bool valid_allow_host(const char *s)
{
	const char *h;
	size_t n;
	unsigned port;
	if (!proxy_entry_split(s, &h, &n, &port))
		return false;
	if (s[0] == '[') {
		char lit[INET6_ADDRSTRLEN];
		struct in6_addr a;
		if (n >= sizeof(lit))
			return false;
		memcpy(lit, h, n);
		lit[n] = '\0';
		return inet_pton(AF_INET6, lit, &a) == 1;
	}
	if (n > 2 && h[0] == '*' && h[1] == '.') {
		h += 2;
		n -= 2;
	}
	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(isalnum((unsigned char) h[i]) || h[i] == '-' || h[i] == '.'))
			return false;
	return true;
}

static bool valid_policy_path(const char *s)
{
	if (s[0] == '~')
		return s[1] == '\0' || s[1] == '/';
	return s[0] == '/';
}

int config_add_mount(nsbox_config *cfg, const char *source, const char *target, bool ro,
                     const char *base_dir, const char *origin, nsbox_error **err)
{
	origin = origin ? origin : "filesystem.mounts";
	if (!source || !*source)
		return nsbox_err_invalid(err, "config", "%s: empty mount source", origin);
	int r = check_target(target, origin, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *src = NULL;
	if (source[0] == '/' || source[0] == '~') {
		src = strdup(source);
	} else {
		_cleanup_free_ char *cwd = NULL;
		if (!base_dir) {
			cwd = getcwd(NULL, 0);
			if (!cwd)
				return nsbox_err(err, errno, "config", "%s: resolve relative source '%s'",
				                 origin, source);
		}
		if (asprintf(&src, "%s/%s", base_dir ? base_dir : cwd, source) < 0)
			src = NULL;
	}
	if (!src)
		return nsbox_err(err, ENOMEM, "config", "%s: add mount", origin);
	mount_spec *m = realloc(cfg->mounts, (cfg->n_mounts + 1) * sizeof(*m));
	if (!m)
		return nsbox_err(err, ENOMEM, "config", "%s: add mount", origin);
	cfg->mounts = m;
	char *tgt = strdup(target);
	if (!tgt)
		return nsbox_err(err, ENOMEM, "config", "%s: add mount", origin);
	m[cfg->n_mounts++] = (mount_spec){ .source = TAKE_PTR(src), .target = tgt, .read_only = ro };
	return 0;
}

/* "SRC:DST[:ro|rw]" */
static int add_volume(nsbox_config *cfg, const char *v, const char *origin, nsbox_error **err)
{
	_cleanup_free_ char *s = strdup(v);
	if (!s)
		return -ENOMEM;
	bool ro = false;
	char *c = strrchr(s, ':');
	if (c && (!strcmp(c + 1, "ro") || !strcmp(c + 1, "rw"))) {
		ro = !strcmp(c + 1, "ro");
		*c = '\0';
		c = strrchr(s, ':');
	}
	if (!c || c == s || !c[1])
		return nsbox_err_invalid(err, "config", "%s: '%s' is not SRC:DST[:ro|rw]", origin, v);
	*c = '\0';
	return config_add_mount(cfg, s, c + 1, ro, NULL, origin, err);
}

/* workspace.path: "DIR", or "DIR:PATH" with PATH the mount point inside
 * (the last ':' followed by '/' splits; a directory whose own name has
 * ":/" in it is given with workspace.target instead). */
static int set_workspace(nsbox_config *cfg, const char *v, const char *origin, nsbox_error **err)
{
	if (!*v)
		return -EINVAL;
	const char *colon = strrchr(v, ':');
	if (!colon || colon[1] != '/')
		return config_dup_str(&cfg->workspace, v);
	if (colon == v)
		return nsbox_err_invalid(err, "config", "%s: '%s' has no directory before ':'", origin, v);
	int r = check_target(colon + 1, origin, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *dir = strndup(v, (size_t) (colon - v));
	if (!dir)
		return -ENOMEM;
	r = config_dup_str(&cfg->workspace_target, colon + 1);
	return r < 0 ? r : config_dup_str(&cfg->workspace, dir);
}

static int set_env(nsbox_config *cfg, const char *v, const char *origin, nsbox_error **err)
{
	const char *eq = strchr(v, '=');
	if (!eq || !env_name_ok(v, (size_t) (eq - v)))
		return nsbox_err_invalid(err, "config", "%s: '%s' is not NAME=VALUE with NAME made of letters, digits and '_'",
		                 origin, v);
	char *dup = strdup(v);
	if (!dup)
		return -ENOMEM;
	long i = strv_find_env(&cfg->env_set, v, (size_t) (eq - v));
	if (i >= 0) {
		free(cfg->env_set.v[i]);
		cfg->env_set.v[i] = dup;
		return 0;
	}
	return strv_push_take(&cfg->env_set, dup);
}

static int set_user(nsbox_config *cfg, const char *v, const char *origin, nsbox_error **err)
{
	uint64_t uid, gid;
	_cleanup_free_ char *s = strdup(v);
	if (!s)
		return -ENOMEM;
	char *colon = strchr(s, ':');
	if (colon)
		*colon = '\0';
	if (parse_uint(s, 0, 65535, &uid) < 0 ||
	    parse_uint(colon ? colon + 1 : s, 0, 65535, &gid) < 0)
		return nsbox_err_invalid(err, "config", "%s: '%s' is not UID[:GID] with numeric ids from 0 to 65535", origin, v);
	cfg->uid = (uid_t) uid;
	cfg->gid = (gid_t) gid;
	return 0;
}

/* The names of enumerated settings, in enum order. */
const char *const config_net_modes[3] = { "none", "user", "host" };
const char *const config_net_helpers[3] = { "auto", "pasta", "slirp4netns" };
const char *const config_ws_modes[3] = { "overlay", "ro", "rw" };
const char *const config_fallbacks[3] = { "warn", "rlimit", "refuse" };
const char *const config_ws_git[3] = { "apply", "drop", "deny" };

/* The index of v among the three names, or -EINVAL. */
static int parse_choice(const char *v, const char *const names[3])
{
	for (int i = 0; i < 3; i++)
		if (!strcmp(v, names[i]))
			return i;
	return -EINVAL;
}

/* ---- the key table ------------------------------------------------------ */

enum key_id {
	K_IMAGE, K_ROOTFS, K_HOSTNAME, K_WORKDIR, K_MEMORY, K_CPUS, K_PIDS, K_TIMEOUT,
	K_TMPFS, K_OUTPUT, K_NET_MODE, K_NET_ALLOW, K_RO_ROOT, K_SYSFS, K_MOUNTS,
	K_FORBIDDEN, K_ALLOWED_ROOTS, K_DENY_CHANGES, K_ENV_SET, K_ENV_PASS, K_USER, K_SECCOMP,
	K_NOFILE, K_FSIZE, K_REQUIRE_CGROUP, K_FALLBACK, K_CGROUP_PARENT, K_SECCOMP_LOG,
	K_WS_PATH, K_WS_MODE, K_WS_SESSION, K_WS_MAX_SIZE, K_WS_MAX_FILES, K_NET_LOOPBACK, K_NET_HELPER,
	K_FILES_MAX_SIZE,
	K_WS_TARGET, K_WS_GIT,
	K_INOTIFY_INSTANCES, K_INOTIFY_WATCHES, K_FANOTIFY_GROUPS, K_FANOTIFY_MARKS, K_NAMESPACES,
};

static const struct key_def {
	const char *name;
	enum key_id id;
	bool list;
	const char *what;   /* for "expected ..." messages */
} keys[] = {
	{ "image", K_IMAGE, false, "an image name (letters, digits, '.', '_', '-')" },
	{ "rootfs", K_ROOTFS, false, "a directory path" },
	{ "hostname", K_HOSTNAME, false, "a host name of letters, digits, '-' and '.' (at most 64)" },
	{ "workdir", K_WORKDIR, false, "an absolute path" },
	{ "limits.memory", K_MEMORY, false, "a size of at least 1m such as 512m or 1g" },
	{ "limits.cpus", K_CPUS, false, "a number of cores greater than 0 such as 0.5 or 2" },
	{ "limits.pids", K_PIDS, false, "a whole number from 1 to 4194304" },
	{ "limits.timeout", K_TIMEOUT, false, "a duration such as 30, 30s, 2m or 500ms (0: none)" },
	{ "limits.tmpfs", K_TMPFS, false, "a size of at least 4k such as 100m" },
	{ "limits.output", K_OUTPUT, false, "a size such as 10k (0: unlimited)" },
	{ "limits.nofile", K_NOFILE, false, "a number of open files from 16 to 1048576, or host (the caller's limits)" },
	{ "limits.fsize", K_FSIZE, false, "a file size such as 1g, or unlimited (0)" },
	{ "limits.inotify_instances", K_INOTIFY_INSTANCES, false, "a whole number from 0 to 2147483647" },
	{ "limits.inotify_watches", K_INOTIFY_WATCHES, false, "a whole number from 0 to 2147483647" },
	{ "limits.fanotify_groups", K_FANOTIFY_GROUPS, false, "a whole number from 0 to 2147483647" },
	{ "limits.fanotify_marks", K_FANOTIFY_MARKS, false, "a whole number from 0 to 2147483647" },
	{ "limits.namespaces", K_NAMESPACES, false, "a whole number from 0 to 2147483647" },
	{ "limits.fallback", K_FALLBACK, false, "one of warn, rlimit, refuse" },
	{ "limits.require_cgroup", K_REQUIRE_CGROUP, false, "true or false" },
	{ "limits.cgroup_parent", K_CGROUP_PARENT, false, "an absolute cgroup v2 directory" },
	{ "network.mode", K_NET_MODE, false, "one of none, user, host" },
	{ "network.allow", K_NET_ALLOW, true, "HOST[:PORT], *.SUFFIX[:PORT] or [IPV6][:PORT]" },
	{ "network.allow_host_loopback", K_NET_LOOPBACK, false, "true or false" },
	{ "network.helper", K_NET_HELPER, false, "one of auto, pasta, slirp4netns" },
	{ "filesystem.read_only_root", K_RO_ROOT, false, "true or false" },
	{ "filesystem.sysfs", K_SYSFS, false, "true or false" },
	{ "filesystem.mounts", K_MOUNTS, true, "SRC:DST[:ro|rw]" },
	{ "filesystem.forbidden", K_FORBIDDEN, true, "an absolute path or one starting with ~/" },
	{ "filesystem.allowed_roots", K_ALLOWED_ROOTS, true, "an absolute path or one starting with ~/" },
	{ "workspace.deny_changes", K_DENY_CHANGES, true, "a non-empty glob" },
	{ "workspace.path", K_WS_PATH, false, "a directory, or DIR:PATH with PATH where it is mounted inside" },
	{ "workspace.target", K_WS_TARGET, false, "an absolute path inside, not '/' nor below /proc, /dev or /sys" },
	{ "workspace.git", K_WS_GIT, false, "one of apply, drop, deny" },
	{ "workspace.mode", K_WS_MODE, false, "one of overlay, ro, rw" },
	{ "workspace.session", K_WS_SESSION, false, "a session name (letters, digits, '.', '_', '-')" },
	{ "workspace.max_size", K_WS_MAX_SIZE, false, "a size such as 1g (at least 1m)" },
	{ "workspace.max_files", K_WS_MAX_FILES, false, "a whole number from 100 to 1000000000" },
	{ "files.max_size", K_FILES_MAX_SIZE, false, "a size such as 256m (at least 1k)" },
	{ "environment.set", K_ENV_SET, true, "NAME=VALUE" },
	{ "environment.pass", K_ENV_PASS, true, "a variable name" },
	{ "security.user", K_USER, false, "UID[:GID]" },
	{ "security.seccomp", K_SECCOMP, false, "a profile name, a file, or unconfined" },
	{ "security.seccomp_log", K_SECCOMP_LOG, false, "true or false" },
};

static const struct key_def *find_key(const char *key)
{
	for (size_t i = 0; key && i < ARRAY_SIZE(keys); i++)
		if (strcmp(keys[i].name, key) == 0)
			return &keys[i];
	return NULL;
}

bool config_key_is_list(const char *key)
{
	const struct key_def *k = find_key(key);
	return (k && k->list) || config_audit_is_list(key);
}

bool config_key_known(const char *key) { return find_key(key) != NULL || config_audit_known(key); }

int config_clear_list(nsbox_config *cfg, const char *key)
{
	const struct key_def *k = find_key(key);
	if (config_audit_is_list(key)) {
		config_audit_clear_list(cfg);
		return 0;
	}
	if (!k || !k->list)
		return -EINVAL;
	switch (k->id) {
	case K_NET_ALLOW: strv_clear(&cfg->allow); break;
	case K_MOUNTS: config_free_mounts(cfg); break;
	case K_FORBIDDEN: strv_clear(&cfg->forbidden); break;
	case K_ALLOWED_ROOTS: strv_clear(&cfg->allowed_roots); break;
	case K_DENY_CHANGES: strv_clear(&cfg->deny_changes); break;
	case K_ENV_SET: strv_clear(&cfg->env_set); break;
	case K_ENV_PASS: strv_clear(&cfg->env_pass); break;
	default: return -EINVAL;
	}
	return 0;
}

static int apply(nsbox_config *c, const struct key_def *k, const char *v, const char *origin,
                 nsbox_error **err)
{
	uint64_t u;
	int i;
	switch (k->id) {
	case K_IMAGE:
		return image_name_valid(v) ? config_dup_str(&c->image, v) : -EINVAL;
	case K_ROOTFS:
		return *v ? config_dup_str(&c->rootfs, v) : -EINVAL;
	case K_HOSTNAME:
		return valid_hostname(v) ? config_dup_str(&c->hostname, v) : -EINVAL;
	case K_WORKDIR:
		return valid_abs_path(v) ? config_dup_str(&c->workdir, v) : -EINVAL;
	case K_SECCOMP:
		return *v ? config_dup_str(&c->seccomp, v) : -EINVAL;
	case K_MEMORY:
		if (parse_size(v, &u) < 0 || u < (1u << 20))
			return -EINVAL;
		c->memory = u;
		return 0;
	case K_CPUS:
		return parse_cpus(v, &c->cpus) < 0 ? -EINVAL : 0;
	case K_PIDS:
		return parse_uint(v, 1, 4194304, &c->pids) < 0 ? -EINVAL : 0;
	case K_TIMEOUT:
		if (!strcmp(v, "none"))
			v = "0";
		return parse_duration_ms(v, &c->timeout_ms) < 0 ? -EINVAL : 0;
	case K_TMPFS:
		if (parse_size(v, &u) < 0 || u < 4096)
			return -EINVAL;
		c->tmpfs = u;
		return 0;
	case K_OUTPUT:
		if (!strcmp(v, "unlimited"))
			v = "0";
		return parse_size(v, &c->output) < 0 ? -EINVAL : 0;
	case K_NOFILE:
		if (!strcmp(v, "host")) {
			c->nofile = 0;
			return 0;
		}
		return parse_uint(v, 16, 1048576, &c->nofile) < 0 ? -EINVAL : 0;
	case K_FSIZE:
		if (!strcmp(v, "unlimited"))
			v = "0";
		return parse_size(v, &c->fsize) < 0 ? -EINVAL : 0;
	case K_INOTIFY_INSTANCES:
		return parse_uint(v, 0, INT32_MAX, &c->inotify_instances) < 0 ? -EINVAL : 0;
	case K_INOTIFY_WATCHES:
		return parse_uint(v, 0, INT32_MAX, &c->inotify_watches) < 0 ? -EINVAL : 0;
	case K_FANOTIFY_GROUPS:
		return parse_uint(v, 0, INT32_MAX, &c->fanotify_groups) < 0 ? -EINVAL : 0;
	case K_FANOTIFY_MARKS:
		return parse_uint(v, 0, INT32_MAX, &c->fanotify_marks) < 0 ? -EINVAL : 0;
	case K_NAMESPACES:
		return parse_uint(v, 0, INT32_MAX, &c->namespaces) < 0 ? -EINVAL : 0;
	case K_WS_PATH:
		return set_workspace(c, v, origin, err);
	case K_WS_TARGET:
		if (check_target(v, origin, err) < 0)
			return -EINVAL;
		return config_dup_str(&c->workspace_target, v);
	case K_WS_GIT:
		if ((i = parse_choice(v, config_ws_git)) < 0)
			return i;
		c->workspace_git = i;
		return 0;
	case K_WS_MODE:
		if ((i = parse_choice(v, config_ws_modes)) < 0)
			return i;
		c->workspace_mode = i;
		return 0;
	case K_WS_SESSION:
		return image_name_valid(v) ? config_dup_str(&c->session, v) : -EINVAL;
	case K_WS_MAX_SIZE:
		return parse_size(v, &c->workspace_max_size) < 0 || c->workspace_max_size < (1u << 20) ? -EINVAL : 0;
	case K_WS_MAX_FILES:
		return parse_uint(v, 100, 1000000000, &c->workspace_max_files) < 0 ? -EINVAL : 0;
	case K_FILES_MAX_SIZE:
		return parse_size(v, &c->files_max_size) < 0 || c->files_max_size < 1024 ? -EINVAL : 0;
	case K_SECCOMP_LOG:
		return parse_bool(v, &c->seccomp_log) < 0 ? -EINVAL : 0;
	case K_FALLBACK:
		if ((i = parse_choice(v, config_fallbacks)) < 0)
			return i;
		c->fallback = (enum limits_fallback) i;
		return 0;
	case K_REQUIRE_CGROUP: {
		/* The older spelling of fallback: refuse. */
		bool b;
		if (parse_bool(v, &b) < 0)
			return -EINVAL;
		if (b || c->fallback == FALLBACK_REFUSE)
			c->fallback = b ? FALLBACK_REFUSE : FALLBACK_WARN;
		return 0;
	}
	case K_CGROUP_PARENT:
		return valid_abs_path(v) ? config_dup_str(&c->cgroup_parent, v) : -EINVAL;
	case K_NET_MODE:
		if ((i = parse_choice(v, config_net_modes)) < 0)
			return i;
		c->net = (enum net_mode) i;
		return 0;
	case K_NET_ALLOW:
		return valid_allow_host(v) ? strv_push(&c->allow, v) : -EINVAL;
	case K_NET_LOOPBACK:
		return parse_bool(v, &c->allow_host_loopback) < 0 ? -EINVAL : 0;
	case K_NET_HELPER:
		if ((i = parse_choice(v, config_net_helpers)) < 0)
			return i;
		c->net_helper = (enum net_helper) i;
		return 0;
	case K_RO_ROOT:
		return parse_bool(v, &c->read_only_root) < 0 ? -EINVAL : 0;
	case K_SYSFS:
		return parse_bool(v, &c->sysfs) < 0 ? -EINVAL : 0;
	case K_MOUNTS:
		return add_volume(c, v, origin, err);
	case K_FORBIDDEN:
		return valid_policy_path(v) ? strv_push(&c->forbidden, v) : -EINVAL;
	case K_ALLOWED_ROOTS:
		return valid_policy_path(v) ? strv_push(&c->allowed_roots, v) : -EINVAL;
	case K_DENY_CHANGES:
		return *v ? strv_push(&c->deny_changes, v) : -EINVAL;
	case K_ENV_SET:
		return set_env(c, v, origin, err);
	case K_ENV_PASS:
		return env_name_ok(v, strlen(v)) ? strv_push(&c->env_pass, v) : -EINVAL;
	case K_USER:
		return set_user(c, v, origin, err);
	}
	return -EINVAL;
}

int nsbox_config_set(nsbox_config *cfg, const char *key, const char *value, const char *origin,
                     nsbox_error **err)
{
	if (!cfg || !key || !value)
		return nsbox_err_invalid(err, "config", "set option: missing argument");
	const struct key_def *k = find_key(key);
	origin = origin ? origin : key;
	if (!k && config_audit_known(key)) {
		int r = config_audit_apply(cfg, key, value);
		if (r == -ENOMEM)
			return nsbox_err(err, ENOMEM, "config", "%s: set '%s'", origin, key);
		if (r < 0)
			return nsbox_err_invalid(err, "config", "%s: invalid value '%s' (expected %s)", origin, value,
			                         config_audit_what(key));
		return 0;
	}
	if (!k)
		return nsbox_err_invalid(err, "config", "%s: unknown setting '%s'", origin, key);
	nsbox_error *inner = NULL;
	int r = apply(cfg, k, value, origin, &inner);
	if (r == -ENOMEM) {
		nsbox_error_free(inner);
		return nsbox_err(err, ENOMEM, "config", "%s: set '%s'", origin, key);
	}
	if (r < 0 && inner) {
		if (err) {
			nsbox_error_free(*err);
			*err = inner;
		} else {
			nsbox_error_free(inner);
		}
		return r;
	}
	if (r < 0)
		return nsbox_err_invalid(err, "config", "%s: invalid value '%s' (expected %s)", origin,
		                 value, k->what);
	return 0;
}

int nsbox_config_add_file(nsbox_config *cfg, const char *path, const void *data, size_t len,
                          unsigned mode, nsbox_error **err)
{
	if (!cfg || !path || (!data && len))
		return nsbox_err(err, EINVAL, "config", "add file: missing argument");
	if (!valid_abs_path(path) || strcmp(path, "/") == 0 || mode > 07777)
		return nsbox_err_invalid(err, "config", "add file '%s': not an absolute path below '/' (or a bad mode)", path);
	if (len > (64u << 20))
		return nsbox_err_invalid(err, "config", "add file '%s': %zu bytes is more than 64 MiB", path, len);
	file_spec *v = realloc(cfg->files, (cfg->n_files + 1) * sizeof(*v));
	if (!v)
		return nsbox_err(err, ENOMEM, "config", "add file '%s'", path);
	cfg->files = v;
	char *p = strdup(path), *d = malloc(len ? len : 1);
	if (!p || !d) {
		free(p);
		free(d);
		return nsbox_err(err, ENOMEM, "config", "add file '%s'", path);
	}
	if (len)
		memcpy(d, data, len);
	v[cfg->n_files++] = (file_spec){ p, d, len, mode };
	return 0;
}

void config_drop_file(nsbox_config *c, const char *path)
{
	for (size_t i = 0; i < c->n_files;) {
		if (strcmp(c->files[i].path, path)) {
			i++;
			continue;
		}
		free(c->files[i].path);
		free(c->files[i].data);
		memmove(&c->files[i], &c->files[i + 1], (c->n_files - i - 1) * sizeof(*c->files));
		c->n_files--;
	}
}

int nsbox_config_set_command(nsbox_config *cfg, int argc, const char *const *argv,
                             nsbox_error **err)
{
	if (!cfg || argc < 1 || !argv || !argv[0] || !argv[0][0])
		return nsbox_err_invalid(err, "config", "set command: no command given");
	strv_clear(&cfg->command);
	for (int i = 0; i < argc; i++)
		if (!argv[i] || strv_push(&cfg->command, argv[i]) < 0) {
			strv_clear(&cfg->command);
			return nsbox_err(err, argv[i] ? ENOMEM : EINVAL, "config", "set command");
		}
	return 0;
}

uint64_t nsbox_config_timeout_ms(const nsbox_config *cfg)
{
	return cfg ? cfg->timeout_ms : 0;
}
