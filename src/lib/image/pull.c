/* `nsbox image pull REF [NAME]`: an image from an OCI registry, fetched by
 * skopeo (containers' own, well-kept client: Docker Hub's and GHCR's
 * reference forms and token auth, manifest lists, credentials from the
 * Docker config file) into an OCI layout in a private directory of the
 * store, then imported like any other: every blob's digest checked again
 * (import.c), every layer treated as hostile (import_layer.c), set-id bits,
 * capabilities and devices stripped, installed atomically or not at all.
 * skopeo verifies the blobs as it fetches them, and the manifest's digest
 * when the reference pins one (NAME@sha256:...). It runs as the caller:
 * nothing it fetched is trusted until the import has taken it apart. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "image/images.h"
#include "image/import_module.h"
#include "image/pull.h"

/* ---- references -------------------------------------------------------------- */

static bool path_char(char c)
{
	return islower((unsigned char) c) || isdigit((unsigned char) c) || c == '.' || c == '_' || c == '-' || c == '/';
}

/* HOST[:PORT] or [IPV6][:PORT]: letters, digits, '.', '-'; a port of digits. */
static bool registry_ok(const char *s)
{
	const char *end;
	if (*s == '[') {
		end = strchr(s, ']');
		if (!end || end == s + 1 || strspn(s + 1, "0123456789abcdefABCDEF:.") != (size_t) (end - s - 1))
			return false;
		end++;
	} else {
		end = s + strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-");
		if (end == s || *s == '.' || *s == '-' || end[-1] == '.' || end[-1] == '-')
			return false;
	}
	if (!*end)
		return true;
	return *end == ':' && end[1] && strspn(end + 1, "0123456789") == strlen(end + 1) && strlen(end + 1) <= 5;
}

int image_ref_parse(const char *in, image_ref *out)
{
	*out = (image_ref){ 0 };
	if (!in)
		return -EINVAL;
	if (!strncmp(in, "docker://", 9))
		in += 9;
	size_t len = strlen(in);
	if (!len || len >= sizeof(out->repo) || in[0] == '-' || in[0] == '/')
		return -EINVAL;
	char s[sizeof(out->repo)];
	memcpy(s, in, len + 1);
	char *at = strchr(s, '@');
	if (at) {
		*at = '\0';
		const char *d = at + 1;
		if (strncmp(d, "sha256:", 7) || strlen(d) != 71 || strspn(d + 7, "0123456789abcdef") != 64)
			return -EINVAL;
		memcpy(out->digest, d, 72);
	}
	/* A registry is a first component with a '.' or a ':', or localhost. */
	char *slash = strchr(s, '/');
	char *path = s;
	if (slash && (memchr(s, '.', (size_t) (slash - s)) || memchr(s, ':', (size_t) (slash - s)) ||
	              !strncmp(s, "localhost/", 10))) {
		*slash = '\0';
		size_t n = strlen(s);
		if (!registry_ok(s) || n >= sizeof(out->registry))
			return -EINVAL;
		memcpy(out->registry, s, n + 1);
		path = slash + 1;
	}
	char *colon = strrchr(path, ':');
	if (colon) {
		*colon = '\0';
		const char *t = colon + 1;
		size_t tl = strlen(t);
		if (!tl || tl > 128 || !(isalnum((unsigned char) t[0]) || t[0] == '_'))
			return -EINVAL;
		for (size_t i = 0; i < tl; i++)
			if (!isalnum((unsigned char) t[i]) && !strchr("._-", t[i]))
				return -EINVAL;
		snprintf(out->tag, sizeof(out->tag), "%s", t);
	}
	/* Path components: lowercase letters and digits, separated by '.',
	 * '_', '__' or '-' runs; no empty component. */
	if (!*path || path[strlen(path) - 1] == '/')
		return -EINVAL;
	for (const char *p = path; *p; p++) {
		if (!path_char(*p))
			return -EINVAL;
		bool sep = *p == '/' || *p == '.' || *p == '_' || *p == '-';
		bool edge = p == path || p[-1] == '/' || p[1] == '\0' || p[1] == '/';
		if (sep && *p != '/' && edge)
			return -EINVAL;
		if (*p == '/' && (p == path || p[-1] == '/'))
			return -EINVAL;
	}
	snprintf(out->path, sizeof(out->path), "%s", path);
	snprintf(out->repo, sizeof(out->repo), "%s", in);
	return 0;
}

