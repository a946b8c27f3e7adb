/* One step of a declarative build (build_steps.c runs them in order):
 * what it runs (the command, identity, hosts it may reach, variables, and
 * COPY's sources as read-only volumes), and running it in a sandbox of its
 * own (build_run.c) whose overlay's upper directory becomes the step's
 * layer, stripped and kept under its key. Apart from the build's order,
 * cache and image because this is the part a new kind of step changes. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "image/build.h"
#include "image/build_lookup.h"
#include "image/build_run.h"
#include "image/build_steps.h"
#include "image/image_strip.h"
#include "base/syscalls.h"

static const char *const pip_hosts[] = { "pypi.org", "files.pythonhosted.org" };
static const char *const npm_hosts[] = { "registry.npmjs.org" };

/* The overlay for step i: the layers below it, top first, then the base;
 * its own upper and work directories in tmp. */
static char *overlay_opts(builder *b, size_t i, const char *tmp)
{
	buf o = { 0 };
	buf_puts(&o, "lowerdir=");
	for (size_t k = i; k-- > 0;)
		if (b->makes_layer[k])
			buf_printf(&o, "%s/upper:", b->key[k]);
	buf_printf(&o, "%s,upperdir=%s/upper,workdir=%s/work,userxattr", b->base_rel, tmp, tmp);
	char *s = buf_steal(&o);
	if (s && strlen(s) >= 4000) {
		free(s);
		return NULL;
	}
	return s;
}

/* The layer directories below step i, top first, then the base. */
static int stack_fds(builder *b, int **out, size_t *n)
{
	int *v = malloc((b->n_upper + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t k = 0; k < b->n_upper; k++)
		v[k] = b->upper_fds[b->n_upper - 1 - k];
	v[b->n_upper] = b->base_fd;
	*out = v;
	*n = b->n_upper + 1;
	return 0;
}

static int push_all(strv *dst, const char *const *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strv_push(dst, v[i]) < 0)
			return -ENOMEM;
	return 0;
}

static const char copy_script[] =
	"set -e; umask 022; dest=$1; shift\n"
	"case $dest in */) mkdir -p \"$dest\" ;; esac\n"
	"[ $# -gt 1 ] && mkdir -p \"$dest\"\n"
	"for s in \"$@\"; do\n"
	"  if [ -d \"$s\" ] && [ ! -L \"$s\" ]; then mkdir -p \"$dest\" && cp -R -P \"$s/.\" \"$dest/\"\n"
	"  elif [ -d \"$dest\" ]; then cp -P \"$s\" \"$dest/\"\n"
	"  else mkdir -p \"$(dirname \"$dest\")\" && cp -P \"$s\" \"$dest\"; fi\n"
	"done\n";

