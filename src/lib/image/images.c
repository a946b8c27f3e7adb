/* The image store: <store>/<name>/{rootfs/, meta.json, packages.txt}.
 * Root's store is /var/lib/nsbox/images; other users have their own
 * ($XDG_DATA_HOME/nsbox/images) and also see root's, read-only. Images
 * appear atomically: they are built in a temporary directory of the store
 * and renamed into place, so a failed build leaves nothing behind. */
#define _XOPEN_SOURCE 700
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/buf.h"
#include "base/cleanup.h"
#include "base/error.h"
#include "plan/idmap.h"
#include "image/image_owners.h"
#include "image/image_digest.h"
#include "image/images.h"
#include "base/json.h"

const char *recipe_builtin(const char *name);

char *image_store(bool system)
{
	char *s = NULL;
	if (system || geteuid() == 0)
		return strdup(NSBOX_SYSTEM_STORE);
	const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
	if (xdg && *xdg == '/')
		(void) !asprintf(&s, "%s/nsbox/images", xdg);
	else if (home && *home == '/')
		(void) !asprintf(&s, "%s/.local/share/nsbox/images", home);
	return s;
}

bool image_name_valid(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	if (n == 0 || n > 128 || !isalnum((unsigned char) s[0]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(isalnum((unsigned char) s[i]) || strchr("._-", s[i])))
			return false;
	return true;
}

/* The host's Debian/Ubuntu archive, release and components. */
static void host_archive(char *mirror, size_t ml, char *suite, size_t sl, char *comps, size_t cl)
{
	snprintf(mirror, ml, "http://deb.debian.org/debian");
	snprintf(suite, sl, "bookworm");
	snprintf(comps, cl, "main");
	char line[1024], id[64] = "";
	FILE *f = fopen("/etc/os-release", "re");
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strncmp(line, "VERSION_CODENAME=", 17) && line[17])
			snprintf(suite, sl, "%.100s", line + 17);
		else if (!strncmp(line, "ID=", 3))
			snprintf(id, sizeof(id), "%.60s", line + 3);
	}
	if (f)
		fclose(f);
	if (!strcmp(id, "ubuntu")) {
		/* python3-pip and npm live in universe there */
		snprintf(mirror, ml, "http://archive.ubuntu.com/ubuntu");
		snprintf(comps, cl, "main,universe");
	}
	/* The first http(s) archive apt uses for that release. */
	static const char *const lists[] = { "/etc/apt/sources.list.d/debian.sources",
	                                     "/etc/apt/sources.list.d/ubuntu.sources", "/etc/apt/sources.list" };
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		f = fopen(lists[i], "re");
		char uri[512] = "";
		while (f && fgets(line, sizeof(line), f)) {
			line[strcspn(line, "\n")] = '\0';
			char a[512], b[128];
			if (!strncmp(line, "URIs:", 5) && sscanf(line + 5, " %511s", a) == 1)
				snprintf(uri, sizeof(uri), "%s", a);
			else if (!strncmp(line, "Suites:", 7) && *uri && strstr(line, suite) && !strstr(uri, "security")) {
				snprintf(mirror, ml, "%s", uri);
				fclose(f);
				return;
			} else if (sscanf(line, "deb %511s %127s", a, b) == 2 && !strcmp(b, suite) &&
			           !strncmp(a, "http", 4)) {
				snprintf(mirror, ml, "%s", a);
				fclose(f);
				return;
			}
		}
		if (f)
			fclose(f);
	}
}