int nsbox_image_ref_name(const char *ref, char **name, nsbox_error **err)
{
	image_ref r;
	if (!name || image_ref_parse(ref, &r) < 0)
		return nsbox_err_invalid(err, "image", "pull: '%s' is not an image reference ([REGISTRY/]PATH[:TAG]"
		                         "[@sha256:DIGEST])", ref ? ref : "");
	const char *last = strrchr(r.path, '/');
	last = last ? last + 1 : r.path;
	bool tagged = *r.tag && strcmp(r.tag, "latest");
	if (asprintf(name, "%s%s%s", last, tagged ? "-" : "", tagged ? r.tag : "") < 0)
		return nsbox_err(err, ENOMEM, "image", "pull '%s'", ref);
	if (!image_name_valid(*name)) {
		free(*name);
		*name = NULL;
		return nsbox_err_invalid(err, "image", "pull '%s': give the image a name (it makes none)", ref);
	}
	return 0;
}

/* ---- skopeo ------------------------------------------------------------------ */

/* The first executable `skopeo` in PATH (a missing PATH: the usual one). */
static bool find_skopeo(char *out, size_t len)
{
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (const char *p = path; *p;) {
		size_t n = strcspn(p, ":");
		if (n && snprintf(out, len, "%.*s/skopeo", (int) n, p) < (int) len && access(out, X_OK) == 0)
			return true;
		p += n + (p[n] == ':');
	}
	return false;
}

/* The Docker config file with the caller's registry credentials, if any:
 * $DOCKER_CONFIG/config.json, else ~/.docker/config.json. */
static bool docker_config(char *out, size_t len)
{
	const char *dc = getenv("DOCKER_CONFIG"), *home = getenv("HOME");
	if (dc && *dc)
		snprintf(out, len, "%s/config.json", dc);
	else if (home && *home)
		snprintf(out, len, "%s/.docker/config.json", home);
	else
		return false;
	return access(out, R_OK) == 0;
}

/* Run argv with its output to log_fd and its last lines kept in tail;
 * the exit status, or -errno. */
