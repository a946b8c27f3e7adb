#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "base/cleanup.h"
#include "base/error.h"

/* ---- small file helpers -------------------------------------------------- */

static int read_file(const char *dir, const char *file, char *buf, size_t len)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, len - 1);
	int e = errno;
	close(fd);
	if (n < 0)
		return -e;
	buf[n] = '\0';
	return (int) n;
}

int cg_read_u64(const char *dir, const char *file, uint64_t *out)
{
	char buf[64];
	int r = read_file(dir, file, buf, sizeof(buf));
	if (r < 0)
		return r;
	if (!strncmp(buf, "max", 3)) {
		*out = UINT64_MAX;
		return 0;
	}
	char *e;
	*out = strtoull(buf, &e, 10);
	return e == buf ? -EINVAL : 0;
}

static int find_key(const char *buf, const char *key, uint64_t *out)
{
	size_t k = strlen(key);
	for (const char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
		if (!strncmp(line, key, k) && line[k] == ' ') {
			*out = strtoull(line + k + 1, NULL, 10);
			return 0;
		}
	return -ENOENT;
}

int cg_read_key(const char *dir, const char *file, const char *key, uint64_t *out)
{
	char buf[4096];
	int r = read_file(dir, file, buf, sizeof(buf));
	return r < 0 ? r : find_key(buf, key, out);
}

int cg_read_keys2(const char *dir, const char *file, const char *k1, uint64_t *v1, const char *k2, uint64_t *v2)
{
	char buf[4096];
	int r = read_file(dir, file, buf, sizeof(buf));
	return r < 0 ? r : find_key(buf, k1, v1) ?: find_key(buf, k2, v2);
}

/* ---- probing ------------------------------------------------------------- */

/* One pass over /proc/self/mountinfo and one over /proc/self/cgroup give
 * every hierarchy's mount and our place in it (probing runs on every
 * launch, so it reads each file once). Index CG_N is cgroup v2. */
typedef struct hier {
	char point[PATH_MAX];
	char root[PATH_MAX];
	char own[PATH_MAX];
	bool mounted, member;
} hier;

static const char *const v1_names_all[CG_N] = { "memory", "pids", "cpu", "cpuacct", "freezer" };

static void scan_mounts(const char *mountinfo, hier h[CG_N + 1])
{
	FILE *f = fopen(mountinfo, "re");
	if (!f)
		return;
	char line[4096];
	while (fgets(line, sizeof(line), f)) {
		char root[PATH_MAX], point[PATH_MAX], fstype[64], source[256], opts[1024];
		char *sep = strstr(line, " - ");
		if (!sep || sscanf(line, "%*s %*s %*s %4095s %4095s", root, point) != 2 ||
		    sscanf(sep + 3, "%63s %255s %1023s", fstype, source, opts) != 3)
			continue;
		int idx[CG_N + 1], n = 0;
		if (!strcmp(fstype, "cgroup2")) {
			idx[n++] = CG_N;
		} else if (!strcmp(fstype, "cgroup")) {
			for (char *save = NULL, *o = strtok_r(opts, ",", &save); o; o = strtok_r(NULL, ",", &save))
				for (int i = 0; i < CG_N; i++)
					if (!strcmp(o, v1_names_all[i]))
						idx[n++] = i;
		}
		for (int k = 0; k < n; k++)
			if (!h[idx[k]].mounted) {
				h[idx[k]].mounted = true;
				snprintf(h[idx[k]].point, PATH_MAX, "%s", point);
				snprintf(h[idx[k]].root, PATH_MAX, "%s", root);
			}
	}
	fclose(f);
}

static void scan_membership(const char *cgroup_file, hier h[CG_N + 1])
{
	FILE *f = fopen(cgroup_file, "re");
	if (!f)
		return;
	char line[4096];
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c1 = *c2 = '\0';
		const char *path = c2 + 1;
		if (!strcmp(line, "0") && c2 == c1 + 1) {
			h[CG_N].member = true;
			snprintf(h[CG_N].own, PATH_MAX, "%s", path);
			continue;
		}
		for (char *save = NULL, *o = strtok_r(c1 + 1, ",", &save); o; o = strtok_r(NULL, ",", &save))
			for (int i = 0; i < CG_N; i++)
				if (!strcmp(o, v1_names_all[i])) {
					h[i].member = true;
					snprintf(h[i].own, PATH_MAX, "%s", path);
				}
	}
	fclose(f);
}

/* The directory of our own cgroup in hierarchy `x`. */
static char *own_dir(const hier *x)
{
	if (!x->mounted || !x->member)
		return NULL;
	/* The mount may show only part of the hierarchy (its root field). */
	size_t rl = strlen(x->root);
	const char *rel = x->own;
	if (strcmp(x->root, "/") && !strncmp(rel, x->root, rl))
		rel += rl;
	char *dir = NULL;
	if (asprintf(&dir, "%s%s%s", x->point, *rel == '/' ? "" : "/", strcmp(rel, "/") ? rel : "") < 0)
		return NULL;
	return dir;
}