static int run_recipe(const char *dest, const char *mirror, const char *suite, const char *comps,
                      const char *recipe, int log_fd, nsbox_error **err)
{
	const char *script = recipe_builtin("debootstrap");
	if (!script)
		return nsbox_err(err, ENOENT, "image", "find the image recipe");
	pid_t pid = fork();
	if (pid < 0)
		return nsbox_err(err, errno, "image", "start the image recipe");
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		int out = log_fd >= 0 ? log_fd : null;
		(void) dup2(null, 0);
		(void) dup2(out, 1);
		(void) dup2(out, 2);
		execl("/bin/sh", "sh", "-c", script, "nsbox-image-recipe", dest, mirror, suite, comps, recipe, (char *) NULL);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return nsbox_err(err, errno, "image", "wait for the image recipe");
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 3)
		return nsbox_err_hint(err, ENOENT, "image", "apt-get install debootstrap",
		                      "build the image: debootstrap is not installed");
	return nsbox_err_hint(err, EIO, "image", "the recipe's output says what went wrong",
	                      "build the image from %s (%s): the recipe failed with status %d", mirror, suite,
	                      WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

/* Every payload runs with no_new_privs: setuid/setgid programs (passwd,
 * chsh, mount...) and file capabilities do nothing inside, but would be a
 * root shell for every local user in the traversable store. Device nodes
 * (debootstrap's dev/) neither: the sandbox makes its own /dev. */
static int strip_built(const char *dest, bool published, image_stripped *s, nsbox_error **err)
{
	_cleanup_close_ int fd = open(dest, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int r = fd < 0 ? -errno : strip_tree(fd, s);
	if (r < 0)
		return nsbox_err(err, -r, "image", "strip set-id bits and device nodes from '%s'", dest);
	/* Only root builds: its store is shifted (image_owners.c). */
	return image_shift_owners(fd, published, dest, err);
}

int image_write_meta(const char *dir, const char *name, const char *source, const image_stripped *s,
                     nsbox_error **err)
{
	return image_write_meta_extra(dir, name, source, s, NULL, err);
}

int image_write_meta_extra(const char *dir, const char *name, const char *source, const image_stripped *s,
                           const char *extra, nsbox_error **err)
{
	char path[PATH_MAX], stamp[64];
	time_t now = time(NULL);
	struct tm tm;
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
	snprintf(path, sizeof(path), "%.4000s/rootfs", dir);
	char digest[IMAGE_DIGEST_LEN];
	_cleanup_close_ int root = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (root < 0)
		return nsbox_err(err, errno, "image", "open '%s'", path);
	uint64_t du_total = tree_usage(root);
	int r = image_tree_digest(root, digest, err);
	if (r < 0)
		return r;
	buf b = { 0 };
	buf_puts(&b, "{\"name\":");
	json_cstr(&b, name);
	/* v2: group/other write bits are cleared too. The source, a path of
	 * any length, comes last. */
	buf_printf(&b, ",\"created\":\"%s\",\"size_bytes\":%llu,", stamp, (unsigned long long) du_total);
	buf_printf(&b, "\"stripped\":{\"setid\":%lu,\"capabilities\":%lu,\"devices\":%lu,\"v\":2},",
	           s->setid, s->caps, s->devices);
	buf_printf(&b, "\"digest\":\"%s\",%s\"source\":", digest, extra ? extra : "");
	json_cstr(&b, source);
	buf_puts(&b, "}\n");
	_cleanup_free_ char *text = buf_steal(&b);
	snprintf(path, sizeof(path), "%.4000s/meta.json", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (!text || fd < 0 || write(fd, text, strlen(text)) != (ssize_t) strlen(text)) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return nsbox_err(err, e ? e : ENOMEM, "image", "write '%s'", path);
	}
	close(fd);
	return 0;
}

/* Put the finished build at <store>/<name>, replacing an older one. */
int image_install(const char *store, const char *name, const char *tmp, bool replace, nsbox_error **err)
{
	char final[PATH_MAX], old[PATH_MAX];
	snprintf(final, sizeof(final), "%s/%s", store, name);
	/* An import never replaces: a concurrent one of the same name that
	 * finished first keeps its image, and this one fails. */
	if (!replace)
		return renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_NOREPLACE) < 0
			? nsbox_err_hint(err, errno, "image", "remove it first with 'nsbox image rm NAME'",
			                 "install the image at '%s'", final)
			: 0;
	snprintf(old, sizeof(old), "%s/.old-%s-%d", store, name, (int) getpid());
	bool had = access(final, F_OK) == 0;
	if (had && rename(final, old) < 0)
		return nsbox_err(err, errno, "image", "move the previous image '%s' aside", final);
	if (rename(tmp, final) < 0) {
		int e = errno;
		if (had)
			(void) rename(old, final);
		return nsbox_err(err, e, "image", "install the image at '%s'", final);
	}
	if (had)
		(void) remove_tree(old);
	return 0;
}

static int strip_old(const char *store, const char *name, nsbox_error **err);

static const char *recipe_contents(const char *recipe)
{
	if (!strcmp(recipe, "minimal"))
		return "python3, nodejs, npm, git";
	if (!strcmp(recipe, "default"))
		return "python3 with numpy, pandas, requests, httpx, matplotlib; nodejs, npm, git, curl";
	if (!strcmp(recipe, "dev"))
		return "the default recipe's and build-essential, autoconf, pkg-config";
	return NULL;
}

static int read_meta(const char *dir, nsbox_image_info *info);

/* Whether image NAME was built from a recipe, by debootstrap, but not from
 * this recipe as it is now (an older nsbox's recipe had fewer packages, or
 * another recipe): then building it again is what was asked. An image
 * imported or built from a spec under that name is the user's: kept. */
static bool recipe_changed(const char *store, const char *name, const char *recipe, const char *contents)
{
	char dir[PATH_MAX], want[512];
	snprintf(dir, sizeof(dir), "%.2000s/%.255s", store, name);
	snprintf(want, sizeof(want), "(recipe %s: %s)", recipe, contents);
	nsbox_image_info info = { 0 };
	bool changed = read_meta(dir, &info) == 0 && info.source && !strncmp(info.source, "debootstrap ", 12) &&
	               !strstr(info.source, want);
	free(info.created), free(info.source), free(info.stripped), free(info.digest);
	return changed;
}

int image_build_recipe(const nsbox_image_build_options *o, nsbox_error **err)
{
	const char *name = o->name ? o->name : "default";
	const char *recipe = o->recipe ? o->recipe : "default";
	const char *contents = recipe_contents(recipe);
	if (!contents)
		return nsbox_err_invalid(err, "image", "build image: no recipe '%s' (minimal, default, dev)", recipe);
	if (!image_name_valid(name))
		return nsbox_err_invalid(err, "image", "build image: '%s' is not an image name (letters, digits, '.', '_', '-')", name);
	if (geteuid() != 0)
		return nsbox_err_hint(err, EPERM, "image",
		                      "run it as root ('sudo nsbox image build'): the image lands in /var/lib/nsbox/images, which every user's nsbox also reads",
		                      "build image '%s': debootstrap needs root (it creates device nodes and runs the new system's package manager)", name);
	_cleanup_free_ char *store = image_store(true);
	char final[PATH_MAX], tmp[PATH_MAX], dest[PATH_MAX], source[1024];
	snprintf(final, sizeof(final), "%s/%s/rootfs", store, name);
	if (!o->rebuild && access(final, F_OK) == 0 && !recipe_changed(store, name, recipe, contents)) {
		/* Already built: reuse it, stripped if an older nsbox did not. */
		int r = strip_old(store, name, err);
		return r < 0 ? r : 1;
	}
	int r = mkdir_p(store, 0755);
	if (r < 0)
		return nsbox_err(err, -r, "image", "create the image store '%s'", store);
	(void) chmod(store, 0755);
	image_reap(store);
	char mirror[512], suite[128], comps[64];
	host_archive(mirror, sizeof(mirror), suite, sizeof(suite), comps, sizeof(comps));
	if (o->mirror)
		snprintf(mirror, sizeof(mirror), "%s", o->mirror);
	if (o->suite)
		snprintf(suite, sizeof(suite), "%s", o->suite);
	snprintf(tmp, sizeof(tmp), "%s/.build-%s-%d", store, name, (int) getpid());
	snprintf(dest, sizeof(dest), "%.4000s/rootfs", tmp);
	snprintf(source, sizeof(source), "debootstrap %s from %s (recipe %s: %s)", suite, mirror, recipe, contents);
	(void) remove_tree(tmp);
	/* Private while debootstrap fills it: its setuid programs and device
	 * nodes exist there until strip_tree below. */
	if (mkdir(tmp, 0700) < 0)
		return nsbox_err(err, errno, "image", "create the build directory '%s'", tmp);
	/* Ours while debootstrap runs: image_reap leaves a locked one alone. */
	_cleanup_close_ int lock = image_tmp_lock(tmp);
	if (lock < 0) {
		(void) remove_tree(tmp);
		return nsbox_err(err, -lock, "image", "lock the build directory '%s'", tmp);
	}
	image_stripped stripped = { 0 };
	r = run_recipe(dest, mirror, suite, comps, recipe, o->log_fd, err);
	r = r ?: strip_built(dest, false, &stripped, err);
	r = r ?: image_write_meta(tmp, name, source, &stripped, err);
	if (r == 0 && chmod(tmp, 0755) < 0)
		r = nsbox_err(err, errno, "image", "chmod '%s'", tmp);
	r = r ?: image_install(store, name, tmp, true, err);
	if (r < 0)
		(void) remove_tree(tmp);
	return r;
}

static int read_meta(const char *dir, nsbox_image_info *info)
{
	/* A source path escaped in JSON may take six bytes a character. */
	enum { META_MAX = 65536 };
	char path[PATH_MAX];
	_cleanup_free_ char *text = malloc(META_MAX);
	if (!text)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%.4000s/meta.json", dir);
	/* Never blocks nor follows: only our own regular file is read. */
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	ssize_t n = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, text, META_MAX - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -ENOENT;
	text[n] = '\0';
	/* Our own file, read as any JSON is (jansson): escapes decoded. */
	json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(j)) {
		json_decref(j);
		return -EINVAL;
	}
	const char *v;
	if ((v = json_string_value(json_object_get(j, "created"))))
		info->created = strdup(v);
	info->size_bytes = (uint64_t) json_integer_value(json_object_get(j, "size_bytes"));
	char digest[IMAGE_DIGEST_LEN];
	if (image_meta_digest_of(text, digest))
		info->digest = strdup(digest);
	if ((v = json_string_value(json_object_get(j, "source"))))
		info->source = strdup(v);
	json_t *strip = json_object_get(j, "stripped");
	json_int_t setid = json_integer_value(json_object_get(strip, "setid")),
	           caps = json_integer_value(json_object_get(strip, "capabilities")),
	           devices = json_integer_value(json_object_get(strip, "devices"));
	if (setid + caps + devices > 0 &&
	    asprintf(&info->stripped, "%lld setuid/setgid bits, %lld file capabilities, %lld device nodes",
	             (long long) setid, (long long) caps, (long long) devices) < 0)
		info->stripped = NULL;
	if (!json_is_object(strip) || json_integer_value(json_object_get(strip, "v")) != 2)
		info->stripped = strdup("not done: made by an older nsbox that kept setuid files and devices; "
		                        "rebuild it (root's: nsbox image build NAME) or import it again");
	json_decref(j);
	return 0;
}

