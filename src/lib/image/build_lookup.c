/* What a build step needs to know of the image below it, read from the
 * layers (top first) and the base without mounting them: a user's and a
 * group's ids (USER), and the package archives apt uses (an apt step may
 * reach those hosts). A layer's whiteout hides the file below it. The layers
 * are hostile: files are opened beneath each directory with no symlink, as
 * regular files of bounded size, without blocking. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "image/build_lookup.h"
#include "image/image_strip.h"

#define MAX_TEXT (4 << 20)

/* Is rel in directory fd a whiteout (a character device 0/0)? */
static bool whiteout_at(int fd, const char *rel)
{
	int p = open_beneath(fd, rel, O_PATH, BENEATH_NO_XDEV);
	struct stat st;
	bool w = p >= 0 && fstat(p, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0);
	if (p >= 0)
		close(p);
	return w;
}

int lookup_read(const int *dirs, size_t n, const char *rel, char **out)
{
	*out = NULL;
	for (size_t i = 0; i < n; i++) {
		if (whiteout_at(dirs[i], rel))
			return -ENOENT;
		int fd = open_beneath(dirs[i], rel, O_RDONLY | O_NONBLOCK, BENEATH_NO_XDEV);
		if (fd == -ENOENT)
			continue;
		if (fd < 0)
			return fd;
		struct stat st;
		int r = fstat(fd, &st) < 0 ? -errno : !S_ISREG(st.st_mode) ? -EINVAL : st.st_size > MAX_TEXT ? -EFBIG : 0;
		char *text = r == 0 ? malloc((size_t) st.st_size + 1) : NULL;
		if (!text) {
			close(fd);
			return r < 0 ? r : -ENOMEM;
		}
		size_t len = 0;
		while (len < (size_t) st.st_size) {
			ssize_t got = read(fd, text + len, (size_t) st.st_size - len);
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0)
				break;
			len += (size_t) got;
		}
		close(fd);
		text[len] = '\0';
		*out = text;
		return 0;
	}
	return -ENOENT;
}

/* The id of `name` in a passwd/group text (field 3), or -1. */
static long id_of(const char *text, const char *name)
{
	size_t nl = strlen(name);
	for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		if (strncmp(line, name, nl) || line[nl] != ':')
			continue;
		const char *f = strchr(line + nl + 1, ':');
		return f && isdigit((unsigned char) f[1]) ? strtol(f + 1, NULL, 10) : -1;
	}
	return -1;
}

/* A user's primary group (field 4), or -1. */
static long group_of(const char *text, const char *name)
{
	size_t nl = strlen(name);
	for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		if (strncmp(line, name, nl) || line[nl] != ':')
			continue;
		const char *f = strchr(line + nl + 1, ':');
		f = f ? strchr(f + 1, ':') : NULL;
		return f && isdigit((unsigned char) f[1]) ? strtol(f + 1, NULL, 10) : -1;
	}
	return -1;
}

static bool all_digits(const char *s)
{
	return *s && strspn(s, "0123456789") == strlen(s) && strlen(s) < 10;
}

int lookup_user(const int *dirs, size_t n, const char *spec, uid_t *uid, gid_t *gid, nsbox_error **err)
{
	char user[256], group[256] = "";
	const char *colon = strchr(spec, ':');
	snprintf(user, sizeof(user), "%.*s", colon ? (int) (colon - spec) : (int) strlen(spec), spec);
	if (colon)
		snprintf(group, sizeof(group), "%s", colon + 1);
	_cleanup_free_ char *passwd = NULL;
	_cleanup_free_ char *groups = NULL;
	(void) lookup_read(dirs, n, "etc/passwd", &passwd);
	(void) lookup_read(dirs, n, "etc/group", &groups);
	long u = all_digits(user) ? strtol(user, NULL, 10) : passwd ? id_of(passwd, user) : -1;
	if (u < 0 || u >= 65536)
		return nsbox_err_invalid(err, "image", "USER '%s': no such user in the image's /etc/passwd (or not "
		                         "below 65536)", spec);
	long g;
	if (*group)
		g = all_digits(group) ? strtol(group, NULL, 10) : groups ? id_of(groups, group) : -1;
	else
		g = all_digits(user) ? u : group_of(passwd, user);
	if (g < 0 || g >= 65536)
		return nsbox_err_invalid(err, "image", "USER '%s': no such group in the image", spec);
	*uid = (uid_t) u;
	*gid = (gid_t) g;
	return 0;
}

