/* The values of docker run's options that need more than a policy key:
 * --tmpfs and --mount's size and options, -v and --mount's host paths,
 * -e and --env-file, --ulimit, --security-opt, --cap-drop's names, signals
 * and image names. Each turns into settings (policy keys) or an error that
 * names the option and what nsbox takes instead. No side effects but
 * reading --env-file. */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "docker/docker.h"
#include "docker/run_values.h"
#include "nsbox.h"
#include "opts.h"

int dr_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

int dr_push(docker_run *d, const char *key, const char *value, const char *origin)
{
	setting *s = realloc(d->a.settings, (d->a.n_settings + 1) * sizeof(*s));
	if (!s)
		return -ENOMEM;
	d->a.settings = s;
	s[d->a.n_settings++] = (setting){ key, value, origin };
	return 0;
}

/* A string kept for the parse's life (settings point into it). */
char *dr_own(docker_run *d, char *s)
{
	if (!s)
		return NULL;
	char **v = realloc(d->owned, (d->n_owned + 1) * sizeof(*v));
	if (!v) {
		free(s);
		return NULL;
	}
	d->owned = v;
	d->owned[d->n_owned++] = s;
	return s;
}

char *dr_own_fmt(docker_run *d, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return dr_own(d, s);
}

int dr_add_list(const char ***v, size_t *n, const char *s)
{
	const char **nv = realloc(*v, (*n + 1) * sizeof(**v));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	nv[(*n)++] = s;
	return 0;
}


int docker_signal(const char *s)
{
	static const struct {
		const char *name;
		int sig;
	} sigs[] = { { "TERM", SIGTERM }, { "INT", SIGINT }, { "HUP", SIGHUP }, { "QUIT", SIGQUIT }, { "KILL", SIGKILL } };
	char *e = NULL;
	long n = strtol(s, &e, 10);
	if (*s && isdigit((unsigned char) *s) && !*e) {
		for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			if (sigs[i].sig == n)
				return (int) n;
		return -1;
	}
	if (!strncmp(s, "SIG", 3))
		s += 3;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (!strcmp(sigs[i].name, s))
			return sigs[i].sig;
	return -1;
}

/* A reference's image name: itself when it is one, else as nsbox image
 * pull names it (python:3.12 -> python-3.12). */
static bool image_name_ok(const char *s)
{
	if (!*s || strlen(s) > 128 || s[0] == '.' || s[0] == '-')
		return false;
	for (const char *c = s; *c; c++)
		if (!isalnum((unsigned char) *c) && *c != '.' && *c != '_' && *c != '-')
			return false;
	return true;
}

const char *docker_image_name(const char *ref, char *buf, size_t len, char *err, size_t errlen)
{
	if (image_name_ok(ref))
		return ref;
	char *name = NULL;
	if (nsbox_image_ref_name(ref, &name, NULL) < 0) {
		snprintf(err, errlen, "image '%s' is neither an image of nsbox's store (nsbox image ls) nor a reference "
		         "([REGISTRY/]PATH[:TAG], as nsbox docker pull names it)", ref);
		return NULL;
	}
	snprintf(buf, len, "%s", name);
	free(name);
	return buf;
}

/* ---- the options that need more than a key ---------------------------------- */

/* --tmpfs PATH[:OPTS] and --mount type=tmpfs: only /tmp, whose size is
 * limits.tmpfs; the options nsbox's /tmp has (rw, exec, nosuid, nodev,
 * mode 1777) are accepted, the others refused. */