/* An image built by an nsbox that did not strip yet (no record in its
 * meta.json): strip it in place, now that nothing else will. 0 or -errno. */
/* Insert the digest of the tree under root_fd into <dir>/meta.json, which
 * has none (written by an older nsbox); replaced atomically. */
static int meta_add_digest(const char *dir, int root_fd, nsbox_error **err)
{
	char digest[IMAGE_DIGEST_LEN], path[PATH_MAX], tmp[PATH_MAX];
	int r = image_tree_digest(root_fd, digest, err);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "%.4000s/meta.json", dir);
	snprintf(tmp, sizeof(tmp), "%.4000s/.meta.json.tmp", dir);
	_cleanup_free_ char *text = malloc(65536);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	ssize_t n = text && fd >= 0 ? read(fd, text, 65535) : -1;
	if (n <= 0)
		return nsbox_err(err, n < 0 ? errno : EINVAL, "image", "read '%s'", path);
	text[n] = '\0';
	json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(j) || json_object_set_new(j, "digest", json_string(digest)) < 0) {
		json_decref(j);
		return nsbox_err(err, EINVAL, "image", "'%s' is not an image's meta.json", path);
	}
	_cleanup_free_ char *out = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(j);
	_cleanup_close_ int w = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (!out || w < 0 || write(w, out, strlen(out)) != (ssize_t) strlen(out) || rename(tmp, path) < 0) {
		int e = errno;
		(void) unlink(tmp);
		return nsbox_err(err, e ? e : ENOMEM, "image", "write '%s'", path);
	}
	return 0;
}