static bool has_words(const char *have, const char *const *want, size_t n, const char **missing)
{
	for (size_t i = 0; i < n; i++) {
		bool ok = false;
		size_t l = strlen(want[i]);
		for (const char *p = have; (p = strstr(p, want[i])); p += l)
			if ((p == have || isspace((unsigned char) p[-1])) &&
			    (!p[l] || isspace((unsigned char) p[l])))
				ok = true;
		if (!ok) {
			*missing = want[i];
			return false;
		}
	}
	return true;
}

static const char *const v2_controllers[] = { "memory", "pids", "cpu" };

static bool probe_v2(const char *parent, const hier *all, cg_host *h)
{
	h->v2_mounted = all[CG_N].mounted;
	_cleanup_free_ char *dir = parent ? strdup(parent) : own_dir(&all[CG_N]);
	if (!dir) {
		snprintf(h->reason, sizeof(h->reason), "%s", h->v2_mounted
		         ? "cannot find our own cgroup v2 directory" : "cgroup v2 is not mounted");
		return false;
	}
	char ctrl[512];
	int r = read_file(dir, "cgroup.controllers", ctrl, sizeof(ctrl));
	const char *missing = NULL;
	if (r < 0) {
		snprintf(h->reason, sizeof(h->reason), "read '%s/cgroup.controllers': %s", dir, strerror(-r));
		return false;
	}
	if (!has_words(ctrl, v2_controllers, ARRAY_SIZE(v2_controllers), &missing)) {
		snprintf(h->reason, sizeof(h->reason),
		         "the cgroup v2 directory '%s' does not offer the %s controller", dir, missing);
		return false;
	}
	if (access(dir, W_OK) < 0) {
		snprintf(h->reason, sizeof(h->reason),
		         "the cgroup v2 directory '%s' is not delegated to us (not writable)", dir);
		return false;
	}
	h->driver = CG_V2;
	h->parent[0] = TAKE_PTR(dir);
	return true;
}

static bool probe_v1(const hier *all, cg_host *h)
{
	char *dirs[CG_N] = { 0 };
	for (int i = 0; i < CG_N; i++) {
		dirs[i] = own_dir(&all[i]);
		const char *why = !dirs[i] ? "is not mounted" : access(dirs[i], W_OK) < 0 ? "is not writable" : NULL;
		if (why && (i == CG_CPUACCT || i == CG_FREEZER)) {
			/* Optional: CPU times also come from the kernel's rusage;
			 * without a freezer, a sandbox cannot be paused. */
			free(dirs[i]);
			dirs[i] = NULL;
		} else if (why) {
			snprintf(h->reason + strlen(h->reason), sizeof(h->reason) - strlen(h->reason),
			         "%sthe cgroup v1 %s hierarchy%s%s%s %s", *h->reason ? "; " : "", v1_names_all[i],
			         dirs[i] ? " ('" : "", dirs[i] ? dirs[i] : "", dirs[i] ? "')" : "", why);
			for (int j = 0; j <= i; j++)
				free(dirs[j]);
			return false;
		}
	}
	h->driver = CG_V1;
	memcpy(h->parent, dirs, sizeof(dirs));
	return true;
}

void cgroup_probe(const char *parent, cg_host *h)
{
	cgroup_probe_files("/proc/self/mountinfo", "/proc/self/cgroup", parent, h);
}

void cgroup_probe_files(const char *mountinfo, const char *cgroup_file, const char *parent,
                        cg_host *h)
{
	*h = (cg_host){ 0 };
	hier *all = calloc(CG_N + 1, sizeof(*all));
	if (!all) {
		snprintf(h->reason, sizeof(h->reason), "out of memory");
		return;
	}
	scan_mounts(mountinfo, all);
	scan_membership(cgroup_file, all);
	bool done = probe_v2(parent, all, h) || parent;
	if (done) {
		free(all);
		return;
	}
	char v2_reason[sizeof(h->reason)];
	snprintf(v2_reason, sizeof(v2_reason), "%s", h->reason);
	h->reason[0] = '\0';
	done = probe_v1(all, h);
	free(all);
	if (done)
		return;
	char v1_reason[sizeof(h->reason)];
	snprintf(v1_reason, sizeof(v1_reason), "%s", h->reason);
	snprintf(h->reason, sizeof(h->reason), "%.500s; %.500s", v2_reason, v1_reason);
}

void cgroup_host_free(cg_host *h)
{
	for (int i = 0; i < CG_N; i++) {
		free(h->parent[i]);
		h->parent[i] = NULL;
	}
}