/* http(s)://HOST[:PORT]/... into hosts, once each. */
static int add_uri_host(const char *uri, size_t len, strv *hosts)
{
	const char *p = uri;
	size_t skip = !strncmp(p, "http://", 7) ? 7 : !strncmp(p, "https://", 8) ? 8 : 0;
	if (!skip || len <= skip)
		return 0;
	p += skip;
	size_t n = strcspn(p, "/ \t\n]");
	if (n > len - skip)
		n = len - skip;
	const char *at = memchr(p, '@', n);   /* user:password@ */
	if (at) {
		n -= (size_t) (at + 1 - p);
		p = at + 1;
	}
	if (!n || n > 253)
		return 0;
	char *h = strndup(p, n);
	if (!h)
		return -ENOMEM;
	for (size_t i = 0; i < hosts->n; i++)
		if (!strcmp(hosts->v[i], h)) {
			free(h);
			return 0;
		}
	return strv_push_take(hosts, h);
}

/* The URIs of a sources.list (one-line) or .sources (deb822) text. */
static int uris_of(const char *text, strv *hosts)
{
	int r = 0;
	for (const char *line = text; r == 0 && line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		size_t len = strcspn(line, "\n");
		const char *p = line + strspn(line, " \t");
		if (!strncmp(p, "URIs:", 5)) {
			for (p += 5; r == 0 && p < line + len;) {
				p += strspn(p, " \t");
				size_t w = strcspn(p, " \t\n");
				r = add_uri_host(p, w, hosts);
				p += w ? w : 1;
			}
		} else if (!strncmp(p, "deb", 3) && (p[3] == ' ' || p[3] == '\t' || !strncmp(p, "deb-src", 7))) {
			p += strcspn(p, " \t");
			p += strspn(p, " \t");
			if (*p == '[') {   /* [ options ] */
				const char *close = memchr(p, ']', (size_t) (line + len - p));
				p = close ? close + 1 : line + len;
				p += strspn(p, " \t");
			}
			r = add_uri_host(p, (size_t) (line + len - p), hosts);
		}
	}
	return r;
}

/* Names in etc/apt/sources.list.d of every layer and the base (a name a
 * layer whited out is gone from those below it, which lookup_read sees). */
static int list_d(const int *dirs, size_t n, strv *names)
{
	for (size_t i = 0; i < n; i++) {
		int fd = open_beneath(dirs[i], "etc/apt/sources.list.d", O_RDONLY | O_DIRECTORY, BENEATH_NO_XDEV);
		DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
		if (!d) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		struct dirent *e;
		while ((e = readdir(d))) {
			size_t l = strlen(e->d_name);
			bool ours = (l > 5 && !strcmp(e->d_name + l - 5, ".list")) ||
			            (l > 8 && !strcmp(e->d_name + l - 8, ".sources"));
			bool seen = false;
			for (size_t k = 0; k < names->n; k++)
				seen |= !strcmp(names->v[k], e->d_name);
			if (ours && !seen && strv_push(names, e->d_name) < 0) {
				closedir(d);
				return -ENOMEM;
			}
		}
		closedir(d);
	}
	return 0;
}

int lookup_apt_hosts(const int *dirs, size_t n, strv *hosts, nsbox_error **err)
{
	strv names = { 0 };
	int r = list_d(dirs, n, &names);
	char *text = NULL;
	if (r == 0 && lookup_read(dirs, n, "etc/apt/sources.list", &text) == 0)
		r = uris_of(text, hosts);
	free(text);
	for (size_t i = 0; r == 0 && i < names.n; i++) {
		char rel[512];
		snprintf(rel, sizeof(rel), "etc/apt/sources.list.d/%.400s", names.v[i]);
		text = NULL;
		if (lookup_read(dirs, n, rel, &text) == 0)
			r = uris_of(text, hosts);
		free(text);
	}
	strv_clear(&names);
	if (r < 0)
		return nsbox_err(err, -r, "image", "read the image's apt sources");
	if (!hosts->n)
		return nsbox_err_invalid(err, "image", "apt step: the image names no http(s) package archive in "
		                         "/etc/apt/sources.list or sources.list.d");
	return 0;
}