static int strip_old(const char *store, const char *name, nsbox_error **err)
{
	char dir[PATH_MAX], rootfs[PATH_MAX];
	snprintf(dir, sizeof(dir), "%.2000s/%.255s", store, name);
	snprintf(rootfs, sizeof(rootfs), "%.4000s/rootfs", dir);
	nsbox_image_info info = { 0 };
	int have_meta = read_meta(dir, &info);
	if (have_meta < 0 || !info.stripped || strncmp(info.stripped, "not done", 8)) {
		bool digested = info.digest != NULL;
		free(info.created), free(info.source), free(info.stripped), free(info.digest);
		/* Stripped, but perhaps stored with the image's own owners (an
		 * nsbox before the shift): shift it now. The root directory is
		 * shifted last, so an interrupted pass is seen and finished. */
		_cleanup_close_ int fd = open(rootfs, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0)
			return nsbox_err(err, errno, "image", "open '%s'", rootfs);
		int r = st.st_uid < NSBOX_RANGE_COUNT ? image_shift_owners(fd, true, rootfs, err) : 0;
		/* Stored before images had digests: give it one. */
		return r < 0 || have_meta < 0 || digested ? r : meta_add_digest(dir, fd, err);
	}
	image_stripped s = { 0 };
	int r = strip_built(rootfs, true, &s, err);
	r = r ?: image_write_meta(dir, name, info.source ? info.source : "unknown (an older nsbox)", &s, err);
	free(info.created), free(info.source), free(info.stripped), free(info.digest);
	return r;
}

