/* Declarative builds: `nsbox image build NAME --from BASE` with steps.
 *
 * Each step that changes files runs in a sandbox of its own (build_step.c
 * plans it, build_run.c runs it) whose root is an overlay of the base image
 * and the layers of the steps before it; what it writes lands in its own
 * layer, an overlayfs upper directory kept beside the store (layers/). A
 * layer is named by the digest of everything that makes it: the base
 * image's digest, every step up to it with the state they left (ENV,
 * WORKDIR, USER, the hosts they may reach) and, for COPY, the digest of
 * what is copied. A step whose layer exists is not run again; a build
 * whose every input is unchanged keeps its image and runs nothing. The
 * image is then made of the layers (build_layers.c), stripped like every
 * image (set-id bits, file capabilities, devices; root's store: owners
 * shifted), and installed atomically.
 *
 * The network: none, but through the allowlist proxy to what a step needs:
 * apt, the archives in the image's apt sources; pip, pypi.org and
 * files.pythonhosted.org; npm, registry.npmjs.org; and for every step the
 * hosts the build allows (--allow-host, the image file's allow:).
 *
 * Root builds into root's store, from root's images. A user without root
 * builds into their own store from their own images (imported or pulled,
 * owned by them): each step runs as the user, mapped to uid 0 (or USER's
 * id) alone, so what it writes is the user's. Apt steps need root: dpkg
 * gives files to other owners (and apt drops to _apt), which one mapped id
 * cannot be. */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "base/sha256.h"
#include "image/build.h"
#include "image/build_steps.h"
#include "image/image_digest.h"
#include "image/image_owners.h"
#include "image/image_strip.h"
#include "image/images.h"
#include "plan/idmap.h"
#include "base/syscalls.h"

/* Layers a build may stack: their names must fit overlayfs's options (a
 * page). */
#define MAX_LAYERS 100

static void progress(builder *b, size_t i, const char *what, bool cached)
{
	unsigned n = (unsigned) b->spec->n_steps;
	if (b->o->log_fd >= 0)
		dprintf(b->o->log_fd, "nsbox: [%zu/%u] %s%s\n", i + 1, n, what, cached ? " (cached)" : "");
	if (b->o->on_step)
		b->o->on_step(b->o->step_userdata, (unsigned) i + 1, n, what, cached);
}

/* ---- where things are -------------------------------------------------------- */

/* Where a store's build layers are kept: beside it (/var/lib/nsbox/layers
 * for root's /var/lib/nsbox/images), not in it, where only images live. */
static void layers_dir(const char *store, char *out, size_t len)
{
	const char *slash = strrchr(store, '/');
	snprintf(out, len, "%.*s/layers", slash ? (int) (slash - store) : 0, store);
}

/* overlayfs's option syntax gives ',', ':' and '\' meanings. */
static bool overlay_safe(const char *path)
{
	return !strpbrk(path, ",:\\");
}

