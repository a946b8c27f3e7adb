/* The NSBOX_* environment variables: the one table every door reads them
 * with (the CLI, the SDK's Sandbox.from_env, embedders). In precedence they
 * come after the policy and before explicit options. */
#include <errno.h>
#include <string.h>

#include "base/error.h"
#include "config/conf.h"

static const struct { const char *var, *key; } env_keys[] = {
	{ "NSBOX_IMAGE", "image" }, { "NSBOX_ROOTFS", "rootfs" },
	{ "NSBOX_MEMORY", "limits.memory" }, { "NSBOX_CPUS", "limits.cpus" },
	{ "NSBOX_PIDS_LIMIT", "limits.pids" }, { "NSBOX_TIMEOUT", "limits.timeout" },
	{ "NSBOX_TMPFS_SIZE", "limits.tmpfs" }, { "NSBOX_MAX_OUTPUT", "limits.output" },
	{ "NSBOX_NETWORK", "network.mode" }, { "NSBOX_USER", "security.user" },
	{ "NSBOX_HOSTNAME", "hostname" }, { "NSBOX_SECCOMP", "security.seccomp" },
	{ "NSBOX_WORKDIR", "workdir" }, { "NSBOX_CGROUP_PARENT", "limits.cgroup_parent" },
	{ "NSBOX_REQUIRE_CGROUP", "limits.require_cgroup" }, { "NSBOX_LIMITS_FALLBACK", "limits.fallback" },
	{ "NSBOX_NETWORK_HELPER", "network.helper" }, { "NSBOX_AUDIT_LOG", "audit.log" },
};

static const char *env_get(const char *const *envp, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; envp && envp[i]; i++)
		if (!strncmp(envp[i], name, n) && envp[i][n] == '=')
			return envp[i] + n + 1;
	return NULL;
}

const char *nsbox_env_policy(const char *const *envp)
{
	const char *p = env_get(envp, "NSBOX_POLICY");
	return p && *p ? p : NULL;
}

int nsbox_env_setting(size_t i, const char **var, const char **key)
{
	if (i >= sizeof(env_keys) / sizeof(env_keys[0]))
		return -ENOENT;
	if (var)
		*var = env_keys[i].var;
	if (key)
		*key = env_keys[i].key;
	return 0;
}

int nsbox_config_apply_env(nsbox_config *cfg, const char *const *envp, nsbox_error **err)
{
	if (!cfg)
		return nsbox_err_invalid(err, "config", "apply NSBOX_* variables: no configuration");
	for (size_t i = 0; i < sizeof(env_keys) / sizeof(env_keys[0]); i++) {
		const char *v = env_get(envp, env_keys[i].var);
		if (!v)
			continue;
		int r = nsbox_config_set(cfg, env_keys[i].key, v, env_keys[i].var, err);
		if (r < 0)
			return r;
	}
	return 0;
}