/* Root's image stored with its own owners (an older nsbox: a host user
 * whose id the image uses owns those files), or shifted for a range that
 * has since changed: said where image ls looks. */
static void note_owners(nsbox_image_info *v, const char *note)
{
	char *text = NULL;
	if (asprintf(&text, "%s%s%s", v->stripped ? v->stripped : "", v->stripped ? "; " : "", note) < 0)
		return;
	free(v->stripped);
	v->stripped = text;
}

int nsbox_image_list(nsbox_image_info **out, size_t *count, nsbox_error **err)
{
	if (!out || !count)
		return nsbox_err(err, EINVAL, "image", "list images: missing argument");
	*out = NULL;
	*count = 0;
	_cleanup_free_ char *root_store = image_store(true);
	for (int pass = 0; pass < 2; pass++) {
		_cleanup_free_ char *store = image_store(pass == 1);
		_cleanup_free_ char *user_store = pass == 1 ? image_store(false) : NULL;
		if (!store || (pass == 1 && user_store && !strcmp(store, user_store)))
			continue;
		if (pass == 0)
			image_reap(store);   /* the caller's own store */
		DIR *d = opendir(store);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			char dir[PATH_MAX], rootfs[PATH_MAX];
			snprintf(dir, sizeof(dir), "%.3000s/%.255s", store, e->d_name);
			snprintf(rootfs, sizeof(rootfs), "%.4000s/rootfs", dir);
			if (e->d_name[0] == '.' || access(rootfs, F_OK) < 0)
				continue;
			bool seen = false;
			for (size_t i = 0; i < *count; i++)
				seen |= !strcmp((*out)[i].name, e->d_name);
			if (seen)
				continue;   /* a user's image hides root's of the same name */
			nsbox_image_info *v = realloc(*out, (*count + 1) * sizeof(*v));
			if (!v)
				break;
			*out = v;
			v[*count] = (nsbox_image_info){ .name = strdup(e->d_name), .path = strdup(rootfs) };
			(void) read_meta(dir, &v[*count]);
			struct stat st;
			root_ids ri;
			if (root_store && !strcmp(store, root_store) && stat(rootfs, &st) == 0) {
				if (st.st_uid < NSBOX_RANGE_COUNT)
					note_owners(&v[*count], "owners not shifted: host users with the image's ids own "
					                        "its files; run 'nsbox image build NAME' as root to shift them");
				else if (idmap_root_ids("/etc/subuid", "/etc/subgid", &ri, NULL) == 0 &&
				         !image_owners_shifted(&st, (uint32_t) ri.uid.start, (uint32_t) ri.gid.start))
					note_owners(&v[*count], "stored for another id range than root's sandboxes now use "
					                        "(its files read as nobody's): import or build it again");
			}
			(*count)++;
		}
		if (d)
			closedir(d);
	}
	return 0;
}

void nsbox_image_list_free(nsbox_image_info *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free(v[i].name);
		free(v[i].path);
		free(v[i].created);
		free(v[i].source);
		free(v[i].stripped);
		free(v[i].digest);
	}
	free(v);
}

int nsbox_image_remove(const char *name, nsbox_error **err)
{
	if (!image_name_valid(name))
		return nsbox_err_invalid(err, "image", "remove image: '%s' is not an image name", name ? name : "");
	_cleanup_free_ char *store = image_store(false);
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/%s", store ? store : "", name);
	struct stat st;
	if (!store || lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return nsbox_err(err, ENOENT, "image", "remove image '%s': no such image in '%s'", name,
		                 store ? store : "?");
	int r = remove_tree(dir);
	return r < 0 ? nsbox_err(err, -r, "image", "remove image '%s' ('%s')", name, dir) : 0;
}