int dr_tmpfs(docker_run *d, const char *path, const char *opts, const char *origin, char *err, size_t errlen)
{
	if (strcmp(path, "/tmp") && strcmp(path, "/tmp/"))
		return dr_fail(err, errlen, "%s '%s': nsbox mounts a tmpfs on /tmp only (size it with %s /tmp:size=SIZE); "
		            "elsewhere the root filesystem is read-only: bind a host directory with -v for more",
		            origin, path, origin);
	char *copy = dr_own(d, strdup(opts ? opts : ""));
	if (!copy)
		return -ENOMEM;
	char *save = NULL;
	for (char *o = strtok_r(copy, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
		if (!strncmp(o, "size=", 5) || !strncmp(o, "tmpfs-size=", 11)) {
			const char *v = strchr(o, '=') + 1;
			uint64_t bytes;
			/* Docker takes a bare number as bytes, as nsbox does. */
			if (nsbox_parse_size(v, &bytes) < 0)
				return dr_fail(err, errlen, "%s /tmp: invalid size '%s' (such as 100m or 1g)", origin, v);
			int r = dr_push(d, "limits.tmpfs", v, origin);
			if (r < 0)
				return r;
		} else if (!strncmp(o, "mode=", 5) || !strncmp(o, "tmpfs-mode=", 11)) {
			const char *v = strchr(o, '=') + 1;
			if (strtoul(v, NULL, 8) != 01777 || strspn(v, "01234567") != strlen(v))
				return dr_fail(err, errlen, "%s /tmp: mode '%s': nsbox's /tmp has mode 1777", origin, v);
		} else if (strcmp(o, "rw") && strcmp(o, "exec") && strcmp(o, "nosuid") && strcmp(o, "nodev")) {
			return dr_fail(err, errlen, "%s /tmp: option '%s': nsbox's /tmp is rw, exec, nosuid and nodev, mode 1777 "
			            "(size=SIZE sets its size)", origin, o);
		}
	}
	return 0;
}

/* -v SRC:DST[:OPTS]: a host path (absolute or ./relative); Docker's named
 * and anonymous volumes have no nsbox meaning. */
int dr_volume(docker_run *d, const char *v, char *err, size_t errlen)
{
	const char *c1 = strchr(v, ':');
	if (!c1)
		return dr_fail(err, errlen, "--volume '%s': an anonymous volume (no host path): nsbox binds host paths, "
		            "SRC:DST[:ro|rw]", v);
	if (v[0] != '/' && v[0] != '.' && v[0] != '~')
		return dr_fail(err, errlen, "--volume '%s': '%.*s' is a named volume: nsbox binds host paths (absolute, or "
		            "starting with ./)", v, (int) (c1 - v), v);
	const char *c2 = strchr(c1 + 1, ':');
	if (!c2)
		return dr_push(d, "filesystem.mounts", v, "--volume");
	bool ro = false;
	char *opts = dr_own(d, strdup(c2 + 1));
	if (!opts)
		return -ENOMEM;
	char *save = NULL;
	for (char *o = strtok_r(opts, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
		if (!strcmp(o, "ro") || !strcmp(o, "readonly"))
			ro = true;
		else if (!strcmp(o, "rw"))
			ro = false;
		else
			return dr_fail(err, errlen, "--volume '%s': option '%s': nsbox takes ro or rw (no relabelling, "
			            "propagation or consistency modes)", v, o);
	}
	char *s = dr_own_fmt(d, "%.*s:%s", (int) (c2 - v), v, ro ? "ro" : "rw");
	return s ? dr_push(d, "filesystem.mounts", s, "--volume") : -ENOMEM;
}

/* --mount type=bind|tmpfs,KEY=VALUE,... */
int dr_mount_opt(docker_run *d, const char *v, char *err, size_t errlen)
{
	char *copy = dr_own(d, strdup(v));
	if (!copy)
		return -ENOMEM;
	const char *type = NULL, *src = NULL, *dst = NULL, *size = NULL, *mode = NULL;
	bool ro = false;
	char *save = NULL;
	for (char *o = strtok_r(copy, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(o, '=');
		const char *val = eq ? eq + 1 : NULL;
		if (eq)
			*eq = '\0';
		if (!strcmp(o, "type") && val)
			type = val;
		else if ((!strcmp(o, "source") || !strcmp(o, "src")) && val)
			src = val;
		else if ((!strcmp(o, "target") || !strcmp(o, "destination") || !strcmp(o, "dst")) && val)
			dst = val;
		else if (!strcmp(o, "readonly") || !strcmp(o, "ro")) {
			int b = opt_bool(val);
			if (b < 0)
				return dr_fail(err, errlen, "--mount '%s': %s takes true or false, not '%s'", v, o, val);
			ro = b;
		} else if (!strcmp(o, "tmpfs-size") && val)
			size = val;
		else if (!strcmp(o, "tmpfs-mode") && val)
			mode = val;
		else
			return dr_fail(err, errlen, "--mount '%s': option '%s': nsbox takes type, source, target, readonly, "
			            "tmpfs-size and tmpfs-mode", v, o);
	}
	if (!type || (strcmp(type, "bind") && strcmp(type, "tmpfs")))
		return dr_fail(err, errlen, "--mount '%s': type '%s': nsbox mounts type=bind (a host path) and type=tmpfs "
		            "(/tmp); it has no volumes", v, type ? type : "");
	if (!dst)
		return dr_fail(err, errlen, "--mount '%s': no target", v);
	if (!strcmp(type, "tmpfs")) {
		if (src)
			return dr_fail(err, errlen, "--mount '%s': a tmpfs has no source", v);
		char *o = dr_own_fmt(d, "%s%s%s%s%s", size ? "size=" : "", size ? size : "", size && mode ? "," : "",
		                  mode ? "mode=" : "", mode ? mode : "");
		return o ? dr_tmpfs(d, dst, o, "--mount", err, errlen) : -ENOMEM;
	}
	if (!src || src[0] != '/')
		return dr_fail(err, errlen, "--mount '%s': a bind's source must be an absolute host path", v);
	char *s = dr_own_fmt(d, "%s:%s:%s", src, dst, ro ? "ro" : "rw");
	return s ? dr_push(d, "filesystem.mounts", s, "--mount") : -ENOMEM;
}

/* -e NAME=VALUE sets, -e NAME passes the caller's value (when it has one,
 * as Docker does). */
int dr_env_opt(docker_run *d, const char *v, const char *origin, char *err, size_t errlen)
{
	const char *eq = strchr(v, '=');
	if (eq == v || !*v)
		return dr_fail(err, errlen, "%s '%s': expected NAME=VALUE or NAME", origin, v);
	int r = dr_add_list(&d->env, &d->n_env, v);
	if (r < 0)
		return r;
	return dr_push(d, eq ? "environment.set" : "environment.pass", v, origin);
}

/* Docker's env file: NAME=VALUE or NAME a line; '#' starts a comment line;
 * blank lines are skipped; values are taken as they are (no quotes
 * removed, as Docker does). */
int dr_env_file(docker_run *d, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return dr_fail(err, errlen, "--env-file '%s': %s", path, strerror(errno));
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	unsigned lineno = 0;
	int r = 0;
	while (r == 0 && (n = getline(&line, &cap, f)) >= 0) {
		lineno++;
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = '\0';
		const char *s = line;
		while (*s == ' ' || *s == '\t')
			s++;
		if (!*s || *s == '#')
			continue;
		if (memchr(line, '\0', (size_t) n)) {
			r = dr_fail(err, errlen, "--env-file '%s': line %u holds a NUL byte", path, lineno);
			break;
		}
		char *kv = dr_own(d, strdup(s));
		if (!kv) {
			r = -ENOMEM;
			break;
		}
		char where[64];
		snprintf(where, sizeof(where), "--env-file line %u", lineno);
		char *origin = dr_own(d, strdup(where));
		r = origin ? dr_env_opt(d, kv, origin, err, errlen) : -ENOMEM;
	}
	free(line);
	fclose(f);
	return r;
}

/* --ulimit nofile=SOFT[:HARD] | fsize=SOFT[:HARD]: nsbox sets one value as
 * both limits. */
int dr_ulimit(docker_run *d, const char *v, char *err, size_t errlen)
{
	const char *eq = strchr(v, '=');
	if (!eq)
		return dr_fail(err, errlen, "--ulimit '%s': expected NAME=SOFT[:HARD]", v);
	size_t nl = (size_t) (eq - v);
	const char *key = nl == 6 && !strncmp(v, "nofile", 6) ? "limits.nofile"
	                  : nl == 5 && !strncmp(v, "fsize", 5) ? "limits.fsize" : NULL;
	if (!key)
		return dr_fail(err, errlen, "--ulimit '%.*s': nsbox sets nofile and fsize only (processes: --pids-limit)",
		            (int) nl, v);
	const char *soft = eq + 1, *colon = strchr(soft, ':');
	if (colon && (strlen(colon + 1) != (size_t) (colon - soft) || strncmp(soft, colon + 1, (size_t) (colon - soft))))
		return dr_fail(err, errlen, "--ulimit '%s': nsbox sets the soft and hard limits to one value: give N or N:N", v);
	char *val = dr_own(d, strndup(soft, colon ? (size_t) (colon - soft) : strlen(soft)));
	char *origin = dr_own_fmt(d, "--ulimit %.*s", (int) nl, v);
	return val && origin ? dr_push(d, key, val, origin) : -ENOMEM;
}

int dr_security_opt(docker_run *d, const char *v, char *err, size_t errlen)
{
	/* Docker takes KEY=VALUE and the older KEY:VALUE. */
	size_t kl = strcspn(v, "=:");
	const char *val = v[kl] ? v + kl + 1 : NULL;
	if (kl == 17 && !strncmp(v, "no-new-privileges", 17)) {
		int b = opt_bool(val);
		if (b < 0)
			return dr_fail(err, errlen, "--security-opt '%s': expected no-new-privileges[=true]", v);
		if (!b)
			return dr_fail(err, errlen, "--security-opt '%s': nsbox always sets no_new_privs", v);
		return 0;
	}
	if (kl == 7 && !strncmp(v, "seccomp", 7) && val && *val)
		return dr_push(d, "security.seccomp", val, "--security-opt seccomp");
	return dr_fail(err, errlen, "--security-opt '%s': nsbox takes no-new-privileges, seccomp=FILE and "
	            "seccomp=unconfined (no AppArmor, SELinux labels or unmasked paths)", v);
}

bool dr_cap_name_ok(const char *c)
{
	static const char *const caps[] = {
		"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP",
		"LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
		"SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
		"SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP",
		"MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF",
		"CHECKPOINT_RESTORE", "ALL",
	};
	char up[40];
	size_t n = strlen(c);
	if (n >= sizeof(up))
		return false;
	for (size_t i = 0; i <= n; i++)
		up[i] = (char) toupper((unsigned char) c[i]);
	const char *u = strncmp(up, "CAP_", 4) ? up : up + 4;
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
		if (!strcmp(u, caps[i]))
			return true;
	return false;
}

/* -u: Docker's root and 0 are uid 0 (of the sandbox's user namespace: no
 * host privilege); other names are not looked up in the image. */
int dr_user(docker_run *d, const char *v, char *err, size_t errlen)
{
	if (!strcmp(v, "root") || !strcmp(v, "root:root"))
		return dr_push(d, "security.user", "0:0", "--user");
	const char *colon = strchr(v, ':');
	if (colon && !strcmp(colon + 1, "root")) {
		char *s = dr_own_fmt(d, "%.*s:0", (int) (colon - v), v);
		return s ? dr_push(d, "security.user", s, "--user") : -ENOMEM;
	}
	if (!isdigit((unsigned char) v[0]))
		return dr_fail(err, errlen, "--user '%s': give a numeric UID[:GID] (or root): nsbox does not look names up "
		               "in the image", v);
	return dr_push(d, "security.user", v, "--user");
}