static int run_tool(char *const *argv, int log_fd, char *tail, size_t tail_len)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(p[0]);
		close(p[1]);
		return -e;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);
		if (null >= 0)
			(void) dup2(null, 0);
		(void) dup2(p[1], 1);
		(void) dup2(p[1], 2);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	size_t have = 0;
	tail[0] = '\0';
	char b[4096];
	ssize_t n;
	while ((n = read(p[0], b, sizeof(b))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (log_fd >= 0)
			(void) !write(log_fd, b, (size_t) n);
		/* Keep the last tail_len - 1 bytes. */
		size_t k = (size_t) n;
		if (k >= tail_len - 1) {
			memcpy(tail, b + k - (tail_len - 1), tail_len - 1);
			have = tail_len - 1;
		} else {
			size_t keep = have + k > tail_len - 1 ? tail_len - 1 - k : have;
			memmove(tail, tail + have - keep, keep);
			memcpy(tail + keep, b, k);
			have = keep + k;
		}
		tail[have] = '\0';
	}
	close(p[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* skopeo's last line that says something ("time=... level=fatal
 * msg=\"...\"": the message). */
static const char *last_words(char *tail)
{
	char *end = tail + strlen(tail);
	while (end > tail && (end[-1] == '\n' || end[-1] == ' '))
		*--end = '\0';
	char *line = strrchr(tail, '\n');
	line = line ? line + 1 : tail;
	char *msg = strstr(line, "msg=\"");
	if (!msg)
		return line;
	msg += 5;
	size_t n = strlen(msg);
	if (n && msg[n - 1] == '"')
		msg[--n] = '\0';
	/* logfmt's escapes: \" and \\. */
	char *w = msg;
	for (const char *r = msg; *r; r++) {
		if (r[0] == '\\' && (r[1] == '"' || r[1] == '\\'))
			r++;
		*w++ = *r;
	}
	*w = '\0';
	return msg;
}

int nsbox_image_pull(const nsbox_image_pull_options *o, nsbox_error **err)
{
	if (!o || o->version != NSBOX_IMAGE_PULL_OPTIONS_VERSION || !o->ref)
		return nsbox_err(err, EINVAL, "image", "pull: invalid options");
	image_ref ref;
	if (image_ref_parse(o->ref, &ref) < 0)
		return nsbox_err_invalid(err, "image", "pull: '%s' is not an image reference ([REGISTRY/]PATH[:TAG]"
		                         "[@sha256:DIGEST])", o->ref);
	_cleanup_free_ char *derived = NULL;
	if (!o->name && nsbox_image_ref_name(o->ref, &derived, err) < 0)
		return -EINVAL;
	const char *name = o->name ? o->name : derived;
	if (!image_name_valid(name))
		return nsbox_err_invalid(err, "image", "pull: '%s' is not an image name (letters, digits, '.', '_', '-')",
		                         name);
	char skopeo[PATH_MAX];
	if (!find_skopeo(skopeo, sizeof(skopeo)))
		return nsbox_err_hint(err, ENOENT, "image", "install it: apt-get install skopeo (Debian, Ubuntu), "
		                      "dnf install skopeo (Fedora)",
		                      "pull '%s': skopeo is not installed (nsbox fetches images with it)", o->ref);
	_cleanup_free_ char *store = image_store(false);
	if (!store)
		return nsbox_err(err, ENOENT, "image", "pull: no image store (HOME is not set)");
	int r = mkdir_p(store, 0755);
	if (r < 0)
		return nsbox_err(err, -r, "image", "pull: create the image store '%s'", store);
	char final[PATH_MAX], tmp[PATH_MAX], layout[PATH_MAX + 8], dest[PATH_MAX + 32];
	snprintf(final, sizeof(final), "%s/%s", store, name);
	if (access(final, F_OK) == 0)
		return nsbox_err_hint(err, EEXIST, "image", "remove it first with 'nsbox image rm NAME', or pull it "
		                      "under another name", "pull '%s': image '%s' exists", o->ref, name);
	image_reap(store);
	snprintf(tmp, sizeof(tmp), "%s/.build-pull.%s-%d", store, name, (int) getpid());
	snprintf(layout, sizeof(layout), "%s/oci", tmp);
	snprintf(dest, sizeof(dest), "oci:%s:pulled", layout);
	(void) remove_tree(tmp);
	if (mkdir(tmp, 0700) < 0)
		return nsbox_err(err, errno, "image", "pull: create '%s'", tmp);
	_cleanup_close_ int lock = image_tmp_lock(tmp);
	char src[600], auth[PATH_MAX + 16], tls[32];
	snprintf(src, sizeof(src), "docker://%s", ref.repo);
	snprintf(tls, sizeof(tls), "--src-tls-verify=%s", o->tls_verify ? "true" : "false");
	char cfg[PATH_MAX];
	bool have_auth = o->authfile ? snprintf(cfg, sizeof(cfg), "%s", o->authfile) > 0 : docker_config(cfg, sizeof(cfg));
	snprintf(auth, sizeof(auth), "--authfile=%s", cfg);
	char *argv[8];
	size_t a = 0;
	argv[a++] = skopeo;
	argv[a++] = "copy";
	argv[a++] = "--retry-times=2";
	argv[a++] = tls;
	if (have_auth)
		argv[a++] = auth;
	argv[a++] = src;
	argv[a++] = dest;
	argv[a] = NULL;
	char tail[2048] = "";
	int st = lock < 0 ? lock : run_tool(argv, o->log_fd, tail, sizeof(tail));
	if (st != 0) {
		(void) remove_tree(tmp);
		if (st < 0)
			return nsbox_err(err, -st, "image", "pull '%s': run '%s'", o->ref, skopeo);
		const char *why = last_words(tail);
		return nsbox_err_hint(err, -EIO, "image",
		                      strstr(why, "unauthorized") || strstr(why, "authentication")
		                      ? "log in first (docker login, or skopeo login --authfile ~/.docker/config.json)"
		                      : strstr(why, "http: server gave HTTP response to HTTPS client")
		                      ? "a plain-HTTP registry: --tls-verify=false" : NULL,
		                      "pull '%s': skopeo failed (status %d): %s", o->ref, st, *why ? why : "no output");
	}
	char label[700];
	snprintf(label, sizeof(label), "pull of %s", src);
	r = image_import_labeled(name, layout, label, err);
	(void) remove_tree(tmp);
	return r < 0 ? nsbox_err_prefix(err, r, "pull '%s'", o->ref) : 0;
}