/* The command, identity, hosts and variables of step i into s. */
static int step_plan(builder *b, size_t i, step_run *s)
{
	const build_step *st = &b->spec->steps[i];
	int r = 0;
	for (size_t k = 0; r == 0 && k < b->env.n; k++)
		r = strv_push(&s->env, b->env.v[k]);
	for (size_t k = 0; r == 0 && k < b->spec->allow.n; k++)
		r = strv_push(&s->allow, b->spec->allow.v[k]);
	if (r < 0)
		return nsbox_err(b->err, ENOMEM, "image", "plan a build step");
	s->workdir = b->workdir;
	static const char *const apt[] = { "sh", "-c",
		"set -e; apt-get update -q; apt-get install -y -q --no-install-recommends \"$@\"; apt-get clean; "
		"rm -rf /var/lib/apt/lists/*", "nsbox-apt" };
	static const char *const pip[] = { "python3", "-m", "pip", "install", "--no-cache-dir" };
	static const char *const npm[] = { "npm", "install", "-g", "--prefix", "/usr/local" };
	static const char *const pip_env[] = { "PIP_BREAK_SYSTEM_PACKAGES=1", "PIP_ROOT_USER_ACTION=ignore",
	                                       "PIP_DISABLE_PIP_VERSION_CHECK=1", "XDG_CACHE_HOME=/tmp/.cache" };
	static const char *const npm_env[] = { "npm_config_cache=/tmp/.npm", "npm_config_update_notifier=false",
	                                       "npm_config_fund=false", "npm_config_audit=false" };
	switch (st->kind) {
	case BK_APT: {
		_cleanup_free_ int *fds = NULL;
		size_t n = 0;
		if (stack_fds(b, &fds, &n) < 0)
			return nsbox_err(b->err, ENOMEM, "image", "plan a build step");
		r = lookup_apt_hosts(fds, n, &s->allow, b->err);
		if (r < 0)
			return nsbox_err_prefix(b->err, r, "%s", st->origin);
		r = push_all(&s->argv, apt, ARRAY_SIZE(apt)) ?: strv_push(&s->env, "DEBIAN_FRONTEND=noninteractive");
		break;
	}
	case BK_PIP:
		r = push_all(&s->argv, pip, ARRAY_SIZE(pip)) ?: push_all(&s->allow, pip_hosts, ARRAY_SIZE(pip_hosts));
		r = r ?: push_all(&s->env, pip_env, ARRAY_SIZE(pip_env));
		break;
	case BK_NPM:
		r = push_all(&s->argv, npm, ARRAY_SIZE(npm)) ?: push_all(&s->allow, npm_hosts, ARRAY_SIZE(npm_hosts));
		r = r ?: push_all(&s->env, npm_env, ARRAY_SIZE(npm_env));
		break;
	case BK_COPY: {
		r = push_all(&s->argv, (const char *const[]){ "sh", "-c", copy_script, "nsbox-copy" }, 4);
		r = r ?: strv_push_take(&s->argv, build_join_workdir(b->workdir, st->args.v[st->args.n - 1]));
		for (size_t k = 0; r == 0 && k + 1 < st->args.n; k++) {
			int fd = build_copy_source(b, st, st->args.v[k]);
			if (fd < 0)
				return fd;
			char proc[64], real[PATH_MAX], *target = NULL;
			snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
			ssize_t len = readlink(proc, real, sizeof(real) - 1);
			struct stat sst;
			bool dir = fstat(fd, &sst) == 0 && S_ISDIR(sst.st_mode);
			close(fd);
			if (len < 0)
				return nsbox_err(b->err, errno, "image", "%s: COPY '%s'", st->origin, st->args.v[k]);
			real[len] = '\0';
			/* A file keeps its name: it is mounted in a directory. */
			const char *base = strrchr(real, '/');
			if (dir ? asprintf(&target, "/tmp/.nsbox-copy/%zu", k) < 0
			        : asprintf(&target, "/tmp/.nsbox-copy/%zu/%s", k, base ? base + 1 : real) < 0)
				return nsbox_err(b->err, ENOMEM, "image", "plan a build step");
			r = strv_push(&s->volumes, real) ?: strv_push(&s->volumes, target);
			r = r ?: strv_push_take(&s->argv, target);
		}
		break;
	}
	case BK_RUN:
		r = push_all(&s->argv, (const char *const[]){ "sh", "-c", st->args.v[0] }, 3);
		break;
	case BK_EXEC:
		r = push_all(&s->argv, (const char *const *) st->args.v, st->args.n);
		break;
	case BK_WORKDIR:
		r = push_all(&s->argv, (const char *const[]){ "mkdir", "-p" }, 2);
		r = r ?: strv_push_take(&s->argv, build_join_workdir(b->workdir, st->args.v[0]));
		s->workdir = NULL;
		break;
	default:
		break;
	}
	/* The packages (and pip's or npm's options) after the command. */
	if (r == 0 && (st->kind == BK_APT || st->kind == BK_PIP || st->kind == BK_NPM))
		r = push_all(&s->argv, (const char *const *) st->args.v, st->args.n);
	if (r < 0)
		return nsbox_err(b->err, ENOMEM, "image", "plan a build step");
	/* Package steps and files copied are root's; RUN is USER's. */
	if ((st->kind == BK_RUN || st->kind == BK_EXEC) && b->user) {
		_cleanup_free_ int *fds = NULL;
		size_t n = 0;
		if (stack_fds(b, &fds, &n) < 0)
			return nsbox_err(b->err, ENOMEM, "image", "plan a build step");
		r = lookup_user(fds, n, b->user, &s->uid, &s->gid, b->err);
		if (r < 0)
			return nsbox_err_prefix(b->err, r, "%s", st->origin);
	}
	return 0;
}

static void step_run_clear(step_run *s)
{
	strv_clear(&s->allow);
	strv_clear(&s->env);
	strv_clear(&s->volumes);
	strv_clear(&s->argv);
}

/* Why a step failed, from its result: its status, and the first
 * destination the proxy refused (the usual reason a download failed). */