static int find_base(builder *b)
{
	const char *from = b->spec->from;
	_cleanup_free_ char *sys = image_store(true);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s/rootfs", b->store, from);
	if (access(path, F_OK) < 0 && sys && strcmp(sys, b->store)) {
		snprintf(path, sizeof(path), "%s/%s/rootfs", sys, from);
		if (access(path, F_OK) == 0)
			return nsbox_err_hint(b->err, EPERM, "image",
			                      "copy it into your store first: nsbox image import NAME /var/lib/nsbox/images/BASE/rootfs",
			                      "build image '%s' from '%s': that is root's image, whose files your steps could "
			                      "not own", b->name, from);
		snprintf(path, sizeof(path), "%s/%s/rootfs", b->store, from);
	}
	if (!realpath(path, b->base))
		return nsbox_err_hint(b->err, errno, "image", "build it, pull it or import it first",
		                      "build image '%s' from '%s' ('%s')", b->name, from, path);
	b->base_fd = open(b->base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (b->base_fd < 0)
		return nsbox_err(b->err, errno, "image", "open the base image '%s'", b->base);
	if (!image_digest_beside(b->base_fd, b->base_digest))
		return nsbox_err_hint(b->err, ENOENT, "image", "give it one: build it again (root) or import it again",
		                      "build image '%s' from '%s': the base has no digest (stored by an older nsbox)",
		                      b->name, from);
	struct stat st;
	if (fstat(b->base_fd, &st) < 0)
		return nsbox_err(b->err, errno, "image", "open the base image '%s'", b->base);
	if (!b->rootless && !image_owners_shifted(&st, b->host_uid, b->host_gid))
		return nsbox_err_hint(b->err, EINVAL, "image", "run 'nsbox image build BASE' once to shift them",
		                      "build image '%s' from '%s': its owners are not shifted into root's sandbox range",
		                      b->name, from);
	if (b->rootless && st.st_uid != geteuid())
		return nsbox_err(b->err, EPERM, "image", "build image '%s' from '%s': it is not yours", b->name, from);
	/* The layers' directory is the store's sibling (layers_dir). */
	const char *store_base = strrchr(b->store, '/');
	snprintf(b->base_rel, sizeof(b->base_rel), "..%s/%s/rootfs", store_base ? store_base : "/images", from);
	return 0;
}

static int open_context(builder *b)
{
	const char *dir = b->spec->context ? b->spec->context : ".";
	b->context_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return b->context_fd < 0 ? nsbox_err(b->err, errno, "image", "open the build context '%s'", dir) : 0;
}

/* A COPY source beneath the context: never outside it, by '..' or a
 * symlink (a Dockerfile is not to read the builder's other files). A
 * leading '/' is the context's root, as in Docker. O_PATH fd, or -errno
 * with the error set. */
int build_copy_source(builder *b, const build_step *st, const char *src)
{
	const char *rel = src + strspn(src, "/");
	int fd = open_beneath(b->context_fd, *rel ? rel : ".", O_PATH, BENEATH_NO_XDEV | BENEATH_SYMLINKS_INSIDE);
	if (fd >= 0)
		return fd;
	int e = -fd;
	if (e == EXDEV || e == ELOOP)
		return nsbox_err_invalid(b->err, "image", "%s: COPY '%s': refused, it leads outside the build context",
		                         st->origin, src);
	return nsbox_err(b->err, e, "image", "%s: COPY '%s' (from the build context)", st->origin, src);
}

/* ---- the digest of a step's inputs -------------------------------------------- */

static void hash_str(sha256_ctx *c, const char *s)
{
	sha256_update(c, s ? s : "", s ? strlen(s) + 1 : 1);
}

/* What COPY copies: a tree's digest, or a file's mode and content. */
static int hash_source(builder *b, sha256_ctx *c, int path_fd, const char *src)
{
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", path_fd);
	struct stat st;
	if (fstat(path_fd, &st) < 0)
		return nsbox_err(b->err, errno, "image", "COPY '%s'", src);
	_cleanup_close_ int fd = open(proc, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return nsbox_err(b->err, errno, "image", "COPY '%s': read it", src);
	if (S_ISDIR(st.st_mode)) {
		char d[IMAGE_DIGEST_LEN];
		int r = image_tree_digest(fd, d, b->err);
		if (r < 0)
			return nsbox_err_prefix(b->err, r, "COPY '%s'", src);
		hash_str(c, d);
		return 0;
	}
	if (!S_ISREG(st.st_mode))
		return nsbox_err_invalid(b->err, "image", "COPY '%s': not a file nor a directory", src);
	char m[32], io[65536];
	snprintf(m, sizeof(m), "file %o", (unsigned) (st.st_mode & 07777));
	hash_str(c, m);
	ssize_t n;
	while ((n = read(fd, io, sizeof(io))) > 0)
		sha256_update(c, io, (size_t) n);
	return n < 0 ? nsbox_err(b->err, errno, "image", "COPY '%s': read it", src) : 0;
}

/* A path as WORKDIR `cur` (NULL: /) sees it; malloc'ed. */
char *build_join_workdir(const char *cur, const char *path)
{
	char *out = NULL;
	if (path[0] == '/')
		return strdup(path);
	if (!cur || !strcmp(cur, "/"))
		return asprintf(&out, "/%s", path) < 0 ? NULL : out;
	return asprintf(&out, "%s/%s", cur, path) < 0 ? NULL : out;
}

/* Every step's key, chained from the base's digest. */
static int compute_keys(builder *b)
{
	char prev[65];
	sha256_ctx c;
	sha256_init(&c);
	hash_str(&c, "nsbox image layer v1");
	hash_str(&c, b->base_digest);
	sha256_final_hex(&c, prev);
	size_t layers = 0;
	strv env = { 0 };
	_cleanup_free_ char *workdir = NULL;
	_cleanup_free_ char *user = NULL;
	int r = 0;
	for (size_t i = 0; r == 0 && i < b->spec->n_steps; i++) {
		const build_step *st = &b->spec->steps[i];
		sha256_init(&c);
		hash_str(&c, prev);
		hash_str(&c, build_kind_names[st->kind]);
		for (size_t k = 0; k < st->args.n; k++)
			hash_str(&c, st->args.v[k]);
		for (size_t k = 0; k < env.n; k++)
			hash_str(&c, env.v[k]);
		hash_str(&c, "|");
		hash_str(&c, workdir);
		hash_str(&c, user);
		for (size_t k = 0; k < b->spec->allow.n; k++)
			hash_str(&c, b->spec->allow.v[k]);
		if (st->kind == BK_COPY)
			for (size_t k = 0; r == 0 && k + 1 < st->args.n; k++) {
				int fd = build_copy_source(b, st, st->args.v[k]);
				r = fd < 0 ? fd : hash_source(b, &c, fd, st->args.v[k]);
				if (fd >= 0)
					close(fd);
			}
		sha256_final_hex(&c, prev);
		snprintf(b->key[i], KEY_HEX + 1, "%.*s", KEY_HEX, prev);
		b->makes_layer[i] = st->kind != BK_ENV && st->kind != BK_USER;
		layers += b->makes_layer[i];
		/* The state the following steps see. */
		for (size_t k = 0; r == 0 && st->kind == BK_ENV && k < st->args.n; k++)
			r = strv_set_env_take(&env, strdup(st->args.v[k])) < 0 ? nsbox_err(b->err, ENOMEM, "image", "build") : 0;
		if (st->kind == BK_USER) {
			free(user);
			user = strdup(st->args.v[0]);
		}
		if (st->kind == BK_WORKDIR) {
			char *w = build_join_workdir(workdir, st->args.v[0]);
			free(workdir);
			workdir = w;
		}
	}
	strv_clear(&env);
	if (r == 0 && layers > MAX_LAYERS)
		r = nsbox_err_invalid(b->err, "image", "build image '%s': %zu steps make layers, at most %d may",
		                      b->name, layers, MAX_LAYERS);
	return r;
}

/* ---- running the steps ------------------------------------------------------- */

static int open_layer(builder *b, size_t i)
{
	char rel[KEY_HEX + 8];
	snprintf(rel, sizeof(rel), "%s/upper", b->key[i]);
	int fd = openat(b->layers_fd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return nsbox_err(b->err, errno, "image", "open the layer '%s/%s'", b->layers, rel);
	b->upper_fds[b->n_upper++] = fd;
	return 0;
}

/* The state ENV, WORKDIR and USER leave for the steps after them. */
static int apply_state(builder *b, const build_step *st)
{
	for (size_t k = 0; st->kind == BK_ENV && k < st->args.n; k++)
		if (strv_set_env_take(&b->env, strdup(st->args.v[k])) < 0)
			return -ENOMEM;
	char **slot = st->kind == BK_USER ? &b->user : st->kind == BK_WORKDIR ? &b->workdir : NULL;
	if (slot) {
		char *v = st->kind == BK_USER ? strdup(st->args.v[0]) : build_join_workdir(b->workdir, st->args.v[0]);
		if (!v)
			return -ENOMEM;
		free(*slot);
		*slot = v;
	}
	return 0;
}

static int run_steps(builder *b)
{
	/* A step that makes no layer (ENV, USER) counts as cached while every
	 * layer before it was. */
	bool all_cached = !b->o->rebuild;
	for (size_t i = 0; i < b->spec->n_steps; i++) {
		const build_step *st = &b->spec->steps[i];
		_cleanup_free_ char *text = build_step_text(st);
		if (!text)
			return nsbox_err(b->err, ENOMEM, "image", "build");
		/* A rootless step runs as one mapped id: USER's, or root. */
		int r = 0;
		if (b->makes_layer[i]) {
			struct stat lst;
			bool cached = !b->o->rebuild && fstatat(b->layers_fd, b->key[i], &lst, AT_SYMLINK_NOFOLLOW) == 0;
			all_cached &= cached;
			progress(b, i, text, cached);
			r = cached ? 0 : build_run_step(b, i, text);
			r = r ?: open_layer(b, i);
		} else {
			progress(b, i, text, all_cached);
		}
		if (r < 0)
			return r;
		if (apply_state(b, st) < 0)
			return nsbox_err(b->err, ENOMEM, "image", "build");
	}
	return 0;
}

/* ---- the image ------------------------------------------------------------- */

/* Was image `name` made from exactly these inputs? */
static bool image_current(builder *b, const char *key)
{
	char path[PATH_MAX], want[KEY_HEX + 20];
	snprintf(path, sizeof(path), "%s/%s/meta.json", b->store, b->name);
	snprintf(want, sizeof(want), "\"build_key\":\"%s\"", key);
	char text[65536];
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;
	if (n <= 0)
		return false;
	text[n] = '\0';
	snprintf(path, sizeof(path), "%s/%s/rootfs", b->store, b->name);
	return strstr(text, want) && access(path, F_OK) == 0;
}

static int make_image(builder *b, const char *key)
{
	char tmp[PATH_MAX], root[PATH_MAX + 8];
	snprintf(tmp, sizeof(tmp), "%s/.build-%s-%d", b->store, b->name, (int) getpid());
	snprintf(root, sizeof(root), "%s/rootfs", tmp);
	(void) remove_tree(tmp);
	if (mkdir(tmp, 0700) < 0)
		return nsbox_err(b->err, errno, "image", "create the build directory '%s'", tmp);
	_cleanup_close_ int lock = image_tmp_lock(tmp);
	int r = lock < 0 ? nsbox_err(b->err, -lock, "image", "lock '%s'", tmp) : 0;
	if (r == 0 && mkdir(root, 0755) < 0)
		r = nsbox_err(b->err, errno, "image", "create '%s'", root);
	_cleanup_close_ int rfd = r == 0 ? open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
	if (r == 0 && rfd < 0)
		r = nsbox_err(b->err, errno, "image", "open '%s'", root);
	r = r ?: layers_flatten(b->base_fd, b->upper_fds, b->n_upper, rfd, !b->rootless, b->err);
	image_stripped stripped = { 0 };
	int sr = r == 0 ? strip_tree(rfd, &stripped) : 0;
	if (sr < 0)
		r = nsbox_err(b->err, -sr, "image", "strip set-id bits and device nodes from '%s'", root);
	/* Root's store: files a step gave ids beyond the range (none can) or
	 * that came shifted stay in it. */
	if (r == 0 && !b->rootless)
		r = image_shift_owners(rfd, false, root, b->err);
	if (r == 0) {
		char source[PATH_MAX + 128], extra[KEY_HEX + 32];
		snprintf(source, sizeof(source), "build from %s (%.19s) in %zu step%s", b->spec->from, b->base_digest,
		         b->spec->n_steps, b->spec->n_steps == 1 ? "" : "s");
		snprintf(extra, sizeof(extra), "\"build_key\":\"%s\",", key);
		r = image_write_meta_extra(tmp, b->name, source, &stripped, extra, b->err);
	}
	if (r == 0 && chmod(tmp, 0755) < 0)
		r = nsbox_err(b->err, errno, "image", "chmod '%s'", tmp);
	r = r ?: image_install(b->store, b->name, tmp, true, b->err);
	if (r < 0)
		(void) remove_tree(tmp);
	return r;
}

static void builder_free(builder *b)
{
	for (size_t i = 0; i < b->n_upper; i++)
		close(b->upper_fds[i]);
	free(b->upper_fds);
	free(b->key);
	free(b->makes_layer);
	free(b->store);
	strv_clear(&b->env);
	free(b->workdir);
	free(b->user);
	if (b->base_fd >= 0)
		close(b->base_fd);
	if (b->layers_fd >= 0)
		close(b->layers_fd);
	if (b->context_fd >= 0)
		close(b->context_fd);
}

static int prepare(builder *b)
{
	const nsbox_image_spec *s = b->spec;
	size_t n = s->n_steps ? s->n_steps : 1;
	b->key = calloc(n, sizeof(*b->key));
	b->makes_layer = calloc(n, sizeof(*b->makes_layer));
	b->upper_fds = calloc(n, sizeof(*b->upper_fds));
	if (!b->key || !b->makes_layer || !b->upper_fds)
		return nsbox_err(b->err, ENOMEM, "image", "build");
	for (size_t i = 0; b->rootless && i < s->n_steps; i++)
		if (s->steps[i].kind == BK_APT)
			return nsbox_err_hint(b->err, EPERM, "image",
			                      "build it as root ('sudo nsbox image build'), or start from an image that has "
			                      "the packages",
			                      "%s: apt step: needs root: dpkg gives files to other owners and apt drops to "
			                      "its _apt user, and a user without root maps one id into its sandboxes",
			                      s->steps[i].origin);
	if (!b->rootless) {
		root_ids ri;
		int r = idmap_root_ids("/etc/subuid", "/etc/subgid", &ri, b->err);
		if (r < 0)
			return r;
		b->host_uid = (uid_t) ri.uid.start;
		b->host_gid = (gid_t) ri.gid.start;
	}
	_cleanup_free_ char *store = image_store(false);
	if (!store)
		return nsbox_err(b->err, ENOENT, "image", "build: no image store (HOME is not set)");
	int r = mkdir_p(store, 0755);
	char canon[PATH_MAX];
	if (r < 0 || !realpath(store, canon))
		return nsbox_err(b->err, r < 0 ? -r : errno, "image", "use the image store '%s'", store);
	if (!overlay_safe(canon))
		return nsbox_err_invalid(b->err, "image", "build: the image store '%s' has a ',', ':' or '\\' in its "
		                         "path, which overlayfs cannot take", canon);
	b->store = strdup(canon);
	if (!b->store)
		return nsbox_err(b->err, ENOMEM, "image", "build");
	image_reap(b->store);
	layers_dir(b->store, b->layers, sizeof(b->layers));
	/* Searchable, not listable: the sandboxes' root must reach its
	 * layers; what they are is nobody else's business. */
	if (mkdir(b->layers, 0711) < 0 && errno != EEXIST)
		return nsbox_err(b->err, errno, "image", "create '%s'", b->layers);
	b->layers_fd = open(b->layers, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (b->layers_fd < 0)
		return nsbox_err(b->err, errno, "image", "open '%s'", b->layers);
	/* Shared while a build uses the layers; image prune takes it whole. */
	if (flock(b->layers_fd, LOCK_SH) < 0)
		return nsbox_err(b->err, errno, "image", "lock '%s'", b->layers);
	image_reap(b->layers);
	return find_base(b) ?: open_context(b);
}

int build_from_spec(const nsbox_image_build_options *o, nsbox_error **err)
{
	const char *name = o->name ? o->name : "default";
	if (!image_name_valid(name))
		return nsbox_err_invalid(err, "image", "build image: '%s' is not an image name (letters, digits, '.', "
		                         "'_', '-')", name);
	if (!o->spec->from)
		return nsbox_err_invalid(err, "image", "build image '%s': no image to build from (--from, FROM)", name);
	if (!strcmp(name, o->spec->from))
		return nsbox_err_invalid(err, "image", "build image '%s' from itself: give the new image another name", name);
	builder b = { .o = o, .spec = o->spec, .name = name, .rootless = geteuid() != 0, .base_fd = -1,
	              .layers_fd = -1, .context_fd = -1, .err = err };
	int r = prepare(&b);
	r = r ?: compute_keys(&b);
	char final[65] = "";
	if (r == 0) {
		/* The image's own key: its layers' and its steps', whether or
		 * not they made a layer. */
		sha256_ctx c;
		sha256_init(&c);
		hash_str(&c, b.base_digest);
		for (size_t i = 0; i < o->spec->n_steps; i++)
			hash_str(&c, b.key[i]);
		sha256_final_hex(&c, final);
		final[KEY_HEX] = '\0';
	}
	if (r == 0 && !o->rebuild && image_current(&b, final)) {
		builder_free(&b);
		return 1;
	}
	r = r ?: run_steps(&b);
	r = r ?: make_image(&b, final);
	builder_free(&b);
	return r;
}

int nsbox_image_build(const nsbox_image_build_options *opts, nsbox_error **err)
{
	if (!opts || !opts->version || opts->version > NSBOX_IMAGE_BUILD_OPTIONS_VERSION)
		return nsbox_err(err, EINVAL, "image", "build image: invalid options");
	/* A version 1 caller's struct ends at log_fd. */
	nsbox_image_build_options o = { 0 };
	memcpy(&o, opts, opts->version == 1 ? offsetof(nsbox_image_build_options, recipe) : sizeof(o));
	if (o.spec && (o.recipe || o.mirror || o.suite))
		return nsbox_err_invalid(err, "image", "build image: a recipe, --mirror and --suite are for debootstrap "
		                         "builds, not builds from an image");
	return o.spec ? build_from_spec(&o, err) : image_build_recipe(&o, err);
}

int nsbox_image_prune(uint64_t *freed, nsbox_error **err)
{
	if (freed)
		*freed = 0;
	_cleanup_free_ char *store = image_store(false);
	if (!store)
		return nsbox_err(err, ENOENT, "image", "prune: no image store (HOME is not set)");
	char layers[PATH_MAX];
	layers_dir(store, layers, sizeof(layers));
	_cleanup_close_ int fd = open(layers, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : nsbox_err(err, errno, "image", "prune: open '%s'", layers);
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		return nsbox_err_hint(err, errno == EWOULDBLOCK ? EBUSY : errno, "image", "try again when it is done",
		                      "prune '%s': a build is using the layers", layers);
	uint64_t prune_bytes = tree_usage(fd);
	int dup_fd = dup(fd);
	DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		return nsbox_err(err, errno, "image", "prune: read '%s'", layers);
	}
	struct dirent *e;
	int r = 0;
	while (r == 0 && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			int rr = remove_beneath(fd, e->d_name);
			if (rr < 0)
				r = nsbox_err(err, -rr, "image", "prune: remove '%s/%s'", layers, e->d_name);
		}
	closedir(d);
	if (r == 0 && freed)
		*freed = prune_bytes;
	return r;
}
