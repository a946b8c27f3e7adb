/* Rules that join several keys, checked before anything with a side effect
 * (an audit log opened, an import-gate sandbox run, a session created):
 * nsbox_config_validate(). Each key's own value is checked when it is set. */
#include <errno.h>

#include "base/error.h"
#include "config/conf.h"

int nsbox_config_validate(const nsbox_config *cfg, nsbox_error **err)
{
	if (!cfg)
		return nsbox_err_invalid(err, "config", "check the configuration: none given");
	/* Fail closed on settings whose machinery does not exist, rather than
	 * running with less than was asked for. */
	if (!cfg->read_only_root)
		return nsbox_err(err, ENOTSUP, "config",
		                 "filesystem.read_only_root: false is not supported: the root filesystem is always read-only (write to /tmp or a volume)");
	if (cfg->allow_host_loopback && cfg->net != NET_USER)
		return nsbox_err_invalid(err, "config",
		                         "network.allow_host_loopback (--allow-host-loopback) needs network mode 'user'");
	if (cfg->allow.n && cfg->net != NET_NONE)
		return nsbox_err_invalid(err, "config",
		                         "network.allow ('%s') needs network mode 'none': the allowlist proxy is the "
		                         "sandbox's only way out, and mode '%s' would open another",
		                         cfg->allow.v[0], cfg->net == NET_HOST ? "host" : "user");
	if (cfg->session && !cfg->workspace)
		return nsbox_err_invalid(err, "workspace", "--session needs --workspace");
	if (cfg->session && cfg->workspace_mode != WS_OVERLAY)
		return nsbox_err_invalid(err, "workspace", "--session needs --workspace-mode overlay (the default)");
	return 0;
}