static int step_failed(builder *b, size_t i, const nsbox_result *res, const char *text)
{
	const build_step *st = &b->spec->steps[i];
	_cleanup_free_ char *denied = step_denied(res);
	const nsbox_error *e = nsbox_result_error(res);
	char status[160];
	if (e)
		return nsbox_err_invalid(b->err, "image", "build image '%s': step %zu/%zu (%s: %s) could not start: %s",
		                         b->name, i + 1, b->spec->n_steps, st->origin, text, nsbox_error_message(e));
	if (nsbox_result_status(res) == NSBOX_STATUS_TIMED_OUT)
		snprintf(status, sizeof(status), "timed out");
	else
		snprintf(status, sizeof(status), "failed with status %d", nsbox_result_exit_status(res));
	return nsbox_err_hint(b->err, -EIO, "image",
	                      denied ? "the step may reach only its own hosts: allow more with --allow-host HOST"
	                             : "the build log has its output",
	                      "build image '%s': step %zu/%zu (%s: %s) %s%s%s", b->name, i + 1, b->spec->n_steps,
	                      st->origin, text, status, denied ? "; the network refused " : "", denied ? denied : "");
}

/* Run step i into a new layer, named by its key once it succeeded. */
int build_run_step(builder *b, size_t i, const char *text)
{
	char tmp[64];
	snprintf(tmp, sizeof(tmp), ".build-%s-%d", b->key[i], (int) getpid());
	(void) remove_beneath(b->layers_fd, tmp);
	/* Searchable: the step's root reaches its upper directory through it. */
	int r = mkdirat(b->layers_fd, tmp, 0711) < 0 ? -errno : 0;
	_cleanup_close_ int tfd = r == 0 ? openat(b->layers_fd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
	if (r == 0 && (tfd < 0 || flock(tfd, LOCK_EX | LOCK_NB) < 0))
		r = -errno;
	/* The step's root (the host's view of it) owns its new files. */
	if (r == 0 && (mkdirat(tfd, "upper", 0755) < 0 || mkdirat(tfd, "work", 0700) < 0))
		r = -errno;
	if (r == 0 && !b->rootless &&
	    (fchownat(tfd, "upper", b->host_uid, b->host_gid, 0) < 0 || fchownat(tfd, "work", b->host_uid, b->host_gid, 0) < 0))
		r = -errno;
	if (r < 0) {
		(void) remove_beneath(b->layers_fd, tmp);
		return nsbox_err(b->err, -r, "image", "make the layer directory '%s/%s'", b->layers, tmp);
	}
	step_run s = { .rootfs = b->base, .overlay_dir = b->layers, .log_fd = b->o->log_fd, .signal_fd = -1 };
	_cleanup_free_ char *opts = overlay_opts(b, i, tmp);
	s.overlay = opts;
	r = opts ? step_plan(b, i, &s) : nsbox_err(b->err, ENAMETOOLONG, "image", "build: too many layers");
	nsbox_result *res = NULL;
	r = r ?: step_sandbox(&s, &res, b->err);
	if (r == 0 && (nsbox_result_status(res) != NSBOX_STATUS_EXITED || nsbox_result_exit_code(res) != 0))
		r = step_failed(b, i, res, text);
	nsbox_result_free(res);
	step_run_clear(&s);
	/* The work directory is overlayfs's scratch; the layer is upper/. A
	 * concurrent build of the same step may have finished first: its
	 * layer is the same, and stays. */
	int wr = r == 0 ? remove_beneath(tfd, "work") : 0;
	if (wr < 0)
		r = nsbox_err(b->err, -wr, "image", "clean the layer '%s/%s'", b->layers, tmp);
	/* Kept in the store, a layer is stripped like an image (set-id bits
	 * do nothing under no_new_privs in the later steps either), and only
	 * the steps' root may enter it. */
	image_stripped ls = { .keep_whiteouts = true };
	_cleanup_close_ int ufd = r == 0 ? openat(tfd, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
	wr = r == 0 ? (ufd < 0 ? -errno : strip_tree(ufd, &ls)) : 0;
	if (wr < 0)
		r = nsbox_err(b->err, -wr, "image", "strip the layer '%s/%s'", b->layers, tmp);
	if (r == 0 && (fchmod(tfd, 0700) < 0 || (!b->rootless && fchown(tfd, b->host_uid, b->host_gid) < 0)))
		r = nsbox_err(b->err, errno, "image", "keep the layer '%s/%s'", b->layers, tmp);
	/* --rebuild: the new layer takes the old one's place (which leaves
	 * with tmp). */
	if (r == 0 && renameat2(b->layers_fd, tmp, b->layers_fd, b->key[i], RENAME_NOREPLACE) < 0 &&
	    !((errno == EEXIST || errno == ENOTEMPTY) &&
	      (!b->o->rebuild || renameat2(b->layers_fd, tmp, b->layers_fd, b->key[i], RENAME_EXCHANGE) == 0)))
		r = nsbox_err(b->err, errno, "image", "keep the layer '%s/%s'", b->layers, b->key[i]);
	(void) remove_beneath(b->layers_fd, tmp);
	return r;
}
