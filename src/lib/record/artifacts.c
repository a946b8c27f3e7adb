/* Execution artifacts: a directory per run, named <UTC time>-<digest>,
 * holding the result record, the effective policy and (by the store-code
 * policy) the code. Every step is anchored to the artifacts directory's fd:
 * a path planted by someone else (a symlink, a FIFO) is never followed, and
 * what is written is 0600 in 0700 directories. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config/conf.h"
#include "base/error.h"
#include "sandbox/sandbox.h"
#include "base/sha256.h"

/* YYYYmmddTHHMMSS.mmmZ-xxxxxxxxxxxx */
#define NAME_LEN (20 + 1 + 12)

static int write_file(int dfd, const char *name, const char *data, size_t len)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	while (len) {
		ssize_t w = write(fd, data, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		data += w;
		len -= (size_t) w;
	}
	return close(fd) < 0 ? -errno : 0;
}

static bool is_run_dir(const char *n)
{
	if (strlen(n) != NAME_LEN || n[8] != 'T' || n[15] != '.' || n[19] != 'Z' || n[20] != '-')
		return false;
	for (size_t i = 0; i < NAME_LEN; i++)
		if (i != 8 && i != 15 && i != 19 && i != 20 && !strchr("0123456789abcdef", n[i]))
			return false;
	return true;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Remove one run directory: only the plain files we write, then it. */
static void remove_run(int dfd, const char *name)
{
	int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0)
		return;
	DIR *d = fdopendir(sub);
	if (!d) {
		close(sub);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			(void) unlinkat(sub, e->d_name, 0);
	closedir(d);
	(void) unlinkat(dfd, name, AT_REMOVEDIR);
}

/* The UTC time in a run directory's name, in seconds since the epoch
 * (its milliseconds left out), or -1. */
static long long run_time(const char *n)
{
	struct tm tm = { 0 };
	if (sscanf(n, "%4d%2d%2dT%2d%2d%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
	           &tm.tm_sec) != 6)
		return -1;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	time_t t = timegm(&tm);
	return t == (time_t) -1 ? -1 : (long long) t;
}

/* Keep the `keep` newest run directories (names sort by time; 0: all),
 * and none older than max_age_ms (0: any age). */
static void retain(int dfd, unsigned keep, uint64_t max_age_ms)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	char **names = NULL;
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!is_run_dir(e->d_name))
			continue;
		char **v = realloc(names, (n + 1) * sizeof(*v));
		if (!v)
			break;
		names = v;
		if (!(names[n] = strdup(e->d_name)))
			break;
		n++;
	}
	closedir(d);
	if (n)   /* qsort() must not get NULL, even for no element */
		qsort(names, n, sizeof(*names), cmp_names);
	long long now = (long long) time(NULL);
	for (size_t i = 0; i < n; i++) {
		long long t = run_time(names[i]);
		bool old = max_age_ms && t >= 0 && (uint64_t) (now - t) * 1000 > max_age_ms && now > t;
		if ((keep && i + keep < n) || old)
			remove_run(dfd, names[i]);
		free(names[i]);
	}
	free(names);
}

static bool run_failed(const nsbox_result *r)
{
	return r->status != NSBOX_STATUS_EXITED || r->exit_code != 0 || r->error;
}

static int store_in(int sub, const nsbox_result *r, const char *store_code)
{
	char *json = NULL, *yaml = NULL;
	int ret = nsbox_result_to_json(r, &json, NULL);
	if (ret == 0)
		ret = write_file(sub, "result.json", json, strlen(json));
	if (ret == 0 && r->cfg && nsbox_config_to_yaml(r->cfg, &yaml, NULL) == 0)
		ret = write_file(sub, "policy.yaml", yaml, strlen(yaml));
	free(json);
	free(yaml);
	bool code = !strcmp(store_code, "always") || (!strcmp(store_code, "on_error") && run_failed(r));
	for (size_t i = 0; ret == 0 && code && r->cfg && i < r->cfg->n_files; i++) {
		/* The base name of the file as the sandbox saw it, when plain;
		 * else a numbered name. */
		const char *base = strrchr(r->cfg->files[i].path, '/');
		base = base ? base + 1 : r->cfg->files[i].path;
		char name[64];
		if (!*base || !strcmp(base, ".") || !strcmp(base, "..") || strlen(base) > 40 ||
		    !strcmp(base, "result.json") || !strcmp(base, "policy.yaml"))
			snprintf(name, sizeof(name), "code-%zu", i);
		else
			snprintf(name, sizeof(name), "code-%s", base);
		ret = write_file(sub, name, r->cfg->files[i].data, r->cfg->files[i].len);
	}
	return ret;
}

int nsbox_artifacts_store(const char *dir, const nsbox_result *r, const char *store_code, unsigned keep,
                          char **path, nsbox_error **err)
{
	return artifacts_store(dir, r, store_code, keep, 0, path, err);
}

int artifacts_store(const char *dir, const nsbox_result *r, const char *store_code, unsigned keep,
                    uint64_t max_age_ms, char **path, nsbox_error **err)
{
	if (!dir || !r || !store_code ||
	    (strcmp(store_code, "always") && strcmp(store_code, "on_error") && strcmp(store_code, "never")))
		return nsbox_err(err, EINVAL, "artifacts", "store artifacts: missing or invalid argument");
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return nsbox_err(err, errno, "artifacts", "create artifacts directory '%s'", dir);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return nsbox_err(err, errno, "artifacts", "open artifacts directory '%s'", dir);
	struct stat st;
	/* Someone else's directory, or one others may write to, could be
	 * made to hold what they choose next to our runs: refuse it. */
	if (fstat(dfd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 022)) {
		close(dfd);
		return nsbox_err(err, EPERM, "artifacts",
		                 "open artifacts directory '%s': not owned by this user, or writable by others", dir);
	}
	struct timespec ts;
	struct tm tm;
	(void) clock_gettime(CLOCK_REALTIME, &ts);
	(void) gmtime_r(&ts.tv_sec, &tm);
	char hex[65], name[128];
	sha256_hex(r->id, strlen(r->id), hex);
	snprintf(name, sizeof(name), "%04d%02d%02dT%02d%02d%02d.%03ldZ-%.12s", tm.tm_year + 1900, tm.tm_mon + 1,
	         tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, hex);
	if (mkdirat(dfd, name, 0700) < 0) {
		int e = errno;
		close(dfd);
		return nsbox_err(err, e, "artifacts", "create '%s' in '%s'", name, dir);
	}
	int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int ret = sub < 0 ? -errno : store_in(sub, r, store_code);
	if (sub >= 0)
		close(sub);
	if (ret < 0) {
		/* A half-written run directory (a full file system) would pass
		 * for a run's record, and count against the kept ones: gone. */
		remove_run(dfd, name);
		close(dfd);
		return nsbox_err(err, -ret, "artifacts", "write artifacts in '%s/%s'", dir, name);
	}
	if (keep || max_age_ms)
		retain(dfd, keep, max_age_ms);
	close(dfd);
	if (path && asprintf(path, "%s/%s", dir, name) < 0)
		*path = NULL;
	return 0;
}
